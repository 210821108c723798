package expr_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cikit/cikit/compiler/expr"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Tree builders for expected ASTs; offsets are left zero and ignored by
// sameTree.
func lit(v any) expr.Node                  { return &expr.Literal{Value: v} }
func ctx(name string) expr.Node            { return &expr.Context{Name: name} }
func prop(x expr.Node, n string) expr.Node { return &expr.Property{X: x, Name: n} }
func idx(x, i expr.Node) expr.Node         { return &expr.Index{X: x, Index: i} }
func not(x expr.Node) expr.Node            { return &expr.Not{X: x} }
func bin(op expr.Op, x, y expr.Node) expr.Node {
	return &expr.Binary{Op: op, X: x, Y: y}
}
func call(name string, args ...expr.Node) expr.Node { return &expr.Call{Name: name, Args: args} }

// treeOpts compare syntax trees ignoring positions; NaN literals are
// equal to each other.
var treeOpts = cmp.Options{
	cmp.FilterPath(func(p cmp.Path) bool {
		sf, ok := p.Last().(cmp.StructField)
		return ok && sf.Name() == "Offset"
	}, cmp.Ignore()),
	cmpopts.EquateNaNs(),
	cmpopts.IgnoreUnexported(expr.GitLabRegexp{}),
}

func requireSameTree(t *testing.T, want, got expr.Node) {
	t.Helper()
	if diff := cmp.Diff(want, got, treeOpts); diff != "" {
		t.Fatalf("tree (-want +got):\n%s", diff)
	}
}

func parseGitHub(t *testing.T, src string) expr.Node {
	t.Helper()
	n, err := expr.ParseGitHub(src)
	require.NoError(t, err, "parse %q", src)
	return n
}

// evalGitHub parses and evaluates src.
func evalGitHub(t *testing.T, src string, env *expr.GitHubEnv) (any, error) {
	t.Helper()
	return expr.EvalGitHub(parseGitHub(t, src), env)
}

// syntaxError asserts err is a *SyntaxError and returns it.
func syntaxError(t *testing.T, err error) *expr.SyntaxError {
	t.Helper()
	require.Error(t, err)
	var se *expr.SyntaxError
	require.ErrorAs(t, err, &se)
	return se
}

// evalError asserts err is an *EvalError and returns it.
func evalError(t *testing.T, err error) *expr.EvalError {
	t.Helper()
	require.Error(t, err)
	var ee *expr.EvalError
	require.ErrorAs(t, err, &ee)
	return ee
}
