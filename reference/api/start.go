package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/reference/auth"
)

// startJob starts a manual job that waits for a person (MANUAL): it
// becomes READY and is dispatched like any other, and the run runs again
// if it had ended without it. 404 for an unknown run or job, 409 for a
// job that is not MANUAL (it is not manual, or was started, or cancelled)
// and for a gated job, which is approved instead (POST .../approve). A
// job with an environment (a deployment) needs approve, not trigger.
func (a *API) startJob(w http.ResponseWriter, r *http.Request) {
	runID, jobID := r.PathValue("run"), r.PathValue("job")
	j, err := a.runs.JobGet(r.Context(), runID, jobID)
	if err != nil {
		a.fail(w, r, "reading the job", err)
		return
	}
	if j.Spec != nil && j.Spec.Environment != nil && !a.requireRole(w, r, auth.RoleApprove) {
		// A deployment: starting it is approving it.
		return
	}
	if j.Spec != nil && j.Spec.Gate != nil {
		// Starting is for GitLab's when: manual jobs; a gate is decided
		// by its reviewers.
		writeError(w, http.StatusConflict, fmt.Sprintf("job %q of run %q is %s and has an approval gate; this job waits for approval: POST %s/runs/%s/jobs/%s/approve",
			jobID, runID, j.State, Prefix, runID, jobID))
		return
	}
	if j.State != cikit.JobManual {
		what := "it is not a manual job"
		if j.Spec.When == cikit.WhenManual {
			what = "it is not waiting for a person"
		}
		writeError(w, http.StatusConflict, fmt.Sprintf("job %q of run %q is %s: %s; only a manual job waiting for a person can be started", jobID, runID, j.State, what))
		return
	}
	res, err := a.runs.JobApply(r.Context(), []*dag.JobEvent{{Kind: dag.EventPlay, RunID: runID, JobID: jobID, Attempt: j.Attempt}})
	if err == nil {
		err = res[0].Err
	}
	if err != nil {
		// Refused: the job moved on since it was read (started by
		// someone else, cancelled), which is a 409.
		a.fail(w, r, "starting the job", err)
		return
	}
	if a.dispatch != nil {
		// Committed: offered even if the client leaves now.
		a.dispatch(context.WithoutCancel(r.Context()), res[0].TransitionResult)
	}
	d, err := a.runDetail(r.Context(), runID)
	if err != nil {
		a.fail(w, r, "reading the run", err)
		return
	}
	writeJSON(w, http.StatusAccepted, d)
}
