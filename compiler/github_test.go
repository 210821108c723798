package compiler_test

import (
	"context"
	"fmt"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/compiler"
)

// conditionsWorkflow has one job per kind of condition, all needing
// build, and one job that needs a job whose condition may be false.
const conditionsWorkflow = `
on: [push, pull_request, workflow_dispatch]
concurrency: ci-${{ github.ref }}
jobs:
  build:
    runs-on: ubuntu-latest
    steps: [{run: make}]
  on-push:
    needs: build
    if: github.event_name == 'push'
    runs-on: ubuntu-latest
    steps: [{run: echo}]
  on-main:
    needs: build
    if: ${{ github.ref == 'refs/heads/main' }}
    runs-on: ubuntu-latest
    steps: [{run: echo}]
  repo:
    needs: build
    if: github.repository == 'octo/repo'
    runs-on: ubuntu-latest
    steps: [{run: echo}]
  always-on-push:
    needs: build
    if: always() && github.event_name == 'push'
    runs-on: ubuntu-latest
    steps: [{run: echo}]
  failure-on-push:
    needs: build
    if: failure() && github.event_name == 'push'
    runs-on: ubuntu-latest
    steps: [{run: echo}]
  after-on-push:
    needs: on-push
    runs-on: ubuntu-latest
    steps: [{run: echo}]
  cleanup:
    needs: on-push
    if: always()
    runs-on: ubuntu-latest
    steps: [{run: echo}]
`

// TestGitHubConditionsWithEvent checks what the compiler decides with a
// known event: a job whose condition is false never runs but stays in the
// plan, so that what needs it follows GitHub's rules (skipped, unless its
// own condition says otherwise); a true condition is dropped; parts the
// event does not tell (github.repository) and status functions stay for
// the run.
func TestGitHubConditionsWithEvent(t *testing.T) {
	t.Parallel()
	type want struct {
		when cikit.When
		cond string // JobSpec.If's expression, "" for none
	}
	tests := []struct {
		name  string
		event *compiler.Event
		jobs  map[string]want
		group string
	}{
		{
			name:  "no event",
			event: nil,
			group: "ci-${{ github.ref }}",
			jobs: map[string]want{
				"on-push":         {"", "github.event_name == 'push'"},
				"on-main":         {"", "github.ref == 'refs/heads/main'"},
				"repo":            {"", "github.repository == 'octo/repo'"},
				"always-on-push":  {cikit.WhenAlways, "always() && github.event_name == 'push'"},
				"failure-on-push": {cikit.WhenOnFailure, "failure() && github.event_name == 'push'"},
				"after-on-push":   {"", ""},
				"cleanup":         {cikit.WhenAlways, ""},
			},
		},
		{
			name:  "push to main",
			event: &compiler.Event{Name: "push", Ref: "refs/heads/main"},
			group: "ci-refs/heads/main",
			jobs: map[string]want{
				"on-push":         {"", ""},
				"on-main":         {"", ""},
				"repo":            {"", "github.repository == 'octo/repo'"},
				"always-on-push":  {cikit.WhenAlways, ""},
				"failure-on-push": {cikit.WhenOnFailure, "failure() && github.event_name == 'push'"},
			},
		},
		{
			name:  "pull request",
			event: &compiler.Event{Name: "pull_request", Ref: "refs/pull/1/merge", Branch: "feature", BaseBranch: "main"},
			group: "ci-refs/pull/1/merge",
			jobs: map[string]want{
				"on-push":         {cikit.WhenNever, ""},
				"on-main":         {cikit.WhenNever, ""},
				"always-on-push":  {cikit.WhenNever, ""},
				"failure-on-push": {cikit.WhenNever, ""},
				"after-on-push":   {"", ""},
				"cleanup":         {cikit.WhenAlways, ""},
			},
		},
		{
			name:  "manual run, by the neutral name",
			event: &compiler.Event{Name: "manual", Ref: "refs/heads/dev"},
			jobs: map[string]want{
				"on-push": {cikit.WhenNever, ""},
				"on-main": {cikit.WhenNever, ""},
			},
			group: "ci-refs/heads/dev",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			plan, diags, err := compiler.CompileBytes(".github/workflows/ci.yml", []byte(conditionsWorkflow), compiler.Options{Event: tt.event})
			require.NoError(t, err)
			require.Empty(t, diags)
			require.Len(t, plan.Jobs, 8, "false conditions keep their jobs")
			require.Equal(t, tt.group, plan.Concurrency.Group)
			for id, w := range tt.jobs {
				j := plan.Job(id)
				require.NotNil(t, j, id)
				require.Equal(t, w.when, j.When, id)
				got := ""
				if j.If != nil {
					got = j.If.Expr
				}
				require.Equal(t, w.cond, got, id)
			}
			require.Equal(t, []string{"on-push"}, plan.Job("after-on-push").Needs)
		})
	}
}

// TestGitHubInputsWithEvent checks that the inputs of a manual run, and
// the defaults of those not given, decide conditions and size matrices.
func TestGitHubInputsWithEvent(t *testing.T) {
	t.Parallel()
	const src = `
on:
  workflow_dispatch:
    inputs:
      deploy: {type: boolean, default: false}
      targets: {type: string, default: '["a"]'}
jobs:
  build:
    strategy:
      matrix:
        target: ${{ fromJSON(inputs.targets) }}
    runs-on: ubuntu-latest
    steps: [{run: make}]
  deploy:
    if: inputs.deploy
    runs-on: ubuntu-latest
    steps: [{run: make deploy}]
`
	compile := func(ev *compiler.Event) *compiler.Plan {
		plan, diags, err := compiler.CompileBytes(".github/workflows/ci.yml", []byte(src), compiler.Options{Event: ev})
		require.NoError(t, err)
		require.Empty(t, diags)
		return plan
	}
	plan := compile(nil)
	require.Equal(t, "inputs.deploy", plan.Job("deploy").If.Expr)
	require.Equal(t, map[string]string{"*": `{"target":"${{ fromJSON(inputs.targets) }}"}`}, plan.Job("build").Matrix)

	plan = compile(&compiler.Event{Name: "workflow_dispatch"})
	require.Equal(t, cikit.WhenNever, plan.Job("deploy").When, "the default is false")
	require.NotNil(t, plan.Job("build (a)"))

	plan = compile(&compiler.Event{Name: "manual", Inputs: map[string]any{"deploy": true, "targets": `["x", "y"]`}})
	require.Nil(t, plan.Job("deploy").If)
	require.Equal(t, cikit.When(""), plan.Job("deploy").When)
	require.NotNil(t, plan.Job("build (x)"))
	require.NotNil(t, plan.Job("build (y)"))
}

// TestGitHubReusableWorkflowFromSource checks Compile with a FileSource:
// the called workflow is read at the same path layout, its jobs expanded,
// and the caller's condition put on the jobs that start it.
func TestGitHubReusableWorkflowFromSource(t *testing.T) {
	t.Parallel()
	src := fstestSource{
		".github/workflows/ci.yml": `
on: push
jobs:
  setup:
    runs-on: ubuntu-latest
    steps: [{run: make}]
  release:
    needs: setup
    if: github.ref == 'refs/heads/main'
    uses: ./.github/workflows/release.yml
    with: {channel: stable}
  notify:
    needs: release
    runs-on: ubuntu-latest
    steps:
      - run: echo ${{ needs.release.outputs.version }}
`,
		".github/workflows/release.yml": `
on:
  workflow_call:
    inputs:
      channel: {type: string, required: true}
    outputs:
      version: {value: '${{ jobs.publish.outputs.version }}'}
jobs:
  build:
    if: inputs.channel == 'stable'
    runs-on: ubuntu-latest
    steps: [{run: make release}]
  publish:
    needs: build
    runs-on: ubuntu-latest
    outputs:
      version: ${{ steps.v.outputs.version }}
    steps: [{id: v, run: echo version=1}]
`,
	}
	plan, diags, err := compiler.Compile(context.Background(), src, ".github/workflows/ci.yml", compiler.Options{})
	require.NoError(t, err)
	require.Empty(t, diags)
	var ids []string
	for _, j := range plan.Jobs {
		ids = append(ids, j.ID)
	}
	require.Equal(t, []string{"setup", "release/build", "release/publish", "notify"}, ids)
	build := plan.Job("release/build")
	require.Equal(t, []string{"setup"}, build.Needs)
	require.Equal(t, "github.ref == 'refs/heads/main'", build.If.Expr, "the caller's condition; the callee's own is true with channel stable")
	require.Nil(t, plan.Job("release/publish").If)
	require.Equal(t, []string{"release/build", "release/publish"}, plan.Job("notify").Needs)
	require.Equal(t, "echo ${{ needs['release/publish'].outputs.version }}", plan.Job("notify").Steps[0].Run)
	require.Equal(t, []string{".github/workflows/ci.yml", ".github/workflows/release.yml"}, plan.Files, "the workflow and the one it calls")

	plan, diags, err = compiler.Compile(context.Background(), src, ".github/workflows/ci.yml", compiler.Options{Event: &compiler.Event{Name: "push", Ref: "refs/heads/dev"}})
	require.NoError(t, err)
	require.Empty(t, diags)
	require.Equal(t, cikit.WhenNever, plan.Job("release/build").When)
}

// fstestSource is a FileSource over files in memory.
type fstestSource map[string]string

func (s fstestSource) ReadFile(ctx context.Context, p string) ([]byte, error) {
	fsys := fstest.MapFS{}
	for k, v := range s {
		fsys[k] = &fstest.MapFile{Data: []byte(v)}
	}
	return fsys.ReadFile(p)
}

// TestGitHubConcurrencyWithEvent checks that a cancel-in-progress given
// by an expression is decided with the event, per job and for the run,
// and is false while it cannot be.
func TestGitHubConcurrencyWithEvent(t *testing.T) {
	t.Parallel()
	const src = `
on: push
concurrency:
  group: ci-${{ github.ref }}
  cancel-in-progress: ${{ github.ref != 'refs/heads/main' }}
jobs:
  deploy:
    strategy:
      matrix:
        env: [staging, prod]
    concurrency:
      group: deploy-${{ matrix.env }}
      cancel-in-progress: ${{ matrix.env == 'staging' }}
    runs-on: ubuntu-latest
    steps: [{run: make}]
`
	for _, tt := range []struct {
		ref    string
		cancel bool
	}{{"", false}, {"refs/heads/main", false}, {"refs/heads/dev", true}} {
		var ev *compiler.Event
		if tt.ref != "" {
			ev = &compiler.Event{Name: "push", Ref: tt.ref}
		}
		plan, diags, err := compiler.CompileBytes(".github/workflows/ci.yml", []byte(src), compiler.Options{Event: ev})
		require.NoError(t, err)
		require.Empty(t, diags)
		require.Equal(t, tt.cancel, plan.Concurrency.CancelInProgress, tt.ref)
		require.Equal(t, &cikit.Concurrency{Group: "deploy-staging", CancelInProgress: true}, plan.Job("deploy (staging)").Concurrency)
		require.Equal(t, &cikit.Concurrency{Group: "deploy-prod"}, plan.Job("deploy (prod)").Concurrency)
	}
}

// TestGitHubCalledWorkflowsLimit checks GitHub's limit of 20 distinct
// reusable workflows called from one workflow, nested calls included.
func TestGitHubCalledWorkflowsLimit(t *testing.T) {
	t.Parallel()
	for _, n := range []int{20, 21} {
		src := fstestSource{}
		top := "on: push\njobs:\n"
		for i := range n {
			top += fmt.Sprintf("  call%d:\n    uses: ./.github/workflows/w%d.yml\n", i, i)
			src[fmt.Sprintf(".github/workflows/w%d.yml", i)] = "on: workflow_call\njobs:\n  a:\n    runs-on: x\n    steps: [{run: echo}]\n"
		}
		src[".github/workflows/ci.yml"] = top
		plan, diags, err := compiler.Compile(context.Background(), src, ".github/workflows/ci.yml", compiler.Options{})
		require.NoError(t, err)
		if n == 20 {
			require.Empty(t, diags)
			require.Len(t, plan.Jobs, 20)
			continue
		}
		require.Len(t, diags, 1)
		require.Equal(t, "the workflow calls more than 20 distinct reusable workflows, more than GitHub allows", diags[0].Message)
		require.Equal(t, 44, diags[0].Line, "at the uses: of the 21st call")
	}
}
