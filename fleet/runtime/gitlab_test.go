package runtime_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/fleet/runtime"
)

func TestGitLabEnv(t *testing.T) {
	t.Parallel()
	base := map[string]string{"CI_COMMIT_SHORT_SHA": "01234567", "CI_PROJECT_PATH": "acme/api", "PATH": "/usr/bin", "DEPLOY": "base"}
	overrides := map[string]string{"DEPLOY": "manual"}
	vars := map[string]string{
		"IMAGE":     "registry.example/$CI_PROJECT_PATH:${CI_COMMIT_SHORT_SHA}",
		"PRICE":     "$$5 and $$CI_COMMIT_SHA",
		"TARGET":    "to-$DEPLOY",
		"TOOLS":     "/opt/tools:$PATH",
		"MISSING":   "[$NOPE][${NOPE}]",
		"LITERAL":   "$ $1 ${ ${1A} ${OPEN $-",
		"A":         "a$B",
		"B":         "b$A",
		"TRAILING":  "cost$",
		"ESCAPEDIR": "$${CI_PROJECT_PATH}",
	}
	got := runtime.GitLabEnv(vars, base, overrides)
	require.Equal(t, map[string]string{
		"IMAGE":     "registry.example/acme/api:01234567",
		"PRICE":     "$5 and $CI_COMMIT_SHA",
		"TARGET":    "to-manual",
		"TOOLS":     "/opt/tools:/usr/bin",
		"MISSING":   "[][]",
		"LITERAL":   "$ $1 ${ ${1A} ${OPEN $-",
		"A":         "ab$A",
		"B":         "ba$B",
		"TRAILING":  "cost$",
		"ESCAPEDIR": "${CI_PROJECT_PATH}",
	}, got)
	require.Empty(t, runtime.GitLabEnv(nil, base, nil))
}

// FuzzGitLabEnv expands arbitrary values.
//
// Invariant: GitLabEnv never panics; with nothing defined, a value
// expands to at most its own length, and a value without "$" to itself;
// doubling every "$" of a value and expanding it gives the value back.
func FuzzGitLabEnv(f *testing.F) {
	for _, s := range []string{"$A${B}$$C", "${", "$", "x$1", "${A-}", "$$$"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := runtime.GitLabEnv(map[string]string{"v!": s}, nil, nil)["v!"]
		if len(got) > len(s) {
			t.Fatalf("%q grew to %q", s, got)
		}
		if !strings.Contains(s, "$") && got != s {
			t.Fatalf("%q became %q", s, got)
		}
		escaped := strings.ReplaceAll(s, "$", "$$")
		if back := runtime.GitLabEnv(map[string]string{"v!": escaped}, map[string]string{"A": "x"}, nil)["v!"]; back != s {
			t.Fatalf("escaped %q came back as %q", s, back)
		}
	})
}
