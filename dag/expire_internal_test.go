package dag

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
)

// TestExpireLeavesJobsThatMovedOn replays the race JobsExpire must lose
// gracefully: between the scan and the write, a job found QUEUED started,
// and a job found RUNNING finished.
func TestExpireLeavesJobsThatMovedOn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := NewMemoryStore(MemoryConfig{})
	run, err := s.RunCreate(ctx, &RunCreateParams{Jobs: []*cikit.JobSpec{{ID: "started"}, {ID: "finished"}}})
	require.NoError(t, err)
	for _, id := range []string{"started", "finished"} {
		p := &JobTransitionParams{RunID: run.ID, JobID: id, Attempt: 1}
		_, err = s.JobQueue(ctx, p)
		require.NoError(t, err)
		_, err = s.JobStart(ctx, p)
		require.NoError(t, err)
	}
	_, err = s.JobComplete(ctx, &JobCompleteParams{RunID: run.ID, JobID: "finished", Attempt: 1, Outcome: cikit.JobSucceeded})
	require.NoError(t, err)

	res, err := expire(ctx, []overdue{
		{runID: run.ID, jobID: "started", attempt: 1, state: cikit.JobQueued, reason: "waited too long"},
		{runID: run.ID, jobID: "finished", attempt: 1, state: cikit.JobRunning, reason: "ran too long"},
	}, s.transition)
	require.NoError(t, err, "a job that moved on is not an error")
	require.Empty(t, res)
	jobs, err := s.JobList(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, cikit.JobRunning, jobs[0].State, "it started after it was found waiting: not failed for waiting")
	require.Equal(t, cikit.JobSucceeded, jobs[1].State)
}

func TestExpireStopsAtAStoreFailure(t *testing.T) {
	t.Parallel()
	applied := &TransitionResult{Changed: []*Job{{}}}
	broken := errors.New("connection reset")
	calls := 0
	transition := func(ctx context.Context, runID string, je *JobEvent, ev Event) (*TransitionResult, error) {
		calls++
		switch je.JobID {
		case "moved":
			return nil, &cikit.TransitionError{Job: je.JobID}
		case "broken":
			return nil, broken
		}
		require.Equal(t, Event{}, ev)
		require.Equal(t, &JobEvent{Kind: EventExpire, RunID: "r", JobID: "a", Attempt: 2, Outcome: cikit.JobFailed, ExitCode: -1,
			Reason: "ran too long", FailureClass: cikit.FailureTimeout, seen: cikit.JobRunning}, je)
		return applied, nil
	}
	res, err := expire(context.Background(), []overdue{
		{runID: "r", jobID: "moved", attempt: 1, state: cikit.JobRunning},
		{runID: "r", jobID: "a", attempt: 2, state: cikit.JobRunning, reason: "ran too long", class: cikit.FailureTimeout},
		{runID: "r", jobID: "broken", attempt: 1, state: cikit.JobRunning},
		{runID: "r", jobID: "never reached", attempt: 1, state: cikit.JobRunning},
	}, transition)
	require.ErrorIs(t, err, broken)
	require.ErrorContains(t, err, `expire job "broken" of run "r"`)
	require.Equal(t, []*TransitionResult{applied}, res, "what was applied comes with the error")
	require.Equal(t, 3, calls)
}

func TestNextSeen(t *testing.T) {
	t.Parallel()
	g, err := FromSpecs([]*cikit.JobSpec{{ID: "a"}})
	require.NoError(t, err)
	states := []cikit.JobState{cikit.JobRunning}
	_, err = Next(g, states, Event{Kind: EventExpire, seen: cikit.JobQueued})
	var te *cikit.TransitionError
	require.ErrorAs(t, err, &te)
	require.Equal(t, "the job is no longer queued", te.Reason)
	changes, err := Next(g, states, Event{Kind: EventExpire, seen: cikit.JobRunning})
	require.NoError(t, err)
	require.Equal(t, []Change{{Job: 0, From: cikit.JobRunning, To: cikit.JobFailed}}, changes)
}

func TestExpiry(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := &ExpireParams{Now: t0.Add(time.Hour), MaxQueueTime: 30 * time.Minute, DefaultTimeout: 45 * time.Minute, GateTimeout: 50 * time.Minute}
	gate := &cikit.Gate{Reasons: []string{"deployment to production"}}
	soon := &cikit.Gate{Reasons: []string{"deployment to production"}, Expires: 10 * time.Minute}
	late := &cikit.Gate{Reasons: []string{"deployment to production"}, Expires: 2 * time.Hour}
	for _, c := range []struct {
		state   cikit.JobState
		ready   time.Time
		started time.Time
		timeout time.Duration
		gate    *cikit.Gate
		want    string
	}{
		{cikit.JobManual, t0, time.Time{}, 0, gate, "approval expired: nobody approved within 50m0s"},
		{cikit.JobManual, t0.Add(20 * time.Minute), time.Time{}, 0, gate, ""},
		{cikit.JobManual, t0.Add(40 * time.Minute), time.Time{}, 0, soon, "approval expired: nobody approved within 10m0s"},
		{cikit.JobManual, t0, time.Time{}, 0, late, ""},
		{cikit.JobManual, t0, time.Time{}, 0, nil, ""},
		{cikit.JobReady, t0, time.Time{}, 0, soon, "queue_timeout: waited 1h0m0s in the queue, longer than the max queue time of 30m0s"},
		{cikit.JobRunning, t0, t0, 0, nil, "timeout: exceeded its timeout of 45m0s"},
		{cikit.JobRunning, t0, t0, time.Hour, nil, ""},
		{cikit.JobRunning, t0, t0, time.Minute, nil, "timeout: exceeded its timeout of 1m0s"},
		{cikit.JobRunning, t0, t0, -time.Minute, nil, "timeout: exceeded its timeout of 45m0s"},
		{cikit.JobRunning, t0, t0.Add(30 * time.Minute), 0, nil, ""},
		{cikit.JobReady, t0, time.Time{}, time.Minute, nil, "queue_timeout: waited 1h0m0s in the queue, longer than the max queue time of 30m0s"},
		{cikit.JobQueued, t0.Add(30 * time.Minute), time.Time{}, 0, nil, ""},
		{cikit.JobPending, time.Time{}, time.Time{}, 0, nil, ""},
		{cikit.JobCancelRequested, t0, t0, time.Minute, nil, ""},
	} {
		reason, class := p.expiry(c.state, c.ready, c.started, c.timeout, c.gate)
		require.Equal(t, c.want, reason, "%+v", c)
		if c.state == cikit.JobManual && reason != "" {
			require.Equal(t, cikit.FailurePolicy, class, "an expired gate is the policy's failure, never retried")
		} else if reason != "" {
			require.Equal(t, cikit.FailureTimeout, class)
		}
	}
	reason, _ := (&ExpireParams{Now: t0}).expiry(cikit.JobManual, t0.Add(-time.Hour), time.Time{}, 0, gate)
	require.Empty(t, reason, "without GateTimeout, a gate without Expires never expires")
}
