package api

import (
	"context"
	"errors"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/reference/auth"
)

// Runners are the registered runners, listed and revoked by platform
// admins at /api/v1/runners; a *fleet.Server fits.
type Runners interface {
	RunnerList(ctx context.Context) ([]fleet.RunnerStatus, error)
	RunnerRevoke(ctx context.Context, id, by, reason string) (*fleet.RunnerRecord, error)
}

// Policy is the platform's policy, shown and reloaded by platform admins
// at /api/v1/policy.
type Policy interface {
	// PolicyName names the policy in force (its file and digest).
	PolicyName() string
	// ReloadPolicy reads the policy file again: an error (a
	// *policy.LoadError with the Rego error positions) leaves the policy
	// in force.
	ReloadPolicy() error
}

// RunnerList is the answer of GET /api/v1/runners.
type RunnerList struct {
	Runners []RunnerView `json:"runners"`
}

// RunnerView is a registered runner as the API shows it.
type RunnerView struct {
	ID           string    `json:"id"`
	Name         string    `json:"name"`
	Labels       []string  `json:"labels"`
	Version      string    `json:"version,omitempty"`
	RegisteredAt time.Time `json:"registered_at"`
	LastSeen     time.Time `json:"last_seen"`
	// State is idle, busy, away or revoked.
	State string `json:"state"`
	// Job is the attempt a busy runner runs.
	Job *AttemptRef `json:"job,omitempty"`
	// RevokedAt, RevokedBy and Reason are a revoked runner's.
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	RevokedBy string     `json:"revoked_by,omitempty"`
	Reason    string     `json:"reason,omitempty"`
}

// AttemptRef names an attempt of a job.
type AttemptRef struct {
	RunID   string `json:"run_id"`
	JobID   string `json:"job_id"`
	Attempt int    `json:"attempt"`
}

func runnerView(r *fleet.RunnerRecord, state string) RunnerView {
	v := RunnerView{ID: r.ID, Name: r.Name, Labels: r.Labels, Version: r.Version, RegisteredAt: r.RegisteredAt.UTC(),
		LastSeen: r.LastSeen.UTC(), State: state, RevokedBy: r.RevokedBy, Reason: r.Reason}
	if v.Labels == nil {
		v.Labels = []string{}
	}
	if r.Revoked() {
		at := r.RevokedAt.UTC()
		v.RevokedAt, v.State = &at, string(fleet.RunnerRevoked)
	}
	return v
}

// RevokeRequest is the body of POST /api/v1/runners/{id}/revoke.
type RevokeRequest struct {
	// Reason says why, for the runner's record and the audit log; at
	// most MaxRevokeReasonBytes.
	Reason string `json:"reason"`
}

// MaxRevokeReasonBytes bounds RevokeRequest.Reason.
const MaxRevokeReasonBytes = 1024

// PolicyInfo is the answer of GET /api/v1/policy and of a reload.
type PolicyInfo struct {
	Policy string `json:"policy"`
}

func (a *API) listRunners(w http.ResponseWriter, r *http.Request) {
	if _, ok := queryParams(w, r); !ok {
		return
	}
	if a.runners == nil {
		writeError(w, http.StatusNotFound, "the platform has no runner registry")
		return
	}
	list, err := a.runners.RunnerList(r.Context())
	if err != nil {
		a.fail(w, r, "listing the runners", err)
		return
	}
	out := RunnerList{Runners: make([]RunnerView, 0, len(list))}
	for i := range list {
		v := runnerView(&list[i].RunnerRecord, string(list[i].State))
		if j := list[i].Job; j != nil {
			v.Job = &AttemptRef{RunID: j.RunID, JobID: j.JobID, Attempt: j.Attempt}
		}
		out.Runners = append(out.Runners, v)
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *API) revokeRunner(w http.ResponseWriter, r *http.Request) {
	if !idsAndNoQuery(w, r, "id") {
		return
	}
	if a.runners == nil {
		writeError(w, http.StatusNotFound, "the platform has no runner registry")
		return
	}
	var in RevokeRequest
	if r.ContentLength != 0 && !readJSON(w, r, &in) {
		return
	}
	if len(in.Reason) > MaxRevokeReasonBytes || !utf8.ValidString(in.Reason) {
		writeFieldError(w, http.StatusBadRequest, "reason", "the reason must be valid UTF-8 of at most 1024 bytes")
		return
	}
	rec, err := a.runners.RunnerRevoke(r.Context(), r.PathValue("id"), auth.FromContext(r.Context()).Login, in.Reason)
	switch {
	case errors.Is(err, cikit.ErrNotFound):
		writeFieldError(w, http.StatusNotFound, "id", "no runner "+r.PathValue("id"))
		return
	case err != nil:
		a.fail(w, r, "revoking the runner", err)
		return
	}
	writeJSON(w, http.StatusOK, runnerView(rec, string(fleet.RunnerRevoked)))
}

func (a *API) getPolicy(w http.ResponseWriter, r *http.Request) {
	if _, ok := queryParams(w, r); !ok {
		return
	}
	if a.policy == nil {
		writeError(w, http.StatusNotFound, "the platform has no policy")
		return
	}
	writeJSON(w, http.StatusOK, PolicyInfo{Policy: a.policy.PolicyName()})
}

// reloadPolicy answers 200 with the policy in force after a reload, and
// 422 with the file's errors, at their positions, when it is refused:
// the policy in force stays then.
func (a *API) reloadPolicy(w http.ResponseWriter, r *http.Request) {
	if _, ok := queryParams(w, r); !ok {
		return
	}
	if a.policy == nil {
		writeError(w, http.StatusNotFound, "the platform has no policy")
		return
	}
	if err := a.policy.ReloadPolicy(); err != nil {
		writeJSON(w, http.StatusUnprocessableEntity, struct {
			Error  string `json:"error"`
			Policy string `json:"policy"`
		}{err.Error(), a.policy.PolicyName()})
		return
	}
	writeJSON(w, http.StatusOK, PolicyInfo{Policy: a.policy.PolicyName()})
}
