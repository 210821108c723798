package compiler_test

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/compiler"
)

// TestGitLabScriptOneSession runs the step a GitLab job's before_script
// and script compile to with a real shell, as the runner does (sh -e -c):
// each command is printed as GitLab prints it before it runs, a cd and a
// variable of one command hold in the next, quotes survive, and the first
// failing command ends the step with its status.
func TestGitLabScriptOneSession(t *testing.T) {
	t.Parallel()
	src := `
job:
  before_script:
    - mkdir -p sub
    - cd sub
  script:
    - X=kept
    - echo "in $(basename "$PWD") with $X"
    - echo 'quote '"'"' and $NOT_EXPANDED'
    - |
      for f in a b; do
        echo "item $f"
      done
    - "false"
    - echo never
`
	plan, diags, err := compiler.CompileBytes(".gitlab-ci.yml", []byte(src), compiler.Options{})
	require.NoError(t, err)
	require.Empty(t, diags)
	job := plan.Job("job")
	require.Len(t, job.Steps, 1, "one shell session")

	cmd := exec.Command("sh", "-e", "-c", job.Steps[0].Run)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", out)
	require.Equal(t, 1, exit.ExitCode(), "the status of false")
	require.Equal(t, strings.Join([]string{
		"$ mkdir -p sub",
		"$ cd sub",
		"$ X=kept",
		`$ echo "in $(basename "$PWD") with $X"`,
		"in sub with kept",
		`$ echo 'quote '"'"' and $NOT_EXPANDED'`,
		"quote ' and $NOT_EXPANDED",
		"$ for f in a b; do # collapsed multi-line command",
		"item a",
		"item b",
		"$ false",
		"",
	}, "\n"), string(out))
}

// TestGitLabAfterScriptOwnSession: after_script is one step of its own,
// run in a fresh shell after the script, whatever the script did.
func TestGitLabAfterScriptOwnSession(t *testing.T) {
	t.Parallel()
	src := `
job:
  script: [cd /, "false"]
  after_script: [echo "after in $(basename "$PWD")", echo done]
`
	plan, diags, err := compiler.CompileBytes(".gitlab-ci.yml", []byte(src), compiler.Options{})
	require.NoError(t, err)
	require.Empty(t, diags)
	job := plan.Job("job")
	require.Len(t, job.Steps, 1)
	require.Len(t, job.AfterSteps, 1)
	dir := t.TempDir()
	cmd := exec.Command("sh", "-e", "-c", job.AfterSteps[0].Run)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "after in "+dir[strings.LastIndexByte(dir, '/')+1:]+"\n$ echo done\ndone\n")
}

// TestGitLabVariablesLimit: variables that refer twice to variables that
// refer twice to others double at each level; their expansion is bounded
// and reported, not carried out.
func TestGitLabVariablesLimit(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("variables:\n  V0: xxxxxxxxxxxxxxxx\n")
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&b, "  V%d: $V%d$V%d\n", i, i-1, i-1)
	}
	b.WriteString("job: {script: make}\n")
	plan, diags, err := compiler.CompileBytes(".gitlab-ci.yml", []byte(b.String()), compiler.Options{})
	require.NoError(t, err)
	require.Nil(t, plan)
	require.Len(t, diags, 1, "%v", diags)
	require.Equal(t, compiler.RuleLimit, diags[0].Rule)
	require.Contains(t, diags[0].Message, "expands to more than 64 MiB")
}
