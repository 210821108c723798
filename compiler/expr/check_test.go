package expr_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/compiler/expr"
)

func TestCheckGitHub(t *testing.T) {
	t.Parallel()
	known := map[string]bool{"github": true, "matrix": true, "needs": true, "inputs": true, "env": true}
	tests := []struct {
		src  string
		want []expr.Problem
	}{
		{"github.ref == 'x' && contains(needs.*.result, 'failure')", nil},
		{"GitHub.Ref", nil},
		{"fromJSON(x).y || toJson(matrix)", []expr.Problem{
			{9, `unknown context "x" (available: env, github, inputs, matrix, needs)`},
		}},
		// Everywhere, also where evaluation would not go.
		{"false && matrx.os == startWith(github.ref, 'v') && format()", []expr.Problem{
			{9, `unknown context "matrx"; did you mean "matrix"? (available: env, github, inputs, matrix, needs)`},
			{21, `unknown function "startWith"; did you mean "startsWith"?`},
			{51, "format takes at least 1 argument, not 0"},
		}},
		{"inputs[secrets.key]", []expr.Problem{
			{7, `unknown context "secrets" (available: env, github, inputs, matrix, needs)`},
		}},
		{"case(true, 1, 2, 3) || HASHFILES()", []expr.Problem{
			{0, "case takes an odd number of arguments (pairs of a condition and a value, then a default), not 4"},
			{23, "hashFiles takes at least 1 argument, not 0"},
		}},
		{"succes()", []expr.Problem{{0, `unknown function "succes"; did you mean "success"?`}}},
		{"contains(1, 2, 3)", []expr.Problem{{0, "contains takes 2 arguments, not 3"}}},
		{"join()", []expr.Problem{{0, "join takes 1 or 2 arguments, not 0"}}},
		{"cancelled(1)", []expr.Problem{{0, "cancelled takes no arguments, not 1"}}},
	}
	for _, tt := range tests {
		got := expr.CheckGitHub(parseGitHub(t, tt.src), known)
		require.Equal(t, tt.want, got, tt.src)
	}

	// Without known, contexts are not checked.
	require.Empty(t, expr.CheckGitHub(parseGitHub(t, "anything.at.all"), nil))
	// Known names are lower-case; others still match.
	require.Empty(t, expr.CheckGitHub(parseGitHub(t, "Matrix.os"), map[string]bool{"MATRIX": true}))
	require.Equal(t, []expr.Problem{{0, `unknown context "github" (no contexts are available here)`}},
		expr.CheckGitHub(parseGitHub(t, "github"), map[string]bool{}))
}

func TestReferences(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src  string
		want []string
	}{
		{"matrix.os", []string{"matrix.os"}},
		{"Matrix.OS == 'linux'", []string{"matrix.os"}},
		{"needs.build.outputs.version", []string{"needs.build.outputs.version"}},
		{"inputs['name']", []string{"inputs.name"}},
		{"inputs['Some Key'].x", []string{"inputs.some key.x"}},
		{"matrix.include[0].os", []string{"matrix.include.*.os"}},
		{"contains(needs.*.result, 'failure')", []string{"needs.*.result"}},
		{"needs[*].outputs", []string{"needs.*.outputs"}},
		{"matrix[inputs.key]", []string{"matrix.*", "inputs.key"}},
		{"github", []string{"github"}},
		{"fromJSON(needs.a.outputs.j).x[matrix.i]", []string{"needs.a.outputs.j", "matrix.i"}},
		{"!steps.a.outcome || format('{0}', env.X) == vars.y", []string{"steps.a.outcome", "env.x", "vars.y"}},
		{"'lit' == 1 && always()", nil},
		{"(matrix).os", []string{"matrix.os"}},
	}
	for _, tt := range tests {
		var got []string
		for _, r := range expr.References(parseGitHub(t, tt.src)) {
			got = append(got, r.String())
		}
		require.Equal(t, tt.want, got, tt.src)
	}

	refs := expr.References(parseGitHub(t, "a[b.c] || d"))
	require.Equal(t, []expr.Ref{
		{Offset: 0, Path: []string{"a", "*"}},
		{Offset: 2, Path: []string{"b", "c"}},
		{Offset: 10, Path: []string{"d"}},
	}, refs)
}

func TestUsesStatus(t *testing.T) {
	t.Parallel()
	for src, want := range map[string]bool{
		"github.ref == 'x'":                   false,
		"always()":                            true,
		"failure() && github.ref == 'x'":      true,
		"format('{0}', Cancelled())":          true,
		"contains(github.ref, 'success()')":   false,
		"github.success":                      false,
		"!SUCCESS()":                          true,
		"x[success()]":                        true,
		"fromJSON('{}')[format('{0}', 1)]":    false,
		"steps.a.outcome == 'failure' || !!1": false,
	} {
		require.Equal(t, want, expr.UsesStatus(parseGitHub(t, src)), src)
	}
}
