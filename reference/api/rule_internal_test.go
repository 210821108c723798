package api

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/reference/auth"
)

// TestRouteWithoutRule: a route registered with the zero Rule, or a rule
// that says too little, is refused, so api.New fails rather than serve
// it open.
func TestRouteWithoutRule(t *testing.T) {
	t.Parallel()
	a := &API{mux: http.NewServeMux(), methods: map[string][]string{}}
	h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	for name, c := range map[string]struct {
		rule Rule
		msg  string
	}{
		"zero":            {Rule{}, "the rule has no role"},
		"role, no scope":  {Rule{Role: auth.RoleRead}, "has no Scope"},
		"open with role":  {Rule{Open: true, Role: auth.RoleAdmin}, "an Open rule"},
		"any with role":   {Rule{AnyUser: true, Role: auth.RoleRead}, "an AnyUser rule"},
		"half an audit":   {Rule{Role: auth.RoleRead, Scope: OnRun, Action: "run.read"}, "both Action and Target"},
		"role out of set": {Rule{Role: auth.Role(9), Scope: OnRun}, "the rule has no role"},
	} {
		err := a.handle("GET /api/v1/x", c.rule, h)
		require.ErrorContains(t, err, c.msg, name)
		require.ErrorContains(t, err, "route GET /api/v1/x", name)
	}
	require.Empty(t, a.Routes(), "nothing was registered")
	require.NoError(t, a.handle("GET /api/v1/x", Rule{Role: auth.RoleRead, Scope: OnRun}, h))
	require.Len(t, a.Routes(), 1)
}
