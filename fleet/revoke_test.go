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
	"github.com/cikit/cikit/internal/clocktest"
	"github.com/cikit/cikit/internal/pgtest"
	"github.com/cikit/cikit/internal/redistest"
	"github.com/cikit/cikit/lease"
)

// TestRunnerRevoke: a revoked runner's claims, heartbeats, log writes and
// completion are refused 401 at once, saying who revoked it and why; its
// lease is not renewed, so the reaper gives its job to another runner as
// a lost runner's; RunnerList shows it revoked.
func TestRunnerRevoke(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	bad, good := b.register(t, "linux"), b.register(t, "linux")
	runID := b.newRun(t, spec("build"))
	first := b.claim(t, bad, "5")
	require.NotNil(t, first)
	status, out := b.call(t, http.MethodPost, jobPath(first, "heartbeat"), first.Token, nil)
	require.Equal(t, http.StatusOK, status, "%v", out)

	list, err := b.server.RunnerList(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	var badID string
	for _, r := range list {
		if r.State == fleet.RunnerBusy {
			badID = r.ID
		}
	}
	require.NotEmpty(t, badID, "the runner running the job shows busy: %+v", list)

	rec, err := b.server.RunnerRevoke(ctx, badID, "alice", "its host was compromised")
	require.NoError(t, err)
	require.True(t, rec.Revoked())
	require.Equal(t, b.clock.Now().UTC(), rec.RevokedAt)

	status, out = b.call(t, http.MethodGet, "/v1/jobs/claim?wait=0", bad, nil)
	require.Equal(t, http.StatusUnauthorized, status, "%v", out)
	require.Equal(t, "runner_revoked", out["code"])
	require.Contains(t, out["error"], "runner revoked by alice")
	require.Contains(t, out["error"], "its host was compromised")
	for _, call := range []string{"heartbeat", "complete", "return", "log/finish?attempt=1"} {
		status, out := b.call(t, http.MethodPost, jobPath(first, call), first.Token, map[string]any{"result": "succeeded"})
		require.Equal(t, http.StatusUnauthorized, status, "%s: %v", call, out)
		require.Contains(t, out["error"], "runner revoked", call)
	}
	status, out = b.chunk(t, first, 0, "output of a revoked runner")
	require.Equal(t, http.StatusUnauthorized, status, "%v", out)
	require.Contains(t, out["error"], "runner revoked")

	// Its lease runs out unrenewed; the reaper retries the job.
	b.clock.Advance(time.Minute)
	_, err = b.reaper.Reap(ctx)
	require.NoError(t, err)
	require.NoError(t, b.server.DispatchRun(ctx, runID))
	second := b.claim(t, good, "5")
	require.NotNil(t, second)
	require.Equal(t, 2, second.Attempt)
	status, out = b.call(t, http.MethodPost, jobPath(second, "complete"), second.Token, map[string]any{"result": "succeeded"})
	require.Equal(t, http.StatusOK, status, "%v", out)
	attempts, err := b.jobs.JobAttempts(ctx, runID, "build")
	require.NoError(t, err)
	require.Len(t, attempts, 2)
	require.Contains(t, attempts[0].Reason, "runner_lost")
	require.Equal(t, cikit.JobSucceeded, attempts[1].State)

	list, err = b.server.RunnerList(ctx)
	require.NoError(t, err)
	for _, r := range list {
		if r.ID == badID {
			require.Equal(t, fleet.RunnerRevoked, r.State)
			require.Equal(t, "alice", r.RevokedBy)
			require.Equal(t, "its host was compromised", r.Reason)
		} else {
			require.NotEqual(t, fleet.RunnerRevoked, r.State)
			require.Equal(t, 1, r.Jobs)
		}
	}
	for _, r := range b.server.Runners() {
		require.NotEqual(t, badID, r.ID, "the revoked runner is not counted as live")
	}

	again, err := b.server.RunnerRevoke(ctx, badID, "bob", "again")
	require.NoError(t, err)
	require.Equal(t, "alice", again.RevokedBy, "the first revocation is kept")
	_, err = b.server.RunnerRevoke(ctx, "r_missing", "alice", "")
	require.ErrorIs(t, err, cikit.ErrNotFound)
	_, err = b.server.RunnerRevoke(ctx, badID, " ", "")
	require.ErrorContains(t, err, "who revokes it must be named")
	_, err = b.server.RunnerRevoke(ctx, badID, "alice", strings.Repeat("x", 2000))
	require.ErrorContains(t, err, "at most 1024")
}

// TestRunnerRevokeWhileWaiting: a runner revoked while it waits in a
// claim is not handed the job offered next, which goes to another.
func TestRunnerRevokeWhileWaiting(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	bad := b.register(t, "linux")
	list, err := b.server.RunnerList(ctx)
	require.NoError(t, err)
	badID := list[0].ID
	got := make(chan int, 1)
	go func() {
		status, _ := b.call(t, http.MethodGet, "/v1/jobs/claim?wait=30", bad, nil)
		got <- status
	}()
	require.Eventually(t, func() bool {
		rs := b.server.Runners()
		return len(rs) == 1 && rs[0].State == fleet.RunnerIdle
	}, time.Minute, time.Millisecond)
	_, err = b.server.RunnerRevoke(ctx, badID, "alice", "")
	require.NoError(t, err)
	b.newRun(t, spec("build"))
	require.Equal(t, http.StatusUnauthorized, <-got)
	good := b.register(t, "linux")
	c := b.claim(t, good, "5")
	require.NotNil(t, c, "the job went back for another runner")
	require.Equal(t, 1, c.Attempt)
}

// TestRunnerLastSeen: a runner's LastSeen is written at most every
// RunnerSeenInterval, not at every call.
func TestRunnerLastSeen(t *testing.T) {
	t.Parallel()
	store := fleet.NewMemoryRunnerStore()
	b := setupWith(t, memoryStores, func(c *fleet.ServerConfig) {
		c.Runners, c.RunnerSeenInterval, c.RunnerCheckTTL = store, 30*time.Second, time.Second
	})
	ctx := context.Background()
	runner := b.register(t)
	registered := b.clock.Now().UTC()
	recs, err := store.RunnerList(ctx, nil)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	id := recs[0].ID
	seen := func() time.Time {
		t.Helper()
		r, err := store.RunnerGet(ctx, id)
		require.NoError(t, err)
		return r.LastSeen
	}
	require.Equal(t, registered, seen())
	for range 3 {
		b.clock.Advance(5 * time.Second)
		require.Nil(t, b.claim(t, runner, "0"))
	}
	require.Equal(t, registered, seen(), "calls within the interval write nothing")
	b.clock.Advance(20 * time.Second)
	require.Nil(t, b.claim(t, runner, "0"))
	require.Equal(t, b.clock.Now().UTC(), seen())
}

// TestRegisterRefusesALongVersion: a runner's version is bounded.
func TestRegisterRefusesALongVersion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	status, out := b.call(t, http.MethodPost, "/v1/runners", regToken, map[string]any{"name": "r", "version": strings.Repeat("v", 300)})
	require.Equal(t, http.StatusBadRequest, status, "%v", out)
	require.Contains(t, out["error"], "version")
}

// twoServers are two Servers over one PostgreSQL database, with their own
// lease managers and dispatchers, as two processes of a platform.
type twoServers struct {
	a, b   *bundle
	runner *fleet.PostgresRunnerStore
	db     *pgtest.DB
}

func setupTwoServers(t *testing.T) *twoServers {
	t.Helper()
	clk := clocktest.New(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	db := pgtest.New(t)
	ns := redistest.New(t)
	jobs, err := dag.NewPostgresStore(dag.PostgresConfig{Pool: db.Pool, Now: clk.Now, Redis: ns.Client, KeyPrefix: ns.Prefix + "dag:"})
	require.NoError(t, err)
	require.NoError(t, jobs.Migrate(t.Context()))
	leases, err := lease.NewPostgresStore(db.Pool)
	require.NoError(t, err)
	require.NoError(t, leases.Migrate(t.Context()))
	runners := newPostgresRunners(t, db)
	server := func() *bundle {
		m, err := lease.NewManager(lease.Config{Store: leases, Jobs: jobs, TTL: 30 * time.Second, Now: clk.Now, Redis: ns.Client, KeyPrefix: ns.Prefix + "lease:"})
		require.NoError(t, err)
		reaper, err := lease.NewReaper(lease.ReaperConfig{Manager: m})
		require.NoError(t, err)
		s, err := fleet.NewServer(fleet.ServerConfig{Jobs: jobs, Leases: m, RegistrationTokens: []string{regToken}, Runners: runners,
			SigningKeys: [][]byte{[]byte(strings.Repeat("k", 32))}, Now: clk.Now, RetryBackoff: func(int) time.Duration { return 0 }})
		require.NoError(t, err)
		srv := httptest.NewServer(s)
		t.Cleanup(srv.Close)
		return &bundle{srv: srv, server: s, jobs: jobs, reaper: reaper, clock: clk}
	}
	return &twoServers{a: server(), b: server(), runner: runners, db: db}
}

// TestRunnerRevokeAcrossServers: a runner revoked through one Server is
// refused by another over the same PostgreSQL within that one's
// RunnerCheckTTL; a runner whose record is gone (the store wiped) is
// refused as unknown, and registers again.
func TestRunnerRevokeAcrossServers(t *testing.T) {
	t.Parallel()
	ts := setupTwoServers(t)
	ctx := context.Background()
	bad, good := ts.a.register(t, "linux"), ts.a.register(t, "linux")
	runID := ts.b.newRun(t, spec("build"))
	first := ts.b.claim(t, bad, "5")
	require.NotNil(t, first, "a runner registered through one server claims through the other")
	status, out := ts.b.call(t, http.MethodPost, jobPath(first, "heartbeat"), first.Token, nil)
	require.Equal(t, http.StatusOK, status, "%v", out)

	var badID string
	for _, r := range must2(ts.b.server.RunnerList(ctx)) {
		if r.State == fleet.RunnerBusy {
			badID = r.ID
		}
	}
	require.NotEmpty(t, badID)
	_, err := ts.a.server.RunnerRevoke(ctx, badID, "alice", "leaked token")
	require.NoError(t, err)
	status, _ = ts.a.call(t, http.MethodGet, "/v1/jobs/claim?wait=0", bad, nil)
	require.Equal(t, http.StatusUnauthorized, status, "refused at once where it was revoked")

	ts.a.clock.Advance(fleet.DefaultRunnerCheckTTL)
	status, out = ts.b.call(t, http.MethodPost, jobPath(first, "heartbeat"), first.Token, nil)
	require.Equal(t, http.StatusUnauthorized, status, "refused by the other server once its check expired: %v", out)
	require.Equal(t, "runner_revoked", out["code"])

	ts.a.clock.Advance(time.Minute)
	_, err = ts.b.reaper.Reap(ctx)
	require.NoError(t, err)
	require.NoError(t, ts.a.server.DispatchRun(ctx, runID))
	second := ts.a.claim(t, good, "5")
	require.NotNil(t, second, "the job is given to another runner")
	require.Equal(t, 2, second.Attempt)

	_, err = ts.db.Pool.Exec(ctx, `DELETE FROM runners`)
	require.NoError(t, err)
	ts.a.clock.Advance(fleet.DefaultRunnerCheckTTL)
	status, out = ts.b.call(t, http.MethodGet, "/v1/jobs/claim?wait=0", good, nil)
	require.Equal(t, http.StatusUnauthorized, status, "%v", out)
	require.Equal(t, "runner_unknown", out["code"])
	require.Contains(t, out["error"], "register it again")
	again := ts.b.register(t, "linux")
	require.Nil(t, ts.b.claim(t, again, "0"), "registered again, it may claim")
}

func must2[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
