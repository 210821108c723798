package dag_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/internal/pgtest"
)

// TestPostgresGroupRace races one goroutine per run through a concurrency
// group on PostgreSQL: each completes its run's build, which makes the
// run's deploy READY at a moment of its own, then queues deploy until its
// turn comes — every third with cancel_in_progress, cancelling the others
// — and starts and completes it. One query counts the group's active
// jobs after every successful queue and, in a sampler, all along: never
// more than one.
func TestPostgresGroupRace(t *testing.T) {
	t.Parallel()
	// The first failure, or a minute, stops every goroutine: one that
	// fails holding the group would keep the others waiting.
	ctx, cancel := context.WithTimeoutCause(context.Background(), time.Minute, errors.New("the group's jobs did not all run within a minute"))
	defer cancel()
	ctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	db := pgtest.New(t)
	s, err := dag.NewPostgresStore(dag.PostgresConfig{Pool: db.Pool})
	require.NoError(t, err)
	require.NoError(t, s.Migrate(ctx))
	active := func() (int, error) {
		var n int
		err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE job_id = 'deploy' AND state IN ('queued', 'running', 'cancel_requested')`).Scan(&n)
		return n, err
	}

	const n = 16
	runs := make([]*dag.Run, n)
	for i := range runs {
		step := []cikit.Step{{Run: "true"}}
		run, err := s.RunCreate(ctx, &dag.RunCreateParams{Branch: "main", Jobs: []*cikit.JobSpec{
			{ID: "build", Steps: step},
			{ID: "deploy", Needs: []string{"build"}, Steps: step,
				Concurrency: &cikit.Concurrency{Group: "prod", CancelInProgress: i%3 == 0}},
		}})
		require.NoError(t, err)
		runs[i] = run
	}

	stop := make(chan struct{})
	sampled := make(chan error, 1)
	go func() {
		sampled <- func() error {
			for {
				select {
				case <-stop:
					return nil
				default:
				}
				c, err := active()
				if err != nil {
					return err
				}
				if c > 1 {
					err := fmt.Errorf("the sampler saw %d jobs of the group active", c)
					fail(err)
					return err
				}
			}
		}()
	}()

	errs := make(chan error, n)
	var wg sync.WaitGroup
	for _, run := range runs {
		wg.Go(func() {
			err := racer(ctx, s, run.ID, active)
			if err != nil {
				fail(err)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(stop)
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, <-sampled)
	deployed := 0
	for _, run := range runs {
		jobs, err := s.JobList(ctx, run.ID)
		require.NoError(t, err)
		require.True(t, jobs[1].State.Terminal(), "deploy of %s is %s", run.ID, jobs[1].State)
		if jobs[1].State == cikit.JobSucceeded {
			deployed++
		}
	}
	require.Positive(t, deployed)
}

// racer drives one run of TestPostgresGroupRace.
func racer(ctx context.Context, s dag.Store, runID string, active func() (int, error)) error {
	build := &dag.JobTransitionParams{RunID: runID, JobID: "build", Attempt: 1}
	if _, err := s.JobQueue(ctx, build); err != nil {
		return err
	}
	if _, err := s.JobStart(ctx, build); err != nil {
		return err
	}
	if _, err := s.JobComplete(ctx, &dag.JobCompleteParams{RunID: runID, JobID: "build", Attempt: 1, Outcome: cikit.JobSucceeded}); err != nil {
		return err
	}
	deploy := &dag.JobTransitionParams{RunID: runID, JobID: "deploy", Attempt: 1}
	for {
		_, err := s.JobQueue(ctx, deploy)
		if errors.Is(err, cikit.ErrInvalidTransition) {
			return nil // cancelled while it waited, by a newer job with cancel_in_progress
		}
		if !errors.Is(err, dag.ErrGroupBusy) {
			if err != nil {
				return err
			}
			break
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		time.Sleep(time.Millisecond)
	}
	if c, err := active(); err != nil || c > 1 {
		return fmt.Errorf("%d jobs of the group active after run %s queued its deploy (%v)", c, runID, err)
	}
	_, err := s.JobStart(ctx, deploy)
	if errors.Is(err, cikit.ErrInvalidTransition) {
		return nil // cancelled while QUEUED
	}
	if err != nil {
		return err
	}
	_, err = s.JobComplete(ctx, &dag.JobCompleteParams{RunID: runID, JobID: "deploy", Attempt: 1, Outcome: cikit.JobSucceeded})
	return err
}
