package fleet_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/fleet"
)

// TestManagerWhyManualAndDelayed: a manual job waits for a person, a
// delayed one until its time, not for a runner.
func TestManagerWhyManualAndDelayed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	m, err := fleet.NewManager(ctx, fleet.ManagerConfig{Server: b.server})
	require.NoError(t, err)
	step := []cikit.Step{{Run: "true"}}
	run, err := b.jobs.RunCreate(ctx, &dag.RunCreateParams{Jobs: []*cikit.JobSpec{
		{ID: "deploy", When: cikit.WhenManual, AllowFailure: true, Steps: step},
		{ID: "later", When: cikit.WhenDelayed, StartIn: time.Hour, Steps: step},
	}})
	require.NoError(t, err)
	why, err := m.Why(ctx, run.ID, "deploy")
	require.NoError(t, err)
	require.Equal(t, fleet.WaitManual, why.Code)
	require.Equal(t, cikit.JobManual, why.State)
	require.Equal(t, "the job is manual: waiting for a person to start it", why.Message)

	later, err := b.jobs.JobGet(ctx, run.ID, "later")
	require.NoError(t, err)
	why, err = m.Why(ctx, run.ID, "later")
	require.NoError(t, err)
	require.Equal(t, fleet.WaitDelayed, why.Code)
	require.Equal(t, "the job is delayed until "+later.ReadyAt.UTC().Format(time.RFC3339), why.Message)
}

// TestManagerWhyGate: a MANUAL job held by an approval gate waits for
// its reviewers' approval, and says why it is held; without reviewers,
// for anyone with the approve role.
func TestManagerWhyGate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	m, err := fleet.NewManager(ctx, fleet.ManagerConfig{Server: b.server})
	require.NoError(t, err)
	step := []cikit.Step{{Run: "true"}}
	run, err := b.jobs.RunCreate(ctx, &dag.RunCreateParams{Jobs: []*cikit.JobSpec{
		{ID: "deploy", When: cikit.WhenManual, Steps: step,
			Gate: &cikit.Gate{Reasons: []string{"deployment to production", "first-time contributor's pull request"}, Reviewers: []string{"alice", "bob"}}},
		{ID: "anyone", When: cikit.WhenManual, Steps: step, Gate: &cikit.Gate{Reasons: []string{"deployment to staging"}}},
	}})
	require.NoError(t, err)
	why, err := m.Why(ctx, run.ID, "deploy")
	require.NoError(t, err)
	require.Equal(t, cikit.JobManual, why.State)
	require.Equal(t, fleet.WaitApproval, why.Code)
	require.Equal(t, "waiting for approval by alice, bob: deployment to production; first-time contributor's pull request", why.Message)

	why, err = m.Why(ctx, run.ID, "anyone")
	require.NoError(t, err)
	require.Equal(t, fleet.WaitApproval, why.Code)
	require.Equal(t, "waiting for approval by a person with the approve role: deployment to staging", why.Message)
}
