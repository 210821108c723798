package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/reference/api"
	"github.com/cikit/cikit/reference/auth"
)

// as serves one request of f's API with token ("" for none) and body.
func (f *fixture) as(t *testing.T, token, method, target, body string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	return call(t, f.api, method, target, token, body, header...)
}

// TestAuditOfPrivilegedActions: a cancel that went through and one that
// was refused are both in the audit log, with actor, target, remote
// address and outcome; reads are not audited.
func TestAuditOfPrivilegedActions(t *testing.T) {
	t.Parallel()
	f := documented(t, api.Config{})
	trigger := f.tokenWith(t, "deployer", auth.Binding{Role: auth.RoleTrigger, Org: "acme"})
	require.Equal(t, http.StatusAccepted, f.as(t, trigger, "POST", "/api/v1/runs/run-1/cancel", "").Code)
	require.Equal(t, http.StatusForbidden, f.as(t, f.reader, "POST", "/api/v1/runs/run-2/retry", "").Code)
	require.Equal(t, http.StatusOK, f.as(t, f.reader, "GET", "/api/v1/runs/run-2", "").Code)

	page := decode[api.AuditPage](t, f.as(t, f.admin, "GET", "/api/v1/audit?target=run/", ""), http.StatusOK)
	require.Len(t, page.Entries, 2, "reads are not audited")
	denied, ok := page.Entries[0], page.Entries[1]
	require.Equal(t, "run.retry", denied.Action)
	require.Equal(t, "run/run-2", denied.Target)
	require.Equal(t, "denied", denied.Outcome)
	require.True(t, strings.HasPrefix(denied.Actor, "viewer (token tok_"), denied.Actor)
	require.Contains(t, denied.Detail, "needs role trigger on repo acme/api")
	require.Equal(t, "run.cancel", ok.Action)
	require.Equal(t, "ok", ok.Outcome)
	require.Equal(t, "192.0.2.1", ok.Remote)

	mine := decode[api.AuditPage](t, f.as(t, f.admin, "GET", "/api/v1/audit?action=run.cancel&limit=1", ""), http.StatusOK)
	require.Equal(t, []string{"run.cancel"}, []string{mine.Entries[0].Action})
	requireFieldError(t, f.as(t, f.admin, "GET", "/api/v1/audit?limit=0", ""), "limit", "from 1 to 500")
	requireError(t, f.as(t, f.admin, "GET", "/api/v1/audit?before=zz", ""), http.StatusBadRequest, "not one this log handed out")
}

// TestListRunsFiltersByRole: GET /runs shows a caller the runs of the
// repositories it may read, and nothing of the others.
func TestListRunsFiltersByRole(t *testing.T) {
	t.Parallel()
	f := documented(t, api.Config{})
	_, err := f.store.RunCreate(context.Background(), &dag.RunCreateParams{Jobs: fanOut(), Pipeline: "globex/web:.cikit.yml", Branch: "main", SHA: "1"})
	require.NoError(t, err)
	globex := f.tokenWith(t, "globex-reader", auth.Binding{Role: auth.RoleRead, Org: "globex", Repo: "web"})
	ids := func(token, query string) []string {
		l := decode[api.RunList](t, f.as(t, token, "GET", "/api/v1/runs"+query, ""), http.StatusOK)
		var out []string
		for _, r := range l.Runs {
			out = append(out, r.ID)
		}
		return out
	}
	require.Equal(t, []string{"run-3", "run-2", "run-1"}, ids(f.admin, ""))
	require.Equal(t, []string{"run-2", "run-1"}, ids(f.reader, ""))
	require.Equal(t, []string{"run-3"}, ids(globex, ""))
	require.Equal(t, []string{"run-2"}, ids(f.reader, "?limit=1"))
	nobody := f.tokenWith(t, "nobody")
	require.Empty(t, ids(nobody, ""))
	requireError(t, f.as(t, globex, "GET", "/api/v1/runs/run-1", ""), http.StatusNotFound, `run "run-1": not found`)
	requireError(t, f.as(t, globex, "GET", "/api/v1/runs/run-nope", ""), http.StatusNotFound, `not found`)
}

// TestStartDeploymentNeedsApprove: a manual job with an environment is
// a deployment: trigger may not start it, approve may.
func TestStartDeploymentNeedsApprove(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, api.Config{})
	step := []cikit.Step{{Run: "true"}}
	run, err := f.store.RunCreate(ctx, &dag.RunCreateParams{Pipeline: "acme/api:.cikit.yml", Jobs: []*cikit.JobSpec{
		{ID: "deploy", When: cikit.WhenManual, Environment: &cikit.Environment{Name: "prod"}, Steps: step},
		{ID: "smoke", When: cikit.WhenManual, Steps: step},
	}})
	require.NoError(t, err)
	trigger := f.tokenWith(t, "dev", auth.Binding{Role: auth.RoleTrigger, Org: "acme"})
	approve := f.tokenWith(t, "lead", auth.Binding{Role: auth.RoleApprove, Org: "acme"})
	requireError(t, f.as(t, trigger, "POST", "/api/v1/runs/"+run.ID+"/jobs/deploy/start", ""), http.StatusForbidden, "needs role approve")
	require.Equal(t, http.StatusAccepted, f.as(t, trigger, "POST", "/api/v1/runs/"+run.ID+"/jobs/smoke/start", "").Code)
	require.Equal(t, http.StatusAccepted, f.as(t, approve, "POST", "/api/v1/runs/"+run.ID+"/jobs/deploy/start", "").Code)
	page := decode[api.AuditPage](t, f.as(t, f.admin, "GET", "/api/v1/audit?action=job.start", ""), http.StatusOK)
	require.Len(t, page.Entries, 3)
	require.Equal(t, []string{"ok", "ok", "denied"}, []string{page.Entries[0].Outcome, page.Entries[1].Outcome, page.Entries[2].Outcome})
}

// TestRefusals: what a hostile or careless caller gets: 401 with
// WWW-Authenticate for no, a malformed, tampered or unknown token; 429
// with Retry-After after too many failures, and still refused after.
func TestRefusals(t *testing.T) {
	t.Parallel()
	f := documented(t, api.Config{})
	tampered := []byte(f.admin)
	tampered[15] ^= 1
	for name, tok := range map[string]string{"tampered": string(tampered), "malformed": "hunter2", "huge": strings.Repeat("x", 10000)} {
		rec := f.as(t, tok, "GET", "/api/v1/runs", "")
		requireError(t, rec, http.StatusUnauthorized, "not authenticated")
		require.Equal(t, `Bearer realm="cikit"`, rec.Header().Get("WWW-Authenticate"), name)
	}
	rec := f.as(t, "", "GET", "/api/v1/runs", "", "Authorization", "Basic YWRtaW46YWRtaW4=")
	requireError(t, rec, http.StatusUnauthorized, "Bearer")
	var last *httptest.ResponseRecorder
	for range auth.DefaultFailureBurst {
		last = f.as(t, "hunter2", "GET", "/api/v1/runs", "")
	}
	require.Equal(t, http.StatusTooManyRequests, last.Code, last.Body.String())
	require.NotEmpty(t, last.Header().Get("Retry-After"))
	requireError(t, f.as(t, f.admin, "GET", "/api/v1/runs", ""), http.StatusTooManyRequests, "too many failed attempts")
}

// TestSessionCSRFAndMe: a session principal reads with its cookie alone,
// learns its CSRF token from /me, and may change something only with it.
func TestSessionCSRFAndMe(t *testing.T) {
	t.Parallel()
	f := documented(t, api.Config{})
	ctx := context.Background()
	admin := f.principal(t, f.admin)
	// A person signs in through OIDC; here their session is started directly.
	_, err := f.access.ServiceAccountCreate(ctx, admin, "robot", "")
	require.NoError(t, err)
	_, _, err = f.access.SessionStart(ctx, admin.User)
	require.ErrorIs(t, err, auth.ErrForbidden, "a service account has no session")

	store := auth.NewMemoryStore()
	svc, err := auth.New(auth.Config{Store: store, Logger: discard()})
	require.NoError(t, err)
	require.NoError(t, store.UserCreate(ctx, &auth.User{ID: "usr_alice", Login: "alice"}))
	require.NoError(t, store.BindingGrant(ctx, auth.Binding{User: "alice", Role: auth.RoleTrigger, Org: "acme"}))
	g := newFixture(t, api.Config{Access: svc})
	g.create(t, 0, 0, "main", "4f2a9c1")
	cookie, csrf, err := svc.SessionStart(ctx, "usr_alice")
	require.NoError(t, err)
	do := func(method, target string, header ...string) *httptest.ResponseRecorder {
		req := httptest.NewRequestWithContext(t.Context(), method, target, nil)
		req.AddCookie(cookie)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		rec := httptest.NewRecorder()
		g.api.ServeHTTP(rec, req)
		return rec
	}
	me := decode[api.Me](t, do("GET", "/api/v1/me"), http.StatusOK)
	require.Equal(t, "alice", me.Login)
	require.Equal(t, "session", me.Kind)
	require.Equal(t, csrf, me.CSRFToken)
	require.Equal(t, []auth.Binding{{User: "alice", Role: auth.RoleTrigger, Org: "acme"}}, me.Bindings)
	require.Equal(t, http.StatusOK, do("GET", "/api/v1/runs/run-1").Code)
	requireError(t, do("POST", "/api/v1/runs/run-1/cancel"), http.StatusForbidden, "CSRF")
	requireError(t, do("POST", "/api/v1/runs/run-1/cancel", auth.CSRFHeader, csrf+"x"), http.StatusForbidden, "CSRF")
	require.Equal(t, http.StatusAccepted, do("POST", "/api/v1/runs/run-1/cancel", auth.CSRFHeader, csrf).Code)
}

// TestTokenRoutes: a person makes, lists and revokes their own tokens
// through the API; the secret is in the answer once, and a revoked token
// is refused.
func TestTokenRoutes(t *testing.T) {
	t.Parallel()
	f := documented(t, api.Config{})
	nt := decode[auth.NewToken](t, f.as(t, f.reader, "POST", "/api/v1/tokens", `{"name":"laptop","ttl":"24h","max_role":"read"}`), http.StatusCreated)
	require.True(t, strings.HasPrefix(nt.Secret, "cikit_svc_"), "viewer is a service account")
	require.Equal(t, http.StatusOK, f.as(t, nt.Secret, "GET", "/api/v1/runs/run-1", "").Code)
	list := decode[api.TokenList](t, f.as(t, f.reader, "GET", "/api/v1/tokens", ""), http.StatusOK)
	require.Len(t, list.Tokens, 2)
	require.NotContains(t, f.as(t, f.reader, "GET", "/api/v1/tokens", "").Body.String(), nt.Secret, "a secret is shown once")
	requireError(t, f.as(t, f.reader, "GET", "/api/v1/tokens?all=true", ""), http.StatusForbidden, "needs role admin")
	all := decode[api.TokenList](t, f.as(t, f.admin, "GET", "/api/v1/tokens?all=true", ""), http.StatusOK)
	require.Greater(t, len(all.Tokens), 2)
	adminTokens := decode[api.TokenList](t, f.as(t, f.admin, "GET", "/api/v1/tokens", ""), http.StatusOK)
	requireError(t, f.as(t, f.reader, "DELETE", "/api/v1/tokens/"+adminTokens.Tokens[0].ID, ""), http.StatusNotFound, "not found")
	require.Equal(t, http.StatusNoContent, f.as(t, f.reader, "DELETE", "/api/v1/tokens/"+nt.ID, "").Code)
	requireError(t, f.as(t, nt.Secret, "GET", "/api/v1/runs/run-1", ""), http.StatusUnauthorized, "revoked")
	for body, msg := range map[string]string{
		`{"name":""}`:                                   "1 to 128 bytes",
		`{"name":"x","ttl":"forever"}`:                  "not a positive duration",
		`{"name":"x","max_role":"god"}`:                 "unknown role",
		`{"name":"x","org":"../etc"}`:                   "not a path",
		`{"name":"x","nmae":"y"}`:                       "unknown field",
		`{"name":"` + strings.Repeat("n", 10000) + `"}`: "over 8192 bytes",
	} {
		rec := f.as(t, f.reader, "POST", "/api/v1/tokens", body)
		require.Contains(t, []int{400, 413}, rec.Code, "%s: %s", body[:min(len(body), 40)], rec.Body)
		require.Contains(t, rec.Body.String(), msg, body[:min(len(body), 40)])
	}
}

// TestDisableUser: a disabled user's token stops working at once, and
// works again when the user is enabled.
func TestDisableUser(t *testing.T) {
	t.Parallel()
	f := documented(t, api.Config{})
	require.Equal(t, http.StatusOK, f.as(t, f.reader, "GET", "/api/v1/runs/run-1", "").Code)
	require.Equal(t, http.StatusNoContent, f.as(t, f.admin, "POST", "/api/v1/users/viewer/disable", "").Code)
	requireError(t, f.as(t, f.reader, "GET", "/api/v1/runs/run-1", ""), http.StatusUnauthorized, "disabled")
	users := decode[api.UserList](t, f.as(t, f.admin, "GET", "/api/v1/users", ""), http.StatusOK)
	require.Equal(t, []string{"admin", "viewer"}, []string{users.Users[0].Login, users.Users[1].Login})
	require.True(t, users.Users[1].Disabled)
	require.Equal(t, http.StatusNoContent, f.as(t, f.admin, "POST", "/api/v1/users/viewer/enable", "").Code)
	require.Equal(t, http.StatusOK, f.as(t, f.reader, "GET", "/api/v1/runs/run-1", "").Code)
	requireError(t, f.as(t, f.admin, "POST", "/api/v1/users/nosuch/disable", ""), http.StatusNotFound, "not found")
}
