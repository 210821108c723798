package dag_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

// manualGraph is build -> deploy (manual) -> smoke, and lint beside them.
func manualGraph(t *testing.T, blocking bool) *dag.Graph {
	t.Helper()
	g, err := dag.NewGraph([]dag.Node{
		{ID: "build"},
		{ID: "deploy", Needs: []string{"build"}, When: cikit.WhenManual, AllowFailure: !blocking},
		{ID: "smoke", Needs: []string{"deploy"}},
		{ID: "lint"},
	})
	require.NoError(t, err)
	return g
}

func TestNextManualWaitsForPlay(t *testing.T) {
	t.Parallel()
	require.Equal(t, "play", dag.EventPlay.String())
	require.Equal(t, "release", dag.EventRelease.String())
	g := manualGraph(t, false)
	p, r, s := cikit.JobPending, cikit.JobRunning, cikit.JobSucceeded
	changes, err := dag.Next(g, []cikit.JobState{r, p, p, s}, dag.Event{Kind: dag.EventComplete, Job: 0, Outcome: s})
	require.NoError(t, err)
	require.Equal(t, []dag.Change{{Job: 0, From: r, To: s}, {Job: 1, From: p, To: cikit.JobManual}}, changes,
		"a manual job whose needs are satisfied waits for a person, not READY")

	states := []cikit.JobState{s, cikit.JobManual, p, s}
	_, err = dag.Next(g, states, dag.Event{Kind: dag.EventQueue, Job: 1})
	require.ErrorIs(t, err, cikit.ErrInvalidTransition)
	_, err = dag.Next(g, states, dag.Event{Kind: dag.EventPlay, Job: 0})
	require.ErrorIs(t, err, cikit.ErrInvalidTransition, "only a MANUAL job is played")
	changes, err = dag.Next(g, states, dag.Event{Kind: dag.EventPlay, Job: 1})
	require.NoError(t, err)
	require.Equal(t, []dag.Change{{Job: 1, From: cikit.JobManual, To: cikit.JobReady}}, changes)

	changes, err = dag.Next(g, states, dag.Event{Kind: dag.EventCancelJob, Job: 1})
	require.NoError(t, err)
	require.Equal(t, []dag.Change{{Job: 1, From: cikit.JobManual, To: cikit.JobCancelled}, {Job: 2, From: p, To: cikit.JobCancelled}}, changes)

	require.Equal(t, []cikit.JobState{cikit.JobReady, cikit.JobManual, p, cikit.JobReady},
		dag.Initial(manualGraphNoNeeds(t)), "a manual job that needs nothing starts MANUAL")
	require.Empty(t, dag.Settle(g, states), "a MANUAL job is settled")
	require.Equal(t, []dag.Change{{Job: 1, From: p, To: cikit.JobManual}}, dag.Settle(g, []cikit.JobState{s, p, p, s}))
}

func manualGraphNoNeeds(t *testing.T) *dag.Graph {
	t.Helper()
	g, err := dag.NewGraph([]dag.Node{{ID: "build"}, {ID: "deploy", When: cikit.WhenManual}, {ID: "smoke", Needs: []string{"deploy"}}, {ID: "lint"}})
	require.NoError(t, err)
	return g
}

func TestRunStatusWithManualJobs(t *testing.T) {
	t.Parallel()
	p, m, s, f := cikit.JobPending, cikit.JobManual, cikit.JobSucceeded, cikit.JobFailed
	for _, c := range []struct {
		name     string
		blocking bool
		states   []cikit.JobState
		want     cikit.RunState
	}{
		{"a manual job that may fail does not hold the run", false, []cikit.JobState{s, m, p, s}, cikit.RunSucceeded},
		{"a blocking manual job holds it", true, []cikit.JobState{s, m, p, s}, cikit.RunBlocked},
		{"the rest still runs", true, []cikit.JobState{s, m, p, cikit.JobRunning}, cikit.RunRunning},
		{"a failure fails the run, a manual job waiting or not", true, []cikit.JobState{s, m, p, f}, cikit.RunFailed},
		{"started, it runs", false, []cikit.JobState{s, cikit.JobReady, p, s}, cikit.RunRunning},
		{"a delayed job runs on its own", false, []cikit.JobState{s, cikit.JobDelayed, p, s}, cikit.RunRunning},
		{"nothing started yet", false, []cikit.JobState{cikit.JobReady, m, p, cikit.JobReady}, cikit.RunPending},
	} {
		require.Equal(t, c.want, dag.RunStatus(manualGraph(t, c.blocking), c.states), c.name)
	}
	require.False(t, cikit.RunBlocked.Terminal())
}

func TestNextDelayedWaitsForRelease(t *testing.T) {
	t.Parallel()
	g, err := dag.NewGraph([]dag.Node{{ID: "build"}, {ID: "later", Needs: []string{"build"}, When: cikit.WhenDelayed}})
	require.NoError(t, err)
	r, s, d := cikit.JobRunning, cikit.JobSucceeded, cikit.JobDelayed
	changes, err := dag.Next(g, []cikit.JobState{r, cikit.JobPending}, dag.Event{Kind: dag.EventComplete, Job: 0, Outcome: s})
	require.NoError(t, err)
	require.Equal(t, []dag.Change{{Job: 0, From: r, To: s}, {Job: 1, From: cikit.JobPending, To: d}}, changes)
	_, err = dag.Next(g, []cikit.JobState{s, d}, dag.Event{Kind: dag.EventPlay, Job: 1})
	require.ErrorIs(t, err, cikit.ErrInvalidTransition, "a delayed job waits for its time, not a person")
	changes, err = dag.Next(g, []cikit.JobState{s, d}, dag.Event{Kind: dag.EventRelease, Job: 1})
	require.NoError(t, err)
	require.Equal(t, []dag.Change{{Job: 1, From: d, To: cikit.JobReady}}, changes)
}
