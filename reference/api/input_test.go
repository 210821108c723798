package api_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/internal/pgtest"
	"github.com/cikit/cikit/internal/syncbuf"
	"github.com/cikit/cikit/logs"
	"github.com/cikit/cikit/reference/api"
)

// fieldError is the API's error body.
type fieldError struct {
	Error string `json:"error"`
	Field string `json:"field"`
}

// requireFieldError requires a 400 JSON error naming field whose message
// contains msg.
func requireFieldError(t *testing.T, rec *httptest.ResponseRecorder, field, msg string) {
	t.Helper()
	e := decode[fieldError](t, rec, http.StatusBadRequest)
	require.Equal(t, field, e.Field, "%s", rec.Body)
	require.Contains(t, e.Error, msg)
}

// inputStores are the stores bad input is tried on.
var inputStores = []struct {
	name string
	new  func(t *testing.T) dag.Store
}{
	{"memory", func(t *testing.T) dag.Store { return dag.NewMemoryStore(dag.MemoryConfig{}) }},
	{"postgres", func(t *testing.T) dag.Store {
		s, err := dag.NewPostgresStore(dag.PostgresConfig{Pool: pgtest.New(t).Pool})
		require.NoError(t, err)
		require.NoError(t, s.Migrate(t.Context()))
		return s
	}},
}

// badInputAPI returns an API over store with one run of fanOut, the run,
// and the log the API writes.
func badInputAPI(t *testing.T, store dag.Store) (http.Handler, *dag.Run, *syncbuf.Buffer) {
	t.Helper()
	run, err := store.RunCreate(context.Background(), &dag.RunCreateParams{Pipeline: "acme/api:.cikit.yml", Branch: "main", Jobs: fanOut()})
	require.NoError(t, err)
	hub, err := logs.NewHub(logs.Config{Sink: &logs.MemorySink{}, Segments: &logs.MemorySegmentStore{}, Logger: discard()})
	require.NoError(t, err)
	var logged syncbuf.Buffer
	access, token := newAccess(t)
	a, err := api.New(api.Config{Runs: store, Logs: hub, Why: whyFixture(store), Access: access,
		Logger: slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	require.NoError(t, err)
	t.Cleanup(a.CloseFollowers)
	return asUser(a, token), run, &logged
}

func serve(t *testing.T, a http.Handler, method, target string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), method, target, strings.NewReader("")))
	return rec
}

// TestBadPathIDs: a run or job ID that no store can hold (a NUL byte,
// invalid UTF-8) is a 400 naming the path parameter, on every route and
// on both stores, and never reaches the store: nothing is logged. (Before,
// PostgreSQL refused it and the API answered 503 and logged an ERROR.)
func TestBadPathIDs(t *testing.T) {
	t.Parallel()
	for _, s := range inputStores {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			a, run, logged := badInputAPI(t, s.new(t))
			for _, bad := range []string{"%00", "%FF", "a%00b"} {
				for _, r := range []struct{ method, path, field string }{
					{"GET", "/api/v1/runs/" + bad, "run"},
					{"POST", "/api/v1/runs/" + bad + "/cancel", "run"},
					{"POST", "/api/v1/runs/" + bad + "/retry", "run"},
					{"GET", "/api/v1/runs/" + bad + "/jobs/build", "run"},
					{"GET", "/api/v1/runs/" + bad + "/jobs/build/why", "run"},
					{"GET", "/api/v1/runs/" + bad + "/jobs/build/log", "run"},
					{"GET", "/api/v1/runs/" + bad + "/jobs/build/log/follow", "run"},
					{"GET", "/api/v1/runs/" + run.ID + "/jobs/" + bad, "job"},
					{"GET", "/api/v1/runs/" + run.ID + "/jobs/" + bad + "/why", "job"},
					{"GET", "/api/v1/runs/" + run.ID + "/jobs/" + bad + "/log", "job"},
					{"GET", "/api/v1/runs/" + run.ID + "/jobs/" + bad + "/log/follow", "job"},
				} {
					requireFieldError(t, serve(t, a, r.method, r.path), r.field, "is not UTF-8 without NUL bytes")
				}
			}
			require.Empty(t, logged.String(), "bad input is not the platform's failure")
			rec := serve(t, a, "GET", "/api/v1/runs/"+run.ID+"/jobs/build")
			require.Equal(t, http.StatusOK, rec.Code, "%s", rec.Body)
		})
	}
}

// TestBadQueries: on every route, a query that does not parse, an
// unknown parameter, a parameter given twice and a value no store can
// hold are each a 400 naming the parameter, on both stores; nothing of
// it is dropped silently. (Before, ?pipeline=x;y was dropped by
// r.URL.Query() and every run was listed, and unknown parameters were
// ignored.)
func TestBadQueries(t *testing.T) {
	t.Parallel()
	for _, s := range inputStores {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			a, run, logged := badInputAPI(t, s.new(t))
			job := "/api/v1/runs/" + run.ID + "/jobs/build"
			for _, c := range []struct {
				method, target, field, msg string
			}{
				{"GET", "/api/v1/runs?pipeline=x;y", "pipeline", "invalid semicolon separator"},
				{"GET", "/api/v1/runs?branch=main;limit=1", "branch", "invalid semicolon separator"},
				{"GET", "/api/v1/runs?branch=%zz", "branch", "invalid URL escape"},
				{"GET", "/api/v1/runs?brnach=main", "brnach", `did you mean "branch"?`},
				{"GET", "/api/v1/runs?state=failed", "state", "this route takes limit, before, pipeline, branch"},
				{"GET", "/api/v1/runs?branch=main&branch=dev", "branch", "given 2 times"},
				{"GET", "/api/v1/runs?limit=1&limit=2", "limit", "given 2 times"},
				{"GET", "/api/v1/runs?pipeline=%00", "pipeline", "not UTF-8 without NUL bytes"},
				{"GET", "/api/v1/runs?branch=%FF", "branch", "not UTF-8 without NUL bytes"},
				{"GET", "/api/v1/runs?limit=x", "limit", "is not a number"},
				{"GET", "/api/v1/runs?before=!!", "before", "not a cursor"},
				{"GET", "/api/v1/runs?before=" + api.EncodeCursor(&dag.RunCursor{CreatedAt: run.CreatedAt, ID: "a\x00"}), "before", "not a cursor"},
				{"GET", "/api/v1/runs/" + run.ID + "?verbose=1", "verbose", "this route takes none"},
				{"POST", "/api/v1/runs/" + run.ID + "/cancel?force=1", "force", "this route takes none"},
				{"POST", "/api/v1/runs/" + run.ID + "/retry?all=1", "all", "this route takes none"},
				{"GET", job + "?attempt=1", "attempt", "this route takes none"},
				{"GET", job + "/why?x=1", "x", "this route takes none"},
				{"GET", job + "/log?attempts=1", "attempts", `did you mean "attempt"?`},
				{"GET", job + "/log?attempt=1&attempt=1", "attempt", "given 2 times"},
				{"GET", job + "/log?attempt=0", "attempt", "is not a number from 1"},
				{"GET", job + "/log?offset=1", "offset", "this route takes attempt"},
				{"GET", job + "/log/follow?ofset=1", "ofset", `did you mean "offset"?`},
				{"GET", job + "/log/follow?attempt=1;offset=2", "attempt", "invalid semicolon separator"},
				{"GET", "/healthz?probe=1", "probe", "this route takes none"},
				{"GET", "/readyz?probe=1", "probe", "this route takes none"},
			} {
				rec := serve(t, a, c.method, c.target)
				e := decode[fieldError](t, rec, http.StatusBadRequest)
				require.Equal(t, c.field, e.Field, "%s %s: %s", c.method, c.target, rec.Body)
				require.Contains(t, e.Error, c.msg, "%s %s", c.method, c.target)
			}
			require.Empty(t, logged.String(), "bad input is not the platform's failure")

			var list api.RunList
			rec := serve(t, a, "GET", "/api/v1/runs?pipeline=acme%2Fapi%3A.cikit.yml&branch=main&limit=1")
			require.Equal(t, http.StatusOK, rec.Code, "%s", rec.Body)
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &list))
			require.Len(t, list.Runs, 1, "a well-formed query still lists")
		})
	}
}

// FuzzListRunsQuery: whatever the query of the list of runs, the answer
// is JSON, 200 or a 400 naming the field, never a failure of the
// platform; a 200 lists runs with the filters given.
func FuzzListRunsQuery(f *testing.F) {
	for _, q := range []string{"", "limit=1", "pipeline=x;y", "branch=%zz", "brnach=main", "branch=main&branch=dev",
		"pipeline=%00", "before=!!", "limit=1&before=MjAyNi0wMy0wMlQxMDowMjowMFp8cnVuLTI", "a=%FF&b"} {
		f.Add(q)
	}
	store := dag.NewMemoryStore(dag.MemoryConfig{})
	_, err := store.RunCreate(context.Background(), &dag.RunCreateParams{Pipeline: "acme/api:.cikit.yml", Branch: "main", Jobs: fanOut()})
	require.NoError(f, err)
	access, token := newAccess(f)
	a0, err := api.New(api.Config{Runs: store, Access: access, Logger: discard()})
	require.NoError(f, err)
	a := asUser(a0, token)
	f.Fuzz(func(t *testing.T, query string) {
		req := httptest.NewRequestWithContext(t.Context(), "GET", "/api/v1/runs", nil)
		req.URL.RawQuery = query
		rec := httptest.NewRecorder()
		a.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK:
			var list api.RunList
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &list), "%s", rec.Body)
		case http.StatusBadRequest:
			var e fieldError
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e), "%s", rec.Body)
			require.NotEmpty(t, e.Error)
		default:
			t.Fatalf("?%s: %d %s", query, rec.Code, rec.Body)
		}
	})
}
