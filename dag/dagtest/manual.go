package dagtest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

// deployPipeline is build -> deploy (manual) -> smoke: a deploy that
// waits for a person, allowed to fail unless blocking (as a GitLab manual
// job with rules).
func deployPipeline(blocking bool) []*cikit.JobSpec {
	step := []cikit.Step{{Name: "true", Run: "true"}}
	return []*cikit.JobSpec{
		{ID: "build", Name: "build", Steps: step},
		{ID: "deploy", Name: "deploy", Needs: []string{"build"}, When: cikit.WhenManual, AllowFailure: !blocking, Steps: step},
		{ID: "smoke", Name: "smoke", Needs: []string{"deploy"}, Steps: step},
	}
}

// play applies EventPlay to attempt of a job and returns its result.
func (b *bundle) play(t *testing.T, job string, attempt int) (*dag.TransitionResult, error) {
	t.Helper()
	res, err := b.store.JobApply(context.Background(), []*dag.JobEvent{{Kind: dag.EventPlay, RunID: b.run.ID, JobID: job, Attempt: attempt}})
	require.NoError(t, err)
	require.Len(t, res, 1)
	return res[0].TransitionResult, res[0].Err
}

// exerciseManual is the part of Exercise about jobs of When manual and
// delayed: MANUAL waits for EventPlay, DELAYED for JobsRelease.
func exerciseManual(t *testing.T, factory Factory) {
	t.Run("ManualWaitsForAPerson", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := setup(t, factory, deployPipeline(false))
		res := b.advance(t, "build", cikit.JobSucceeded)
		require.Equal(t, map[string]cikit.JobState{"build": cikit.JobSucceeded, "deploy": cikit.JobManual}, changed(res),
			"a manual job whose needs are satisfied waits MANUAL, not READY; what needs it stays PENDING")
		require.Equal(t, cikit.RunSucceeded, res.Run.State, "a manual job that may fail does not hold the run")
		require.False(t, res.Run.FinishedAt.IsZero())
		require.Equal(t, cikit.JobPending, b.job(t, "smoke").State)

		_, err := b.store.JobQueue(ctx, &dag.JobTransitionParams{RunID: b.run.ID, JobID: "deploy", Attempt: 1})
		require.ErrorIs(t, err, cikit.ErrInvalidTransition, "nothing queues a manual job before a person starts it")
		require.Equal(t, cikit.JobManual, b.job(t, "deploy").State)

		evs, err := b.store.OutboxPending(ctx, 1000)
		require.NoError(t, err)
		var manual *dag.OutboxEvent
		for _, e := range evs {
			if e.JobID == "deploy" {
				manual = e
			}
		}
		require.NotNil(t, manual)
		require.Equal(t, dag.EventJobManual, manual.Type)
		require.Equal(t, string(cikit.JobManual), manual.State)

		again, err := b.store.RunCancel(ctx, b.run.ID)
		require.NoError(t, err)
		require.Empty(t, again.Changed, "cancelling a finished run changes nothing, even its waiting manual job")
		require.Equal(t, cikit.JobManual, b.job(t, "deploy").State)
	})

	t.Run("PlayMakesItReady", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory, deployPipeline(false))
		b.advance(t, "build", cikit.JobSucceeded)

		_, err := b.play(t, "deploy", 2)
		require.ErrorIs(t, err, cikit.ErrInvalidTransition, "a stale attempt")
		_, err = b.play(t, "build", 1)
		require.ErrorIs(t, err, cikit.ErrInvalidTransition, "only a MANUAL job can be started by a person")
		_, err = b.play(t, "nope", 1)
		require.ErrorIs(t, err, cikit.ErrNotFound)

		res, err := b.play(t, "deploy", 1)
		require.NoError(t, err)
		require.Equal(t, map[string]cikit.JobState{"deploy": cikit.JobReady}, changed(res))
		require.False(t, res.Changed[0].ReadyAt.IsZero())
		require.Equal(t, cikit.RunRunning, res.Run.State, "the finished run runs again")
		require.True(t, res.Run.FinishedAt.IsZero())
		_, err = b.play(t, "deploy", 1)
		require.ErrorIs(t, err, cikit.ErrInvalidTransition, "started once")

		res = b.advance(t, "deploy", cikit.JobSucceeded)
		require.Equal(t, map[string]cikit.JobState{"deploy": cikit.JobSucceeded, "smoke": cikit.JobReady}, changed(res))
		res = b.advance(t, "smoke", cikit.JobSucceeded)
		require.Equal(t, cikit.RunSucceeded, res.Run.State)
	})

	t.Run("BlockingManualHoldsTheRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory, deployPipeline(true))
		res := b.advance(t, "build", cikit.JobSucceeded)
		require.Equal(t, cikit.RunBlocked, res.Run.State, "not succeeded while a blocking manual job waits")
		require.True(t, res.Run.FinishedAt.IsZero())
		require.Equal(t, cikit.RunBlocked, b.runState(t))

		res, err := b.play(t, "deploy", 1)
		require.NoError(t, err)
		require.Equal(t, cikit.RunRunning, res.Run.State)
		b.advance(t, "deploy", cikit.JobSucceeded)
		res = b.advance(t, "smoke", cikit.JobSucceeded)
		require.Equal(t, cikit.RunSucceeded, res.Run.State)
	})

	t.Run("CancelAManualJob", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := setup(t, factory, deployPipeline(true))
		b.advance(t, "build", cikit.JobSucceeded)
		res, err := b.store.RunCancel(ctx, b.run.ID)
		require.NoError(t, err)
		require.Equal(t, map[string]cikit.JobState{"deploy": cikit.JobCancelled, "smoke": cikit.JobCancelled}, changed(res),
			"a blocked run's manual job and what waits for it are cancelled")
		require.Equal(t, cikit.RunCancelled, res.Run.State)
		_, err = b.play(t, "deploy", 1)
		require.ErrorIs(t, err, cikit.ErrInvalidTransition)
	})

	t.Run("ManualWithoutNeeds", func(t *testing.T) {
		t.Parallel()
		specs := deployPipeline(false)
		specs[1].Needs = nil
		b := setup(t, factory, specs)
		require.Equal(t, cikit.JobManual, b.job(t, "deploy").State, "a manual job that needs nothing is MANUAL at once")
		require.Equal(t, cikit.RunPending, b.run.State)
		res := b.advance(t, "build", cikit.JobSucceeded)
		require.Equal(t, cikit.RunSucceeded, res.Run.State)
	})

	t.Run("RetryFailedKeepsTheManualJobWaiting", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		specs := append(deployPipeline(false), &cikit.JobSpec{ID: "test", Name: "test", Steps: []cikit.Step{{Run: "false"}}})
		specs[1].Needs = nil
		b := setup(t, factory, specs)
		res := b.advance(t, "test", cikit.JobFailed)
		require.Equal(t, cikit.RunRunning, res.Run.State)
		res = b.advance(t, "build", cikit.JobSucceeded)
		require.Equal(t, cikit.RunFailed, res.Run.State, "a required failure fails the run, a manual job waiting or not")
		res, err := b.store.RunRetryFailed(ctx, b.run.ID)
		require.NoError(t, err)
		require.Equal(t, map[string]cikit.JobState{"test": cikit.JobReady}, changed(res), "what has not run is not retried")
		require.Equal(t, cikit.JobManual, b.job(t, "deploy").State)
	})

	t.Run("DelayedWaitsItsStartIn", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		specs := deployPipeline(false)
		specs[1].When, specs[1].StartIn, specs[1].AllowFailure = cikit.WhenDelayed, 10*time.Minute, false
		b := setup(t, factory, specs)
		res := b.advance(t, "build", cikit.JobSucceeded)
		require.Equal(t, map[string]cikit.JobState{"build": cikit.JobSucceeded, "deploy": cikit.JobDelayed}, changed(res))
		require.Equal(t, cikit.RunRunning, res.Run.State, "a delayed job runs on its own: the run is not over")
		at := res.Changed[0].FinishedAt.Add(10 * time.Minute)
		require.Equal(t, at, b.job(t, "deploy").ReadyAt, "counted from when its needs were satisfied, on the store's clock")

		_, err := b.store.JobQueue(ctx, &dag.JobTransitionParams{RunID: b.run.ID, JobID: "deploy", Attempt: 1})
		require.ErrorIs(t, err, cikit.ErrInvalidTransition)
		got, err := b.store.JobsRelease(ctx, at.Add(-time.Second))
		require.NoError(t, err)
		require.Empty(t, got, "not before its time")
		_, err = b.play(t, "deploy", 1)
		require.ErrorIs(t, err, cikit.ErrInvalidTransition, "a delayed job is not a person's to start")

		got, err = b.store.JobsRelease(ctx, at)
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, map[string]cikit.JobState{"deploy": cikit.JobReady}, changed(got[0]))
		require.Equal(t, b.run.ID, got[0].Run.ID)
		got, err = b.store.JobsRelease(ctx, at.Add(time.Hour))
		require.NoError(t, err)
		require.Empty(t, got, "released once")
		b.advance(t, "deploy", cikit.JobSucceeded)
		res = b.advance(t, "smoke", cikit.JobSucceeded)
		require.Equal(t, cikit.RunSucceeded, res.Run.State)

		_, err = b.store.JobsRelease(ctx, time.Time{})
		require.Error(t, err)
	})

	t.Run("DelayedAtCreationAndCancelled", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		specs := deployPipeline(false)
		specs[1].Needs, specs[1].When, specs[1].StartIn = nil, cikit.WhenDelayed, time.Hour
		b := setup(t, factory, specs)
		j := b.job(t, "deploy")
		require.Equal(t, cikit.JobDelayed, j.State)
		require.Equal(t, b.run.CreatedAt.Add(time.Hour), j.ReadyAt)
		res, err := b.store.RunCancel(ctx, b.run.ID)
		require.NoError(t, err)
		require.Equal(t, cikit.JobCancelled, changed(res)["deploy"])
		got, err := b.store.JobsRelease(ctx, j.ReadyAt.Add(time.Hour))
		require.NoError(t, err)
		require.Empty(t, got, "a cancelled delayed job is never released")
	})
}
