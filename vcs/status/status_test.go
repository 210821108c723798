package status_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cikit/cikit/vcs"
	"github.com/cikit/cikit/vcs/status"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a provider whose SetStatus records each call and answers
// with what answer says (nil: success, recorded into Memory).
type recorder struct {
	*vcs.Memory
	mu     sync.Mutex
	calls  []string // "repo context state"
	gate   chan struct{}
	answer func(call int, repo string, st *vcs.Status) error
}

func newRecorder() *recorder { return &recorder{Memory: &vcs.Memory{}} }

func (r *recorder) SetStatus(ctx context.Context, repo, sha string, st *vcs.Status) error {
	if r.gate != nil {
		select {
		case <-r.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r.mu.Lock()
	n := len(r.calls)
	r.calls = append(r.calls, fmt.Sprintf("%s %s %s", repo, st.Context, st.State))
	r.mu.Unlock()
	if r.answer != nil {
		if err := r.answer(n, repo, st); err != nil {
			return err
		}
	}
	return r.Memory.SetStatus(ctx, repo, sha, st)
}

func (r *recorder) callList() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

const sha = "0123456789abcdef0123456789abcdef01234567"

func start(t *testing.T, cfg status.Config) *status.Reporter {
	t.Helper()
	r, err := status.New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

func flush(t *testing.T, r *status.Reporter) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, r.Flush(ctx))
}

// TestCoalesces: updates of one check made while its delivery is held up
// collapse into the latest, which is what the forge ends with.
func TestCoalesces(t *testing.T) {
	t.Parallel()
	p := newRecorder()
	p.AddCommit("acme/api", sha, map[string]string{"f": "x"})
	p.gate = make(chan struct{})
	r := start(t, status.Config{Provider: p, Workers: 1, Rate: 1000, Burst: 1000})
	states := []vcs.State{vcs.StatePending, vcs.StateRunning}
	for i := range 100 {
		require.NoError(t, r.Report("acme/api", sha, vcs.Status{Context: "cikit/build", State: states[i%2], Description: fmt.Sprint(i)}))
	}
	require.NoError(t, r.Report("acme/api", sha, vcs.Status{Context: "cikit/build", State: vcs.StateSuccess, Description: "done"}))
	close(p.gate)
	flush(t, r)
	require.Equal(t, []vcs.Status{{Context: "cikit/build", State: vcs.StateSuccess, Description: "done"}}, p.Statuses("acme/api", sha))
	require.LessOrEqual(t, len(p.callList()), 2, "the first status taken before the gate opened, then the latest: %v", p.callList())
	sent, dropped, pending := r.Stats()
	require.Equal(t, len(p.callList()), sent)
	require.Zero(t, dropped)
	require.Zero(t, pending)
}

// TestReportNeverWaits: reports return while the forge does not answer.
func TestReportNeverWaits(t *testing.T) {
	t.Parallel()
	p := newRecorder()
	p.gate = make(chan struct{}) // never opened
	r := start(t, status.Config{Provider: p, Workers: 2})
	for i := range 10_000 {
		require.NoError(t, r.Report("acme/api", sha, vcs.Status{Context: fmt.Sprintf("cikit/job-%d", i%500), State: vcs.StateRunning}))
	}
	_, _, pending := r.Stats()
	require.Equal(t, 500, pending)
	require.Error(t, r.Report("acme/api", sha, vcs.Status{State: vcs.StateRunning}), "a status without a context")
}

// TestRateLimitAnswer: a rate-limit answer holds back its key, not the
// others, and the status goes again after the wait.
func TestRateLimitAnswer(t *testing.T) {
	t.Parallel()
	p := newRecorder()
	for _, repo := range []string{"acme/api", "beta/web"} {
		p.AddCommit(repo, sha, map[string]string{"f": "x"})
	}
	p.answer = func(call int, repo string, st *vcs.Status) error {
		if call == 0 {
			return &vcs.RateLimitError{RetryAfter: time.Second, Err: errors.New("403 secondary rate limit")}
		}
		return nil
	}
	r := start(t, status.Config{Provider: p, Workers: 1, Rate: 1000, Burst: 1000})
	require.NoError(t, r.Report("acme/api", sha, vcs.Status{Context: "cikit", State: vcs.StateSuccess}))
	require.Eventually(t, func() bool { return len(p.callList()) == 1 }, time.Minute, time.Millisecond)
	require.NoError(t, r.Report("beta/web", sha, vcs.Status{Context: "cikit", State: vcs.StateFailure}))
	flush(t, r)
	require.Equal(t, []string{"acme/api cikit success", "beta/web cikit failure", "acme/api cikit success"}, p.callList(),
		"beta's status goes while acme waits out its limit")
	require.Equal(t, vcs.StateSuccess, p.Statuses("acme/api", sha)[0].State)
}

// TestRetriesAndGivesUp: failures are retried with backoff, up to
// Attempts; a status that never goes is dropped, and a newer one of the
// same check is tried afresh.
func TestRetriesAndGivesUp(t *testing.T) {
	t.Parallel()
	p := newRecorder()
	p.AddCommit("acme/api", sha, map[string]string{"f": "x"})
	fail := map[string]int{"cikit/flaky": 2, "cikit/broken": 1 << 30}
	var mu sync.Mutex
	p.answer = func(_ int, _ string, st *vcs.Status) error {
		mu.Lock()
		defer mu.Unlock()
		if fail[st.Context] > 0 {
			fail[st.Context]--
			return errors.New("502 bad gateway")
		}
		return nil
	}
	r := start(t, status.Config{Provider: p, Attempts: 3, MaxBackoff: time.Millisecond, Rate: 1000, Burst: 1000})
	require.NoError(t, r.Report("acme/api", sha, vcs.Status{Context: "cikit/flaky", State: vcs.StateSuccess}))
	require.NoError(t, r.Report("acme/api", sha, vcs.Status{Context: "cikit/broken", State: vcs.StateFailure}))
	flush(t, r)
	require.Equal(t, []vcs.Status{{Context: "cikit/flaky", State: vcs.StateSuccess}}, p.Statuses("acme/api", sha))
	sent, dropped, pending := r.Stats()
	require.Equal(t, 1, sent)
	require.Equal(t, 1, dropped)
	require.Zero(t, pending)
	calls := 0
	for _, c := range p.callList() {
		if c == "acme/api cikit/broken failure" {
			calls++
		}
	}
	require.Equal(t, 3, calls, "the broken status was tried Attempts times")
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	_, err := status.New(status.Config{})
	require.Error(t, err)
	_, err = status.New(status.Config{Provider: &vcs.Memory{}, Rate: -1})
	require.Error(t, err)
}

// TestKeysTakeTurns: keys with work are served in turn, and a key whose
// forge hangs holds at most two workers while the others go on.
func TestKeysTakeTurns(t *testing.T) {
	t.Parallel()
	p := newRecorder()
	for _, repo := range []string{"acme/api", "beta/web"} {
		p.AddCommit(repo, sha, map[string]string{"f": "x"})
	}
	r, err := status.New(status.Config{Provider: p, Workers: 1, Rate: 1000, Burst: 1000})
	require.NoError(t, err)
	for i := range 5 {
		for _, repo := range []string{"acme/api", "beta/web"} {
			require.NoError(t, r.Report(repo, sha, vcs.Status{Context: fmt.Sprint("job-", i), State: vcs.StateSuccess}))
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	flush(t, r)
	cancel()
	<-done
	calls := p.callList()
	require.Len(t, calls, 10)
	for i := 1; i < len(calls); i++ {
		require.NotEqual(t, strings.Fields(calls[i])[0], strings.Fields(calls[i-1])[0], "the keys alternate: %v", calls)
	}

	hung := newRecorder()
	hung.AddCommit("beta/web", sha, map[string]string{"f": "x"})
	gate := make(chan struct{})
	defer close(gate)
	hung.answer = func(_ int, repo string, _ *vcs.Status) error {
		if repo == "acme/api" {
			<-gate
		}
		return nil
	}
	r = start(t, status.Config{Provider: hung, Workers: 4, Rate: 1000, Burst: 1000, Timeout: time.Hour})
	for i := range 10 {
		require.NoError(t, r.Report("acme/api", sha, vcs.Status{Context: fmt.Sprint("job-", i), State: vcs.StateSuccess}))
	}
	for i := range 20 {
		require.NoError(t, r.Report("beta/web", sha, vcs.Status{Context: fmt.Sprint("job-", i), State: vcs.StateSuccess}))
	}
	require.Eventually(t, func() bool { return len(hung.Statuses("beta/web", sha)) == 20 }, 30*time.Second, time.Millisecond,
		"beta's statuses go while acme's forge hangs")
}

// TestReportOrdered: a status older than the latest reported for its check
// is ignored, before and after the latest went out.
func TestReportOrdered(t *testing.T) {
	t.Parallel()
	p := newRecorder()
	p.AddCommit("acme/api", sha, map[string]string{"f": "x"})
	r := start(t, status.Config{Provider: p, Rate: 1000, Burst: 1000})
	report := func(st vcs.State, order string) {
		require.NoError(t, r.ReportOrdered("acme/api", sha, vcs.Status{Context: "cikit: build", State: st}, order))
	}
	report(vcs.StateSuccess, "0003")
	report(vcs.StateRunning, "0002") // a late start
	flush(t, r)
	report(vcs.StatePending, "0001") // later still, after delivery
	flush(t, r)
	require.Equal(t, []vcs.Status{{Context: "cikit: build", State: vcs.StateSuccess}}, p.Statuses("acme/api", sha))
	for _, c := range p.callList() {
		require.Equal(t, "acme/api cikit: build success", c)
	}
	report(vcs.StateFailure, "0004")
	flush(t, r)
	require.Equal(t, vcs.StateFailure, p.Statuses("acme/api", sha)[0].State)
}
