package ingest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/cikit/cikit/vcs"
)

// ManualPattern is the route ManualTrigger serves, for http.ServeMux.
const ManualPattern = "POST /repos/{org}/{repo}/pipelines"

// maxManualBody bounds a manual trigger's request body.
const maxManualBody = 1 << 20

// ManualRequest is the body of a manual trigger.
type ManualRequest struct {
	// Ref is the branch or tag to build: "main", "refs/heads/main",
	// "refs/tags/v1.2.0". Required.
	Ref string `json:"ref"`
	// SHA pins the commit; by default the ref's current commit.
	SHA string `json:"sha,omitempty"`
	// Variables are the run's inputs (workflow_dispatch inputs, pipeline
	// variables).
	Variables map[string]string `json:"variables,omitempty"`
}

// ManualResponse is the answer of a manual trigger.
type ManualResponse struct {
	DeliveryID string   `json:"delivery_id"`
	SHA        string   `json:"sha"`
	RunIDs     []string `json:"run_ids"`
	// Dropped says why no pipeline runs.
	Dropped string `json:"dropped,omitempty"`
}

// ManualTrigger starts the pipelines of a ref on request, through the
// same path as a webhook: compile at the commit, then one transaction for
// the record and the runs. The caller's Idempotency-Key header is the
// delivery id, so a retried request returns the runs of the first
// (200) instead of starting more (201). Mount it at ManualPattern; who
// may trigger is the mounting server's business.
//
// Answers: 201 with a ManualResponse for new runs, 200 for a retried
// request, 400 for a malformed one or a missing Idempotency-Key, 404 for
// an unknown ref, 422 when no pipeline runs for the ref (the response
// says why), 503 when the VCS or the store failed (retry later).
type ManualTrigger struct {
	in  *Ingester
	vcs vcs.Provider
}

// NewManualTrigger returns a ManualTrigger ingesting with in and
// resolving refs with p.
func NewManualTrigger(in *Ingester, p vcs.Provider) *ManualTrigger {
	return &ManualTrigger{in: in, vcs: p}
}

func (m *ManualTrigger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	org, repo := r.PathValue("org"), r.PathValue("repo")
	if r.Method != http.MethodPost {
		writeError(w, http.StatusMethodNotAllowed, "", "use POST")
		return
	}
	if org == "" || repo == "" {
		writeError(w, http.StatusNotFound, "", "mount the trigger at "+ManualPattern)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		writeError(w, http.StatusBadRequest, "", "the Idempotency-Key header is required")
		return
	}
	var req ManualRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxManualBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, key, "malformed request: "+err.Error())
		return
	}
	if req.Ref == "" {
		writeError(w, http.StatusBadRequest, key, `"ref" is required`)
		return
	}
	ev := &Event{Provider: Manual, DeliveryID: key, HookID: manualHookID(org, repo), Kind: KindDispatch, Org: org, Repo: repo,
		RefType: RefBranch, RefName: strings.TrimPrefix(req.Ref, "refs/heads/"), SHA: req.SHA, Variables: req.Variables}
	if name, ok := strings.CutPrefix(req.Ref, "refs/tags/"); ok {
		ev.RefType, ev.RefName = RefTag, name
	}
	if ev.SHA == "" {
		sha, err := m.vcs.ResolveRef(r.Context(), org+"/"+repo, req.Ref)
		switch {
		case vcs.IsNotFound(err):
			writeError(w, http.StatusNotFound, key, fmt.Sprintf("%s/%s has no ref %s", org, repo, req.Ref))
			return
		case err != nil:
			writeError(w, http.StatusServiceUnavailable, key, "cannot resolve the ref now; retry later")
			return
		}
		ev.SHA = sha
	}
	d, created, err := m.in.Ingest(r.Context(), ev)
	switch {
	case errors.Is(err, ErrMalformed):
		writeError(w, http.StatusBadRequest, key, err.Error())
		return
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, key, "cannot start pipelines now; retry later")
		return
	}
	status := http.StatusOK
	switch {
	case len(d.RunIDs) == 0:
		status = http.StatusUnprocessableEntity
	case created:
		status = http.StatusCreated
	}
	writeJSON(w, status, &ManualResponse{DeliveryID: d.DeliveryID, SHA: ev.SHA, RunIDs: d.RunIDs, Dropped: d.Dropped})
}

// manualHookID is the Event.HookID of a ManualTrigger's events for the
// repository org/repo: "api:org/repo". The delivery record is keyed by
// provider, hook and delivery id, so an Idempotency-Key is scoped to its
// repository: the same key sent for two repositories starts two runs.
func manualHookID(org, repo string) string { return "api:" + org + "/" + repo }

func writeError(w http.ResponseWriter, status int, delivery, msg string) {
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", retryAfterSeconds)
	}
	writeJSON(w, status, webhookAnswer{Error: msg, DeliveryID: delivery})
}
