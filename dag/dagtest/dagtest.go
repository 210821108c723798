// Package dagtest is the conformance suite of dag.Store: the behaviour
// every implementation must share, so that a run behaves the same on the
// memory store of a laptop and the PostgreSQL store of production — and on
// a store a platform team writes itself.
//
//	func TestMyStore(t *testing.T) {
//		dagtest.Exercise(t, func(t *testing.T, now func() time.Time) dag.Store {
//			return newMyStore(t, now)
//		})
//	}
package dagtest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

// Factory returns a new, empty store whose clock is now. Each call must
// return a store that shares nothing with the others.
type Factory func(t *testing.T, now func() time.Time) dag.Store

// clock ticks one second on every read, so durations are exact. Stores
// read it from concurrent calls.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

// pipeline is build -> [unit, lint(allow_failure)] -> integration.
func pipeline() []*cikit.JobSpec {
	step := []cikit.Step{{Name: "true", Run: "true"}}
	return []*cikit.JobSpec{
		{ID: "build", Name: "build", Steps: step, Env: map[string]string{"A": "1"}},
		{ID: "unit", Name: "unit", Needs: []string{"build"}, Steps: step},
		{ID: "lint", Name: "lint", Needs: []string{"build"}, AllowFailure: true, Steps: step},
		{ID: "integration", Name: "integration", Needs: []string{"unit", "lint"}, Steps: step},
	}
}

type bundle struct {
	store dag.Store
	run   *dag.Run
}

func setup(t *testing.T, factory Factory, specs []*cikit.JobSpec) *bundle {
	t.Helper()
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := factory(t, c.now)
	run, err := s.RunCreate(context.Background(), &dag.RunCreateParams{Jobs: specs})
	require.NoError(t, err)
	return &bundle{store: s, run: run}
}

// advance queues, starts and completes a job.
func (b *bundle) advance(t *testing.T, job string, outcome cikit.JobState) *dag.TransitionResult {
	t.Helper()
	ctx := context.Background()
	p := &dag.JobTransitionParams{RunID: b.run.ID, JobID: job, Attempt: 1}
	_, err := b.store.JobQueue(ctx, p)
	require.NoError(t, err)
	_, err = b.store.JobStart(ctx, p)
	require.NoError(t, err)
	res, err := b.store.JobComplete(ctx, &dag.JobCompleteParams{RunID: b.run.ID, JobID: job, Attempt: 1, Outcome: outcome, ExitCode: 3, Reason: "exit 3"})
	require.NoError(t, err)
	return res
}

func changed(res *dag.TransitionResult) map[string]cikit.JobState {
	m := map[string]cikit.JobState{}
	for _, j := range res.Changed {
		m[j.ID()] = j.State
	}
	return m
}

func states(jobs []*dag.Job) []cikit.JobState {
	s := make([]cikit.JobState, len(jobs))
	for i, j := range jobs {
		s[i] = j.State
	}
	return s
}

// Exercise runs the conformance suite against the stores factory makes.
func Exercise(t *testing.T, factory Factory) {
	exerciseGroups(t, factory)
	exerciseWaiting(t, factory)
	t.Run("Lifecycle", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := setup(t, factory, pipeline())
		require.Equal(t, cikit.RunPending, b.run.State)
		got, err := b.store.RunGet(ctx, b.run.ID)
		require.NoError(t, err)
		require.Equal(t, b.run.ID, got.ID)

		res := b.advance(t, "build", cikit.JobSucceeded)
		require.Equal(t, map[string]cikit.JobState{"build": cikit.JobSucceeded, "unit": cikit.JobReady, "lint": cikit.JobReady}, changed(res))
		require.Equal(t, cikit.JobSucceeded, res.Changed[0].State, "the event's own change comes first")
		require.Equal(t, cikit.RunRunning, res.Run.State)

		res = b.advance(t, "lint", cikit.JobFailed)
		require.Equal(t, map[string]cikit.JobState{"lint": cikit.JobFailed}, changed(res), "integration still waits for unit")
		require.Equal(t, 3, res.Changed[0].ExitCode)
		require.Equal(t, "exit 3", res.Changed[0].Reason)

		res = b.advance(t, "unit", cikit.JobSucceeded)
		require.Equal(t, cikit.JobReady, changed(res)["integration"], "lint's failure is allowed")
		res = b.advance(t, "integration", cikit.JobSucceeded)
		require.Equal(t, cikit.RunSucceeded, res.Run.State)
		require.False(t, res.Run.FinishedAt.IsZero())

		jobs, err := b.store.JobList(ctx, b.run.ID)
		require.NoError(t, err)
		require.Equal(t, []string{"build", "unit", "lint", "integration"}, []string{jobs[0].ID(), jobs[1].ID(), jobs[2].ID(), jobs[3].ID()}, "plan order")
		for _, j := range jobs {
			require.True(t, j.State.Terminal())
			require.Equal(t, time.Second, j.Duration(), "start and finish are one clock tick apart")
			require.Equal(t, b.run.ID, j.RunID)
		}
		require.Equal(t, map[string]string{"A": "1"}, jobs[0].Spec.Env, "the spec is kept whole")
	})

	t.Run("FailureSkipsDescendants", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory, pipeline())
		res := b.advance(t, "build", cikit.JobFailed)
		require.Equal(t, map[string]cikit.JobState{
			"build": cikit.JobFailed, "unit": cikit.JobSkipped, "lint": cikit.JobSkipped, "integration": cikit.JobSkipped,
		}, changed(res))
		require.Equal(t, cikit.RunFailed, res.Run.State)
		for _, j := range res.Changed[1:] {
			require.Contains(t, j.Reason, "needs ")
		}
	})

	t.Run("Refusals", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := setup(t, factory, pipeline())
		_, err := b.store.RunGet(ctx, "nope")
		require.ErrorIs(t, err, cikit.ErrNotFound)
		_, err = b.store.JobList(ctx, "nope")
		require.ErrorIs(t, err, cikit.ErrNotFound)
		_, err = b.store.JobQueue(ctx, &dag.JobTransitionParams{RunID: b.run.ID, JobID: "nope", Attempt: 1})
		require.ErrorIs(t, err, cikit.ErrNotFound)

		before, err := b.store.JobList(ctx, b.run.ID)
		require.NoError(t, err)
		_, err = b.store.JobStart(ctx, &dag.JobTransitionParams{RunID: b.run.ID, JobID: "unit", Attempt: 1})
		var te *cikit.TransitionError
		require.ErrorAs(t, err, &te)
		require.Equal(t, cikit.JobPending, te.From)
		require.Equal(t, cikit.JobRunning, te.To)
		_, err = b.store.JobQueue(ctx, &dag.JobTransitionParams{RunID: b.run.ID, JobID: "build", Attempt: 2})
		require.ErrorIs(t, err, cikit.ErrInvalidTransition)
		require.ErrorContains(t, err, "stale attempt")
		after, err := b.store.JobList(ctx, b.run.ID)
		require.NoError(t, err)
		require.Equal(t, states(before), states(after), "refused transitions change nothing")

		p := &dag.JobTransitionParams{RunID: b.run.ID, JobID: "build", Attempt: 1}
		_, err = b.store.JobQueue(ctx, p)
		require.NoError(t, err)
		_, err = b.store.JobStart(ctx, p)
		require.NoError(t, err)
		_, err = b.store.JobComplete(ctx, &dag.JobCompleteParams{RunID: b.run.ID, JobID: "build", Attempt: 1, Outcome: cikit.JobSkipped})
		require.ErrorIs(t, err, cikit.ErrInvalidTransition)

		done := &dag.JobCompleteParams{RunID: b.run.ID, JobID: "build", Attempt: 1, Outcome: cikit.JobSucceeded}
		res, err := b.store.JobComplete(ctx, done)
		require.NoError(t, err)
		require.Len(t, res.Changed, 3)
		res, err = b.store.JobComplete(ctx, done)
		require.NoError(t, err, "a redelivered completion is not an error")
		require.Empty(t, res.Changed, "and has no effect")
		done.Outcome = cikit.JobFailed
		_, err = b.store.JobComplete(ctx, done)
		require.ErrorIs(t, err, cikit.ErrInvalidTransition, "a conflicting completion is refused")
	})

	t.Run("Cancel", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := setup(t, factory, pipeline())
		p := &dag.JobTransitionParams{RunID: b.run.ID, JobID: "build", Attempt: 1}
		_, err := b.store.JobQueue(ctx, p)
		require.NoError(t, err)
		_, err = b.store.JobStart(ctx, p)
		require.NoError(t, err)

		res, err := b.store.RunCancel(ctx, b.run.ID)
		require.NoError(t, err)
		require.Equal(t, map[string]cikit.JobState{
			"build": cikit.JobCancelRequested, "unit": cikit.JobCancelled, "lint": cikit.JobCancelled, "integration": cikit.JobCancelled,
		}, changed(res))
		require.Equal(t, cikit.RunRunning, res.Run.State, "build still runs until its executor reports")

		res, err = b.store.JobComplete(ctx, &dag.JobCompleteParams{RunID: b.run.ID, JobID: "build", Attempt: 1, Outcome: cikit.JobCancelled})
		require.NoError(t, err)
		require.Equal(t, cikit.RunCancelled, res.Run.State)

		res, err = b.store.RunCancel(ctx, b.run.ID)
		require.NoError(t, err, "cancelling a finished run is not an error")
		require.Empty(t, res.Changed)
	})

	t.Run("When", func(t *testing.T) {
		t.Parallel()
		step := []cikit.Step{{Name: "true", Run: "true"}}
		specs := func() []*cikit.JobSpec {
			return []*cikit.JobSpec{
				{ID: "build", Steps: step},
				{ID: "test", Needs: []string{"build"}, Steps: step},
				{ID: "notify", Needs: []string{"test"}, When: cikit.WhenOnFailure, Steps: step},
				{ID: "cleanup", Needs: []string{"test"}, When: cikit.WhenAlways, Steps: step},
				{ID: "deploy", Needs: []string{"test"}, Steps: step},
				{ID: "first-aid", When: cikit.WhenOnFailure, Steps: step},
			}
		}
		// A failure: on_failure and always jobs run, the rest is skipped.
		b := setup(t, factory, specs())
		jobs, err := b.store.JobList(context.Background(), b.run.ID)
		require.NoError(t, err)
		require.Equal(t, cikit.JobSkipped, jobs[5].State, "an on_failure job with nothing before it never runs")
		res := b.advance(t, "build", cikit.JobFailed)
		require.Equal(t, map[string]cikit.JobState{
			"build": cikit.JobFailed, "test": cikit.JobSkipped, "deploy": cikit.JobSkipped,
			"notify": cikit.JobReady, "cleanup": cikit.JobReady,
		}, changed(res))
		b.advance(t, "notify", cikit.JobSucceeded)
		res = b.advance(t, "cleanup", cikit.JobSucceeded)
		require.Equal(t, cikit.RunFailed, res.Run.State, "the failure still fails the run")

		// Success: on_failure jobs are skipped, always jobs run.
		b = setup(t, factory, specs())
		b.advance(t, "build", cikit.JobSucceeded)
		res = b.advance(t, "test", cikit.JobSucceeded)
		require.Equal(t, map[string]cikit.JobState{
			"test": cikit.JobSucceeded, "notify": cikit.JobSkipped, "cleanup": cikit.JobReady, "deploy": cikit.JobReady,
		}, changed(res))
		for _, j := range res.Changed {
			if j.ID() == "notify" {
				require.Equal(t, "it runs on failure, and nothing it needs failed", j.Reason)
			}
		}
		b.advance(t, "cleanup", cikit.JobSucceeded)
		res = b.advance(t, "deploy", cikit.JobSucceeded)
		require.Equal(t, cikit.RunSucceeded, res.Run.State, "a skipped on_failure job fails nothing")
	})

	t.Run("RetryFailed", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := setup(t, factory, pipeline())
		_, err := b.store.RunRetryFailed(ctx, b.run.ID)
		require.ErrorIs(t, err, dag.ErrRunNotFinished)
		require.ErrorIs(t, err, cikit.ErrInvalidTransition)

		b.advance(t, "build", cikit.JobSucceeded)
		b.advance(t, "lint", cikit.JobFailed) // allowed: not retried
		res := b.advance(t, "unit", cikit.JobFailed)
		require.Equal(t, cikit.RunFailed, res.Run.State)

		res, err = b.store.RunRetryFailed(ctx, b.run.ID)
		require.NoError(t, err)
		require.Equal(t, map[string]cikit.JobState{"unit": cikit.JobReady, "integration": cikit.JobPending}, changed(res))
		for _, j := range res.Changed {
			require.Equal(t, 2, j.Attempt, "a new attempt of %s", j.ID())
			require.Empty(t, j.Reason)
			require.True(t, j.FinishedAt.IsZero())
		}
		require.Equal(t, cikit.RunRunning, res.Run.State)
		require.True(t, res.Run.FinishedAt.IsZero(), "the run is running again")

		_, err = b.store.JobQueue(ctx, &dag.JobTransitionParams{RunID: b.run.ID, JobID: "unit", Attempt: 1})
		require.ErrorIs(t, err, cikit.ErrInvalidTransition, "the old attempt is stale")
		p := &dag.JobTransitionParams{RunID: b.run.ID, JobID: "unit", Attempt: 2}
		_, err = b.store.JobQueue(ctx, p)
		require.NoError(t, err)
		_, err = b.store.JobStart(ctx, p)
		require.NoError(t, err)
		res, err = b.store.JobComplete(ctx, &dag.JobCompleteParams{RunID: b.run.ID, JobID: "unit", Attempt: 2, Outcome: cikit.JobSucceeded})
		require.NoError(t, err)
		require.Equal(t, cikit.JobReady, changed(res)["integration"])
		p = &dag.JobTransitionParams{RunID: b.run.ID, JobID: "integration", Attempt: 2}
		_, err = b.store.JobQueue(ctx, p)
		require.NoError(t, err)
		_, err = b.store.JobStart(ctx, p)
		require.NoError(t, err)
		res, err = b.store.JobComplete(ctx, &dag.JobCompleteParams{RunID: b.run.ID, JobID: "integration", Attempt: 2, Outcome: cikit.JobSucceeded})
		require.NoError(t, err)
		require.Equal(t, cikit.RunSucceeded, res.Run.State)

		jobs, err := b.store.JobList(ctx, b.run.ID)
		require.NoError(t, err)
		require.Equal(t, []int{1, 2, 1, 2}, []int{jobs[0].Attempt, jobs[1].Attempt, jobs[2].Attempt, jobs[3].Attempt}, "successful jobs are reused")
		res, err = b.store.RunRetryFailed(ctx, b.run.ID)
		require.NoError(t, err)
		require.Empty(t, res.Changed, "nothing to retry in a run that succeeded")
	})

	t.Run("AutomaticRetry", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		step := []cikit.Step{{Name: "true", Run: "true"}}
		b := setup(t, factory, []*cikit.JobSpec{
			{ID: "flaky", Steps: step, Retry: &cikit.Retry{Max: 1, When: []string{"failure"}}},
			{ID: "plain", Steps: step},
		})
		run := func(job string, attempt int, class cikit.FailureClass) (*dag.TransitionResult, error) {
			p := &dag.JobTransitionParams{RunID: b.run.ID, JobID: job, Attempt: attempt}
			_, err := b.store.JobQueue(ctx, p)
			require.NoError(t, err)
			_, err = b.store.JobStart(ctx, p)
			require.NoError(t, err)
			return b.store.JobComplete(ctx, &dag.JobCompleteParams{RunID: b.run.ID, JobID: job, Attempt: attempt,
				Outcome: cikit.JobFailed, ExitCode: 1, Reason: "tests failed", FailureClass: class})
		}
		res, err := run("flaky", 1, cikit.FailureScript)
		require.NoError(t, err)
		require.Len(t, res.Changed, 1)
		j := res.Changed[0]
		require.Equal(t, cikit.JobReady, j.State, "the policy retries a test failure once")
		require.Equal(t, 2, j.Attempt)
		require.Equal(t, "attempt 1 failed (script): tests failed; retrying", j.Reason)
		_, err = b.store.JobComplete(ctx, &dag.JobCompleteParams{RunID: b.run.ID, JobID: "flaky", Attempt: 1, Outcome: cikit.JobFailed})
		require.ErrorIs(t, err, cikit.ErrInvalidTransition, "the retried attempt is stale")
		res, err = run("flaky", 2, cikit.FailureScript)
		require.NoError(t, err)
		require.Equal(t, cikit.JobFailed, res.Changed[0].State, "the budget is spent")

		res, err = run("plain", 1, cikit.FailureInfrastructure)
		require.NoError(t, err)
		require.Equal(t, cikit.JobReady, res.Changed[0].State, "a lost runner is retried without a policy")
		res, err = run("plain", 2, cikit.FailureInfrastructure)
		require.NoError(t, err)
		require.Equal(t, cikit.JobReady, res.Changed[0].State)
		res, err = run("plain", 3, cikit.FailureInfrastructure)
		require.NoError(t, err)
		require.Equal(t, cikit.JobFailed, res.Changed[0].State, "up to DefaultInfrastructureRetries")
		require.Equal(t, cikit.RunFailed, res.Run.State)

		b = setup(t, factory, []*cikit.JobSpec{{ID: "plain", Steps: step}})
		res, err = run("plain", 1, cikit.FailureScript)
		require.NoError(t, err)
		require.Equal(t, cikit.JobFailed, res.Changed[0].State, "test failures are not retried without a policy")
	})

	t.Run("NeverJobs", func(t *testing.T) {
		t.Parallel()
		specs := pipeline()
		specs[2].When = cikit.WhenNever
		b := setup(t, factory, specs)
		jobs, err := b.store.JobList(context.Background(), b.run.ID)
		require.NoError(t, err)
		require.Equal(t, []cikit.JobState{cikit.JobReady, cikit.JobPending, cikit.JobSkipped, cikit.JobSkipped}, states(jobs))
		require.Equal(t, "its condition is false", jobs[2].Reason)
		b.advance(t, "build", cikit.JobSucceeded)
		res := b.advance(t, "unit", cikit.JobSucceeded)
		require.Equal(t, cikit.RunSucceeded, res.Run.State)
	})

	t.Run("ResultsAreCopies", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		specs := pipeline()
		b := setup(t, factory, specs)
		specs[0].Env["A"] = "changed by caller"
		jobs, err := b.store.JobList(ctx, b.run.ID)
		require.NoError(t, err)
		require.Equal(t, "1", jobs[0].Spec.Env["A"])
		jobs[0].Spec.Env["A"] = "changed again"
		jobs[0].State = cikit.JobFailed
		again, err := b.store.JobList(ctx, b.run.ID)
		require.NoError(t, err)
		require.Equal(t, "1", again[0].Spec.Env["A"])
		require.Equal(t, cikit.JobReady, again[0].State)
	})

	t.Run("InvalidGraph", func(t *testing.T) {
		t.Parallel()
		s := factory(t, time.Now)
		_, err := s.RunCreate(context.Background(), &dag.RunCreateParams{Jobs: []*cikit.JobSpec{{ID: "a", Needs: []string{"a"}}}})
		require.ErrorIs(t, err, dag.ErrInvalidGraph)
	})

	t.Run("IdempotencyKey", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		s := factory(t, c.now)
		first, err := s.RunCreate(ctx, &dag.RunCreateParams{Jobs: pipeline(), IdempotencyKey: "github:hook-1:delivery-1"})
		require.NoError(t, err)
		require.Equal(t, "github:hook-1:delivery-1", first.IdempotencyKey)
		b := &bundle{store: s, run: first}
		b.advance(t, "build", cikit.JobSucceeded)

		again, err := s.RunCreate(ctx, &dag.RunCreateParams{Jobs: pipeline(), IdempotencyKey: "github:hook-1:delivery-1"})
		require.NoError(t, err)
		require.Equal(t, first.ID, again.ID, "the same key returns the existing run")
		require.Equal(t, first.CreatedAt, again.CreatedAt)
		require.Equal(t, cikit.RunRunning, again.State, "as it is now")
		jobs, err := s.JobList(ctx, first.ID)
		require.NoError(t, err)
		require.Equal(t, []cikit.JobState{cikit.JobSucceeded, cikit.JobReady, cikit.JobReady, cikit.JobPending}, states(jobs), "and nothing was written")

		other, err := s.RunCreate(ctx, &dag.RunCreateParams{Jobs: pipeline(), IdempotencyKey: "github:hook-1:delivery-2"})
		require.NoError(t, err)
		require.NotEqual(t, first.ID, other.ID)
	})

	t.Run("IdempotencyKeyConcurrent", func(t *testing.T) {
		t.Parallel()
		s := factory(t, time.Now)
		const n = 20
		ids := make(chan string, n)
		errs := make(chan error, n)
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				run, err := s.RunCreate(context.Background(), &dag.RunCreateParams{Jobs: pipeline(), IdempotencyKey: "same"})
				if err != nil {
					errs <- err
					return
				}
				ids <- run.ID
			})
		}
		wg.Wait()
		close(ids)
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		var first string
		for id := range ids {
			if first == "" {
				first = id
			}
			require.Equal(t, first, id, "one run for one key, however many create it at once")
		}
	})

	t.Run("Outbox", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := setup(t, factory, pipeline())
		type ev struct{ Type, Job, State string }
		pending := func() []ev {
			t.Helper()
			evs, err := b.store.OutboxPending(ctx, 1000)
			require.NoError(t, err)
			out := make([]ev, len(evs))
			seen := map[string]bool{}
			for i, e := range evs {
				require.False(t, seen[e.ID], "event IDs are unique")
				seen[e.ID] = true
				require.Equal(t, b.run.ID, e.RunID)
				out[i] = ev{e.Type, e.JobID, e.State}
			}
			return out
		}
		require.Equal(t, []ev{{dag.EventPipelineCreated, "", "pending"}, {dag.EventJobReady, "build", "ready"}}, pending())

		b.advance(t, "build", cikit.JobSucceeded)
		// Refused and repeated writes record nothing.
		_, err := b.store.JobStart(ctx, &dag.JobTransitionParams{RunID: b.run.ID, JobID: "integration", Attempt: 1})
		require.Error(t, err)
		_, err = b.store.JobComplete(ctx, &dag.JobCompleteParams{RunID: b.run.ID, JobID: "build", Attempt: 1, Outcome: cikit.JobSucceeded})
		require.NoError(t, err)
		want := []ev{
			{dag.EventPipelineCreated, "", "pending"}, {dag.EventJobReady, "build", "ready"},
			{dag.EventJobQueued, "build", "queued"}, {dag.EventJobStarted, "build", "running"},
			{dag.EventJobCompleted, "build", "succeeded"}, {dag.EventJobReady, "unit", "ready"}, {dag.EventJobReady, "lint", "ready"},
		}
		require.Equal(t, want, pending())

		evs, err := b.store.OutboxPending(ctx, 3)
		require.NoError(t, err)
		require.Len(t, evs, 3, "limit")
		require.NoError(t, b.store.OutboxMarkPublished(ctx, []string{evs[0].ID, evs[1].ID, evs[2].ID, "unknown"}))
		require.NoError(t, b.store.OutboxMarkPublished(ctx, []string{evs[0].ID}), "marking twice is harmless")
		require.Equal(t, want[3:], pending())

		b.advance(t, "unit", cikit.JobFailed)
		got := pending()
		require.Equal(t, []ev{
			{dag.EventJobCompleted, "unit", "failed"}, {dag.EventJobCompleted, "integration", "skipped"},
		}, got[len(got)-2:], "lint still runs: the run is not complete")
		b.advance(t, "lint", cikit.JobSucceeded)
		got = pending()
		require.Equal(t, ev{dag.EventPipelineCompleted, "", "failed"}, got[len(got)-1], "the run's completion comes last, once")
	})

	t.Run("JobGet", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := setup(t, factory, pipeline())
		p := &dag.JobTransitionParams{RunID: b.run.ID, JobID: "build", Attempt: 1, Runner: "r1"}
		_, err := b.store.JobQueue(ctx, p)
		require.NoError(t, err)
		_, err = b.store.JobStart(ctx, p)
		require.NoError(t, err)
		for _, id := range []string{"build", "integration"} {
			got, err := b.store.JobGet(ctx, b.run.ID, id)
			require.NoError(t, err)
			require.Equal(t, b.job(t, id), got, "JobGet reads the job as JobList does")
		}
		got, _ := b.store.JobGet(ctx, b.run.ID, "build")
		require.Equal(t, cikit.JobRunning, got.State)
		require.Equal(t, "r1", got.Runner)
		got.Spec.Env["A"] = "changed"
		again, err := b.store.JobGet(ctx, b.run.ID, "build")
		require.NoError(t, err)
		require.Equal(t, "1", again.Spec.Env["A"], "results are copies")

		_, err = b.store.JobGet(ctx, b.run.ID, "nope")
		require.ErrorIs(t, err, cikit.ErrNotFound)
		_, err = b.store.JobGet(ctx, "no-such-run", "build")
		require.ErrorIs(t, err, cikit.ErrNotFound)

		many, err := b.store.JobGetMany(ctx, []dag.JobKey{{RunID: b.run.ID, JobID: "integration"}, {RunID: b.run.ID, JobID: "nope"},
			{RunID: b.run.ID, JobID: "build"}, {RunID: "no-such-run", JobID: "build"}, {RunID: b.run.ID, JobID: "build"}})
		require.NoError(t, err)
		require.Equal(t, []*dag.Job{b.job(t, "integration"), nil, b.job(t, "build"), nil, b.job(t, "build")}, many,
			"JobGetMany reads each job as JobGet does, in the keys' order, nil for unknown ones")
		many[2].Spec.Env["A"] = "changed"
		require.Equal(t, "1", many[4].Spec.Env["A"], "results are copies, even of one job named twice")
		none, err := b.store.JobGetMany(ctx, nil)
		require.NoError(t, err)
		require.Empty(t, none)
	})

	t.Run("OutboxPublish", func(t *testing.T) { exerciseOutboxPublish(t, factory) })
	t.Run("Expire", func(t *testing.T) { exerciseExpire(t, factory) })
	t.Run("Batch", func(t *testing.T) { exerciseBatch(t, factory) })
	t.Run("RunList", func(t *testing.T) { exerciseRunList(t, factory) })
	t.Run("Manual", func(t *testing.T) { exerciseManual(t, factory) })
	t.Run("Gates", func(t *testing.T) { exerciseGates(t, factory) })
	t.Run("Results", func(t *testing.T) { exerciseResults(t, factory) })
	t.Run("ExitCodes", func(t *testing.T) { exerciseExitCodes(t, factory) })
	t.Run("RunNumbers", func(t *testing.T) { exerciseRunNumbers(t, factory) })

	t.Run("RunsAreSeparate", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := setup(t, factory, pipeline())
		other, err := b.store.RunCreate(ctx, &dag.RunCreateParams{Jobs: pipeline()})
		require.NoError(t, err)
		require.NotEqual(t, b.run.ID, other.ID)
		b.advance(t, "build", cikit.JobFailed)
		jobs, err := b.store.JobList(ctx, other.ID)
		require.NoError(t, err)
		require.Equal(t, []cikit.JobState{cikit.JobReady, cikit.JobPending, cikit.JobPending, cikit.JobPending}, states(jobs))
	})
}
