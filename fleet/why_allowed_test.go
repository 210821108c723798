package fleet_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/fleet"
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
