package process_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet/process"
)

// gitRepo makes a repository with one commit holding files and returns
// its directory and the commit.
func gitRepo(t *testing.T, files map[string]string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir, "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "-b", "main")
	for name, content := range files {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	git("add", "-A")
	git("commit", "-q", "-m", "first")
	return dir, git("rev-parse", "HEAD")
}

// gitCheckouter checks out with the git client from a repository on
// disk (Source.URL is its directory), and records the requests.
type gitCheckouter struct {
	mu   sync.Mutex
	reqs []process.CheckoutRequest
	// fail, when set, is every checkout's error: the forge is down.
	fail error
}

func (g *gitCheckouter) Checkout(ctx context.Context, req process.CheckoutRequest) (process.CheckoutResult, error) {
	g.mu.Lock()
	g.reqs = append(g.reqs, req)
	g.mu.Unlock()
	if g.fail != nil {
		return process.CheckoutResult{}, g.fail
	}
	rev := req.SHA
	if req.Options.Ref != "" {
		rev = req.Options.Ref
	}
	run := func(dir string, args ...string) error {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
		out, err := cmd.CombinedOutput()
		fmt.Fprintf(req.Log, "%s", out)
		return err
	}
	if run(req.Source.URL, "cat-file", "-e", rev+"^{commit}") != nil {
		return process.CheckoutResult{}, fmt.Errorf("%s: %w", rev, process.ErrCommitNotFound)
	}
	if err := run(req.Dir, "clone", "-q", "--no-checkout", req.Source.URL, "."); err != nil {
		return process.CheckoutResult{}, err
	}
	if err := run(req.Dir, "checkout", "-q", rev); err != nil {
		return process.CheckoutResult{}, err
	}
	return process.CheckoutResult{Commit: rev}, nil
}

func (g *gitCheckouter) requests() []process.CheckoutRequest {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]process.CheckoutRequest(nil), g.reqs...)
}

// jobContext is the context of a push of sha to repo's main branch.
func jobContext(repo, sha string) *cikit.JobContext {
	return &cikit.JobContext{
		RunContext: cikit.RunContext{Provider: "local", Repository: "acme/app", Event: "push", Ref: "refs/heads/main", RefName: "main", RefType: "branch", SHA: sha, Actor: "ada"},
		RunID:      "run-1", Attempt: 1,
		Source: &cikit.CheckoutSource{URL: repo, Username: "job", Token: "tok-3f9c1e"},
	}
}

// TestRunJobChecksOutTheCommit: a job with a Checkout and a source starts
// in a checkout of its commit, made outside the sandbox; the log and the
// result say which commit, and the source's token is nowhere in the job's
// environment.
func TestRunJobChecksOutTheCommit(t *testing.T) {
	t.Parallel()
	repo, sha := gitRepo(t, map[string]string{"go.mod": "module example.com/app\n", "pkg/a.txt": "in the commit\n"})
	eachMode(t, func(t *testing.T, mode func(*process.Config)) {
		co := &gitCheckouter{}
		b := setup(t, mode, func(c *process.Config) { c.Checkout = co })
		res := b.exec.RunJob(context.Background(), process.Job{
			Spec:    &cikit.JobSpec{ID: "test", Format: "native", Checkout: &cikit.Checkout{}, Steps: steps("cat pkg/a.txt; git rev-parse HEAD", "env; ls -A")},
			Context: jobContext(repo, sha),
		})
		out := b.out.String()
		require.Equal(t, cikit.JobSucceeded, res.State, out)
		require.Contains(t, out, "in the commit\n"+sha+"\n")
		require.Regexp(t, `--- checkout `+sha+` \(\d+(\.\d+)?m?s\)\n`, out)
		require.Equal(t, sha, res.Commit)
		require.Positive(t, res.CheckoutDuration)
		require.NotContains(t, out, "tok-3f9c1e")
		require.NotContains(t, out, "input.txt", "the runner's fixed directory is not copied")
		require.Contains(t, res.EnvNames, "CI")
		require.NotContains(t, res.EnvNames, "CIKIT_JOB_TOKEN")
		require.IsNonDecreasing(t, res.EnvNames)
		reqs := co.requests()
		require.Len(t, reqs, 1)
		require.Equal(t, sha, reqs[0].SHA)
		require.Equal(t, "acme/app", reqs[0].Repository)
	})
}

// TestRunJobCheckoutFailures: a commit that does not exist fails the job
// as a configuration error (no retry helps), a forge that cannot be
// reached as an infrastructure failure; no step runs.
func TestRunJobCheckoutFailures(t *testing.T) {
	t.Parallel()
	repo, _ := gitRepo(t, map[string]string{"a": "a"})
	for _, tc := range []struct {
		name  string
		sha   string
		fail  error
		class cikit.FailureClass
		log   string
	}{
		{"commit not found", "0123456789abcdef0123456789abcdef01234567", nil, cikit.FailureConfig, "checkout: 0123456789abcdef0123456789abcdef01234567: commit not found"},
		{"forge unreachable", "0123456789abcdef0123456789abcdef01234567", errors.New("dial tcp: connection refused"), cikit.FailureInfrastructure, "checkout: dial tcp: connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(c *process.Config) { c.Checkout = &gitCheckouter{fail: tc.fail} })
			res := b.exec.RunJob(context.Background(), process.Job{
				Spec:    &cikit.JobSpec{ID: "x", Checkout: &cikit.Checkout{}, Steps: steps("echo ran")},
				Context: jobContext(repo, tc.sha),
			})
			require.Equal(t, cikit.JobFailed, res.State)
			require.Equal(t, tc.class, res.FailureClass)
			require.Equal(t, tc.log, res.Reason)
			require.Contains(t, b.out.String(), "--- "+tc.log+"\n")
			require.NotContains(t, b.out.String(), "ran")
			require.Empty(t, res.Steps)
		})
	}
	t.Run("no checkouter", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res := b.exec.RunJob(context.Background(), process.Job{Spec: &cikit.JobSpec{ID: "x", Checkout: &cikit.Checkout{}, Steps: steps("true")}, Context: jobContext(repo, "abc")})
		require.Equal(t, cikit.FailureInfrastructure, res.FailureClass)
		require.Contains(t, res.Reason, "this runner has no checkout configured")
	})
	t.Run("strategy none", func(t *testing.T) {
		t.Parallel()
		co := &gitCheckouter{}
		b := setup(t, func(c *process.Config) { c.Checkout = co })
		res := b.exec.RunJob(context.Background(), process.Job{Spec: &cikit.JobSpec{ID: "x", Checkout: &cikit.Checkout{Strategy: "none"}, Steps: steps("ls -A; echo listed")}, Context: jobContext(repo, "abc")})
		require.Equal(t, cikit.JobSucceeded, res.State)
		require.Equal(t, "listed\n", printed(b.out.String()))
		require.Contains(t, b.out.String(), "--- checkout: none (strategy none): the workspace starts empty\n")
		require.Empty(t, co.requests())
	})
}

// TestRunJobActionsCheckout: a GitHub step using actions/checkout at any
// version is the runner's checkout with the step's inputs; inputs it does
// not honour are warned about.
func TestRunJobActionsCheckout(t *testing.T) {
	t.Parallel()
	repo, sha := gitRepo(t, map[string]string{"README": "readme\n"})
	eachMode(t, func(t *testing.T, mode func(*process.Config)) {
		co := &gitCheckouter{}
		b := setup(t, mode, func(c *process.Config) { c.Checkout = co })
		res := b.exec.RunJob(context.Background(), process.Job{
			Spec: &cikit.JobSpec{ID: "gh", Format: "github", Steps: []cikit.Step{
				{Name: "before", Run: "ls -A; echo empty"},
				{Name: "checkout", Uses: "actions/checkout@v4", With: map[string]string{"fetch-depth": "0", "path": "src", "submodules": "recursive", "clean": "false", "lfs": "true"}},
				{Name: "after", Run: "cat src/README"},
			}},
			Context: jobContext(repo, sha),
		})
		out := b.out.String()
		require.Equal(t, cikit.JobSucceeded, res.State, out)
		require.Contains(t, out, "--- before\nempty\n")
		require.Contains(t, out, "--- checkout (actions/checkout@v4)\n")
		require.Contains(t, out, `--- warning: actions/checkout input "lfs" is not honoured`)
		require.Contains(t, out, "--- after\nreadme\n")
		require.Equal(t, sha, res.Commit)
		reqs := co.requests()
		require.Len(t, reqs, 1)
		require.Equal(t, cikit.Checkout{Strategy: "fetch", Depth: -1, Submodules: "recursive"}, reqs[0].Options)
		require.Equal(t, "src", filepath.Base(reqs[0].Dir))
	})
}

// TestRunJobUsesAnotherAction: an action the runner cannot run fails its
// step, naming it, instead of passing without doing anything.
func TestRunJobUsesAnotherAction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.exec.RunJob(context.Background(), process.Job{Spec: &cikit.JobSpec{ID: "gh", Format: "github", Steps: []cikit.Step{
		{Name: "setup go", Uses: "actions/setup-go@v5"},
		{Name: "never", Run: "echo never"},
	}}})
	require.Equal(t, cikit.JobFailed, res.State)
	require.Equal(t, cikit.FailureConfig, res.FailureClass)
	require.Equal(t, `step "setup go": uses actions/setup-go@v5: this runner runs only actions/checkout and local composite actions (uses: ./path) today; JavaScript, Docker and remote actions are not run yet`, res.Reason)
	require.NotContains(t, b.out.String(), "never\n")
}

// TestRunJobWarnings: what the job asks for and the platform does not
// honour is at the top of its log.
func TestRunJobWarnings(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.exec.RunJob(context.Background(), process.Job{Spec: &cikit.JobSpec{ID: "w", Warnings: []string{"services are not started: postgres", "cache is not restored"}, Steps: steps("echo ran")}})
	require.Equal(t, cikit.JobSucceeded, res.State)
	require.True(t, strings.HasPrefix(b.out.String(), "--- warning: services are not started: postgres\n--- warning: cache is not restored\n"), b.out.String())
}

// TestRunJobWorkingDirectory: an absolute working directory is used as it
// is (it was joined under the workspace, and the step failed with a
// misleading "fork/exec /usr/bin/sh: no such file or directory"); a
// relative one that does not exist is named.
func TestRunJobWorkingDirectory(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode func(*process.Config)) {
		b := setup(t, mode)
		res := b.exec.Run(context.Background(), &cikit.JobSpec{ID: "wd", Steps: []cikit.Step{{Name: "abs", Run: "pwd", WorkingDirectory: "/usr"}}})
		require.Equal(t, cikit.JobSucceeded, res.State, b.out.String())
		require.Equal(t, "/usr\n", printed(b.out.String()))

		res = b.exec.Run(context.Background(), &cikit.JobSpec{ID: "wd", Steps: []cikit.Step{{Name: "missing", Run: "pwd", WorkingDirectory: "no/such"}}})
		require.Equal(t, cikit.JobFailed, res.State)
		require.Equal(t, `step "missing": working directory "no/such" does not exist`, res.Reason)
	})
}

// TestRunJobGitHubShells: a GitHub job's steps run as on GitHub: from a
// file with bash -e by default, bash with pipefail when asked by name, sh
// with -e.
func TestRunJobGitHubShells(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode func(*process.Config)) {
		b := setup(t, mode)
		res := b.exec.RunJob(context.Background(), process.Job{Spec: &cikit.JobSpec{ID: "sh", Format: "github", Steps: []cikit.Step{
			{Name: "default", Run: `echo "default: ${BASH_VERSION:+bash} $(basename "$(dirname "$0")")"; false | true; echo "no pipefail"`},
			{Name: "sh", Run: `echo "sh: ${BASH_VERSION:-not bash}"`, Shell: "sh"},
			{Name: "bash", Run: "false | true; echo unreachable", Shell: "bash"},
		}}})
		out := b.out.String()
		require.Equal(t, cikit.JobFailed, res.State, out)
		require.Equal(t, `step "bash" exited with code 1`, res.Reason)
		require.Equal(t, "default: bash temp\nno pipefail\nsh: not bash\n", printed(out))
	})
}

// TestRunJobGitLabAfterStepsSeeTheStatus: GitLab's after_script sees
// CI_JOB_STATUS.
func TestRunJobGitLabAfterStepsSeeTheStatus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		script string
		status string
	}{{"true", "success"}, {"exit 2", "failed"}} {
		b := setup(t)
		b.exec.RunJob(context.Background(), process.Job{Spec: &cikit.JobSpec{ID: "gl", Format: "gitlab", Steps: steps(tc.script), AfterSteps: steps(`echo "status $CI_JOB_STATUS"`)}})
		require.Equal(t, "status "+tc.status+"\n", printed(b.out.String()))
	}
}

// TestRunJobGitHubEnvironmentFiles: GITHUB_ENV (one-line and multi-line
// forms) and GITHUB_PATH reach the later steps, with the job's env
// winning over GITHUB_ENV as on GitHub; a step summary is shown;
// GITHUB_EVENT_PATH holds the payload; a malformed file fails its step,
// naming the line.
func TestRunJobGitHubEnvironmentFiles(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode func(*process.Config)) {
		b := setup(t, mode)
		jc := jobContext("", "abc")
		jc.Source = nil
		jc.Payload = []byte(`{"pusher":{"name":"ada"}}`)
		res := b.exec.RunJob(context.Background(), process.Job{Context: jc, Spec: &cikit.JobSpec{ID: "env", Format: "github", Env: map[string]string{"FIXED": "job"}, Steps: []cikit.Step{
			{Name: "write", Run: `mkdir -p "$RUNNER_TEMP/bin" && printf '#!/bin/sh\necho tool ran\n' > "$RUNNER_TEMP/bin/mytool" && chmod +x "$RUNNER_TEMP/bin/mytool"
echo "ONE=1" >> "$GITHUB_ENV"
printf 'MULTI<<EOF\nline a\nline b\nEOF\n' >> "$GITHUB_ENV"
echo "FIXED=from-file" >> "$GITHUB_ENV"
echo "$RUNNER_TEMP/bin" >> "$GITHUB_PATH"
echo "### done" >> "$GITHUB_STEP_SUMMARY"`},
			{Name: "read", Run: `echo "one=$ONE fixed=$FIXED"; echo "$MULTI"; mytool; cat "$GITHUB_EVENT_PATH"; echo; echo "sha=$GITHUB_SHA actor=$GITHUB_ACTOR ws=$([ "$GITHUB_WORKSPACE" = "$(pwd)" ] && echo ok)"`},
			{Name: "bad", Run: `echo "NOT A LINE" >> "$GITHUB_ENV"`},
		}}})
		out := b.out.String()
		require.Equal(t, cikit.JobFailed, res.State, out)
		require.Contains(t, res.Reason, `step "bad": GITHUB_ENV: line 1`)
		require.Contains(t, out, "--- summary of step \"write\" (GITHUB_STEP_SUMMARY, 9 bytes; the run page does not show summaries yet):\n### done\n")
		require.Contains(t, out, "--- read\none=1 fixed=job\nline a\nline b\ntool ran\n"+`{"pusher":{"name":"ada"}}`+"\nsha=abc actor=ada ws=ok\n")
		require.Contains(t, res.EnvNames, "GITHUB_ENV")
		require.Contains(t, res.EnvNames, "ONE")
	})
}

// TestRunJobWorkflowCommands: a GitHub job's workflow commands act: a
// masked value is *** from then on, annotations are the result's with
// their step, groups stay in the log.
func TestRunJobWorkflowCommands(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode func(*process.Config)) {
		b := setup(t, mode)
		res := b.exec.RunJob(context.Background(), process.Job{Spec: &cikit.JobSpec{ID: "cmd", Format: "github", Steps: []cikit.Step{
			{Name: "mask", Run: `echo "::add-mask::hunter2"; echo "the secret is hunter2"`},
			{Name: "lint", Run: `echo "::group::Lint"; echo "::error file=main.go,line=3,col=7::unused variable x"; echo "::endgroup::"; printf 'no newline hunter2'`},
			{Name: "later", Run: `echo "still hunter2"; echo "::warning::deprecated"`},
		}}})
		out := b.out.String()
		require.Equal(t, cikit.JobSucceeded, res.State, out)
		require.NotContains(t, out, "hunter2")
		require.Contains(t, out, "the secret is ***\n")
		require.Contains(t, out, "no newline ***\n--- later\nstill ***\n")
		require.Contains(t, out, "Lint")
		require.Equal(t, []cikit.Annotation{
			{Level: "error", Message: "unused variable x", File: "main.go", Line: 3, Col: 7, Step: "lint"},
			{Level: "warning", Message: "deprecated", Step: "later"},
		}, res.Annotations)
	})
}
