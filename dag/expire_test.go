package dag_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

func TestNextExpire(t *testing.T) {
	t.Parallel()
	require.Equal(t, "expire", dag.EventExpire.String())
	step := []cikit.Step{{Run: "true"}}
	g, err := dag.FromSpecs(append(pipeline(), &cikit.JobSpec{ID: "notify", Needs: []string{"build"}, When: cikit.WhenOnFailure, Steps: step}))
	require.NoError(t, err)
	pending := cikit.JobPending
	for _, from := range cikit.JobStates {
		states := []cikit.JobState{from, pending, pending, pending, pending}
		before := slices.Clone(states)
		changes, err := dag.Next(g, states, dag.Event{Kind: dag.EventExpire, Job: 0})
		require.Equal(t, before, states, "Next does not modify its input")
		switch from {
		case cikit.JobReady, cikit.JobQueued, cikit.JobRunning:
			require.NoError(t, err, from)
			require.Equal(t, []dag.Change{
				{Job: 0, From: from, To: cikit.JobFailed},
				{Job: 1, From: pending, To: cikit.JobSkipped},
				{Job: 2, From: pending, To: cikit.JobSkipped},
				{Job: 4, From: pending, To: cikit.JobReady},
				{Job: 3, From: pending, To: cikit.JobSkipped},
			}, changes, "an expiry is a failure: %s", from)
		default:
			var te *cikit.TransitionError
			require.ErrorAs(t, err, &te, from)
			require.Equal(t, from, te.From)
			require.Equal(t, cikit.JobFailed, te.To)
			require.Equal(t, "expire needs the job to be ready, queued or running", te.Reason)
			require.Empty(t, changes)
		}
	}
}

func TestNextRetryJobOfAnExpiredJob(t *testing.T) {
	t.Parallel()
	g, err := dag.FromSpecs(pipeline())
	require.NoError(t, err)
	pending := cikit.JobPending
	for _, from := range []cikit.JobState{cikit.JobReady, cikit.JobQueued, cikit.JobRunning} {
		changes, err := dag.Next(g, []cikit.JobState{from, pending, pending, pending}, dag.Event{Kind: dag.EventRetryJob, Job: 0})
		require.NoError(t, err)
		require.Equal(t, []dag.Change{{Job: 0, From: from, To: cikit.JobReady}}, changes, "READY again, with nothing else changed")
	}
	_, err = dag.Next(g, []cikit.JobState{cikit.JobSucceeded, pending, pending, pending}, dag.Event{Kind: dag.EventRetryJob, Job: 0})
	require.ErrorIs(t, err, cikit.ErrInvalidTransition)
}
