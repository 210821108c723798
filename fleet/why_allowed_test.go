package fleet_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/fleet/autoscale"
)

// TestRunnerLabelsAllowed: a job whose Admission allows runners without
// the label self-hosted only is not handed to a self-hosted runner that
// matches its runs_on, which takes the next job instead; Manager.Why
// says the policy keeps the registered runners from taking it, until an
// allowed runner registers, which takes it.
func TestRunnerLabelsAllowed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	m, err := fleet.NewManager(ctx, fleet.ManagerConfig{Server: b.server})
	require.NoError(t, err)
	fork := &cikit.JobSpec{ID: "fork", RunsOn: []string{"linux"}, Steps: []cikit.Step{{Run: "true"}},
		Admission: &cikit.Admission{Decision: cikit.DecisionAllow, Reason: "fork pull request", RunnerLabelsAllowed: []string{"*", "!self-hosted"}}}
	run, err := b.jobs.RunCreate(ctx, &dag.RunCreateParams{Jobs: []*cikit.JobSpec{fork}})
	require.NoError(t, err)
	require.NoError(t, b.server.DispatchRun(ctx, run.ID))

	selfHosted := b.register(t, "linux", "self-hosted")
	why, err := m.Why(ctx, run.ID, "fork")
	require.NoError(t, err)
	require.Equal(t, fleet.WaitNotAllowed, why.Code)
	require.Equal(t, "no runner may take it: the policy allows runners labelled [* !self-hosted] only (fork pull request)", why.Message)
	require.Nil(t, b.claim(t, selfHosted, "0"), "the self-hosted runner is not handed the fork's job")

	trusted := b.newRun(t, &cikit.JobSpec{ID: "trusted", RunsOn: []string{"linux"}, Steps: []cikit.Step{{Run: "true"}}})
	c := b.claim(t, selfHosted, "5")
	require.NotNil(t, c)
	require.Equal(t, trusted, c.RunID, "the self-hosted runner takes the job behind it")

	hosted := b.register(t, "linux", "hosted")
	why, err = m.Why(ctx, run.ID, "fork")
	require.NoError(t, err)
	require.Equal(t, fleet.WaitSelfHosted, why.Code, "an allowed runner is registered: %s", why.Message)
	c = b.claim(t, hosted, "5")
	require.NotNil(t, c)
	require.Equal(t, run.ID, c.RunID)
	status, out := b.call(t, http.MethodPost, jobPath(c, "complete"), c.Token, map[string]any{"result": "succeeded"})
	require.Equal(t, http.StatusOK, status, "%v", out)
}

// TestManagerPoolsFollowRunnerLabelsAllowed: a queued job whose
// Admission keeps self-hosted runners from it counts towards the first
// pool it may run on, not the first pool matching its runs_on, and runs
// there.
func TestManagerPoolsFollowRunnerLabelsAllowed(t *testing.T) {
	t.Parallel()
	policy := noCooldowns(autoscale.Policy{Min: 0, Max: 1, ScaleDownFraction: 1})
	e := newFleet(t,
		fleet.PoolConfig{Name: "self-hosted", Labels: []string{"linux", "self-hosted"}, Policy: policy},
		fleet.PoolConfig{Name: "hosted", Labels: []string{"linux", "hosted"}, Policy: policy})
	fork := onLabels("fork", "true", "linux")
	fork.Admission = &cikit.Admission{Decision: cikit.DecisionAllow, RunnerLabelsAllowed: []string{"*", "!self-hosted"}}
	runID := e.run(t, fork)
	require.NoError(t, e.manager.Tick(context.Background()))
	queued := map[string]int{}
	for _, p := range e.manager.Pools() {
		queued[p.Name] = p.Queued
	}
	require.Equal(t, map[string]int{"self-hosted": 0, "hosted": 1}, queued)
	deadline := time.Now().Add(tickCeiling)
	for e.jobsOf(t, runID)[0].State != cikit.JobSucceeded {
		require.True(t, time.Now().Before(deadline), "gave up waiting for the job")
		require.NoError(t, e.manager.Tick(context.Background()))
		time.Sleep(20 * time.Millisecond)
	}
	runner := e.jobsOf(t, runID)[0].Runner
	list, err := e.server.RunnerList(context.Background())
	require.NoError(t, err)
	for _, r := range list {
		require.NotContains(t, r.Labels, "self-hosted", "no self-hosted runner was started for it")
		if r.ID == runner {
			require.Contains(t, r.Labels, "hosted")
		}
	}
}
