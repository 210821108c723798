package dag_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

func TestGateWaiting(t *testing.T) {
	t.Parallel()
	require.Empty(t, dag.GateWaiting(nil))
	require.Equal(t, "waiting for approval by alice, bob: deployment to production",
		dag.GateWaiting(&cikit.Gate{Reasons: []string{"deployment to production"}, Reviewers: []string{"alice", "bob"}}))
	require.Equal(t, "waiting for approval by a person with the approve role: deployment to production; first-time contributor's pull request",
		dag.GateWaiting(&cikit.Gate{Reasons: []string{"deployment to production", "first-time contributor's pull request"}}))
	require.Equal(t, "waiting for approval by a person with the approve role", dag.GateWaiting(&cikit.Gate{}))
}

// gatedGraph is build -> deploy (gated, blocking unless allowFailure) ->
// smoke, and cleanup (always) after deploy.
func gatedGraph(t *testing.T, mutate func(deploy *cikit.JobSpec)) *dag.Graph {
	t.Helper()
	deploy := &cikit.JobSpec{ID: "deploy", Needs: []string{"build"}, Gate: &cikit.Gate{Reasons: []string{"production"}}}
	if mutate != nil {
		mutate(deploy)
	}
	g, err := dag.FromSpecs([]*cikit.JobSpec{
		{ID: "build"}, deploy, {ID: "smoke", Needs: []string{"deploy"}}, {ID: "cleanup", Needs: []string{"deploy"}, When: cikit.WhenAlways},
	})
	require.NoError(t, err)
	return g
}

func TestGatedJobRules(t *testing.T) {
	t.Parallel()
	require.Equal(t, "reject", dag.EventReject.String())
	g := gatedGraph(t, nil)
	require.True(t, g.Node(1).Gated)
	require.False(t, g.Node(1).DelayedAfterApproval)
	require.Equal(t, cikit.JobManual, dag.Arrival(g, 1))

	states := []cikit.JobState{cikit.JobRunning, cikit.JobPending, cikit.JobPending, cikit.JobPending}
	changes, err := dag.Next(g, states, dag.Event{Kind: dag.EventComplete, Job: 0, Outcome: cikit.JobSucceeded})
	require.NoError(t, err)
	require.Equal(t, []dag.Change{{Job: 0, From: cikit.JobRunning, To: cikit.JobSucceeded}, {Job: 1, From: cikit.JobPending, To: cikit.JobManual}}, changes)
	dag.Apply(states, changes)
	require.Equal(t, cikit.RunBlocked, dag.RunStatus(g, states), "a gate that does not allow failure holds the run")

	_, err = dag.Next(g, states, dag.Event{Kind: dag.EventQueue, Job: 1})
	require.ErrorIs(t, err, cikit.ErrInvalidTransition)
	_, err = dag.Next(g, states, dag.Event{Kind: dag.EventReject, Job: 0})
	var te *cikit.TransitionError
	require.ErrorAs(t, err, &te, "only a MANUAL job is rejected")
	require.Equal(t, "reject needs the job to be manual", te.Reason)

	approved, err := dag.Next(g, states, dag.Event{Kind: dag.EventPlay, Job: 1})
	require.NoError(t, err)
	require.Equal(t, []dag.Change{{Job: 1, From: cikit.JobManual, To: cikit.JobReady}}, approved)

	rejected, err := dag.Next(g, states, dag.Event{Kind: dag.EventReject, Job: 1})
	require.NoError(t, err)
	require.Equal(t, []dag.Change{
		{Job: 1, From: cikit.JobManual, To: cikit.JobFailed},
		{Job: 2, From: cikit.JobPending, To: cikit.JobSkipped},
		{Job: 3, From: cikit.JobPending, To: cikit.JobReady},
	}, rejected, "a rejection is a failure")

	expired, err := dag.Next(g, states, dag.Event{Kind: dag.EventExpire, Job: 1})
	require.NoError(t, err)
	require.Equal(t, rejected, expired, "so is an expired gate")
}

func TestGatedJobRulesOfEveryWhen(t *testing.T) {
	t.Parallel()
	g := gatedGraph(t, func(d *cikit.JobSpec) { d.When, d.StartIn, d.Needs = cikit.WhenDelayed, time.Minute, nil })
	require.True(t, g.Node(1).DelayedAfterApproval)
	states := dag.Initial(g)
	require.Equal(t, []cikit.JobState{cikit.JobReady, cikit.JobManual, cikit.JobPending, cikit.JobPending}, states,
		"a gated delayed job that needs nothing waits for its approval at once")
	changes, err := dag.Next(g, states, dag.Event{Kind: dag.EventPlay, Job: 1})
	require.NoError(t, err)
	require.Equal(t, []dag.Change{{Job: 1, From: cikit.JobManual, To: cikit.JobDelayed}}, changes, "then its start_in")

	g = gatedGraph(t, func(d *cikit.JobSpec) { d.Gate.WaitTimer = time.Minute })
	require.True(t, g.Node(1).DelayedAfterApproval, "a wait timer delays the approved job")

	// A When manual job is no gate: it does not expire, but a person may
	// reject it.
	m, err := dag.FromSpecs([]*cikit.JobSpec{{ID: "deploy", When: cikit.WhenManual}})
	require.NoError(t, err)
	manual := []cikit.JobState{cikit.JobManual}
	_, err = dag.Next(m, manual, dag.Event{Kind: dag.EventExpire, Job: 0})
	require.ErrorIs(t, err, cikit.ErrInvalidTransition)
	changes, err = dag.Next(m, manual, dag.Event{Kind: dag.EventReject, Job: 0})
	require.NoError(t, err)
	require.Equal(t, []dag.Change{{Job: 0, From: cikit.JobManual, To: cikit.JobFailed}}, changes)
}

func TestDeniedJobRules(t *testing.T) {
	t.Parallel()
	deny := &cikit.Admission{Decision: cikit.DecisionDeny, Reason: "fork"}
	g, err := dag.FromSpecs([]*cikit.JobSpec{
		{ID: "build"},
		{ID: "test", Needs: []string{"build"}, Admission: deny},
		{ID: "report", Needs: []string{"test"}},
		{ID: "notify", Needs: []string{"test"}, When: cikit.WhenOnFailure},
		{ID: "lint", Admission: deny, AllowFailure: true},
		{ID: "after-lint", Needs: []string{"lint"}},
		{ID: "allowed", Admission: &cikit.Admission{Decision: cikit.DecisionAllow}},
	})
	require.NoError(t, err)
	require.True(t, g.Node(1).Denied)
	require.False(t, g.Node(6).Denied)
	states := dag.Initial(g)
	require.Equal(t, []cikit.JobState{
		cikit.JobReady, cikit.JobFailed, cikit.JobSkipped, cikit.JobReady, cikit.JobFailed, cikit.JobReady, cikit.JobReady,
	}, states, "a denied job fails at once, before its needs end, with the consequences of a failure")
	require.Equal(t, cikit.RunRunning, dag.RunStatus(g, states))

	for _, i := range []int{0, 3, 5, 6} {
		states[i] = cikit.JobSucceeded
	}
	require.Equal(t, cikit.RunFailed, dag.RunStatus(g, states))
	changes, err := dag.Next(g, states, dag.Event{Kind: dag.EventRetryFailed})
	require.NoError(t, err)
	for _, c := range changes {
		require.NotContains(t, []int{1, 4}, c.Job, "a denied job is never retried: %v", changes)
	}
	require.Equal(t, []dag.Change{{Job: 2, From: cikit.JobSkipped, To: cikit.JobSkipped}}, changes,
		"what it skipped is skipped again")
}

func TestPolicyFailuresAreNeverRetried(t *testing.T) {
	t.Parallel()
	spec := &cikit.JobSpec{ID: "deploy", Retry: &cikit.Retry{Max: 3}}
	require.True(t, dag.RetryOnFailure(spec, cikit.FailureScript, 1, 1))
	require.False(t, dag.RetryOnFailure(spec, cikit.FailurePolicy, -1, 1))
}
