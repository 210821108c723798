// Package fleettest is the conformance suite of fleet.Backend: every
// backend, built in or served as a plugin (package fleet/plugin), passes
// Exercise.
//
// Exercise starts a real fleet.Server on memory stores over HTTP and asks
// the backend for runners pointed at it, so the backend's runners must
// run a runner agent able to run shell steps (echo, sleep); a backend
// whose runners boot slowly sets Config.Timeout.
package fleettest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/lease"
)

// Config describes the backend under test.
type Config struct {
	// New returns a fresh backend for one subtest; it registers its own
	// cleanup with t.Cleanup. Required.
	New func(t *testing.T) fleet.Backend
	// Labels are labels the backend can give runners. Required.
	Labels []string
	// Timeout bounds each wait for a runner to register, run a job or
	// stop. Default: 30 seconds.
	Timeout time.Duration
}

const registrationToken = "fleettest-registration-token"

// platform is the fleet.Server runners are pointed at.
type platform struct {
	jobs   *dag.MemoryStore
	server *fleet.Server
	url    string

	mu         sync.Mutex
	heartbeats map[string]int // heartbeats answered 200, by run ID
}

func newPlatform(t *testing.T) *platform {
	t.Helper()
	jobs := dag.NewMemoryStore(dag.MemoryConfig{})
	leases, err := lease.NewManager(lease.Config{Store: lease.NewMemoryStore(), Jobs: jobs, TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s, err := fleet.NewServer(fleet.ServerConfig{Jobs: jobs, Leases: leases, RegistrationTokens: []string{registrationToken},
		SigningKeys: [][]byte{[]byte(strings.Repeat("fleettest", 4))}, HeartbeatInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	p := &platform{jobs: jobs, server: s, heartbeats: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(srv.Close)
	p.url = srv.URL
	return p
}

// serve passes a request to the server, counting the heartbeats it
// answers 200 (POST /v1/jobs/{run_id}/{job_id}/heartbeat).
func (p *platform) serve(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/jobs/")
	parts := strings.Split(rest, "/")
	if !ok || r.Method != http.MethodPost || len(parts) != 3 || parts[2] != "heartbeat" {
		p.server.ServeHTTP(w, r)
		return
	}
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	p.server.ServeHTTP(sw, r)
	if sw.status == http.StatusOK {
		p.mu.Lock()
		p.heartbeats[parts[0]]++
		p.mu.Unlock()
	}
}

// holds says whether the runner that claimed run runID's job holds it: a
// runner starts a job only once its first heartbeat is answered. The job
// is RUNNING from the claim on, while the claim's answer may still be on
// its way to the runner; a runner stopped then never learns it had a job,
// which stays RUNNING until its lease expires.
func (p *platform) holds(runID string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.heartbeats[runID] > 0
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}

var seq atomic.Int64

func (p *platform) request(pool string, labels []string, ephemeral bool) *fleet.ProvisionRequest {
	return &fleet.ProvisionRequest{ID: fmt.Sprintf("fleettest-%d-%d", time.Now().UnixNano(), seq.Add(1)), Pool: pool, Labels: labels,
		Server: p.url, RegistrationToken: registrationToken, Ephemeral: ephemeral}
}

// run creates a run of one job on labels running script and offers it.
func (p *platform) run(t *testing.T, labels []string, script string) string {
	t.Helper()
	ctx := context.Background()
	run, err := p.jobs.RunCreate(ctx, &dag.RunCreateParams{Jobs: []*cikit.JobSpec{{ID: "job", RunsOn: labels, Steps: []cikit.Step{{Run: script}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.server.DispatchRun(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	return run.ID
}

func (p *platform) job(t *testing.T, runID string) *dag.Job {
	t.Helper()
	jobs, err := p.jobs.JobList(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	return jobs[0]
}

// runner returns the runner registered under name, if any.
func (p *platform) runner(name string) (fleet.RunnerInfo, bool) {
	for _, r := range p.server.Runners() {
		if r.Name == name {
			return r, true
		}
	}
	return fleet.RunnerInfo{}, false
}

// eventually waits for cond, failing the test after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("fleettest: gave up after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Exercise runs the conformance suite against the backend cfg describes.
func Exercise(t *testing.T, cfg Config) {
	if cfg.New == nil || len(cfg.Labels) == 0 {
		t.Fatal("fleettest: Config.New and Config.Labels are required")
	}
	timeout := cmp.Or(cfg.Timeout, 30*time.Second)
	ctx := context.Background()

	t.Run("Info", func(t *testing.T) {
		info, err := cfg.New(t).Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info == nil || info.Name == "" {
			t.Fatalf("Info = %+v: a backend has a name", info)
		}
		if info.MaxRunners < 0 || info.StartupHint < 0 || info.CostPerHour < 0 {
			t.Fatalf("Info = %+v: capacity, start-up and cost hints are not negative", info)
		}
		if ok, missing := info.CanProvide(cfg.Labels); !ok {
			t.Fatalf("Info.Labels %v lack %v, which Config.Labels says the backend provides", info.Labels, missing)
		}
	})

	t.Run("RunnerRegistersAndRunsAJob", func(t *testing.T) {
		p := newPlatform(t) // first, so that its server closes after the runners
		b := cfg.New(t)
		req := p.request("pool-a", cfg.Labels, false)
		in, err := b.Provision(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if in.ID != req.ID || in.Pool != req.Pool || in.Ephemeral || !sameLabels(in.Labels, req.Labels) {
			t.Fatalf("Provision returned %+v for %+v", in, req)
		}
		if in.State != fleet.InstanceProvisioning && in.State != fleet.InstanceRunning {
			t.Fatalf("a new runner is provisioning or running, not %q", in.State)
		}
		eventually(t, timeout, "the runner to register", func() bool {
			r, ok := p.runner(req.ID)
			return ok && containsAll(r.Labels, cfg.Labels)
		})
		runID := p.run(t, cfg.Labels, "echo conformance")
		eventually(t, timeout, "the job to succeed", func() bool { return p.job(t, runID).State == cikit.JobSucceeded })
		got, err := b.Instance(ctx, req.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != fleet.InstanceRunning {
			t.Fatalf("a runner that ran a job and waits for more is running, not %q (%s)", got.State, got.Message)
		}
		// The runner takes the next job too.
		next := p.run(t, cfg.Labels, "true")
		eventually(t, timeout, "the second job to succeed", func() bool { return p.job(t, next).State == cikit.JobSucceeded })
	})

	t.Run("ProvisionIsIdempotent", func(t *testing.T) {
		p := newPlatform(t) // first, so that its server closes after the runners
		b := cfg.New(t)
		req := p.request("pool-a", cfg.Labels, false)
		first, err := b.Provision(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		again, err := b.Provision(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if again.ID != first.ID || !again.Created.Equal(first.Created) {
			t.Fatalf("the second Provision of %s made another runner: %+v, then %+v", req.ID, first, again)
		}
		all, err := b.Instances(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, in := range all {
			if in.ID == req.ID {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("Instances lists %s %d times", req.ID, n)
		}
	})

	t.Run("InstancesListsAllByID", func(t *testing.T) {
		p := newPlatform(t) // first, so that its server closes after the runners
		b := cfg.New(t)
		var ids []string
		for range 3 {
			req := p.request("pool-b", cfg.Labels, false)
			if _, err := b.Provision(ctx, req); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, req.ID)
		}
		all, err := b.Instances(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, in := range all {
			got = append(got, in.ID)
		}
		if !slices.IsSorted(got) {
			t.Fatalf("Instances are not ordered by ID: %v", got)
		}
		for _, id := range ids {
			if !slices.Contains(got, id) {
				t.Fatalf("Instances %v lack %s", got, id)
			}
		}
	})

	t.Run("DestroyStopsTheRunnerAndItsJob", func(t *testing.T) {
		p := newPlatform(t) // first, so that its server closes after the runners
		b := cfg.New(t)
		req := p.request("pool-a", cfg.Labels, false)
		if _, err := b.Provision(ctx, req); err != nil {
			t.Fatal(err)
		}
		runID := p.run(t, cfg.Labels, "sleep 600")
		eventually(t, timeout, "the runner to hold the job", func() bool { return p.holds(runID) })
		if err := b.Destroy(ctx, req.ID); err != nil {
			t.Fatal(err)
		}
		in, err := b.Instance(ctx, req.ID)
		switch {
		case errors.Is(err, cikit.ErrNotFound):
		case err != nil:
			t.Fatal(err)
		case !in.State.Ended():
			t.Fatalf("a destroyed runner is %q", in.State)
		}
		all, err := b.Instances(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range all {
			if in.ID == req.ID && !in.State.Ended() {
				t.Fatalf("Instances lists the destroyed runner as %q", in.State)
			}
		}
		// The job's runner is gone: it sends no more heartbeats, and the
		// attempt it ran does not stay RUNNING as if it lived (the
		// platform here has no reaper: the runner must have given the
		// job back, or failed or cancelled it).
		eventually(t, timeout, "the destroyed runner to stop calling", func() bool {
			r, ok := p.runner(req.ID)
			return ok && time.Since(r.LastSeen) > 4*time.Second
		})
		if j := p.job(t, runID); j.State == cikit.JobRunning && j.Attempt == 1 {
			t.Fatalf("the job of a destroyed runner is still RUNNING at attempt 1")
		}
		if err := b.Destroy(ctx, req.ID); err != nil {
			t.Fatalf("destroying a destroyed runner: %v", err)
		}
	})

	t.Run("UnknownRunners", func(t *testing.T) {
		b := cfg.New(t)
		if _, err := b.Instance(ctx, "fleettest-never-provisioned"); !errors.Is(err, cikit.ErrNotFound) {
			t.Fatalf("Instance of an unknown runner: %v, want an error wrapping cikit.ErrNotFound", err)
		}
		if err := b.Destroy(ctx, "fleettest-never-provisioned"); err != nil {
			t.Fatalf("Destroy of an unknown runner: %v, want nil", err)
		}
	})

	t.Run("EphemeralRunnerTakesOneJob", func(t *testing.T) {
		p := newPlatform(t) // first, so that its server closes after the runners
		b := cfg.New(t)
		req := p.request("pool-e", cfg.Labels, true)
		in, err := b.Provision(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if !in.Ephemeral {
			t.Fatalf("Provision of an ephemeral runner returned %+v", in)
		}
		first := p.run(t, cfg.Labels, "echo once")
		eventually(t, timeout, "the job to succeed", func() bool { return p.job(t, first).State == cikit.JobSucceeded })
		eventually(t, timeout, "the ephemeral runner to stop", func() bool {
			in, err := b.Instance(ctx, req.ID)
			return errors.Is(err, cikit.ErrNotFound) || (err == nil && in.State == fleet.InstanceStopped)
		})
		second := p.run(t, cfg.Labels, "true")
		time.Sleep(200 * time.Millisecond)
		if st := p.job(t, second).State; st != cikit.JobQueued {
			t.Fatalf("after its one job an ephemeral runner took another: the second job is %s", st)
		}
	})

	t.Run("InvalidRequests", func(t *testing.T) {
		p := newPlatform(t) // first, so that its server closes after the runners
		b := cfg.New(t)
		for name, req := range map[string]*fleet.ProvisionRequest{
			"no ID":          {Server: p.url, RegistrationToken: registrationToken, Labels: cfg.Labels},
			"space in ID":    {ID: "a b", Server: p.url, RegistrationToken: registrationToken, Labels: cfg.Labels},
			"no server":      {ID: "fleettest-x", RegistrationToken: registrationToken, Labels: cfg.Labels},
			"no token":       {ID: "fleettest-x", Server: p.url, Labels: cfg.Labels},
			"an empty label": {ID: "fleettest-x", Server: p.url, RegistrationToken: registrationToken, Labels: []string{""}},
		} {
			if _, err := b.Provision(ctx, req); err == nil {
				t.Errorf("%s: Provision(%+v) succeeded", name, req)
			}
		}
		all, err := b.Instances(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 0 {
			t.Fatalf("refused requests left runners: %+v", all)
		}
	})

	t.Run("UnsupportedLabels", func(t *testing.T) {
		p := newPlatform(t) // first, so that its server closes after the runners
		b := cfg.New(t)
		info, err := b.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.Labels == nil {
			t.Skip("the backend gives runners any label")
		}
		req := p.request("pool-a", append(slices.Clone(cfg.Labels), "fleettest-no-such-label"), false)
		if _, err := b.Provision(ctx, req); !errors.Is(err, fleet.ErrLabelsUnsupported) {
			t.Fatalf("Provision with a label the backend lacks: %v, want an error wrapping fleet.ErrLabelsUnsupported", err)
		}
	})

	t.Run("CancelledContext", func(t *testing.T) {
		p := newPlatform(t) // first, so that its server closes after the runners
		b := cfg.New(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := b.Provision(cctx, p.request("pool-a", cfg.Labels, false)); !errors.Is(err, context.Canceled) {
			t.Fatalf("Provision with a cancelled context: %v, want an error wrapping context.Canceled", err)
		}
		if _, err := b.Instances(cctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Instances with a cancelled context: %v, want an error wrapping context.Canceled", err)
		}
	})
}

func sameLabels(a, b []string) bool {
	return containsAll(a, b) && containsAll(b, a)
}

func containsAll(have, want []string) bool {
	for _, l := range want {
		if !slices.Contains(have, l) {
			return false
		}
	}
	return true
}
