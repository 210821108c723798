package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/reference/auth"
	"github.com/cikit/cikit/secrets"
)

// Access authenticates and authorizes the API's callers, keeps the audit
// log and manages tokens, service accounts and roles. *auth.Service
// implements it; an embedder may wrap one.
type Access interface {
	// Authenticate returns the caller of r, nil for an anonymous one;
	// see auth.Service.Authenticate for its errors.
	Authenticate(r *http.Request) (*auth.Principal, error)
	// Authorize returns nil when p has role on org/repo (org "": the
	// platform), else an error wrapping auth.ErrForbidden.
	Authorize(ctx context.Context, p *auth.Principal, role auth.Role, org, repo string) error
	// Grants reads what p may do, for filtering lists.
	Grants(ctx context.Context, p *auth.Principal) (*auth.Grants, error)
	// ClientAddr names r's client in the audit log.
	ClientAddr(r *http.Request) string
	Audit(ctx context.Context, e auth.Entry) error
	AuditList(ctx context.Context, q auth.AuditQuery) ([]auth.Entry, error)

	TokenCreate(ctx context.Context, p *auth.Principal, tp auth.TokenParams) (*auth.NewToken, error)
	TokenList(ctx context.Context, p *auth.Principal, all bool) ([]*auth.Token, error)
	TokenRevoke(ctx context.Context, p *auth.Principal, id string) error
	ServiceAccountCreate(ctx context.Context, p *auth.Principal, login, name string) (*auth.User, error)
	UserList(ctx context.Context, p *auth.Principal) ([]*auth.User, error)
	UserDisable(ctx context.Context, p *auth.Principal, login string, disabled bool) error
	BindingGrant(ctx context.Context, p *auth.Principal, b auth.Binding) error
	BindingRevoke(ctx context.Context, p *auth.Principal, b auth.Binding) error
	BindingList(ctx context.Context, p *auth.Principal) ([]auth.Binding, error)
}

var _ Access = (*auth.Service)(nil)

// Scope says where a route's Rule.Role is needed.
type Scope int

// The scopes of a rule.
const (
	// OnPlatform: the role on the whole platform (secrets without a
	// scope, tokens, roles, the audit log, runners, the policy).
	OnPlatform Scope = iota + 1
	// OnRepo: the role on the {org}/{repo} of the path.
	OnRepo
	// OnRun: the role on the repository of the {run} of the path, read
	// from its Pipeline ("org/repo:file"). A caller who may not read the
	// run gets 404, as for a run that does not exist; one who may read
	// it but lacks Role gets 403.
	OnRun
	// OnSecretScope: the role on the org or repository of the secret
	// scope of the query (?scope=org:acme, repo:acme/api,
	// env:acme/api:prod); a missing or invalid scope needs the role on
	// the platform (and is then answered 400).
	OnSecretScope
)

// Rule is who may call a route. Every route but the health checks has
// one that is not Open; New fails for a route registered with the zero
// Rule.
type Rule struct {
	// Open routes need no credential: the health checks.
	Open bool
	// AnyUser routes need a credential and no role: what they show or
	// change is the caller's own (GET /api/v1/me, the caller's tokens).
	AnyUser bool
	// Role is needed where Scope says.
	Role  auth.Role
	Scope Scope
	// Action names the route in the audit log ("run.cancel"); every
	// call of a route with one is recorded, refusals included. Target
	// is the entry's target, {name} replaced by the path value ("run/{run}").
	Action, Target string
	// HandlerAudits says the handler writes the audit entries of the
	// calls it serves, with what only it knows (a reviewer's comment):
	// the rule writes only its own refusals.
	HandlerAudits bool
}

func (r Rule) validate() error {
	if (r.Action == "") != (r.Target == "") {
		return errors.New("an audited rule has both Action and Target")
	}
	if r.HandlerAudits && r.Action == "" {
		return errors.New("a rule whose handler audits has the Action and Target of its refusals")
	}
	switch {
	case r.Open && (r.AnyUser || r.Role != auth.RoleNone || r.Action != ""):
		return errors.New("an Open rule has no role and no audit action")
	case r.Open:
		return nil
	case r.AnyUser && r.Role != auth.RoleNone:
		return errors.New("an AnyUser rule has no role")
	case r.AnyUser:
		return nil
	case r.Role <= auth.RoleNone || r.Role > auth.RoleAdmin:
		return errors.New("the rule has no role: give it Open, AnyUser or a Role and a Scope")
	case r.Scope < OnPlatform || r.Scope > OnSecretScope:
		return errors.New("the rule's Role has no Scope")
	}
	return nil
}

// Route is a registered route: its pattern ("POST /api/v1/runs/{run}/cancel")
// and rule.
type Route struct {
	Pattern string
	Rule    Rule
}

// Routes returns every route the API serves, in registration order.
func (a *API) Routes() []Route { return append([]Route(nil), a.routes...) }

// handle registers pattern with rule: h runs only for a caller the rule
// admits, with its principal in the request's context
// (auth.FromContext).
func (a *API) handle(pattern string, rule Rule, h http.Handler) error {
	if err := rule.validate(); err != nil {
		return fmt.Errorf("api: route %s: %w", pattern, err)
	}
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		return fmt.Errorf("api: route %q has no method", pattern)
	}
	if a.methods[path] == nil {
		a.paths = append(a.paths, path)
	}
	a.methods[path] = append(a.methods[path], method)
	a.routes = append(a.routes, Route{Pattern: pattern, Rule: rule})
	a.mux.Handle(pattern, a.guard(rule, h))
	return nil
}

// allowMethods registers, for each path, a JSON 405 for the methods its
// routes do not take.
func (a *API) allowMethods() {
	for _, path := range a.paths {
		ms := a.methods[path]
		allow := strings.Join(ms, ", ")
		if len(ms) == 1 && ms[0] == http.MethodGet {
			allow = "GET, HEAD"
		}
		a.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, "use "+strings.Join(ms, ", "))
		})
	}
}

type targetKey struct{}

// target is the org and repository a guarded request is about.
type target struct{ org, repo string }

// statusWriter remembers the status a handler answered.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (log
// follows flush through it).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (a *API) guard(rule Rule, h http.Handler) http.Handler {
	if rule.Open {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		r = withNote(r)
		p, t, err := a.admit(sw, r, rule)
		if err == nil {
			ctx := context.WithValue(auth.NewContext(r.Context(), p), targetKey{}, t)
			h.ServeHTTP(sw, r.WithContext(ctx))
		}
		if rule.Action != "" && !errors.Is(err, auth.ErrRateLimited) && (err != nil || !rule.HandlerAudits) {
			a.audit(r, p, rule.Action, auditTarget(r, rule), sw.status, err)
		}
	})
}

// admit authenticates and authorizes r by rule, answering the refusal
// (401, 403, 404, 429) itself.
func (a *API) admit(w http.ResponseWriter, r *http.Request, rule Rule) (*auth.Principal, target, error) {
	p, err := a.access.Authenticate(r)
	if err == nil && p == nil {
		err = fmt.Errorf("%w: sign in, or send Authorization: Bearer <token>", auth.ErrUnauthenticated)
	}
	if err != nil {
		a.refuse(w, r, err)
		return nil, target{}, err
	}
	if rule.AnyUser {
		return p, target{}, nil
	}
	t, err := a.resolve(w, r, rule.Scope)
	if err != nil {
		return p, t, err
	}
	if rule.Scope == OnRun && rule.Role > auth.RoleRead {
		// Who may not read the run is told it does not exist.
		if err := a.access.Authorize(r.Context(), p, auth.RoleRead, t.org, t.repo); err != nil {
			if errors.Is(err, auth.ErrForbidden) {
				err = hiddenRun(r)
			}
			a.refuse(w, r, err)
			return p, t, err
		}
	}
	if err := a.access.Authorize(r.Context(), p, rule.Role, t.org, t.repo); err != nil {
		if rule.Scope == OnRun && rule.Role == auth.RoleRead && errors.Is(err, auth.ErrForbidden) {
			err = hiddenRun(r)
		}
		a.refuse(w, r, err)
		return p, t, err
	}
	return p, t, nil
}

// errHidden is a run the caller may not read: answered like one that
// does not exist.
type errHidden struct{ run string }

func (e errHidden) Error() string {
	return fmt.Sprintf("dag: run %q: %v", e.run, cikit.ErrNotFound)
}
func (e errHidden) Unwrap() []error { return []error{cikit.ErrNotFound, auth.ErrForbidden} }

func hiddenRun(r *http.Request) error { return errHidden{run: r.PathValue("run")} }

// refuse answers an error of authentication or authorization.
func (a *API) refuse(w http.ResponseWriter, r *http.Request, err error) {
	var rl *auth.RateLimitedError
	switch {
	case errors.As(err, &rl):
		w.Header().Set("Retry-After", strconv.Itoa(int(max(1, rl.RetryAfter.Seconds()+0.5))))
		writeError(w, http.StatusTooManyRequests, err.Error())
	case errors.Is(err, auth.ErrRateLimited):
		w.Header().Set("Retry-After", "3")
		writeError(w, http.StatusTooManyRequests, err.Error())
	case errors.Is(err, auth.ErrUnauthenticated):
		w.Header().Set("WWW-Authenticate", `Bearer realm="cikit"`)
		writeFieldError(w, http.StatusUnauthorized, "Authorization", err.Error())
	case errors.Is(err, cikit.ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, auth.ErrCSRF), errors.Is(err, auth.ErrForbidden):
		writeError(w, http.StatusForbidden, err.Error())
	case errors.Is(err, errAnswered):
	default:
		a.fail(w, r, "checking the caller's access", err)
	}
}

// errAnswered: resolve answered the request already (400).
var errAnswered = errors.New("answered")

// resolve finds the org and repository of r by scope; it answers 400
// and 404 itself.
func (a *API) resolve(w http.ResponseWriter, r *http.Request, scope Scope) (target, error) {
	switch scope {
	case OnRepo:
		return target{org: r.PathValue("org"), repo: r.PathValue("repo")}, nil
	case OnRun:
		if !pathIDs(w, r, "run") {
			return target{}, errAnswered
		}
		run, err := a.runs.RunGet(r.Context(), r.PathValue("run"))
		if err != nil {
			if errors.Is(err, cikit.ErrNotFound) {
				writeError(w, http.StatusNotFound, err.Error())
			} else {
				a.fail(w, r, "reading the run", err)
			}
			return target{}, errAnswered
		}
		org, repo := SplitPipeline(run.Pipeline)
		return target{org: org, repo: repo}, nil
	case OnSecretScope:
		q, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil || len(q["scope"]) != 1 {
			return target{}, nil
		}
		sc, err := secrets.ParseScope(q["scope"][0])
		if err != nil {
			return target{}, nil
		}
		if sc.Kind == secrets.ScopeOrg {
			return target{org: sc.Org}, nil
		}
		org, repo := splitRepo(sc.Repo)
		return target{org: org, repo: repo}, nil
	}
	return target{}, nil
}

// SplitPipeline returns the org and repository of a run's Pipeline,
// "org/repo:file" ("acme/platform/api:.gitlab-ci.yml": org
// "acme/platform", repo "api").
func SplitPipeline(pipeline string) (org, repo string) {
	path, _, _ := strings.Cut(pipeline, ":")
	return splitRepo(path)
}

func splitRepo(path string) (org, repo string) {
	i := strings.LastIndexByte(path, '/')
	if i < 0 {
		return path, ""
	}
	return path[:i], path[i+1:]
}

// auditTarget fills the {name} path values of the rule's Target; a
// secret's target starts with its scope ("secret/repo:acme/api/TOKEN").
func auditTarget(r *http.Request, rule Rule) string {
	tmpl := rule.Target
	var b strings.Builder
	for {
		i := strings.IndexByte(tmpl, '{')
		j := strings.IndexByte(tmpl, '}')
		if i < 0 || j < i {
			b.WriteString(tmpl)
			break
		}
		b.WriteString(tmpl[:i])
		b.WriteString(r.PathValue(tmpl[i+1 : j]))
		tmpl = tmpl[j+1:]
	}
	out := b.String()
	if rule.Scope == OnSecretScope {
		scope := r.URL.Query().Get("scope")
		out = strings.Replace(out, "secret/", "secret/"+scope[:min(len(scope), 256)]+"/", 1)
	}
	return out
}

// audit records a call of an audited route: ok for a 2xx or 3xx answer,
// denied for a refusal, failed for anything else.
func (a *API) audit(r *http.Request, p *auth.Principal, action, target string, status int, refused error) {
	outcome := "failed"
	switch {
	case refused != nil && (errors.Is(refused, auth.ErrUnauthenticated) || errors.Is(refused, auth.ErrForbidden) || errors.Is(refused, auth.ErrCSRF)):
		outcome = "denied"
	case refused == nil && status < 400:
		outcome = "ok"
	case status == http.StatusForbidden:
		outcome = "denied"
	}
	if n := noted(r); n != "" {
		target = n
	}
	detail := ""
	if refused != nil {
		detail = refused.Error()
	}
	e := auth.Entry{Actor: p.String(), Action: action, Target: target, Detail: detail, Remote: a.access.ClientAddr(r), Outcome: outcome}
	if err := a.access.Audit(context.WithoutCancel(r.Context()), e); err != nil {
		a.log.LogAttrs(r.Context(), slog.LevelError, "api: writing the audit log failed", slog.String("action", action),
			slog.String("target", target), slog.String("error", err.Error()))
	}
}

type noteKey struct{}

// withNote gives a guarded request a place for its handler to name the
// audit target it learns only as it runs (a new token's ID).
func withNote(r *http.Request) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), noteKey{}, new(string)))
}

func note(r *http.Request, target string) {
	if p, ok := r.Context().Value(noteKey{}).(*string); ok {
		*p = target
	}
}

func noted(r *http.Request) string {
	if p, ok := r.Context().Value(noteKey{}).(*string); ok {
		return *p
	}
	return ""
}

// requireRole checks, inside a handler, a role above its route's (a
// manual job with an environment needs approve), answering 403.
func (a *API) requireRole(w http.ResponseWriter, r *http.Request, role auth.Role) bool {
	t, _ := r.Context().Value(targetKey{}).(target)
	if err := a.access.Authorize(r.Context(), auth.FromContext(r.Context()), role, t.org, t.repo); err != nil {
		a.refuse(w, r, err)
		return false
	}
	return true
}
