package fleet_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/internal/syncbuf"
)

// cancelAfterList is a store whose JobList ends its caller's context once
// it has read the jobs, as a server shutting down ends a dispatch that is
// under way.
type cancelAfterList struct {
	dag.Store
	cancel context.CancelFunc
}

func (s *cancelAfterList) JobList(ctx context.Context, runID string) ([]*dag.Job, error) {
	jobs, err := s.Store.JobList(ctx, runID)
	s.cancel()
	return jobs, err
}

// TestDispatchRunStopsWhenItsContextEnds checks that a dispatch whose
// context ends stops and says so, without logging an error per job it did
// not queue: a server shut down while offering a 10,000-job run logged
// thousands of ERROR lines, one per job. (It did before the change: the
// test failed with 200 ERROR lines and no error returned.)
func TestDispatchRunStopsWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	var logs syncbuf.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var store *cancelAfterList
	b := setupWith(t, memoryStores, func(c *fleet.ServerConfig) {
		store = &cancelAfterList{Store: c.Jobs, cancel: cancel}
		c.Jobs = store
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	specs := make([]*cikit.JobSpec, 200)
	for i := range specs {
		specs[i] = spec(fmt.Sprint("j", i))
	}
	run, err := b.jobs.RunCreate(context.Background(), &dag.RunCreateParams{Jobs: specs})
	require.NoError(t, err)
	err = b.server.DispatchRun(ctx, run.ID)
	require.ErrorIs(t, err, context.Canceled)
	require.NotContains(t, logs.String(), "level=ERROR")
	require.Zero(t, b.server.Dispatcher().Len(), "nothing was offered after the context ended")
}

// TestCancelWithdrawsOffers checks that cancelling a run withdraws the
// offers of its jobs: a runner asking for work then gets none, without a
// claim refused per job of the run. (Before the change the 1,000 offers
// stayed, each claimed and refused in turn; the test failed on the
// dispatcher's 1,000 waiting offers.)
func TestCancelWithdrawsOffers(t *testing.T) {
	t.Parallel()
	for _, st := range []struct {
		name string
		st   stores
	}{{"memory", memoryStores}, {"postgres+redis", postgresStores}} {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			b := setupOn(t, st.st)
			ctx := context.Background()
			specs := make([]*cikit.JobSpec, 1000)
			for i := range specs {
				specs[i] = spec(fmt.Sprint("j", i))
			}
			other := b.newRun(t, spec("other"))
			runID := b.newRun(t, specs...)
			require.Equal(t, 1001, b.server.Dispatcher().Len())
			res, err := b.jobs.RunCancel(ctx, runID)
			require.NoError(t, err)
			b.server.Dispatch(ctx, res)
			require.Equal(t, 1, b.server.Dispatcher().Len(), "only the other run's job is offered")
			runner := b.register(t)
			c := b.claim(t, runner, "0")
			require.NotNil(t, c)
			require.Equal(t, other, c.RunID)
			status, _ := b.call(t, http.MethodGet, "/v1/jobs/claim?wait=0", runner, nil)
			require.Equal(t, http.StatusNoContent, status)
		})
	}
}

// TestCompleteRepeatedAfterRetry checks that a completion repeated after
// its answer was lost, of an attempt the failure retried, finds the
// attempt ended as it said (from the job's ended attempts) and answers the
// job's state now.
func TestCompleteRepeatedAfterRetry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	runner := b.register(t)
	b.newRun(t, spec("build"))
	c := b.claim(t, runner, "5")
	failed := map[string]any{"result": "failed", "failure_class": "infrastructure", "exit_code": -1}
	status, out := b.call(t, http.MethodPost, jobPath(c, "complete"), c.Token, failed)
	require.Equal(t, http.StatusOK, status, "%v", out)
	require.Equal(t, "ready", out["state"], "the job is ready again, as attempt 2")
	status, out = b.call(t, http.MethodPost, jobPath(c, "complete"), c.Token, failed)
	require.Equal(t, http.StatusOK, status, "the completion repeated: %v", out)
	require.Equal(t, "queued", out["state"], "attempt 2 was dispatched meanwhile")
	status, _ = b.call(t, http.MethodPost, jobPath(c, "complete"), c.Token, map[string]any{"result": "succeeded"})
	require.Equal(t, http.StatusConflict, status, "a different completion of the retried attempt")
}

// TestCompleteConfigFailureIsNotRetried: a runner's completion with the
// failure class config (the job's commit does not exist) is taken and
// fails the job on its first attempt, although its retry policy retries
// every other failure; an unknown class is refused with 400.
func TestCompleteConfigFailureIsNotRetried(t *testing.T) {
	t.Parallel()
	b := setup(t)
	runner := b.register(t)
	s := spec("build")
	s.Retry = &cikit.Retry{Max: 2}
	b.newRun(t, s)
	c := b.claim(t, runner, "5")
	status, out := b.call(t, http.MethodPost, jobPath(c, "complete"), c.Token, map[string]any{"result": "failed", "failure_class": "bogus", "exit_code": -1})
	require.Equal(t, http.StatusBadRequest, status, "%v", out)
	failed := map[string]any{"result": "failed", "failure_class": "config", "exit_code": -1, "reason": "checkout: commit or ref not found"}
	status, out = b.call(t, http.MethodPost, jobPath(c, "complete"), c.Token, failed)
	require.Equal(t, http.StatusOK, status, "%v", out)
	require.Equal(t, "failed", out["state"], "a configuration failure is not retried")
	j, err := b.jobs.JobGet(context.Background(), c.RunID, c.JobID)
	require.NoError(t, err)
	require.Equal(t, 1, j.Attempt)
	require.Equal(t, "checkout: commit or ref not found", j.Reason)
}
