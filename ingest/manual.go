package ingest

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/cikit/cikit/compiler"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/internal/httpguard"
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
	// Pipeline, when set, starts that pipeline file alone
	// (".github/workflows/deploy.yml"), as GitHub dispatches one
	// workflow; by default every pipeline of the ref that a manual run
	// starts.
	Pipeline string `json:"pipeline,omitempty"`
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
// # Inputs
//
// The request's variables are the run's inputs, checked against each
// pipeline the trigger starts (compiler.Plan.CheckInputs), as GitHub
// checks a workflow_dispatch: in a GitHub workflow or a native pipeline,
// an input it does not declare (also when it declares none: GitHub
// answers "Unexpected inputs provided"), a value not of the input's type
// (boolean, number) or not one of its choices, and a required input
// without a default not given refuse the whole trigger — 400, field
// "variables.NAME", the message naming the input and the pipeline file —
// and no run starts, not even of the pipelines that take the inputs. A
// GitLab file's variables are free-form and always taken. Each run
// records its pipeline's inputs with the defaults of those not given,
// and the types of the boolean and number ones
// (cikit.RunContext.InputTypes), so that a job's inputs context has them
// typed; a GitHub workflow's github.event is the workflow_dispatch
// payload GitHub gives, its inputs as text. A refused request records
// nothing: the same Idempotency-Key may be sent again, corrected.
//
// # Admission
//
// Its runs go through the Ingester's IngesterConfig.Admit as a webhook's
// do, with no changed files known (AdmitFacts.PipelineFileChanged is
// true): a gate or admission Admit sets is on the created jobs, a
// refusal is 422 with its reason as the response's dropped, and a
// failing Admit is 503.
//
// Answers: 201 with a ManualResponse for new runs, 200 for a retried
// request, 400 for a malformed one or a missing Idempotency-Key, 404 for
// an unknown ref, 422 when no pipeline runs for the ref (the response
// says why), 503 when the VCS or the store failed (retry later). Errors
// are {"error", "field", "delivery_id"}, field naming the input at fault
// ("ref", "sha", "variables.NAME", "Idempotency-Key", the path's "org"
// or "repo") when there is one; input that could never be taken in is
// 400, never 503.
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
	if field, err := checkManualPath(org, repo); err != nil {
		writeFieldError(w, http.StatusBadRequest, "", field, err.Error())
		return
	}
	if r.URL.RawQuery != "" {
		writeFieldError(w, http.StatusBadRequest, "", "", "the trigger takes no query parameters; the request is its JSON body")
		return
	}
	key := r.Header.Get("Idempotency-Key")
	switch {
	case key == "":
		writeFieldError(w, http.StatusBadRequest, "", "Idempotency-Key", "the Idempotency-Key header is required")
		return
	case !validDeliveryID(key):
		writeFieldError(w, http.StatusBadRequest, "", "Idempotency-Key",
			fmt.Sprintf("the Idempotency-Key header is not 1 to %d printable ASCII characters", maxDeliveryIDLen))
		return
	}
	var req ManualRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxManualBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		if status, retryAfter := httpguard.Status(err); status != 0 {
			// The server's guard cut the body: too slow, or too many
			// bodies in flight.
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
			writeJSON(w, status, webhookAnswer{Error: err.Error(), DeliveryID: key})
			return
		}
		writeFieldError(w, http.StatusBadRequest, key, decodeField(err), "malformed request: "+err.Error())
		return
	}
	ev := &Event{Provider: Manual, DeliveryID: key, HookID: manualHookID(org, repo), Kind: KindDispatch, Org: org, Repo: repo,
		SHA: req.SHA, Variables: req.Variables}
	if field, err := req.check(ev); err != nil {
		writeFieldError(w, http.StatusBadRequest, key, field, err.Error())
		return
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
	if ie, ok := errors.AsType[*compiler.InputError](err); ok {
		writeFieldError(w, http.StatusBadRequest, key, "variables."+ie.Name, ie.Error())
		return
	}
	switch {
	case errors.Is(err, ErrMalformed), errors.Is(err, dag.ErrInvalidParams):
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

// checkManualPath checks the repository of a trigger's path, and returns
// the path parameter at fault.
func checkManualPath(org, repo string) (field string, err error) {
	// The name alone first, under a namespace that passes, to tell which
	// is at fault.
	if err := checkRepoPath("org", repo); err != nil {
		return "repo", err
	}
	if err := checkRepoPath(org, repo); err != nil {
		return "org", err
	}
	return "", nil
}

// check validates the request and sets ev's ref from it; it returns the
// field at fault. A ref is a branch or tag name git accepts (refs/heads/
// and refs/tags/ name which), a SHA 40 or 64 lowercase hex digits, and a
// variable's name letters, digits, '_' and '-', its value without NUL
// bytes: nothing that could not be a ref, a commit or an environment
// variable reaches the VCS or the store.
func (req *ManualRequest) check(ev *Event) (field string, err error) {
	if req.Ref == "" {
		return "ref", errors.New(`"ref" is required`)
	}
	ev.RefType, ev.RefName = RefBranch, req.Ref
	if strings.HasPrefix(req.Ref, "refs/") {
		t, name, err := splitRef(req.Ref)
		if err != nil {
			return "ref", err
		}
		if t == "" {
			return "ref", fmt.Errorf("ref %q is neither a branch (refs/heads/…) nor a tag (refs/tags/…)", req.Ref)
		}
		ev.RefType, ev.RefName = t, name
	}
	if err := checkRefName("ref", ev.RefName); err != nil {
		return "ref", err
	}
	if req.SHA != "" && !validSHA(req.SHA) {
		return "sha", fmt.Errorf("sha %q is not 40 or 64 lowercase hex digits", req.SHA)
	}
	if req.Pipeline != "" && !IsPipelineFile(req.Pipeline) {
		return "pipeline", fmt.Errorf("pipeline %.100q is not a pipeline file (%s)", req.Pipeline, strings.Join(PipelineFiles, ", "))
	}
	ev.Pipeline = req.Pipeline
	for _, name := range slices.Sorted(maps.Keys(req.Variables)) {
		if !validVariableName(name) {
			return "variables." + name, fmt.Errorf("variable name %q is not 1 to %d letters, digits, '_' and '-'", name, maxDeliveryIDLen)
		}
		if strings.ContainsRune(req.Variables[name], 0) {
			return "variables." + name, fmt.Errorf("the value of variable %q has a NUL byte", name)
		}
	}
	return "", nil
}

// validVariableName reports whether a variable's name is one a GitHub
// input or a GitLab variable can have.
func validVariableName(name string) bool {
	return name != "" && len(name) <= maxDeliveryIDLen && !strings.ContainsFunc(name, func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '_' || r == '-')
	})
}

// decodeField names the member of a request body a decoding error is
// about, or "".
func decodeField(err error) string {
	if typeErr, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		return typeErr.Field
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if s, err := strconv.Unquote(name); err == nil {
			return s
		}
	}
	return ""
}

// manualHookID is the Event.HookID of a ManualTrigger's events for the
// repository org/repo: "api:org/repo". The delivery record is keyed by
// provider, hook and delivery id, so an Idempotency-Key is scoped to its
// repository: the same key sent for two repositories starts two runs.
func manualHookID(org, repo string) string { return "api:" + org + "/" + repo }

func writeError(w http.ResponseWriter, status int, delivery, msg string) {
	writeFieldError(w, status, delivery, "", msg)
}

// writeFieldError answers an error caused by the input named field, as
// the API's errors do.
func writeFieldError(w http.ResponseWriter, status int, delivery, field, msg string) {
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", retryAfterSeconds)
	}
	writeJSON(w, status, webhookAnswer{Error: msg, Field: field, DeliveryID: delivery})
}
