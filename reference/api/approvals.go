package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/reference/approvals"
	"github.com/cikit/cikit/reference/auth"
)

// MaxDecisionBodyBytes bounds the body of POST .../approve and
// .../reject.
const MaxDecisionBodyBytes = 1 << 10

// DecisionRequest is the body of POST /api/v1/runs/{run}/jobs/{job}/approve and
// .../reject. Comment is at most approvals.MaxCommentBytes; approving
// may leave it out, rejecting may not, since it becomes the reason the
// job failed ("rejected by alice: not on a Friday").
type DecisionRequest struct {
	Comment string `json:"comment"`
}

// decideRoute is the handler of the route that makes decision.
func (a *API) decideRoute(decision approvals.Decision) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { a.decide(w, r, decision) }
}

// decide approves or rejects a gated job waiting MANUAL for its current
// attempt: approving makes it READY (or DELAYED for its gate's wait
// timer) and dispatches it; rejecting fails it with the reviewer's
// comment as the reason. Its route's rule has authenticated the caller
// and checked their approve role. It answers 202 with the run; 400, 413
// or 415 for a bad body; 404 for an unknown run or
// job; 403 for a person the gate's reviewers do not name; 409 for a job
// that is not a gated job waiting for approval.
func (a *API) decide(w http.ResponseWriter, r *http.Request, decision approvals.Decision) {
	if !idsAndNoQuery(w, r, "run", "job") {
		return
	}
	verb := map[approvals.Decision]string{approvals.Approve: "approved", approvals.Reject: "rejected"}[decision]
	p := auth.FromContext(r.Context())
	in, ok := decisionBody(w, r, decision)
	if !ok {
		return
	}
	runID, jobID := r.PathValue("run"), r.PathValue("job")
	j, err := a.runs.JobGet(r.Context(), runID, jobID)
	if err != nil {
		a.fail(w, r, "reading the job", err)
		return
	}
	entry := auth.Entry{Actor: p.String(), Action: "job." + string(decision), Target: "run/" + runID + "/job/" + jobID,
		Detail: in.Comment, Remote: a.access.ClientAddr(r), Outcome: "ok"}
	switch {
	case j.Spec.Gate == nil:
		msg := fmt.Sprintf("job %q of run %q has no approval gate; only a job waiting for approval can be %s", jobID, runID, verb)
		if j.Spec.When == cikit.WhenManual {
			msg += fmt.Sprintf("; a manual job is started: POST %s/runs/%s/jobs/%s/start", Prefix, runID, jobID)
		}
		writeError(w, http.StatusConflict, msg)
		return
	case j.State != cikit.JobManual:
		writeError(w, http.StatusConflict, fmt.Sprintf("job %q of run %q is %s; only a job waiting for approval can be %s", jobID, runID, j.State, verb))
		return
	}
	if users := gateUsers(j.Spec.Gate); users != nil && !slices.Contains(users, p.Login) {
		entry.Outcome = "denied"
		a.record(r.Context(), entry)
		writeError(w, http.StatusForbidden, "approval needs one of: "+strings.Join(users, ", "))
		return
	}
	ev := &dag.JobEvent{Kind: dag.EventPlay, RunID: runID, JobID: jobID, Attempt: j.Attempt}
	if decision == approvals.Reject {
		ev.Kind, ev.Reason = dag.EventReject, "rejected by "+p.Login+": "+in.Comment
	}
	res, err := a.runs.JobApply(r.Context(), []*dag.JobEvent{ev})
	if err == nil {
		err = res[0].Err
	}
	if err != nil {
		// Refused: the job moved on since it was read (decided by
		// someone else, cancelled, expired), which is a 409.
		a.fail(w, r, "deciding on the job", err)
		return
	}
	// Committed: what follows happens even if the client leaves now.
	ctx := context.WithoutCancel(r.Context())
	if a.approvals != nil {
		rec := approvals.Approval{RunID: runID, JobID: jobID, Attempt: j.Attempt, Login: p.Login, Decision: decision, Comment: in.Comment, Time: a.now()}
		if err := a.approvals.Record(ctx, rec); err != nil {
			// The decision stands; only the job's view lacks it, and the
			// audit entry below still says who took it.
			a.log.LogAttrs(ctx, slog.LevelError, "api: recording the decision failed", slog.String("run", runID),
				slog.String("job", jobID), slog.String("login", p.Login), slog.String("error", err.Error()))
		}
	}
	a.record(ctx, entry)
	if a.dispatch != nil {
		a.dispatch(ctx, res[0].TransitionResult)
	}
	d, err := a.runDetail(r.Context(), runID)
	if err != nil {
		a.fail(w, r, "reading the run", err)
		return
	}
	writeJSON(w, http.StatusAccepted, d)
}

// record writes e to the audit log. A failure to write it is logged: the
// decision it records has been applied.
func (a *API) record(ctx context.Context, e auth.Entry) {
	e.Time = a.now().UTC()
	if err := a.access.Audit(context.WithoutCancel(ctx), e); err != nil {
		a.log.ErrorContext(ctx, "api: writing the audit log failed", "action", e.Action, "target", e.Target, "err", err)
	}
}

// decisionBody reads the body of a decision, answering 400, 413 or 415
// when it is not a JSON object of at most MaxDecisionBodyBytes with a
// valid comment (one required to reject). An empty body is no comment.
func decisionBody(w http.ResponseWriter, r *http.Request, decision approvals.Decision) (DecisionRequest, bool) {
	var in DecisionRequest
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			writeFieldError(w, http.StatusUnsupportedMediaType, "Content-Type", fmt.Sprintf("the body is JSON: send Content-Type: application/json, not %q", ct))
			return in, false
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxDecisionBodyBytes))
	if err != nil {
		if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
			writeFieldError(w, http.StatusRequestEntityTooLarge, "comment", fmt.Sprintf("the body is over %d bytes; a comment has at most %d", MaxDecisionBodyBytes, approvals.MaxCommentBytes))
		} else if r.Context().Err() == nil {
			writeError(w, http.StatusBadRequest, "reading the body failed: "+err.Error())
		}
		return in, false
	}
	if !utf8.Valid(body) {
		// The JSON decoder would replace the bytes silently.
		writeFieldError(w, http.StatusBadRequest, "comment", "the body is not UTF-8")
		return in, false
	}
	if len(bytes.TrimSpace(body)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil || dec.More() {
			msg := `the body is not a JSON object {"comment": "<why>"} and nothing else`
			if err != nil {
				msg += ": " + err.Error()
			}
			writeError(w, http.StatusBadRequest, msg)
			return in, false
		}
	}
	in.Comment = strings.TrimSpace(in.Comment)
	switch {
	case len(in.Comment) > approvals.MaxCommentBytes:
		writeFieldError(w, http.StatusRequestEntityTooLarge, "comment", fmt.Sprintf("the comment has %d bytes; at most %d", len(in.Comment), approvals.MaxCommentBytes))
	case !validText(in.Comment):
		writeFieldError(w, http.StatusBadRequest, "comment", "the comment is not UTF-8 without NUL bytes")
	case decision == approvals.Reject && in.Comment == "":
		writeFieldError(w, http.StatusBadRequest, "comment", `a rejection says why: send {"comment": "<why>"}; it becomes the reason the job failed`)
	default:
		return in, true
	}
	return in, false
}

// gateUsers are the logins g's reviewers name, or nil when anyone the
// route's role rules let through may decide: no reviewers, or a
// "role:" entry among them.
func gateUsers(g *cikit.Gate) []string {
	var users []string
	for _, r := range g.Reviewers {
		if strings.HasPrefix(r, "role:") {
			return nil
		}
		users = append(users, r)
	}
	return users
}

// waitsForApproval reports whether j is a gated job waiting MANUAL.
func waitsForApproval(j *dag.Job) bool { return j.State == cikit.JobManual && j.Spec.Gate != nil }

// addApprovals adds the recorded decisions to the jobs of d.
func (a *API) addApprovals(ctx context.Context, d *RunDetail) error {
	if a.approvals == nil {
		return nil
	}
	list, err := a.approvals.List(ctx, d.ID)
	if err != nil {
		return fmt.Errorf("listing the run's approvals: %w", err)
	}
	for _, x := range list {
		i := slices.IndexFunc(d.Jobs, func(j JobDetail) bool { return j.ID == x.JobID })
		if i >= 0 {
			d.Jobs[i].Approvals = append(d.Jobs[i].Approvals, ApprovalView{Attempt: x.Attempt, Login: x.Login,
				Decision: string(x.Decision), Comment: x.Comment, At: x.Time.UTC()})
		}
	}
	return nil
}
