package agent_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/fleet/agent"
	"github.com/cikit/cikit/fleet/process"
	"github.com/cikit/cikit/lease"
	"github.com/cikit/cikit/logs"
)

const regToken = "registration-token-0123456789"

// fakeExecutor writes a line, then waits for release or its context.
type fakeExecutor struct {
	started   chan *cikit.JobSpec
	release   chan agent.Result
	cancelled atomic.Int32
	leases    chan *process.LeaseDeadline // each job's, as it starts
	contexts  chan *cikit.JobContext      // each job's, as it starts
}

func newFakeExecutor() *fakeExecutor {
	return &fakeExecutor{started: make(chan *cikit.JobSpec, 10), release: make(chan agent.Result, 10), leases: make(chan *process.LeaseDeadline, 10),
		contexts: make(chan *cikit.JobContext, 10)}
}

func (e *fakeExecutor) Run(ctx context.Context, job process.Job) agent.Result {
	spec := job.Spec
	e.leases <- job.Lease
	e.contexts <- job.Context
	job.OnStep(0)
	_, _ = io.WriteString(job.Output, "hello from "+spec.ID+"\n")
	e.started <- spec
	select {
	case r := <-e.release:
		return r
	case <-ctx.Done():
		e.cancelled.Add(1)
		return agent.Result{State: cikit.JobCancelled, ExitCode: -1, Reason: "cancelled"}
	}
}

type env struct {
	jobs     *dag.MemoryStore
	server   *fleet.Server
	leases   *lease.Manager
	store    *lease.MemoryStore
	logs     *logs.Hub
	url      string
	exec     *fakeExecutor
	failHB   atomic.Bool  // heartbeats answered 503
	failedHB atomic.Int32 // heartbeats so answered
	// failSecrets is how many secrets calls to answer 503 next.
	failSecrets atomic.Int32
	mu          sync.Mutex
	calls       []string // job-scoped calls answered, "<call> <status>"
}

// heartbeatInterval is the interval the tests' server gives runners:
// short, so that cancel requests and stale answers arrive quickly.
const heartbeatInterval = 200 * time.Millisecond

// longTTL is the lease of the tests that are not about losing it: a
// runner on a busy machine can go seconds without a heartbeat answered,
// and would then fence itself.
const longTTL = time.Minute

// option changes the configuration of a test's log hub and server.
type option func(*logs.Config, *fleet.ServerConfig)

// setup returns a server whose leases last ttl.
func setup(t *testing.T, ttl time.Duration, opts ...option) *env {
	t.Helper()
	e := &env{exec: newFakeExecutor()}
	e.jobs = dag.NewMemoryStore(dag.MemoryConfig{})
	var err error
	e.store = lease.NewMemoryStore()
	e.leases, err = lease.NewManager(lease.Config{Store: e.store, Jobs: e.jobs, TTL: ttl})
	require.NoError(t, err)
	lc := logs.Config{Sink: &logs.MemorySink{}, Segments: &logs.MemorySegmentStore{}}
	sc := fleet.ServerConfig{Jobs: e.jobs, Leases: e.leases, RegistrationTokens: []string{regToken},
		SigningKeys: [][]byte{[]byte(strings.Repeat("k", 32))}, HeartbeatInterval: heartbeatInterval, AuthorizeFollow: logs.AllowAll}
	for _, o := range opts {
		o(&lc, &sc)
	}
	e.logs, err = logs.NewHub(lc)
	require.NoError(t, err)
	sc.Logs = e.logs
	e.server, err = fleet.NewServer(sc)
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/heartbeat") && e.failHB.Load() {
			e.failedHB.Add(1)
			http.Error(w, `{"error":"down"}`, http.StatusServiceUnavailable)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/secrets") && e.failSecrets.Add(-1) >= 0 {
			http.Error(w, `{"error":"the secret providers are unavailable; try again"}`, http.StatusServiceUnavailable)
			return
		}
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		e.server.ServeHTTP(rec, r)
		if i := strings.LastIndexByte(r.URL.Path, '/'); strings.HasPrefix(r.URL.Path, "/v1/jobs/") && !strings.HasSuffix(r.URL.Path, "/claim") {
			e.mu.Lock()
			e.calls = append(e.calls, r.URL.Path[i+1:]+" "+http.StatusText(rec.status))
			e.mu.Unlock()
		}
	}))
	t.Cleanup(srv.Close)
	e.url = srv.URL
	return e
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(s int) { r.status = s; r.ResponseWriter.WriteHeader(s) }
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (e *env) callsMade() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.calls...)
}

func (e *env) newRun(t *testing.T) string {
	t.Helper()
	run, err := e.jobs.RunCreate(context.Background(), &dag.RunCreateParams{Jobs: []*cikit.JobSpec{{ID: "build", Steps: []cikit.Step{{Run: "make"}}}}})
	require.NoError(t, err)
	require.NoError(t, e.server.DispatchRun(context.Background(), run.ID))
	return run.ID
}

func (e *env) job(t *testing.T, runID string) *dag.Job {
	t.Helper()
	jobs, err := e.jobs.JobList(context.Background(), runID)
	require.NoError(t, err)
	return jobs[0]
}

// start runs an agent until the test ends; stop ends it early, and
// shutdown begins that (the agent's context ends) without waiting.
func (e *env) start(t *testing.T, grace time.Duration) (stop, shutdown func()) {
	t.Helper()
	a, err := agent.New(agent.Config{Server: e.url, RegistrationToken: regToken, Name: "test", Executor: e.exec,
		Wait: time.Second, ChunkInterval: 20 * time.Millisecond, ShutdownGrace: grace})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			require.NoError(t, <-done)
		})
	}
	t.Cleanup(stop)
	return stop, cancel
}

// waitClaiming waits for the one agent to wait in a claim: it runs no job,
// and has sent all it had to about the last one.
func waitClaiming(t *testing.T, e *env) {
	t.Helper()
	require.Eventually(t, func() bool {
		r := e.server.Runners()
		return len(r) == 1 && r[0].State == fleet.RunnerIdle
	}, time.Minute, 5*time.Millisecond, "the agent claims again")
}

func waitState(t *testing.T, e *env, runID string, want cikit.JobState) {
	t.Helper()
	require.Eventually(t, func() bool { return e.job(t, runID).State == want }, time.Minute, 5*time.Millisecond, "job %s", want)
}

func TestAgentRunsAJob(t *testing.T) {
	t.Parallel()
	e := setup(t, longTTL)
	e.start(t, time.Second)
	runID := e.newRun(t)
	<-e.exec.started
	waitState(t, e, runID, cikit.JobRunning)
	e.exec.release <- agent.Result{State: cikit.JobFailed, ExitCode: 2, Reason: "step 1 exited with 2", FailureClass: cikit.FailureScript}
	waitState(t, e, runID, cikit.JobFailed)
	j := e.job(t, runID)
	require.Equal(t, 2, j.ExitCode)
	// The job is FAILED while the server answers the completion, before
	// the call is recorded.
	require.Eventually(t, func() bool { return slices.Contains(e.callsMade(), "complete OK") }, time.Minute, 5*time.Millisecond,
		"the completion answered")
}

// TestAgentLeaseDeadline: the executor gets the lease's end, which each
// confirmed heartbeat moves on and which is never after the lease's end
// on the server.
func TestAgentLeaseDeadline(t *testing.T) {
	t.Parallel()
	e := setup(t, longTTL)
	e.start(t, time.Second)
	runID := e.newRun(t)
	<-e.exec.started
	dl := <-e.exec.leases
	require.NotNil(t, dl)
	serverEnd := func() time.Time {
		l, err := e.store.LeaseGet(context.Background(), runID, "build")
		require.NoError(t, err)
		return l.Expires
	}
	first := dl.Until()
	// This machine's wall clock is the server's: the deadline, taken
	// before the heartbeat was sent, is not after the lease's end.
	require.False(t, first.Round(0).After(serverEnd()), "deadline %s, lease end %s", first, serverEnd())
	require.Eventually(t, func() bool { return dl.Until().After(first) }, time.Minute, 5*time.Millisecond, "a heartbeat renews it")
	e.exec.release <- agent.Result{State: cikit.JobSucceeded}
	waitState(t, e, runID, cikit.JobSucceeded)
}

// TestAgentMaxJobs: a single-use agent takes one job, reports it and
// returns; the next job waits for another runner.
func TestAgentMaxJobs(t *testing.T) {
	t.Parallel()
	e := setup(t, longTTL)
	a, err := agent.New(agent.Config{Server: e.url, RegistrationToken: regToken, Name: "once", Executor: e.exec,
		Wait: 100 * time.Millisecond, MaxJobs: 1})
	require.NoError(t, err)
	first, second := e.newRun(t), e.newRun(t)
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background()) }()
	<-e.exec.started
	e.exec.release <- agent.Result{State: cikit.JobSucceeded}
	require.NoError(t, <-done)
	require.Equal(t, cikit.JobSucceeded, e.job(t, first).State)
	require.Equal(t, cikit.JobQueued, e.job(t, second).State)
}

// TestAgentStreamsItsLog: the job's output reaches the server in chunks
// while it runs, and the finished log is complete.
func TestAgentStreamsItsLog(t *testing.T) {
	t.Parallel()
	e := setup(t, longTTL)
	e.start(t, time.Second)
	runID := e.newRun(t)
	<-e.exec.started
	key := logs.Key{RunID: runID, JobID: "build", Attempt: 1}
	require.Eventually(t, func() bool {
		f, err := e.logs.Follow(context.Background(), key, 0)
		if err != nil {
			return false
		}
		defer f.Close()
		return true
	}, time.Minute, 5*time.Millisecond, "the output is sent while the job runs")
	e.exec.release <- agent.Result{State: cikit.JobSucceeded}
	waitState(t, e, runID, cikit.JobSucceeded)
	require.Contains(t, e.callsMade(), "finish OK")
	f, err := e.logs.Follow(context.Background(), key, 0)
	require.NoError(t, err)
	defer f.Close()
	var got []byte
	for {
		ev, err := f.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		got = append(got, ev.Data...)
	}
	require.Equal(t, "hello from build\n", string(got))
	require.True(t, f.Result().Complete, "the runner's totals match")
}

// TestAgentDoesNotStartWithoutRenewal: a job whose first heartbeat fails
// is not started, and nothing is reported about it.
func TestAgentDoesNotStartWithoutRenewal(t *testing.T) {
	t.Parallel()
	e := setup(t, longTTL)
	e.failHB.Store(true)
	e.start(t, time.Second)
	runID := e.newRun(t)
	require.Eventually(t, func() bool { return e.failedHB.Load() > 0 }, time.Minute, 5*time.Millisecond, "a heartbeat")
	waitClaiming(t, e) // done with the job
	require.Equal(t, cikit.JobRunning, e.job(t, runID).State, "claimed")
	select {
	case <-e.exec.started:
		t.Fatal("the job was started")
	default:
	}
	require.Empty(t, e.callsMade(), "nothing but the failed heartbeat")
}

func TestAgentObeysCancel(t *testing.T) {
	t.Parallel()
	e := setup(t, longTTL)
	e.start(t, time.Second)
	runID := e.newRun(t)
	<-e.exec.started
	waitState(t, e, runID, cikit.JobRunning)
	_, err := e.jobs.RunCancel(context.Background(), runID)
	require.NoError(t, err)
	waitState(t, e, runID, cikit.JobCancelled)
	require.EqualValues(t, 1, e.exec.cancelled.Load())
}

// TestAgentFencesItselfWithoutHeartbeats: when no heartbeat succeeds for a
// lease duration the agent kills the job and reports nothing.
func TestAgentFencesItselfWithoutHeartbeats(t *testing.T) {
	t.Parallel()
	e := setup(t, 800*time.Millisecond)
	e.start(t, time.Second)
	runID := e.newRun(t)
	<-e.exec.started
	e.failHB.Store(true)
	require.Eventually(t, func() bool { return e.exec.cancelled.Load() == 1 }, time.Minute, 5*time.Millisecond, "the job is killed")
	waitClaiming(t, e) // done with the job: it sent all it would
	for _, c := range e.callsMade() {
		require.NotContains(t, c, "complete", "a fenced agent reports nothing")
	}
	require.Equal(t, cikit.JobRunning, e.job(t, runID).State, "the job is the reaper's now")
}

// TestAgentStopsWhenStale: a heartbeat or log chunk refused as stale kills
// the job; the agent reports nothing about it.
func TestAgentStopsWhenStale(t *testing.T) {
	t.Parallel()
	e := setup(t, longTTL)
	e.start(t, time.Second)
	runID := e.newRun(t)
	<-e.exec.started
	j := e.job(t, runID)
	// The attempt ends behind the runner's back, as the reaper would end it.
	_, err := e.jobs.JobComplete(context.Background(), &dag.JobCompleteParams{RunID: runID, JobID: "build", Attempt: j.Attempt,
		Outcome: cikit.JobFailed, ExitCode: -1, Reason: "runner_lost: test", FailureClass: cikit.FailureScript})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return e.exec.cancelled.Load() == 1 }, time.Minute, 5*time.Millisecond, "the job is killed")
	calls := e.callsMade()
	refused := false
	for _, c := range calls {
		require.NotContains(t, c, "complete")
		refused = refused || strings.HasSuffix(c, " Conflict")
	}
	require.True(t, refused, "a heartbeat or a log chunk was refused as stale: %v", calls)
}

// TestAgentShutdown: a job still running when the agent stops gets the
// grace period, then is cancelled and returned for another attempt.
func TestAgentShutdown(t *testing.T) {
	t.Parallel()
	e := setup(t, longTTL)
	stop, _ := e.start(t, 100*time.Millisecond)
	runID := e.newRun(t)
	<-e.exec.started
	waitState(t, e, runID, cikit.JobRunning)
	stop()
	require.EqualValues(t, 1, e.exec.cancelled.Load())
	require.Contains(t, e.callsMade(), "return OK")
	j := e.job(t, runID)
	require.Equal(t, 2, j.Attempt, "the job gets a new attempt")
	require.Contains(t, []cikit.JobState{cikit.JobReady, cikit.JobQueued}, j.State)

	// A job that finishes within the grace is reported normally.
	e2 := setup(t, longTTL)
	stop, shutdown := e2.start(t, time.Minute)
	runID = e2.newRun(t)
	<-e2.exec.started
	shutdown()
	e2.exec.release <- agent.Result{State: cikit.JobSucceeded, ExitCode: 0}
	stop()
	require.Equal(t, cikit.JobSucceeded, e2.job(t, runID).State)
}

// TestAgentRegister: Register tells a refused registration apart, and Run
// after a successful Register does not register again.
func TestAgentRegister(t *testing.T) {
	t.Parallel()
	e := setup(t, longTTL)
	bad, err := agent.New(agent.Config{Server: e.url, RegistrationToken: "not-the-token", Executor: e.exec})
	require.NoError(t, err)
	require.ErrorContains(t, bad.Register(context.Background()), "registering")

	var registrations atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/runners" {
			registrations.Add(1)
		}
		e.server.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	a, err := agent.New(agent.Config{Server: srv.URL, RegistrationToken: regToken, Name: "registered", Executor: e.exec,
		Wait: time.Second, ChunkInterval: 20 * time.Millisecond, MaxJobs: 1})
	require.NoError(t, err)
	require.NoError(t, a.Register(context.Background()))
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background()) }()
	e.newRun(t)
	<-e.exec.started
	e.exec.release <- agent.Result{State: cikit.JobSucceeded}
	require.NoError(t, <-done)
	require.EqualValues(t, 1, registrations.Load())
}

// TestAgentOversizedSpecFailsAsConfig: a stored spec larger than a runner
// takes (from a compiler that did not bound specs) fails its job for good
// at the claim, as a configuration failure: not handed to the runner,
// whose decode would fail and whose attempts would each end as a lost
// runner, and not retried, even under a retry policy.
func TestAgentOversizedSpecFailsAsConfig(t *testing.T) {
	t.Parallel()
	e := setup(t, longTTL)
	huge := &cikit.JobSpec{ID: "huge", Steps: []cikit.Step{{Run: strings.Repeat("x", cikit.MaxJobSpecBytes)}}, Retry: &cikit.Retry{Max: 2}}
	run, err := e.jobs.RunCreate(context.Background(), &dag.RunCreateParams{Jobs: []*cikit.JobSpec{
		huge, {ID: "build", Steps: []cikit.Step{{Run: "make"}}}}})
	require.NoError(t, err)
	require.NoError(t, e.server.DispatchRun(context.Background(), run.ID))
	e.start(t, time.Second)
	// The runner goes on to the next job.
	spec := <-e.exec.started
	require.Equal(t, "build", spec.ID)
	e.exec.release <- agent.Result{State: cikit.JobSucceeded}
	jobs := func() map[string]*dag.Job {
		list, err := e.jobs.JobList(context.Background(), run.ID)
		require.NoError(t, err)
		m := map[string]*dag.Job{}
		for _, j := range list {
			m[j.ID()] = j
		}
		return m
	}
	require.Eventually(t, func() bool {
		m := jobs()
		return m["build"].State == cikit.JobSucceeded && m["huge"].State.Terminal()
	}, time.Minute, 5*time.Millisecond)
	j := jobs()["huge"]
	require.Equal(t, cikit.JobFailed, j.State)
	require.Equal(t, 1, j.Attempt, "not retried")
	require.Contains(t, j.Reason, "more than the 4 MiB a runner takes (cikit.MaxJobSpecBytes)")
	require.NotContains(t, j.Reason, lease.ReasonRunnerLost)
	require.Empty(t, e.exec.started, "the runner was never handed the spec")
}

// chattyExecutor writes n bytes of output in lines, over two steps.
type chattyExecutor struct{ n int }

func (c chattyExecutor) Run(ctx context.Context, job process.Job) agent.Result {
	step, out := job.OnStep, job.Output
	for i := 0; i < c.n; {
		if i == 0 || i == c.n/2 {
			step(i / max(c.n/2, 1))
		}
		line := fmt.Sprintf("line %d of the output\n", i)
		_, _ = io.WriteString(out, line)
		i += len(line)
	}
	return agent.Result{State: cikit.JobSucceeded}
}

// logOf reads the finished log of attempt 1 of job of runID.
func (e *env) logOf(t *testing.T, runID, job string) (string, *logs.FinishResult) {
	t.Helper()
	f, err := e.logs.Follow(context.Background(), logs.Key{RunID: runID, JobID: job, Attempt: 1}, 0)
	require.NoError(t, err)
	defer f.Close()
	var b strings.Builder
	for {
		ev, err := f.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return b.String(), f.Result()
		}
		require.NoError(t, err)
		b.Write(ev.Data)
	}
}

func (e *env) startWith(t *testing.T, exec agent.Executor) {
	t.Helper()
	a, err := agent.New(agent.Config{Server: e.url, RegistrationToken: regToken, Name: "test", Executor: exec,
		Wait: time.Second, ChunkInterval: 20 * time.Millisecond, ChunkBytes: 4 << 10})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
}

// TestAgentCutsItsLog: the runner stops sending output at the server's
// limit and sends the truncation line in its place, so that the server
// receives no byte past it: the log is complete as sent, says where it
// was cut, and the totals count what was dropped. The job keeps its
// result.
func TestAgentCutsItsLog(t *testing.T) {
	t.Parallel()
	e := setup(t, longTTL, func(lc *logs.Config, _ *fleet.ServerConfig) { lc.MaxLogBytes = 16 << 10 })
	e.startWith(t, chattyExecutor{n: 100 << 10})
	runID := e.newRun(t)
	waitState(t, e, runID, cikit.JobSucceeded)
	got, res := e.logOf(t, runID, "build")
	marker := cikit.LogTruncatedLine(16 << 10)
	require.True(t, strings.HasSuffix(got, marker), "the log ends with the truncation line")
	require.Len(t, got, 16<<10+len(marker))
	require.True(t, strings.HasPrefix(got, "line 0 of the output\n"))
	require.True(t, res.Complete, "the server got exactly what the runner sent")
	dropped, truncated := e.logs.Truncated(logs.Key{RunID: runID, JobID: "build", Attempt: 1})
	require.True(t, truncated)
	require.Greater(t, dropped, int64(80<<10), "the rest of 100 KiB, as the runner counted it")
	require.Empty(t, e.job(t, runID).Reason)
}

// TestAgentFailsATruncatedLog: with FailTruncatedLogs, a job whose log
// was cut fails, with a reason naming the limit.
func TestAgentFailsATruncatedLog(t *testing.T) {
	t.Parallel()
	e := setup(t, longTTL, func(lc *logs.Config, sc *fleet.ServerConfig) {
		lc.MaxLogBytes = 16 << 10
		sc.FailTruncatedLogs = true
	})
	e.startWith(t, chattyExecutor{n: 100 << 10})
	runID := e.newRun(t)
	waitState(t, e, runID, cikit.JobFailed)
	require.Contains(t, e.job(t, runID).Reason, "the log was truncated at 16 KiB (")
	require.Contains(t, e.job(t, runID).Reason, "bytes of output dropped), and this server fails a job whose log is truncated")

	// Under the limit, the job keeps its success.
	e = setup(t, longTTL, func(lc *logs.Config, sc *fleet.ServerConfig) {
		lc.MaxLogBytes = 16 << 10
		sc.FailTruncatedLogs = true
	})
	e.startWith(t, chattyExecutor{n: 1 << 10})
	short := e.newRun(t)
	waitState(t, e, short, cikit.JobSucceeded)
}

// TestAgentPassesTheJobContextAndReportsTheResult: the executor is given
// the run's context, the source the server minted and the outputs of the
// jobs needed; what it reports (outputs, annotations, commit, checkout
// duration, env names, the image and its digest) is stored with the job,
// and its outputs reach the job that needs it. The job token fetches the run's repository while its attempt
// runs, and nothing else.
func TestAgentPassesTheJobContextAndReportsTheResult(t *testing.T) {
	t.Parallel()
	minted := make(chan fleet.JobRef, 10)
	e := setup(t, longTTL, func(_ *logs.Config, sc *fleet.ServerConfig) {
		sc.Source = fleet.SourceMinterFunc(func(_ context.Context, run *cikit.RunContext, job fleet.JobRef) (*cikit.CheckoutSource, error) {
			minted <- job
			return &cikit.CheckoutSource{URL: "https://git.example/" + run.Repository + ".git", Username: "cikit", Token: job.Token}, nil
		})
		sc.RunURL = func(runID string) string { return "https://ci.example/runs/" + runID }
	})
	ctx := context.Background()
	rc := &cikit.RunContext{Provider: "github", Repository: "acme/api", Event: "push", Ref: "refs/heads/main", RefName: "main",
		RefType: "branch", SHA: "0123456789abcdef0123456789abcdef01234567", Actor: "octocat", Payload: []byte(`{"ref":"refs/heads/main"}`)}
	step := []cikit.Step{{Run: "make"}}
	run, err := e.jobs.RunCreate(ctx, &dag.RunCreateParams{Context: rc, Jobs: []*cikit.JobSpec{
		{ID: "a", Steps: step, Outputs: map[string]string{"x": "${{ steps.s.outputs.x }}"}},
		{ID: "b", Needs: []string{"a"}, Steps: step}}})
	require.NoError(t, err)
	require.NoError(t, e.server.DispatchRun(ctx, run.ID))
	e.start(t, time.Second)

	jc := <-e.exec.contexts
	<-e.exec.started
	require.Equal(t, run.ID, jc.RunID)
	require.Equal(t, 1, jc.Attempt)
	require.Equal(t, "https://ci.example/runs/"+run.ID, jc.RunURL)
	require.Equal(t, rc.Repository, jc.Repository)
	require.Equal(t, rc.SHA, jc.SHA)
	require.JSONEq(t, string(rc.Payload), string(jc.Payload))
	require.Empty(t, jc.Needs)
	ref := <-minted
	require.Equal(t, fleet.JobRef{RunID: run.ID, JobID: "a", Attempt: 1, Token: ref.Token}, ref)
	require.Equal(t, "https://git.example/acme/api.git", jc.Source.URL)
	require.Equal(t, ref.Token, jc.Source.Token)

	got, err := e.server.AuthorizeFetch(ctx, jc.Source.Token, "acme/api")
	require.NoError(t, err, "the job token fetches its run's repository while the job runs")
	require.Equal(t, "a", got.JobID)
	_, err = e.server.AuthorizeFetch(ctx, jc.Source.Token, "acme/other")
	require.ErrorIs(t, err, fleet.ErrFetchRefused, "another repository")
	_, err = e.server.AuthorizeFetch(ctx, "not-a-token", "acme/api")
	require.ErrorIs(t, err, fleet.ErrFetchRefused)

	report := agent.Result{State: cikit.JobSucceeded, Outputs: map[string]string{"x": "42", "multi": "a\nb"},
		Annotations: []cikit.Annotation{{Level: "error", Message: "broken", File: "main.go", Line: 7, Step: "test"}},
		Commit:      rc.SHA, CheckoutDuration: 1500 * time.Millisecond, EnvNames: []string{"CI", "GITHUB_SHA"},
		ImageRef: "alpine:3.19", ImageDigest: "sha256:" + strings.Repeat("c0ffee42", 8)}
	e.exec.release <- report
	jc = <-e.exec.contexts
	<-e.exec.started
	require.Equal(t, map[string]cikit.NeedResult{"a": {Result: cikit.JobSucceeded, Outputs: report.Outputs}}, jc.Needs,
		"b sees a's result and outputs")
	a, err := e.jobs.JobGet(ctx, run.ID, "a")
	require.NoError(t, err)
	require.Equal(t, &dag.JobResult{Outputs: report.Outputs, Annotations: report.Annotations, Commit: rc.SHA,
		CheckoutDuration: report.CheckoutDuration, EnvNames: report.EnvNames, ImageRef: report.ImageRef, ImageDigest: report.ImageDigest}, a.Result)
	_, err = e.server.AuthorizeFetch(ctx, ref.Token, "acme/api")
	require.ErrorIs(t, err, fleet.ErrFetchRefused, "a's attempt has ended: its token fetches no more")

	e.exec.release <- agent.Result{State: cikit.JobSucceeded}
	require.Eventually(t, func() bool {
		r, err := e.jobs.RunGet(ctx, run.ID)
		return err == nil && r.State == cikit.RunSucceeded
	}, time.Minute, 5*time.Millisecond)
	b, err := e.jobs.JobGet(ctx, run.ID, "b")
	require.NoError(t, err)
	require.Nil(t, b.Result, "a completion without a report records none")
}

// TestAgentReportsARefusedReportAsAFailure: an output past
// cikit.MaxOutputValueBytes is refused by the server, and the agent then
// reports the job failed, naming the field, instead of leaving it to be
// retried as a lost runner.
func TestAgentReportsARefusedReportAsAFailure(t *testing.T) {
	t.Parallel()
	e := setup(t, longTTL)
	e.start(t, time.Second)
	runID := e.newRun(t)
	<-e.exec.contexts
	<-e.exec.started
	e.exec.release <- agent.Result{State: cikit.JobSucceeded, Outputs: map[string]string{"big": strings.Repeat("x", cikit.MaxOutputValueBytes+1)}}
	waitState(t, e, runID, cikit.JobFailed)
	j := e.job(t, runID)
	require.Contains(t, j.Reason, "the server refused the job's report")
	require.Contains(t, j.Reason, "outputs.big")
	require.Nil(t, j.Result)
}

// TestAgentReportsARefusedImageDigestAsAFailure: a report of nothing but
// an image whose digest is not sha256:<64 hex> is refused too, and the
// job fails naming the field rather than being left to its lease.
func TestAgentReportsARefusedImageDigestAsAFailure(t *testing.T) {
	t.Parallel()
	e := setup(t, longTTL)
	e.start(t, time.Second)
	runID := e.newRun(t)
	<-e.exec.contexts
	<-e.exec.started
	e.exec.release <- agent.Result{State: cikit.JobSucceeded, ImageRef: "alpine:3.19", ImageDigest: "sha256:c0ffee"}
	waitState(t, e, runID, cikit.JobFailed)
	j := e.job(t, runID)
	require.Contains(t, j.Reason, "the server refused the job's report")
	require.Contains(t, j.Reason, "image_digest")
	require.Nil(t, j.Result)
}
