package api

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/cikit/cikit/internal/typo"
)

// validText reports whether s can be an ID, a filter or a cursor of the
// store: UTF-8 without NUL bytes, which PostgreSQL's text requires and
// which every run and job ID is.
func validText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// pathIDs checks the path values names of r (such as "run" and "job"):
// one that is not UTF-8 without NUL bytes names nothing and is answered
// 400 with the parameter as the field, before the store is asked. It
// reports whether all are valid.
func pathIDs(w http.ResponseWriter, r *http.Request, names ...string) bool {
	for _, name := range names {
		if v := r.PathValue(name); !validText(v) {
			writeFieldError(w, http.StatusBadRequest, name, fmt.Sprintf("the %s ID %q is not UTF-8 without NUL bytes", name, v))
			return false
		}
	}
	return true
}

// queryParams parses r's query strictly and returns its parameters,
// each given at most once, among allowed (none when allowed is empty).
// It answers 400, naming the parameter as the field, and returns false,
// for a query url.ParseQuery refuses (a ';' separator, a bad escape:
// r.URL.Query drops such pairs silently), an unknown parameter (with the
// nearest known name as a hint), a parameter given twice, and a value
// that is not UTF-8 without NUL bytes.
func queryParams(w http.ResponseWriter, r *http.Request, allowed ...string) (map[string]string, bool) {
	raw := r.URL.RawQuery
	q, err := url.ParseQuery(raw)
	if err != nil {
		field := malformedPair(raw)
		writeFieldError(w, http.StatusBadRequest, field, fmt.Sprintf("the query is malformed at parameter %q: %v; separate parameters with '&' and escape ';', '%%' and '&' in values", field, err))
		return nil, false
	}
	out := make(map[string]string, len(q))
	for _, name := range slices.Sorted(maps.Keys(q)) {
		values := q[name]
		if !slices.Contains(allowed, name) {
			msg := fmt.Sprintf("unknown query parameter %q", name)
			switch hint := typo.Nearest(name, allowed, true, nil); {
			case hint != "":
				msg += fmt.Sprintf("; did you mean %q?", hint)
			case len(allowed) == 0:
				msg += "; this route takes none"
			default:
				msg += "; this route takes " + strings.Join(allowed, ", ")
			}
			writeFieldError(w, http.StatusBadRequest, name, msg)
			return nil, false
		}
		if len(values) > 1 {
			writeFieldError(w, http.StatusBadRequest, name, fmt.Sprintf("the query parameter %q is given %d times; give it once", name, len(values)))
			return nil, false
		}
		if !validText(values[0]) {
			writeFieldError(w, http.StatusBadRequest, name, fmt.Sprintf("the query parameter %q is not UTF-8 without NUL bytes", name))
			return nil, false
		}
		out[name] = values[0]
	}
	return out, true
}

// malformedPair returns the name of the first pair of a raw query that
// url.ParseQuery refuses, unescaped when it can be.
func malformedPair(raw string) string {
	for pair := range strings.SplitSeq(raw, "&") {
		key, value, _ := strings.Cut(pair, "=")
		_, kerr := url.QueryUnescape(key)
		_, verr := url.QueryUnescape(value)
		if !strings.Contains(pair, ";") && kerr == nil && verr == nil {
			continue
		}
		key, _, _ = strings.Cut(key, ";")
		if k, err := url.QueryUnescape(key); err == nil {
			return k
		}
		return key
	}
	return ""
}
