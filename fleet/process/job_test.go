package process_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet/checkout"
	"github.com/cikit/cikit/fleet/process"
	"github.com/cikit/cikit/vcs/gitserve/gitservetest"
)

// forge serves a repository acme/app with one commit of files over git's
// smart HTTP, readable with the credential job:tok-3f9c1e, and returns a
// checkouter with a cache of its own, the context of a push of the commit
// and the commit.
func forge(t *testing.T, files map[string]string) (*checkout.Checkouter, *cikit.JobContext, string) {
	t.Helper()
	return forgeCache(t, files, t.TempDir())
}

// forgeCache is forge with the checkouter's cache in the directory cache.
func forgeCache(t *testing.T, files map[string]string, cache string) (*checkout.Checkouter, *cikit.JobContext, string) {
	t.Helper()
	repos := gitservetest.NewRepos(t)
	repos.Create(t, "acme/app", "main")
	sha := repos.Commit(t, "acme/app", "main", files)
	srv := gitservetest.Serve(t, repos.Root, gitservetest.BasicAuth("job", "tok-3f9c1e"))
	co, err := checkout.New(checkout.Config{CacheDir: cache})
	require.NoError(t, err)
	jc := &cikit.JobContext{
		RunContext: cikit.RunContext{Provider: "local", Repository: "acme/app", Event: "push", Ref: "refs/heads/main", RefName: "main", RefType: "branch", SHA: sha, Actor: "ada"},
		RunID:      "run-1", Attempt: 1,
		Source: &cikit.CheckoutSource{URL: srv.URL + "/acme/app.git", Username: "job", Token: "tok-3f9c1e"},
	}
	return co, jc, sha
}

// recorder records the checkouts it passes on.
type recorder struct {
	process.Checkouter
	mu   sync.Mutex
	reqs []checkout.Request
}

func (r *recorder) Checkout(ctx context.Context, req checkout.Request) (checkout.Result, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	return r.Checkouter.Checkout(ctx, req)
}

func (r *recorder) requests() []checkout.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reqs)
}

// noRun is a job context without a commit source: a runner's fixed
// directory.
func noRun() *cikit.JobContext {
	return &cikit.JobContext{RunContext: cikit.RunContext{SHA: "abc", Actor: "ada", Event: "push"}, RunID: "run-1", Attempt: 1}
}

// TestRunJobChecksOutTheCommit: a job with a Checkout and a source starts
// in a checkout of its commit, made outside the sandbox; the log and the
// result say which commit, and the source's token is nowhere in the job's
// environment, output or git configuration.
func TestRunJobChecksOutTheCommit(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode func(*process.Config)) {
		co, jc, sha := forge(t, map[string]string{"go.mod": "module example.com/app\n", "pkg/a.txt": "in the commit\n"})
		rec := &recorder{Checkouter: co}
		b := setup(t, mode, func(c *process.Config) { c.Checkout = rec })
		res := b.exec.RunJob(context.Background(), process.Job{
			Spec:    &cikit.JobSpec{ID: "test", Format: "native", Checkout: &cikit.Checkout{}, Steps: steps("cat pkg/a.txt; git rev-parse HEAD; git status --short; echo clean", "env; ls -A; cat .git/config")},
			Context: jc,
		})
		out := b.out.String()
		require.Equal(t, cikit.JobSucceeded, res.State, out)
		require.Contains(t, out, "in the commit\n"+sha+"\nclean\n")
		require.Regexp(t, `--- checkout `+sha+` \(\d+(\.\d+)?m?s\)\n`, out)
		require.Equal(t, sha, res.Commit)
		require.Positive(t, res.CheckoutDuration)
		require.NotContains(t, out, "tok-3f9c1e")
		require.NotContains(t, out, "input.txt", "the runner's fixed directory is not copied")
		require.Contains(t, res.EnvNames, "CIKIT_SHA")
		require.IsNonDecreasing(t, res.EnvNames)
		reqs := rec.requests()
		require.Len(t, reqs, 1)
		require.Equal(t, sha, reqs[0].SHA)
		require.Equal(t, "acme/app", reqs[0].Repository)
	})
}

// cacheRecorder is a recorder of a checkouter that says where the objects
// of a work tree will be: a process.ObjectCache.
type cacheRecorder struct {
	*recorder
	co *checkout.Checkouter
}

func (r cacheRecorder) ObjectDir(ctx context.Context, req checkout.Request) (string, error) {
	return r.co.ObjectDir(ctx, req)
}

// TestRunJobSandboxShowsTheCache: in a sandbox, the checkout before the
// first step borrows the objects of the runner's git cache, which the
// sandbox shows read-only, instead of copying them, when the sandbox's
// user may reach the cache; git works in the job either way. An
// actions/checkout step, which runs when the sandbox is up, and a cache
// out of the sandbox user's reach have the objects copied, the latter
// saying why in the job's log.
func TestRunJobSandboxShowsTheCache(t *testing.T) {
	t.Parallel()
	// Whatever the job's git needs of the object store, and whether the
	// work tree borrows from the cache and could write there.
	const probe = `git rev-parse HEAD; git status --short; git cat-file -p HEAD^{tree} | wc -l | tr -d ' '; git log --format=%s
if test -f .git/objects/info/alternates; then alt=$(cat .git/objects/info/alternates); echo "borrows $alt"
  if touch "$alt/probe" 2>/dev/null; then echo writable; else echo read-only; fi
else echo "copied $(ls .git/objects/pack | grep -c '\.pack$') pack"; fi`
	for _, tc := range []struct {
		name      string
		reachable bool // the cache is in a directory the sandbox's user may search
		github    bool // the checkout is an actions/checkout step
		borrows   bool
	}{
		{name: "first step", reachable: true, borrows: true},
		{name: "actions/checkout step", reachable: true, github: true},
		{name: "cache out of reach"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if !tc.reachable && os.Geteuid() != 0 {
				t.Skip("only a runner started as root has a sandbox user of another uid, which a directory can keep out")
			}
			parent := searchableDir(t)
			if !tc.reachable {
				parent = filepath.Join(parent, "private")
				require.NoError(t, os.Mkdir(parent, 0o700)) // only the runner's user may search it
			}
			cache := filepath.Join(parent, "git-cache")
			co, jc, sha := forgeCache(t, map[string]string{"go.mod": "module example.com/app\n", "pkg/a.txt": "a\n"}, cache)
			rec := cacheRecorder{&recorder{Checkouter: co}, co}
			b := setup(t, sandboxed, func(c *process.Config) { c.Checkout = rec })
			spec := &cikit.JobSpec{ID: "test", Format: "native", Checkout: &cikit.Checkout{}, Steps: steps(probe)}
			if tc.github {
				spec = &cikit.JobSpec{ID: "test", Format: "github", Steps: []cikit.Step{{Name: "checkout", Uses: "actions/checkout@v4"}, {Name: "probe", Run: probe}}}
			}
			res := b.exec.RunJob(context.Background(), process.Job{Spec: spec, Context: jc})
			out := b.out.String()
			require.Equal(t, cikit.JobSucceeded, res.State, out)
			require.Contains(t, out, sha+"\n2\ncommit 1\n", "git reads the commit, its tree of go.mod and pkg, and its message")
			reqs := rec.requests()
			require.Len(t, reqs, 1)
			require.Equal(t, !tc.borrows, reqs[0].Dissociate)
			if tc.borrows {
				require.Regexp(t, `borrows `+regexp.QuoteMeta(cache)+`/acme_app-[0-9a-f]+\.git/objects\nread-only\n`, out)
			} else {
				require.Contains(t, out, "copied 1 pack\n")
			}
			const copied = "--- checkout: the objects are copied into the workspace: the sandbox's user"
			if tc.reachable {
				require.NotContains(t, out, copied)
			} else {
				require.Contains(t, out, copied+" (uid ")
				require.Contains(t, out, "cannot reach the git cache "+cache+"/acme_app-")
				require.Contains(t, out, ".git/objects: "+parent+" (mode drwx------")
			}
		})
	}
}

// TestRunJobCheckoutFailures: a commit that does not exist fails the job
// as a configuration error (no retry helps), a forge that cannot be
// reached as an infrastructure failure; no step runs.
func TestRunJobCheckoutFailures(t *testing.T) {
	t.Parallel()
	co, jc, _ := forge(t, map[string]string{"a": "a"})
	missing := *jc
	missing.SHA = "0123456789abcdef0123456789abcdef01234567"
	down := missing
	// A token long enough to be masked: a shorter one fails the job
	// before the checkout (TestRunJobMasksSecrets).
	down.Source = &cikit.CheckoutSource{URL: "http://127.0.0.1:1/acme/app.git", Username: "job", Token: "job-token-1"}
	for _, tc := range []struct {
		name  string
		jc    *cikit.JobContext
		class cikit.FailureClass
		err   error
	}{
		{"commit not found", &missing, cikit.FailureConfig, checkout.ErrCommitNotFound},
		{"forge unreachable", &down, cikit.FailureInfrastructure, checkout.ErrUnreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(c *process.Config) { c.Checkout = co })
			res := b.exec.RunJob(context.Background(), process.Job{Spec: &cikit.JobSpec{ID: "x", Checkout: &cikit.Checkout{}, Steps: steps("echo ran")}, Context: tc.jc})
			require.Equal(t, cikit.JobFailed, res.State)
			require.Equal(t, tc.class, res.FailureClass, res.Reason)
			require.True(t, strings.HasPrefix(res.Reason, "checkout: "), res.Reason)
			require.Contains(t, res.Reason, tc.err.Error())
			require.Contains(t, b.out.String(), "--- "+res.Reason+"\n")
			require.NotContains(t, printed(b.out.String()), "ran\n")
			require.Empty(t, res.Steps)
		})
	}
	t.Run("no checkouter", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res := b.exec.RunJob(context.Background(), process.Job{Spec: &cikit.JobSpec{ID: "x", Checkout: &cikit.Checkout{}, Steps: steps("true")}, Context: jc})
		require.Equal(t, cikit.FailureInfrastructure, res.FailureClass)
		require.Contains(t, res.Reason, "this runner has no checkout configured")
	})
	t.Run("strategy none", func(t *testing.T) {
		t.Parallel()
		rec := &recorder{Checkouter: co}
		b := setup(t, func(c *process.Config) { c.Checkout = rec })
		res := b.exec.RunJob(context.Background(), process.Job{Spec: &cikit.JobSpec{ID: "x", Checkout: &cikit.Checkout{Strategy: "none"}, Steps: steps("ls -A; echo listed")}, Context: jc})
		require.Equal(t, cikit.JobSucceeded, res.State)
		require.Equal(t, "listed\n", printed(b.out.String()))
		require.Contains(t, b.out.String(), "--- checkout: none (strategy none): the workspace starts empty\n")
		require.Empty(t, rec.requests())
	})
}

// TestRunJobActionsCheckout: a GitHub step using actions/checkout at any
// version is the runner's checkout with the step's inputs; inputs it does
// not honour are warned about.
func TestRunJobActionsCheckout(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode func(*process.Config)) {
		co, jc, sha := forge(t, map[string]string{"README": "readme\n"})
		rec := &recorder{Checkouter: co}
		b := setup(t, mode, func(c *process.Config) { c.Checkout = rec })
		res := b.exec.RunJob(context.Background(), process.Job{
			Spec: &cikit.JobSpec{ID: "gh", Format: "github", Steps: []cikit.Step{
				{Name: "before", Run: "ls -A; echo empty"},
				{Name: "checkout", Uses: "actions/checkout@v4", With: map[string]string{"fetch-depth": "0", "path": "src", "clean": "false", "lfs": "true"}},
				{Name: "after", Run: "cat src/README; git -C src log --format=%H"},
			}},
			Context: jc,
		})
		out := b.out.String()
		require.Equal(t, cikit.JobSucceeded, res.State, out)
		require.Contains(t, out, "--- before\nempty\n")
		require.Contains(t, out, "--- checkout (actions/checkout@v4)\n")
		require.Contains(t, out, `--- warning: actions/checkout input "lfs" is not used: this runner does not honour it`)
		require.Contains(t, out, "--- after\nreadme\n"+sha+"\n")
		require.Equal(t, sha, res.Commit)
		reqs := rec.requests()
		require.Len(t, reqs, 1)
		require.Equal(t, cikit.Checkout{Strategy: "fetch", Depth: -1, Path: "src"}, reqs[0].Options)
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
	require.Equal(t, `step "setup go": uses actions/setup-go@v5: this runner runs only actions/checkout, actions/cache, actions/upload-artifact, actions/download-artifact and local composite actions (uses: ./path) today; other JavaScript, Docker and remote actions are not run yet`, res.Reason)
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

		res = b.exec.Run(context.Background(), &cikit.JobSpec{ID: "wd", Steps: []cikit.Step{{Name: "missing", Run: "pwd", WorkingDirectory: "/no/such/dir"}}})
		require.Equal(t, cikit.JobFailed, res.State)
		require.Equal(t, `step "missing": working directory "/no/such/dir" does not exist`, res.Reason)
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
		jc := noRun()
		jc.Payload = []byte(`{"pusher":{"name":"ada"}}`)
		res := b.exec.RunJob(context.Background(), process.Job{Context: jc, Spec: &cikit.JobSpec{ID: "env", Format: "github", Env: map[string]string{"FIXED": "job"}, Steps: []cikit.Step{
			{Name: "write", Run: `mkdir -p "$RUNNER_TEMP/bin" && printf '#!/bin/sh\necho tool ran\n' > "$RUNNER_TEMP/bin/mytool" && chmod +x "$RUNNER_TEMP/bin/mytool"
echo "ONE=1" >> "$GITHUB_ENV"
printf 'MULTI<<EOF\nline a\nline b\nEOF\n' >> "$GITHUB_ENV"
echo "FIXED=from-file" >> "$GITHUB_ENV"
echo "$RUNNER_TEMP/bin" >> "$GITHUB_PATH"
echo "### done" >> "$GITHUB_STEP_SUMMARY"`},
			{Name: "read", Run: `echo "one=$ONE fixed=$FIXED"; echo "$MULTI"; mytool; cat "$GITHUB_EVENT_PATH"; echo; echo "sha=$GITHUB_SHA actor=$GITHUB_ACTOR ws=$([ "$GITHUB_WORKSPACE" = "$(pwd)" ] && echo ok)"`},
			{Name: "own", Run: `echo "fixed=$FIXED"`, Env: map[string]string{"FIXED": "step ${{ env.ONE }}"}},
			{Name: "bad", Run: `echo "NOT A LINE" >> "$GITHUB_ENV"`},
		}}})
		out := b.out.String()
		require.Equal(t, cikit.JobFailed, res.State, out)
		require.Contains(t, res.Reason, `step "bad": GITHUB_ENV: line 1`)
		require.Contains(t, out, "--- summary of step \"write\" (GITHUB_STEP_SUMMARY, 9 bytes; the run page does not show summaries yet):\n### done\n")
		require.Contains(t, out, "--- read\none=1 fixed=from-file\nline a\nline b\ntool ran\n"+`{"pusher":{"name":"ada"}}`+"\nsha=abc actor=ada ws=ok\n")
		require.Contains(t, out, "--- own\nfixed=step 1\n")
		require.Contains(t, res.EnvNames, "GITHUB_ENV")
		require.Contains(t, res.EnvNames, "ONE")
	})
}

// TestRunJobGitHubEnvRefusesNodeOptions: as on GitHub, a step cannot set
// NODE_OPTIONS for the later steps through GITHUB_ENV: its step fails,
// naming it, and the later steps do not see it.
func TestRunJobGitHubEnvRefusesNodeOptions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.exec.RunJob(context.Background(), process.Job{Spec: &cikit.JobSpec{ID: "env", Format: "github", Steps: []cikit.Step{
		{Name: "inject", Run: `echo "NODE_OPTIONS=--require=./evil.js" >> "$GITHUB_ENV"; echo "OK=1" >> "$GITHUB_ENV"`},
		{Name: "after", Run: `echo "node_options=[$NODE_OPTIONS] ok=$OK"`, If: &cikit.Condition{Lang: cikit.LangGitHub, Expr: "always()"}},
	}}})
	out := b.out.String()
	require.Equal(t, cikit.JobFailed, res.State, out)
	require.Contains(t, res.Reason, `step "inject": GITHUB_ENV: NODE_OPTIONS cannot be set through GITHUB_ENV`)
	require.Contains(t, out, "node_options=[] ok=1\n")
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

// TestRunJobGitHubExpressions: a GitHub job's ${{ }} are evaluated at run
// time in run, env, shell, working-directory and if:, against the run's
// context, the matrix (objects stay objects), needs' results and
// outputs, and earlier steps' outputs, outcomes and conclusions; the
// job's outputs are evaluated at its end.
func TestRunJobGitHubExpressions(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode func(*process.Config)) {
		b := setup(t, mode)
		jc := noRun()
		jc.Repository = "acme/app"
		jc.Needs = map[string]cikit.NeedResult{"build": {Result: cikit.JobSucceeded, Outputs: map[string]string{"version": "1.2.3"}}}
		res := b.exec.RunJob(context.Background(), process.Job{Context: jc, Spec: &cikit.JobSpec{
			ID: "test", Format: "github",
			Matrix:     map[string]string{"cfg": `{"os":"linux"}`},
			MatrixJSON: map[string]json.RawMessage{"cfg": json.RawMessage(`{"os":"linux"}`)},
			Env:        map[string]string{"OWNER": "${{ github.repository_owner }}"},
			Outputs:    map[string]string{"tag": "v${{ steps.ver.outputs.v }}", "flaky": "${{ steps.flaky.outcome }}/${{ steps.flaky.conclusion }}"},
			Steps: []cikit.Step{
				{ID: "ver", Name: "ver", Run: `echo "v=${{ needs.build.outputs.version }}" >> "$GITHUB_OUTPUT"; echo "::set-output name=old::legacy"`},
				{Name: "use", Run: `echo "os=${{ matrix.cfg.os }} owner=$OWNER v=${{ steps.ver.outputs.v }} old=${{ steps.ver.outputs.old }} need=${{ needs.build.result }}"`, Shell: "${{ 'bash' }}", WorkingDirectory: "${{ 'sub' }}"},
				{ID: "flaky", Name: "flaky", Run: "exit 3", ContinueOnError: true},
				{Name: "skipped", Run: "echo skipped", If: &cikit.Condition{Lang: cikit.LangGitHub, Expr: "steps.flaky.outcome == 'success'"}},
				{Name: "failing", Run: "exit 1"},
				{Name: "after failure", Run: "echo not after a failure"},
				{Name: "on failure", Run: "echo on failure", If: &cikit.Condition{Lang: cikit.LangGitHub, Expr: "${{ failure() }}"}},
			},
		}})
		out := b.out.String()
		require.Equal(t, cikit.JobFailed, res.State, out)
		require.Equal(t, `step "failing" exited with code 1`, res.Reason)
		require.Contains(t, out, "--- use\nos=linux owner=acme v=1.2.3 old=legacy need=success\n")
		require.NotContains(t, out, "skipped\n")
		require.NotContains(t, out, "not after a failure")
		require.Contains(t, out, "--- on failure\non failure\n")
		require.Equal(t, map[string]string{"tag": "v1.2.3", "flaky": "failure/success"}, res.Outputs)
	})
}

// TestRunJobOutputsTooLarge: job outputs past their cap fail the job,
// saying so.
func TestRunJobOutputsTooLarge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.exec.RunJob(context.Background(), process.Job{Spec: &cikit.JobSpec{
		ID: "big", Format: "github", Outputs: map[string]string{"blob": "${{ steps.w.outputs.blob }}"},
		Steps: []cikit.Step{{ID: "w", Name: "w", Run: fmt.Sprintf(`head -c %d /dev/zero | tr '\0' x | sed 's/^/blob=/' >> "$GITHUB_OUTPUT"; echo >> "$GITHUB_OUTPUT"`, cikit.MaxOutputValueBytes+1)}},
	}})
	require.Equal(t, cikit.JobFailed, res.State, b.out.String())
	require.Equal(t, cikit.FailureConfig, res.FailureClass)
	require.Contains(t, res.Reason, `job outputs: output "blob" of job "big" is`)
	require.Nil(t, res.Outputs)
}

// TestRunJobLocalCompositeAction: a GitHub step using ./path runs the
// local composite action there: its inputs with their defaults, its
// steps with their own shell and if:, a nested local action, its outputs
// as the step's.
func TestRunJobLocalCompositeAction(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode func(*process.Config)) {
		b := setup(t, mode)
		write := func(rel, content string) {
			require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(b.src, rel)), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(b.src, rel), []byte(content), 0o644))
		}
		write(".github/actions/greet/action.yml", `name: greet
inputs:
  who:
    required: true
  greeting:
    default: hello ${{ github.actor }}
outputs:
  said:
    value: ${{ steps.say.outputs.said }}
runs:
  using: composite
  steps:
    - id: say
      shell: bash
      run: |
        echo "${{ inputs.greeting }}, ${{ inputs.who }} from $(basename "$GITHUB_ACTION_PATH")"
        echo "said=${{ inputs.greeting }} ${{ inputs.who }}" >> "$GITHUB_OUTPUT"
    - if: ${{ inputs.who == 'nobody' }}
      shell: sh
      run: echo never
    - uses: ./.github/actions/inner
      with:
        n: "2"
`)
		write(".github/actions/inner/action.yml", `runs:
  using: composite
  steps:
    - shell: sh
      run: echo "inner ${{ inputs.n }}"
inputs:
  n: {}
`)
		write(".github/actions/node/action.yml", "runs:\n  using: node20\n  main: index.js\n")
		jc := noRun()
		res := b.exec.RunJob(context.Background(), process.Job{Context: jc, Spec: &cikit.JobSpec{ID: "c", Format: "github", Steps: []cikit.Step{
			{ID: "g", Name: "greet", Uses: "./.github/actions/greet", With: map[string]string{"who": "world"}},
			{Name: "show", Run: `echo "got ${{ steps.g.outputs.said }}"`},
			{Name: "node", Uses: "./.github/actions/node"},
		}}})
		out := b.out.String()
		require.Equal(t, cikit.JobFailed, res.State, out)
		require.Contains(t, out, "hello ada, world from greet\n")
		require.Contains(t, out, "inner 2\n")
		require.NotContains(t, out, "never")
		require.Contains(t, out, "--- show\ngot hello ada world\n")
		require.Equal(t, cikit.FailureConfig, res.FailureClass)
		require.Contains(t, res.Reason, `step "node": uses ./.github/actions/node:`)
		require.Contains(t, res.Reason, "node20")
	})
}

// TestRunJobGitLabVariables: a GitLab job's variables that reference the
// run's are expanded when it starts, $$ is a literal $, and its
// predefined variables are GitLab's.
func TestRunJobGitLabVariables(t *testing.T) {
	t.Parallel()
	b := setup(t)
	jc := noRun()
	jc.Repository, jc.RefName, jc.Ref, jc.RefType, jc.SHA = "acme/app", "main", "refs/heads/main", "branch", "0123456789abcdef0123456789abcdef01234567"
	res := b.exec.RunJob(context.Background(), process.Job{Context: jc, Spec: &cikit.JobSpec{ID: "t 1/3", Format: "gitlab",
		Env:   map[string]string{"IMAGE": "registry/$CI_PROJECT_PATH:${CI_COMMIT_SHORT_SHA}", "PRICE": "$$5", "CI_NODE_INDEX": "1", "CI_NODE_TOTAL": "3"},
		Steps: steps(`echo "$IMAGE $PRICE $CI_COMMIT_SHA $CI_COMMIT_BRANCH $CI_NODE_INDEX/$CI_NODE_TOTAL"`)}})
	require.Equal(t, cikit.JobSucceeded, res.State, b.out.String())
	require.Equal(t, "registry/acme/app:01234567 $5 0123456789abcdef0123456789abcdef01234567 main 1/3\n", printed(b.out.String()))
}

// waiting is a Checkouter that signals when a checkout starts and ends
// it only when its context ends.
type waiting struct{ started chan struct{} }

func (w waiting) Checkout(ctx context.Context, _ checkout.Request) (checkout.Result, error) {
	close(w.started)
	<-ctx.Done()
	return checkout.Result{}, ctx.Err()
}

// TestRunJobCancelledDuringCheckout: a job cancelled while its commit is
// fetched is cancelled, not failed.
func TestRunJobCancelledDuringCheckout(t *testing.T) {
	t.Parallel()
	w := waiting{started: make(chan struct{})}
	b := setup(t, func(c *process.Config) { c.Checkout = w })
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-w.started
		cancel()
	}()
	_, jc, _ := forge(t, map[string]string{"a": "a"})
	res := b.exec.RunJob(ctx, process.Job{Context: jc, Spec: &cikit.JobSpec{ID: "c", Checkout: &cikit.Checkout{}, Steps: steps("echo ran")}})
	require.Equal(t, cikit.JobCancelled, res.State)
	require.Equal(t, "cancelled during the checkout", res.Reason)
	require.Empty(t, res.Steps)
}

// TestRunJobCheckoutRefusesALink: a step cannot make actions/checkout
// write outside the workspace by leaving a symbolic link where the
// checkout goes.
func TestRunJobCheckoutRefusesALink(t *testing.T) {
	t.Parallel()
	co, jc, _ := forge(t, map[string]string{"README": "readme\n"})
	outside := t.TempDir()
	b := setup(t, func(c *process.Config) { c.Checkout = co })
	res := b.exec.RunJob(context.Background(), process.Job{Context: jc, Spec: &cikit.JobSpec{ID: "l", Format: "github", Env: map[string]string{"OUTSIDE": outside}, Steps: []cikit.Step{
		{Name: "link", Run: `ln -s "$OUTSIDE" src`},
		{Name: "checkout", Uses: "actions/checkout@v4", With: map[string]string{"path": "src"}},
	}}})
	require.Equal(t, cikit.JobFailed, res.State)
	require.Contains(t, res.Reason, "src is not a directory")
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	require.Empty(t, entries)
}

// TestRunJobCompositeStepTimeout: the timeout of a step using a local
// action bounds the action's steps.
func TestRunJobCompositeStepTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, os.MkdirAll(filepath.Join(b.src, "slow"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(b.src, "slow", "action.yml"), []byte("runs:\n  using: composite\n  steps:\n    - shell: sh\n      run: sleep 600\n    - shell: sh\n      run: echo never\n"), 0o644))
	res := b.exec.RunJob(context.Background(), process.Job{Spec: &cikit.JobSpec{ID: "t", Format: "github", Steps: []cikit.Step{
		{Name: "slow", Uses: "./slow", Timeout: 200 * time.Millisecond},
	}}})
	require.Equal(t, cikit.JobFailed, res.State, b.out.String())
	require.Equal(t, `step "slow": timed out after 200ms`, res.Reason)
	require.NotContains(t, b.out.String(), "never\n")
}

// TestRunJobGitLabAfterStepsOfACancelledJob: a cancelled GitLab job still
// runs its after_script, which sees CI_JOB_STATUS=canceled, and stays
// cancelled.
func TestRunJobGitLabAfterStepsOfACancelledJob(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode func(*process.Config)) {
		b := setup(t, mode)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan process.Result, 1)
		go func() {
			done <- b.exec.RunJob(ctx, process.Job{Spec: &cikit.JobSpec{ID: "gl", Format: "gitlab",
				Steps: steps("echo started; sleep 600"), AfterSteps: steps(`echo "status $CI_JOB_STATUS"`)}})
		}()
		waitOutput(t, b, "started")
		cancel()
		res := <-done
		require.Equal(t, cikit.JobCancelled, res.State, b.out.String())
		require.Equal(t, `cancelled in step "echo started; sleep 600"`, res.Reason)
		require.Equal(t, "started\nstatus canceled\n", printed(b.out.String()))
		require.Len(t, res.Steps, 2)
	})
}

// TestRunJobFailedCheckoutStepLeavesTheWorkspaceWritable: after an
// actions/checkout step that failed and may fail, the later steps can
// still write the workspace.
func TestRunJobFailedCheckoutStepLeavesTheWorkspaceWritable(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode func(*process.Config)) {
		co, jc, _ := forge(t, map[string]string{"a": "a"})
		b := setup(t, mode, func(c *process.Config) { c.Checkout = co })
		res := b.exec.RunJob(context.Background(), process.Job{Context: jc, Spec: &cikit.JobSpec{ID: "w", Format: "github", Steps: []cikit.Step{
			{Name: "checkout", Uses: "actions/checkout@v4", With: map[string]string{"ref": "no-such-branch"}, ContinueOnError: true},
			{Name: "write", Run: "touch here && echo wrote"},
		}}})
		require.Equal(t, cikit.JobSucceeded, res.State, b.out.String())
		require.Contains(t, b.out.String(), "(continue on error)")
		require.Contains(t, b.out.String(), "--- write\nwrote\n")
	})
}

// TestRunJobMasksSecrets: the job's secrets are masked in the output of
// a job of every format, raw and encoded, printed in two pieces, and
// where the output is read in chunks; a secret too short to be masked
// fails the job before its first step, naming the secret.
func TestRunJobMasksSecrets(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("xxd"); err != nil {
		t.Fatalf("xxd is needed: %v", err)
	}
	// Long enough that xxd -p wraps its hex; it starts with no x.
	const value = "Zq9-very-secret-token-0123456789abcdefghij"
	script := `printf '%s\n' "$X"
printf %s "$X" | base64
printf %s "$X" | xxd -p
printf %s "$X" | cut -c1-5 | tr -d '\n'; printf %s "$X" | cut -c6-; echo
i=0; while [ $i -lt 60 ]; do head -c 4093 /dev/zero | tr '\0' x; printf %s "$X"; i=$((i+1)); done; echo`
	for _, format := range []string{"native", "gitlab", "github"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			res := b.exec.RunJob(context.Background(), process.Job{
				Spec: &cikit.JobSpec{ID: "mask-" + format, Format: format, Steps: []cikit.Step{
					{Name: "print", Run: script, Shell: "bash", Env: map[string]string{"X": value}},
				}},
				Secrets: map[string]string{"TOKEN": value},
			})
			out := b.out.String()
			require.Equal(t, cikit.JobSucceeded, res.State, res.Reason)
			require.NotContains(t, out, value)
			for _, enc := range []string{base64.StdEncoding.EncodeToString([]byte(value))[:40], hex.EncodeToString([]byte(value))[:60], value[:5] + value[5:20]} {
				require.NotContains(t, out, enc)
			}
			require.GreaterOrEqual(t, strings.Count(out, "x***x"), 59, "each value between the x's is masked")
		})
	}
	t.Run("too short", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res := b.exec.RunJob(context.Background(), process.Job{
			Spec:    &cikit.JobSpec{ID: "short", Format: "native", Steps: steps("echo step ran")},
			Secrets: map[string]string{"LONG_ENOUGH": value, "PIN": "123"},
		})
		require.Equal(t, cikit.JobFailed, res.State)
		require.Equal(t, cikit.FailureConfig, res.FailureClass)
		require.Contains(t, res.Reason, "secret PIN")
		require.Contains(t, res.Reason, "at least 4")
		require.NotContains(t, res.Reason, "123")
		require.NotContains(t, b.out.String(), "step ran")

		jc := noRun()
		jc.Source = &cikit.CheckoutSource{URL: "http://127.0.0.1:1/acme/app.git", Username: "job", Token: "t"}
		res = b.exec.RunJob(context.Background(), process.Job{Spec: &cikit.JobSpec{ID: "short-token", Format: "native", Steps: steps("echo step ran")}, Context: jc})
		require.Equal(t, cikit.JobFailed, res.State)
		require.Equal(t, cikit.FailureInfrastructure, res.FailureClass, "the platform's token, not the job's configuration")
		require.Contains(t, res.Reason, "the checkout token cannot be masked")
		require.NotContains(t, b.out.String(), "step ran")
	})
}

// TestRunJobSecretScriptsStayOffDisk: a GitHub step whose script holds a
// secret once its expressions are expanded runs from memory (/dev/shm: the
// sandbox's own, or the host's tmpfs, where the file is removed when the
// step ends): no file of the job's directories on the runner holds it,
// while a script without one is still a file of RUNNER_TEMP.
func TestRunJobSecretScriptsStayOffDisk(t *testing.T) {
	t.Parallel()
	var st syscall.Statfs_t
	hostTmpfs := syscall.Statfs("/dev/shm", &st) == nil && st.Type == 0x01021994
	eachMode(t, func(t *testing.T, mode func(*process.Config)) {
		value := "off-disk-secret-" + strings.ReplaceAll(t.Name(), "/", "-")
		b := setup(t, mode)
		res := b.exec.RunJob(context.Background(), process.Job{
			Spec: &cikit.JobSpec{ID: "off-disk", Format: "github", Steps: []cikit.Step{
				{Name: "secret", Run: `if grep -rqF -- "${{ secrets.TOKEN }}" "$RUNNER_TEMP" "$GITHUB_WORKSPACE"; then echo ON-DISK; else echo NOT-ON-DISK; fi
printf '%s\n' "${{ secrets.TOKEN }}" | tr a-z A-Z
test "${{ secrets.TOKEN }}" = "$TOKEN_AGAIN" && echo same-value`, Env: map[string]string{"TOKEN_AGAIN": "${{ secrets.TOKEN }}"}},
				{Name: "plain", Run: `ls -a "$RUNNER_TEMP" | grep -c '^.cikit-step-' || true`},
				{Name: "custom", Shell: "sh -e {0}", Run: `echo "custom ${{ secrets.TOKEN }}"`},
			}},
			Secrets: map[string]string{"TOKEN": value},
		})
		out := b.out.String()
		require.Equal(t, cikit.JobSucceeded, res.State, out)
		sandboxed := strings.HasSuffix(t.Name(), "/sandbox")
		if sandboxed || hostTmpfs {
			require.Contains(t, out, "NOT-ON-DISK\n")
		} else {
			require.Contains(t, out, "ON-DISK\n", "without a tmpfs the script is a file of the job's directory")
		}
		require.Contains(t, out, strings.ToUpper(value)+"\n", "the script ran, with the value")
		require.Contains(t, out, "same-value\n")
		require.Regexp(t, `--- plain\n[1-9]`, out, "a script without a secret is still a file of RUNNER_TEMP")
		require.Contains(t, out, "custom ***\n")
		require.NotContains(t, out, value)
		if !sandboxed {
			// The host's /dev/shm keeps no script of the job.
			files, err := filepath.Glob("/dev/shm/cikit-step.*")
			require.NoError(t, err)
			for _, f := range files {
				if b, err := os.ReadFile(f); err == nil {
					require.NotContains(t, string(b), value, "%s is left on the host", f)
				}
			}
		}
	})
}

// TestRunJobFetchedSecrets: secrets fetched before the first step reach a
// native job's steps by the names it gives, are masked, and one missing
// fails the job before its first step, naming it; a refusal by the
// platform is a configuration failure, another error an infrastructure
// one.
func TestRunJobFetchedSecrets(t *testing.T) {
	t.Parallel()
	spec := func(id string) *cikit.JobSpec {
		return &cikit.JobSpec{ID: id, Format: "native", Secrets: []string{"DEPLOY_TOKEN"}, IDTokens: []cikit.IDToken{{Name: "VAULT_ID", Audience: []string{"vault"}}},
			Steps: steps(`echo "STEP-RAN token $DEPLOY_TOKEN id $VAULT_ID other ${OTHER:-none}"`)}
	}
	fetched := func(f *process.FetchedSecrets, err error) process.SecretsFetcher {
		return func(context.Context) (*process.FetchedSecrets, error) { return f, err }
	}
	b := setup(t)
	res := b.exec.RunJob(context.Background(), process.Job{Spec: spec("fetched"),
		FetchSecrets: fetched(&process.FetchedSecrets{Values: map[string]string{"DEPLOY_TOKEN": "deploy-token-value"}, IDTokens: map[string]string{"VAULT_ID": "eyJ.id-token.value"}}, nil)})
	require.Equal(t, cikit.JobSucceeded, res.State, b.out.String())
	require.Contains(t, b.out.String(), "STEP-RAN token *** id *** other none\n")

	for _, c := range []struct {
		name  string
		fetch process.SecretsFetcher
		class cikit.FailureClass
		want  string
	}{
		{"missing", fetched(&process.FetchedSecrets{IDTokens: map[string]string{"VAULT_ID": "eyJ.id-token.value"}}, nil), cikit.FailureConfig, "secrets: DEPLOY_TOKEN not given to the job"},
		{"refused", fetched(nil, fmt.Errorf("%w: secret DEPLOY_TOKEN not found in the scopes the job may read (repo:acme/app, org:acme)", process.ErrSecretsRefused)), cikit.FailureConfig,
			"secrets: secret DEPLOY_TOKEN not found in the scopes the job may read (repo:acme/app, org:acme)"},
		{"unavailable", fetched(nil, errors.New("server answered 503")), cikit.FailureInfrastructure, "secrets: server answered 503"},
		{"too short", fetched(&process.FetchedSecrets{Values: map[string]string{"DEPLOY_TOKEN": "abc"}, IDTokens: map[string]string{"VAULT_ID": "eyJ.id-token.value"}}, nil), cikit.FailureConfig,
			"secret DEPLOY_TOKEN cannot be masked"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := setup(t)
			res := b.exec.RunJob(context.Background(), process.Job{Spec: spec(c.name), FetchSecrets: c.fetch})
			require.Equal(t, cikit.JobFailed, res.State)
			require.Equal(t, c.class, res.FailureClass)
			require.Contains(t, res.Reason, c.want)
			require.NotContains(t, b.out.String(), "STEP-RAN", "no step ran")
		})
	}
	t.Run("no platform", func(t *testing.T) {
		b := setup(t)
		res := b.exec.RunJob(context.Background(), process.Job{Spec: spec("local"), Secrets: map[string]string{"DEPLOY_TOKEN": "deploy-token-value"}})
		require.Equal(t, cikit.JobFailed, res.State)
		require.Contains(t, res.Reason, "VAULT_ID (an ID token)")
	})
}

// TestRunJobIDTokenRequestCapped: a GitHub job asking for id-token:
// write gets the ID token request variables; the same job whose
// Admission caps its token to reading contents does not, though the
// platform sent them, and its log does not say it asks for them.
func TestRunJobIDTokenRequestCapped(t *testing.T) {
	t.Parallel()
	spec := func(id string, capped bool) *cikit.JobSpec {
		s := &cikit.JobSpec{ID: id, Format: "github", Permissions: map[string]string{"id-token": "write"},
			Steps: []cikit.Step{{Run: `echo "REQUEST-URL ${ACTIONS_ID_TOKEN_REQUEST_URL:-unset}"`}}}
		if capped {
			s.Admission = &cikit.Admission{Decision: cikit.DecisionAllow, TokenPermissions: map[string]string{"contents": "read", "metadata": "read"}}
		}
		return s
	}
	fetch := func(context.Context) (*process.FetchedSecrets, error) {
		return &process.FetchedSecrets{IDTokenRequest: &process.IDTokenRequest{URL: "https://ci.example.com/id-token", Token: "request-token-value"}}, nil
	}
	for _, c := range []struct {
		name   string
		capped bool
		want   string
	}{
		{"uncapped", false, "REQUEST-URL https://ci.example.com/id-token\n"},
		{"capped", true, "REQUEST-URL unset\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := setup(t)
			res := b.exec.RunJob(context.Background(), process.Job{Spec: spec(c.name, c.capped), FetchSecrets: fetch})
			require.Equal(t, cikit.JobSucceeded, res.State, b.out.String())
			require.Contains(t, b.out.String(), c.want)
			if c.capped {
				require.Contains(t, b.out.String(), "--- secrets: fetching nothing")
			}
		})
	}
}

// TestRunJobOutputsHoldNoSecrets: as on GitHub, a job output holding a
// secret is not passed on (outputs are stored and shown), and the log
// says so; the others are.
func TestRunJobOutputsHoldNoSecrets(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.exec.RunJob(context.Background(), process.Job{
		Spec: &cikit.JobSpec{ID: "outputs", Format: "github", Outputs: map[string]string{"leak": "${{ steps.s.outputs.leak }}", "fine": "${{ steps.s.outputs.fine }}"},
			Steps: []cikit.Step{{ID: "s", Run: `echo "leak=token ${{ secrets.TOKEN }}" >> "$GITHUB_OUTPUT"; echo "fine=ok" >> "$GITHUB_OUTPUT"`}}},
		Secrets: map[string]string{"TOKEN": "output-secret-value"},
	})
	require.Equal(t, cikit.JobSucceeded, res.State, b.out.String())
	require.Equal(t, map[string]string{"fine": "ok"}, res.Outputs)
	require.Contains(t, b.out.String(), "job output leak holds a secret: it is not passed on")
}
