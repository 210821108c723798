package fleet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/internal/clocktest"
	"github.com/cikit/cikit/internal/pgtest"
	"github.com/cikit/cikit/internal/redistest"
	"github.com/cikit/cikit/lease"
	"github.com/cikit/cikit/logs"
)

const regToken = "registration-token-0123456789"

type bundle struct {
	srv    *httptest.Server
	server *fleet.Server
	jobs   dag.Store
	reaper *lease.Reaper
	clock  *clocktest.Clock
}

// stores are the stores a bundle runs on.
type stores int

const (
	memoryStores   stores = iota
	postgresStores        // PostgreSQL for jobs and leases, Redis for counters and leases
)

func setup(t testing.TB) *bundle { return setupOn(t, memoryStores) }

func setupOn(t testing.TB, st stores) *bundle { return setupWith(t, st, nil) }

// setupWith is setupOn with the server's config changed by mod.
func setupWith(t testing.TB, st stores, mod func(*fleet.ServerConfig)) *bundle {
	t.Helper()
	clk := clocktest.New(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	var (
		jobs   dag.Store
		leases lease.Store
		cfg    lease.Config
	)
	switch st {
	case memoryStores:
		jobs, leases = dag.NewMemoryStore(dag.MemoryConfig{Now: clk.Now}), lease.NewMemoryStore()
	case postgresStores:
		db := pgtest.New(t)
		ns := redistest.New(t)
		ps, err := dag.NewPostgresStore(dag.PostgresConfig{Pool: db.Pool, Now: clk.Now, Redis: ns.Client, KeyPrefix: ns.Prefix + "dag:"})
		require.NoError(t, err)
		require.NoError(t, ps.Migrate(context.Background()))
		ls, err := lease.NewPostgresStore(db.Pool)
		require.NoError(t, err)
		require.NoError(t, ls.Migrate(context.Background()))
		jobs, leases = ps, ls
		cfg.Redis, cfg.KeyPrefix = ns.Client, ns.Prefix+"lease:"
	}
	cfg.Store, cfg.Jobs, cfg.TTL, cfg.Now = leases, jobs, 30*time.Second, clk.Now
	m, err := lease.NewManager(cfg)
	require.NoError(t, err)
	reaper, err := lease.NewReaper(lease.ReaperConfig{Manager: m})
	require.NoError(t, err)
	hub, err := logs.NewHub(logs.Config{Sink: &logs.MemorySink{}, Segments: &logs.MemorySegmentStore{}})
	require.NoError(t, err)
	sc := fleet.ServerConfig{Jobs: jobs, Leases: m, RegistrationTokens: []string{regToken}, Logs: hub,
		SigningKeys: [][]byte{[]byte(strings.Repeat("k", 32))}, Now: clk.Now,
		RetryBackoff: func(int) time.Duration { return 0 }}
	if mod != nil {
		mod(&sc)
	}
	s, err := fleet.NewServer(sc)
	require.NoError(t, err)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return &bundle{srv: srv, server: s, jobs: jobs, reaper: reaper, clock: clk}
}

// call sends a request and returns the status and decoded JSON answer.
func (b *bundle) call(t testing.TB, method, path, token string, body any) (int, map[string]any) {
	t.Helper()
	var r io.Reader
	if body != nil {
		j, err := json.Marshal(body)
		require.NoError(t, err)
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, b.srv.URL+path, r)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := b.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if len(raw) > 0 {
		require.NoError(t, json.Unmarshal(raw, &out), "%s", raw)
	}
	return resp.StatusCode, out
}

func (b *bundle) register(t testing.TB, labels ...string) string {
	t.Helper()
	status, out := b.call(t, http.MethodPost, "/v1/runners", regToken, map[string]any{"name": "r", "labels": labels})
	require.Equal(t, http.StatusCreated, status, "%v", out)
	return out["runner_token"].(string)
}

type claimed struct {
	RunID, JobID, Token string
	Attempt             int
}

func (b *bundle) claim(t *testing.T, runner string, wait string) *claimed {
	t.Helper()
	status, out := b.call(t, http.MethodGet, "/v1/jobs/claim?wait="+wait, runner, nil)
	if status == http.StatusNoContent {
		return nil
	}
	require.Equal(t, http.StatusOK, status, "%v", out)
	return &claimed{RunID: out["run_id"].(string), JobID: out["job_id"].(string), Token: out["job_token"].(string), Attempt: int(out["attempt"].(float64))}
}

// chunk sends one log chunk at offset 0 of c's log.
func (b *bundle) chunk(t *testing.T, c *claimed, step int, data string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPatch, b.srv.URL+jobPath(c, "log")+fmt.Sprintf("?attempt=%d&step=%d&seq=0", c.Attempt, step), strings.NewReader(data))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Content-Range", fmt.Sprintf("bytes 0-%d", len(data)-1))
	resp, err := b.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return resp.StatusCode, out
}

func jobPath(c *claimed, call string) string {
	return "/v1/jobs/" + url.PathEscape(c.RunID) + "/" + url.PathEscape(c.JobID) + "/" + call
}

func (b *bundle) newRun(t *testing.T, specs ...*cikit.JobSpec) string {
	t.Helper()
	run, err := b.jobs.RunCreate(context.Background(), &dag.RunCreateParams{Jobs: specs})
	require.NoError(t, err)
	require.NoError(t, b.server.DispatchRun(context.Background(), run.ID))
	return run.ID
}

func spec(id string, needs ...string) *cikit.JobSpec {
	return &cikit.JobSpec{ID: id, Needs: needs, Steps: []cikit.Step{{Run: "true"}}}
}

func TestRegister(t *testing.T) {
	t.Parallel()
	b := setup(t)
	status, out := b.call(t, http.MethodPost, "/v1/runners", "wrong-token-0123456789", map[string]any{"name": "r"})
	require.Equal(t, http.StatusUnauthorized, status)
	require.NotEmpty(t, out["error"])
	status, _ = b.call(t, http.MethodPost, "/v1/runners", regToken, map[string]any{"labels": []string{"x"}})
	require.Equal(t, http.StatusBadRequest, status, "no name")
	status, _ = b.call(t, http.MethodPost, "/v1/runners", regToken, map[string]any{"name": "r", "labels": []string{""}})
	require.Equal(t, http.StatusBadRequest, status, "an empty label")
	status, out = b.call(t, http.MethodPost, "/v1/runners", regToken, map[string]any{"name": "r", "labels": []string{"x64", "linux", "x64"}})
	require.Equal(t, http.StatusCreated, status)
	require.Equal(t, []any{"linux", "x64"}, out["labels"])
	require.NotEmpty(t, out["runner_token"])

	status, _ = b.call(t, http.MethodGet, "/v1/jobs/claim?wait=0", "forged", nil)
	require.Equal(t, http.StatusUnauthorized, status)
	status, _ = b.call(t, http.MethodGet, "/v2/jobs/claim", "", nil)
	require.Equal(t, http.StatusNotFound, status)
}

// TestLeaseRemaining: the claim and each heartbeat say how long the lease
// has left as a duration, which runners count on their own monotonic
// clock, besides when it ends by the server's.
func TestLeaseRemaining(t *testing.T) {
	t.Parallel()
	b := setup(t)
	runner := b.register(t, "linux")
	b.newRun(t, spec("build"))
	status, out := b.call(t, http.MethodGet, "/v1/jobs/claim?wait=5", runner, nil)
	require.Equal(t, http.StatusOK, status, "%v", out)
	require.Equal(t, float64(30000), out["lease_remaining_ms"], "the clock stands still: the whole TTL")
	c := &claimed{RunID: out["run_id"].(string), JobID: out["job_id"].(string), Token: out["job_token"].(string), Attempt: 1}
	b.clock.Advance(10 * time.Second)
	status, out = b.call(t, http.MethodPost, jobPath(c, "heartbeat"), c.Token, nil)
	require.Equal(t, http.StatusOK, status, "%v", out)
	require.Equal(t, float64(30000), out["lease_remaining_ms"], "renewed: the whole TTL again")
	require.Equal(t, b.clock.Now().Add(30*time.Second).Format(time.RFC3339Nano), out["lease_expires_at"])
}

// TestClaimHeartbeatComplete walks a two-job run through the protocol:
// the second job is offered once the first succeeded.
func TestClaimHeartbeatComplete(t *testing.T) {
	t.Parallel()
	b := setup(t)
	runner := b.register(t, "linux")
	require.Nil(t, b.claim(t, runner, "0"), "no job yet: 204")
	runID := b.newRun(t, spec("build"), spec("test", "build"))

	c := b.claim(t, runner, "5")
	require.Equal(t, claimed{RunID: runID, JobID: "build", Token: c.Token, Attempt: 1}, *c)
	status, out := b.call(t, http.MethodPost, jobPath(c, "heartbeat"), c.Token, nil)
	require.Equal(t, http.StatusOK, status, "%v", out)
	require.Equal(t, false, out["cancel_requested"])

	done := map[string]any{"result": "succeeded", "exit_code": 0, "log": map[string]any{"total_bytes": 0, "sha256": ""}}
	status, out = b.call(t, http.MethodPost, jobPath(c, "complete"), c.Token, done)
	require.Equal(t, http.StatusOK, status, "%v", out)
	require.Equal(t, "succeeded", out["state"])
	status, out = b.call(t, http.MethodPost, jobPath(c, "complete"), c.Token, done)
	require.Equal(t, http.StatusOK, status, "a repeated completion: %v", out)
	status, _ = b.call(t, http.MethodPost, jobPath(c, "complete"), c.Token, map[string]any{"result": "failed"})
	require.Equal(t, http.StatusConflict, status, "a different completion of the ended attempt")
	status, _ = b.call(t, http.MethodPost, jobPath(c, "heartbeat"), c.Token, nil)
	require.Equal(t, http.StatusConflict, status, "no heartbeat after the end")

	next := b.claim(t, runner, "5")
	require.Equal(t, "test", next.JobID)
	// The job token is for its job only.
	status, _ = b.call(t, http.MethodPost, jobPath(c, "heartbeat"), next.Token, nil)
	require.Equal(t, http.StatusForbidden, status)
	status, _ = b.call(t, http.MethodPost, jobPath(next, "complete"), next.Token, map[string]any{"result": "done"})
	require.Equal(t, http.StatusBadRequest, status)
	status, out = b.call(t, http.MethodPost, jobPath(next, "complete"), next.Token, map[string]any{"result": "failed", "exit_code": 3})
	require.Equal(t, http.StatusOK, status, "%v", out)
	require.Equal(t, "failed", out["state"])
	run, err := b.jobs.RunGet(context.Background(), runID)
	require.NoError(t, err)
	require.Equal(t, cikit.RunFailed, run.State)
}

// TestClaimWaitsForDispatch: a claim waiting in its long poll is answered
// as soon as a job it may run is dispatched; one for other labels is not.
func TestClaimWaitsForDispatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	linux, windows := b.register(t, "linux"), b.register(t, "windows")
	got := make(chan *claimed, 2)
	go func() { got <- b.claim(t, windows, "30") }()
	go func() { got <- b.claim(t, linux, "30") }()
	require.Eventually(t, func() bool { // both are waiting (a late one would find the job queued)
		rs := b.server.Runners()
		return len(rs) == 2 && rs[0].State == fleet.RunnerIdle && rs[1].State == fleet.RunnerIdle
	}, time.Minute, time.Millisecond)
	s := spec("build")
	s.RunsOn = []string{"linux"}
	b.newRun(t, s)
	c := <-got
	require.Equal(t, "build", c.JobID)
	select {
	case c := <-got:
		t.Fatalf("the windows runner was given %v", c)
	case <-time.After(100 * time.Millisecond):
	}
	b.newRun(t, &cikit.JobSpec{ID: "win", RunsOn: []string{"windows"}, Steps: []cikit.Step{{Run: "true"}}})
	require.Equal(t, "win", (<-got).JobID)
}

// TestStaleRunnerIsRefused: a runner whose lease expired is replaced: the
// reaper makes attempt 2, another runner claims it, and every call of the
// first is refused; the job's result is the second attempt's.
func TestStaleRunnerIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a, c := b.register(t), b.register(t)
	runID := b.newRun(t, spec("build"))
	first := b.claim(t, a, "5")

	b.clock.Advance(time.Minute)
	_, err := b.reaper.Reap(context.Background())
	require.NoError(t, err)
	require.NoError(t, b.server.DispatchRun(context.Background(), runID))
	second := b.claim(t, c, "5")
	require.Equal(t, 2, second.Attempt)

	for _, call := range []string{"heartbeat", "complete", "return", "log/finish?attempt=1"} {
		status, out := b.call(t, http.MethodPost, jobPath(first, call), first.Token, map[string]any{"result": "succeeded"})
		require.Equal(t, http.StatusConflict, status, "%s: %v", call, out)
		require.Equal(t, true, out["stale"])
	}
	status, out := b.chunk(t, first, 0, "stale output")
	require.Equal(t, http.StatusConflict, status, "%v", out)
	require.Equal(t, true, out["stale"])
	status, out = b.chunk(t, second, 0, "output")
	require.Equal(t, http.StatusAccepted, status, "%v", out)
	status, _ = b.call(t, http.MethodGet, jobPath(second, "log/follow?attempt=2"), second.Token, nil)
	require.Equal(t, http.StatusForbidden, status, "following is not configured")
	status, out = b.call(t, http.MethodPost, jobPath(second, "complete"), second.Token, map[string]any{"result": "succeeded"})
	require.Equal(t, http.StatusOK, status, "%v", out)
	attempts, err := b.jobs.JobAttempts(context.Background(), runID, "build")
	require.NoError(t, err)
	require.Len(t, attempts, 2)
	require.Equal(t, cikit.JobFailed, attempts[0].State)
	require.Contains(t, attempts[0].Reason, "runner_lost")
	require.Equal(t, cikit.JobSucceeded, attempts[1].State, "the result is attempt 2's")
}

// TestConcurrentRunners has many runners claim and complete at once, so
// that their lease calls are batched: every job is claimed once and
// completed once, and a completion sent twice at once is answered as the
// job ended both times.
func TestConcurrentRunners(t *testing.T) {
	t.Parallel()
	for _, st := range []struct {
		name string
		st   stores
	}{{"memory", memoryStores}, {"postgres+redis", postgresStores}} {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			b := setupOn(t, st.st)
			var specs []*cikit.JobSpec
			for i := range 48 {
				specs = append(specs, spec(fmt.Sprint("j", i)))
			}
			runID := b.newRun(t, specs...)
			var mu sync.Mutex
			seen := map[string]int{}
			var wg sync.WaitGroup
			for range 16 {
				runner := b.register(t)
				wg.Go(func() {
					for {
						c := b.claim(t, runner, "0")
						if c == nil {
							return
						}
						mu.Lock()
						seen[c.JobID]++
						mu.Unlock()
						done := map[string]any{"result": "succeeded"}
						var twice sync.WaitGroup
						for range 2 {
							twice.Go(func() {
								status, out := b.call(t, http.MethodPost, jobPath(c, "complete"), c.Token, done)
								assert.Equal(t, http.StatusOK, status, "%v", out)
								assert.Equal(t, "succeeded", out["state"])
							})
						}
						twice.Wait()
					}
				})
			}
			wg.Wait()
			require.Len(t, seen, len(specs))
			for id, n := range seen {
				require.Equal(t, 1, n, "%s claimed %d times", id, n)
			}
			run, err := b.jobs.RunGet(context.Background(), runID)
			require.NoError(t, err)
			require.Equal(t, cikit.RunSucceeded, run.State)
		})
	}
}

// TestDispatchHonoursRetryBackoff: a retried attempt offered again by
// DispatchRun or DispatchJob (a redelivered dispatch record, a restart)
// still waits out its backoff, counted from when it became ready.
func TestDispatchHonoursRetryBackoff(t *testing.T) {
	t.Parallel()
	b := setupWith(t, memoryStores, func(c *fleet.ServerConfig) {
		c.RetryBackoff = func(int) time.Duration { return time.Hour }
	})
	ctx := context.Background()
	run, err := b.jobs.RunCreate(ctx, &dag.RunCreateParams{Jobs: []*cikit.JobSpec{{ID: "flaky", Retry: &cikit.Retry{Max: 1}, Steps: []cikit.Step{{Run: "false"}}}}})
	require.NoError(t, err)
	require.NoError(t, b.server.DispatchRun(ctx, run.ID))
	runner := b.register(t)
	c := b.claim(t, runner, "1")
	require.NotNil(t, c)
	status, out := b.call(t, http.MethodPost, jobPath(c, "complete"), c.Token, map[string]any{"result": "failed", "exit_code": 1})
	require.Equal(t, http.StatusOK, status, "%v", out)
	j, err := b.jobs.JobGet(ctx, run.ID, "flaky")
	require.NoError(t, err)
	require.Equal(t, 2, j.Attempt)

	require.NoError(t, b.server.DispatchRun(ctx, run.ID))
	require.NoError(t, b.server.DispatchJob(ctx, run.ID, "flaky", 2))
	require.Nil(t, b.claim(t, runner, "0"), "the retry was offered before its backoff")

	b.clock.Advance(2 * time.Hour) // the backoff has passed: offered at once
	require.NoError(t, b.server.DispatchJob(ctx, run.ID, "flaky", 2))
	c = b.claim(t, runner, "1")
	require.NotNil(t, c)
	require.Equal(t, 2, c.Attempt)
}

// TestDispatchJobQueuedElsewhere: a job another server queued while this
// one still saw it READY is offered to this server's runners too (it was
// left to the other server's, which may have none).
func TestDispatchJobQueuedElsewhere(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	run, err := b.jobs.RunCreate(ctx, &dag.RunCreateParams{Jobs: []*cikit.JobSpec{{ID: "build", Steps: []cikit.Step{{Run: "true"}}}}})
	require.NoError(t, err)
	stale, err := b.jobs.JobGet(ctx, run.ID, "build")
	require.NoError(t, err)
	require.Equal(t, cikit.JobReady, stale.State)
	// Another server queues it first.
	_, err = b.jobs.JobQueue(ctx, &dag.JobTransitionParams{RunID: run.ID, JobID: "build", Attempt: 1})
	require.NoError(t, err)

	b.server.Dispatch(ctx, &dag.TransitionResult{Changed: []*dag.Job{stale}, Run: run})
	c := b.claim(t, b.register(t), "1")
	require.NotNil(t, c, "the job queued elsewhere was not offered here")
	require.Equal(t, "build", c.JobID)
}
