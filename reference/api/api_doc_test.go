package api_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/reference/api"
)

// docExample is one example of docs/api.md: a request and the response
// it must get.
type docExample struct {
	line int // of the request block, for messages

	method, target string
	reqHeader      [][2]string
	reqBody        string

	kind      string // "json" or "text"
	status    int
	resHeader [][2]string
	resBody   string
}

func (e *docExample) String() string {
	return fmt.Sprintf("api.md:%d %s %s", e.line, e.method, e.target)
}

// parseDocExamples reads the examples of a document written in the
// convention docs/api.md describes at its top.
func parseDocExamples(t *testing.T, doc string) []*docExample {
	t.Helper()
	type block struct {
		line int
		info string
		text []string
	}
	var blocks []block
	sc := bufio.NewScanner(strings.NewReader(doc))
	var cur *block
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(l, "```"):
			cur = &block{line: n, info: strings.TrimSpace(strings.TrimPrefix(l, "```"))}
		case cur != nil && strings.TrimSpace(l) == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.text = append(cur.text, l)
		}
	}
	require.NoError(t, sc.Err())
	require.Nil(t, cur, "api.md: a fenced block is not closed")

	var out []*docExample
	for i := 0; i < len(blocks); i++ {
		b := blocks[i]
		if b.info != "http" {
			continue
		}
		e := &docExample{line: b.line}
		require.NotEmpty(t, b.text, "api.md:%d: an empty request", b.line)
		var ok bool
		e.method, e.target, ok = strings.Cut(b.text[0], " ")
		require.True(t, ok, "api.md:%d: the request's first line is \"METHOD /path\", got %q", b.line, b.text[0])
		e.reqHeader, e.reqBody = headerAndBody(t, b.line, b.text[1:])

		require.Less(t, i+1, len(blocks), "api.md:%d: the request has no response block after it", b.line)
		r := blocks[i+1]
		i++
		require.Contains(t, []string{"json", "text"}, r.info, "api.md:%d: a request is followed by a json or text response block, got %q", r.line, r.info)
		e.kind = r.info
		require.NotEmpty(t, r.text, "api.md:%d: an empty response", r.line)
		m := regexp.MustCompile(`^HTTP/1\.1 (\d{3}) `).FindStringSubmatch(r.text[0])
		require.NotNil(t, m, "api.md:%d: the response's first line is \"HTTP/1.1 <code> <reason>\", got %q", r.line, r.text[0])
		e.status, _ = strconv.Atoi(m[1])
		e.resHeader, e.resBody = headerAndBody(t, r.line, r.text[1:])
		out = append(out, e)
	}
	return out
}

// headerAndBody splits the lines after a first line into headers, up to
// a blank line, and the body after it.
func headerAndBody(t *testing.T, line int, lines []string) ([][2]string, string) {
	var header [][2]string
	for len(lines) > 0 && lines[0] != "" {
		k, v, ok := strings.Cut(lines[0], ": ")
		require.True(t, ok, "api.md:%d: a header line is \"Name: value\", got %q", line, lines[0])
		header = append(header, [2]string{k, v})
		lines = lines[1:]
	}
	if len(lines) > 0 {
		lines = lines[1:]
	}
	return header, strings.Join(lines, "\n")
}

// placeholder matches a JSON string that stands for any value: "<...>".
var placeholder = regexp.MustCompile(`^<[^<>]+>$`)

// matchJSON compares got with want, in which a placeholder string matches
// any value; objects must have the same members, arrays the same length.
func matchJSON(want, got any, path string) []string {
	if s, ok := want.(string); ok && placeholder.MatchString(s) {
		return nil
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: want an object, got %v", path, got)}
		}
		var diffs []string
		for k := range w {
			if _, ok := g[k]; !ok {
				diffs = append(diffs, fmt.Sprintf("%s.%s: missing from the answer", path, k))
			}
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				diffs = append(diffs, fmt.Sprintf("%s.%s: in the answer (%v) but not in the document", path, k, g[k]))
			}
		}
		for k := range w {
			if _, ok := g[k]; ok {
				diffs = append(diffs, matchJSON(w[k], g[k], path+"."+k)...)
			}
		}
		slices.Sort(diffs)
		return diffs
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: want %d elements, got %v", path, len(w), got)}
		}
		var diffs []string
		for i := range w {
			diffs = append(diffs, matchJSON(w[i], g[i], fmt.Sprintf("%s[%d]", path, i))...)
		}
		return diffs
	}
	if fmt.Sprint(want) != fmt.Sprint(got) {
		return []string{fmt.Sprintf("%s: want %v, got %v", path, want, got)}
	}
	return nil
}

func decodeJSON(t *testing.T, what, s string) any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	require.NoError(t, d.Decode(&v), "%s is not JSON:\n%s", what, s)
	return v
}

func readAPIDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "api.md"))
	require.NoError(t, err)
	return string(b)
}

// TestAPIDoc executes the examples of docs/api.md in order against the
// documented fixture and checks each answer: a doc that drifts from the
// API fails here.
func TestAPIDoc(t *testing.T) {
	t.Parallel()
	examples := parseDocExamples(t, readAPIDoc(t))
	require.GreaterOrEqual(t, len(examples), 10, "the document has its examples")
	f := documented(t, api.Config{})
	routes := map[string]bool{}
	for _, e := range examples {
		req := httptest.NewRequestWithContext(t.Context(), e.method, e.target, strings.NewReader(e.reqBody))
		for _, h := range e.reqHeader {
			// <token> stands for the fixture's admin token.
			req.Header.Add(h[0], strings.NewReplacer("<token>", f.admin, "<reader-token>", f.reader).Replace(h[1]))
		}
		rec := httptest.NewRecorder()
		f.api.ServeHTTP(rec, req)
		require.Equal(t, e.status, rec.Code, "%s: status; body %s", e, rec.Body)
		for _, h := range e.resHeader {
			require.Equal(t, h[1], rec.Header().Get(h[0]), "%s: header %s", e, h[0])
		}
		switch e.kind {
		case "json":
			require.Equal(t, "application/json", rec.Header().Get("Content-Type"), "%s", e)
			diffs := matchJSON(decodeJSON(t, e.String(), e.resBody), decodeJSON(t, "the answer", rec.Body.String()), "$")
			require.Empty(t, diffs, "%s: the answer differs from the document:\n%s", e, rec.Body)
		case "text":
			require.Equal(t, strings.TrimRight(e.resBody, "\n"), strings.TrimRight(rec.Body.String(), "\n"), "%s: body", e)
		}
		routes[e.method+" "+routePath(e.target)] = true
	}
	for _, r := range []string{
		"GET /healthz", "GET /readyz", "GET /api/v1/runs", "GET /api/v1/runs/{run}", "GET /api/v1/runs/{run}/jobs/{job}",
		"POST /api/v1/runs/{run}/cancel", "POST /api/v1/runs/{run}/retry", "GET /api/v1/runs/{run}/jobs/{job}/log",
		"GET /api/v1/runs/{run}/jobs/{job}/log/follow", "GET /api/v1/runs/{run}/jobs/{job}/why", "POST /api/v1/runs/{run}/jobs/{job}/start",
		"POST /api/v1/runs/{run}/jobs/{job}/approve", "POST /api/v1/runs/{run}/jobs/{job}/reject",
		"GET /api/v1/runs/{run}/artifacts", "GET /api/v1/runs/{run}/artifacts/{artifact}/download",
		"GET /api/v1/secrets", "PUT /api/v1/secrets/{secret}", "DELETE /api/v1/secrets/{secret}",
		"GET /api/v1/me", "POST /api/v1/tokens", "POST /api/v1/service-accounts", "GET /api/v1/roles", "POST /api/v1/roles",
		"DELETE /api/v1/roles", "GET /api/v1/audit",
	} {
		require.True(t, routes[r], "the document has an example of %s", r)
	}
}

// routePath is target's path with run, job, artifact and secret IDs
// replaced by {run}, {job}, {artifact} and {secret}.
func routePath(target string) string {
	p, _, _ := strings.Cut(target, "?")
	parts := strings.Split(p, "/")
	for i := range parts {
		if i > 0 && (parts[i-1] == "runs" || parts[i-1] == "jobs" || parts[i-1] == "artifacts" || parts[i-1] == "secrets") && parts[i] != "" {
			parts[i] = "{" + strings.TrimSuffix(parts[i-1], "s") + "}"
		}
	}
	return strings.Join(parts, "/")
}

// TestAPIDocDrift checks that the doc test catches drift: a changed
// value, a renamed or missing field and a wrong status all fail, and
// placeholders match anything.
func TestAPIDocDrift(t *testing.T) {
	t.Parallel()
	got := decodeJSON(t, "answer", `{"id":"run-1","n":2,"jobs":[{"state":"running"}],"at":"2026-03-02T10:00:00Z"}`)
	require.Empty(t, matchJSON(decodeJSON(t, "doc", `{"id":"<run-id>","n":2,"jobs":[{"state":"running"}],"at":"<time>"}`), got, "$"))
	for _, doc := range []string{
		`{"id":"run-1","n":3,"jobs":[{"state":"running"}],"at":"<time>"}`,
		`{"id":"run-1","n":2,"jobs":[{"state":"pending"}],"at":"<time>"}`,
		`{"id":"run-1","n":2,"jobs":[{"state":"running"}]}`,
		`{"id":"run-1","n":2,"jobs":[{"state":"running"}],"at":"<time>","extra":1}`,
		`{"id":"run-1","n":2,"jobs":[],"at":"<time>"}`,
		`{"ID":"run-1","n":2,"jobs":[{"state":"running"}],"at":"<time>"}`,
	} {
		require.NotEmpty(t, matchJSON(decodeJSON(t, "doc", doc), got, "$"), "%s", doc)
	}

	doc := "```http\nGET /healthz\n```\n\n```json\nHTTP/1.1 200 OK\nX-Test: 1\n\n{\"status\":\"ok\"}\n```\n" +
		"```http\nPOST /api/v1/runs/r/cancel\nIdempotency-Key: k\n\nbody\n```\n```text\nHTTP/1.1 404 Not Found\n\nno\n```\n"
	examples := parseDocExamples(t, doc)
	require.Len(t, examples, 2)
	require.Equal(t, &docExample{line: 1, method: "GET", target: "/healthz", kind: "json", status: 200,
		resHeader: [][2]string{{"X-Test", "1"}}, resBody: `{"status":"ok"}`}, examples[0])
	require.Equal(t, &docExample{line: 11, method: "POST", target: "/api/v1/runs/r/cancel", reqHeader: [][2]string{{"Idempotency-Key", "k"}},
		reqBody: "body", kind: "text", status: 404, resBody: "no"}, examples[1])
	require.Equal(t, "/api/v1/runs/{run}/jobs/{job}/log", routePath("/api/v1/runs/run-1/jobs/unit/log?attempt=1"))
	require.Equal(t, "/api/v1/runs/{run}/artifacts/{artifact}/download", routePath("/api/v1/runs/run-1/artifacts/art-1/download"))
}
