package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/reference/api"
	"github.com/cikit/cikit/reference/auth"
)

// caller is one principal of the authorization table, with the role it
// has on acme/api and on the platform, written out here rather than
// asked of the Service.
type caller struct {
	name     string
	token    string // "" for anonymous
	onRepo   auth.Role
	platform auth.Role
}

// callers makes the principals of the table on f: anonymous, read,
// trigger, approve, admin, an admin of another org, and a platform
// admin's token confined to another org.
func callers(t *testing.T, f *fixture) []caller {
	t.Helper()
	wrongScope, err := f.access.TokenCreate(context.Background(), f.principal(t, f.admin),
		auth.TokenParams{User: "admin", Name: "globex only", Org: "globex"})
	require.NoError(t, err)
	return []caller{
		{name: "anonymous"},
		{name: "read", token: f.tokenWith(t, "reader", auth.Binding{Role: auth.RoleRead, Org: "acme"}), onRepo: auth.RoleRead},
		{name: "trigger", token: f.tokenWith(t, "triggerer", auth.Binding{Role: auth.RoleTrigger, Org: "acme", Repo: "api"}), onRepo: auth.RoleTrigger},
		{name: "approve", token: f.tokenWith(t, "approver", auth.Binding{Role: auth.RoleApprove, Org: "acme"}), onRepo: auth.RoleApprove},
		{name: "admin", token: f.admin, onRepo: auth.RoleAdmin, platform: auth.RoleAdmin},
		{name: "admin of another org", token: f.tokenWith(t, "globex-admin", auth.Binding{Role: auth.RoleAdmin, Org: "globex"})},
		{name: "wrong-scope token", token: wrongScope.Secret},
	}
}

// sample is a request of a route's pattern: its path values filled in
// with the fixture's run, job and repository, a query and a body the
// route takes.
func sample(pattern string) (method, target, body string) {
	method, path, _ := strings.Cut(pattern, " ")
	path = strings.NewReplacer("{run}", "run-1", "{job}", "build", "{org}", "acme", "{repo}", "api", "{name}", "TOKEN",
		"{id}", "tok_nope", "{artifact}", "art-1", "{login}", "nosuch").Replace(path)
	switch {
	case strings.Contains(path, "/secrets"):
		path += "?scope=repo:acme/api"
		body = `{"value":"abcdefgh"}`
	case pattern == "POST /api/v1/tokens":
		body = `{"name":"table"}`
	case pattern == "POST /api/v1/service-accounts":
		body = `{"login":"sa-table"}`
	case pattern == "POST /api/v1/roles":
		body = `{"user":"reader","role":"read","org":"acme"}`
	case pattern == "DELETE /api/v1/roles":
		path += "?user=reader&role=admin&org=nowhere"
	case strings.HasSuffix(pattern, "/pipelines"):
		body = `{"ref":"main"}`
	}
	return method, path, body
}

// expected is what the rule says caller c gets: 0 for allowed (any
// status but 401 and 403), else the refusal's status.
func expected(rule api.Rule, c caller) int {
	switch {
	case rule.Open:
		return 0
	case c.token == "":
		return http.StatusUnauthorized
	case rule.AnyUser:
		return 0
	}
	has := c.onRepo
	if rule.Scope == api.OnPlatform {
		has = c.platform
	}
	switch {
	case rule.Scope == api.OnRun && has < auth.RoleRead:
		return http.StatusNotFound // a run the caller may not read is not there
	case has < rule.Role:
		return http.StatusForbidden
	}
	return 0
}

// TestAuthorizationTable walks every registered route × every kind of
// caller and checks the answer against the route's rule: a route added
// without a rule cannot be registered (TestRouteWithoutRule), and one
// with a rule is checked here without being listed by hand.
func TestAuthorizationTable(t *testing.T) {
	t.Parallel()
	manual := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusAccepted) })
	f := documented(t, api.Config{Manual: manual})
	cs := callers(t, f)
	routes := f.api.Routes()
	require.GreaterOrEqual(t, len(routes), 25)
	seen := map[string]bool{}
	for _, rt := range routes {
		require.False(t, seen[rt.Pattern], "%s is registered once", rt.Pattern)
		seen[rt.Pattern] = true
		for _, c := range cs {
			method, target, body := sample(rt.Pattern)
			req := httptest.NewRequestWithContext(t.Context(), method, target, strings.NewReader(body))
			if c.token != "" {
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			rec := httptest.NewRecorder()
			f.api.ServeHTTP(rec, req)
			b := rec.Body.String()
			what := fmt.Sprintf("%s as %s: %d %s", rt.Pattern, c.name, rec.Code, b[:min(len(b), 300)])
			switch want := expected(rt.Rule, c); want {
			case 0:
				require.NotContains(t, []int{401, 403}, rec.Code, what)
			case http.StatusNotFound:
				requireError(t, rec, want, `run "run-1": not found`)
			default:
				require.Equal(t, want, rec.Code, what)
				if want == http.StatusUnauthorized {
					require.Equal(t, `Bearer realm="cikit"`, rec.Header().Get("WWW-Authenticate"), what)
				}
			}
		}
	}
	for _, p := range []string{"GET /healthz", "GET /api/v1/runs/{run}", "POST /api/v1/runs/{run}/cancel", "POST /api/v1/repos/{org}/{repo}/pipelines",
		"GET /api/v1/audit", "PUT /api/v1/secrets/{name}", "POST /api/v1/tokens"} {
		require.True(t, seen[p], "the table covers %s", p)
	}
}
