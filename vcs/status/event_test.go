package status_test

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/vcs"
	"github.com/cikit/cikit/vcs/status"
)

func TestFromEvent(t *testing.T) {
	t.Parallel()
	target := func(runID, jobID string) string { return "https://ci.example.com/runs/" + runID + "/" + jobID }
	ev := func(typ, job, state, reason string) *dag.OutboxEvent {
		return &dag.OutboxEvent{Type: typ, RunID: "r1", Pipeline: "acme/api:.cikit.yml", SHA: sha, JobID: job, Attempt: 1, State: state, Reason: reason}
	}
	for _, tc := range []struct {
		ev   *dag.OutboxEvent
		want vcs.Status
	}{
		{ev(dag.EventPipelineCreated, "", "pending", ""), vcs.Status{Context: "cikit/.cikit.yml", State: vcs.StatePending, Description: "the pipeline is starting"}},
		{ev(dag.EventJobQueued, "build", "queued", ""), vcs.Status{Context: "cikit/.cikit.yml: build", State: vcs.StatePending, Description: "queued for a runner"}},
		{ev(dag.EventJobStarted, "build", "running", ""), vcs.Status{Context: "cikit/.cikit.yml: build", State: vcs.StateRunning, Description: "running"}},
		{ev(dag.EventJobCompleted, "build", "failed", "step 2 exited with 1"), vcs.Status{Context: "cikit/.cikit.yml: build", State: vcs.StateFailure, Description: "failed: step 2 exited with 1"}},
		{ev(dag.EventJobCompleted, "deploy", "skipped", "build failed"), vcs.Status{Context: "cikit/.cikit.yml: deploy", State: vcs.StateSkipped, Description: "skipped: build failed"}},
		{ev(dag.EventPipelineCompleted, "", "failed", ""), vcs.Status{Context: "cikit/.cikit.yml", State: vcs.StateFailure, Description: "the pipeline failed"}},
		{ev(dag.EventJobManual, "deploy", "manual", ""), vcs.Status{Context: "cikit/.cikit.yml: deploy", State: vcs.StatePending, Description: "manual: waiting for a person to start it"}},
		{ev(dag.EventJobManual, "deploy", "manual", "waiting for approval by alice, bob: deployment to production"),
			vcs.Status{Context: "cikit/.cikit.yml: deploy", State: vcs.StatePending, Description: "waiting for approval by alice, bob: deployment to production"}},
		{ev(dag.EventJobCompleted, "deploy", "failed", "rejected by bob: not on a Friday"),
			vcs.Status{Context: "cikit/.cikit.yml: deploy", State: vcs.StateFailure, Description: "rejected by bob: not on a Friday"}},
		{ev(dag.EventJobCompleted, "deploy", "failed", "denied by policy: fork pull requests do not deploy"),
			vcs.Status{Context: "cikit/.cikit.yml: deploy", State: vcs.StateFailure, Description: "denied by policy: fork pull requests do not deploy"}},
		{ev(dag.EventJobCompleted, "deploy", "failed", "approval expired after 24h0m0s"),
			vcs.Status{Context: "cikit/.cikit.yml: deploy", State: vcs.StateFailure, Description: "approval expired after 24h0m0s"}},
		{ev(dag.EventPipelineCompleted, "", "succeeded", ""), vcs.Status{Context: "cikit/.cikit.yml", State: vcs.StateSuccess, Description: "the pipeline succeeded"}},
	} {
		c, ok := status.FromEvent(tc.ev, target)
		require.True(t, ok, "%+v", tc.ev)
		require.Equal(t, "acme/api", c.Repo)
		require.Equal(t, sha, c.SHA)
		tc.want.TargetURL = target("r1", tc.ev.JobID)
		require.Equal(t, tc.want, c.Status)
		require.NoError(t, c.Status.Validate())
	}
	noCommit := ev(dag.EventJobStarted, "build", "running", "")
	noCommit.SHA = ""
	_, ok := status.FromEvent(noCommit, nil)
	require.False(t, ok, "a run without a commit posts nothing")
	noFile := ev(dag.EventJobStarted, "build", "running", "")
	noFile.Pipeline = "local"
	_, ok = status.FromEvent(noFile, nil)
	require.False(t, ok, "a run of no repository file posts nothing")
	long := ev(dag.EventJobCompleted, "build", "failed", string(make([]byte, 300)))
	c, ok := status.FromEvent(long, nil)
	require.True(t, ok)
	require.Len(t, c.Status.Description, 140)
	longGate := ev(dag.EventJobManual, "deploy", "manual", "waiting for approval by "+strings.Repeat("réviewer, ", 30)+"x: production")
	c, ok = status.FromEvent(longGate, nil)
	require.True(t, ok)
	require.LessOrEqual(t, len(c.Status.Description), 140)
	require.True(t, utf8.ValidString(c.Status.Description), "cut between runes")
	require.True(t, strings.HasSuffix(c.Status.Description, "..."))
	require.NoError(t, c.Status.Validate())
}

// TestReportEventsOfARun: the events of a run, as its store records them,
// leave the commit with the final status of every job and of the
// pipeline.
func TestReportEventsOfARun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := &vcs.Memory{}
	p.AddCommit("acme/api", sha, map[string]string{".cikit.yml": "jobs: {}"})
	r := start(t, status.Config{Provider: p, Rate: 1000, Burst: 1000})
	store := dag.NewMemoryStore(dag.MemoryConfig{})
	step := []cikit.Step{{Run: "true"}}
	run, err := store.RunCreate(ctx, &dag.RunCreateParams{Pipeline: "acme/api:.cikit.yml", SHA: sha, Jobs: []*cikit.JobSpec{
		{ID: "build", Steps: step}, {ID: "test", Needs: []string{"build"}, Steps: step}, {ID: "deploy", Needs: []string{"test"}, Steps: step}}})
	require.NoError(t, err)
	advance := func(job string, outcome cikit.JobState) {
		tp := &dag.JobTransitionParams{RunID: run.ID, JobID: job, Attempt: 1}
		_, err := store.JobQueue(ctx, tp)
		require.NoError(t, err)
		_, err = store.JobStart(ctx, tp)
		require.NoError(t, err)
		_, err = store.JobComplete(ctx, &dag.JobCompleteParams{RunID: run.ID, JobID: job, Attempt: 1, Outcome: outcome, Reason: "exit 1"})
		require.NoError(t, err)
	}
	advance("build", cikit.JobSucceeded)
	advance("test", cikit.JobFailed)
	evs, err := store.OutboxPending(ctx, 1000)
	require.NoError(t, err)
	for _, ev := range evs {
		r.ReportEvent(ev, nil)
	}
	flush(t, r)
	got := map[string]vcs.State{}
	for _, st := range p.Statuses("acme/api", sha) {
		got[st.Context] = st.State
	}
	require.Equal(t, map[string]vcs.State{
		"cikit/.cikit.yml":         vcs.StateFailure,
		"cikit/.cikit.yml: build":  vcs.StateSuccess,
		"cikit/.cikit.yml: test":   vcs.StateFailure,
		"cikit/.cikit.yml: deploy": vcs.StateSkipped,
	}, got)
}
