package runtime_test

import (
	"encoding/json"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	cikitruntime "github.com/cikit/cikit/fleet/runtime"
)

func pushContext() *cikit.JobContext {
	return &cikit.JobContext{
		RunContext: cikit.RunContext{
			Provider: "github", Repository: "acme/api", RepositoryURL: "https://github.com/acme/api",
			Event: "push", Ref: "refs/heads/feature/Login-Page", RefName: "feature/Login-Page", RefType: "branch",
			SHA: "0123456789abcdef0123456789abcdef01234567", DefaultBranch: "main", Actor: "octocat",
			Payload: json.RawMessage(`{"before":"fedcba9876543210fedcba9876543210fedcba98","pusher":{"name":"octocat"},` +
				`"commits":[{"id":"0123456789abcdef0123456789abcdef01234567","message":"Fix login\r\n\nThe form\nnow works.\n","timestamp":"2026-01-02T03:04:05Z","author":{"name":"Mona","email":"mona@example.com"}}]}`),
		},
		RunID: "r-42", RunNumber: 7, Attempt: 2, RunURL: "https://ci.example/runs/r-42",
	}
}

func TestEnvCommon(t *testing.T) {
	t.Parallel()
	spec := &cikit.JobSpec{ID: "build", Name: "Build", Format: "native"}
	got := cikitruntime.Env(cikitruntime.Params{Spec: spec, Context: pushContext(), Workspace: "/ws/build", Temp: "/tmp/job"})
	require.Empty(t, cmp.Diff(map[string]string{
		"CI": "true", "CIKIT_PROVIDER": "github", "CIKIT_REPOSITORY": "acme/api",
		"CIKIT_SHA": "0123456789abcdef0123456789abcdef01234567", "CIKIT_REF": "refs/heads/feature/Login-Page",
		"CIKIT_REF_NAME": "feature/Login-Page", "CIKIT_REF_TYPE": "branch", "CIKIT_EVENT": "push",
		"CIKIT_ACTOR": "octocat", "CIKIT_DEFAULT_BRANCH": "main", "CIKIT_RUN_ID": "r-42", "CIKIT_RUN_NUMBER": "7", "CIKIT_ATTEMPT": "2",
		"CIKIT_PIPELINE_URL": "https://ci.example/runs/r-42", "CIKIT_JOB_ID": "build", "CIKIT_JOB_NAME": "Build",
		"CIKIT_WORKSPACE": "/ws/build", "CIKIT_TEMP": "/tmp/job",
	}, got))

	bare := cikitruntime.Env(cikitruntime.Params{Spec: &cikit.JobSpec{ID: "x"}})
	require.Equal(t, map[string]string{"CI": "true", "CIKIT_ATTEMPT": "1", "CIKIT_RUN_NUMBER": "1", "CIKIT_JOB_ID": "x"}, bare,
		"a job without a run context sees only what it knows, and that it is a first run")
}

func TestEnvGitHub(t *testing.T) {
	t.Parallel()
	jc := pushContext()
	spec := &cikit.JobSpec{ID: "test (linux, 20)", MatrixOf: "test", Format: "github"}
	got := cikitruntime.Env(cikitruntime.Params{Spec: spec, Context: jc, Workspace: "/ws/t", Temp: "/tmp/j",
		Runner: cikitruntime.Runner{Name: "r1", OS: "Linux", Arch: "ARM64", ToolCache: "/opt/hostedtoolcache"}})
	want := map[string]string{
		"GITHUB_ACTIONS": "true", "GITHUB_SHA": jc.SHA, "GITHUB_REF": jc.Ref, "GITHUB_REF_NAME": jc.RefName,
		"GITHUB_REF_TYPE": "branch", "GITHUB_REPOSITORY": "acme/api", "GITHUB_REPOSITORY_OWNER": "acme",
		"GITHUB_RUN_ID": "r-42", "GITHUB_RUN_NUMBER": "7", "GITHUB_RUN_ATTEMPT": "2", "GITHUB_WORKSPACE": "/ws/t",
		"GITHUB_EVENT_NAME": "push", "GITHUB_EVENT_PATH": "/tmp/j/event.json", "GITHUB_ACTOR": "octocat",
		"GITHUB_TRIGGERING_ACTOR": "octocat", "GITHUB_HEAD_REF": "", "GITHUB_BASE_REF": "",
		"GITHUB_SERVER_URL": "https://github.com", "GITHUB_API_URL": "https://api.github.com",
		"GITHUB_GRAPHQL_URL": "https://api.github.com/graphql", "GITHUB_JOB": "test",
		"RUNNER_OS": "Linux", "RUNNER_ARCH": "ARM64", "RUNNER_NAME": "r1", "RUNNER_TEMP": "/tmp/j",
		"RUNNER_TOOL_CACHE": "/opt/hostedtoolcache", "RUNNER_ENVIRONMENT": "self-hosted",
	}
	for k, v := range want {
		require.Equal(t, v, got[k], k)
	}
	require.Equal(t, "true", got["CI"])
	require.Equal(t, "r-42", got["CIKIT_RUN_ID"])
	require.NotContains(t, got, "CI_COMMIT_SHA")

	ghes := &cikit.JobContext{RunContext: cikit.RunContext{Provider: "github", Repository: "a/b", RepositoryURL: "https://ghe.example/a/b/"}}
	got = cikitruntime.Env(cikitruntime.Params{Spec: spec, Context: ghes, EventPath: "/e.json"})
	require.Equal(t, "https://ghe.example", got["GITHUB_SERVER_URL"])
	require.Equal(t, "https://ghe.example/api/v3", got["GITHUB_API_URL"])
	require.Equal(t, "/e.json", got["GITHUB_EVENT_PATH"])
	require.Equal(t, "1", got["GITHUB_RUN_ATTEMPT"])
	require.Equal(t, "1", got["GITHUB_RUN_NUMBER"], "a run the platform did not number is a first run")
	require.NotEmpty(t, got["RUNNER_OS"], "this machine's OS when the runner does not say")
	if runtime.GOOS == "linux" {
		require.Equal(t, "Linux", got["RUNNER_OS"])
	}
}

func TestEnvGitLab(t *testing.T) {
	t.Parallel()
	jc := pushContext()
	jc.Provider, jc.Repository, jc.RepositoryURL = "gitlab", "acme/platform/api", "https://gitlab.example/acme/platform/api"
	spec := &cikit.JobSpec{ID: "test 1/3", Name: "test 1/3", Stage: "test", Format: "gitlab"}
	got := cikitruntime.Env(cikitruntime.Params{Spec: spec, Context: jc, Workspace: "/builds/acme/api", Temp: "/tmp/j"})
	want := map[string]string{
		"GITLAB_CI": "true", "CI_SERVER": "yes", "CI_COMMIT_SHA": jc.SHA, "CI_COMMIT_SHORT_SHA": "01234567",
		"CI_COMMIT_REF_NAME": "feature/Login-Page", "CI_COMMIT_REF_SLUG": "feature-login-page",
		"CI_COMMIT_BRANCH": "feature/Login-Page", "CI_COMMIT_BEFORE_SHA": "fedcba9876543210fedcba9876543210fedcba98",
		"CI_PIPELINE_ID": "r-42", "CI_PIPELINE_IID": "7", "CI_PIPELINE_URL": "https://ci.example/runs/r-42", "CI_PIPELINE_SOURCE": "push",
		"CI_JOB_ID": "test 1/3", "CI_JOB_NAME": "test 1/3", "CI_JOB_STAGE": "test",
		"CI_PROJECT_PATH": "acme/platform/api", "CI_PROJECT_NAMESPACE": "acme/platform", "CI_PROJECT_NAME": "api",
		"CI_PROJECT_DIR": "/builds/acme/api", "CI_BUILDS_DIR": "/builds/acme", "CI_PROJECT_URL": jc.RepositoryURL,
		"CI_SERVER_URL": "https://gitlab.example", "CI_DEFAULT_BRANCH": "main", "GITLAB_USER_LOGIN": "octocat",
		"TMPDIR": "/tmp/j", "CI_COMMIT_MESSAGE": "Fix login\n\nThe form\nnow works.\n", "CI_COMMIT_TITLE": "Fix login",
		"CI_COMMIT_DESCRIPTION": "The form\nnow works.", "CI_COMMIT_AUTHOR": "Mona <mona@example.com>",
		"CI_COMMIT_TIMESTAMP": "2026-01-02T03:04:05Z",
	}
	for k, v := range want {
		require.Equal(t, v, got[k], k)
	}
	for _, k := range []string{"CI_COMMIT_TAG", "CI_MERGE_REQUEST_IID", "GITHUB_SHA"} {
		require.NotContains(t, got, k)
	}

	tag := pushContext()
	tag.Ref, tag.RefName, tag.RefType, tag.Payload = "refs/tags/v1.2", "v1.2", "tag", nil
	got = cikitruntime.Env(cikitruntime.Params{Spec: spec, Context: tag})
	require.Equal(t, "v1.2", got["CI_COMMIT_TAG"])
	require.NotContains(t, got, "CI_COMMIT_BRANCH")
	require.Equal(t, "0000000000000000000000000000000000000000", got["CI_COMMIT_BEFORE_SHA"])

	mr := pushContext()
	mr.Event, mr.PRNumber, mr.HeadRef, mr.BaseRef = "merge_request_event", 7, "fix", "main"
	mr.Ref, mr.RefName = "refs/merge-requests/7/head", "refs/merge-requests/7/head"
	got = cikitruntime.Env(cikitruntime.Params{Spec: spec, Context: mr})
	require.Equal(t, "7", got["CI_MERGE_REQUEST_IID"])
	require.Equal(t, "fix", got["CI_MERGE_REQUEST_SOURCE_BRANCH_NAME"])
	require.Equal(t, "main", got["CI_MERGE_REQUEST_TARGET_BRANCH_NAME"])
	require.Equal(t, "fix", got["CI_COMMIT_REF_NAME"])
	require.Equal(t, "merge_request_event", got["CI_PIPELINE_SOURCE"])
	require.NotContains(t, got, "CI_COMMIT_BRANCH", "GitLab sets no branch in a merge request pipeline")
}

func TestOverrides(t *testing.T) {
	t.Parallel()
	jc := pushContext()
	jc.Inputs = map[string]string{"DEPLOY": "yes"}
	require.Equal(t, map[string]string{"DEPLOY": "yes"}, cikitruntime.Overrides(cikitruntime.Params{Spec: &cikit.JobSpec{Format: "gitlab"}, Context: jc}))
	require.Nil(t, cikitruntime.Overrides(cikitruntime.Params{Spec: &cikit.JobSpec{Format: "github"}, Context: jc}), "GitHub reads inputs through the inputs context")
	require.Nil(t, cikitruntime.Overrides(cikitruntime.Params{Spec: &cikit.JobSpec{Format: "gitlab"}}))
}

func TestEventJSON(t *testing.T) {
	t.Parallel()
	require.Equal(t, `{}`, string(cikitruntime.EventJSON(nil)))
	require.Equal(t, `{}`, string(cikitruntime.EventJSON(&cikit.JobContext{RunContext: cikit.RunContext{Payload: json.RawMessage(`[1]`)}})))
	require.Equal(t, `{"a":1}`, string(cikitruntime.EventJSON(&cikit.JobContext{RunContext: cikit.RunContext{Payload: json.RawMessage(`{"a":1}`)}})))
}

func TestGitHubFiles(t *testing.T) {
	t.Parallel()
	f := cikitruntime.GitHubFiles("/tmp/j/_files", 3)
	require.Equal(t, "/tmp/j/_files/set_env_3", f.Env)
	v := f.Vars()
	require.Equal(t, map[string]string{
		"GITHUB_ENV": "/tmp/j/_files/set_env_3", "GITHUB_PATH": "/tmp/j/_files/add_path_3",
		"GITHUB_OUTPUT": "/tmp/j/_files/set_output_3", "GITHUB_STEP_SUMMARY": "/tmp/j/_files/step_summary_3",
		"GITHUB_STATE": "/tmp/j/_files/save_state_3",
	}, v)
}
