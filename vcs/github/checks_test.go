package github_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/vcs"
	"github.com/cikit/cikit/vcs/github/githubtest"
)

// The statuses of a context make one check run, created once and
// updated after without listing the commit's runs again.
func TestCheckRunsCreateThenUpdate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	sha := b.repo(t, "acme/api", map[string]string{"a": "1"})
	p := b.checks(t)
	set := func(st vcs.Status) {
		t.Helper()
		require.NoError(t, p.SetStatus(ctx, "acme/api", sha, &st), "%+v", st)
	}

	set(vcs.Status{Context: "cikit", State: vcs.StatePending, Description: "queued"})
	set(vcs.Status{Context: "cikit/build", State: vcs.StatePending})
	before := b.srv.Stats()
	set(vcs.Status{Context: "cikit", State: vcs.StateRunning, Description: "running", TargetURL: "https://ci.example.com/runs/1"})
	b.clock.Advance(time.Minute)
	set(vcs.Status{Context: "cikit", State: vcs.StateSuccess, Description: "passed in 1m"})
	after := b.srv.Stats()
	require.Equal(t, 2, after.Requests-before.Requests, "an update is one PATCH, no listing")
	require.Equal(t, 2, after.CheckRunsCreated, "one run per name")
	require.Equal(t, 2, after.CheckRunsUpdated)

	runs, err := b.srv.CheckRuns("acme/api", sha)
	require.NoError(t, err)
	require.Len(t, runs, 2)
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	require.Equal(t, githubtest.CheckRun{ID: runs[0].ID, Name: "cikit", HeadSHA: sha, Status: "completed", Conclusion: "success",
		DetailsURL: "https://ci.example.com/runs/1", Title: "passed in 1m", Summary: "passed in 1m",
		StartedAt: start, CompletedAt: start.Add(time.Minute)}, runs[0], "the target URL kept when not given again")
	require.Equal(t, "cikit/build", runs[1].Name)
	require.Equal(t, "queued", runs[1].Status)

	// A job run again after it completed is a new run.
	set(vcs.Status{Context: "cikit", State: vcs.StatePending, Description: "again"})
	runs, err = b.srv.CheckRuns("acme/api", sha)
	require.NoError(t, err)
	require.Equal(t, "queued", runs[0].Status)
	require.Equal(t, 3, b.srv.Stats().CheckRunsCreated)
	set(vcs.Status{Context: "cikit", State: vcs.StateFailure, Description: "failed"})
	require.Equal(t, 3, b.srv.Stats().CheckRunsCreated, "the new run is updated")
	runs, err = b.srv.CheckRuns("acme/api", sha)
	require.NoError(t, err)
	require.Equal(t, "failure", runs[0].Conclusion)
}

func TestCheckRunsStateMapping(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	sha := b.repo(t, "acme/api", map[string]string{"a": "1"})
	p := b.checks(t)
	want := map[vcs.State][2]string{
		vcs.StatePending:   {"queued", ""},
		vcs.StateRunning:   {"in_progress", ""},
		vcs.StateSuccess:   {"completed", "success"},
		vcs.StateFailure:   {"completed", "failure"},
		vcs.StateCancelled: {"completed", "cancelled"},
		vcs.StateSkipped:   {"completed", "skipped"},
	}
	for st := range want {
		require.NoError(t, p.SetStatus(ctx, "acme/api", sha, &vcs.Status{Context: string(st), State: st}), st)
	}
	runs, err := b.srv.CheckRuns("acme/api", sha)
	require.NoError(t, err)
	require.Len(t, runs, len(want))
	for _, cr := range runs {
		w := want[vcs.State(cr.Name)]
		require.Equal(t, w, [2]string{cr.Status, cr.Conclusion}, cr.Name)
		require.Equal(t, w[0] == "completed", !cr.CompletedAt.IsZero(), cr.Name)
		require.Empty(t, cr.Title+cr.Summary, "no description, no output")
	}
}

// A new Provider, its cache empty, finds the run an earlier one created.
func TestCheckRunsColdCache(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	sha := b.repo(t, "acme/api", map[string]string{"a": "1"})
	require.NoError(t, b.checks(t).SetStatus(ctx, "acme/api", sha, &vcs.Status{Context: "cikit", State: vcs.StateRunning}))

	p := b.checks(t)
	require.NoError(t, p.SetStatus(ctx, "acme/api", sha, &vcs.Status{Context: "cikit", State: vcs.StateFailure}))
	require.Equal(t, 1, b.srv.Stats().CheckRunsCreated, "found, not created again")
	before := b.srv.Stats()
	require.NoError(t, p.SetStatus(ctx, "acme/api", sha, &vcs.Status{Context: "cikit", State: vcs.StateSuccess}))
	after := b.srv.Stats()
	require.Equal(t, 1, after.Requests-before.Requests, "found once, then cached")
	require.Equal(t, 1, after.CheckRunsCreated)
	require.Equal(t, 2, after.CheckRunsUpdated)
	runs, err := b.srv.CheckRuns("acme/api", sha)
	require.NoError(t, err)
	require.Len(t, runs, 1)
	require.Equal(t, "success", runs[0].Conclusion)

	err = p.SetStatus(ctx, "acme/api", "0123456789abcdef0123456789abcdef01234567", &vcs.Status{Context: "c", State: vcs.StateSuccess})
	require.ErrorIs(t, err, vcs.ErrNotFound, "no such commit")
}

func TestCheckRunsRateLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	sha := b.repo(t, "acme/api", map[string]string{"a": "1"})
	p := b.checks(t)
	require.NoError(t, p.SetStatus(ctx, "acme/api", sha, &vcs.Status{Context: "cikit", State: vcs.StatePending}))

	// The listing of a new context's runs passes and starts the window;
	// the creation is refused.
	b.srv.SetRateLimit(githubtest.RateLimit{Requests: 1, Window: time.Minute, Kind: githubtest.Primary})
	err := p.SetStatus(ctx, "acme/api", sha, &vcs.Status{Context: "cikit/build", State: vcs.StateRunning})
	var rl *vcs.RateLimitError
	require.ErrorAs(t, err, &rl)
	require.Equal(t, time.Minute, rl.RetryAfter)
	require.Equal(t, 1, b.srv.Stats().CheckRunsCreated)

	b.srv.SetRateLimit(githubtest.RateLimit{})
	require.NoError(t, p.SetStatus(ctx, "acme/api", sha, &vcs.Status{Context: "cikit/build", State: vcs.StateRunning}))
	b.srv.SetRateLimit(githubtest.RateLimit{Requests: 1, Window: time.Minute})
	_, err = p.ReadFile(ctx, "acme/api", sha, "a")
	require.NoError(t, err)
	err = p.SetStatus(ctx, "acme/api", sha, &vcs.Status{Context: "cikit", State: vcs.StateSuccess})
	require.ErrorAs(t, err, &rl, "an update is limited too")
	runs, err := b.srv.CheckRuns("acme/api", sha)
	require.NoError(t, err)
	require.Len(t, runs, 2)
	require.Equal(t, "queued", runs[0].Status, "the refused update changed nothing")
}
