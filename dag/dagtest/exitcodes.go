package dagtest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

// exitCodesPipeline is lint (allowed to fail with exit code 1 only) ->
// deploy, beside unit, which needs nothing: the run's state after lint's
// failure is decided by a completion of another job.
func exitCodesPipeline() []*cikit.JobSpec {
	step := []cikit.Step{{Name: "true", Run: "true"}}
	return []*cikit.JobSpec{
		{ID: "lint", Name: "lint", AllowFailure: true, AllowFailureExitCodes: []int{1}, Steps: step},
		{ID: "deploy", Name: "deploy", Needs: []string{"lint"}, Steps: step},
		{ID: "unit", Name: "unit", Steps: step},
	}
}

// fail runs attempt of job to a failure of class with exitCode.
func (b *bundle) fail(t *testing.T, job string, attempt int, class cikit.FailureClass, exitCode int) *dag.TransitionResult {
	t.Helper()
	b.start(t, job, attempt)
	res, err := b.store.JobComplete(context.Background(), &dag.JobCompleteParams{RunID: b.run.ID, JobID: job, Attempt: attempt,
		Outcome: cikit.JobFailed, ExitCode: exitCode, Reason: "it failed", FailureClass: class})
	require.NoError(t, err)
	return res
}

// succeed runs attempt of job to success.
func (b *bundle) succeed(t *testing.T, job string, attempt int) *dag.TransitionResult {
	t.Helper()
	b.start(t, job, attempt)
	res, err := b.store.JobComplete(context.Background(), &dag.JobCompleteParams{RunID: b.run.ID, JobID: job, Attempt: attempt,
		Outcome: cikit.JobSucceeded})
	require.NoError(t, err)
	return res
}

// exerciseExitCodes is the part of Exercise about failures decided by
// their exit code: a failure allowed only with some exit codes
// (JobSpec.AllowFailureExitCodes, see dag.AllowedFailure) and retries on
// exit codes (cikit.Retry.ExitCodes).
func exerciseExitCodes(t *testing.T, factory Factory) {
	for _, c := range []struct {
		name     string
		class    cikit.FailureClass
		exitCode int
		allowed  bool
	}{
		{"ListedCode", cikit.FailureScript, 1, true},
		{"OtherCode", cikit.FailureScript, 2, false},
		{"TimeoutWithListedCode", cikit.FailureTimeout, 1, false},
		{"NoExit", cikit.FailureScript, -1, false},
	} {
		t.Run("AllowFailure"+c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := setup(t, factory, exitCodesPipeline())
			res := b.fail(t, "lint", 1, c.class, c.exitCode)
			lint := res.Changed[0]
			require.Equal(t, "lint", lint.ID())
			require.Equal(t, cikit.JobFailed, lint.State)
			require.Equal(t, c.allowed, lint.FailureAllowed, "the failure is judged by its exit code and class")
			require.Equal(t, cikit.RunRunning, res.Run.State, "unit is still to run")
			deploy := b.job(t, "deploy")
			if c.allowed {
				require.Equal(t, cikit.JobReady, deploy.State, "an allowed failure lets the jobs that need it run")
				b.succeed(t, "deploy", 1)
			} else {
				require.Equal(t, cikit.JobSkipped, deploy.State, "a failure not allowed skips the jobs that need it")
				require.Equal(t, "needs lint, which failed", deploy.Reason)
			}
			require.Equal(t, c.allowed, b.job(t, "lint").FailureAllowed, "the store keeps the judgement")
			res = b.succeed(t, "unit", 1)
			want := cikit.RunFailed
			if c.allowed {
				want = cikit.RunSucceeded
			}
			require.Equal(t, want, res.Run.State, "the last job's completion decides the run with lint's judged failure")
			run, err := b.store.RunGet(ctx, b.run.ID)
			require.NoError(t, err)
			require.Equal(t, want, run.State)
			attempts, err := b.store.JobAttempts(ctx, b.run.ID, "lint")
			require.NoError(t, err)
			require.Len(t, attempts, 1)
			require.Equal(t, c.allowed, attempts[0].FailureAllowed, "the ended attempt keeps its judgement")
		})
	}

	t.Run("AllowFailureExpired", func(t *testing.T) {
		t.Parallel()
		specs := exitCodesPipeline()
		specs[0].Timeout = time.Minute
		b := setup(t, factory, specs)
		started := b.start(t, "lint", 1)
		res := b.expire(t, dag.ExpireParams{Now: started.Add(time.Hour)})
		require.Len(t, res, 1)
		require.Equal(t, map[string]cikit.JobState{"lint": cikit.JobFailed, "deploy": cikit.JobSkipped}, changed(res[0]),
			"a timeout is no script exit: exit codes do not allow it")
		require.False(t, res[0].Changed[0].FailureAllowed)
	})

	t.Run("AllowFailureRetried", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := setup(t, factory, exitCodesPipeline())
		b.fail(t, "lint", 1, cikit.FailureScript, 2)
		res := b.succeed(t, "unit", 1)
		require.Equal(t, cikit.RunFailed, res.Run.State)

		res, err := b.store.RunRetryFailed(ctx, b.run.ID)
		require.NoError(t, err)
		require.Equal(t, map[string]cikit.JobState{"lint": cikit.JobReady, "deploy": cikit.JobPending}, changed(res))
		lint := b.job(t, "lint")
		require.Equal(t, 2, lint.Attempt)
		require.True(t, lint.FailureAllowed, "a new attempt starts from its spec's allow_failure")

		res = b.fail(t, "lint", 2, cikit.FailureScript, 1)
		require.Equal(t, map[string]cikit.JobState{"lint": cikit.JobFailed, "deploy": cikit.JobReady}, changed(res),
			"the new attempt's failure is judged by its own exit code")
		res = b.succeed(t, "deploy", 2) // its skipped attempt 1 was retried too
		require.Equal(t, cikit.RunSucceeded, res.Run.State)
		attempts, err := b.store.JobAttempts(ctx, b.run.ID, "lint")
		require.NoError(t, err)
		require.Len(t, attempts, 2)
		require.False(t, attempts[0].FailureAllowed)
		require.True(t, attempts[1].FailureAllowed)
	})

	t.Run("RetryExitCodes", func(t *testing.T) {
		t.Parallel()
		step := []cikit.Step{{Name: "true", Run: "true"}}
		specs := []*cikit.JobSpec{
			{ID: "oom", Name: "oom", Retry: &cikit.Retry{Max: 1, ExitCodes: []int{137}}, Steps: step},
			{ID: "test", Name: "test", Retry: &cikit.Retry{Max: 1, ExitCodes: []int{137}}, Steps: step},
		}
		b := setup(t, factory, specs)

		res := b.fail(t, "oom", 1, cikit.FailureScript, 137)
		require.Equal(t, map[string]cikit.JobState{"oom": cikit.JobReady}, changed(res), "exit code 137 is retried")
		require.Equal(t, 2, res.Changed[0].Attempt)
		res = b.fail(t, "oom", 2, cikit.FailureScript, 137)
		require.Equal(t, map[string]cikit.JobState{"oom": cikit.JobFailed}, changed(res), "within retry:max")

		res = b.fail(t, "test", 1, cikit.FailureScript, 1)
		require.Equal(t, map[string]cikit.JobState{"test": cikit.JobFailed}, changed(res), "exit code 1 is not retried")
		require.Equal(t, 1, res.Changed[0].Attempt)
		require.Equal(t, cikit.RunFailed, res.Run.State)
	})
}
