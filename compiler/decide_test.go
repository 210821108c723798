package compiler_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/compiler"
	"github.com/cikit/cikit/dag"
)

// decideRun is a push to main of acme/api.
var decideRun = &cikit.RunContext{Provider: "github", Repository: "acme/api", Event: "push", Ref: "refs/heads/main", RefName: "main",
	RefType: "branch", SHA: "0123456789abcdef0123456789abcdef01234567", Actor: "octo", DefaultBranch: "main",
	Inputs: map[string]string{"target": "prod"}, Payload: []byte(`{"head_commit":{"message":"ship it"}}`)}

func TestDecideJob(t *testing.T) {
	t.Parallel()
	yes := map[string]cikit.NeedResult{"a": {Result: cikit.JobSucceeded, Outputs: map[string]string{"deploy": "yes"}}}
	no := map[string]cikit.NeedResult{"a": {Result: cikit.JobSucceeded, Outputs: map[string]string{"deploy": "no"}}}
	failed := map[string]cikit.NeedResult{"a": {Result: cikit.JobFailed}}
	skipped := map[string]cikit.NeedResult{"a": {Result: cikit.JobSkipped}}
	variants := map[string]cikit.NeedResult{
		"test (1)": {Result: cikit.JobSucceeded, Outputs: map[string]string{"v": "1"}},
		"test (2)": {Result: cikit.JobFailed},
	}
	gh := func(s string) *cikit.Condition { return &cikit.Condition{Lang: cikit.LangGitHub, Expr: s} }
	gl := func(s string) *cikit.Condition { return &cikit.Condition{Lang: cikit.LangGitLab, Expr: s} }
	tests := []struct {
		name    string
		cond    *cikit.Condition
		format  string
		env     map[string]string
		needs   map[string]cikit.NeedResult
		run     *cikit.RunContext
		want    bool
		wantErr string
	}{
		{name: "no condition", want: true},
		{name: "output equal", cond: gh("needs.a.outputs.deploy == 'yes'"), needs: yes, want: true},
		{name: "output differs", cond: gh("needs.a.outputs.deploy == 'yes'"), needs: no, want: false},
		{name: "wrapped", cond: gh("${{ needs.a.outputs.deploy == 'no' }}"), needs: no, want: true},
		{name: "missing output is empty", cond: gh("needs.a.outputs.other == ''"), needs: yes, want: true},
		{name: "always and failure result", cond: gh("always() && needs.a.result == 'failure'"), needs: failed, want: true},
		{name: "always and success result", cond: gh("always() && needs.a.result == 'failure'"), needs: yes, want: false},
		{name: "failure()", cond: gh("failure() && github.ref == 'refs/heads/main'"), needs: failed, want: true},
		{name: "failure() on success", cond: gh("failure() || needs.a.outputs.deploy == 'x'"), needs: yes, want: false},
		{name: "success() on success", cond: gh("success() && github.event_name == 'push'"), needs: yes, want: true},
		{name: "success() on failure", cond: gh("success() || github.event_name == 'pull_request'"), needs: failed, want: false},
		{name: "success() on skipped", cond: gh("!success() && !failure()"), needs: skipped, want: true},
		{name: "cancelled()", cond: gh("cancelled() || needs.a.result == 'x'"), needs: yes, want: false},
		{name: "matrix job as a whole", cond: gh("needs.test.result == 'failure' && needs.test.outputs.v == '1'"), needs: variants, want: true},
		{name: "github context", cond: gh("github.repository == 'acme/api' && github.repository_owner == 'acme' && github.ref_name == 'main' && github.actor == 'octo' && github.sha != ''"), want: true},
		{name: "event payload", cond: gh("contains(github.event.head_commit.message, 'ship')"), want: true},
		{name: "inputs", cond: gh("inputs.target == 'prod'"), want: true},
		{name: "typed boolean input", cond: gh("inputs.dry == false && !inputs.dry"), want: true,
			run: &cikit.RunContext{Inputs: map[string]string{"dry": "false"}, InputTypes: map[string]string{"dry": "boolean"}}},
		{name: "empty run context", cond: gh("github.repository == 'acme/api'"), run: &cikit.RunContext{}, wantErr: "reads what is not known"},
		{name: "vars unknown", cond: gh("vars.DEPLOY == 'yes'"), wantErr: "reads what is not known"},
		{name: "steps unknown", cond: gh("steps.x.outcome == 'success'"), wantErr: "reads what is not known"},
		{name: "bad syntax", cond: gh("needs.a.outputs.deploy == "), wantErr: "does not parse"},
		{name: "bad function", cond: gh("nosuch(needs.a.result)"), needs: yes, wantErr: "condition of job"},
		{name: "unknown language", cond: &cikit.Condition{Lang: "cue", Expr: "x"}, wantErr: `language "cue"`},
		{name: "native env and matrix", cond: gh("env.STAGE == 'prod' && matrix.os == 'linux'"), format: "native", env: map[string]string{"STAGE": "prod"}, want: true},
		{name: "gitlab branch", cond: gl(`$CI_COMMIT_BRANCH == "main"`), want: true},
		{name: "gitlab source", cond: gl(`$CI_PIPELINE_SOURCE == "push" && $CI_COMMIT_SHORT_SHA == "01234567"`), want: true},
		{name: "gitlab run variable", cond: gl(`$target == "prod"`), want: true},
		{name: "gitlab job variable", cond: gl(`$STAGE =~ /^pr/`), env: map[string]string{"STAGE": "prod"}, want: true},
		{name: "gitlab undefined", cond: gl(`$NOT_SET`), want: false},
		{name: "gitlab undefined equals null", cond: gl(`$CI_MERGE_REQUEST_IID == null`), want: true},
		{name: "gitlab unknown predefined is undefined", cond: gl(`$CI_PROJECT_ID`), want: false},
		{name: "gitlab tag unset on a branch", cond: gl(`$CI_COMMIT_TAG`), want: false},
		{name: "gitlab bad regexp in a variable", cond: gl(`$target =~ $PATTERN`), env: map[string]string{"PATTERN": "/(/"}, want: false},
		{name: "gitlab bad syntax", cond: gl(`$A ==`), wantErr: "does not parse"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			job := &cikit.JobSpec{ID: "ship", If: tt.cond, Format: tt.format, Env: tt.env}
			if tt.format == "native" {
				job.Matrix = map[string]string{"os": "linux"}
			}
			run := decideRun
			if tt.run != nil {
				run = tt.run
			}
			got, err := compiler.DecideJob(context.Background(), &dag.ExpandRequest{Run: run, Job: job, Needs: tt.needs})
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

// TestDecideJobCompiled decides the conditions Compile leaves for the
// run, as a store would.
func TestDecideJobCompiled(t *testing.T) {
	t.Parallel()
	wf := `on: push
jobs:
  a:
    runs-on: ubuntu-latest
    outputs:
      deploy: ${{ steps.s.outputs.deploy }}
    steps:
      - id: s
        run: echo deploy=no >> "$GITHUB_OUTPUT"
  ship:
    needs: a
    if: needs.a.outputs.deploy == 'yes'
    runs-on: ubuntu-latest
    steps: [{run: echo ship}]
  report:
    needs: a
    if: always() && needs.a.result == 'failure'
    runs-on: ubuntu-latest
    steps: [{run: echo report}]
`
	plan, diags, err := compiler.CompileBytes(".github/workflows/ci.yml", []byte(wf), compiler.Options{})
	require.NoError(t, err)
	require.False(t, compiler.HasErrors(diags), "%v", diags)
	jobs := map[string]*cikit.JobSpec{}
	for _, j := range plan.Jobs {
		jobs[j.ID] = j
	}
	require.NotNil(t, jobs["ship"].If)
	require.Equal(t, cikit.WhenAlways, jobs["report"].When)
	require.NotNil(t, jobs["report"].If)
	decide := func(job string, needs map[string]cikit.NeedResult) bool {
		t.Helper()
		ok, err := compiler.DecideJob(context.Background(), &dag.ExpandRequest{Run: decideRun, Job: jobs[job], Needs: needs})
		require.NoError(t, err)
		return ok
	}
	require.False(t, decide("ship", map[string]cikit.NeedResult{"a": {Result: cikit.JobSucceeded, Outputs: map[string]string{"deploy": "no"}}}))
	require.True(t, decide("ship", map[string]cikit.NeedResult{"a": {Result: cikit.JobSucceeded, Outputs: map[string]string{"deploy": "yes"}}}))
	require.False(t, decide("report", map[string]cikit.NeedResult{"a": {Result: cikit.JobSucceeded}}))
	require.True(t, decide("report", map[string]cikit.NeedResult{"a": {Result: cikit.JobFailed}}))
}

func TestDecideJobCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := compiler.DecideJob(ctx, &dag.ExpandRequest{Job: &cikit.JobSpec{ID: "x", If: &cikit.Condition{Lang: cikit.LangGitHub, Expr: "true"}}})
	require.ErrorIs(t, err, context.Canceled)
	_, err = compiler.DecideJob(context.Background(), &dag.ExpandRequest{})
	require.ErrorContains(t, err, "needs a job")
}

// BenchmarkDecideJob measures deciding a typical condition, what a store
// pays in the write that makes such a job ready.
func BenchmarkDecideJob(b *testing.B) {
	req := &dag.ExpandRequest{Run: decideRun, Job: &cikit.JobSpec{ID: "ship",
		If: &cikit.Condition{Lang: cikit.LangGitHub, Expr: "always() && needs.a.outputs.deploy == 'yes' && github.ref == 'refs/heads/main'"}},
		Needs: map[string]cikit.NeedResult{"a": {Result: cikit.JobSucceeded, Outputs: map[string]string{"deploy": "yes"}}}}
	ctx := context.Background()
	for b.Loop() {
		ok, err := compiler.DecideJob(ctx, req)
		if err != nil || !ok {
			b.Fatalf("DecideJob = %v, %v", ok, err)
		}
	}
}
