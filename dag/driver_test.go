package dag_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

func TestNewDriverValidates(t *testing.T) {
	t.Parallel()
	exec := dag.ExecutorFunc(func(context.Context, *dag.Job) dag.Outcome { return dag.Outcome{State: cikit.JobSucceeded} })
	_, err := dag.NewDriver(dag.DriverConfig{Executor: exec})
	require.ErrorContains(t, err, "Store is required")
	_, err = dag.NewDriver(dag.DriverConfig{Store: dag.NewMemoryStore(dag.MemoryConfig{})})
	require.ErrorContains(t, err, "Executor is required")
	_, err = dag.NewDriver(dag.DriverConfig{Store: dag.NewMemoryStore(dag.MemoryConfig{}), Executor: exec, Parallel: -1})
	require.ErrorContains(t, err, "Parallel must not be negative")
	_, err = dag.NewDriver(dag.DriverConfig{Store: dag.NewMemoryStore(dag.MemoryConfig{}), Executor: exec, GroupRetry: -time.Second})
	require.ErrorContains(t, err, "GroupRetry must not be negative")
}

// TestDriverCancel cancels a run while build runs: build's execution sees
// the cancellation, the jobs that never started end CANCELLED, and Drive
// returns only after the execution returned.
func TestDriverCancel(t *testing.T) {
	t.Parallel()
	s := dag.NewMemoryStore(dag.MemoryConfig{})
	run, err := s.RunCreate(context.Background(), &dag.RunCreateParams{Jobs: pipeline()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	var returned sync.WaitGroup
	returned.Add(1)
	d, err := dag.NewDriver(dag.DriverConfig{Store: s, Executor: dag.ExecutorFunc(func(ctx context.Context, j *dag.Job) dag.Outcome {
		defer returned.Done()
		close(started)
		<-ctx.Done()
		return dag.Outcome{State: cikit.JobCancelled, ExitCode: -1, Reason: "interrupted"}
	})})
	require.NoError(t, err)
	go func() { <-started; cancel() }()
	final, err := d.Drive(ctx, run.ID)
	require.NoError(t, err)
	returned.Wait() // would hang if Drive had not waited for the execution
	require.Equal(t, cikit.RunCancelled, final.State)
	jobs, err := s.JobList(context.Background(), run.ID)
	require.NoError(t, err)
	for _, j := range jobs {
		require.Equal(t, cikit.JobCancelled, j.State, j.ID())
	}
	require.Equal(t, "interrupted", jobs[0].Reason)
}

func TestDriverCancelledBeforeStart(t *testing.T) {
	t.Parallel()
	s := dag.NewMemoryStore(dag.MemoryConfig{})
	run, err := s.RunCreate(context.Background(), &dag.RunCreateParams{Jobs: pipeline()})
	require.NoError(t, err)
	d, err := dag.NewDriver(dag.DriverConfig{Store: s, Executor: dag.ExecutorFunc(func(context.Context, *dag.Job) dag.Outcome {
		t.Error("no job may start in a cancelled run")
		return dag.Outcome{State: cikit.JobFailed}
	})})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	final, err := d.Drive(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, cikit.RunCancelled, final.State)
}

// failingStore fails every completion.
type failingStore struct{ dag.Store }

var errDisk = errors.New("disk on fire")

func (failingStore) JobComplete(context.Context, *dag.JobCompleteParams) (*dag.TransitionResult, error) {
	return nil, errDisk
}

func TestDriverStoreFailureStopsExecutions(t *testing.T) {
	t.Parallel()
	mem := dag.NewMemoryStore(dag.MemoryConfig{})
	jobs := []*cikit.JobSpec{{ID: "fast"}, {ID: "slow"}}
	run, err := mem.RunCreate(context.Background(), &dag.RunCreateParams{Jobs: jobs})
	require.NoError(t, err)
	slowStopped := false
	d, err := dag.NewDriver(dag.DriverConfig{Store: failingStore{mem}, Parallel: 2, Executor: dag.ExecutorFunc(func(ctx context.Context, j *dag.Job) dag.Outcome {
		if j.ID() == "slow" {
			<-ctx.Done()
			slowStopped = true
			return dag.Outcome{State: cikit.JobCancelled}
		}
		return dag.Outcome{State: cikit.JobSucceeded}
	})})
	require.NoError(t, err)
	_, err = d.Drive(context.Background(), run.ID)
	require.ErrorIs(t, err, errDisk)
	require.True(t, slowStopped, "Drive returned before the running execution stopped")
}

func TestDriverInvalidOutcomeIsAFailure(t *testing.T) {
	t.Parallel()
	s := dag.NewMemoryStore(dag.MemoryConfig{})
	run, err := s.RunCreate(context.Background(), &dag.RunCreateParams{Jobs: []*cikit.JobSpec{{ID: "a"}}})
	require.NoError(t, err)
	d, err := dag.NewDriver(dag.DriverConfig{Store: s, Executor: dag.ExecutorFunc(func(context.Context, *dag.Job) dag.Outcome {
		return dag.Outcome{State: cikit.JobRunning}
	}), Logger: discardLogger()})
	require.NoError(t, err)
	final, err := d.Drive(context.Background(), run.ID)
	require.NoError(t, err)
	require.Equal(t, cikit.RunFailed, final.State)
}
