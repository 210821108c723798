package api

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/logs"
	"github.com/cikit/cikit/reference/approvals"
	"github.com/cikit/cikit/reference/auth"
	"github.com/cikit/cikit/secrets"
)

// Prefix starts the path of every route but the health checks.
const Prefix = "/api/v1"

// Config configures an API. Runs is required; the zero value of
// everything else is a sensible default, and a missing optional part
// makes its routes answer 404.
type Config struct {
	// Runs is the store of runs and jobs. Required.
	Runs dag.Store
	// Logs holds the jobs' logs, live and finished. Without it the log
	// routes answer 404.
	Logs *logs.Hub
	// Why says why a job is not running yet; fleet.Manager.Why fits.
	// Without it the why route answers 404.
	Why func(ctx context.Context, runID, jobID string) (*fleet.WaitReason, error)
	// Dispatch is called with the results of cancelling and retrying a
	// run, so that the jobs they made READY are offered to runners;
	// fleet.Server.Dispatch fits. Without it, nothing is offered: the
	// jobs wait for whatever else dispatches READY jobs.
	Dispatch func(ctx context.Context, results ...*dag.TransitionResult)
	// Manual starts runs by hand; an ingest.ManualTrigger fits. It is
	// mounted at POST /api/v1/repos/{org}/{repo}/pipelines, with the
	// org and repo path values it reads. Without it that route answers
	// 404.
	Manual http.Handler
	// Artifacts lists a run's artifacts, with presigned downloads;
	// artifacts.Service fits. Without it runs and jobs show none and the
	// artifact routes answer 404.
	Artifacts Artifacts
	// Secrets is the built-in secret store, managed at /api/v1/secrets
	// by admins of the platform or of the secret's org or repository.
	// Without it those routes answer 404 "secrets are not configured".
	Secrets secrets.Store
	// Access authenticates and authorizes every caller but of the health
	// checks, and keeps the audit log; an *auth.Service fits. Required:
	// an API open to anyone is not something to get by omission.
	Access Access
	// Ready reports whether the platform can serve: /readyz answers 503
	// with its error when it fails. Default: always ready.
	Ready func(ctx context.Context) error
	// Now returns the current time, for the durations of unfinished runs
	// and jobs. Default: time.Now.
	Now func() time.Time
	// Logger receives a record of every failure of the store or another
	// part (Error). Default: slog.Default().
	Logger *slog.Logger
	// Approvals records who approved and rejected gated jobs, which runs
	// and jobs show; approvals.PostgresStore fits. Without it decisions
	// are applied and audited but not shown.
	Approvals approvals.Store
	// Runners lists and revokes the registered runners (platform admins,
	// /api/v1/runners); a *fleet.Server fits. Without it those routes
	// answer 404.
	Runners Runners
	// Policy is shown and reloaded at /api/v1/policy (platform admins).
	// Without it those routes answer 404.
	Policy Policy
}

// API is the HTTP API; see the package documentation and docs/api.md. It
// is safe for concurrent use.
type API struct {
	runs     dag.Store
	hub      *logs.Hub
	follow   *logs.Handler // nil without a Hub
	why      func(ctx context.Context, runID, jobID string) (*fleet.WaitReason, error)
	dispatch func(ctx context.Context, results ...*dag.TransitionResult)
	ready    func(ctx context.Context) error
	arts     Artifacts
	now      func() time.Time
	log      *slog.Logger
	mux      *http.ServeMux
	access   Access
	secrets  secrets.Store // nil without a store

	approvals approvals.Store // nil without one
	runners   Runners         // nil without one
	policy    Policy          // nil without one

	// routes are the registered routes; methods the methods of each
	// path, paths in registration order.
	routes  []Route
	methods map[string][]string
	paths   []string
}

// New validates cfg and returns an API.
func New(cfg Config) (*API, error) {
	if cfg.Runs == nil {
		return nil, errors.New("api: Config.Runs is required")
	}
	if cfg.Access == nil {
		return nil, errors.New("api: Config.Access is required: an auth.Service (auth.New with a store) says who may call which route")
	}
	a := &API{
		runs: cfg.Runs, hub: cfg.Logs, why: cfg.Why, dispatch: cfg.Dispatch, ready: cfg.Ready, arts: cfg.Artifacts,
		now: cfg.Now, log: cmp.Or(cfg.Logger, slog.Default()), mux: http.NewServeMux(),
		access: cfg.Access, secrets: cfg.Secrets, methods: map[string][]string{}, approvals: cfg.Approvals,
		runners: cfg.Runners, policy: cfg.Policy,
	}
	if a.now == nil {
		a.now = time.Now
	}
	if a.hub != nil {
		h, err := logs.NewHandler(logs.HandlerConfig{Hub: a.hub, AuthorizeWrite: readOnly, AuthorizeFollow: logs.AllowAll, Logger: a.log})
		if err != nil {
			return nil, fmt.Errorf("api: %w", err)
		}
		a.follow = h
	}
	if err := a.register(cfg.Manual); err != nil {
		return nil, err
	}
	a.allowMethods()
	a.mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
	})
	return a, nil
}

// readOnly refuses the runner's side of the log protocol, which the API
// does not serve.
func readOnly(*http.Request, logs.Key) error { return logs.ErrForbidden }

// ServeHTTP routes r to the API's routes.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

// CloseFollowers ends the log follow streams being served, so that a
// server shutting down gracefully does not wait for them (register it
// with http.Server.RegisterOnShutdown); their clients reconnect. Safe to
// call twice.
func (a *API) CloseFollowers() {
	if a.follow != nil {
		a.follow.CloseFollowers()
	}
}

// errorBody is every error the API answers: a sentence and, when one
// input is at fault, its name (a path parameter such as "run", a query
// parameter such as "limit", a field of a request body).
type errorBody struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorBody{Error: msg})
}

// writeFieldError answers an error caused by the input named field.
func writeFieldError(w http.ResponseWriter, status int, field, msg string) {
	writeJSON(w, status, errorBody{Error: msg, Field: field})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// fail answers err of the store or another part: 404 for an unknown run
// or job, 409 for a refused transition, 400 for invalid params, 503 for
// anything else, which is logged.
func (a *API) fail(w http.ResponseWriter, r *http.Request, what string, err error) {
	switch {
	case errors.Is(err, cikit.ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, cikit.ErrInvalidTransition), errors.Is(err, cikit.ErrConflict):
		writeError(w, http.StatusConflict, err.Error())
	case errors.Is(err, dag.ErrInvalidParams):
		writeError(w, http.StatusBadRequest, err.Error())
	case r.Context().Err() != nil:
		// The client left; nobody reads an answer.
	default:
		a.log.LogAttrs(r.Context(), slog.LevelError, "api: "+what+" failed", slog.String("method", r.Method),
			slog.String("path", r.URL.Path), slog.String("error", err.Error()))
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, what+" failed; try again")
	}
}

type status struct {
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
}

func (a *API) healthz(w http.ResponseWriter, r *http.Request) {
	if _, ok := queryParams(w, r); !ok {
		return
	}
	writeJSON(w, http.StatusOK, status{Status: "ok"})
}

func (a *API) readyz(w http.ResponseWriter, r *http.Request) {
	if _, ok := queryParams(w, r); !ok {
		return
	}
	if a.ready != nil {
		if err := a.ready(r.Context()); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, status{Status: "not ready", Error: err.Error()})
			return
		}
	}
	writeJSON(w, http.StatusOK, status{Status: "ready"})
}

func (a *API) listRuns(w http.ResponseWriter, r *http.Request) {
	q, ok := queryParams(w, r, "limit", "before", "pipeline", "branch")
	if !ok {
		return
	}
	p := &dag.RunListParams{Limit: dag.DefaultRunListLimit, Pipeline: q["pipeline"], Branch: q["branch"]}
	if v := q["limit"]; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > dag.MaxRunListLimit {
			writeFieldError(w, http.StatusBadRequest, "limit", fmt.Sprintf("the limit %q is not a number from 1 to %d", v, dag.MaxRunListLimit))
			return
		}
		p.Limit = n
	}
	if v := q["before"]; v != "" {
		c, err := DecodeCursor(v)
		if err == nil && !validText(c.ID) {
			err = errors.New("the cursor's run ID is not UTF-8 without NUL bytes")
		}
		if err != nil {
			writeFieldError(w, http.StatusBadRequest, "before", "the before parameter is not a cursor this API handed out: "+err.Error())
			return
		}
		p.Before = c
	}
	g, err := a.access.Grants(r.Context(), auth.FromContext(r.Context()))
	if err != nil {
		a.authFail(w, r, "reading the caller's roles", err)
		return
	}
	runs, last, more, err := a.readableRuns(r.Context(), g, p)
	if err != nil {
		a.fail(w, r, "listing runs", err)
		return
	}
	now := a.now()
	out := RunList{Runs: make([]RunSummary, len(runs))}
	for i, run := range runs {
		out.Runs[i] = summary(run, now)
	}
	if more {
		out.Next = EncodeCursor(last)
	}
	writeJSON(w, http.StatusOK, out)
}

// maxListScan bounds the runs GET /runs reads for one page, as
// multiples of its limit: a caller who may read few of the platform's
// runs gets a short (even empty) page with a next cursor rather than a
// scan of the whole store.
const maxListScan = 10

// readableRuns returns up to p.Limit runs of the repositories g may
// read, newest first, reading pages of the store's runs and keeping
// those: the cost grows with the runs the caller may not read, bounded
// by maxListScan pages. last is the cursor of the last run looked at,
// and more says whether the store has runs after it.
func (a *API) readableRuns(ctx context.Context, g *auth.Grants, p *dag.RunListParams) (runs []*dag.Run, last *dag.RunCursor, more bool, err error) {
	page := *p
	for range maxListScan {
		got, err := a.runs.RunList(ctx, &page)
		if err != nil {
			return nil, nil, false, err
		}
		for _, run := range got {
			last = run.Cursor()
			if org, repo := SplitPipeline(run.Pipeline); g.Role(org, repo) >= auth.RoleRead {
				runs = append(runs, run)
				if len(runs) == p.Limit {
					break
				}
			}
		}
		if len(got) < page.Limit {
			return runs, last, false, nil
		}
		if len(runs) == p.Limit {
			break
		}
		page.Before = last
	}
	// A full page, or the scan's end: is there another run?
	next, err := a.runs.RunList(ctx, &dag.RunListParams{Limit: 1, Before: last, Pipeline: p.Pipeline, Branch: p.Branch})
	if err != nil {
		return nil, nil, false, err
	}
	return runs, last, len(next) > 0, nil
}

// runDetail reads the RunDetail of runID.
func (a *API) runDetail(ctx context.Context, runID string) (*RunDetail, error) {
	run, err := a.runs.RunGet(ctx, runID)
	if err != nil {
		return nil, err
	}
	jobs, err := a.runs.JobList(ctx, runID)
	if err != nil {
		return nil, err
	}
	d, err := detail(run, jobs, a.now())
	if err == nil {
		err = a.addApprovals(ctx, d)
	}
	if err != nil || a.arts == nil {
		return d, err
	}
	list, err := a.arts.RunArtifacts(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("listing the run's artifacts: %w", err)
	}
	byJob := map[string][]Artifact{}
	for _, x := range list {
		byJob[x.JobID] = append(byJob[x.JobID], artifactView(x))
	}
	for i := range d.Jobs {
		if l := byJob[d.Jobs[i].ID]; l != nil {
			d.Jobs[i].Artifacts = l
		}
	}
	return d, nil
}

// idsAndNoQuery checks the path IDs names of a route that takes no
// query parameters, and answers 400 when they are not valid.
func idsAndNoQuery(w http.ResponseWriter, r *http.Request, names ...string) bool {
	if !pathIDs(w, r, names...) {
		return false
	}
	_, ok := queryParams(w, r)
	return ok
}

func (a *API) getRun(w http.ResponseWriter, r *http.Request) {
	if !idsAndNoQuery(w, r, "run") {
		return
	}
	d, err := a.runDetail(r.Context(), r.PathValue("run"))
	if err != nil {
		a.fail(w, r, "reading the run", err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// cancelRun cancels every job of the run that has not started. Its
// RUNNING jobs become CANCEL_REQUESTED: their runners learn it from the
// answer to their next heartbeat (cancel_requested), stop the job and
// report it, and only then are the jobs CANCELLED and the run over.
func (a *API) cancelRun(w http.ResponseWriter, r *http.Request) {
	a.transition(w, r, "cancelling the run", a.runs.RunCancel)
}

// retryRun starts a new attempt of the failed, skipped and cancelled jobs
// of a finished run; 409 when the run has not finished.
func (a *API) retryRun(w http.ResponseWriter, r *http.Request) {
	a.transition(w, r, "retrying the run", a.runs.RunRetryFailed)
}

// transition applies a run's transition, dispatches what it made READY
// and answers 202 with the run.
func (a *API) transition(w http.ResponseWriter, r *http.Request, what string, apply func(context.Context, string) (*dag.TransitionResult, error)) {
	if !idsAndNoQuery(w, r, "run") {
		return
	}
	runID := r.PathValue("run")
	res, err := apply(r.Context(), runID)
	if err != nil {
		a.fail(w, r, what, err)
		return
	}
	if a.dispatch != nil {
		// Committed: offered even if the client leaves now.
		a.dispatch(context.WithoutCancel(r.Context()), res)
	}
	d, err := a.runDetail(r.Context(), runID)
	if err != nil {
		a.fail(w, r, "reading the run", err)
		return
	}
	writeJSON(w, http.StatusAccepted, d)
}

func (a *API) getJob(w http.ResponseWriter, r *http.Request) {
	if !idsAndNoQuery(w, r, "run", "job") {
		return
	}
	runID, jobID := r.PathValue("run"), r.PathValue("job")
	d, err := a.runDetail(r.Context(), runID)
	if err != nil {
		a.fail(w, r, "reading the run", err)
		return
	}
	i := slices.IndexFunc(d.Jobs, func(j JobDetail) bool { return j.ID == jobID })
	if i < 0 {
		writeError(w, http.StatusNotFound, fmt.Sprintf("run %q has no job %q", runID, jobID))
		return
	}
	ended, err := a.runs.JobAttempts(r.Context(), runID, jobID)
	if err != nil {
		a.fail(w, r, "reading the job's attempts", err)
		return
	}
	job := d.Jobs[i]
	writeJSON(w, http.StatusOK, JobHistory{JobDetail: job, Attempts: attempts(ended, job.Attempt)})
}

func (a *API) getWhy(w http.ResponseWriter, r *http.Request) {
	if a.why == nil {
		writeError(w, http.StatusNotFound, "this platform does not say why jobs wait")
		return
	}
	if !idsAndNoQuery(w, r, "run", "job") {
		return
	}
	why, err := a.why(r.Context(), r.PathValue("run"), r.PathValue("job"))
	if err != nil {
		a.fail(w, r, "asking why the job waits", err)
		return
	}
	out := WaitReason{RunID: why.RunID, JobID: why.JobID, State: why.State, Code: string(why.Code), Message: why.Message, Pool: why.Pool}
	if why.ETAKnown {
		eta := why.ETA
		out.ETA = &eta
	}
	writeJSON(w, http.StatusOK, out)
}
