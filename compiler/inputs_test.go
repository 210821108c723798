package compiler_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/compiler"
)

const dispatchInputs = `on:
  workflow_dispatch:
    inputs:
      target: {type: string, required: true}
      flag: {type: boolean, default: false}
      n: {type: number}
      level: {type: choice, options: [low, high], default: low}
      env: {type: environment}
  workflow_call:
    inputs:
      called: {type: string}
jobs:
  a:
    runs-on: ubuntu-latest
    steps: [{run: echo}]
`

func TestCheckInputs(t *testing.T) {
	t.Parallel()
	plan := compileGitHub(t, dispatchInputs)
	bare := compileGitHub(t, "on: workflow_dispatch\n"+jobsOnly)
	gitlab, diags, err := compiler.CompileBytes(".gitlab-ci.yml", []byte("job: {script: [make]}\n"), compiler.Options{})
	require.NoError(t, err)
	require.False(t, compiler.HasErrors(diags), "%v", diags)
	for _, c := range []struct {
		name   string
		plan   *compiler.Plan
		given  map[string]string
		want   compiler.InputValues
		bad    string // the input at fault
		reason string
	}{
		{name: "defaults filled", plan: plan, given: map[string]string{"target": "prod"},
			want: compiler.InputValues{Values: map[string]string{"target": "prod", "flag": "false", "level": "low"}, Types: map[string]string{"flag": "boolean"}}},
		{name: "typed", plan: plan, given: map[string]string{"target": "", "flag": "true", "n": " -1e3 ", "level": "high", "env": "staging"},
			want: compiler.InputValues{Values: map[string]string{"target": "", "flag": "true", "n": " -1e3 ", "level": "high", "env": "staging"},
				Types: map[string]string{"flag": "boolean", "n": "number"}}},
		{name: "unknown", plan: plan, given: map[string]string{"target": "x", "levle": "low"}, bad: "levle",
			reason: `the pipeline declares no such input (its inputs: target, flag, n, level, env); did you mean "level"?`},
		{name: "a workflow_call input is no dispatch input", plan: plan, given: map[string]string{"target": "x", "called": "y"}, bad: "called",
			reason: "the pipeline declares no such input"},
		{name: "unknown before bad", plan: plan, given: map[string]string{"zz": "1", "flag": "maybe"}, bad: "zz", reason: "no such input"},
		{name: "boolean", plan: plan, given: map[string]string{"target": "x", "flag": "True"}, bad: "flag", reason: `a boolean input is true or false, got "True"`},
		{name: "number", plan: plan, given: map[string]string{"target": "x", "n": "NaN"}, bad: "n", reason: `a number input takes a number, got "NaN"`},
		{name: "choice", plan: plan, given: map[string]string{"target": "x", "level": "mid"}, bad: "level", reason: `"mid" is not one of the choices low, high`},
		{name: "long value quoted in part", plan: plan, given: map[string]string{"target": "x", "level": strings.Repeat("m", 100)}, bad: "level",
			reason: `"` + strings.Repeat("m", 64) + `"… (100 bytes) is not one of the choices`},
		{name: "required", plan: plan, given: map[string]string{"flag": "true"}, bad: "target", reason: "it is required and has no default"},
		{name: "none declared", plan: bare, given: map[string]string{"x": "1"}, bad: "x", reason: "the pipeline declares no inputs"},
		{name: "none declared, none given", plan: bare},
		{name: "gitlab is free-form", plan: gitlab, given: map[string]string{"ANY": "thing", "flag": "yes"},
			want: compiler.InputValues{Values: map[string]string{"ANY": "thing", "flag": "yes"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := c.plan.CheckInputs(c.given)
			if c.bad == "" {
				require.NoError(t, err)
				require.Equal(t, c.want, got)
				return
			}
			var ie *compiler.InputError
			require.True(t, errors.As(err, &ie), "%v", err)
			require.Equal(t, c.bad, ie.Name)
			require.Equal(t, c.plan.File, ie.File)
			require.Contains(t, ie.Reason, c.reason)
			require.Equal(t, "input "+c.bad+" of "+c.plan.File+": "+ie.Reason, err.Error())
			require.Zero(t, got)
		})
	}
}

func TestInputValuesTyped(t *testing.T) {
	t.Parallel()
	v := compiler.InputValues{Values: map[string]string{"flag": "false", "n": "2.50", "s": "true"}, Types: map[string]string{"flag": "boolean", "n": "number"}}
	require.Equal(t, map[string]any{"flag": false, "n": 2.5, "s": "true"}, v.Typed())
	require.Nil(t, compiler.InputValues{}.Typed())
}

func TestStrategy(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, strategy string
		want           []cikit.Strategy
	}{
		{"defaults", "", []cikit.Strategy{{Index: 0, Total: 3, FailFast: true}, {Index: 1, Total: 3, FailFast: true}, {Index: 2, Total: 3, FailFast: true}}},
		{"written", "\n      fail-fast: false\n      max-parallel: 2", []cikit.Strategy{{Index: 0, Total: 3, MaxParallel: 2}, {Index: 1, Total: 3, MaxParallel: 2}, {Index: 2, Total: 3, MaxParallel: 2}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			plan, diags, err := compiler.CompileBytes(".github/workflows/ci.yml", []byte(`on: push
jobs:
  solo:
    runs-on: ubuntu-latest
    steps: [{run: echo}]
  test:
    runs-on: ubuntu-latest
    strategy:`+c.strategy+`
      matrix:
        os: [linux, mac]
        include: [{os: windows}]
    steps: [{run: echo}]
`), compiler.Options{})
			require.NoError(t, err)
			require.False(t, compiler.HasErrors(diags), "%v", diags)
			if c.strategy != "" {
				require.Len(t, diags, 1, "%v", diags)
				require.Contains(t, diags[0].Message, "max-parallel is not honoured yet")
			}
			var got []cikit.Strategy
			for _, j := range plan.Jobs {
				if j.ID == "solo" {
					require.Nil(t, j.Strategy, "a job without matrix has none")
					continue
				}
				require.NotNil(t, j.Strategy, j.ID)
				got = append(got, *j.Strategy)
			}
			require.Equal(t, c.want, got, "in expansion order")
			require.Equal(t, "test (linux)", plan.Jobs[1].ID)
			require.Equal(t, plan.Jobs[1].Strategy, plan.Jobs[1].Clone().Strategy)
			require.NotSame(t, plan.Jobs[1].Strategy, plan.Jobs[1].Clone().Strategy, "Clone copies it")
		})
	}
}

func BenchmarkCheckInputs(b *testing.B) {
	plan, _, err := compiler.CompileBytes(".github/workflows/ci.yml", []byte(dispatchInputs), compiler.Options{})
	require.NoError(b, err)
	given := map[string]string{"target": "prod", "flag": "true", "n": "3", "level": "high"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := plan.CheckInputs(given); err != nil {
			b.Fatal(err)
		}
	}
}
