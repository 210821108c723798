package fleet_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/internal/pgtest"
	"github.com/cikit/cikit/internal/redistest"
	"github.com/cikit/cikit/lease"
)

// TestRedisFlushedMidRun: Redis loses everything while a job runs on
// PostgreSQL stores. The job is not handed out again, its runner keeps
// its claim (heartbeats and the completion go through the PostgreSQL
// lease), and the run ends once.
func TestRedisFlushedMidRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	ns := redistest.New(t)
	jobs, err := dag.NewPostgresStore(dag.PostgresConfig{Pool: db.Pool, Redis: ns.Client, KeyPrefix: ns.Prefix + "dag:"})
	require.NoError(t, err)
	require.NoError(t, jobs.Migrate(ctx))
	ls, err := lease.NewPostgresStore(db.Pool)
	require.NoError(t, err)
	require.NoError(t, ls.Migrate(ctx))
	m, err := lease.NewManager(lease.Config{Store: ls, Jobs: jobs, Redis: ns.Client, KeyPrefix: ns.Prefix + "lease:", TTL: 30 * time.Second})
	require.NoError(t, err)
	s, err := fleet.NewServer(fleet.ServerConfig{Jobs: jobs, Leases: m, RegistrationTokens: []string{regToken},
		SigningKeys: [][]byte{[]byte(strings.Repeat("k", 32))}})
	require.NoError(t, err)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	b := &bundle{srv: srv, server: s, jobs: jobs}

	a, other := b.register(t), b.register(t)
	runID := b.newRun(t, spec("build"), spec("test", "build"))
	c := b.claim(t, a, "5")
	require.Equal(t, "build", c.JobID)

	require.NoError(t, ns.Flush(ctx))
	// The job is the claimed runner's still: nobody else gets it.
	s.Dispatcher().Offer(&fleet.Offer{RunID: runID, JobID: "build", Attempt: 1, Spec: spec("build")}) // a redelivered dispatch
	require.Nil(t, b.claim(t, other, "0"), "the running job is not handed out again")
	status, out := b.call(t, http.MethodPost, jobPath(c, "heartbeat"), c.Token, nil)
	require.Equal(t, http.StatusOK, status, "the runner keeps its claim: %v", out)

	require.NoError(t, ns.Flush(ctx))
	status, out = b.call(t, http.MethodPost, jobPath(c, "complete"), c.Token, map[string]any{"result": "succeeded"})
	require.Equal(t, http.StatusOK, status, "%v", out)
	next := b.claim(t, other, "5")
	require.Equal(t, "test", next.JobID)
	status, _ = b.call(t, http.MethodPost, jobPath(next, "complete"), next.Token, map[string]any{"result": "succeeded"})
	require.Equal(t, http.StatusOK, status)

	run, err := jobs.RunGet(ctx, runID)
	require.NoError(t, err)
	require.Equal(t, cikit.RunSucceeded, run.State)
	for _, id := range []string{"build", "test"} {
		attempts, err := jobs.JobAttempts(ctx, runID, id)
		require.NoError(t, err)
		require.Len(t, attempts, 1, "%s ran once", id)
	}
}
