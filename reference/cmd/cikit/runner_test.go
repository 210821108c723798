package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	ck "github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/fleet/process"
	"github.com/cikit/cikit/internal/proctest"
	"github.com/cikit/cikit/internal/testenv"
	"github.com/cikit/cikit/lease"
	"github.com/cikit/cikit/logs"
)

const runnerRegToken = "registration-token-for-tests"

// call is one runner call the platform answered.
type call struct {
	path    string
	attempt int // of the job token's claim; 0 for calls without one
	status  int
	at      time.Time
}

// platform is a fleet server with a reaper, recording every call.
type platform struct {
	url       string
	jobs      *dag.MemoryStore
	logs      *logs.Hub
	server    *fleet.Server
	ttl       time.Duration
	reapEvery time.Duration
	grace     time.Duration // the reaper's

	mu     sync.Mutex
	tokens map[string]int // job token → attempt
	calls  []call
	claims []time.Time // when each claim was answered with a job
}

type capture struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (c *capture) WriteHeader(s int) { c.status = s; c.ResponseWriter.WriteHeader(s) }
func (c *capture) Write(p []byte) (int, error) {
	c.body.Write(p)
	return c.ResponseWriter.Write(p)
}

func newPlatform(t *testing.T) *platform {
	t.Helper()
	p := &platform{tokens: map[string]int{}, ttl: 2 * time.Second, reapEvery: 500 * time.Millisecond, grace: 3 * time.Second}
	p.jobs = dag.NewMemoryStore(dag.MemoryConfig{})
	m, err := lease.NewManager(lease.Config{Store: lease.NewMemoryStore(), Jobs: p.jobs, TTL: p.ttl})
	require.NoError(t, err)
	p.logs, err = logs.NewHub(logs.Config{Sink: &logs.MemorySink{}, Segments: &logs.MemorySegmentStore{}})
	require.NoError(t, err)
	p.server, err = fleet.NewServer(fleet.ServerConfig{Jobs: p.jobs, Leases: m, RegistrationTokens: []string{runnerRegToken}, Logs: p.logs,
		SigningKeys: [][]byte{[]byte(strings.Repeat("s", 32))}, HeartbeatInterval: p.ttl / 4,
		RetryBackoff: func(int) time.Duration { return 0 }})
	require.NoError(t, err)
	reaper, err := lease.NewReaper(lease.ReaperConfig{Manager: m, Interval: p.reapEvery, Grace: p.grace, OnTransition: func(res *dag.TransitionResult) {
		p.server.Dispatch(context.Background(), res)
	}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	reaped := make(chan error, 1)
	go func() { reaped <- reaper.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-reaped })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := &capture{ResponseWriter: w, status: http.StatusOK}
		p.server.ServeHTTP(c, r)
		p.record(r, c)
	}))
	t.Cleanup(srv.Close)
	p.url = srv.URL
	return p
}

func (p *platform) record(r *http.Request, c *capture) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if strings.HasSuffix(r.URL.Path, "/claim") && c.status == http.StatusOK {
		var j struct {
			JobToken string `json:"job_token"`
			Attempt  int    `json:"attempt"`
		}
		if json.Unmarshal(c.body.Bytes(), &j) == nil {
			p.tokens[j.JobToken] = j.Attempt
		}
		p.claims = append(p.claims, time.Now())
		return
	}
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	p.calls = append(p.calls, call{path: r.URL.Path, attempt: p.tokens[token], status: c.status, at: time.Now()})
}

// claimsAnswered waits until n claims were answered with a job, and
// returns when each was. A claim is recorded once its answer is written,
// which may be after the job store says the job runs.
func (p *platform) claimsAnswered(t *testing.T, n int) []time.Time {
	t.Helper()
	var claims []time.Time
	require.Eventually(t, func() bool {
		_, claims = p.snapshot()
		return len(claims) >= n
	}, 30*time.Second, time.Millisecond, "%d claims answered", n)
	require.Len(t, claims, n)
	return claims
}

func (p *platform) snapshot() ([]call, []time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]call(nil), p.calls...), append([]time.Time(nil), p.claims...)
}

// startRunner starts `cikit runner` against the platform, with extra
// flags.
func (p *platform) startRunner(t *testing.T, labels string, extra ...string) *exec.Cmd {
	t.Helper()
	args := []string{"runner", "-server", p.url, "-registration-token", runnerRegToken, "-labels", labels, "-grace", "500ms"}
	if !slices.Contains(extra, "off") {
		// An image directory of its own: a second runner over one is
		// refused.
		args = append(args, "-image-dir", filepath.Join(t.TempDir(), "images"))
	}
	cmd := exec.Command(binary, append(args, extra...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("runner %s:\n%s", labels, stderr.String())
		}
	})
	return cmd
}

func (p *platform) newRun(t *testing.T, step string) string {
	t.Helper()
	return p.newRunEnv(t, step, nil)
}

func (p *platform) newRunEnv(t *testing.T, step string, env map[string]string) string {
	t.Helper()
	run, err := p.jobs.RunCreate(context.Background(), &dag.RunCreateParams{Jobs: []*ck.JobSpec{
		{ID: "build", RunsOn: []string{"e2e"}, Env: env, Steps: []ck.Step{{Run: step}}},
	}})
	require.NoError(t, err)
	require.NoError(t, p.server.DispatchRun(context.Background(), run.ID))
	return run.ID
}

func (p *platform) job(t *testing.T, runID string) *dag.Job {
	t.Helper()
	jobs, err := p.jobs.JobList(context.Background(), runID)
	require.NoError(t, err)
	return jobs[0]
}

// TestRunnerSandboxedJob: with -sandbox require, the job runs as the
// sandbox's user, on its host name, without the network, and does not
// get the registration token from the runner's environment.
func TestRunnerSandboxedJob(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	require.NoError(t, os.Chmod(filepath.Dir(work), 0o711))
	require.NoError(t, os.Chmod(work, 0o711))
	// The runner refuses to start without a sandbox; find out why first.
	if _, err := process.New(process.Config{Source: t.TempDir(), WorkRoot: work, Sandbox: &process.Sandbox{}}); errors.Is(err, process.ErrSandboxUnavailable) {
		testenv.ToolUnavailable(t, testenv.Bubblewrap, err)
	}
	p := newPlatform(t)
	runID := p.newRun(t, `test "$(id -un)@$(hostname)" = cikit@cikit && test -z "$CIKIT_REGISTRATION_TOKEN" && ! test -e /root && test "$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ')" = lo`)
	p.startRunner(t, "e2e", "-sandbox", "require", "-work-root", work, "-limit-memory", "1G", "-limit-processes", "256")
	require.Eventually(t, func() bool { return p.job(t, runID).State.Terminal() }, 30*time.Second, 10*time.Millisecond)
	j := p.job(t, runID)
	require.Equal(t, ck.JobSucceeded, j.State, j.Reason)
}

// TestRunnerKilledMidJob: SIGKILL the runner running a job; the reaper
// gives the job a second attempt once the lease expires (the test logs how
// long after the kill), another runner runs it, and the job finishes once.
func TestRunnerKilledMidJob(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	runID := p.newRun(t, "sleep 3")
	first := p.startRunner(t, "e2e")
	require.Eventually(t, func() bool { return p.job(t, runID).State == ck.JobRunning }, 30*time.Second, 10*time.Millisecond)
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	killed := time.Now()
	_ = first.Wait()

	p.startRunner(t, "e2e")
	require.Eventually(t, func() bool {
		j := p.job(t, runID)
		return j.Attempt == 2 && j.State == ck.JobRunning || j.State.Terminal()
	}, 30*time.Second, 10*time.Millisecond, "attempt 2 starts")
	claims := p.claimsAnswered(t, 2)
	delay := claims[1].Sub(killed)
	t.Logf("attempt 2 claimed %s after the kill (lease TTL %s, reaper grace %s, interval %s)", delay, p.ttl, p.grace, p.reapEvery)
	// How soon is a measurement, not an assertion: the reaper's tests
	// show on an injected clock that a lease is reaped on the first pass
	// after it expires.

	require.Eventually(t, func() bool { return p.job(t, runID).State.Terminal() }, 30*time.Second, 10*time.Millisecond)
	j := p.job(t, runID)
	require.Equal(t, ck.JobSucceeded, j.State)
	require.Equal(t, 2, j.Attempt)
	attempts, err := p.jobs.JobAttempts(context.Background(), runID, "build")
	require.NoError(t, err)
	require.Len(t, attempts, 2, "the lost attempt, and the one that finished")
	require.Contains(t, attempts[0].Reason, "runner_lost")
	require.Equal(t, ck.JobSucceeded, attempts[1].State)
}

// TestRunnerPausedPastItsLease: SIGSTOP the runner past its lease, let
// attempt 2 start elsewhere, SIGCONT: every call the paused runner makes
// about attempt 1 is refused, and the job's result is attempt 2's.
func TestRunnerPausedPastItsLease(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	runID := p.newRun(t, "sleep 4")
	paused := p.startRunner(t, "e2e")
	require.Eventually(t, func() bool { return p.job(t, runID).State == ck.JobRunning }, 30*time.Second, 10*time.Millisecond)
	require.NoError(t, paused.Process.Signal(syscall.SIGSTOP))
	stopped := time.Now()

	p.startRunner(t, "e2e")
	require.Eventually(t, func() bool { return p.job(t, runID).Attempt == 2 }, 30*time.Second, 10*time.Millisecond, "attempt 2")
	require.NoError(t, paused.Process.Signal(syscall.SIGCONT))
	require.Eventually(t, func() bool { return p.job(t, runID).State.Terminal() }, 30*time.Second, 10*time.Millisecond)
	// Give the resumed runner time to make its stale calls.
	require.Eventually(t, func() bool {
		calls, _ := p.snapshot()
		for _, c := range calls {
			if c.attempt == 1 && c.at.After(stopped) && c.status == http.StatusConflict {
				return true
			}
		}
		return false
	}, 30*time.Second, 10*time.Millisecond, "the resumed runner calls and is refused")

	j := p.job(t, runID)
	require.Equal(t, ck.JobSucceeded, j.State)
	require.Equal(t, 2, j.Attempt)
	claims := p.claimsAnswered(t, 2)
	calls, _ := p.snapshot()
	for _, c := range calls {
		// Every call about attempt 1 once attempt 2 was claimed is
		// refused.
		if c.attempt == 1 && c.at.After(claims[1]) {
			require.Equal(t, http.StatusConflict, c.status, "a call of the stale runner: %+v", c)
		}
	}
	attempts, err := p.jobs.JobAttempts(context.Background(), runID, "build")
	require.NoError(t, err)
	require.Len(t, attempts, 2)
	require.Contains(t, attempts[0].Reason, "runner_lost")
	require.Equal(t, ck.JobSucceeded, attempts[1].State)
}

// ledgerStep is the job of TestRunnerStoppedJobDoesNotOverlap. Each
// attempt takes the next number from $DIR/count and appends lines
// "attempt=<n> t=<unix nanoseconds>" to $DIR/ledger. Attempt 1 records
// the pids of its shell and of a process that left its session in
// $DIR/pids1 and appends forever; attempt 2 first records in $DIR/alive
// every process of attempt 1 that still lives, then appends 20 lines and
// succeeds.
const ledgerStep = `n=$(( $(cat "$DIR/count" 2>/dev/null || echo 0) + 1 )); echo $n > "$DIR/count"
line() { echo "attempt=$n t=$(date +%s%N)" >> "$DIR/ledger"; }
if [ $n = 1 ]; then
  echo $$ >> "$DIR/pids1"
  setsid sh -c 'echo $$ >> "$DIR/pids1"; exec sleep 1000' &
  while true; do line; sleep 0.05; done
fi
for p in $(cat "$DIR/pids1"); do
  if [ -e /proc/$p ] && [ "$(sed 's/.*) //' /proc/$p/stat | cut -d' ' -f1)" != Z ]; then echo "$p" >> "$DIR/alive"; fi
done
i=0; while [ $i -lt 20 ]; do line; sleep 0.05; i=$((i+1)); done`

// ledgerLines returns the times of the ledger's whole lines by attempt;
// a line still being written is left for the next read.
func ledgerLines(t *testing.T, path string) map[int][]int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	out := map[int][]int64{}
	whole := string(b[:bytes.LastIndexByte(b, '\n')+1])
	for l := range strings.Lines(whole) {
		l = strings.TrimSuffix(l, "\n")
		var n int
		var at int64
		_, err := fmt.Sscanf(l, "attempt=%d t=%d", &n, &at)
		require.NoError(t, err, "ledger line %q", l)
		out[n] = append(out[n], at)
	}
	return out
}

// TestRunnerStoppedJobDoesNotOverlap: SIGSTOP the runner of a job for
// longer than its lease. The job's supervisor, which the stopped runner
// no longer tells of renewals, kills the job's processes before the
// reaper lets attempt 2 start on another runner: the ledger the job
// writes never shows the two attempts overlapping, no process of attempt
// 1 (not even one that left its session) is alive when attempt 2 starts,
// and the job's result is attempt 2's. Once resumed, the first runner is
// refused every call it makes about attempt 1. The jobs run unsandboxed,
// so that they reach the ledger outside their workspaces; the sandbox's
// supervisor is tested alike in package process
// (TestWatchdogKillsWithoutTheExecutor).
func TestRunnerStoppedJobDoesNotOverlap(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	dir := t.TempDir()
	ledger := filepath.Join(dir, "ledger")
	runID := p.newRunEnv(t, ledgerStep, map[string]string{"DIR": dir})
	stopped := p.startRunner(t, "e2e", "-sandbox", "off")
	require.Eventually(t, func() bool { return len(ledgerLines(t, ledger)[1]) > 0 }, 30*time.Second, 5*time.Millisecond, "attempt 1 writes")
	require.NoError(t, stopped.Process.Signal(syscall.SIGSTOP))
	stoppedAt := time.Now()
	t.Cleanup(func() { _ = stopped.Process.Signal(syscall.SIGCONT) })

	p.startRunner(t, "e2e", "-sandbox", "off")
	require.Eventually(t, func() bool { return p.job(t, runID).State.Terminal() }, 60*time.Second, 10*time.Millisecond, "the job ends")
	j := p.job(t, runID)
	require.Equal(t, ck.JobSucceeded, j.State, j.Reason)
	require.Equal(t, 2, j.Attempt, "the job's result is attempt 2's")
	claims := p.claimsAnswered(t, 2)
	t.Logf("attempt 2 claimed %s after the runner was stopped (lease TTL %s, reaper grace %s)", claims[1].Sub(stoppedAt), p.ttl, p.grace)

	lines := ledgerLines(t, ledger)
	require.NotEmpty(t, lines[1])
	require.Len(t, lines[2], 20)
	require.Less(t, slices.Max(lines[1]), slices.Min(lines[2]), "attempt 1 wrote after attempt 2 had started")
	_, err := os.Stat(filepath.Join(dir, "alive"))
	if !errors.Is(err, os.ErrNotExist) {
		alive, _ := os.ReadFile(filepath.Join(dir, "alive"))
		pids, _ := os.ReadFile(filepath.Join(dir, "pids1"))
		t.Fatalf("processes of attempt 1 (%q) were alive when attempt 2 started: %q", pids, alive)
	}

	// The first runner resumes: it is fenced.
	require.NoError(t, stopped.Process.Signal(syscall.SIGCONT))
	require.Eventually(t, func() bool {
		calls, _ := p.snapshot()
		for _, c := range calls {
			if c.attempt == 1 && c.at.After(claims[1]) && c.status == http.StatusConflict {
				return true
			}
		}
		return false
	}, 30*time.Second, 10*time.Millisecond, "the resumed runner calls and is refused")
	calls, _ := p.snapshot()
	for _, c := range calls {
		if c.attempt == 1 && c.at.After(claims[1]) {
			require.Equal(t, http.StatusConflict, c.status, "a call of the stopped runner: %+v", c)
		}
	}
	require.Equal(t, lines, ledgerLines(t, ledger), "nothing more was written")
	attempts, err := p.jobs.JobAttempts(context.Background(), runID, "build")
	require.NoError(t, err)
	require.Len(t, attempts, 2)
	require.Contains(t, attempts[0].Reason, "runner_lost")
	require.Equal(t, ck.JobSucceeded, attempts[1].State)
}

// sandboxLedgerStep is the job of
// TestRunnerStoppedSandboxedJobDoesNotOverlap. A sandboxed job sees
// nothing of the host but its workspace, so each attempt writes its
// ledger there; its number is in the file "attempt" of its runner's
// source. Attempt 1 starts a process that leaves its session and appends
// forever; attempt 2 appends 20 lines, then waits for the file "release".
const sandboxLedgerStep = `n=$(cat attempt)
line() { echo "attempt=$n t=$(date +%s%N)" >> ledger; }
if [ $n = 1 ]; then
  setsid sleep "$MARK" &
  while true; do line; sleep 0.05; done
fi
i=0; while [ $i -lt 20 ]; do line; sleep 0.05; i=$((i+1)); done
while [ ! -e release ]; do sleep 0.05; done`

// TestRunnerStoppedSandboxedJobDoesNotOverlap is
// TestRunnerStoppedJobDoesNotOverlap with sandboxed jobs: the sandbox's
// supervisor kills the job's whole PID namespace. Each runner has a work
// root of its own, where the test reads its attempt's ledger: attempt
// 1's stays while its runner is stopped, and attempt 2 waits for the test
// before it ends.
func TestRunnerStoppedSandboxedJobDoesNotOverlap(t *testing.T) {
	t.Parallel()
	if _, err := process.New(process.Config{Source: t.TempDir(), WorkRoot: searchable(t), Sandbox: &process.Sandbox{}}); errors.Is(err, process.ErrSandboxUnavailable) {
		testenv.ToolUnavailable(t, testenv.Bubblewrap, err)
	}
	p := newPlatform(t)
	mark := fmt.Sprintf("1000.%06d", os.Getpid()%1000000)
	runID := p.newRunEnv(t, sandboxLedgerStep, map[string]string{"MARK": mark})
	runner := func(attempt string) (*exec.Cmd, string) {
		src, work := t.TempDir(), searchable(t)
		require.NoError(t, os.WriteFile(filepath.Join(src, "attempt"), []byte(attempt+"\n"), 0o644))
		return p.startRunner(t, "e2e", "-sandbox", "require", "-source", src, "-work-root", work), work
	}
	ledger := func(work string) string {
		found, err := filepath.Glob(filepath.Join(work, "cikit-*", "workspace", "ledger"))
		require.NoError(t, err)
		require.LessOrEqual(t, len(found), 1)
		if len(found) == 0 {
			return filepath.Join(work, "none")
		}
		return found[0]
	}

	stopped, work1 := runner("1")
	require.Eventually(t, func() bool { return len(ledgerLines(t, ledger(work1))[1]) > 0 }, 30*time.Second, 5*time.Millisecond, "attempt 1 writes")
	require.Eventually(t, func() bool { return len(proctest.Running("sleep", mark)) == 1 }, 30*time.Second, 5*time.Millisecond, "attempt 1's process that left its session")
	require.NoError(t, stopped.Process.Signal(syscall.SIGSTOP))
	t.Cleanup(func() { _ = stopped.Process.Signal(syscall.SIGCONT) })

	_, work2 := runner("2")
	require.Eventually(t, func() bool { return len(ledgerLines(t, ledger(work2))[2]) == 20 }, 60*time.Second, 5*time.Millisecond, "attempt 2 writes")
	// While attempt 2 runs: nothing of attempt 1 is left.
	require.Empty(t, proctest.Running("sleep", mark), "attempt 1's process that left its session")
	// Its runner's command line names work1 too.
	require.Empty(t, slices.DeleteFunc(proctest.Containing(work1), func(pid int) bool { return pid == stopped.Process.Pid }), "attempt 1's sandbox")
	first, second := ledgerLines(t, ledger(work1)), ledgerLines(t, ledger(work2))
	require.Less(t, slices.Max(first[1]), slices.Min(second[2]), "attempt 1 wrote after attempt 2 had started")
	require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(ledger(work2)), "release"), nil, 0o644))

	require.Eventually(t, func() bool { return p.job(t, runID).State.Terminal() }, 30*time.Second, 10*time.Millisecond, "the job ends")
	j := p.job(t, runID)
	require.Equal(t, ck.JobSucceeded, j.State, j.Reason)
	require.Equal(t, 2, j.Attempt, "the job's result is attempt 2's")
	claims := p.claimsAnswered(t, 2)
	require.NoError(t, stopped.Process.Signal(syscall.SIGCONT))
	require.Eventually(t, func() bool {
		calls, _ := p.snapshot()
		for _, c := range calls {
			if c.attempt == 1 && c.at.After(claims[1]) && c.status == http.StatusConflict {
				return true
			}
		}
		return false
	}, 30*time.Second, 10*time.Millisecond, "the resumed runner calls and is refused")
	calls, _ := p.snapshot()
	for _, c := range calls {
		if c.attempt == 1 && c.at.After(claims[1]) {
			require.Equal(t, http.StatusConflict, c.status, "a call of the stopped runner: %+v", c)
		}
	}
}

// searchable returns a temporary directory that a sandbox's user, who
// is not the test's when the tests run as root, can reach.
func searchable(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o711))
	require.NoError(t, os.Chmod(dir, 0o711))
	return dir
}
