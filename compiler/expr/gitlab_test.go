package expr_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/compiler/expr"
)

func glVar(name string) expr.Node    { return &expr.GitLabVar{Name: name} }
func glStr(v string) expr.Node       { return &expr.GitLabString{Value: v} }
func glRe(p, flags string) expr.Node { return &expr.GitLabRegexp{Pattern: p, Flags: flags} }
func glBin(op expr.Op, x, y expr.Node) expr.Node {
	return &expr.GitLabBinary{Op: op, X: x, Y: y}
}

// gitlabTrees are GitLab sources and their trees. They also seed
// FuzzParseGitLab.
var gitlabTrees = []struct {
	src  string
	want expr.Node
}{
	{"$CI_COMMIT_TAG", glVar("CI_COMMIT_TAG")},
	{"${CI_COMMIT_TAG}", &expr.GitLabVar{Name: "CI_COMMIT_TAG", Braced: true}},
	{`$CI_PIPELINE_SOURCE == "merge_request_event"`, glBin(expr.OpEq, glVar("CI_PIPELINE_SOURCE"), glStr("merge_request_event"))},
	{`$A != 'single'`, glBin(expr.OpNe, glVar("A"), glStr("single"))},
	{`"x" == $A`, glBin(expr.OpEq, glStr("x"), glVar("A"))},
	{`$A == $B`, glBin(expr.OpEq, glVar("A"), glVar("B"))},
	{`$A == null`, glBin(expr.OpEq, glVar("A"), &expr.GitLabNull{})},
	{`$A != ""`, glBin(expr.OpNe, glVar("A"), glStr(""))},
	{`'it"s' == "it's"`, glBin(expr.OpEq, glStr(`it"s`), glStr("it's"))},
	{`$BRANCH =~ /^release-.*$/`, glBin(expr.OpMatch, glVar("BRANCH"), glRe("^release-.*$", ""))},
	{`$BRANCH !~ /^Feature\//i`, glBin(expr.OpNotMatch, glVar("BRANCH"), glRe(`^Feature\/`, "i"))},
	{`$M =~ /a.b/msU`, glBin(expr.OpMatch, glVar("M"), glRe("a.b", "msU"))},
	{`$A =~ $PATTERN`, glBin(expr.OpMatch, glVar("A"), glVar("PATTERN"))},
	{`$A =~ "23"`, glBin(expr.OpMatch, glVar("A"), glStr("23"))},
	{`$A && $B || $C`, glBin(expr.OpOr, glBin(expr.OpAnd, glVar("A"), glVar("B")), glVar("C"))},
	{`$A || $B && $C`, glBin(expr.OpOr, glVar("A"), glBin(expr.OpAnd, glVar("B"), glVar("C")))},
	{`($A || $B) && $C`, glBin(expr.OpAnd, glBin(expr.OpOr, glVar("A"), glVar("B")), glVar("C"))},
	{`$A && ($B && $C)`, glBin(expr.OpAnd, glVar("A"), glBin(expr.OpAnd, glVar("B"), glVar("C")))},
	{`(($A))`, glVar("A")},
	{`$V1 =~ /^content.*/ || $V2 =~ /thing$/ && $V3`, glBin(expr.OpOr,
		glBin(expr.OpMatch, glVar("V1"), glRe("^content.*", "")),
		glBin(expr.OpAnd, glBin(expr.OpMatch, glVar("V2"), glRe("thing$", "")), glVar("V3")))},
	{`$CI_COMMIT_BRANCH == "my-branch" || (($V1 == "thing" || $V2 == "thing") && $V3)`, glBin(expr.OpOr,
		glBin(expr.OpEq, glVar("CI_COMMIT_BRANCH"), glStr("my-branch")),
		glBin(expr.OpAnd, glBin(expr.OpOr, glBin(expr.OpEq, glVar("V1"), glStr("thing")), glBin(expr.OpEq, glVar("V2"), glStr("thing"))), glVar("V3")))},
	{"$A==\"x\"&&$B", glBin(expr.OpAnd, glBin(expr.OpEq, glVar("A"), glStr("x")), glVar("B"))},
	{`"literal"`, glStr("literal")},
	{`null`, &expr.GitLabNull{}},
	{`$1 == $_x9`, glBin(expr.OpEq, glVar("1"), glVar("_x9"))},
}

func TestParseGitLab(t *testing.T) {
	t.Parallel()
	for _, tt := range gitlabTrees {
		got, err := expr.ParseGitLab(tt.src)
		require.NoError(t, err, tt.src)
		requireSameTree(t, tt.want, got)
		again, err := expr.ParseGitLab(got.String())
		require.NoError(t, err, got.String())
		requireSameTree(t, tt.want, again)
	}
}

func TestParseGitLabOffsets(t *testing.T) {
	t.Parallel()
	//     0         1         2
	//     0123456789012345678901234
	src := `$A == "x" && ${B} =~ /ab/i`
	n, err := expr.ParseGitLab(src)
	require.NoError(t, err)
	and := n.(*expr.GitLabBinary)
	require.Equal(t, 10, and.Offset)
	require.Equal(t, 0, and.Pos())
	eq := and.X.(*expr.GitLabBinary)
	require.Equal(t, 3, eq.Offset)
	require.Equal(t, 6, eq.Y.Pos())
	m := and.Y.(*expr.GitLabBinary)
	require.Equal(t, 18, m.Offset)
	require.Equal(t, 13, m.Pos())
	require.Equal(t, 21, m.Y.Pos())
	require.Equal(t, `$A == "x" && ${B} =~ /ab/i`, n.String())
}

// gitlabSyntaxErrors are GitLab sources that do not parse. They also seed
// FuzzParseGitLab.
var gitlabSyntaxErrors = []struct {
	src string
	off int
	msg string
}{
	{"", 0, "empty expression"},
	{"$", 1, `expected a variable name after "$"`},
	{"${A", 3, "expected '}' to close the ${ at offset 0"},
	{"${}", 2, `expected a variable name after "${"`},
	{`$A == "x`, 6, "unterminated string"},
	{"$A == 'x\ny'", 6, "unterminated string"},
	{"$A =~ /abc", 6, "unterminated regular expression"},
	{"$A =~ /a/", 6, "fewer than two characters, like /a/"},
	{"$A =~ /./", 6, "fewer than two characters"},
	{"$A =~ /ab/x", 10, `unknown regular expression flag 'x'`},
	{"$A =~ /(?=x)y/", 6, "not supported: GitLab uses RE2 syntax, which has no lookarounds or backreferences"},
	{`$A =~ /(a)\1/`, 6, "not supported"},
	{"$A =~ /a(b/", 6, "invalid regular expression /a(b/"},
	{"/ab/ =~ $A", 0, "a regular expression can only be the right operand of =~ or !~"},
	{"$A == /ab/", 6, "a regular expression can only be the right operand"},
	{"$A ==", 5, "unexpected end of input: expected a variable, a string or null"},
	{"== $A", 0, "unexpected '==': expected a variable"},
	{"$A == $B == $C", 9, "comparisons do not chain"},
	{"($A) == $B", 5, "a parenthesised condition cannot be compared"},
	{"($A", 3, "expected ')' to close the '(' at offset 0"},
	{"($A $B)", 4, "unexpected variable $B: expected ')'"},
	{"$A)", 2, "unexpected ')' after a complete expression"},
	{"$A $B", 3, "unexpected variable $B after a complete expression"},
	{"!$A", 0, "unexpected '!'"},
	{"$A = 'x'", 3, "the operators are ==, !=, =~, !~, && and ||"},
	{"$A & $B", 3, "the operators are"},
	{"true", 0, `unexpected word "true"`},
	{"$A == nullx", 6, `unexpected word "nullx"`},
	{"$A == 1", 6, `unexpected word "1"`},
	{"$A -eq 1", 3, "unexpected character '-'"},
	{"$A == \xfe", 6, "unexpected byte 0xfe"},
}

func TestParseGitLabErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range gitlabSyntaxErrors {
		n, err := expr.ParseGitLab(tt.src)
		require.Nil(t, n, tt.src)
		se := syntaxError(t, err)
		require.Equal(t, tt.off, se.Offset, "%q: %s", tt.src, se.Msg)
		require.Contains(t, se.Msg, tt.msg, tt.src)
	}
}

func TestParseGitLabTokenLimit(t *testing.T) {
	t.Parallel()
	src := "$A"
	for range 49 {
		src += " || $A" // two tokens each
	}
	_, err := expr.ParseGitLab(src) // 99 tokens
	require.NoError(t, err)
	_, err = expr.ParseGitLab(src + " ||")
	se := syntaxError(t, err)
	require.Equal(t, len(src)+1, se.Offset)
	require.Contains(t, se.Msg, "more than 99 tokens")
}

// vars is a variable lookup over a map; absent names are undefined.
func vars(m map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

// gitlabValues are GitLab conditions and their values with these
// variables, as GitLab documents them. They also seed FuzzParseGitLab.
var gitlabVars = map[string]string{
	"SOURCE":   "merge_request_event",
	"BRANCH":   "release-1.2",
	"DEFAULT":  "main",
	"MAIN":     "main",
	"EMPTY":    "",
	"PATTERN":  "/^release-/",
	"IPATTERN": "/^RELEASE-/i",
	"PLAIN":    "1234",
	"BAD":      "/a(b/",
	"MULTI":    "first\nsecond",
}

var gitlabValues = []struct {
	src  string
	want expr.Tri
}{
	{`$SOURCE == "merge_request_event"`, expr.True},
	{`$SOURCE == 'merge_request_event'`, expr.True},
	{`$SOURCE == "MERGE_REQUEST_EVENT"`, expr.False}, // case-sensitive
	{`$SOURCE != "push"`, expr.True},
	{`"main" == $DEFAULT`, expr.True},
	{`$DEFAULT == $MAIN`, expr.True},
	{`$DEFAULT != $BRANCH`, expr.True},
	// Presence.
	{`$BRANCH`, expr.True},
	{`${BRANCH}`, expr.True},
	{`$EMPTY`, expr.False},
	{`$UNDEFINED`, expr.False},
	{`"text"`, expr.True},
	{`""`, expr.False},
	{`null`, expr.False},
	// null and the empty string.
	{`$UNDEFINED == null`, expr.True},
	{`$UNDEFINED != null`, expr.False},
	{`$EMPTY == null`, expr.False},
	{`$EMPTY == ""`, expr.True},
	{`$UNDEFINED == ""`, expr.False},
	{`$UNDEFINED != ""`, expr.True},
	{`$UNDEFINED == $ALSO_UNDEFINED`, expr.True},
	{`$UNDEFINED == $EMPTY`, expr.False},
	{`null == null`, expr.True},
	{`$BRANCH == null`, expr.False},
	// Regular expressions.
	{`$BRANCH =~ /^release-.*$/`, expr.True},
	{`$BRANCH =~ /^RELEASE/`, expr.False},
	{`$BRANCH =~ /^RELEASE/i`, expr.True},
	{`$BRANCH !~ /^feature/`, expr.True},
	{`$BRANCH =~ /se-1/`, expr.True}, // anywhere in the value
	{`$BRANCH =~ /\./`, expr.True},
	{`$BRANCH =~ /^release-\d+\.\d+$/`, expr.True},
	{`$UNDEFINED =~ /^$/`, expr.True}, // undefined matches as ""
	{`$UNDEFINED =~ /.+/`, expr.False},
	{`$UNDEFINED !~ /.+/`, expr.True},
	{`$MULTI =~ /^second$/`, expr.False},
	{`$MULTI =~ /^second$/m`, expr.True},
	{`$MULTI =~ /first.second/`, expr.False},
	{`$MULTI =~ /first.second/s`, expr.True},
	{`$BRANCH =~ /^release\/1/`, expr.False},
	{`"a/b" =~ /^a\/b$/`, expr.True},
	// A variable on the right holds a regular expression.
	{`$BRANCH =~ $PATTERN`, expr.True},
	{`$DEFAULT =~ $PATTERN`, expr.False},
	{`$BRANCH =~ $IPATTERN`, expr.True},
	{`$BRANCH !~ $PATTERN`, expr.False},
	{`$BRANCH =~ $UNDEFINED`, expr.False},
	{`$BRANCH !~ $UNDEFINED`, expr.True},
	// ... or, if it is not one, text the left value must be part of.
	{`"23" =~ $PLAIN`, expr.True},
	{`"23" =~ "1234"`, expr.True},
	{`"1234" =~ "23"`, expr.False},
	{`"23" !~ "1234"`, expr.False},
	// Logic: && binds tighter than ||.
	{`$BRANCH && $DEFAULT == "main"`, expr.True},
	{`$EMPTY && $DEFAULT == "main"`, expr.False},
	{`$EMPTY || $DEFAULT == "main"`, expr.True},
	{`$UNDEFINED || $EMPTY`, expr.False},
	{`$BRANCH || $UNDEFINED && $EMPTY`, expr.True},
	{`($BRANCH || $UNDEFINED) && $EMPTY`, expr.False},
	{`$SOURCE == "push" || $BRANCH =~ /^release/ && $DEFAULT`, expr.True},
}

func TestEvalGitLab(t *testing.T) {
	t.Parallel()
	for _, tt := range gitlabValues {
		n, err := expr.ParseGitLab(tt.src)
		require.NoError(t, err, tt.src)
		got, err := expr.EvalGitLab(n, vars(gitlabVars))
		require.NoError(t, err, tt.src)
		require.Equal(t, tt.want, got, tt.src)
	}
}

func TestEvalGitLabErrors(t *testing.T) {
	t.Parallel()
	// A variable holding an invalid regular expression: false, and why.
	n, err := expr.ParseGitLab(`$BRANCH == "x" || $BRANCH =~ $BAD`)
	require.NoError(t, err)
	got, err := expr.EvalGitLab(n, vars(gitlabVars))
	require.Equal(t, expr.False, got)
	ee := evalError(t, err)
	require.Equal(t, 29, ee.Offset)
	require.Contains(t, ee.Msg, "the value of $BAD: invalid regular expression /a(b/")

	// Trees built by hand are checked as they are evaluated.
	got, err = expr.EvalGitLab(glBin(expr.OpMatch, glVar("BRANCH"), glRe("^rel", "")), vars(gitlabVars))
	require.NoError(t, err)
	require.Equal(t, expr.True, got)
	_, err = expr.EvalGitLab(glBin(expr.OpMatch, glVar("BRANCH"), glRe("(?=x)", "")), vars(gitlabVars))
	require.Contains(t, evalError(t, err).Msg, "not supported")
	_, err = expr.EvalGitLab(glBin(expr.OpLt, glVar("A"), glVar("B")), vars(nil))
	require.Contains(t, evalError(t, err).Msg, "operator < is not GitLab's")
	_, err = expr.EvalGitLab(ctx("github"), vars(nil))
	require.Contains(t, evalError(t, err).Msg, "*expr.Context is not an operand")
}

func TestEvalGitLabPartial(t *testing.T) {
	t.Parallel()
	// CI_COMMIT_TAG is known now; DEPLOY is only known at run time.
	known := func(name string) (string, bool, bool) {
		switch name {
		case "CI_COMMIT_TAG":
			return "v1.0.0", true, true
		case "DEPLOY", "PATTERN":
			return "", false, false
		}
		return "", false, true
	}
	tests := []struct {
		src  string
		want expr.Tri
	}{
		{`$CI_COMMIT_TAG`, expr.True},
		{`$DEPLOY`, expr.Unknown},
		{`$DEPLOY == "yes"`, expr.Unknown},
		{`"yes" != $DEPLOY`, expr.Unknown},
		{`$DEPLOY == null`, expr.Unknown},
		{`$DEPLOY =~ /^y/`, expr.Unknown},
		{`$CI_COMMIT_TAG =~ $PATTERN`, expr.Unknown},
		{`$DEPLOY =~ $UNDEFINED`, expr.Unknown},
		// Three-valued logic, in either order.
		{`$DEPLOY && $UNDEFINED`, expr.False},
		{`$UNDEFINED && $DEPLOY`, expr.False},
		{`$DEPLOY && $CI_COMMIT_TAG`, expr.Unknown},
		{`$DEPLOY || $CI_COMMIT_TAG`, expr.True},
		{`$CI_COMMIT_TAG || $DEPLOY`, expr.True},
		{`$DEPLOY || $UNDEFINED`, expr.Unknown},
		{`$DEPLOY || $DEPLOY`, expr.Unknown},
		{`($DEPLOY || $CI_COMMIT_TAG) && $CI_COMMIT_TAG =~ /^v1/`, expr.True},
		{`($DEPLOY || $UNDEFINED) && $CI_COMMIT_TAG =~ /^v2/`, expr.False},
	}
	for _, tt := range tests {
		n, err := expr.ParseGitLab(tt.src)
		require.NoError(t, err, tt.src)
		got, err := expr.EvalGitLabPartial(n, known)
		require.NoError(t, err, tt.src)
		require.Equal(t, tt.want, got, tt.src)
	}
}

func TestVariableRefs(t *testing.T) {
	t.Parallel()
	n, err := expr.ParseGitLab(`$B == "x" && ($A =~ /$NOT_A_VAR/ || ${B} =~ $P) || $A`)
	require.NoError(t, err)
	require.Equal(t, []string{"B", "A", "P"}, expr.VariableRefs(n))
	n, err = expr.ParseGitLab(`"just text"`)
	require.NoError(t, err)
	require.Empty(t, expr.VariableRefs(n))
}
