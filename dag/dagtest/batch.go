package dagtest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

// exerciseBatch covers JobApply, JobAttempts and runners.
func exerciseBatch(t *testing.T, factory Factory) {
	t.Run("Apply", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := setup(t, factory, pipeline())
		ev := func(kind dag.EventKind, job string, attempt int) *dag.JobEvent {
			return &dag.JobEvent{Kind: kind, RunID: b.run.ID, JobID: job, Attempt: attempt, Runner: "r-" + job}
		}
		complete := func(job string, outcome cikit.JobState) *dag.JobEvent {
			e := ev(dag.EventComplete, job, 1)
			e.Outcome, e.ExitCode = outcome, 7
			return e
		}
		// One job's events apply in order; refusals are per event.
		results, err := b.store.JobApply(ctx, []*dag.JobEvent{
			ev(dag.EventQueue, "build", 1),
			ev(dag.EventStart, "unit", 1),  // PENDING: refused
			ev(dag.EventQueue, "build", 2), // stale attempt: refused
			ev(dag.EventQueue, "nope", 1),  // unknown job
			{Kind: dag.EventCancel, RunID: b.run.ID, JobID: "build", Attempt: 1},
			ev(dag.EventStart, "build", 1),
			complete("build", cikit.JobSucceeded),
		})
		require.NoError(t, err)
		require.Len(t, results, 7)
		require.NoError(t, results[0].Err)
		require.Equal(t, cikit.JobQueued, results[0].Changed[0].State)
		require.Equal(t, cikit.RunRunning, results[0].Run.State)
		require.ErrorIs(t, results[1].Err, cikit.ErrInvalidTransition)
		require.ErrorIs(t, results[2].Err, cikit.ErrInvalidTransition)
		require.ErrorContains(t, results[2].Err, "stale attempt")
		require.ErrorIs(t, results[3].Err, cikit.ErrNotFound)
		require.ErrorContains(t, results[4].Err, "want queue, start, complete, play or reject")
		require.NoError(t, results[5].Err)
		require.Equal(t, cikit.JobRunning, results[5].Changed[0].State)
		require.Equal(t, "r-build", results[5].Changed[0].Runner)
		require.NoError(t, results[6].Err)
		require.Equal(t, map[string]cikit.JobState{"build": cikit.JobSucceeded, "unit": cikit.JobReady, "lint": cikit.JobReady},
			changed(results[6].TransitionResult))
		require.Equal(t, cikit.JobSucceeded, results[6].Changed[0].State, "the event's own change comes first")

		// Two needs of one job completed in one batch: it becomes READY
		// once, told with one of them.
		results, err = b.store.JobApply(ctx, []*dag.JobEvent{
			ev(dag.EventQueue, "unit", 1), ev(dag.EventQueue, "lint", 1),
			ev(dag.EventStart, "unit", 1), ev(dag.EventStart, "lint", 1),
			complete("unit", cikit.JobSucceeded), complete("lint", cikit.JobFailed),
		})
		require.NoError(t, err)
		readied := 0
		for i, r := range results {
			require.NoError(t, r.Err, "event %d", i)
			for _, j := range r.Changed {
				if j.ID() == "integration" {
					require.Equal(t, cikit.JobReady, j.State)
					readied++
				}
			}
		}
		require.Equal(t, 1, readied, "integration is READY once, in one result")

		// A completion redelivered in a batch has no effect.
		results, err = b.store.JobApply(ctx, []*dag.JobEvent{complete("unit", cikit.JobSucceeded)})
		require.NoError(t, err)
		require.NoError(t, results[0].Err)
		require.Empty(t, results[0].Changed)

		results, err = b.store.JobApply(ctx, []*dag.JobEvent{
			ev(dag.EventQueue, "integration", 1), ev(dag.EventStart, "integration", 1), complete("integration", cikit.JobSucceeded),
		})
		require.NoError(t, err)
		require.NoError(t, results[2].Err)
		require.Equal(t, cikit.RunSucceeded, results[2].Run.State, "the last completion ends the run")
		run, err := b.store.RunGet(ctx, b.run.ID)
		require.NoError(t, err)
		require.Equal(t, cikit.RunSucceeded, run.State)

		results, err = b.store.JobApply(ctx, nil)
		require.NoError(t, err)
		require.Empty(t, results)
	})

	t.Run("ApplyUnknownRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory, pipeline())
		results, err := b.store.JobApply(context.Background(), []*dag.JobEvent{{Kind: dag.EventQueue, RunID: "nope", JobID: "build", Attempt: 1}})
		require.NoError(t, err)
		require.ErrorIs(t, results[0].Err, cikit.ErrNotFound)
	})

	t.Run("ApplyConcurrent", func(t *testing.T) {
		// Schedulers completing the needs of one job at once: it
		// becomes READY exactly once.
		t.Parallel()
		ctx := context.Background()
		step := []cikit.Step{{Run: "true"}}
		specs := []*cikit.JobSpec{{ID: "build", Steps: step}}
		var fan []string
		for _, id := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
			fan = append(fan, id)
			specs = append(specs, &cikit.JobSpec{ID: id, Needs: []string{"build"}, Steps: step})
		}
		specs = append(specs, &cikit.JobSpec{ID: "report", Needs: fan, Steps: step})
		b := setup(t, factory, specs)
		b.advance(t, "build", cikit.JobSucceeded)
		for _, id := range fan {
			p := &dag.JobTransitionParams{RunID: b.run.ID, JobID: id, Attempt: 1}
			_, err := b.store.JobQueue(ctx, p)
			require.NoError(t, err)
			_, err = b.store.JobStart(ctx, p)
			require.NoError(t, err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		readied := 0
		for _, id := range fan {
			wg.Go(func() {
				res, err := b.store.JobComplete(ctx, &dag.JobCompleteParams{RunID: b.run.ID, JobID: id, Attempt: 1, Outcome: cikit.JobSucceeded})
				if !assertNoError(t, err) {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for _, j := range res.Changed {
					if j.ID() == "report" {
						readied++
					}
				}
			})
		}
		wg.Wait()
		require.Equal(t, 1, readied, "report became READY once")
		jobs, err := b.store.JobList(ctx, b.run.ID)
		require.NoError(t, err)
		require.Equal(t, cikit.JobReady, jobs[len(jobs)-1].State)
	})

	t.Run("LastLeavesConcurrent", func(t *testing.T) {
		// Runners completing the last jobs of a run at once, none of
		// which another needs: the run ends exactly once, whichever
		// completion comes last.
		t.Parallel()
		ctx := context.Background()
		var specs []*cikit.JobSpec
		for i := range 12 {
			specs = append(specs, &cikit.JobSpec{ID: fmt.Sprintf("leaf-%02d", i), Steps: []cikit.Step{{Run: "true"}}})
		}
		b := setup(t, factory, specs)
		var evs []*dag.JobEvent
		for _, s := range specs {
			p := &dag.JobTransitionParams{RunID: b.run.ID, JobID: s.ID, Attempt: 1}
			_, err := b.store.JobQueue(ctx, p)
			require.NoError(t, err)
			_, err = b.store.JobStart(ctx, p)
			require.NoError(t, err)
			evs = append(evs, &dag.JobEvent{Kind: dag.EventComplete, RunID: b.run.ID, JobID: s.ID, Attempt: 1, Outcome: cikit.JobSucceeded})
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var finals []cikit.RunState
		for i := 0; i < len(evs); i += 2 { // batches of two, all at once
			wg.Go(func() {
				res, err := b.store.JobApply(ctx, evs[i:i+2])
				if !assertNoError(t, err) {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for _, r := range res {
					if assertNoError(t, r.Err) && r.Run.State.Terminal() {
						finals = append(finals, r.Run.State)
					}
				}
			})
		}
		wg.Wait()
		run, err := b.store.RunGet(ctx, b.run.ID)
		require.NoError(t, err)
		require.Equal(t, cikit.RunSucceeded, run.State)
		require.NotEmpty(t, finals, "the completion that ended the run reports it ended")
		pending, err := b.store.OutboxPending(ctx, 1000)
		require.NoError(t, err)
		completed := 0
		for _, e := range pending {
			if e.Type == dag.EventPipelineCompleted {
				completed++
			}
		}
		require.Equal(t, 1, completed, "one pipeline.completed event")
	})

	t.Run("Attempts", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		step := []cikit.Step{{Run: "true"}}
		b := setup(t, factory, []*cikit.JobSpec{
			{ID: "build", Steps: step},
			{ID: "never", Steps: step, When: cikit.WhenNever},
		})
		start := func(attempt int, runner string) {
			p := &dag.JobTransitionParams{RunID: b.run.ID, JobID: "build", Attempt: attempt, Runner: runner}
			_, err := b.store.JobQueue(ctx, p)
			require.NoError(t, err)
			res, err := b.store.JobStart(ctx, p)
			require.NoError(t, err)
			require.Equal(t, runner, res.Changed[0].Runner)
		}
		start(1, "runner-a")
		res, err := b.store.JobComplete(ctx, &dag.JobCompleteParams{RunID: b.run.ID, JobID: "build", Attempt: 1, Outcome: cikit.JobFailed,
			ExitCode: -1, Reason: "runner lost", FailureClass: cikit.FailureInfrastructure})
		require.NoError(t, err)
		require.Equal(t, cikit.JobReady, res.Changed[0].State, "an infrastructure failure is retried")
		require.Empty(t, res.Changed[0].Runner, "the new attempt has no runner yet")
		start(2, "runner-b")
		_, err = b.store.JobComplete(ctx, &dag.JobCompleteParams{RunID: b.run.ID, JobID: "build", Attempt: 2, Outcome: cikit.JobSucceeded})
		require.NoError(t, err)

		attempts, err := b.store.JobAttempts(ctx, b.run.ID, "build")
		require.NoError(t, err)
		require.Len(t, attempts, 2)
		require.Equal(t, 1, attempts[0].Attempt)
		require.Equal(t, cikit.JobFailed, attempts[0].State)
		require.Equal(t, "runner lost", attempts[0].Reason)
		require.Equal(t, -1, attempts[0].ExitCode)
		require.Equal(t, "runner-a", attempts[0].Runner)
		require.False(t, attempts[0].StartedAt.IsZero())
		require.True(t, attempts[0].FinishedAt.After(attempts[0].StartedAt))
		require.Equal(t, 2, attempts[1].Attempt)
		require.Equal(t, cikit.JobSucceeded, attempts[1].State)
		require.Equal(t, "runner-b", attempts[1].Runner)
		require.Equal(t, "build", attempts[1].ID())

		attempts, err = b.store.JobAttempts(ctx, b.run.ID, "never")
		require.NoError(t, err)
		require.Len(t, attempts, 1, "a job skipped at creation ended its attempt")
		require.Equal(t, cikit.JobSkipped, attempts[0].State)

		_, err = b.store.JobAttempts(ctx, b.run.ID, "nope")
		require.ErrorIs(t, err, cikit.ErrNotFound)
		_, err = b.store.JobAttempts(ctx, "nope", "build")
		require.ErrorIs(t, err, cikit.ErrNotFound)
	})

	t.Run("OutboxNamesThePipelineAndCommit", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		s := factory(t, c.now)
		const sha = "0123456789abcdef0123456789abcdef01234567"
		run, err := s.RunCreate(ctx, &dag.RunCreateParams{Jobs: pipeline(), Pipeline: "acme/api:.cikit.yml", Branch: "main", SHA: sha})
		require.NoError(t, err)
		require.Equal(t, sha, run.SHA)
		got, err := s.RunGet(ctx, run.ID)
		require.NoError(t, err)
		require.Equal(t, sha, got.SHA)
		b := &bundle{store: s, run: run}
		res := b.advance(t, "build", cikit.JobSucceeded)
		// Every transition's run is the whole run, pipeline and branch
		// included (a dispatcher names tenants by them).
		require.Equal(t, "acme/api:.cikit.yml", res.Run.Pipeline)
		require.Equal(t, "main", res.Run.Branch)
		require.Equal(t, sha, res.Run.SHA)
		p := &dag.JobTransitionParams{RunID: run.ID, JobID: "unit", Attempt: 1}
		queued, err := s.JobQueue(ctx, p)
		require.NoError(t, err)
		require.Equal(t, "acme/api:.cikit.yml", queued.Run.Pipeline)
		require.Equal(t, "main", queued.Run.Branch)
		started, err := s.JobStart(ctx, p)
		require.NoError(t, err)
		require.Equal(t, "main", started.Run.Branch)
		_, err = s.JobComplete(ctx, &dag.JobCompleteParams{RunID: run.ID, JobID: "unit", Attempt: 1, Outcome: cikit.JobSucceeded})
		require.NoError(t, err)
		b.advance(t, "lint", cikit.JobSucceeded)
		b.advance(t, "integration", cikit.JobFailed)
		evs, err := s.OutboxPending(ctx, 1000)
		require.NoError(t, err)
		require.NotEmpty(t, evs)
		types := map[string]bool{}
		for _, e := range evs {
			require.Equal(t, "acme/api:.cikit.yml", e.Pipeline, "%s of %s", e.Type, e.JobID)
			require.Equal(t, sha, e.SHA, "%s of %s", e.Type, e.JobID)
			types[e.Type] = true
		}
		require.True(t, types[dag.EventPipelineCreated] && types[dag.EventJobReady] && types[dag.EventPipelineCompleted], "%v", types)
	})

	t.Run("AttemptsOfRetryFailed", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := setup(t, factory, pipeline())
		b.advance(t, "build", cikit.JobFailed)
		_, err := b.store.RunRetryFailed(ctx, b.run.ID)
		require.NoError(t, err)
		for _, id := range []string{"build", "unit"} {
			attempts, err := b.store.JobAttempts(ctx, b.run.ID, id)
			require.NoError(t, err)
			require.Len(t, attempts, 1, "%s: the first attempt ended, the second runs", id)
		}
		jobs, err := b.store.JobList(ctx, b.run.ID)
		require.NoError(t, err)
		require.Equal(t, 2, jobs[0].Attempt)
	})
}

// assertNoError reports err to t from any goroutine, without stopping it.
func assertNoError(t *testing.T, err error) bool {
	if err != nil {
		t.Errorf("unexpected error: %v", err)
		return false
	}
	return true
}
