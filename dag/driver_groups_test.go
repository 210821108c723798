package dag_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

func inGroup(id string, cancelInProgress bool, needs ...string) *cikit.JobSpec {
	return &cikit.JobSpec{ID: id, Needs: needs, Steps: []cikit.Step{{Run: "true"}},
		Concurrency: &cikit.Concurrency{Group: "deploy", CancelInProgress: cancelInProgress}}
}

// TestDriverGroupInRun drives three jobs of one group that are READY at
// once with room for all: they run one at a time, in plan order.
func TestDriverGroupInRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dag.NewMemoryStore(dag.MemoryConfig{})
	run, err := s.RunCreate(ctx, &dag.RunCreateParams{Jobs: []*cikit.JobSpec{inGroup("eu", false), inGroup("us", false), inGroup("asia", false)}})
	require.NoError(t, err)
	var mu sync.Mutex
	var order []string
	running, most := 0, 0
	d, err := dag.NewDriver(dag.DriverConfig{Store: s, Parallel: 3, Executor: dag.ExecutorFunc(func(ctx context.Context, j *dag.Job) dag.Outcome {
		mu.Lock()
		running++
		most = max(most, running)
		order = append(order, j.ID())
		mu.Unlock()
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		running--
		mu.Unlock()
		return dag.Outcome{State: cikit.JobSucceeded}
	})})
	require.NoError(t, err)
	final, err := d.Drive(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, cikit.RunSucceeded, final.State)
	require.Equal(t, 1, most, "one job of the group at a time")
	require.Equal(t, []string{"eu", "us", "asia"}, order)
}

// TestDriverGroupHeldByAnotherRun drives a run whose job waits for its
// group, held by a job of another run, and asks again every GroupRetry
// until that job ends.
func TestDriverGroupHeldByAnotherRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dag.NewMemoryStore(dag.MemoryConfig{})
	other, err := s.RunCreate(ctx, &dag.RunCreateParams{Jobs: []*cikit.JobSpec{inGroup("deploy", false)}})
	require.NoError(t, err)
	held := &dag.JobTransitionParams{RunID: other.ID, JobID: "deploy", Attempt: 1}
	_, err = s.JobQueue(ctx, held)
	require.NoError(t, err)
	run, err := s.RunCreate(ctx, &dag.RunCreateParams{Jobs: []*cikit.JobSpec{inGroup("deploy", false)}})
	require.NoError(t, err)

	var released atomic.Bool
	d, err := dag.NewDriver(dag.DriverConfig{Store: s, GroupRetry: 5 * time.Millisecond, Executor: dag.ExecutorFunc(func(context.Context, *dag.Job) dag.Outcome {
		if !released.Load() {
			return dag.Outcome{State: cikit.JobFailed, Reason: "ran while the other run held the group"}
		}
		return dag.Outcome{State: cikit.JobSucceeded}
	})})
	require.NoError(t, err)
	done := make(chan *dag.Run)
	go func() {
		final, err := d.Drive(ctx, run.ID)
		if err != nil {
			t.Error(err)
		}
		done <- final
	}()
	time.Sleep(30 * time.Millisecond) // several retries
	released.Store(true)
	_, err = s.JobStart(ctx, held)
	require.NoError(t, err)
	_, err = s.JobComplete(ctx, &dag.JobCompleteParams{RunID: other.ID, JobID: "deploy", Attempt: 1, Outcome: cikit.JobSucceeded})
	require.NoError(t, err)
	final := <-done
	require.Equal(t, cikit.RunSucceeded, final.State)
}

// TestDriverGroupCancelInProgress drives a run in which a job with
// cancel_in_progress becomes READY while an older job of its group runs:
// the older one's execution is cancelled, and the newer one runs once it
// has returned.
func TestDriverGroupCancelInProgress(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dag.NewMemoryStore(dag.MemoryConfig{})
	run, err := s.RunCreate(ctx, &dag.RunCreateParams{Jobs: []*cikit.JobSpec{
		inGroup("old", false),
		{ID: "build", Steps: []cikit.Step{{Run: "true"}}},
		inGroup("new", true, "build"),
	}})
	require.NoError(t, err)
	oldStarted := make(chan struct{})
	var oldStopped atomic.Bool
	var changes []string
	d, err := dag.NewDriver(dag.DriverConfig{Store: s, Parallel: 3,
		OnChange: func(j *dag.Job) { changes = append(changes, j.ID()+" "+string(j.State)) },
		Executor: dag.ExecutorFunc(func(ctx context.Context, j *dag.Job) dag.Outcome {
			switch j.ID() {
			case "old":
				close(oldStarted)
				select {
				case <-ctx.Done():
					oldStopped.Store(true)
					return dag.Outcome{State: cikit.JobCancelled, ExitCode: -1, Reason: "stopped"}
				case <-time.After(time.Minute):
					return dag.Outcome{State: cikit.JobFailed, Reason: "never told to stop"}
				}
			case "build":
				<-oldStarted
			case "new":
				if !oldStopped.Load() {
					return dag.Outcome{State: cikit.JobFailed, Reason: "ran beside old"}
				}
			}
			return dag.Outcome{State: cikit.JobSucceeded}
		})})
	require.NoError(t, err)
	final, err := d.Drive(ctx, run.ID)
	require.NoError(t, err)
	jobs, err := s.JobList(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, []cikit.JobState{cikit.JobCancelled, cikit.JobSucceeded, cikit.JobSucceeded}, []cikit.JobState{jobs[0].State, jobs[1].State, jobs[2].State})
	require.Equal(t, cikit.RunCancelled, final.State, "a run with a cancelled job is cancelled")
	require.Contains(t, changes, "old cancel_requested")
	require.Contains(t, changes, "old cancelled")
	require.Less(t, slices.Index(changes, "old cancelled"), slices.Index(changes, "new queued"), "new waited for old to end: %v", changes)
}

// TestDriverGroupCancelInProgressQueued drives two jobs of a group READY
// at once, the second with cancel_in_progress: it cancels the first
// before that starts, and only the second runs.
func TestDriverGroupCancelInProgressQueued(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dag.NewMemoryStore(dag.MemoryConfig{})
	run, err := s.RunCreate(ctx, &dag.RunCreateParams{Jobs: []*cikit.JobSpec{inGroup("old", false), inGroup("new", true)}})
	require.NoError(t, err)
	var mu sync.Mutex
	var ran []string
	d, err := dag.NewDriver(dag.DriverConfig{Store: s, Parallel: 2, Executor: dag.ExecutorFunc(func(_ context.Context, j *dag.Job) dag.Outcome {
		mu.Lock()
		defer mu.Unlock()
		ran = append(ran, j.ID())
		return dag.Outcome{State: cikit.JobSucceeded}
	})})
	require.NoError(t, err)
	final, err := d.Drive(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, []string{"new"}, ran)
	require.Equal(t, cikit.RunCancelled, final.State)
}
