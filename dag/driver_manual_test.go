package dag_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

// manualSpecs is build -> deploy (manual, allow_failure unless blocking) -> smoke.
func manualSpecs(blocking bool) []*cikit.JobSpec {
	step := []cikit.Step{{Run: "true"}}
	return []*cikit.JobSpec{
		{ID: "build", Steps: step},
		{ID: "deploy", Needs: []string{"build"}, When: cikit.WhenManual, AllowFailure: !blocking, Steps: step},
		{ID: "smoke", Needs: []string{"deploy"}, Steps: step},
	}
}

// driveSpecs runs specs to their end with an executor that succeeds, and
// returns the run, its jobs and the jobs executed.
func driveSpecs(t *testing.T, specs []*cikit.JobSpec, cfg dag.DriverConfig) (*dag.Run, []*dag.Job, []string) {
	t.Helper()
	ctx := context.Background()
	s := dag.NewMemoryStore(dag.MemoryConfig{Now: cfg.Now})
	run, err := s.RunCreate(ctx, &dag.RunCreateParams{Jobs: specs})
	require.NoError(t, err)
	var mu sync.Mutex
	var ran []string
	cfg.Store = s
	cfg.Executor = dag.ExecutorFunc(func(ctx context.Context, j *dag.Job) dag.Outcome {
		mu.Lock()
		defer mu.Unlock()
		ran = append(ran, j.ID())
		return dag.Outcome{State: cikit.JobSucceeded}
	})
	d, err := dag.NewDriver(cfg)
	require.NoError(t, err)
	final, err := d.Drive(ctx, run.ID)
	require.NoError(t, err)
	jobs, err := s.JobList(ctx, run.ID)
	require.NoError(t, err)
	return final, jobs, ran
}

// TestDriverLeavesManualJobsWaiting: a manual deploy does not run on its
// own (before manual jobs had a state of their own, it ran as soon as
// build succeeded); named in Play, it runs.
func TestDriverLeavesManualJobsWaiting(t *testing.T) {
	t.Parallel()
	final, jobs, ran := driveSpecs(t, manualSpecs(false), dag.DriverConfig{Parallel: 1})
	require.Equal(t, []string{"build"}, ran)
	require.Equal(t, cikit.RunSucceeded, final.State, "a manual job that may fail does not hold the run")
	require.Equal(t, []cikit.JobState{cikit.JobSucceeded, cikit.JobManual, cikit.JobPending}, []cikit.JobState{jobs[0].State, jobs[1].State, jobs[2].State})

	final, _, ran = driveSpecs(t, manualSpecs(true), dag.DriverConfig{Parallel: 1})
	require.Equal(t, []string{"build"}, ran)
	require.Equal(t, cikit.RunBlocked, final.State)

	final, jobs, ran = driveSpecs(t, manualSpecs(true), dag.DriverConfig{Parallel: 1, Play: []string{"deploy"}})
	require.Equal(t, []string{"build", "deploy", "smoke"}, ran)
	require.Equal(t, cikit.RunSucceeded, final.State)
	for _, j := range jobs {
		require.Equal(t, cikit.JobSucceeded, j.State, j.ID())
	}
}

// TestDriverWaitsForDelayedJobs: a delayed job runs once its StartIn has
// passed on the driver's clock, and not before.
func TestDriverWaitsForDelayedJobs(t *testing.T) {
	t.Parallel()
	specs := manualSpecs(false)
	specs[1].When, specs[1].StartIn = cikit.WhenDelayed, 50*time.Millisecond
	final, jobs, ran := driveSpecs(t, specs, dag.DriverConfig{Parallel: 1})
	require.Equal(t, []string{"build", "deploy", "smoke"}, ran)
	require.Equal(t, cikit.RunSucceeded, final.State)
	require.GreaterOrEqual(t, jobs[1].StartedAt.Sub(jobs[0].FinishedAt), 50*time.Millisecond, "it waited its start_in")

	// On a clock an hour ahead of the store's, the delay of ten minutes
	// has passed at once.
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	calls := 0
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		calls++
		return t0.Add(time.Duration(calls) * time.Hour)
	}
	specs[1].StartIn = 10 * time.Minute
	final, _, ran = driveSpecs(t, specs, dag.DriverConfig{Parallel: 1, Now: clock})
	require.Equal(t, []string{"build", "deploy", "smoke"}, ran)
	require.Equal(t, cikit.RunSucceeded, final.State)
}

// TestDriverRefusesUnknownPlay: a name in Play that is not a manual job of
// the run is refused, not ignored.
func TestDriverRefusesUnknownPlay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dag.NewMemoryStore(dag.MemoryConfig{})
	run, err := s.RunCreate(ctx, &dag.RunCreateParams{Jobs: manualSpecs(false)})
	require.NoError(t, err)
	exec := dag.ExecutorFunc(func(context.Context, *dag.Job) dag.Outcome { return dag.Outcome{State: cikit.JobSucceeded} })
	for _, name := range []string{"build", "nope"} {
		d, err := dag.NewDriver(dag.DriverConfig{Store: s, Executor: exec, Play: []string{name}})
		require.NoError(t, err)
		_, err = d.Drive(ctx, run.ID)
		require.ErrorContains(t, err, "which is not a manual or gated job of run")
	}
	j, err := s.JobGet(ctx, run.ID, "build")
	require.NoError(t, err)
	require.Equal(t, cikit.JobReady, j.State, "nothing ran")
}

// TestDriverApprovesGatedJobs: a gated deploy holds the run BLOCKED on its
// own, whatever its When; named in Play, it is approved and runs, after
// its gate's wait timer when it has one.
func TestDriverApprovesGatedJobs(t *testing.T) {
	t.Parallel()
	specs := manualSpecs(true)
	specs[1].When, specs[1].Gate = "", &cikit.Gate{Reasons: []string{"deployment to production"}}
	final, jobs, ran := driveSpecs(t, specs, dag.DriverConfig{Parallel: 1})
	require.Equal(t, []string{"build"}, ran)
	require.Equal(t, cikit.RunBlocked, final.State)
	require.Equal(t, "waiting for approval by a person with the approve role: deployment to production", jobs[1].Reason)

	final, _, ran = driveSpecs(t, specs, dag.DriverConfig{Parallel: 1, Play: []string{"deploy"}})
	require.Equal(t, []string{"build", "deploy", "smoke"}, ran)
	require.Equal(t, cikit.RunSucceeded, final.State)

	// The wait timer passes on the driver's clock, an hour ahead of the
	// store's at every read.
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	calls := 0
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		calls++
		return t0.Add(time.Duration(calls) * time.Hour)
	}
	specs[1].Gate.WaitTimer = 10 * time.Minute
	final, jobs, ran = driveSpecs(t, specs, dag.DriverConfig{Parallel: 1, Play: []string{"deploy"}, Now: clock})
	require.Equal(t, []string{"build", "deploy", "smoke"}, ran)
	require.Equal(t, cikit.RunSucceeded, final.State)
	require.GreaterOrEqual(t, jobs[1].StartedAt.Sub(jobs[0].FinishedAt), 10*time.Minute, "it waited its wait timer")
}
