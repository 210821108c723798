package ingest_test

import (
	"context"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/ingest"
	"github.com/cikit/cikit/ingest/ingesttest"
	"github.com/cikit/cikit/vcs"
)

// manualStores are the run stores a manual trigger is tested on.
var manualStores = []struct {
	name string
	new  func(t *testing.T) (ingest.RunStore, dag.Store)
}{
	{"memory", func(t *testing.T) (ingest.RunStore, dag.Store) {
		d := dag.NewMemoryStore(dag.MemoryConfig{})
		return ingest.NewMemoryRunStore(d, nil), d
	}},
	{"postgres", func(t *testing.T) (ingest.RunStore, dag.Store) { return newPostgresRunStore(t, nil) }},
}

// manualServerOn serves a ManualTrigger over runs, for two repositories,
// acme/api and acme/web, whose main branch has a manual pipeline.
func manualServerOn(t *testing.T, runs ingest.RunStore) *httptest.Server {
	t.Helper()
	p := &vcs.Memory{}
	for _, repo := range []string{"acme/api", "acme/web"} {
		p.AddCommit(repo, "c9", map[string]string{".github/workflows/deploy.yml": manualPipeline})
		p.SetRef(repo, "main", "c9")
	}
	in, err := ingest.NewIngester(ingest.IngesterConfig{Runs: runs, VCS: p, Debounce: -1})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(ingest.ManualPattern, ingest.NewManualTrigger(in, p))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestManualTriggerKeyPerRepository: an Idempotency-Key is scoped to its
// repository. The same key for two repositories starts two runs, one in
// each; the same key again for one of them is a retry. (Before, the key
// was global: the second repository got the first one's run.)
func TestManualTriggerKeyPerRepository(t *testing.T) {
	t.Parallel()
	for _, s := range manualStores {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			runs, d := s.new(t)
			srv := manualServerOn(t, runs)
			status, api := trigger(t, srv, "/repos/acme/api/pipelines", "k1", `{"ref": "main"}`)
			require.Equal(t, http.StatusCreated, status, "%v", api)
			status, web := trigger(t, srv, "/repos/acme/web/pipelines", "k1", `{"ref": "main"}`)
			require.Equal(t, http.StatusCreated, status, "the key on another repository is another request: %v", web)
			require.NotEqual(t, api["run_ids"], web["run_ids"])
			for repo, out := range map[string]map[string]any{"acme/api": api, "acme/web": web} {
				ids := out["run_ids"].([]any)
				require.Len(t, ids, 1)
				run, err := d.RunGet(t.Context(), ids[0].(string))
				require.NoError(t, err)
				require.Equal(t, repo+":.github/workflows/deploy.yml", run.Pipeline)
			}

			status, again := trigger(t, srv, "/repos/acme/web/pipelines", "k1", `{"ref": "main"}`)
			require.Equal(t, http.StatusOK, status, "a retry on the same repository")
			require.Equal(t, web["run_ids"], again["run_ids"])
			status, again = trigger(t, srv, "/repos/acme/api/pipelines", "k1", `{"ref": "main"}`)
			require.Equal(t, http.StatusOK, status, "a retry on the same repository")
			require.Equal(t, api["run_ids"], again["run_ids"])
		})
	}
}

// TestManualScopeMigration: the records of manual triggers made before
// keys were scoped to repositories move to the repository of their run,
// so that a retry across the upgrade finds its run.
func TestManualScopeMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	runs, d := newPostgresRunStore(t, nil)
	run, err := d.RunCreate(ctx, &dag.RunCreateParams{Pipeline: "acme/web:.github/workflows/deploy.yml", Branch: "main",
		IdempotencyKey: "manual/api/k1#0", Jobs: ingesttest.Runs(1)[0].Jobs})
	require.NoError(t, err)
	pool := d.Pool()
	_, err = pool.Exec(ctx, `INSERT INTO webhook_deliveries (provider, hook_id, delivery_id, run_ids, created_at)
		VALUES ('manual', 'api', 'k1', $1, now()), ('manual', 'api', 'k2', '{}', now())`, []string{run.ID})
	require.NoError(t, err)
	sql, err := fs.ReadFile(ingest.Migrations(), "002_manual_scope.sql")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, string(sql))
	require.NoError(t, err)

	srv := manualServerOn(t, runs)
	status, out := trigger(t, srv, "/repos/acme/web/pipelines", "k1", `{"ref": "main"}`)
	require.Equal(t, http.StatusOK, status, "the retry finds the run of the old record: %v", out)
	require.Equal(t, []any{run.ID}, out["run_ids"])
	status, out = trigger(t, srv, "/repos/acme/api/pipelines", "k1", `{"ref": "main"}`)
	require.Equal(t, http.StatusCreated, status, "another repository's key: %v", out)
}

// TestManualTriggerBadInput: input that could never be taken in is a
// 400 naming the field, on both stores, before the VCS or the store is
// asked: a ref git would refuse (the provider answered such a ref 503
// "retry later"), a SHA that is not one, a key, a variable or a
// repository no store can hold, a query. (Before, each of them got
// another answer: 503, 404 or 201.)
func TestManualTriggerBadInput(t *testing.T) {
	t.Parallel()
	for _, s := range manualStores {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			runs, _ := s.new(t)
			srv := manualServerOn(t, runs)
			for _, c := range []struct {
				path, key, body, field, msg string
			}{
				{"/repos/acme/api/pipelines", "k", `{"ref": "../../etc"}`, "ref", `it contains ".."`},
				{"/repos/acme/api/pipelines", "k", `{"ref": "refs/heads/../../etc"}`, "ref", `it contains ".."`},
				{"/repos/acme/api/pipelines", "k", `{"ref": "main~1"}`, "ref", "not a valid branch or tag name"},
				{"/repos/acme/api/pipelines", "k", `{"ref": "-main"}`, "ref", "begins with a dash"},
				{"/repos/acme/api/pipelines", "k", `{"ref": "ma\u0000in"}`, "ref", "control character"},
				{"/repos/acme/api/pipelines", "k", `{"ref": "refs/heads/"}`, "ref", "no ref"},
				{"/repos/acme/api/pipelines", "k", `{"ref": "refs/notes/x"}`, "ref", "neither a branch"},
				{"/repos/acme/api/pipelines", "k", `{}`, "ref", `"ref" is required`},
				{"/repos/acme/api/pipelines", "k", `{"ref": 1}`, "ref", "malformed request"},
				{"/repos/acme/api/pipelines", "k", `{"ref": "main", "branch": "x"}`, "branch", "unknown field"},
				{"/repos/acme/api/pipelines", "k", `{"ref": "main", "sha": "c9; rm -rf /"}`, "sha", "not 40 or 64 lowercase hex digits"},
				{"/repos/acme/api/pipelines", "k", `{"ref": "main", "variables": {"A=B": "x"}}`, "variables.A=B", "variable name"},
				{"/repos/acme/api/pipelines", "k", `{"ref": "main", "variables": {"target": "a\u0000b"}}`, "variables.target", "NUL"},
				{"/repos/acme/api/pipelines", "", `{"ref": "main"}`, "Idempotency-Key", "is required"},
				{"/repos/acme/api/pipelines", "k\xff", `{"ref": "main"}`, "Idempotency-Key", "printable ASCII"},
				{"/repos/acme/api/pipelines", "two words", `{"ref": "main"}`, "Idempotency-Key", "printable ASCII"},
				{"/repos/ac%00me/api/pipelines", "k", `{"ref": "main"}`, "org", "is not a path of letters"},
				{"/repos/..%2F../api/pipelines", "k", `{"ref": "main"}`, "org", "is not a path of letters"},
				{"/repos/acme/a%2Fb/pipelines", "k", `{"ref": "main"}`, "repo", "contains a slash"},
				{"/repos/acme/api%FF/pipelines", "k", `{"ref": "main"}`, "repo", "is not a path of letters"},
				{"/repos/acme/api/pipelines?ref=main", "k", `{"ref": "main"}`, "", "no query parameters"},
			} {
				status, out := trigger(t, srv, c.path, c.key, c.body)
				require.Equal(t, http.StatusBadRequest, status, "%s %q: %v", c.path, c.body, out)
				field, _ := out["field"].(string)
				require.Equal(t, c.field, field, "%s %q: %v", c.path, c.body, out)
				require.Contains(t, out["error"], c.msg, "%s %q", c.path, c.body)
			}
		})
	}
}
