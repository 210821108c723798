package runtime_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/compiler/expr"
	"github.com/cikit/cikit/fleet/runtime"
)

func writeAction(t *testing.T, name, body string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	return dir
}

const composite = `name: Greet
description: Says hello
author: acme
branding: {icon: box, color: blue}
inputs:
  who:
    description: whom to greet
    required: true
  times:
    default: 2
  token:
    default: ${{ github.actor }}-token
  old:
    deprecationMessage: use who
outputs:
  greeting:
    description: what was said
    value: ${{ steps.say.outputs.text }}
runs:
  using: composite
  steps:
    - id: say
      run: |
        echo "text=hello ${{ inputs.who }}" >> "$GITHUB_OUTPUT"
        echo second line
      shell: bash
      env:
        N: ${{ inputs.times }}
        FLAG: true
    - uses: ./.github/actions/inner
      with:
        level: 3
      if: ${{ failure() }}
      continue-on-error: true
    - name: named
      run: echo hi
      shell: sh
      working-directory: sub
`

func TestLoadAction(t *testing.T) {
	t.Parallel()
	dir := writeAction(t, "action.yml", composite)
	a, err := runtime.LoadAction(dir)
	require.NoError(t, err)
	require.Equal(t, "Greet", a.Name)
	require.Equal(t, dir, a.Dir)
	require.Equal(t, []runtime.ActionInput{
		{Name: "old", Deprecation: "use who"},
		{Name: "times", Default: "2"},
		{Name: "token", Default: "${{ github.actor }}-token"},
		{Name: "who", Description: "whom to greet", Required: true},
	}, a.Inputs)
	require.Equal(t, []runtime.ActionOutput{{Name: "greeting", Description: "what was said", Value: "${{ steps.say.outputs.text }}"}}, a.Outputs)
	require.Equal(t, []cikit.Step{
		{ID: "say", Name: `echo "text=hello ${{ inputs.who }}" >> "$GITHUB_OUTPUT"`, Run: "echo \"text=hello ${{ inputs.who }}\" >> \"$GITHUB_OUTPUT\"\necho second line\n",
			Shell: "bash", Env: map[string]string{"N": "${{ inputs.times }}", "FLAG": "true"}},
		{Name: "./.github/actions/inner", Uses: "./.github/actions/inner", With: map[string]string{"level": "3"},
			If: &cikit.Condition{Lang: cikit.LangGitHub, Expr: "${{ failure() }}"}, ContinueOnError: true},
		{Name: "named", Run: "echo hi", Shell: "sh", WorkingDirectory: "sub"},
	}, a.Steps)

	yaml := writeAction(t, "action.yaml", "runs:\n  using: composite\n  steps:\n    - run: true\n      shell: sh\n")
	a, err = runtime.LoadAction(yaml)
	require.NoError(t, err)
	require.Len(t, a.Steps, 1)
}

func TestLoadActionErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, body, want string
		notComposite     bool
	}{
		{"node", "runs:\n  using: node20\n  main: index.js\n", "node20 actions (JavaScript) are not run yet", true},
		{"docker", "runs:\n  using: docker\n  image: Dockerfile\n", "docker actions are not run yet", true},
		{"unknown kind", "runs:\n  using: wasm\n", `runs.using "wasm" is not an action kind`, true},
		{"no using", "name: x\n", "runs.using is missing", false},
		{"unknown key", "runs:\n  using: composite\n  steps:\n    - run: x\n      shell: sh\n      timeout-minutes: 3\n", "field timeout-minutes not found", false},
		{"no shell", "runs:\n  using: composite\n  steps:\n    - run: x\n", "step 1: a run step of a composite action needs shell:", false},
		{"both", "runs:\n  using: composite\n  steps:\n    - run: x\n      shell: sh\n      uses: ./a\n", "not both", false},
		{"neither", "runs:\n  using: composite\n  steps:\n    - name: x\n", "needs run or uses", false},
		{"no steps", "runs:\n  using: composite\n", "runs.steps is empty", false},
		{"output without value", "outputs:\n  x: {description: d}\nruns:\n  using: composite\n  steps:\n    - {run: x, shell: sh}\n", `output "x" has no value`, false},
		{"expression continue-on-error", "runs:\n  using: composite\n  steps:\n    - {run: x, shell: sh, continue-on-error: '${{ true }}'}\n", "expressions are not evaluated here", false},
		{"list env", "runs:\n  using: composite\n  steps:\n    - {run: x, shell: sh, env: {A: [1]}}\n", "env: A: line", false},
		{"shell on uses", "runs:\n  using: composite\n  steps:\n    - {uses: ./a, shell: sh}\n", "for run steps", false},
		{"bad yaml", "runs: [\n", "action.yml", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := runtime.LoadAction(writeAction(t, "action.yml", tt.body))
			require.ErrorContains(t, err, tt.want)
			require.ErrorContains(t, err, "action.yml")
			require.Equal(t, tt.notComposite, errors.Is(err, runtime.ErrNotComposite))
		})
	}
	_, err := runtime.LoadAction(t.TempDir())
	require.ErrorContains(t, err, "holds no action.yml or action.yaml")

	big := writeAction(t, "action.yml", "name: x\n"+strings.Repeat("#", runtime.MaxActionBytes))
	_, err = runtime.LoadAction(big)
	require.ErrorIs(t, err, runtime.ErrFileTooLarge)
}

func TestActionRun(t *testing.T) {
	t.Parallel()
	a, err := runtime.LoadAction(writeAction(t, "action.yml", composite))
	require.NoError(t, err)
	g := newGitHub(t, &cikit.JobSpec{Env: map[string]string{"J": "job"}}, pushContext())
	using := &cikit.Step{Uses: "./greet", With: map[string]string{"WHO": "world", "old": "x", "extra": "1"}, Env: map[string]string{"S": "step"}}
	_, err = g.StepEnv(using)
	require.NoError(t, err)

	inputs, warnings, err := a.InputsContext(using.With, g.Expand)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"who": "world", "old": "x", "times": "2", "token": "octocat-token"}, inputs)
	require.Equal(t, []string{
		`Input "old" has been deprecated with message: use who`,
		`Unexpected input(s) ['extra']; valid inputs are ['old', 'times', 'token', 'who']: they are not passed to the action`,
	}, warnings)

	_, warnings, err = a.InputsContext(nil, g.Expand)
	require.NoError(t, err)
	require.Equal(t, []string{"Input required and not supplied: who"}, warnings)

	c := g.Composite(a.Dir, inputs)
	env, err := c.StepEnv(&a.Steps[0])
	require.NoError(t, err)
	require.Equal(t, map[string]string{"J": "job", "S": "step", "N": "2", "FLAG": "true"}, env, "the action's steps see the using step's env")
	require.Equal(t, "echo \"text=hello world\" >> \"$GITHUB_OUTPUT\"\necho second line\n", expand(t, c, a.Steps[0].Run))
	require.Equal(t, a.Dir, expand(t, c, "${{ github.action_path }}"))
	runs, err := c.StepRuns(&a.Steps[1], expr.Status{})
	require.NoError(t, err)
	require.False(t, runs)
	c.SetStep("say", runtime.Success, runtime.Success, map[string]string{"text": "hello world"})
	require.NoError(t, c.AddEnv([]runtime.KV{{Name: "FROM_ACTION", Value: "1"}}))

	out, err := a.EvalOutputs(c)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"greeting": "hello world"}, out)

	require.Equal(t, "", expand(t, g, "${{ steps.say.outputs.text }}"), "the action's steps are its own")
	require.Equal(t, "", expand(t, g, "${{ github.action_path }}"))
	require.Equal(t, "world", expand(t, c, "${{ inputs.who }}"))
	env, err = g.StepEnv(&cikit.Step{})
	require.NoError(t, err)
	require.Equal(t, "1", env["FROM_ACTION"], "GITHUB_ENV written inside the action reaches the job's later steps")

	bad := &runtime.Action{Dir: "/a", Outputs: []runtime.ActionOutput{{Name: "o", Value: "${{ nope }}"}}}
	_, err = bad.EvalOutputs(c)
	require.ErrorContains(t, err, `output "o" of action /a`)
	badDefault := &runtime.Action{Inputs: []runtime.ActionInput{{Name: "i", Default: "${{ nope }}"}}}
	_, _, err = badDefault.InputsContext(nil, g.Expand)
	require.ErrorContains(t, err, `default of input "i"`)
}

func TestLocalAction(t *testing.T) {
	t.Parallel()
	dir, ok, err := runtime.LocalAction("/ws", "./.github/actions/build")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "/ws/.github/actions/build", dir)
	_, ok, err = runtime.LocalAction("/ws", "actions/setup-go@v5")
	require.NoError(t, err)
	require.False(t, ok)
	_, ok, err = runtime.LocalAction("/ws", "./a/../../etc")
	require.True(t, ok)
	require.ErrorContains(t, err, "leaves the workspace")
}
