package dag_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

// pipeline is build -> [unit, lint(allow_failure)] -> integration.
func pipeline() []*cikit.JobSpec {
	step := []cikit.Step{{Run: "true"}}
	return []*cikit.JobSpec{
		{ID: "build", Steps: step},
		{ID: "unit", Needs: []string{"build"}, Steps: step},
		{ID: "lint", Needs: []string{"build"}, AllowFailure: true, Steps: step},
		{ID: "integration", Needs: []string{"unit", "lint"}, Steps: step},
	}
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { c.t = c.t.Add(time.Second); return c.t }

func newStore(t *testing.T) (*dag.MemoryStore, *dag.Run) {
	t.Helper()
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := dag.NewMemoryStore(dag.MemoryConfig{Now: c.now, NewID: func() string { return "run-1" }})
	run, err := s.RunCreate(context.Background(), &dag.RunCreateParams{Jobs: pipeline()})
	require.NoError(t, err)
	return s, run
}

// advance queues, starts and completes a job.
func advance(t *testing.T, s dag.Store, runID, job string, outcome cikit.JobState) *dag.TransitionResult {
	t.Helper()
	ctx := context.Background()
	p := &dag.JobTransitionParams{RunID: runID, JobID: job, Attempt: 1}
	_, err := s.JobQueue(ctx, p)
	require.NoError(t, err)
	_, err = s.JobStart(ctx, p)
	require.NoError(t, err)
	res, err := s.JobComplete(ctx, &dag.JobCompleteParams{RunID: runID, JobID: job, Attempt: 1, Outcome: outcome, ExitCode: 3, Reason: "exit 3"})
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

func TestMemoryStoreLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, run := newStore(t)
	require.Equal(t, "run-1", run.ID)
	require.Equal(t, cikit.RunPending, run.State)

	res := advance(t, s, run.ID, "build", cikit.JobSucceeded)
	require.Equal(t, map[string]cikit.JobState{"build": cikit.JobSucceeded, "unit": cikit.JobReady, "lint": cikit.JobReady}, changed(res))
	require.Equal(t, cikit.RunRunning, res.Run.State)

	res = advance(t, s, run.ID, "lint", cikit.JobFailed)
	require.Equal(t, map[string]cikit.JobState{"lint": cikit.JobFailed}, changed(res), "integration still waits for unit")
	require.Equal(t, 3, res.Changed[0].ExitCode)
	require.Equal(t, "exit 3", res.Changed[0].Reason)

	res = advance(t, s, run.ID, "unit", cikit.JobSucceeded)
	require.Equal(t, cikit.JobReady, changed(res)["integration"], "lint's failure is allowed")
	res = advance(t, s, run.ID, "integration", cikit.JobSucceeded)
	require.Equal(t, cikit.RunSucceeded, res.Run.State)
	require.False(t, res.Run.FinishedAt.IsZero())

	jobs, err := s.JobList(ctx, run.ID)
	require.NoError(t, err)
	for _, j := range jobs {
		require.True(t, j.State.Terminal())
		require.Equal(t, time.Second, j.Duration(), "start and finish are one clock tick apart")
	}
}

func TestMemoryStoreFailureSkipsDescendants(t *testing.T) {
	t.Parallel()
	s, run := newStore(t)
	res := advance(t, s, run.ID, "build", cikit.JobFailed)
	require.Equal(t, map[string]cikit.JobState{
		"build": cikit.JobFailed, "unit": cikit.JobSkipped, "lint": cikit.JobSkipped, "integration": cikit.JobSkipped,
	}, changed(res))
	require.Equal(t, cikit.RunFailed, res.Run.State)
	for _, j := range res.Changed[1:] {
		require.Contains(t, j.Reason, "needs ")
	}
}

func TestMemoryStoreRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, run := newStore(t)

	_, err := s.RunGet(ctx, "nope")
	require.ErrorIs(t, err, cikit.ErrNotFound)
	_, err = s.JobQueue(ctx, &dag.JobTransitionParams{RunID: run.ID, JobID: "nope", Attempt: 1})
	require.ErrorIs(t, err, cikit.ErrNotFound)

	// Illegal: unit is PENDING.
	_, err = s.JobStart(ctx, &dag.JobTransitionParams{RunID: run.ID, JobID: "unit", Attempt: 1})
	var te *cikit.TransitionError
	require.ErrorAs(t, err, &te)
	require.Equal(t, cikit.JobPending, te.From)
	require.Equal(t, cikit.JobRunning, te.To)

	// Stale attempt.
	_, err = s.JobQueue(ctx, &dag.JobTransitionParams{RunID: run.ID, JobID: "build", Attempt: 2})
	require.ErrorIs(t, err, cikit.ErrInvalidTransition)
	require.ErrorContains(t, err, "stale attempt")

	// A completion must name a terminal outcome.
	p := &dag.JobTransitionParams{RunID: run.ID, JobID: "build", Attempt: 1}
	_, err = s.JobQueue(ctx, p)
	require.NoError(t, err)
	_, err = s.JobStart(ctx, p)
	require.NoError(t, err)
	_, err = s.JobComplete(ctx, &dag.JobCompleteParams{RunID: run.ID, JobID: "build", Attempt: 1, Outcome: cikit.JobSkipped})
	require.ErrorIs(t, err, cikit.ErrInvalidTransition)

	// Duplicate completion: one effect.
	done := &dag.JobCompleteParams{RunID: run.ID, JobID: "build", Attempt: 1, Outcome: cikit.JobSucceeded}
	res, err := s.JobComplete(ctx, done)
	require.NoError(t, err)
	require.Len(t, res.Changed, 3)
	res, err = s.JobComplete(ctx, done)
	require.NoError(t, err)
	require.Empty(t, res.Changed)
	// A conflicting one is refused.
	done.Outcome = cikit.JobFailed
	_, err = s.JobComplete(ctx, done)
	require.ErrorIs(t, err, cikit.ErrInvalidTransition)

	// Cancelled context.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.JobList(cctx, run.ID)
	require.ErrorIs(t, err, context.Canceled)
}

func TestMemoryStoreCancel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, run := newStore(t)
	p := &dag.JobTransitionParams{RunID: run.ID, JobID: "build", Attempt: 1}
	_, err := s.JobQueue(ctx, p)
	require.NoError(t, err)
	_, err = s.JobStart(ctx, p)
	require.NoError(t, err)

	res, err := s.RunCancel(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, map[string]cikit.JobState{"unit": cikit.JobCancelled, "lint": cikit.JobCancelled, "integration": cikit.JobCancelled}, changed(res))
	require.Equal(t, cikit.RunRunning, res.Run.State, "build still runs")

	res, err = s.JobComplete(ctx, &dag.JobCompleteParams{RunID: run.ID, JobID: "build", Attempt: 1, Outcome: cikit.JobCancelled})
	require.NoError(t, err)
	require.Equal(t, cikit.RunCancelled, res.Run.State)

	res, err = s.RunCancel(ctx, run.ID)
	require.NoError(t, err, "cancelling a finished run is not an error")
	require.Empty(t, res.Changed)
}

func TestMemoryStoreResultsAreCopies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	specs := pipeline()
	specs[0].Env = map[string]string{"A": "1"}
	s := dag.NewMemoryStore(dag.MemoryConfig{})
	run, err := s.RunCreate(ctx, &dag.RunCreateParams{Jobs: specs})
	require.NoError(t, err)
	specs[0].Env["A"] = "changed by caller"
	jobs, err := s.JobList(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, "1", jobs[0].Spec.Env["A"])
	jobs[0].Spec.Env["A"] = "changed again"
	jobs[0].State = cikit.JobFailed
	again, err := s.JobList(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, "1", again[0].Spec.Env["A"])
	require.Equal(t, cikit.JobReady, again[0].State)
}

func TestRunCreateRejectsInvalidGraph(t *testing.T) {
	t.Parallel()
	s := dag.NewMemoryStore(dag.MemoryConfig{})
	_, err := s.RunCreate(context.Background(), &dag.RunCreateParams{Jobs: []*cikit.JobSpec{{ID: "a", Needs: []string{"a"}}}})
	require.ErrorIs(t, err, dag.ErrInvalidGraph)
}

// TestMemoryStoreNeverJobs: a job whose condition was decided false starts
// SKIPPED with the jobs that need it, and fails nothing.
func TestMemoryStoreNeverJobs(t *testing.T) {
	t.Parallel()
	specs := pipeline()
	specs[2].When = cikit.WhenNever // lint
	s := dag.NewMemoryStore(dag.MemoryConfig{})
	run, err := s.RunCreate(context.Background(), &dag.RunCreateParams{Jobs: specs})
	require.NoError(t, err)
	require.Equal(t, cikit.RunPending, run.State)
	jobs, err := s.JobList(context.Background(), run.ID)
	require.NoError(t, err)
	require.Equal(t, []cikit.JobState{cikit.JobReady, cikit.JobPending, cikit.JobSkipped, cikit.JobSkipped}, statesOf(jobs))
	require.Equal(t, "its condition is false", jobs[2].Reason)
	require.Equal(t, "needs lint, which was skipped", jobs[3].Reason)
	advance(t, s, run.ID, "build", cikit.JobSucceeded)
	res := advance(t, s, run.ID, "unit", cikit.JobSucceeded)
	require.Equal(t, cikit.RunSucceeded, res.Run.State, "skipping a job that never runs fails nothing")
}
