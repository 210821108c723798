package fleet_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/fleet/autoscale"
	"github.com/cikit/cikit/fleet/local"
	"github.com/cikit/cikit/fleet/process"
	"github.com/cikit/cikit/internal/testenv"
	"github.com/cikit/cikit/lease"
	"github.com/cikit/cikit/logs"
)

// fleetEnv is a platform with real time: a Server over HTTP, a local
// backend and a Manager, ticked by the test.
type fleetEnv struct {
	jobs    *dag.MemoryStore
	server  *fleet.Server
	backend *local.Backend
	manager *fleet.Manager
}

func newFleet(t *testing.T, pools ...fleet.PoolConfig) *fleetEnv {
	return newFleetWith(t, local.Config{Wait: 500 * time.Millisecond}, nil, pools...)
}

// newFleetWith builds the platform with a local backend of lc, keeping
// the jobs' logs in hub when it is not nil.
func newFleetWith(t testing.TB, lc local.Config, hub *logs.Hub, pools ...fleet.PoolConfig) *fleetEnv {
	return newFleetServer(t, lc, func(c *fleet.ServerConfig) { c.Logs = hub }, nil, pools...)
}

// newFleetServer builds the platform with a local backend of lc, which
// wrap wraps when not nil, and the server configuration sc makes.
func newFleetServer(t testing.TB, lc local.Config, sc func(*fleet.ServerConfig), wrap func(fleet.Backend) fleet.Backend,
	pools ...fleet.PoolConfig) *fleetEnv {
	t.Helper()
	e := &fleetEnv{jobs: dag.NewMemoryStore(dag.MemoryConfig{})}
	leases, err := lease.NewManager(lease.Config{Store: lease.NewMemoryStore(), Jobs: e.jobs, TTL: 10 * time.Second})
	require.NoError(t, err)
	cfg := fleet.ServerConfig{Jobs: e.jobs, Leases: leases, RegistrationTokens: []string{regToken},
		SigningKeys: [][]byte{[]byte(strings.Repeat("k", 32))}, HeartbeatInterval: time.Second}
	sc(&cfg)
	e.server, err = fleet.NewServer(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(e.server)
	t.Cleanup(srv.Close)
	e.backend, err = local.New(lc)
	if errors.Is(err, process.ErrSandboxUnavailable) {
		testenv.ToolUnavailable(t, testenv.Bubblewrap, err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.backend.Close()) })
	var backend fleet.Backend = e.backend
	if wrap != nil {
		backend = wrap(backend)
	}
	for i := range pools {
		pools[i].Backend = backend
	}
	e.manager, err = fleet.NewManager(context.Background(), fleet.ManagerConfig{Server: e.server, ServerURL: srv.URL,
		RegistrationToken: regToken, Pools: pools})
	require.NoError(t, err)
	return e
}

func (e *fleetEnv) tick(t *testing.T) fleet.PoolStatus {
	t.Helper()
	require.NoError(t, e.manager.Tick(context.Background()))
	return e.manager.Pools()[0]
}

// tickCeiling bounds how long a test ticks waiting for a condition: a
// ceiling that a loaded machine keeps to, never a timing the test relies
// on (a passing test stops ticking as soon as the condition holds).
const tickCeiling = 2 * time.Minute

// tickUntil ticks until cond holds of the first pool's status.
func (e *fleetEnv) tickUntil(t *testing.T, what string, cond func(fleet.PoolStatus) bool) fleet.PoolStatus {
	t.Helper()
	deadline := time.Now().Add(tickCeiling)
	for {
		st := e.tick(t)
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s; last status %+v", what, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *fleetEnv) run(t testing.TB, specs ...*cikit.JobSpec) string {
	t.Helper()
	run, err := e.jobs.RunCreate(context.Background(), &dag.RunCreateParams{Jobs: specs})
	require.NoError(t, err)
	require.NoError(t, e.server.DispatchRun(context.Background(), run.ID))
	return run.ID
}

func (e *fleetEnv) jobsOf(t testing.TB, runID string) []*dag.Job {
	t.Helper()
	jobs, err := e.jobs.JobList(context.Background(), runID)
	require.NoError(t, err)
	return jobs
}

func onLabels(id, script string, labels ...string) *cikit.JobSpec {
	return &cikit.JobSpec{ID: id, RunsOn: labels, Steps: []cikit.Step{{Run: script}}}
}

// noCooldowns scales at every tick, for tests that tick quickly.
func noCooldowns(p autoscale.Policy) autoscale.Policy {
	p.ScaleUpCooldown, p.ScaleDownCooldown = -1, -1
	return p
}

// TestManagerKeepsAWarmPool: the pool starts with its warm runners, a
// burst scales it to its maximum, every job runs on the pool's runners,
// and once the burst is over the pool shrinks back to its warm target.
func TestManagerKeepsAWarmPool(t *testing.T) {
	t.Parallel()
	e := newFleet(t, fleet.PoolConfig{Name: "linux", Labels: []string{"linux", "x64"},
		Policy: noCooldowns(autoscale.Policy{Min: 0, Max: 4, Warm: 2, ScaleDownFraction: 1})})
	st := e.tick(t)
	require.Equal(t, 2, st.Decision.Provision, st.Decision.Reason)
	e.tickUntil(t, "two idle runners", func(st fleet.PoolStatus) bool { return st.Idle == 2 })

	var specs []*cikit.JobSpec
	for i := range 6 {
		specs = append(specs, onLabels(fmt.Sprintf("job-%d", i), "sleep 0.3", "linux"))
	}
	runID := e.run(t, specs...)
	peak := 0
	e.tickUntil(t, "the burst to finish", func(st fleet.PoolStatus) bool {
		peak = max(peak, st.Idle+st.Busy+st.Starting)
		require.LessOrEqual(t, st.Idle+st.Busy+st.Starting, 4, "never beyond Max")
		for _, j := range e.jobsOf(t, runID) {
			if j.State != cikit.JobSucceeded {
				return false
			}
		}
		return true
	})
	require.Equal(t, 4, peak, "the burst took the pool to its maximum")
	runners := map[string]bool{}
	for _, j := range e.jobsOf(t, runID) {
		runners[j.Runner] = true
	}
	require.LessOrEqual(t, len(runners), 4)
	e.tickUntil(t, "the pool to shrink to its warm target", func(st fleet.PoolStatus) bool {
		return st.Idle == 2 && st.Busy == 0 && st.Starting == 0
	})
}

// TestManagerReplacesEphemeralRunners: each job of an ephemeral pool runs
// on a runner of its own, and the pool replaces every runner that ended.
func TestManagerReplacesEphemeralRunners(t *testing.T) {
	t.Parallel()
	e := newFleet(t, fleet.PoolConfig{Name: "once", Labels: []string{"linux"},
		Policy: noCooldowns(autoscale.Policy{Max: 3, Warm: 1, Ephemeral: true})})
	e.tickUntil(t, "a warm runner", func(st fleet.PoolStatus) bool { return st.Idle == 1 })
	var runs []string
	for i := range 3 {
		runs = append(runs, e.run(t, onLabels(fmt.Sprintf("job-%d", i), "true", "linux")))
	}
	e.tickUntil(t, "every job to finish", func(fleet.PoolStatus) bool {
		for _, r := range runs {
			if e.jobsOf(t, r)[0].State != cikit.JobSucceeded {
				return false
			}
		}
		return true
	})
	runners := map[string]bool{}
	for _, r := range runs {
		runners[e.jobsOf(t, r)[0].Runner] = true
	}
	require.Len(t, runners, 3, "each job ran on a runner of its own")
	// A used runner stops a moment after its job succeeded: the pool may
	// have its warm runner again before the last one has.
	stopped := 0
	e.tickUntil(t, "a warm runner again, and the used ones stopped", func(st fleet.PoolStatus) bool {
		all, err := e.backend.Instances(context.Background())
		require.NoError(t, err)
		stopped = 0
		for _, in := range all {
			if in.State == fleet.InstanceStopped {
				stopped++
			}
		}
		return st.Idle == 1 && st.Busy == 0 && stopped >= 3
	})
	require.Equal(t, 3, stopped, "the three used runners stopped after their job")
}

// TestManagerWhy: the Manager says why each job waits.
func TestManagerWhy(t *testing.T) {
	t.Parallel()
	var gated *gatedBackend
	e := newFleetServer(t, local.Config{Wait: 500 * time.Millisecond}, func(*fleet.ServerConfig) {},
		func(b fleet.Backend) fleet.Backend { gated = &gatedBackend{Backend: b}; return gated },
		fleet.PoolConfig{Name: "small", Labels: []string{"linux"}, Policy: noCooldowns(autoscale.Policy{Max: 1, Warm: 0})})
	ctx := context.Background()

	gpu := e.run(t, onLabels("train", "true", "gpu", "large"))
	e.tick(t)
	why, err := e.manager.Why(ctx, gpu, "train")
	require.NoError(t, err)
	require.Equal(t, fleet.WaitNoRunnerMatches, why.Code)
	require.Equal(t, "no runner matches labels [gpu large]", why.Message)

	first := e.run(t, onLabels("long", "sleep 30", "linux"))
	st := e.tick(t)
	require.Equal(t, 1, st.Decision.Provision)
	why, err = e.manager.Why(ctx, first, "long")
	require.NoError(t, err)
	require.Equal(t, fleet.WaitScalingUp, why.Code, why.Message)
	require.Equal(t, "small", why.Pool)
	gated.open(t) // the runner boots

	// The runner is busy from when it takes the job, which is RUNNING
	// once its claim is made.
	e.tickUntil(t, "the first job to run", func(st fleet.PoolStatus) bool {
		return st.Busy == 1 && e.jobsOf(t, first)[0].State == cikit.JobRunning
	})
	second := e.run(t, onLabels("next", "true", "linux"))
	e.tick(t)
	why, err = e.manager.Why(ctx, second, "next")
	require.NoError(t, err)
	require.Equal(t, fleet.WaitPoolAtMax, why.Code, why.Message)
	require.Contains(t, why.Message, "maximum of 1")

	why, err = e.manager.Why(ctx, first, "long")
	require.NoError(t, err)
	require.Equal(t, fleet.WaitNotWaiting, why.Code)
	require.Equal(t, cikit.JobRunning, why.State)

	_, err = e.manager.Why(ctx, first, "nope")
	require.ErrorIs(t, err, cikit.ErrNotFound)

	// The same answers over HTTP.
	mux := http.NewServeMux()
	mux.Handle("GET /runs/{run_id}/jobs/{job_id}/wait", e.manager.WhyHandler())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/runs/" + gpu + "/jobs/train/wait")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var body map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	require.Equal(t, "no_runner_matches", body["code"])
	require.Equal(t, "queued", body["state"])
	resp2, err := http.Get(srv.URL + "/runs/" + gpu + "/jobs/missing/wait")
	require.NoError(t, err)
	resp2.Body.Close()
	require.Equal(t, http.StatusNotFound, resp2.StatusCode)
}

// TestManagerWhySelfHosted: a Manager without pools answers from the
// runners that registered themselves.
func TestManagerWhySelfHosted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	m, err := fleet.NewManager(ctx, fleet.ManagerConfig{Server: b.server})
	require.NoError(t, err)
	run, err := b.jobs.RunCreate(ctx, &dag.RunCreateParams{Jobs: []*cikit.JobSpec{{ID: "build", RunsOn: []string{"linux"}, Steps: []cikit.Step{{Run: "true"}}}}})
	require.NoError(t, err)
	require.NoError(t, b.server.DispatchRun(ctx, run.ID))
	why, err := m.Why(ctx, run.ID, "build")
	require.NoError(t, err)
	require.Equal(t, fleet.WaitNoRunnerMatches, why.Code, why.Message)
	runner := b.register(t, "linux", "x64") // registered, not yet polling
	why, err = m.Why(ctx, run.ID, "build")
	require.NoError(t, err)
	require.Equal(t, fleet.WaitSelfHosted, why.Code, why.Message)
	require.Empty(t, why.Pool)
	require.NotNil(t, b.claim(t, runner, "1"))
	why, err = m.Why(ctx, run.ID, "build")
	require.NoError(t, err)
	require.Equal(t, fleet.WaitNotWaiting, why.Code, why.Message)
}

// TestManagerWhyTenantLimit: a tenant at its limit of running jobs waits,
// says so, and runs once its running job ends.
func TestManagerWhyTenantLimit(t *testing.T) {
	t.Parallel()
	e := newFleetServer(t, local.Config{Wait: 500 * time.Millisecond}, func(c *fleet.ServerConfig) {
		c.Tenant = func(run *dag.Run) string { return strings.SplitN(run.Pipeline, "/", 2)[0] }
		c.TenantLimit = func(string) int { return 1 }
	}, nil, fleet.PoolConfig{Name: "linux", Labels: []string{"linux"}, Policy: noCooldowns(autoscale.Policy{Max: 4, Warm: 2})})
	ctx := context.Background()
	e.tickUntil(t, "two idle runners", func(st fleet.PoolStatus) bool { return st.Idle == 2 })
	newRun := func(pipeline, script string) string {
		run, err := e.jobs.RunCreate(ctx, &dag.RunCreateParams{Pipeline: pipeline, Jobs: []*cikit.JobSpec{onLabels("job", script, "linux")}})
		require.NoError(t, err)
		require.NoError(t, e.server.DispatchRun(ctx, run.ID))
		return run.ID
	}
	long := newRun("acme/app", "sleep 30")
	e.tickUntil(t, "acme's first job to run", func(fleet.PoolStatus) bool { return e.jobsOf(t, long)[0].State == cikit.JobRunning })
	waiting := newRun("acme/lib", "true")
	other := newRun("beta/app", "true")
	e.tickUntil(t, "beta's job to run past acme's", func(fleet.PoolStatus) bool { return e.jobsOf(t, other)[0].State == cikit.JobSucceeded })
	why, err := e.manager.Why(ctx, waiting, "job")
	require.NoError(t, err)
	require.Equal(t, fleet.WaitTenantLimit, why.Code, why.Message)
	require.Equal(t, "tenant acme is at its limit of 1 running jobs; the job waits for one of them to end", why.Message)
	_, err = e.jobs.RunCancel(ctx, long)
	require.NoError(t, err)
	e.tickUntil(t, "acme's second job to run once the first ended", func(fleet.PoolStatus) bool {
		return e.jobsOf(t, waiting)[0].State == cikit.JobSucceeded
	})
}

// TestManagerEphemeralRunnerEnding: a single-use runner that ran its job
// but whose machine has not stopped yet counts neither as idle nor busy.
// Counted idle, it made the pool look one runner too big once the
// replacement was up, and the Manager destroyed the fresh runner.
func TestManagerEphemeralRunnerEnding(t *testing.T) {
	t.Parallel()
	lb := &lingerBackend{destroyed: map[string]bool{}}
	e := newFleetServer(t, local.Config{Wait: 500 * time.Millisecond}, func(*fleet.ServerConfig) {},
		func(b fleet.Backend) fleet.Backend { lb.Backend = b; return lb },
		fleet.PoolConfig{Name: "once", Labels: []string{"linux"}, Policy: noCooldowns(autoscale.Policy{Max: 3, Warm: 1, Ephemeral: true})})
	e.tickUntil(t, "a warm runner", func(st fleet.PoolStatus) bool { return st.Idle == 1 })
	run := e.run(t, onLabels("job", "true", "linux"))
	e.tickUntil(t, "the job to finish", func(fleet.PoolStatus) bool { return e.jobsOf(t, run)[0].State == cikit.JobSucceeded })
	used := e.jobsOf(t, run)[0].Runner
	deadline, extra := time.Now().Add(tickCeiling), 3
	for extra > 0 {
		st := e.tick(t)
		require.Zero(t, st.Decision.Destroy, "tick destroyed a runner: %s", st.Decision.Reason)
		all, err := lb.Instances(context.Background())
		require.NoError(t, err)
		if st.Idle == 1 && st.Starting == 0 && len(all) == 2 {
			extra-- // the replacement is up beside the used runner
		}
		require.True(t, time.Now().Before(deadline), "gave up waiting for the replacement; last status %+v", st)
		time.Sleep(20 * time.Millisecond)
	}
	require.Empty(t, lb.destroyedIDs(), "runners destroyed beside the used one %s", used)
}

// lingerBackend reports the runners that stopped by themselves as still
// running, as a backend whose machines take a while to shut down.
type lingerBackend struct {
	fleet.Backend
	mu        sync.Mutex
	destroyed map[string]bool
}

func (b *lingerBackend) Destroy(ctx context.Context, id string) error {
	b.mu.Lock()
	b.destroyed[id] = true
	b.mu.Unlock()
	return b.Backend.Destroy(ctx, id)
}

func (b *lingerBackend) Instances(ctx context.Context) ([]*fleet.Instance, error) {
	all, err := b.Backend.Instances(ctx)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, in := range all {
		if in.State == fleet.InstanceStopped && !b.destroyed[in.ID] {
			c := *in
			c.State = fleet.InstanceRunning
			all[i] = &c
		}
	}
	return all, nil
}

func (b *lingerBackend) destroyedIDs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Sorted(maps.Keys(b.destroyed))
}

// gatedBackend holds the runners it is asked for as provisioning until
// open, as a backend whose machines take a while to boot.
type gatedBackend struct {
	fleet.Backend
	mu      sync.Mutex
	opened  bool
	pending []*fleet.ProvisionRequest
	created time.Time
}

func (g *gatedBackend) Provision(ctx context.Context, req *fleet.ProvisionRequest) (*fleet.Instance, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.opened {
		return g.Backend.Provision(ctx, req)
	}
	g.pending = append(g.pending, req)
	g.created = time.Now()
	return &fleet.Instance{ID: req.ID, Pool: req.Pool, Labels: req.Labels, State: fleet.InstanceProvisioning, Created: g.created}, nil
}

func (g *gatedBackend) Instances(ctx context.Context) ([]*fleet.Instance, error) {
	all, err := g.Backend.Instances(ctx)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, req := range g.pending {
		all = append(all, &fleet.Instance{ID: req.ID, Pool: req.Pool, Labels: req.Labels, State: fleet.InstanceProvisioning, Created: g.created})
	}
	return all, nil
}

// open starts the runners asked for and every later one at once.
func (g *gatedBackend) open(t *testing.T) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.opened = true
	for _, req := range g.pending {
		_, err := g.Backend.Provision(context.Background(), req)
		require.NoError(t, err)
	}
	g.pending = nil
}

func TestNewManagerValidates(t *testing.T) {
	t.Parallel()
	b, err := local.New(local.Config{Labels: []string{"linux"}})
	require.NoError(t, err)
	defer b.Close()
	s := setup(t).server
	ok := fleet.PoolConfig{Name: "p", Labels: []string{"linux"}, Backend: b, Policy: autoscale.Policy{Max: 1}}
	for name, cfg := range map[string]fleet.ManagerConfig{
		"no server":         {ServerURL: "http://x", RegistrationToken: regToken, Pools: []fleet.PoolConfig{ok}},
		"no server url":     {Server: s, RegistrationToken: regToken, Pools: []fleet.PoolConfig{ok}},
		"bad name":          {Server: s, ServerURL: "http://x", RegistrationToken: regToken, Pools: []fleet.PoolConfig{{Name: "a b", Backend: b, Policy: ok.Policy}}},
		"duplicate":         {Server: s, ServerURL: "http://x", RegistrationToken: regToken, Pools: []fleet.PoolConfig{ok, ok}},
		"bad policy":        {Server: s, ServerURL: "http://x", RegistrationToken: regToken, Pools: []fleet.PoolConfig{{Name: "p", Backend: b}}},
		"unsupported label": {Server: s, ServerURL: "http://x", RegistrationToken: regToken, Pools: []fleet.PoolConfig{{Name: "p", Labels: []string{"gpu"}, Backend: b, Policy: ok.Policy}}},
	} {
		_, err := fleet.NewManager(context.Background(), cfg)
		require.Error(t, err, name)
	}
}

// TestManagerTellsOfUnmatchedJobsOnce: OnUnmatched hears of each attempt
// waiting with labels no pool and no runner has once, however many ticks
// see it waiting, and not of jobs that a pool serves.
func TestManagerTellsOfUnmatchedJobsOnce(t *testing.T) {
	t.Parallel()
	e := newFleet(t)
	var told []string
	m, err := fleet.NewManager(context.Background(), fleet.ManagerConfig{Server: e.server, ServerURL: "http://127.0.0.1:1",
		RegistrationToken: regToken, Pools: []fleet.PoolConfig{{Name: "linux", Labels: []string{"linux"}, Backend: e.backend,
			Policy: autoscale.Policy{Max: 1}}},
		OnUnmatched: func(offers []fleet.Offer, labels []string) {
			for _, o := range offers {
				told = append(told, fmt.Sprintf("%s %v", o.JobID, labels))
			}
		}})
	require.NoError(t, err)
	e.run(t, onLabels("train", "true", "gpu", "large"))
	e.run(t, onLabels("build", "true", "linux"))
	for range 3 {
		require.NoError(t, m.Tick(context.Background()))
	}
	require.Equal(t, []string{"train [gpu large]"}, told)
	e.run(t, onLabels("infer", "true", "large", "gpu"))
	require.NoError(t, m.Tick(context.Background()))
	require.Equal(t, []string{"train [gpu large]", "infer [gpu large]"}, told)
}
