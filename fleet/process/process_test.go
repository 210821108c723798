package process_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"go.uber.org/goleak"

	"github.com/cikit/cikit/internal/proctest"
	"github.com/cikit/cikit/internal/syncbuf"
	"github.com/cikit/cikit/internal/testenv"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet/process"
)

func TestMain(m *testing.M) {
	if os.Getenv(childWorkRoot) != "" {
		runChildExecutor()
		return
	}
	goleak.VerifyTestMain(m)
}

// printed returns the lines the job's steps printed, without the
// executor's headers, which repeat the steps' scripts.
func printed(out string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(out, "\n") {
		if !strings.HasPrefix(line, "--- ") {
			b.WriteString(line)
		}
	}
	return b.String()
}

type bundle struct {
	src, work string
	out       *syncbuf.Buffer
	exec      *process.Executor
}

// setup returns an executor of a fresh source tree and work root. When a
// mutation asks for a sandbox that this machine cannot provide, the test
// is skipped, or failed in CI (testenv).
func setup(t *testing.T, mutate ...func(*process.Config)) *bundle {
	t.Helper()
	b := &bundle{src: t.TempDir(), work: searchableDir(t), out: &syncbuf.Buffer{}}
	require.NoError(t, os.WriteFile(filepath.Join(b.src, "input.txt"), []byte("hello\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(b.src, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(b.src, "sub", "run.sh"), []byte("#!/bin/sh\necho script ran\n"), 0o755))
	require.NoError(t, os.Symlink("input.txt", filepath.Join(b.src, "link.txt")))
	cfg := process.Config{
		Source:   b.src,
		WorkRoot: b.work,
		Grace:    500 * time.Millisecond,
		Env:      []string{"PATH=" + os.Getenv("PATH"), "BASE=base"},
		Output:   func(*cikit.JobSpec) io.Writer { return b.out },
	}
	for _, m := range mutate {
		m(&cfg)
	}
	var err error
	b.exec, err = process.New(cfg)
	if err == nil {
		t.Cleanup(func() { require.NoError(t, b.exec.Close()) })
	}
	if errors.Is(err, process.ErrSandboxUnavailable) {
		testenv.ToolUnavailable(t, testenv.Bubblewrap, err)
	}
	require.NoError(t, err)
	return b
}

// searchableDir returns a temporary directory that a sandbox's user, who
// is not the test's when the tests run as root, can reach.
func searchableDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o711))
	require.NoError(t, os.Chmod(dir, 0o711))
	return dir
}

// sandboxed runs jobs in a bubblewrap sandbox that must work.
func sandboxed(c *process.Config) { c.Sandbox = &process.Sandbox{} }

// termGrace is the grace period of a cancel test's case: the shell that
// traps SIGTERM gets a minute to print and exit, which it does at once
// (a short grace could SIGKILL it first on a busy machine); the one that
// ignores SIGTERM waits out the short grace of setup before its SIGKILL.
func termGrace(name string) func(*process.Config) {
	return func(c *process.Config) {
		if name == "traps TERM" {
			c.Grace = time.Minute
		}
	}
}

// eachMode runs f as a subtest with plain processes and with a sandbox:
// the executor's behaviour is the same in both.
func eachMode(t *testing.T, f func(t *testing.T, mode func(*process.Config))) {
	t.Helper()
	for _, m := range []struct {
		name  string
		apply func(*process.Config)
	}{
		{"plain", func(*process.Config) {}},
		{"sandbox", sandboxed},
	} {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			f(t, m.apply)
		})
	}
}

func steps(runs ...string) []cikit.Step {
	s := make([]cikit.Step, len(runs))
	for i, r := range runs {
		s[i] = cikit.Step{Name: strings.SplitN(r, "\n", 2)[0], Run: r}
	}
	return s
}

func TestRunWorkspaceIsACopy(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode func(*process.Config)) {
		b := setup(t, mode)
		res := b.exec.Run(context.Background(), &cikit.JobSpec{ID: "build", Steps: steps(
			"cat input.txt link.txt",
			"./sub/run.sh",
			"echo changed > input.txt; touch new.txt",
			`test "$CIKIT_WORKSPACE" = "$(pwd)" && echo "ws ok"`,
		)})
		require.Equal(t, cikit.JobSucceeded, res.State, b.out.String())
		require.Equal(t, 0, res.ExitCode)
		require.Len(t, res.Steps, 4)
		// A sandboxed job's output starts with its limits: none here.
		out, _ := strings.CutPrefix(b.out.String(), "--- limits: none\n")
		require.Equal(t, "--- workspace: a copy of the runner's fixed directory "+b.src+" (the job has no commit to check out)\n"+
			"--- cat input.txt link.txt\nhello\nhello\n--- ./sub/run.sh\nscript ran\n"+
			"--- echo changed > input.txt; touch new.txt\n--- test \"$CIKIT_WORKSPACE\" = \"$(pwd)\" && echo \"ws ok\"\nws ok\n", out)

		got, err := os.ReadFile(filepath.Join(b.src, "input.txt"))
		require.NoError(t, err)
		require.Equal(t, "hello\n", string(got), "the source is untouched")
		require.NoFileExists(t, filepath.Join(b.src, "new.txt"))
		left, err := os.ReadDir(b.work)
		require.NoError(t, err)
		require.Empty(t, left, "the workspace is removed after the job")
	})
}

func TestRunEnvLayers(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode func(*process.Config)) {
		b := setup(t, mode)
		spec := &cikit.JobSpec{ID: "env", Env: map[string]string{"JOB": "job", "BASE": "job-over-base", "OVER": "job"},
			Steps: []cikit.Step{{Name: "print", Run: `echo "$BASE $JOB $OVER $STEP $CI $CIKIT_JOB_ID"`, Env: map[string]string{"OVER": "step", "STEP": "step"}}}}
		res := b.exec.Run(context.Background(), spec)
		require.Equal(t, cikit.JobSucceeded, res.State)
		require.Contains(t, b.out.String(), "job-over-base job step step true env\n")
	})
}

func TestRunFailingStepStopsTheJob(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode func(*process.Config)) {
		b := setup(t, mode)
		res := b.exec.Run(context.Background(), &cikit.JobSpec{ID: "f", Steps: steps("echo one", "false\necho not reached", "echo never")})
		require.Equal(t, cikit.JobFailed, res.State)
		require.Equal(t, 1, res.ExitCode)
		require.Equal(t, `step "false" exited with code 1`, res.Reason)
		require.Equal(t, cikit.FailureScript, res.FailureClass)
		require.Len(t, res.Steps, 2)
		require.NotContains(t, b.out.String(), "not reached", "sh -e stops at the first failing command")
		require.NotContains(t, b.out.String(), "never")

		res = b.exec.Run(context.Background(), &cikit.JobSpec{ID: "code", Steps: steps("exit 7")})
		require.Equal(t, 7, res.ExitCode)
	})
}

func TestRunTimeout(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode func(*process.Config)) {
		b := setup(t, mode)
		res := b.exec.Run(context.Background(), &cikit.JobSpec{ID: "slow", Timeout: 200 * time.Millisecond, Steps: steps("sleep 30")})
		require.Equal(t, cikit.JobFailed, res.State)
		require.Equal(t, -1, res.ExitCode)
		require.Contains(t, res.Reason, "timed out after 200ms")
		require.Equal(t, cikit.FailureTimeout, res.FailureClass)
	})
}

func readPIDs(t *testing.T, dir string) []int {
	t.Helper()
	var pids []int
	for _, name := range []string{"shell.pid", "child.pid"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		require.NoError(t, err)
		pids = append(pids, pid)
	}
	return pids
}

// TestRunCancelTerminatesThenKills cancels two jobs: one whose shell traps
// SIGTERM and exits, one that ignores SIGTERM and must be SIGKILLed after
// the grace period. Neither leaves a process behind.
func TestRunCancelTerminatesThenKills(t *testing.T) {
	t.Parallel()
	for name, script := range map[string]string{
		"traps TERM":   `trap 'echo got TERM; exit 143' TERM; echo $$ > "$PIDS/shell.pid"; sleep 300 & echo $! > "$PIDS/new"; mv "$PIDS/new" "$PIDS/child.pid"; wait`,
		"ignores TERM": `trap '' TERM; echo $$ > "$PIDS/shell.pid"; sleep 300 & echo $! > "$PIDS/new"; mv "$PIDS/new" "$PIDS/child.pid"; wait; wait`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pids := t.TempDir()
			b := setup(t, termGrace(name))
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan process.Result)
			go func() {
				done <- b.exec.Run(ctx, &cikit.JobSpec{ID: "c", Env: map[string]string{"PIDS": pids}, Steps: steps(script, "echo never")})
			}()
			// child.pid appears whole (renamed into place), after shell.pid.
			require.Eventually(t, func() bool {
				_, err := os.Stat(filepath.Join(pids, "child.pid"))
				return err == nil
			}, time.Minute, 10*time.Millisecond)
			cancel()
			res := <-done
			require.Equal(t, cikit.JobCancelled, res.State)
			require.NotContains(t, b.out.String(), "never")
			if name == "traps TERM" {
				require.Contains(t, printed(b.out.String()), "got TERM\n")
			}
			for _, pid := range readPIDs(t, pids) {
				require.False(t, proctest.Alive(pid), "process %d outlived the job", pid)
			}
		})
	}
}

// TestRunKillsLeftoverBackgroundProcesses: a step that succeeds but leaves
// a background process running does not leak it past the job.
func TestRunKillsLeftoverBackgroundProcesses(t *testing.T) {
	t.Parallel()
	pids := t.TempDir()
	b := setup(t)
	res := b.exec.Run(context.Background(), &cikit.JobSpec{ID: "bg", Env: map[string]string{"PIDS": pids}, Steps: steps(
		`echo $$ > "$PIDS/shell.pid"; sleep 300 & echo $! > "$PIDS/child.pid"`,
		`kill -0 "$(cat "$PIDS/child.pid")" && echo "still there in the next step"`,
	)})
	require.Equal(t, cikit.JobSucceeded, res.State, b.out.String())
	require.Contains(t, printed(b.out.String()), "still there in the next step\n", "background processes live until the job ends")
	for _, pid := range readPIDs(t, pids) {
		require.False(t, proctest.Alive(pid), "process %d outlived the job", pid)
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	_, err := process.New(process.Config{})
	require.ErrorContains(t, err, "Source is required")
	_, err = process.New(process.Config{Source: filepath.Join(t.TempDir(), "missing")})
	require.Error(t, err)
	dir := t.TempDir()
	_, err = process.New(process.Config{Source: dir, WorkRoot: dir})
	require.ErrorContains(t, err, "must not be Config.Source")
	_, err = process.New(process.Config{Source: dir, Shell: "no-such-shell-here"})
	require.ErrorContains(t, err, "no-such-shell-here")
}

func TestWorkRootInsideSourceIsNotCopied(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	work := filepath.Join(src, ".cikit-work")
	require.NoError(t, os.Mkdir(work, 0o755))
	out := &syncbuf.Buffer{}
	e, err := process.New(process.Config{Source: src, WorkRoot: work, Output: func(*cikit.JobSpec) io.Writer { return out }})
	require.NoError(t, err)
	res := e.Run(context.Background(), &cikit.JobSpec{ID: "ls", Steps: steps("ls -A")})
	require.Equal(t, cikit.JobSucceeded, res.State)
	require.Equal(t, "--- workspace: a copy of the runner's fixed directory "+src+" (the job has no commit to check out)\n--- ls -A\n", out.String())
}

// TestExcludedPathsAreNotCopied: the paths of Config.Exclude, a directory
// and a file, stay out of the workspace copy, and an Exclude that leaves
// Source is refused.
func TestExcludedPathsAreNotCopied(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(src, ".cikit", "blobs"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(src, ".cikit", "blobs", "x"), []byte("x"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(src, "secret.txt"), []byte("s"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(src, "kept.txt"), []byte("k"), 0o644))
	out := &syncbuf.Buffer{}
	e, err := process.New(process.Config{Source: src, Exclude: []string{".cikit", "secret.txt"}, Output: func(*cikit.JobSpec) io.Writer { return out }})
	require.NoError(t, err)
	res := e.Run(context.Background(), &cikit.JobSpec{ID: "ls", Steps: steps("ls -A")})
	require.Equal(t, cikit.JobSucceeded, res.State, out.String())
	require.Equal(t, "--- workspace: a copy of the runner's fixed directory "+src+" (the job has no commit to check out)\n--- ls -A\nkept.txt\n", out.String())

	for _, bad := range []string{"../x", "/etc", ""} {
		_, err = process.New(process.Config{Source: src, Exclude: []string{bad}})
		require.ErrorContains(t, err, "Config.Exclude", bad)
	}
}

func TestRunStepOptions(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode func(*process.Config)) {
		b := setup(t, mode)
		res := b.exec.Run(context.Background(), &cikit.JobSpec{ID: "opts", Steps: []cikit.Step{
			{Name: "checkout", Uses: "actions/checkout@v4"},
			{Name: "flaky", Run: "exit 3", ContinueOnError: true},
			{Name: "in sub", Run: "pwd | sed 's#.*/##'", WorkingDirectory: "sub"},
			{Name: "pipefail", Run: "false | true", Shell: "bash"},
			{Name: "never", Run: "echo never"},
		}, AfterSteps: []cikit.Step{
			{Name: "cleanup", Run: "echo cleaning up; exit 9"},
			{Name: "report", Run: "echo reported"},
		}})
		require.Equal(t, cikit.JobFailed, res.State, b.out.String())
		require.Equal(t, `step "pipefail" exited with code 1`, res.Reason, "bash runs with pipefail")
		require.Equal(t, 1, res.ExitCode, "after-steps do not change the exit code")
		out := b.out.String()
		require.Contains(t, out, "--- checkout (actions/checkout@v4)\n--- the workspace is the runner's fixed directory "+b.src+": nothing to check out\n")
		require.Contains(t, out, `--- step "flaky" exited with code 3; continuing (continue on error)`)
		require.Contains(t, out, "--- in sub\nsub\n")
		require.NotContains(t, out, "never")
		require.Contains(t, out, "cleaning up\n--- step \"cleanup\" exited with code 9 (after-step; the job's outcome stands)\n--- report\nreported\n")
		require.Equal(t, 0, res.Steps[0].ExitCode)
		require.Len(t, res.Steps, 6)
	})
}

func TestRunShellsAndTimeouts(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode func(*process.Config)) {
		b := setup(t, mode)
		res := b.exec.Run(context.Background(), &cikit.JobSpec{ID: "shells", Steps: []cikit.Step{
			{Name: "custom", Run: "echo from a file: $0", Shell: "sh {0}"},
			{Name: "slow", Run: "sleep 30", Timeout: 100 * time.Millisecond},
		}})
		require.Equal(t, cikit.JobFailed, res.State)
		require.Equal(t, `step "slow": timed out after 100ms`, res.Reason)
		require.Regexp(t, `from a file: .*/\.cikit-step-\d+\n`, b.out.String())

		res = b.exec.Run(context.Background(), &cikit.JobSpec{ID: "escape", Steps: []cikit.Step{{Name: "out", Run: "true", WorkingDirectory: "../.."}}})
		require.Equal(t, cikit.JobFailed, res.State)
		require.Contains(t, res.Reason, "outside the workspace")
	})
}

// upper is an Expander that upper-cases "${{ x }}" and runs a step with a
// condition only after a failure.
type upper struct{}

func (upper) Expand(_ *cikit.JobSpec, s string) (string, error) {
	return strings.ReplaceAll(s, "${{ x }}", "X"), nil
}

func (upper) StepRuns(_ *cikit.JobSpec, step *cikit.Step, failed bool) (bool, error) {
	if step.If != nil {
		return failed, nil
	}
	return !failed, nil
}

func TestRunExpander(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode func(*process.Config)) {
		b := setup(t, mode, func(c *process.Config) { c.Expander = upper{} })
		res := b.exec.Run(context.Background(), &cikit.JobSpec{ID: "x", Env: map[string]string{"J": "job-${{ x }}"}, Steps: []cikit.Step{
			{Name: "a", Run: "echo ${{ x }} $J $S; exit 1", Env: map[string]string{"S": "step-${{ x }}"}},
			{Name: "b", Run: "echo not after a failure"},
			{Name: "c", Run: "echo on failure", If: &cikit.Condition{Lang: cikit.LangGitHub, Expr: "failure()"}},
		}})
		require.Equal(t, cikit.JobFailed, res.State)
		require.Contains(t, b.out.String(), "X job-X step-X\n")
		require.NotContains(t, b.out.String(), "not after a failure")
		require.Contains(t, b.out.String(), "on failure\n")
	})
}
