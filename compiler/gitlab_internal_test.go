package compiler

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
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
		require.Equal(t, tc.want, globMatch(tc.pattern, tc.name), "%s ~ %s", tc.pattern, tc.name)
	}
	require.Len(t, expandBraces(strings.Repeat("{a,b}", 20), maxGlobAlternatives), maxGlobAlternatives)
}

func TestRefSlugAndServiceName(t *testing.T) {
	t.Parallel()
	require.Equal(t, "feature-my-branch-1-2", refSlug("Feature/My_Branch-1.2"))
	require.Len(t, refSlug(strings.Repeat("a", 100)), 63)
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

func TestGitLabExpressions(t *testing.T) {
	t.Parallel()
	known := vars("A", "x", "EMPTY", "", "RE", "/^ma/", "V", "v1.2.3")
	for expr, want := range map[string]tri{
		`$A == "x"`:                   triTrue,
		`$A == 'x'`:                   triTrue,
		`$A != "x"`:                   triFalse,
		`$A`:                          triTrue,
		`$EMPTY`:                      triFalse,
		`$UNSET`:                      triFalse,
		`$UNSET == null`:              triTrue,
		`$A == null`:                  triFalse,
		`!$UNSET`:                     triTrue,
		`$CI_COMMIT_BRANCH == "main"`: triTrue,
		`$CI_COMMIT_BRANCH == $CI_DEFAULT_BRANCH`: triTrue,
		`$CI_COMMIT_TAG`:                         triFalse,
		`$CI_MERGE_REQUEST_IID`:                  triFalse,
		`$CI_PIPELINE_SOURCE == "push"`:          triTrue,
		`$CI_PROJECT_PATH == "a/b"`:              triUnknown,
		`$CI_PROJECT_PATH == "a/b" && $A == "y"`: triFalse,
		`$CI_PROJECT_PATH == "a/b" || $A == "x"`: triTrue,
		`$CI_PROJECT_PATH == "a/b" || $A == "y"`: triUnknown,
		`$V =~ /^v\d+\.\d+\.\d+$/`:               triTrue,
		`$V =~ /^V/i`:                            triTrue,
		`$V !~ /^v/`:                             triFalse,
		`$CI_COMMIT_BRANCH =~ $RE`:               triTrue,
		`$A =~ $UNSET`:                           triFalse,
		`$A !~ $UNSET`:                           triTrue,
		`($A == "x" || $A == "y") && $V`:         triTrue,
		`$A == "x" && ($V == "no" || $EMPTY)`:    triFalse,
		// Ruby's &&: "" is truthy, so the result is the right operand.
		`$EMPTY && $A`:    triTrue,
		`true`:            triTrue,
		`false || $A`:     triTrue,
		`$[[ inputs.x ]]`: triUnknown,
	} {
		e, err := parseGitLabExpr(expr)
		require.NoError(t, err, expr)
		require.Equal(t, want, e.eval(known), expr)
	}
	lint := newGLVars(nil)
	for _, expr := range []string{`$A == "x"`, `$CI_COMMIT_TAG`, `"a" == "a" && $A`} {
		e, err := parseGitLabExpr(expr)
		require.NoError(t, err)
		require.Equal(t, triUnknown, e.eval(lint), expr)
	}
	e, err := parseGitLabExpr(`"a" == "b" && $A`)
	require.NoError(t, err)
	require.Equal(t, triFalse, e.eval(lint), "known without variables")
	for _, bad := range []string{``, `$A ==`, `== "x"`, `$A = "x"`, `($A`, `$A)`, `"open`, `/(/`, `$`, `$A == "x" $B`, `$[[ input.x ]]`} {
		_, err := parseGitLabExpr(bad)
		require.Error(t, err, bad)
	}
	_, err = parseGitLabExpr(strings.Repeat("$A && ", 60) + "$A")
	require.ErrorContains(t, err, "tokens")
}

// TestGitLabThreeValuedSoundness checks the SAFETY property of the
// three-valued evaluation: when an expression evaluates to true or false
// with some variables unknown, it evaluates to the same with any values
// (or none) for them. Unknown is always allowed: it only keeps a job.
func TestGitLabThreeValuedSoundness(t *testing.T) {
	t.Parallel()
	// Predefined names: the event does not tell them, so they are unknown
	// unless set or known to be unset.
	names := []string{"CI_A", "CI_B", "CI_C"}
	values := []string{"", "x", "y", "/x/", "main"}
	rapid.Check(t, func(t *rapid.T) {
		expr := genExpr(t, names, values, 3)
		e, err := parseGitLabExpr(expr)
		if err != nil {
			t.Fatalf("generated %q does not parse: %v", expr, err)
		}
		partial, full := vars(), vars()
		for _, n := range names {
			state := rapid.IntRange(0, 2).Draw(t, "state "+n) // unknown, unset, set
			val := rapid.SampledFrom(values).Draw(t, "value "+n)
			if state == 0 {
				// Any completion of the unknown.
				state = rapid.IntRange(1, 2).Draw(t, "completion "+n)
			} else if state == 1 {
				partial.null[n] = true
			} else {
				partial.given[n] = val
			}
			if state == 1 {
				full.null[n] = true
			} else {
				full.given[n] = val
			}
		}
		got := e.eval(partial)
		if got == triUnknown {
			return
		}
		if want := e.eval(full); want != got {
			t.Fatalf("%q: %v with unknowns, %v with them known", expr, got, want)
		}
	})
}

func genExpr(t *rapid.T, names, values []string, depth int) string {
	operand := func() string {
		switch rapid.IntRange(0, 3).Draw(t, "operand") {
		case 0:
			return "$" + rapid.SampledFrom(names).Draw(t, "name")
		case 1:
			return `"` + rapid.SampledFrom(values).Draw(t, "string") + `"`
		case 2:
			return "null"
		}
		return "/" + rapid.SampledFrom([]string{"x", "^m", "a|y"}).Draw(t, "regexp") + "/"
	}
	if depth == 0 || rapid.Bool().Draw(t, "leaf") {
		x := operand()
		if rapid.Bool().Draw(t, "compare") {
			x += " " + rapid.SampledFrom([]string{"==", "!=", "=~", "!~"}).Draw(t, "cmp") + " " + operand()
		}
		if rapid.IntRange(0, 4).Draw(t, "not") == 0 {
			x = "!(" + x + ")"
		}
		return x
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
