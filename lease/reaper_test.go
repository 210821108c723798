package lease_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/lease"
)

func (b *bundle) reaper(t testing.TB, cfg lease.ReaperConfig) *lease.Reaper {
	t.Helper()
	cfg.Manager = b.m
	r, err := lease.NewReaper(cfg)
	require.NoError(t, err)
	return r
}

func reap(t testing.TB, r *lease.Reaper) lease.ReapReport {
	t.Helper()
	rep, err := r.Reap(t.Context())
	require.NoError(t, err)
	return *rep
}

func TestReaper(t *testing.T) {
	t.Parallel()
	forStacks(t, func(t *testing.T, st stack) {
		ctx := t.Context()
		b := setup(t, st)
		r := b.reaper(t, lease.ReaperConfig{})
		require.Equal(t, lease.ReapReport{}, reap(t, r))

		// Lost runners: attempts 1 and 2 are retried (infrastructure
		// failures, dag.DefaultInfrastructureRetries), attempt 3 fails.
		var tokens []string
		for n := 1; n <= 3; n++ {
			a := b.attempt("build", n)
			b.queue(t, a)
			l := b.claim(t, a, fmt.Sprintf("r%d", n))
			tokens = append(tokens, l.Token)
			b.clock.Advance(ttl + r.Grace() - time.Microsecond)
			require.Equal(t, lease.ReapReport{}, reap(t, r), "a lease within its TTL and the grace is left alone")
			b.clock.Advance(time.Microsecond)
			want := lease.ReapReport{Retried: 1}
			if n == 3 {
				want = lease.ReapReport{Failed: 1}
			}
			require.Equal(t, want, reap(t, r), "attempt %d", n)
			b.requireNoLease(t, "build")
			b.requireFenced(t, a, l.Token)
		}
		j := b.job(t, "build")
		require.Equal(t, cikit.JobFailed, j.State)
		require.Equal(t, 3, j.Attempt)
		require.True(t, strings.HasPrefix(j.Reason, lease.ReasonRunnerLost), j.Reason)
		ended, err := b.jobs.JobAttempts(ctx, b.run.ID, "build")
		require.NoError(t, err)
		require.Len(t, ended, 3)
		for _, e := range ended {
			require.True(t, strings.HasPrefix(e.Reason, `runner_lost: runner "r`), e.Reason)
		}
		require.Equal(t, cikit.JobSkipped, b.job(t, "deploy").State)
	})
}

func TestReaperCancelAndStale(t *testing.T) {
	t.Parallel()
	forStacks(t, func(t *testing.T, st stack) {
		ctx := t.Context()
		step := []cikit.Step{{Run: "true"}}
		b := setup(t, st, &cikit.JobSpec{ID: "a", Steps: step}, &cikit.JobSpec{ID: "b", Steps: step}, &cikit.JobSpec{ID: "c", Steps: step})
		la := b.claimQueued(t, "a")
		lb := b.claimQueued(t, "b")
		b.claimQueued(t, "c")
		// b ends without the Manager (as dag's JobsExpire would end it):
		// its lease is stale.
		_, err := b.jobs.JobComplete(ctx, &dag.JobCompleteParams{RunID: b.run.ID, JobID: "b", Attempt: 1, Outcome: cikit.JobSucceeded})
		require.NoError(t, err)
		_, err = b.jobs.RunCancel(ctx, b.run.ID)
		require.NoError(t, err)
		b.clock.Advance(ttl / 2)
		_, err = b.m.Renew(ctx, b.attempt("c", 1), b.tokenOf(t, "c"))
		require.NoError(t, err, "c's runner is alive")
		b.clock.Advance(ttl/2 + lease.DefaultGrace(ttl))
		require.Equal(t, lease.ReapReport{Cancelled: 1, StaleDeleted: 1}, reap(t, b.reaper(t, lease.ReaperConfig{})))
		require.Equal(t, cikit.JobCancelled, b.job(t, "a").State)
		require.Equal(t, cikit.JobSucceeded, b.job(t, "b").State)
		require.Equal(t, cikit.JobCancelRequested, b.job(t, "c").State)
		b.requireNoLease(t, "a")
		b.requireNoLease(t, "b")
		b.requireFenced(t, b.attempt("a", 1), la.Token)
		b.requireFenced(t, b.attempt("b", 1), lb.Token)
	})
}

func (b *bundle) claimQueued(t testing.TB, job string) *lease.Lease {
	t.Helper()
	a := b.attempt(job, 1)
	b.queue(t, a)
	return b.claim(t, a, "runner-"+job)
}

func (b *bundle) tokenOf(t testing.TB, job string) string {
	t.Helper()
	l, err := b.store.LeaseGet(t.Context(), b.run.ID, job)
	require.NoError(t, err)
	return l.Token
}

// TestReaperConcurrent runs two reapers at once, with small batches, over
// many expired leases: each attempt is ended exactly once.
func TestReaperConcurrent(t *testing.T) {
	t.Parallel()
	forStacks(t, func(t *testing.T, st stack) {
		ctx := t.Context()
		const n = 25
		var specs []*cikit.JobSpec
		for i := range n {
			specs = append(specs, &cikit.JobSpec{ID: fmt.Sprintf("j%02d", i), Steps: []cikit.Step{{Run: "true"}}})
		}
		b := setup(t, st, specs...)
		for _, s := range specs {
			b.claimQueued(t, s.ID)
			b.clock.Advance(time.Millisecond) // distinct expiries
		}
		b.clock.Advance(ttl + lease.DefaultGrace(ttl))
		reports := make([]lease.ReapReport, 2)
		var wg sync.WaitGroup
		for i := range reports {
			r := b.reaper(t, lease.ReaperConfig{BatchSize: 3})
			wg.Go(func() { reports[i] = reap(t, r) })
		}
		wg.Wait()
		require.Equal(t, n, reports[0].Retried+reports[1].Retried, "%+v", reports)
		require.Zero(t, reports[0].Errors+reports[1].Errors)
		for _, s := range specs {
			j := b.job(t, s.ID)
			require.Equal(t, cikit.JobReady, j.State)
			require.Equal(t, 2, j.Attempt)
			ended, err := b.jobs.JobAttempts(ctx, b.run.ID, s.ID)
			require.NoError(t, err)
			require.Len(t, ended, 1, "attempt 1 ended once")
			b.requireNoLease(t, s.ID)
		}
		require.Equal(t, lease.ReapReport{}, reap(t, b.reaper(t, lease.ReaperConfig{})))
	})
}

func TestReaperQueueTimeout(t *testing.T) {
	t.Parallel()
	forStacks(t, func(t *testing.T, st stack) {
		b := setup(t, st)
		b.clock.Advance(time.Hour + time.Second)
		rep := reap(t, b.reaper(t, lease.ReaperConfig{MaxQueueTime: time.Hour}))
		require.Equal(t, lease.ReapReport{QueueTimeouts: 1}, rep)
		j := b.job(t, "build")
		require.Equal(t, cikit.JobFailed, j.State)
		require.True(t, strings.HasPrefix(j.Reason, dag.ReasonQueueTimeout), j.Reason)
	})
}

// TestRedisFlushed loses Redis in the middle of a lease: the store keeps
// fencing, so a second runner cannot claim the attempt, the holder keeps
// working, and once the reaper made attempt 2 only attempt 2 commits.
func TestRedisFlushed(t *testing.T) {
	t.Parallel()
	for _, st := range stacks {
		if !st.redis {
			continue
		}
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			b := setup(t, st)
			flush := func() { require.NoError(t, b.ns.Flush(ctx)) }
			a1 := b.attempt("build", 1)
			b.queue(t, a1)
			old := b.claim(t, a1, "old")
			flush()
			_, err := b.m.Claim(ctx, a1, "thief")
			require.ErrorIs(t, err, lease.ErrNotClaimed, "the store refuses what Redis forgot")
			require.Empty(t, b.redisValue(t, "build"), "the refused claim took its hint back")
			_, err = b.m.Claim(ctx, a1, "old")
			require.ErrorIs(t, err, lease.ErrNotClaimed, "a claim the holder's runner repeats is refused too")
			require.NoError(t, b.m.Check(ctx, a1, old.Token), "the holder is accepted by the store")
			_, err = b.m.Renew(ctx, a1, old.Token)
			require.NoError(t, err)
			require.Equal(t, "1:"+old.Token, b.redisValue(t, "build"), "a renewal restores the hint")
			require.ErrorIs(t, b.m.Check(ctx, a1, "thief"), lease.ErrFenced)

			// The old runner goes quiet; Redis is lost again.
			b.clock.Advance(ttl + lease.DefaultGrace(ttl))
			flush()
			require.Equal(t, lease.ReapReport{Retried: 1}, reap(t, b.reaper(t, lease.ReaperConfig{})))
			a2 := b.attempt("build", 2)
			b.queue(t, a2)
			fresh := b.claim(t, a2, "fresh")
			flush()
			b.requireFenced(t, a1, old.Token)
			_, err = b.m.Claim(ctx, a1, "old")
			require.ErrorIs(t, err, lease.ErrNotClaimed)
			require.NoError(t, b.m.Check(ctx, a2, fresh.Token))
			res, err := b.m.Complete(ctx, a2, fresh.Token, &dag.JobCompleteParams{Outcome: cikit.JobSucceeded})
			require.NoError(t, err)
			require.Equal(t, cikit.JobSucceeded, res.Changed[0].State)
			b.requireFenced(t, a1, old.Token)
			ended, err := b.jobs.JobAttempts(ctx, b.run.ID, "build")
			require.NoError(t, err)
			require.Len(t, ended, 2)
			require.Equal(t, cikit.JobFailed, ended[0].State)
			require.Equal(t, "old", ended[0].Runner)
			require.Equal(t, cikit.JobSucceeded, ended[1].State)
			require.Equal(t, "fresh", ended[1].Runner)
		})
	}
}

// TestReaperRun runs the loop until its context ends.
func TestReaperRun(t *testing.T) {
	t.Parallel()
	b := setup(t, stack{})
	a := b.attempt("build", 1)
	b.queue(t, a)
	b.claim(t, a, "r1")
	b.clock.Advance(ttl + lease.DefaultGrace(ttl))
	r := b.reaper(t, lease.ReaperConfig{Interval: time.Millisecond})
	ctx, cancel := contextWithCancel(t)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	require.Eventually(t, func() bool { return b.job(t, "build").Attempt == 2 }, time.Minute, time.Millisecond)
	cancel()
	require.NoError(t, <-done)
}

func contextWithCancel(t testing.TB) (context.Context, context.CancelFunc) {
	return context.WithCancel(t.Context())
}
