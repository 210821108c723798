package compiler_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/compiler"
)

func compileGitHub(t *testing.T, src string) *compiler.Plan {
	t.Helper()
	plan, diags, err := compiler.CompileBytes(".github/workflows/ci.yml", []byte(src), compiler.Options{})
	require.NoError(t, err)
	require.False(t, compiler.HasErrors(diags), "%v", diags)
	for _, d := range diags {
		// A schedule is accepted and not run yet: the only warning
		// these workflows have.
		require.Equal(t, compiler.RuleUnsupported, d.Rule, "%v", d)
		require.Contains(t, d.Message, "schedule is not run yet")
	}
	return plan
}

const jobsOnly = `
jobs:
  a:
    runs-on: ubuntu-latest
    steps: [{run: echo}]
`

// TestTriggered checks Plan.Triggered with GitHub's trigger semantics: one
// workflow per case, events that must and must not start it, and the
// reason given.
func TestTriggered(t *testing.T) {
	t.Parallel()
	pr := func(action, base string, files ...string) *compiler.Event {
		return &compiler.Event{Name: "pull_request", BaseBranch: base, ChangedFiles: files, Payload: map[string]any{"action": action}}
	}
	push := func(branch string, files ...string) *compiler.Event {
		return &compiler.Event{Name: "push", Ref: "refs/heads/" + branch, ChangedFiles: files}
	}
	tag := func(name string) *compiler.Event {
		return &compiler.Event{Name: "tag", Ref: "refs/tags/" + name}
	}
	tests := []struct {
		name string
		on   string
		ev   *compiler.Event
		want bool
		why  string // a part of the reason
	}{
		{"no event", "on: push", nil, true, "no event"},
		{"other event", "on: push", pr("opened", "main"), false, `not triggered by "pull_request" events (triggers: push)`},
		{"push any", "on: push", push("dev"), true, `on branch "dev"`},
		{"push tag without filters", "on: push", tag("v1"), true, `of tag "v1"`},
		{"branches match", "on: {push: {branches: [main, 'releases/**']}}", push("releases/v1/rc"), true, ""},
		{"branches no match", "on: {push: {branches: [main]}}", push("dev"), false, `branch "dev": not matched by branches [main]`},
		{"branches-ignore", "on: {push: {branches-ignore: ['dependabot/**']}}", push("dependabot/npm"), false, "matched by branches-ignore"},
		{"negated branch", "on: {push: {branches: ['releases/**', '!releases/**-alpha']}}", push("releases/2-alpha"), false, ""},
		{"only branches: tags skip", "on: {push: {branches: [main]}}", tag("v1"), false, "filters only branches"},
		{"only tags: branches skip", "on: {push: {tags: ['v*']}}", push("main"), false, "filters only tags"},
		{"tags match", "on: {push: {tags: ['v*']}}", tag("v1.2"), true, ""},
		{"tags-ignore", "on: {push: {tags-ignore: ['*-rc']}}", tag("v1-rc"), false, "tags-ignore"},
		{"tag by Tag field", "on: {push: {tags: ['v*']}}", &compiler.Event{Name: "push", Tag: "v9"}, true, ""},
		{"paths any file", "on: {push: {paths: ['src/**']}}", push("main", "README.md", "src/a.go"), true, ""},
		{"paths no file", "on: {push: {paths: ['src/**']}}", push("main", "README.md", "docs/x"), false, "none of the 2 changed files"},
		{"paths with negation", "on: {push: {paths: ['src/**', '!src/docs/**']}}", push("main", "src/docs/a.md"), false, ""},
		{"paths-ignore some file left", "on: {push: {paths-ignore: ['**.md']}}", push("main", "README.md", "main.go"), true, ""},
		{"paths-ignore all", "on: {push: {paths-ignore: ['**.md']}}", push("main", "README.md", "docs/x.md"), false, "all 2 changed files"},
		{"paths unknown", "on: {push: {paths: ['src/**']}}", push("main"), true, "changed files unknown"},
		{"paths ignored for tags", "on: {push: {tags: ['v*'], paths: ['src/**']}}", &compiler.Event{Name: "push", Tag: "v1", ChangedFiles: []string{"README"}}, true, ""},
		{"branches and paths both", "on: {push: {branches: [main], paths: ['src/**']}}", push("main", "docs/x"), false, "none of the 1 changed files"},
		{"pr default types", "on: pull_request", pr("opened", "main"), true, `into "main"`},
		{"pr default types exclude", "on: pull_request", pr("closed", "main"), false, `activity "closed" is not one of the types [opened, synchronize, reopened]`},
		{"pr types", "on: {pull_request: {types: [closed]}}", pr("closed", "main"), true, ""},
		{"pr base branch", "on: {pull_request: {branches: [main]}}", pr("opened", "dev"), false, `base branch "dev"`},
		{"pr via merge_request", "on: {pull_request: {branches: [main]}}", &compiler.Event{Name: "merge_request", BaseBranch: "main"}, true, "activity type unknown"},
		{"pr paths", "on: {pull_request: {paths: ['api/**']}}", pr("synchronize", "main", "web/x"), false, ""},
		{"pr base unknown", "on: {pull_request: {branches: [main]}}", pr("opened", ""), true, "base branch unknown"},
		{"manual", "on: workflow_dispatch", &compiler.Event{Name: "manual"}, true, ""},
		{"manual by GitHub's name", "on: workflow_dispatch", &compiler.Event{Name: "workflow_dispatch"}, true, ""},
		{"schedule", "on: {schedule: [{cron: '0 3 * * *'}]}", &compiler.Event{Name: "schedule"}, true, ""},
		{"workflow_run", "on: {workflow_run: {workflows: [Build], branches: [main]}}",
			&compiler.Event{Name: "workflow_run", Branch: "main", Payload: map[string]any{"workflow_run": map[string]any{"name": "Build"}}}, true, ""},
		{"workflow_run other workflow", "on: {workflow_run: {workflows: [Build]}}",
			&compiler.Event{Name: "workflow_run", Payload: map[string]any{"workflow_run": map[string]any{"name": "Deploy"}}}, false, `workflow run of "Deploy"`},
		{"release types", "on: {release: {types: [published]}}", &compiler.Event{Name: "release", Payload: map[string]any{"action": "created"}}, false, ""},
		{"one of several events", "on: [pull_request, push]", push("x"), true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			plan := compileGitHub(t, tt.on+jobsOnly)
			ok, why := plan.Triggered(tt.ev)
			require.Equal(t, tt.want, ok, "reason: %s", why)
			require.Contains(t, why, tt.why)
		})
	}
}

func TestTriggeredWithoutTriggers(t *testing.T) {
	t.Parallel()
	plan, diags, err := compiler.CompileBytes(".cikit.yml", []byte("jobs: {a: {steps: [make]}}"), compiler.Options{})
	require.NoError(t, err)
	require.Empty(t, diags)
	ok, why := plan.Triggered(&compiler.Event{Name: "push"})
	require.True(t, ok)
	require.Equal(t, "the pipeline declares no triggers", why)
}

// TestSkippedByPaths: only an event that the path filters alone keep out
// is skipped by paths.
func TestSkippedByPaths(t *testing.T) {
	t.Parallel()
	plan := compileGitHub(t, "on: {pull_request: {branches: [main], paths: ['src/**']}}\n"+jobsOnly)
	pr := func(base string, files []string) *compiler.Event {
		return &compiler.Event{Name: "pull_request", BaseBranch: base, ChangedFiles: files, Payload: map[string]any{"action": "opened"}}
	}
	require.True(t, plan.SkippedByPaths(pr("main", []string{"docs/guide.md", "README.md"})), "only docs changed")
	require.False(t, plan.SkippedByPaths(pr("main", []string{"docs/guide.md", "src/a.go"})), "triggered")
	require.False(t, plan.SkippedByPaths(pr("dev", []string{"docs/guide.md"})), "the branch filter keeps it out too")
	require.False(t, plan.SkippedByPaths(pr("main", nil)), "changed files unknown: triggered")
	require.False(t, plan.SkippedByPaths(&compiler.Event{Name: "push", Ref: "refs/heads/main", ChangedFiles: []string{"x"}}), "another event")
	require.False(t, plan.SkippedByPaths(nil))
}
