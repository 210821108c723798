package expr_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/compiler/expr"
)

// testEnv is a known environment shaped like a push workflow's.
func testEnv() *expr.GitHubEnv {
	return &expr.GitHubEnv{
		Contexts: map[string]any{
			"github": map[string]any{
				"event_name": "push",
				"ref":        "refs/tags/v1.2.0",
				"run_number": 42, // a Go int reads as a number
				"event": map[string]any{
					"commits": []any{
						map[string]any{"id": "a1", "author": map[string]any{"name": "mona"}},
						map[string]any{"id": "b2", "author": map[string]any{"name": "hubot"}},
						map[string]any{"id": "c3"},
					},
					"issue": map[string]any{"labels": []any{
						map[string]any{"name": "bug"}, map[string]any{"name": "help wanted"},
					}},
				},
			},
			"matrix": map[string]any{"os": "ubuntu-latest", "Node": 20.0, "list": []any{"zero", "one", "two"}},
			"inputs": map[string]any{"name": "", "debug": false, "count": "3"},
			"vars":   map[string]any{},
			"arr":    []any{1.0, "two", nil},
			"obj":    map[string]any{"k": "v"},
		},
		Unknown: map[string]bool{"needs": true, "steps": true, "job": true},
	}
}

// githubValues are expressions and their values in testEnv; they are GitHub's
// documented semantics, and also seed FuzzParseGitHub.
var githubValues = []struct {
	src  string
	want any
}{
	// Literals.
	{"null", nil},
	{"0x10", 16.0},
	{"'It''s'", "It's"},

	// Loose equality: mismatched kinds become numbers.
	{"null == 0", true},
	{"null == ''", true},
	{"null == false", true},
	{"null == 'null'", false}, // 'null' is NaN
	{"true == 1", true},
	{"false == 0", true},
	{"true == 'true'", false}, // 1 == NaN
	{"true == '1'", true},
	{"'' == 0", true},
	{"' 42 ' == 42", true},
	{"'0x10' == 16", true},
	{"'1e2' == 100", true},
	{"'abc' == 0", false},
	{"'abc' != 0", true},
	{"NaN == NaN", false},
	{"NaN != NaN", true},
	{"-0 == 0", true},
	{"'ABC' == 'abc'", true}, // strings ignore case
	{"'Straße' == 'STRASSE'", false},
	{"'ä' == 'Ä'", true},
	{"'ı' == 'I'", false},
	{"null == null", true},
	{"arr == arr", true}, // the same instance
	{"obj == obj", true},
	{"fromJSON('[1]') == fromJSON('[1]')", false}, // different instances
	{"fromJSON('{}') == fromJSON('{}')", false},
	{"arr == 'Array'", false}, // arrays never convert
	{"obj == 0", false},
	{"arr != 0", true},

	// Order.
	{"1 < 2", true},
	{"'a' < 'B'", true}, // ignoring case
	{"'b' > 'A'", true},
	{"false < true", true},
	{"true > 1", false},
	{"true >= 1", true},
	{"'2' > 10", false},
	{"null < 1", true},
	{"null <= null", true},
	{"null < null", false},
	{"NaN < 1", false},
	{"NaN >= NaN", false},
	{"arr < arr", false},
	{"arr <= arr", true}, // equal, as the same instance
	{"3 < 2 < 1", true},  // (false) < 1
	{"!2 < 3", true},

	// && and || return the deciding operand.
	{"true && 'yes'", "yes"},
	{"0 && 'yes'", 0.0},
	{"'' && x.y", ""}, // not evaluated: x would be an error
	{"null || 'default'", "default"},
	{"'set' || 'default'", "set"},
	{"false || 0", 0.0},
	{"1 || 2 && 3", 1.0},
	{"(1 || 2) && 3", 3.0},
	{"false && 0 || null", nil},
	{"!''", true},
	{"!'false'", false},
	{"!NaN", true},
	{"!arr", false},

	// Contexts and accesses, ignoring case.
	{"github.event_name", "push"},
	{"GitHub.Event_Name", "push"},
	{"GITHUB.EVENT_NAME == 'PUSH'", true},
	{"github.run_number", 42.0},
	{"github['event_name']", "push"},
	{"github['EVENT_NAME']", "push"},
	{"github.nothing", nil},
	{"github.nothing.deeper", nil},
	{"matrix.node", 20.0},
	{"matrix.list[1]", "one"},
	{"matrix.list['1']", "one"},
	{"matrix.list[1.9]", "one"},
	{"matrix.list[true]", "one"},
	{"matrix.list[null]", "zero"},
	{"matrix.list[' 0x02 ']", "two"},
	{"matrix.list[3]", nil},
	{"matrix.list[-1]", nil},
	{"matrix.list[NaN]", nil},
	{"matrix.list['x']", nil},
	{"matrix.list.x", nil},
	{"matrix[matrix.os]", nil},
	{"inputs.name", ""},
	{"inputs.count == 3", true},
	{"obj[arr]", nil},
	{"(obj).k", "v"},
	{"fromJSON('{\"a\":{\"b\":1}}').A.B", 1.0},
	{"fromJSON('[\"x\",\"y\"]')[1]", "y"},

	// Object filters.
	{"github.event.commits.*.id", []any{"a1", "b2", "c3"}},
	{"github.event.commits.*.author.name", []any{"mona", "hubot"}},
	{"github.event.commits[*].ID", []any{"a1", "b2", "c3"}},
	{"github.event.commits.*[0]", []any{}},
	{"obj.*", []any{"v"}},
	{"matrix.list.*", []any{"zero", "one", "two"}},
	{"fromJSON('[[1,2],[3],{\"a\":4}]').*.*", []any{1.0, 2.0, 3.0, 4.0}},
	{"fromJSON('[[1,2],[3]]')[*][1]", []any{2.0}},
	{"inputs.name.*", []any{}},
	{"vars.*", []any{}},
	{"(github.event.commits.*).id", []any{"a1", "b2", "c3"}},

	// Functions.
	{"contains('abcdef', 'CDE')", true},
	{"contains('abc', '')", true},
	{"contains('1234', 23)", true},
	{"contains('true', true)", true},
	{"contains('asdf', null)", true},
	{"contains('abc', arr)", false},
	{"contains(github.event.issue.labels.*.name, 'BUG')", true},
	{"contains(github.event.issue.labels.*.name, 'feature')", false},
	{"contains(arr, 1)", true},
	{"contains(arr, '1')", true}, // loose equality
	{"contains(arr, 'TWO')", true},
	{"contains(arr, null)", true},
	{"contains(arr, 0)", true}, // null == 0
	{"contains(fromJSON('[]'), null)", false},
	{"contains(obj, 'v')", false},
	{"contains(null, '')", true}, // '' contains ''
	{"startsWith(github.ref, 'REFS/TAGS/')", true},
	{"startsWith('abc', '')", true},
	{"startsWith('1234', 12)", true},
	{"startsWith('abc', arr)", false},
	{"startsWith(arr, 'A')", false},
	{"startsWith('ς_asdf', 'Σ')", true},
	{"startsWith('i_asdf', 'İ')", false},
	{"endsWith('abcdef', 'DEF')", true},
	{"endsWith('abcdef', 'abc')", false},
	{"endsWith('12.5', 2.5)", true},
	{"endsWith(arr, 'x')", false},
	{"endsWith('☃x', 'X')", true},
	{"format('Hello {0} {1} {0}', 'Mona', 'the')", "Hello Mona the Mona"},
	{"format('{{0}}', 'x')", "{0}"},
	{"format('{{{0}}}', 'x')", "{x}"},
	{"format('{{{{0}}}}', 'x')", "{{0}}"},
	{"format('}}{{')", "}{"},
	{"format('{0}{1}', null, true)", "true"},
	{"format('{0}', 1.0)", "1"},
	{"format('{0}', 0.1)", "0.1"},
	{"format('{0}', -0)", "0"},
	{"format('{0}', 123456789012345)", "123456789012345"},
	{"format('{0}', 1234567890123456)", "1.23456789012346E+15"},
	{"format('{0}', 0.00001)", "1E-05"},
	{"format('{0}', 0.84551240822557006)", "0.84551240822557"},
	{"format('{0}', 1e400)", "Infinity"},
	{"format('{0} {1}', arr, obj)", "Array Object"},
	{"format(null)", ""},
	{"format('{1}', needs, 'x')", "x"}, // an unreferenced Unknown does not matter
	{"join(arr)", "1,two,"},
	{"join(arr, ' | ')", "1 | two | "},
	{"join(arr, null)", "1two"},
	{"join(arr, obj)", "1,two,"}, // not a primitive: the default
	{"join(github.event.issue.labels.*.name, ', ')", "bug, help wanted"},
	{"join('abc')", "abc"},
	{"join(123.5, '-')", "123.5"},
	{"join(obj)", ""},
	{"join(fromJSON('[[1],{}]'))", "Array,Object"},
	{"toJSON(null)", "null"},
	{"toJSON('a\"b\\c')", `"a\"b\\c"`},
	{"toJSON('<&>☃')", `"<&>☃"`},
	{"toJSON('\t\r\n\b\f\x01\xff')", `"\t\r\n\b\f\u0001\ufffd"`},
	{"toJSON(NaN) == '\"NaN\"'", true},
	{"toJSON(-0)", "0"},
	{"toJSON(1.5)", "1.5"},
	{"toJSON(fromJSON('[]'))", "[]"},
	{"toJSON(vars)", "{}"},
	{"toJSON(arr)", "[\n  1,\n  \"two\",\n  null\n]"},
	{"toJSON(fromJSON('{\"b\":[true,{}],\"a\":{\"c\":[]}}'))", "{\n  \"a\": {\n    \"c\": []\n  },\n  \"b\": [\n    true,\n    {}\n  ]\n}"},
	{"fromJSON('null')", nil},
	{"fromJSON(' true ')", true},
	{"fromJSON('-12.5e1')", -125.0},
	{"fromJSON(inputs.count)", 3.0},
	{"fromJSON('\"it''s\"')", "it's"},
	{"fromJSON(123)", 123.0},
	{"fromJSON('[1,\"a\",null]')", []any{1.0, "a", nil}},
	{"fromJSON('{\"A\":1}')", map[string]any{"A": 1.0}},
	{"fromJSON(toJSON(matrix.list))", []any{"zero", "one", "two"}},
	{"case(true, 'a', 'b')", "a"},
	{"case(false, 'a', 'b')", "b"},
	{"case(false, 'a', 1 == 1, 'b', 'c')", "b"},
	{"case(github.event_name == 'pull_request', 'pr', github.event_name == 'push', 'push', 'other')", "push"},
	{"case(false, 1, false, 2, fromJSON('[3]'))", []any{3.0}},
	{"always()", true},

	// Function names ignore case.
	{"StartsWith('abc', 'a')", true},
	{"TOJSON(1)", "1"},
	{"fromjson('1')", 1.0},
}

func TestEvalGitHub(t *testing.T) {
	t.Parallel()
	for _, tt := range githubValues {
		t.Run(tt.src, func(t *testing.T) {
			t.Parallel()
			got, err := evalGitHub(t, tt.src, testEnv())
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestEvalGitHubSameInstance(t *testing.T) {
	t.Parallel()
	// Values come back as the context holds them, so callers (and ==) see
	// the same instances.
	env := testEnv()
	got, err := evalGitHub(t, "matrix.list", env)
	require.NoError(t, err)
	list := env.Contexts["matrix"].(map[string]any)["list"].([]any)
	require.Same(t, &list[0], &got.([]any)[0])
	v, err := evalGitHub(t, "matrix.list == matrix['LIST']", env)
	require.NoError(t, err)
	require.Equal(t, true, v)
}

func TestEvalGitHubUnknown(t *testing.T) {
	t.Parallel()
	env := testEnv()
	env.Contexts["matrix"].(map[string]any)["later"] = expr.Unknown
	env.Contexts["partial"] = []any{"a", expr.Unknown}
	tests := []struct {
		src  string
		want any
	}{
		{"needs.build.result", expr.Unknown},
		{"NEEDS.build.result", expr.Unknown},
		{"needs.*.result", expr.Unknown},
		{"needs[matrix.os]", expr.Unknown},
		{"matrix[needs.x]", expr.Unknown},
		{"matrix.later", expr.Unknown},
		{"matrix.later.x", expr.Unknown},
		{"matrix.os", "ubuntu-latest"}, // the known part of a partly known context
		{"!steps.a.outcome", expr.Unknown},
		{"needs.a.result == 'success'", expr.Unknown},
		{"'success' != needs.a.result", expr.Unknown},
		{"needs.a.result < 1", expr.Unknown},
		{"startsWith(needs.a.outputs.v, 'x')", expr.Unknown},
		{"format('{0}-{1}', matrix.os, needs.a.outputs.v)", expr.Unknown},
		{"join(partial)", expr.Unknown},
		{"toJSON(partial)", expr.Unknown},
		{"toJSON(matrix)", expr.Unknown}, // holds Unknown deep down
		{"fromJSON(needs.a.outputs.json)", expr.Unknown},
		{"fromJSON(needs.a.outputs.json).x", expr.Unknown},
		{"contains(partial, 'A')", true}, // a known element matches
		{"contains(partial, 'b')", expr.Unknown},
		{"contains(needs.*.result, 'failure')", expr.Unknown},
		{"case(needs.a.x == 1, 'a', 'b')", expr.Unknown},
		{"case(true, needs.a.x, 'b')", expr.Unknown},
		{"case(true, 'a', needs.a.x, 'b', 'c')", "a"},
		{"partial[0]", "a"},
		{"partial.*", []any{"a", expr.Unknown}}, // as the context holds it
		{"partial.*.x", expr.Unknown},

		// Short circuits decide despite Unknown.
		{"false && needs.a.result == 'success'", false},
		{"'' && needs.a.result", ""},
		{"true || needs.a.result", true},
		{"'x' || needs.a.result", "x"},
		{"github.event_name == 'pull_request' && needs.a.result", false},
		{"needs.a.result && false", expr.Unknown},
		{"needs.a.result || true", expr.Unknown},
		{"needs.a.result && nosuch()", expr.Unknown}, // not reached at run time either, maybe
		{"true && needs.a.result", expr.Unknown},
		{"always()", true},
		{"always() || needs.a.result", true},
		{"success()", expr.Unknown},
		{"failure() || cancelled()", expr.Unknown},
		{"!cancelled()", expr.Unknown},
		{"hashFiles('**/go.sum')", expr.Unknown},
		{"format('key-{0}', hashFiles('**/go.sum'))", expr.Unknown},
	}
	for _, tt := range tests {
		got, err := evalGitHub(t, tt.src, env)
		require.NoError(t, err, tt.src)
		require.Equal(t, tt.want, got, tt.src)
	}
}

func TestEvalGitHubStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status                              expr.Status
		success, failure, cancelled, always bool
	}{
		{expr.Status{}, true, false, false, true},
		{expr.Status{Failed: true}, false, true, false, true},
		{expr.Status{Cancelled: true}, false, false, true, true},
		{expr.Status{Failed: true, Cancelled: true}, false, true, true, true},
	}
	for _, tt := range tests {
		env := &expr.GitHubEnv{Status: &tt.status}
		for fn, want := range map[string]bool{"success()": tt.success, "failure()": tt.failure, "cancelled()": tt.cancelled, "always()": tt.always, "SUCCESS()": tt.success} {
			got, err := evalGitHub(t, fn, env)
			require.NoError(t, err)
			require.Equal(t, want, got, "%s with %+v", fn, tt.status)
		}
	}
}

func TestEvalGitHubHashFiles(t *testing.T) {
	t.Parallel()
	var got []string
	env := &expr.GitHubEnv{HashFiles: func(patterns []string) (string, error) {
		got = patterns
		return "abc123", nil
	}}
	v, err := evalGitHub(t, "format('go-{0}', hashFiles('**/go.sum', 1, null))", env)
	require.NoError(t, err)
	require.Equal(t, "go-abc123", v)
	require.Equal(t, []string{"**/go.sum", "1", ""}, got)

	boom := errors.New("no workspace")
	env.HashFiles = func([]string) (string, error) { return "", boom }
	_, err = evalGitHub(t, "true && hashFiles('x')", env)
	ee := evalError(t, err)
	require.ErrorIs(t, err, boom)
	require.Equal(t, 8, ee.Offset)
	require.Contains(t, ee.Msg, "hashFiles: no workspace")
}

func TestEvalGitHubErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src string
		off int
		msg string
	}{
		{"matrx.os", 0, `unknown context "matrx"; did you mean "matrix"? (available: arr, github, inputs, job, matrix, needs, obj, steps, vars)`},
		{"true && Githb.ref", 8, `unknown context "Githb"; did you mean "github"?`},
		{"zzz", 0, `unknown context "zzz" (available:`},
		{"startWith(github.ref, 'x')", 0, `unknown function "startWith"; did you mean "startsWith"?`},
		{"frobnicate()", 0, `unknown function "frobnicate" (functions: always, cancelled, case, contains, endsWith, failure, format, fromJSON, hashFiles, join, startsWith, success, toJSON)`},
		{"1 == contains('a')", 5, "contains takes 2 arguments, not 1"},
		{"format()", 0, "format takes at least 1 argument, not 0"},
		{"join(1, 2, 3)", 0, "join takes 1 or 2 arguments, not 3"},
		{"always(1)", 0, "always takes no arguments, not 1"},
		{"toJSON()", 0, "toJSON takes 1 argument, not 0"},
		{"case(true, 1)", 0, "case takes at least 3 arguments, not 2"},
		{"case(true, 1, false, 2)", 0, "case takes an odd number of arguments"},
		{"case('yes', 1, 2)", 0, "case: condition 1 is a string, not a boolean"},
		{"case(false, 1, null, 2, 3)", 0, "case: condition 2 is null, not a boolean"},
		{"format('{0}')", 0, `format: invalid format string "{0}": placeholder {0} needs 1 values after the format string, and there are 0`},
		{"format('{0}{1}', 'a')", 0, "placeholder {1} needs 2 values"},
		{"format('{0', 1)", 0, "the '{' at index 0 is neither '{{' nor the start of a placeholder like {0}"},
		{"format('{0}}', 1)", 0, "the '}' at index 3 is neither '}}' nor the end of a placeholder"},
		{"format('}{0}', 1)", 0, "the '}' at index 0"},
		{"format('{{0}', 1)", 0, "the '}' at index 3"},
		{"format('{x}', 1)", 0, "the '{' at index 0"},
		{"format('{}', 1)", 0, "the '{' at index 0"},
		{"format('{0:N2}', 1)", 0, "format specifier"},
		{"format('{256}', 1)", 0, "past the largest"},
		{"format('{0}{', 1)", 0, "the '{' at index 3"},
		{"fromJSON('')", 0, "fromJSON: the input is empty"},
		{"fromJSON('  ')", 0, "the input is empty"},
		{"fromJSON('{bad')", 0, `fromJSON: "{bad" is not valid JSON`},
		{"fromJSON('[1] x')", 0, "is not valid JSON"},
		{"fromJSON(arr)", 0, `"Array" is not valid JSON`},
		{"!fromJSON('nope')", 1, "is not valid JSON"},
		{"obj.b[fromJSON('x')]", 6, "is not valid JSON"},
		{"inputs[fromJSON('x')]", 7, "is not valid JSON"},
		{"needs.x || obj[fromJSON('x')]", 0, ""}, // Unknown on the left: not evaluated
	}
	for _, tt := range tests {
		v, err := evalGitHub(t, tt.src, testEnv())
		if tt.msg == "" {
			require.NoError(t, err, tt.src)
			require.Equal(t, expr.Unknown, v)
			continue
		}
		require.Nil(t, v)
		ee := evalError(t, err)
		require.Equal(t, tt.off, ee.Offset, "%s: %s", tt.src, ee.Msg)
		require.Contains(t, ee.Msg, tt.msg, tt.src)
	}
}

func TestEvalGitHubTextBudget(t *testing.T) {
	t.Parallel()
	// Each level multiplies the text by 16: without a budget, this would
	// build 16^5 copies of the string.
	src := "'x'"
	for range 6 {
		src = "format('" + strings.Repeat("{0}", 16) + "', " + src + ")"
	}
	_, err := evalGitHub(t, src, nil)
	require.Contains(t, evalError(t, err).Msg, "builds more than 1048576 bytes of text")

	// The budget is shared by the whole evaluation.
	big := "format('" + strings.Repeat("{0}", 200) + "', '" + strings.Repeat("y", 1000) + "')"
	_, err = evalGitHub(t, "format('{0}', "+big+")", nil)
	require.NoError(t, err)
	parts := make([]string, 8)
	for i := range parts {
		parts[i] = big
	}
	_, err = evalGitHub(t, "join(fromJSON('[]'), 'x') || "+strings.Join(parts, " && "), nil)
	require.Contains(t, evalError(t, err).Msg, "builds more than")

	env := &expr.GitHubEnv{Contexts: map[string]any{"big": []any{strings.Repeat("z", 600_000), strings.Repeat("z", 600_000)}}}
	_, err = evalGitHub(t, "toJSON(big)", env)
	require.Contains(t, evalError(t, err).Msg, "toJSON: the expression builds more than")
	_, err = evalGitHub(t, "join(big)", env)
	require.Contains(t, evalError(t, err).Msg, "join: the expression builds more than")
}

func TestEvalGitHubForeignTree(t *testing.T) {
	t.Parallel()
	_, err := expr.EvalGitHub(nil, nil)
	require.Contains(t, evalError(t, err).Msg, "nil expression")
	_, err = expr.EvalGitHub(&expr.Binary{Op: expr.OpMatch, Offset: 3, X: lit(1.0), Y: lit(2.0)}, nil)
	require.Equal(t, "at offset 3: operator =~ is not GitHub's", err.Error())
	_, err = expr.EvalGitHub(prop(&expr.GitLabVar{Name: "A"}, "b"), nil)
	require.Contains(t, evalError(t, err).Msg, "*expr.GitLabVar is not a GitHub expression node")

	long := strings.Repeat("x", 100) + "{"
	_, err = evalGitHub(t, "format('"+long+"')", nil)
	require.Contains(t, evalError(t, err).Msg, `invalid format string "`+strings.Repeat("x", 60)+`"…: the '{' at index 100`)
}

func TestEvalGitHubNilEnv(t *testing.T) {
	t.Parallel()
	v, err := evalGitHub(t, "format('{0}', 1 == 1)", nil)
	require.NoError(t, err)
	require.Equal(t, "true", v)
	_, err = evalGitHub(t, "github", nil)
	require.Contains(t, evalError(t, err).Msg, `unknown context "github" (no contexts are available here)`)
}

func TestEvalGitHubUnsupportedValue(t *testing.T) {
	t.Parallel()
	env := &expr.GitHubEnv{Contexts: map[string]any{"env": map[string]any{"list": []string{"a"}}, "vars": map[string]string{}}}
	_, err := evalGitHub(t, "toJSON(env)", env)
	require.Contains(t, evalError(t, err).Msg, "a value of Go type []string is not an expression value")
	_, err = evalGitHub(t, "true && vars.x", env)
	ee := evalError(t, err)
	require.Equal(t, 8, ee.Offset)
	require.Equal(t, `context "vars" holds a Go map[string]string; contexts hold nil, bool, float64, string, []any or map[string]any`, ee.Msg)
}

func TestTruthyToStringCondition(t *testing.T) {
	t.Parallel()
	tests := []struct {
		v      any
		truthy bool
		str    string
	}{
		{nil, false, ""},
		{false, false, "false"},
		{true, true, "true"},
		{0.0, false, "0"},
		{math.Copysign(0, -1), false, "0"},
		{math.NaN(), false, "NaN"},
		{math.Inf(-1), true, "-Infinity"},
		{-2.5, true, "-2.5"},
		{7, true, "7"},
		{uint8(3), true, "3"},
		{float32(0.5), true, "0.5"},
		{1e15, true, "1E+15"},
		{123456789.125, true, "123456789.125"},
		{"", false, ""},
		{"0", true, "0"},
		{"false", true, "false"},
		{[]any{}, true, "Array"},
		{map[string]any{}, true, "Object"},
		{expr.Unknown, false, ""},
	}
	for _, tt := range tests {
		require.Equal(t, tt.truthy, expr.Truthy(tt.v), "Truthy(%#v)", tt.v)
		require.Equal(t, tt.str, expr.ToString(tt.v), "ToString(%#v)", tt.v)
		want := expr.False
		if tt.truthy {
			want = expr.True
		}
		if tt.v == expr.Unknown {
			want = expr.Unknown
		}
		require.Equal(t, want, expr.Condition(tt.v))
	}
	require.Equal(t, "unknown", expr.Unknown.String())
	require.Equal(t, "true", expr.True.String())
	require.Equal(t, "false", expr.False.String())
}
