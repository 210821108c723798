package expr

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// RenderCacheKey renders a cache key of the native format, in which the
// compiler leaves only hash templates: it replaces every
// {{ hash("go.sum", "vendor/**") }} in key by what hash returns for that
// template's globs, in order, and keeps the text around them. A template
// runs from {{ to the first }}; spaces inside it are ignored.
//
// It fails, naming the template, on an unterminated {{, on a template
// other than hash(…), and on a malformed hash call (see ParseHashCall);
// an error of hash is returned wrapped. A key without {{ is returned as
// it is, without calling hash.
func RenderCacheKey(key string, hash func(globs []string) (string, error)) (string, error) {
	if !strings.Contains(key, "{{") {
		return key, nil
	}
	var out strings.Builder
	rest := key
	for {
		i := strings.Index(rest, "{{")
		if i < 0 {
			out.WriteString(rest)
			return out.String(), nil
		}
		out.WriteString(rest[:i])
		end := strings.Index(rest[i:], "}}")
		if end < 0 {
			return "", fmt.Errorf("unterminated {{ in cache key %q: close it with }}", key)
		}
		call := strings.TrimSpace(rest[i+2 : i+end])
		rest = rest[i+end+2:]
		globs, err := ParseHashCall(call)
		if err != nil {
			return "", fmt.Errorf("{{ %s }} in cache key %q: %w", call, key, err)
		}
		h, err := hash(globs)
		if err != nil {
			return "", fmt.Errorf("{{ %s }} in cache key %q: %w", call, key, err)
		}
		out.WriteString(h)
	}
}

// ErrNotHashCall is returned by ParseHashCall for text that is not a
// call of hash at all, as opposed to a malformed one.
var ErrNotHashCall = errors.New(`not a hash call: write hash("path/glob", …)`)

// ParseHashCall parses the text of a cache key template,
// hash("go.sum", "vendor/**"), into its globs: one or more non-empty
// double-quoted Go strings separated by commas (a comma after the last
// is allowed), with spaces around them. Text that does not start with "hash(" is ErrNotHashCall;
// any other malformation is an error that says what is expected.
func ParseHashCall(call string) ([]string, error) {
	inner, ok := strings.CutPrefix(call, "hash(")
	if !ok {
		return nil, ErrNotHashCall
	}
	inner, ok = strings.CutSuffix(inner, ")")
	if !ok {
		return nil, errors.New(`close the call with ")": write hash("path/glob", …)`)
	}
	inner = strings.TrimSpace(inner)
	if inner == "" {
		return nil, errors.New("hash needs at least one file or glob")
	}
	var globs []string
	for inner != "" {
		q, err := strconv.QuotedPrefix(inner)
		if err != nil || !strings.HasPrefix(q, `"`) {
			return nil, fmt.Errorf("the arguments of hash must be double-quoted strings, got %s", inner)
		}
		g, err := strconv.Unquote(q)
		if err != nil {
			return nil, fmt.Errorf("the arguments of hash must be double-quoted strings, got %s", q)
		}
		if g == "" {
			return nil, errors.New("hash of an empty path")
		}
		globs = append(globs, g)
		inner = strings.TrimSpace(inner[len(q):])
		if inner != "" {
			var found bool
			if inner, found = strings.CutPrefix(inner, ","); !found {
				return nil, errors.New("separate the arguments of hash with commas")
			}
			inner = strings.TrimSpace(inner)
		}
	}
	return globs, nil
}
