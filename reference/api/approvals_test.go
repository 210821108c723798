package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/reference/api"
	"github.com/cikit/cikit/reference/approvals"
	"github.com/cikit/cikit/reference/auth"
)

// auditLog reads the decisions on gated jobs of the API's audit log.
type auditLog struct {
	t *testing.T
	f *fixture
}

// all returns the audit log's job.approve and job.reject entries of
// people (the rules' refusals of anonymous calls are anonymous's), oldest
// first, each without its ID and with its actor's login alone.
func (l *auditLog) all() []auth.Entry {
	l.t.Helper()
	var out []auth.Entry
	for _, e := range l.decisions() {
		if e.Actor != "anonymous" {
			out = append(out, e)
		}
	}
	return out
}

// decisions returns the audit log's job.approve and job.reject entries,
// oldest first, each without its ID and with its actor's login alone.
func (l *auditLog) decisions() []auth.Entry {
	l.t.Helper()
	entries, err := l.f.access.AuditList(context.Background(), auth.AuditQuery{Limit: auth.MaxAuditLimit})
	require.NoError(l.t, err)
	var out []auth.Entry
	for _, e := range slices.Backward(entries) {
		if e.Action != "job.approve" && e.Action != "job.reject" {
			continue
		}
		e.ID = ""
		e.Actor, _, _ = strings.Cut(e.Actor, " ")
		out = append(out, e)
	}
	return out
}

// gated is build → deploy, where deploy is held by a gate for alice or
// bob, as the policy decided. Until the dag holds gated jobs MANUAL on
// its own, deploy is also when: manual.
func gated(reviewers ...string) []*cikit.JobSpec {
	step := []cikit.Step{{Run: "true"}}
	return []*cikit.JobSpec{
		{ID: "build", Steps: step, Admission: &cikit.Admission{Decision: cikit.DecisionAllow, Reason: "push to a protected branch"}},
		{ID: "deploy", Needs: []string{"build"}, When: cikit.WhenManual, Steps: step,
			Gate: &cikit.Gate{Reasons: []string{"deployment to production"}, Reviewers: reviewers, Expires: 24 * time.Hour},
			Admission: &cikit.Admission{Decision: cikit.DecisionRequireApproval, Reason: "deployment to production",
				SecretsScopes: []string{"env:acme/api:production"}, CacheScope: "branch/main", Policy: "policy.rego@sha256:ab12"}},
	}
}

// approvalFixture is a fixture with a memory approvals store and an
// audit log, and a run of gated whose build has succeeded.
func approvalFixture(t *testing.T, reviewers ...string) (*fixture, *dag.Run, *auditLog) {
	t.Helper()
	f := newFixture(t, api.Config{Approvals: &approvals.MemoryStore{}})
	log := &auditLog{t: t, f: f}
	run, err := f.store.RunCreate(t.Context(), &dag.RunCreateParams{Jobs: gated(reviewers...)})
	require.NoError(t, err)
	f.start(t, run, "build", "runner-1", 0, 1)
	f.complete(t, run, "build", cikit.JobSucceeded, 0, 0, 10)
	return f, run, log
}

// decide POSTs body to target as login ("" for no principal).
func (f *fixture) decide(t *testing.T, target, login, contentType, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, target, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if login != "" {
		// Everyone but the nobody of "" may approve on the platform: the
		// gate's reviewers decide who of them may approve this job.
		if f.tokens == nil {
			f.tokens = map[string]string{}
		}
		if f.tokens[login] == "" {
			f.tokens[login] = f.tokenWith(t, login, auth.Binding{Role: auth.RoleApprove})
		}
		req.Header.Set("Authorization", "Bearer "+f.tokens[login])
	}
	rec := httptest.NewRecorder()
	f.api.ServeHTTP(rec, req)
	return rec
}

func runDetail(t *testing.T, rec *httptest.ResponseRecorder) api.RunDetail {
	t.Helper()
	var d api.RunDetail
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &d), rec.Body.String())
	return d
}

// TestApproveGatedJob: a gated job waiting MANUAL shows its gate, its
// admission and whom it waits for, and its run why it is held; only a
// named reviewer approves it (the others are refused and audited), and
// the approval makes it READY, dispatches it, and is shown and audited;
// it cannot be started, nor approved twice.
func TestApproveGatedJob(t *testing.T) {
	t.Parallel()
	f, run, log := approvalFixture(t, "alice", "bob")
	base := "/api/v1/runs/" + run.ID + "/jobs/"

	d := runDetail(t, f.do(t, http.MethodGet, "/api/v1/runs/"+run.ID))
	deploy := d.Jobs[1]
	require.Equal(t, cikit.JobManual, deploy.State)
	require.Equal(t, "approval by alice, bob: deployment to production", deploy.WaitingFor)
	require.Equal(t, []string{"deployment to production"}, deploy.Gate.Reasons)
	require.Equal(t, []string{"alice", "bob"}, deploy.Gate.Reviewers)
	require.Equal(t, 24*time.Hour, deploy.Gate.Expires)
	require.Zero(t, deploy.Gate.WaitTimer)
	require.Equal(t, cikit.DecisionRequireApproval, deploy.Admission.Decision)
	require.Equal(t, []string{"env:acme/api:production"}, deploy.Admission.SecretsScopes)
	require.Equal(t, "deploy waits for approval by alice, bob: deployment to production", d.Held)
	require.Equal(t, []api.JobPolicy{{Job: "build", Decision: cikit.DecisionAllow, Reason: "push to a protected branch"},
		{Job: "deploy", Decision: cikit.DecisionRequireApproval, Reason: "deployment to production"}}, d.Policy)
	require.Nil(t, d.Jobs[0].Gate)
	require.Empty(t, deploy.Approvals)

	rec := f.do(t, http.MethodPost, base+"deploy/start")
	require.Equal(t, http.StatusConflict, rec.Code)
	require.Contains(t, rec.Body.String(), "this job waits for approval: POST /api/v1/runs/run-1/jobs/deploy/approve")

	rec = f.decide(t, base+"deploy/approve", "", "", "")
	require.Equal(t, http.StatusUnauthorized, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), "sign in")
	require.Len(t, log.decisions(), 1, "the refusal of nobody is audited")
	require.Equal(t, "denied", log.decisions()[0].Outcome)

	rec = f.decide(t, base+"deploy/approve", "carol", "application/json", `{"comment": "me too"}`)
	require.Equal(t, http.StatusForbidden, rec.Code)
	require.JSONEq(t, `{"error": "approval needs one of: alice, bob"}`, rec.Body.String())

	rec = f.decide(t, base+"build/approve", "alice", "", "")
	require.Equal(t, http.StatusConflict, rec.Code)
	require.Contains(t, rec.Body.String(), `job \"build\" of run \"run-1\" has no approval gate`)
	rec = f.decide(t, base+"nope/approve", "alice", "", "")
	require.Equal(t, http.StatusNotFound, rec.Code)
	require.Empty(t, f.dispatchedResults(), "nothing was decided yet")

	f.clock.at(1, 0)
	rec = f.decide(t, base+"deploy/approve", "alice", "application/json; charset=utf-8", `{"comment": "  ship it "}`)
	require.Equal(t, http.StatusAccepted, rec.Code, rec.Body.String())
	d = runDetail(t, rec)
	deploy = d.Jobs[1]
	require.Equal(t, cikit.JobReady, deploy.State)
	require.Empty(t, deploy.WaitingFor)
	require.Empty(t, d.Held)
	require.NotNil(t, deploy.Gate, "the gate is still shown once decided")
	require.Zero(t, deploy.Gate.ExpiresAt, "a decided gate expires no more")
	at := time.Date(2026, 3, 2, 10, 1, 0, 0, time.UTC)
	require.Equal(t, []api.ApprovalView{{Attempt: 1, Login: "alice", Decision: "approve", Comment: "ship it", At: at}}, deploy.Approvals)
	got := f.dispatchedResults()
	require.Len(t, got, 1, "the approved job is offered to runners")
	require.Equal(t, "deploy", got[0].Changed[0].ID())

	var hist api.JobHistory
	rec = f.do(t, http.MethodGet, base+"deploy")
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &hist))
	require.Len(t, hist.Approvals, 1, "the job's own page shows the approval")

	require.Equal(t, []auth.Entry{
		{Time: time.Date(2026, 3, 2, 10, 0, 10, 0, time.UTC), Actor: "carol", Action: "job.approve", Target: "run/run-1/job/deploy",
			Detail: "me too", Remote: "192.0.2.1", Outcome: "denied"},
		{Time: at, Actor: "alice", Action: "job.approve", Target: "run/run-1/job/deploy", Detail: "ship it", Remote: "192.0.2.1", Outcome: "ok"},
	}, log.all())

	rec = f.decide(t, base+"deploy/approve", "bob", "", "")
	require.Equal(t, http.StatusConflict, rec.Code, "approved once")
	require.Contains(t, rec.Body.String(), `job \"deploy\" of run \"run-1\" is ready; only a job waiting for approval can be approved`)
	require.Len(t, log.all(), 2, "a refused second decision is no decision")
}

// TestGateExpiresAt: a job waiting for approval shows when its gate
// expires: its Expires after the job began waiting (when build ended);
// a gate of the platform's default shows none. This needs the dag to
// record since when a gated job waits (ReadyAt).
func TestGateExpiresAt(t *testing.T) {
	t.Parallel()
	f, run, _ := approvalFixture(t, "alice")
	d := runDetail(t, f.do(t, http.MethodGet, "/api/v1/runs/"+run.ID))
	require.Equal(t, time.Date(2026, 3, 3, 10, 0, 10, 0, time.UTC), d.Jobs[1].Gate.ExpiresAt)

	specs := gated("alice")
	specs[1].Gate.Expires = 0
	run, err := f.store.RunCreate(t.Context(), &dag.RunCreateParams{Jobs: specs})
	require.NoError(t, err)
	f.start(t, run, "build", "runner-1", 0, 20)
	f.complete(t, run, "build", cikit.JobSucceeded, 0, 0, 30)
	d = runDetail(t, f.do(t, http.MethodGet, "/api/v1/runs/"+run.ID))
	require.Equal(t, cikit.JobManual, d.Jobs[1].State)
	require.Zero(t, d.Jobs[1].Gate.ExpiresAt, "the platform's default is not the API's to know")
}

// TestApproveAnyApprover: a gate without named reviewers, or with a
// role among them, is approved by anyone the route lets through, with
// or without a comment.
func TestApproveAnyApprover(t *testing.T) {
	t.Parallel()
	for reviewers, waiting := range map[string]string{
		"":                   "approval by a person with the approve role: deployment to production",
		"alice,role:approve": "approval by alice, role:approve: deployment to production",
	} {
		f, run, _ := approvalFixture(t, strings.FieldsFunc(reviewers, func(r rune) bool { return r == ',' })...)
		d := runDetail(t, f.do(t, http.MethodGet, "/api/v1/runs/"+run.ID))
		require.Equal(t, waiting, d.Jobs[1].WaitingFor)
		rec := f.decide(t, "/api/v1/runs/"+run.ID+"/jobs/deploy/approve", "carol", "", "")
		require.Equal(t, http.StatusAccepted, rec.Code, rec.Body.String())
		d = runDetail(t, rec)
		require.Equal(t, cikit.JobReady, d.Jobs[1].State)
		require.Equal(t, []api.ApprovalView{{Attempt: 1, Login: "carol", Decision: "approve", At: f.clock.now()}}, d.Jobs[1].Approvals)
	}
}

// TestRejectGatedJob: a rejection needs a comment, and fails the job
// with "rejected by <login>: <comment>", which the job shows, recorded
// and audited.
func TestRejectGatedJob(t *testing.T) {
	t.Parallel()
	f, run, log := approvalFixture(t, "alice", "bob")
	target := "/api/v1/runs/" + run.ID + "/jobs/deploy/reject"

	rec := f.decide(t, target, "bob", "", "")
	require.Equal(t, http.StatusBadRequest, rec.Code)
	require.Contains(t, rec.Body.String(), `"field":"comment"`)
	require.Contains(t, rec.Body.String(), "a rejection says why")
	rec = f.decide(t, target, "bob", "application/json", `{"comment": "   "}`)
	require.Equal(t, http.StatusBadRequest, rec.Code, "a blank comment is none")
	rec = f.decide(t, target, "carol", "application/json", `{"comment": "no"}`)
	require.Equal(t, http.StatusForbidden, rec.Code)

	rec = f.decide(t, target, "bob", "application/json", `{"comment": "not on a Friday"}`)
	require.Equal(t, http.StatusAccepted, rec.Code, rec.Body.String())
	d := runDetail(t, rec)
	require.Equal(t, cikit.JobFailed, d.Jobs[1].State)
	require.Equal(t, "rejected by bob: not on a Friday", d.Jobs[1].Reason)
	require.Equal(t, "reject", d.Jobs[1].Approvals[0].Decision)
	require.Equal(t, "not on a Friday", d.Jobs[1].Approvals[0].Comment)
	entries := log.all()
	require.Equal(t, "job.reject", entries[len(entries)-1].Action)
	require.Equal(t, "ok", entries[len(entries)-1].Outcome)

	rec = f.decide(t, "/api/v1/runs/"+run.ID+"/jobs/deploy/approve", "alice", "", "")
	require.Equal(t, http.StatusConflict, rec.Code, "a rejected job is not approved after all")
}

// TestDecisionHostileInput: bodies that are too large, not JSON, of
// unknown fields or several values, comments too long or not text,
// query parameters and bad IDs are refused with a 4xx before anything
// is decided.
func TestDecisionHostileInput(t *testing.T) {
	t.Parallel()
	f, run, log := approvalFixture(t, "alice")
	target := "/api/v1/runs/" + run.ID + "/jobs/deploy/approve"
	for _, tc := range []struct {
		name, target, contentType, body string
		status                          int
		want                            string
	}{
		{"huge body", target, "application/json", `{"comment": "` + strings.Repeat("x", 4<<10) + `"}`, http.StatusRequestEntityTooLarge, "over 1024 bytes"},
		{"long comment", target, "application/json", `{"comment": "` + strings.Repeat("x", approvals.MaxCommentBytes+1) + `"}`, http.StatusRequestEntityTooLarge, "at most 512"},
		{"form", target, "application/x-www-form-urlencoded", "comment=hi", http.StatusUnsupportedMediaType, "the body is JSON"},
		{"bad content type", target, "application/json; =", `{}`, http.StatusUnsupportedMediaType, "the body is JSON"},
		{"not JSON", target, "application/json", `comment`, http.StatusBadRequest, "not a JSON object"},
		{"array", target, "application/json", `["ok"]`, http.StatusBadRequest, "not a JSON object"},
		{"unknown field", target, "application/json", `{"comment": "ok", "approve": true}`, http.StatusBadRequest, `unknown field \"approve\"`},
		{"two objects", target, "application/json", `{"comment": "a"} {"comment": "b"}`, http.StatusBadRequest, "and nothing else"},
		{"NUL", target, "application/json", `{"comment": "a\u0000b"}`, http.StatusBadRequest, "not UTF-8 without NUL bytes"},
		{"invalid UTF-8", target, "application/json", "{\"comment\": \"\xff\"}", http.StatusBadRequest, "not UTF-8"},
		{"query", target + "?force=1", "", "", http.StatusBadRequest, "unknown query parameter"},
		{"bad job ID", "/api/v1/runs/" + run.ID + "/jobs/%00/approve", "", "", http.StatusBadRequest, "not UTF-8 without NUL bytes"},
	} {
		rec := f.decide(t, tc.target, "alice", tc.contentType, tc.body)
		require.Equal(t, tc.status, rec.Code, "%s: %s", tc.name, rec.Body)
		require.Contains(t, rec.Body.String(), tc.want, tc.name)
	}
	rec := f.do(t, http.MethodGet, target)
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	j, err := f.store.JobGet(t.Context(), run.ID, "deploy")
	require.NoError(t, err)
	require.Equal(t, cikit.JobManual, j.State, "nothing was decided")
	require.Empty(t, log.all())
	require.Empty(t, f.dispatchedResults())
}

// TestApproveWithoutStore: without Config.Approvals a decision is
// applied, and the job shows no approvals.
func TestApproveWithoutStore(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Config{})
	run, err := f.store.RunCreate(t.Context(), &dag.RunCreateParams{Jobs: gated()})
	require.NoError(t, err)
	f.start(t, run, "build", "runner-1", 0, 1)
	f.complete(t, run, "build", cikit.JobSucceeded, 0, 0, 10)
	rec := f.decide(t, "/api/v1/runs/"+run.ID+"/jobs/deploy/approve", "alice", "", "")
	require.Equal(t, http.StatusAccepted, rec.Code, rec.Body.String())
	d := runDetail(t, rec)
	require.Equal(t, cikit.JobReady, d.Jobs[1].State)
	require.Empty(t, d.Jobs[1].Approvals)
}

// FuzzDecisionBody: whatever body and content type a reviewer sends, a
// decision is taken, or refused as bad input (400, 413, 415) or as one
// the job's state forbids (409): never a server error.
func FuzzDecisionBody(f *testing.F) {
	f.Add("application/json", `{"comment": "ship it"}`, false)
	f.Add("application/json", `{"comment": "not on a Friday"}`, true)
	f.Add("", "", false)
	f.Add("text/plain", "yes", true)
	f.Add("application/json; charset=utf-8", `{"comment": "\u0000"}`, true)
	f.Add("application/json", `{"comment": 7}`, false)
	f.Add("application/json", `{"comment": "a", "extra": 1}`, false)
	f.Add("application/json", `{"comment": "a"} {"comment": "b"}`, true)
	f.Add("application/json", "\xff\xfe", true)
	f.Fuzz(func(t *testing.T, contentType, body string, reject bool) {
		fx, run, _ := approvalFixture(t, "alice")
		action := "approve"
		if reject {
			action = "reject"
		}
		rec := fx.decide(t, "/api/v1/runs/"+run.ID+"/jobs/deploy/"+action, "alice", contentType, body)
		switch rec.Code {
		case http.StatusAccepted, http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusConflict:
		default:
			t.Fatalf("%s with %q %q: %d %s", action, contentType, body, rec.Code, rec.Body.String())
		}
	})
}
