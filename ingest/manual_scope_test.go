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
