package policy_test

import (
	"os"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/tester"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cikit/cikit/secrets/policy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRego runs policy_test.rego under the restrictions the engine
// compiles policy.rego with; it fails if a Rego test fails or none runs.
func TestRego(t *testing.T) {
	t.Parallel()
	mods := map[string]*ast.Module{}
	for _, name := range []string{"policy.rego", "policy_test.rego"} {
		src, err := os.ReadFile(name)
		require.NoError(t, err)
		m, err := ast.ParseModuleWithOpts(name, string(src), ast.ParserOptions{RegoVersion: ast.RegoV1})
		require.NoError(t, err)
		mods[name] = m
	}
	results, err := tester.NewRunner().SetCompiler(policy.NewCompiler()).SetModules(mods).RaiseBuiltinErrors(true).RunTests(t.Context(), nil)
	require.NoError(t, err)
	ran := 0
	for r := range results {
		ran++
		if !r.Pass() {
			t.Errorf("%s: %s", r.Location, r.String())
		}
	}
	require.NotZero(t, ran, "no Rego test ran")
}
