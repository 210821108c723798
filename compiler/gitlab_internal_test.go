package compiler

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/compiler/expr"
)

func TestParseGitLabDuration(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{
		"3600":              time.Hour,
		"1h 30m":            90 * time.Minute,
		"1h30m":             90 * time.Minute,
		"3 hours":           3 * time.Hour,
		"10 minutes":        10 * time.Minute,
		"1 day and 2 hours": 26 * time.Hour,
		"1 week":            7 * 24 * time.Hour,
		"1.5 hours":         90 * time.Minute,
		"2 days, 4 hrs":     52 * time.Hour,
		"1 month":           30 * 24 * time.Hour,
		"1:30":              90 * time.Second,
		"1:30:00":           90 * time.Minute,
		"90 SECONDS":        90 * time.Second,
	} {
		got, ok := parseGitLabDuration(in)
		require.True(t, ok, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "forever", "1 fortnight", "h", "1h x", "99999999999999999 years", "1::2", "and 1h"} {
		_, ok := parseGitLabDuration(in)
		require.False(t, ok, in)
	}
}

func TestGlobMatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pattern, name string
		want          bool
	}{
		{"*.md", "README.md", true},
		{"*.md", "docs/a.md", false},
		{"docs/**/*", "docs/a/b/c.md", true},
		{"docs/**/*", "docs/a.md", true},
		{"**/*.go", "main.go", true},
		{"**/*.go", "cmd/x/main.go", true},
		{"src/**/*.c", "src/a.c", true},
		{"src/{a,b}.c", "src/b.c", true},
		{"src/{a,b}.c", "src/c.c", false},
		{"Dockerfile", "Dockerfile", true},
		{".github/*", ".github/x.yml", true},
		{"*", ".hidden", true},
		{"a/[bc]/d", "a/c/d", true},
		{"[", "[", false},
	} {
		require.Equal(t, tc.want, gitlabGlobMatch(tc.pattern, tc.name), "%s ~ %s", tc.pattern, tc.name)
	}
	require.Len(t, expandBraces(strings.Repeat("{a,b}", 20), maxGlobAlternatives), maxGlobAlternatives)
}

func TestServiceName(t *testing.T) {
	t.Parallel()
	require.Equal(t, "tutum__wordpress", glServiceName("tutum/wordpress:latest"))
	require.Equal(t, "registry.example.com:5000__postgres", glServiceName("registry.example.com:5000/postgres:16"))
	require.Equal(t, "docker", glServiceName("docker:19.03-dind"))
	require.Equal(t, "img", glServiceName("img@sha256:abc"))
}

// vars builds a known pipeline's variables, as an event would give them.
func vars(kv ...string) *glVars {
	v := newGLVars(&Event{Name: "push", Branch: "main", DefaultBranch: "main", Variables: map[string]string{}})
	for i := 0; i < len(kv); i += 2 {
		v.given[kv[i]] = kv[i+1]
	}
	return v
}

// cond parses a condition for the tests.
func cond(t require.TestingT, s string) *glCond {
	e, err := expr.ParseGitLab(s)
	require.NoError(t, err, s)
	return &glCond{text: s, expr: e}
}

// TestGitLabVariables checks what conditions see of a known pipeline: the
// event's variables, the predefined ones its fields give, predefined ones
// known to be unset for the kind of pipeline, unknown other predefined
// ones, and unset user variables.
func TestGitLabVariables(t *testing.T) {
	t.Parallel()
	known := vars("A", "x", "EMPTY", "", "RE", "/^ma/", "V", "v1.2.3")
	for s, want := range map[string]tri{
		`$A == "x"`:                   triTrue,
		`$EMPTY`:                      triFalse,
		`$UNSET`:                      triFalse,
		`$UNSET == null`:              triTrue,
		`$CI_COMMIT_BRANCH == "main"`: triTrue,
		`$CI_COMMIT_BRANCH == $CI_DEFAULT_BRANCH`: triTrue,
		`$CI_COMMIT_REF_NAME == "main"`:           triTrue,
		`$CI_COMMIT_TAG`:                          triFalse,
		`$CI_MERGE_REQUEST_IID`:                   triFalse,
		`$CI_PIPELINE_SOURCE == "push"`:           triTrue,
		`$CI_PROJECT_PATH == "a/b"`:               triUnknown,
		`$CI_PROJECT_PATH == "a/b" && $A == "y"`:  triFalse,
		`$CI_PROJECT_PATH == "a/b" || $A == "x"`:  triTrue,
		`$CI_PROJECT_PATH == "a/b" || $A == "y"`:  triUnknown,
		`$V =~ /^v\d+\.\d+\.\d+$/`:                triTrue,
		`$CI_COMMIT_BRANCH =~ $RE`:                triTrue,
	} {
		require.Equal(t, want, cond(t, s).eval(known), s)
	}
	file := known.with(map[string]string{"UNSET": "from the file", "A": "overridden"})
	require.Equal(t, triTrue, cond(t, `$UNSET`).eval(file), "the file's variables count")
	require.Equal(t, triTrue, cond(t, `$A == "x"`).eval(file), "the event's win")

	lint := newGLVars(nil)
	for _, s := range []string{`$A == "x"`, `$CI_COMMIT_TAG`, `$UNSET == null`} {
		require.Equal(t, triUnknown, cond(t, s).eval(lint), s)
	}
	require.Equal(t, triFalse, cond(t, `"a" == "b" && $A`).eval(lint), "known without variables")

	mr := newGLVars(&Event{Name: "merge_request", Branch: "feature", BaseBranch: "main"})
	require.Equal(t, triTrue, cond(t, `$CI_PIPELINE_SOURCE == "merge_request_event" && $CI_MERGE_REQUEST_TARGET_BRANCH_NAME == "main"`).eval(mr))
	require.Equal(t, triFalse, cond(t, `$CI_COMMIT_BRANCH`).eval(mr), "no branch in merge request pipelines")
	require.Equal(t, triUnknown, cond(t, `$CI_MERGE_REQUEST_IID`).eval(mr))
	tag := newGLVars(&Event{Name: "push", Ref: "refs/tags/v1.0"})
	require.Equal(t, triTrue, cond(t, `$CI_COMMIT_TAG == "v1.0" && $CI_COMMIT_BRANCH == null`).eval(tag))
}

// TestGitLabThreeValuedSoundness checks the SAFETY properties of deciding
// with unknowns, for any values (or none) the unknown variables turn out
// to have: a condition that is true or false with unknowns is the same
// with their values; rules that leave a job out with unknowns leave it
// out with their values (a job that could run is never dropped); and a
// run-time condition left in the job decides alone whether the rules
// include it.
func TestGitLabThreeValuedSoundness(t *testing.T) {
	t.Parallel()
	// Predefined names: the event does not tell them, so they are unknown
	// unless set or known to be unset.
	names := []string{"CI_A", "CI_B", "CI_C"}
	values := []string{"", "x", "y", "/x/", "main"}
	g := &glFront{checker: newChecker("t")}
	rapid.Check(t, func(t *rapid.T) {
		var rules []*glRule
		for range rapid.IntRange(1, 3).Draw(t, "rules") {
			r := &glRule{cond: cond(t, genExpr(t, names, values, 3))}
			if rapid.Bool().Draw(t, "never") {
				r.when = cikit.WhenNever
			}
			rules = append(rules, r)
		}
		partial, full := vars(), vars()
		for _, n := range names {
			state := rapid.IntRange(0, 2).Draw(t, "state "+n) // unknown, unset, set
			val := rapid.SampledFrom(values).Draw(t, "value "+n)
			switch state {
			case 0:
				// Any completion of the unknown.
				state = rapid.IntRange(1, 2).Draw(t, "completion "+n)
			case 1:
				partial.null[n] = true
			default:
				partial.given[n] = val
			}
			if state == 1 {
				full.null[n] = true
			} else {
				full.given[n] = val
			}
		}
		for _, r := range rules {
			if got := r.cond.eval(partial); got != triUnknown && got != r.cond.eval(full) {
				t.Fatalf("%q: %v with unknowns, %v with them known", r.cond.text, got, r.cond.eval(full))
			}
		}
		got, want := g.decideRules(rules, partial), g.decideRules(rules, full)
		if !got.in && want.in {
			t.Fatalf("rules exclude the job with unknowns, but include it when they are known")
		}
		if got.cond != nil {
			c := &glCond{text: got.cond.Expr, expr: got.rule.cond.expr}
			if (c.eval(full) == triTrue) != want.in {
				t.Fatalf("the run-time condition %q does not decide alone: it is %v, the rules say in=%v", c.text, c.eval(full), want.in)
			}
		}
	})
}

func genExpr(t *rapid.T, names, values []string, depth int) string {
	operand := func() string {
		switch rapid.IntRange(0, 2).Draw(t, "operand") {
		case 0:
			return "$" + rapid.SampledFrom(names).Draw(t, "name")
		case 1:
			return `"` + rapid.SampledFrom(values).Draw(t, "string") + `"`
		}
		return "null"
	}
	if depth == 0 || rapid.Bool().Draw(t, "leaf") {
		switch rapid.IntRange(0, 2).Draw(t, "kind") {
		case 0:
			return "$" + rapid.SampledFrom(names).Draw(t, "name")
		case 1:
			return operand() + " " + rapid.SampledFrom([]string{"==", "!="}).Draw(t, "cmp") + " " + operand()
		}
		return "$" + rapid.SampledFrom(names).Draw(t, "name") + " " + rapid.SampledFrom([]string{"=~", "!~"}).Draw(t, "match") + " " +
			rapid.SampledFrom([]string{"/xx|y/", "/^ma/", "$CI_A"}).Draw(t, "pattern")
	}
	op := rapid.SampledFrom([]string{"&&", "||"}).Draw(t, "logic")
	return "(" + genExpr(t, names, values, depth-1) + ") " + op + " (" + genExpr(t, names, values, depth-1) + ")"
}

func TestRubyRegexp(t *testing.T) {
	t.Parallel()
	re, err := rubyRegexp(`\Av\d+\Z`, "")
	require.NoError(t, err)
	require.True(t, re.MatchString("v12"))
	re, err = rubyRegexp(`^\h+$`, "i")
	require.NoError(t, err)
	require.True(t, re.MatchString("DEADbeef"))
	re, ok := refRegexp(`/^docs\/.*/`)
	require.True(t, ok)
	require.True(t, re.MatchString("docs/x"))
	_, ok = refRegexp("main")
	require.False(t, ok)
	re, ok = refRegexp("/(/")
	require.True(t, ok)
	require.Nil(t, re)
}
