package status_test

import (
	"testing"

	"github.com/stretchr/testify/require"

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
}
