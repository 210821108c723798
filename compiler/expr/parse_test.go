package expr_test

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/compiler/expr"
)

// githubTrees are sources and the trees they parse to. They also seed
// FuzzParseGitHub.
var githubTrees = []struct {
	src  string
	want expr.Node
}{
	// Literals.
	{"null", lit(nil)},
	{"true", lit(true)},
	{"false", lit(false)},
	{"711", lit(711.0)},
	{"-9.2", lit(-9.2)},
	{"+1", lit(1.0)},
	{".5", lit(0.5)},
	{"-.5", lit(-0.5)},
	{"0xff", lit(255.0)},
	{"0xFF", lit(255.0)},
	{"0o17", lit(15.0)},
	{"-2.99e-2", lit(-0.0299)},
	{"1E+3", lit(1000.0)},
	{"NaN", lit(math.NaN())},
	{"Infinity", lit(math.Inf(1))},
	{"-Infinity", lit(math.Inf(-1))},
	{"'It''s open source!'", lit("It's open source!")},
	{"''", lit("")},
	{"'{{0}}'", lit("{{0}}")},
	{"'a\nb'", lit("a\nb")},
	{"'☃'", lit("☃")},

	// Names and accesses.
	{"github", ctx("github")},
	{"GitHub.Event_Name", prop(ctx("GitHub"), "Event_Name")},
	{"steps.my-step.outputs.x", prop(prop(prop(ctx("steps"), "my-step"), "outputs"), "x")},
	{"a.true.null.NaN.Infinity", prop(prop(prop(prop(ctx("a"), "true"), "null"), "NaN"), "Infinity")},
	{"matrix['os']", idx(ctx("matrix"), lit("os"))},
	{"a[0]", idx(ctx("a"), lit(0.0))},
	{"a[*]", idx(ctx("a"), nil)},
	{"a.*", prop(ctx("a"), "*")},
	{"a.*.b", prop(prop(ctx("a"), "*"), "b")},
	{"a[*][1]", idx(idx(ctx("a"), nil), lit(1.0))},
	{"a[b.c]", idx(ctx("a"), prop(ctx("b"), "c"))},
	{"a . b", prop(ctx("a"), "b")},
	{"(a).b", prop(ctx("a"), "b")},
	{"('x').b", prop(lit("x"), "b")},
	{"fromJSON(x).a[0]", idx(prop(call("fromJSON", ctx("x")), "a"), lit(0.0))},

	// Calls.
	{"always()", call("always")},
	{"startsWith(github.ref, 'refs/tags/')", call("startsWith", prop(ctx("github"), "ref"), lit("refs/tags/"))},
	{"format('{0}', a, (b))", call("format", lit("{0}"), ctx("a"), ctx("b"))},
	{"nosuch(1)", call("nosuch", lit(1.0))},

	// Operators and precedence: ! > comparisons > == != > && > ||.
	{"!a", not(ctx("a"))},
	{"!!a", not(not(ctx("a")))},
	{"!a.b", not(prop(ctx("a"), "b"))},
	{"(!a).b", prop(not(ctx("a")), "b")},
	{"!2 < 3", bin(expr.OpLt, not(lit(2.0)), lit(3.0))},
	{"!(2 < 3)", not(bin(expr.OpLt, lit(2.0), lit(3.0)))},
	{"3 < 2 < 1", bin(expr.OpLt, bin(expr.OpLt, lit(3.0), lit(2.0)), lit(1.0))},
	{"3 < (2 < 1)", bin(expr.OpLt, lit(3.0), bin(expr.OpLt, lit(2.0), lit(1.0)))},
	{"a <= b >= c > d", bin(expr.OpGt, bin(expr.OpGe, bin(expr.OpLe, ctx("a"), ctx("b")), ctx("c")), ctx("d"))},
	{"2 <= 3 == true", bin(expr.OpEq, bin(expr.OpLe, lit(2.0), lit(3.0)), lit(true))},
	{"a == b != c", bin(expr.OpNe, bin(expr.OpEq, ctx("a"), ctx("b")), ctx("c"))},
	{"a == b && c != d", bin(expr.OpAnd, bin(expr.OpEq, ctx("a"), ctx("b")), bin(expr.OpNe, ctx("c"), ctx("d")))},
	{"a || b && c", bin(expr.OpOr, ctx("a"), bin(expr.OpAnd, ctx("b"), ctx("c")))},
	{"a && b || c", bin(expr.OpOr, bin(expr.OpAnd, ctx("a"), ctx("b")), ctx("c"))},
	{"(a || b) && c", bin(expr.OpAnd, bin(expr.OpOr, ctx("a"), ctx("b")), ctx("c"))},
	{"a && b && c", bin(expr.OpAnd, bin(expr.OpAnd, ctx("a"), ctx("b")), ctx("c"))},
	{"a && (b && c)", bin(expr.OpAnd, ctx("a"), bin(expr.OpAnd, ctx("b"), ctx("c")))},
	{"github.event_name=='push'&&startsWith(github.ref,'refs/tags/')", bin(expr.OpAnd,
		bin(expr.OpEq, prop(ctx("github"), "event_name"), lit("push")),
		call("startsWith", prop(ctx("github"), "ref"), lit("refs/tags/")))},
	{"a<-1", bin(expr.OpLt, ctx("a"), lit(-1.0))},
	{" \t\n a \r\n", ctx("a")},
}

func TestParseGitHub(t *testing.T) {
	t.Parallel()
	for _, tt := range githubTrees {
		t.Run(tt.src, func(t *testing.T) {
			t.Parallel()
			got := parseGitHub(t, tt.src)
			requireSameTree(t, tt.want, got)
			// The printed form parses back to the same tree.
			requireSameTree(t, tt.want, parseGitHub(t, got.String()))
		})
	}
}

func TestParseGitHubOffsets(t *testing.T) {
	t.Parallel()
	//          0         1         2         3
	//          0123456789012345678901234567890123456
	src := "!a.b == x['k'] || f(1, 'two')"
	n := parseGitHub(t, src)
	or := n.(*expr.Binary)
	require.Equal(t, expr.OpOr, or.Op)
	require.Equal(t, 15, or.Offset)
	require.Equal(t, 0, or.Pos())
	eq := or.X.(*expr.Binary)
	require.Equal(t, 5, eq.Offset)
	require.Equal(t, 0, eq.Pos())
	neg := eq.X.(*expr.Not)
	require.Equal(t, 0, neg.Offset)
	p := neg.X.(*expr.Property)
	require.Equal(t, 3, p.Offset)
	require.Equal(t, 1, p.Pos())
	require.Equal(t, 1, p.X.(*expr.Context).Offset)
	ix := eq.Y.(*expr.Index)
	require.Equal(t, 9, ix.Offset)
	require.Equal(t, 8, ix.Pos())
	require.Equal(t, 10, ix.Index.(*expr.Literal).Offset)
	c := or.Y.(*expr.Call)
	require.Equal(t, 18, c.Offset)
	require.Equal(t, 20, c.Args[0].Pos())
	require.Equal(t, 23, c.Args[1].Pos())
}

// githubSyntaxErrors are sources that do not parse, where, and a part of
// the message. They also seed FuzzParseGitHub.
var githubSyntaxErrors = []struct {
	src string
	off int
	msg string
}{
	{"", 0, "empty expression"},
	{"   ", 3, "empty expression"},
	{"(a", 2, "unexpected end of input: expected ')' to close the '(' at offset 0"},
	{"f(a", 3, "expected ',' or ')' to close the arguments of f( at offset 1"},
	{"f(a,)", 4, "unexpected ')': expected an expression"},
	{"f(a b)", 4, `unexpected "b": expected ',' or ')'`},
	{"a[0", 3, "expected ']' to close the '[' at offset 1"},
	{"a && ", 5, "unexpected end of input: expected an expression after '&&'"},
	{"1 <", 3, "expected an expression after '<'"},
	{"!", 1, "expected an expression after '!'"},
	{"1 < )", 4, "unexpected ')': expected an expression"},
	{"> 1", 0, "unexpected '>'"},
	{"1 2", 2, "unexpected number 2 after a complete expression"},
	{"(1)2", 3, "unexpected number 2 after a complete expression"},
	{"a.b 'x'", 4, "unexpected string 'x' after a complete expression"},
	{"github.()", 7, "unexpected '(' after '.': expected a property name or '*'"},
	{"a.", 2, "unexpected end of input after '.'"},
	{"foo.1", 4, "expected a property name"},
	{"'abc'[0]", 5, "a literal has no properties or elements"},
	{"true.x", 4, "a literal has no properties or elements"},
	{"1 = 2", 2, "compare with '=='"},
	{"a & b", 2, "'&&'"},
	{"a | b", 2, "'||'"},
	{`"push"`, 0, "single quotes"},
	{"'foo", 0, "unterminated string"},
	{"'it''s", 0, "unterminated string"},
	{"b@r", 1, "unexpected character '@'"},
	{"foo.b@r", 5, "unexpected character '@'"},
	{"😊 Emoji", 0, "unexpected character '😊'"},
	{"\xff", 0, "unexpected byte 0xff"},
	{"$VAR", 0, "unexpected character '$'"},
	{"0x01p2", 0, `invalid number "0x01p2"`},
	{"-0xFF", 0, `invalid number "-0xFF"`},
	{"0xFZ", 0, `invalid number "0xFZ"`},
	{"1.2.3", 0, `invalid number "1.2.3"`},
	{"-Inf", 0, `invalid number "-Inf"`},
	{"..github/workflow.md", 0, "invalid number"},
	{"github/workflow", 6, "unexpected character '/'"},
	{"TRUE.x", 0, ""}, // a context named TRUE: parses; see below
}

func TestParseGitHubErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range githubSyntaxErrors {
		if tt.msg == "" {
			continue
		}
		t.Run(tt.src, func(t *testing.T) {
			t.Parallel()
			n, err := expr.ParseGitHub(tt.src)
			require.Nil(t, n)
			se := syntaxError(t, err)
			require.Equal(t, tt.off, se.Offset, "offset of %q", se.Msg)
			require.Contains(t, se.Msg, tt.msg)
			require.Contains(t, se.Error(), tt.msg)
		})
	}
	// Keywords are case-sensitive: TRUE is a name.
	requireSameTree(t, prop(ctx("TRUE"), "x"), parseGitHub(t, "TRUE.x"))
}

func TestParseGitHubLimits(t *testing.T) {
	t.Parallel()
	ok := func(src string) {
		t.Helper()
		_, err := expr.ParseGitHub(src)
		require.NoError(t, err, "%.60s", src)
	}
	tooDeep := func(src string) {
		t.Helper()
		_, err := expr.ParseGitHub(src)
		require.Contains(t, syntaxError(t, err).Msg, "nests more than 50 levels", "%.60s", src)
	}
	// GitHub's depth: each '!', access, argument list and parenthesis is a
	// level, and the whole expression one.
	ok(strings.Repeat("!", 49) + "false")
	tooDeep(strings.Repeat("!", 50) + "false")
	var props strings.Builder
	props.WriteString("foo")
	for i := 1; i <= 49; i++ {
		props.WriteString("._" + strconv.Itoa(i))
	}
	ok(props.String())
	tooDeep(props.String() + "._50")
	ok("foo" + strings.Repeat("[*]", 49))
	tooDeep("foo" + strings.Repeat("[*]", 50))
	var idxs strings.Builder
	idxs.WriteString("foo")
	for i := 1; i <= 49; i++ {
		idxs.WriteString("[" + strconv.Itoa(i) + "]")
	}
	ok(idxs.String())
	tooDeep(strings.Repeat("(", 50) + "1" + strings.Repeat(")", 50))
	ok(strings.Repeat("(", 49) + "1" + strings.Repeat(")", 49))
	tooDeep(strings.Repeat("f(", 50) + "1" + strings.Repeat(")", 50))
	// Long chains of one operator are one level.
	chain := make([]string, 60)
	for i := range chain {
		chain[i] = strconv.Itoa(i + 1)
	}
	ok(strings.Join(chain, " && "))
	ok(strings.Join(chain, " == "))
	// Deep nesting fails fast instead of exhausting the stack.
	tooDeep(strings.Repeat("(", 20_000))

	_, err := expr.ParseGitHub("'" + strings.Repeat("x", expr.MaxGitHubLength) + "'")
	se := syntaxError(t, err)
	require.Equal(t, 0, se.Offset)
	require.Contains(t, se.Msg, "longer than the 21000")
	ok("'" + strings.Repeat("x", expr.MaxGitHubLength-2) + "'")
}

func TestPrintGitHub(t *testing.T) {
	t.Parallel()
	tests := []struct {
		n    expr.Node
		want string
	}{
		{bin(expr.OpAnd, bin(expr.OpOr, ctx("a"), ctx("b")), ctx("c")), "(a || b) && c"},
		{bin(expr.OpOr, ctx("a"), bin(expr.OpAnd, ctx("b"), ctx("c"))), "a || b && c"},
		{bin(expr.OpAnd, ctx("a"), bin(expr.OpAnd, ctx("b"), ctx("c"))), "a && (b && c)"},
		{bin(expr.OpAnd, bin(expr.OpAnd, ctx("a"), ctx("b")), ctx("c")), "a && b && c"},
		{bin(expr.OpEq, ctx("a"), bin(expr.OpLt, ctx("b"), ctx("c"))), "a == b < c"},
		{bin(expr.OpLt, ctx("a"), bin(expr.OpEq, ctx("b"), ctx("c"))), "a < (b == c)"},
		{not(bin(expr.OpEq, ctx("a"), ctx("b"))), "!(a == b)"},
		{not(not(prop(ctx("a"), "b"))), "!!a.b"},
		{prop(not(ctx("a")), "b"), "(!a).b"},
		{prop(lit(1.5), "b"), "(1.5).b"},
		{idx(lit("s"), lit(0.0)), "('s')[0]"},
		{idx(prop(ctx("a"), "*"), nil), "a.*[*]"},
		{call("format", lit("it's {0}"), lit(nil), lit(true)), "format('it''s {0}', null, true)"},
		{lit(math.Inf(-1)), "-Infinity"},
		{lit(math.NaN()), "NaN"},
		{lit(1e21), "1e+21"},
		{lit(-0.0), "0"},
		{lit(math.Copysign(0, -1)), "-0"},
		{lit(0.1), "0.1"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, tt.n.String())
		requireSameTree(t, tt.n, parseGitHub(t, tt.want))
	}
}
