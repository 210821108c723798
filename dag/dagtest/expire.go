package dagtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

// job returns the run's job id as the store has it now.
func (b *bundle) job(t *testing.T, id string) *dag.Job {
	t.Helper()
	jobs, err := b.store.JobList(context.Background(), b.run.ID)
	require.NoError(t, err)
	for _, j := range jobs {
		if j.ID() == id {
			return j
		}
	}
	t.Fatalf("run %s has no job %s", b.run.ID, id)
	return nil
}

// queue moves attempt of a READY job to QUEUED.
func (b *bundle) queue(t *testing.T, job string, attempt int) {
	t.Helper()
	_, err := b.store.JobQueue(context.Background(), &dag.JobTransitionParams{RunID: b.run.ID, JobID: job, Attempt: attempt})
	require.NoError(t, err)
}

// start moves attempt of a READY job to RUNNING and returns its start.
func (b *bundle) start(t *testing.T, job string, attempt int) time.Time {
	t.Helper()
	b.queue(t, job, attempt)
	res, err := b.store.JobStart(context.Background(), &dag.JobTransitionParams{RunID: b.run.ID, JobID: job, Attempt: attempt})
	require.NoError(t, err)
	return res.Changed[0].StartedAt
}

// expire calls JobsExpire and requires it to succeed.
func (b *bundle) expire(t *testing.T, p dag.ExpireParams) []*dag.TransitionResult {
	t.Helper()
	res, err := b.store.JobsExpire(context.Background(), &p)
	require.NoError(t, err)
	return res
}

// expireAll expires every READY, QUEUED and RUNNING job and every gated
// MANUAL job of the store's runs at once, and returns what changed in run runID as one result.
func expireAll(ctx context.Context, store dag.Store, runID string) (*dag.TransitionResult, error) {
	results, err := store.JobsExpire(ctx, &dag.ExpireParams{Now: time.Now().Add(time.Hour), MaxQueueTime: time.Nanosecond, DefaultTimeout: time.Nanosecond,
		GateTimeout: time.Nanosecond})
	if err != nil {
		return nil, err
	}
	merged := &dag.TransitionResult{}
	for _, r := range results {
		if r.Run.ID == runID {
			merged.Changed, merged.Run = append(merged.Changed, r.Changed...), r.Run
		}
	}
	if merged.Run == nil {
		merged.Run, err = store.RunGet(ctx, runID)
	}
	return merged, err
}

// exerciseExpire is the part of Exercise about Store.JobsExpire: job
// timeouts and the max queue time. Deadlines are set from the jobs'
// recorded times, not from the suite's clock.
func exerciseExpire(t *testing.T, factory Factory) {
	t.Run("Timeout", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		specs := pipeline()
		specs[0].Timeout = 10 * time.Minute
		b := setup(t, factory, specs)
		started := b.start(t, "build", 1)

		limit := started.Add(10 * time.Minute)
		require.Empty(t, b.expire(t, dag.ExpireParams{Now: limit, DefaultTimeout: time.Minute}),
			"a job at its timeout is within it, and its spec's timeout overrides the default")
		require.Equal(t, cikit.JobRunning, b.job(t, "build").State)

		res := b.expire(t, dag.ExpireParams{Now: limit.Add(time.Second), DefaultTimeout: time.Minute})
		require.Len(t, res, 1)
		require.Equal(t, map[string]cikit.JobState{
			"build": cikit.JobFailed, "unit": cikit.JobSkipped, "lint": cikit.JobSkipped, "integration": cikit.JobSkipped,
		}, changed(res[0]))
		j := res[0].Changed[0]
		require.Equal(t, "build", j.ID(), "the expired job's own change comes first")
		require.Equal(t, "timeout: exceeded its timeout of 10m0s", j.Reason)
		require.Equal(t, -1, j.ExitCode)
		require.Equal(t, 1, j.Attempt)
		require.False(t, j.FinishedAt.IsZero())
		for _, c := range res[0].Changed[1:] {
			require.Contains(t, c.Reason, "needs ")
		}
		require.Equal(t, cikit.RunFailed, res[0].Run.State)

		evs, err := b.store.OutboxPending(ctx, 1000)
		require.NoError(t, err)
		require.GreaterOrEqual(t, len(evs), 5)
		type ev struct{ Type, Job, State, Reason string }
		var got []ev
		for _, e := range evs[len(evs)-5:] {
			got = append(got, ev{e.Type, e.JobID, e.State, e.Reason})
		}
		require.Equal(t, []ev{
			{dag.EventJobCompleted, "build", "failed", "timeout: exceeded its timeout of 10m0s"},
			{dag.EventJobCompleted, "unit", "skipped", "needs build, which failed"},
			{dag.EventJobCompleted, "lint", "skipped", "needs build, which failed"},
			{dag.EventJobCompleted, "integration", "skipped", "needs unit, which was skipped"},
			{dag.EventPipelineCompleted, "", "failed", ""},
		}, got)

		_, err = b.store.JobComplete(ctx, &dag.JobCompleteParams{RunID: b.run.ID, JobID: "build", Attempt: 1, Outcome: cikit.JobSucceeded})
		require.ErrorIs(t, err, cikit.ErrInvalidTransition, "the executor's late report of the expired attempt is refused")
		require.Equal(t, cikit.JobFailed, b.job(t, "build").State)
		require.Empty(t, b.expire(t, dag.ExpireParams{Now: limit.Add(time.Hour), DefaultTimeout: time.Minute}), "a failed job expires once")
	})

	t.Run("DefaultTimeout", func(t *testing.T) {
		t.Parallel()
		step := []cikit.Step{{Name: "true", Run: "true"}}
		b := setup(t, factory, []*cikit.JobSpec{{ID: "long", Timeout: 2 * time.Hour, Steps: step}, {ID: "plain", Steps: step}})
		b.start(t, "long", 1)
		now := b.start(t, "plain", 1).Add(time.Hour + time.Second)

		require.Empty(t, b.expire(t, dag.ExpireParams{Now: now}), "without a default, a job without a timeout runs as long as it likes")
		res := b.expire(t, dag.ExpireParams{Now: now, DefaultTimeout: time.Hour})
		require.Len(t, res, 1)
		require.Equal(t, map[string]cikit.JobState{"plain": cikit.JobFailed}, changed(res[0]))
		require.Equal(t, "timeout: exceeded its timeout of 1h0m0s", res[0].Changed[0].Reason)
		require.Equal(t, cikit.JobRunning, b.job(t, "long").State, "its own timeout of 2h is not over")
		require.Equal(t, cikit.RunRunning, res[0].Run.State)
	})

	t.Run("MaxQueueTime", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		step := []cikit.Step{{Name: "true", Run: "true"}}
		b := setup(t, factory, []*cikit.JobSpec{
			{ID: "ready", Steps: step},
			{ID: "queued", Steps: step},
			{ID: "running", Steps: step},
			{ID: "after", Needs: []string{"ready"}, Steps: step},
		})
		b.queue(t, "queued", 1)
		b.start(t, "running", 1)
		readyAt := b.job(t, "ready").ReadyAt
		require.Equal(t, readyAt, b.job(t, "queued").ReadyAt, "both became ready when the run was created")
		limit := readyAt.Add(time.Hour)

		require.Empty(t, b.expire(t, dag.ExpireParams{Now: limit.Add(time.Hour)}), "no max queue time, no limit")
		require.Empty(t, b.expire(t, dag.ExpireParams{Now: limit, MaxQueueTime: time.Hour}), "a job at the max queue time is within it")

		res := b.expire(t, dag.ExpireParams{Now: limit.Add(time.Second), MaxQueueTime: time.Hour})
		require.Len(t, res, 2)
		require.Equal(t, map[string]cikit.JobState{"ready": cikit.JobFailed, "after": cikit.JobSkipped}, changed(res[0]))
		require.Equal(t, map[string]cikit.JobState{"queued": cikit.JobFailed}, changed(res[1]))
		for _, r := range res {
			j := r.Changed[0]
			require.Equal(t, "queue_timeout: waited 1h0m1s in the queue, longer than the max queue time of 1h0m0s", j.Reason, j.ID())
			require.Equal(t, -1, j.ExitCode)
			require.True(t, j.StartedAt.IsZero(), "it never started")
		}
		require.Equal(t, cikit.JobRunning, b.job(t, "running").State, "a running job has left the queue")
		require.Equal(t, cikit.RunRunning, res[1].Run.State)

		_, err := b.store.JobQueue(ctx, &dag.JobTransitionParams{RunID: b.run.ID, JobID: "ready", Attempt: 1})
		require.ErrorIs(t, err, cikit.ErrInvalidTransition)
		_, err = b.store.JobStart(ctx, &dag.JobTransitionParams{RunID: b.run.ID, JobID: "queued", Attempt: 1})
		require.ErrorIs(t, err, cikit.ErrInvalidTransition, "a runner that takes an expired job too late is refused")
	})

	t.Run("Retry", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		step := []cikit.Step{{Name: "true", Run: "true"}}
		b := setup(t, factory, []*cikit.JobSpec{
			{ID: "slow", Timeout: 10 * time.Minute, Retry: &cikit.Retry{Max: 1, When: []string{"timeout"}}, Steps: step},
			{ID: "stuck", Retry: &cikit.Retry{Max: 1, When: []string{"stuck_or_timeout_failure"}}, Steps: step},
			{ID: "deploy", Needs: []string{"slow"}, Steps: step},
		})
		b.queue(t, "stuck", 1)
		now := b.start(t, "slow", 1).Add(10*time.Minute + time.Second)
		waited := now.Sub(b.job(t, "stuck").ReadyAt)
		p := dag.ExpireParams{Now: now, MaxQueueTime: 10 * time.Minute}

		res := b.expire(t, p)
		require.Len(t, res, 2)
		for _, r := range res {
			require.Len(t, r.Changed, 1, "a retried job has no consequences")
			j := r.Changed[0]
			require.Equal(t, cikit.JobReady, j.State, "the policy retries %s", j.ID())
			require.Equal(t, 2, j.Attempt)
			require.Zero(t, j.ExitCode)
			require.True(t, j.StartedAt.IsZero())
		}
		require.Equal(t, "slow", res[0].Changed[0].ID())
		require.Equal(t, "attempt 1 failed (timeout): timeout: exceeded its timeout of 10m0s; retrying", res[0].Changed[0].Reason)
		require.Equal(t, "stuck", res[1].Changed[0].ID())
		require.Equal(t, fmt.Sprintf("attempt 1 failed (timeout): queue_timeout: waited %s in the queue, longer than the max queue time of 10m0s; retrying", waited),
			res[1].Changed[0].Reason)

		_, err := b.store.JobComplete(ctx, &dag.JobCompleteParams{RunID: b.run.ID, JobID: "slow", Attempt: 1, Outcome: cikit.JobSucceeded})
		require.ErrorIs(t, err, cikit.ErrInvalidTransition, "the expired attempt is stale")
		require.Empty(t, b.expire(t, p), "the new attempts wait from when they became ready")

		now = b.start(t, "slow", 2).Add(10*time.Minute + time.Second)
		res = b.expire(t, dag.ExpireParams{Now: now})
		require.Len(t, res, 1)
		require.Equal(t, map[string]cikit.JobState{"slow": cikit.JobFailed, "deploy": cikit.JobSkipped}, changed(res[0]), "the budget is spent")
		require.Equal(t, 2, res[0].Changed[0].Attempt)
		require.Equal(t, "timeout: exceeded its timeout of 10m0s", res[0].Changed[0].Reason)
	})

	t.Run("NothingToDo", func(t *testing.T) {
		t.Parallel()
		c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		s := factory(t, c.now)
		far := dag.ExpireParams{Now: c.t.Add(1000 * time.Hour), MaxQueueTime: time.Nanosecond, DefaultTimeout: time.Nanosecond}
		res, err := s.JobsExpire(context.Background(), &far)
		require.NoError(t, err)
		require.Empty(t, res, "a store without runs")

		b := setup(t, factory, pipeline())
		require.Empty(t, b.expire(t, dag.ExpireParams{Now: b.run.CreatedAt, MaxQueueTime: time.Nanosecond, DefaultTimeout: time.Nanosecond}),
			"a job that just became ready")
		b.advance(t, "build", cikit.JobFailed)
		far.Now = b.run.CreatedAt.Add(1000 * time.Hour)
		require.Empty(t, b.expire(t, far), "finished jobs do not expire")
	})

	t.Run("InvalidParams", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory, pipeline())
		for _, p := range []dag.ExpireParams{
			{},
			{Now: b.run.CreatedAt, MaxQueueTime: -time.Second},
			{Now: b.run.CreatedAt, DefaultTimeout: -time.Second},
		} {
			_, err := b.store.JobsExpire(context.Background(), &p)
			require.ErrorContains(t, err, "ExpireParams", "%+v", p)
			require.NotErrorIs(t, err, cikit.ErrInvalidTransition)
		}
	})
}
