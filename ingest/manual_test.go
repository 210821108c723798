package ingest_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/ingest"
)

const manualPipeline = `on:
  workflow_dispatch:
    inputs:
      target:
        type: string
jobs:
  deploy:
    runs-on: ubuntu-latest
    steps:
      - run: make deploy
`

func manualServer(t *testing.T) (*httptest.Server, *fixture) {
	t.Helper()
	f := newFixture(t, -1)
	f.vcs.AddCommit("acme/api", "c9", map[string]string{".github/workflows/deploy.yml": manualPipeline})
	f.vcs.SetRef("acme/api", "main", "c9")
	f.vcs.SetRef("acme/api", "refs/tags/v1", "c1")
	mux := http.NewServeMux()
	mux.Handle(ingest.ManualPattern, ingest.NewManualTrigger(f.in, f.vcs))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, f
}

func trigger(t *testing.T, srv *httptest.Server, path, key, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return resp.StatusCode, out
}

func TestManualTrigger(t *testing.T) {
	t.Parallel()
	srv, f := manualServer(t)
	status, out := trigger(t, srv, "/repos/acme/api/pipelines", "k1", `{"ref": "main", "variables": {"target": "prod"}}`)
	require.Equal(t, http.StatusCreated, status, "%v", out)
	require.Equal(t, "k1", out["delivery_id"])
	require.Equal(t, "c9", out["sha"], "the ref resolved")
	ids := out["run_ids"].([]any)
	require.Len(t, ids, 1)
	run, err := f.dag.RunGet(t.Context(), ids[0].(string))
	require.NoError(t, err)
	require.Equal(t, "acme/api:.github/workflows/deploy.yml", run.Pipeline)

	status, again := trigger(t, srv, "/repos/acme/api/pipelines", "k1", `{"ref": "main"}`)
	require.Equal(t, http.StatusOK, status, "a retried request")
	require.Equal(t, ids, again["run_ids"])

	status, other := trigger(t, srv, "/repos/acme/api/pipelines", "k2", `{"ref": "main"}`)
	require.Equal(t, http.StatusCreated, status)
	require.NotEqual(t, ids, other["run_ids"], "another key starts another run")
}

func TestManualTriggerRefusals(t *testing.T) {
	t.Parallel()
	srv, _ := manualServer(t)
	for _, c := range []struct {
		name, key, body string
		status          int
		want            string
	}{
		{"no key", "", `{"ref": "main"}`, http.StatusBadRequest, "Idempotency-Key"},
		{"not JSON", "k", `{"ref": `, http.StatusBadRequest, "malformed request"},
		{"unknown field", "k", `{"ref": "main", "branch": "x"}`, http.StatusBadRequest, "unknown field"},
		{"no ref", "k", `{}`, http.StatusBadRequest, `"ref" is required`},
		{"unknown ref", "k", `{"ref": "nope"}`, http.StatusNotFound, "has no ref nope"},
		{"nothing runs", "k3", `{"ref": "refs/tags/v1"}`, http.StatusUnprocessableEntity, "not triggered"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, out := trigger(t, srv, "/repos/acme/api/pipelines", c.key, c.body)
			require.Equal(t, c.status, status, "%v", out)
			msg, _ := out["error"].(string)
			if msg == "" {
				msg, _ = out["dropped"].(string)
			}
			require.Contains(t, msg, c.want)
		})
	}
}
