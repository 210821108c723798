package policy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/tester"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/secrets/policy"

	_ "embed"
)

//go:embed default_test.rego
var defaultTests string

// runRegoTests runs the Rego tests of files (name → source) under the
// engine's restrictions and fails t if any fails or none ran.
func runRegoTests(t *testing.T, files map[string]string) {
	t.Helper()
	mods := map[string]*ast.Module{}
	for name, src := range files {
		m, err := ast.ParseModuleWithOpts(name, src, ast.ParserOptions{RegoVersion: ast.RegoV1})
		require.NoError(t, err)
		mods[name] = m
	}
	ch, err := tester.NewRunner().SetCompiler(policy.NewCompiler()).SetModules(mods).RaiseBuiltinErrors(true).RunTests(t.Context(), nil)
	require.NoError(t, err)
	ran := 0
	for r := range ch {
		ran++
		if !r.Pass() {
			t.Errorf("%s: %s", r.Location, r.String())
		}
	}
	require.NotZero(t, ran, "no Rego test ran")
	t.Logf("%d Rego tests ran", ran)
}

func TestDefaultPolicyRegoTests(t *testing.T) {
	t.Parallel()
	runRegoTests(t, map[string]string{"default.rego": policy.DefaultSource, "default_test.rego": defaultTests})
}

// input returns a realistic input: a push to main of acme/api, changed
// by with.
func input(with func(*policy.Input)) *policy.Input {
	in := &policy.Input{
		Event:        "push",
		Repository:   "acme/api",
		Ref:          policy.Ref{Type: "branch", Name: "main", Protected: true, Default: true},
		Actor:        "ada",
		Pipeline:     ".github/workflows/ci.yml",
		ChangedFiles: []string{"main.go"},
		Job: policy.Job{
			ID:                   "build",
			Secrets:              []string{"NPM_TOKEN"},
			Permissions:          map[string]string{"contents": "write", "id-token": "write"},
			RunsOn:               []string{"self-hosted", "linux"},
			DefaultSecretsScopes: []string{"org:acme", "repo:acme/api"},
			DefaultCacheScope:    "branch/main",
		},
	}
	if with != nil {
		with(in)
	}
	return in
}

func forkPR(association string) func(*policy.Input) {
	return func(in *policy.Input) {
		in.Event, in.PullRequest, in.Fork, in.Actor = "pull_request", 42, true, "stranger"
		in.Ref = policy.Ref{Type: "branch", Name: "patch-1", Base: "main"}
		in.AuthorAssociation = association
		in.FirstTimeContributor = association == "FIRST_TIME_CONTRIBUTOR" || association == "FIRST_TIMER"
		in.PipelineFileChanged = true
		in.Job.DefaultCacheScope = "fork/pr-42"
	}
}

var forkDecision = policy.Decision{
	SecretsScopes:       []string{},
	CacheScope:          "fork/pr-42",
	TokenPermissions:    map[string]string{"contents": "read", "metadata": "read"},
	RunnerLabelsAllowed: []string{"*", "!self-hosted"},
}

func with(d policy.Decision, decision cikit.Decision, reason string) *policy.Decision {
	d.Decision, d.Reason = decision, reason
	return &d
}

func TestEvalDefault(t *testing.T) {
	t.Parallel()
	e, err := policy.New(policy.Config{EvalTimeout: testEvalTimeout})
	require.NoError(t, err)
	require.Equal(t, "default", e.Name())
	trusted := policy.Decision{SecretsScopes: []string{"org:acme", "repo:acme/api"}, CacheScope: "branch/main"}
	const held = "fork pull request by a first-time contributor: a maintainer must approve before it runs"
	for _, tc := range []struct {
		name string
		in   *policy.Input
		want *policy.Decision
	}{
		{"push to main", input(nil), with(trusted, cikit.DecisionAllow, "")},
		{"same-repository pull request", input(func(in *policy.Input) {
			in.Event, in.PullRequest, in.AuthorAssociation = "pull_request", 7, "MEMBER"
			in.Ref = policy.Ref{Type: "branch", Name: "feature/x", Base: "main"}
			in.Job.DefaultCacheScope = "pr/7"
			in.Job.DefaultSecretsScopes = []string{"repo:acme/api"}
		}), &policy.Decision{Decision: cikit.DecisionAllow, SecretsScopes: []string{"repo:acme/api"}, CacheScope: "pr/7"}},
		{"fork pull request by a first-time contributor", input(forkPR("FIRST_TIME_CONTRIBUTOR")), with(forkDecision, cikit.DecisionRequireApproval, held)},
		{"fork pull request by a contributor", input(forkPR("CONTRIBUTOR")), with(forkDecision, cikit.DecisionAllow, "")},
		{"GitLab fork merge request", input(func(in *policy.Input) {
			forkPR("")(in)
			in.Repository, in.Pipeline = "acme/platform/api", ".gitlab-ci.yml"
			in.Job.DefaultSecretsScopes = []string{"org:acme/platform", "repo:acme/platform/api"}
		}), with(forkDecision, cikit.DecisionRequireApproval, held)},
		{"tag deploy to production", input(func(in *policy.Input) {
			in.Event, in.Ref = "tag", policy.Ref{Type: "tag", Name: "v1.2.0", Protected: true}
			in.Job.ID, in.Job.Environment = "deploy", "Production"
			in.Job.DefaultSecretsScopes = []string{"env:acme/api:Production", "repo:acme/api"}
			in.Job.DefaultCacheScope = "tag/v1.2.0"
		}), &policy.Decision{Decision: cikit.DecisionAllow, SecretsScopes: []string{"env:acme/api:Production", "repo:acme/api"}, CacheScope: "tag/v1.2.0"}},
		{"unprotected branch to production", input(func(in *policy.Input) {
			in.Ref = policy.Ref{Type: "branch", Name: "hotfix"}
			in.Job.ID, in.Job.Environment = "deploy", "production/eu"
			in.Job.DefaultCacheScope = "branch/hotfix"
		}), &policy.Decision{
			Decision: cikit.DecisionDeny, Reason: `only protected branches and tags may deploy to production; branch "hotfix" is not protected`,
			SecretsScopes: []string{"org:acme", "repo:acme/api"}, CacheScope: "branch/hotfix",
		}},
		{"dispatch", input(func(in *policy.Input) {
			in.Event, in.Ref = "dispatch", policy.Ref{Type: "branch", Name: "release", Protected: true}
			in.ChangedFiles, in.Job.DefaultCacheScope = nil, "branch/release"
		}), &policy.Decision{Decision: cikit.DecisionAllow, SecretsScopes: []string{"org:acme", "repo:acme/api"}, CacheScope: "branch/release"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := e.Eval(t.Context(), tc.in)
			require.NoError(t, err)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("decision (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEvalDefaultAdmission follows a fork's decision to what the job
// may then have.
func TestEvalDefaultAdmission(t *testing.T) {
	t.Parallel()
	e, err := policy.New(policy.Config{EvalTimeout: testEvalTimeout})
	require.NoError(t, err)
	d, err := e.Eval(context.Background(), input(forkPR("CONTRIBUTOR")))
	require.NoError(t, err)
	a := d.Admission(e.Name())
	require.Equal(t, "default", a.Policy)
	spec := &cikit.JobSpec{Permissions: map[string]string{"contents": "write", "id-token": "write", "packages": "write"}, Admission: a}
	require.Equal(t, map[string]string{"contents": "read", "id-token": "none", "packages": "none"}, cikit.EffectivePermissions(spec))
	require.False(t, cikit.LabelsAllowed(a.RunnerLabelsAllowed, []string{"self-hosted", "linux"}))
	require.True(t, cikit.LabelsAllowed(a.RunnerLabelsAllowed, []string{"ubuntu-latest"}))
	require.Empty(t, a.SecretsScopes)
	require.True(t, strings.HasPrefix(a.CacheScope, "fork/"))
}
