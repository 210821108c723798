package cli

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/internal/semantics"
	"github.com/cikit/cikit/internal/testenv"
)

// pushPayload is a GitHub push event of main to sha by alice in acme/app.
func pushPayload(t *testing.T, sha string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "push.json")
	require.NoError(t, os.WriteFile(p, fmt.Appendf(nil, `{"ref": "refs/heads/main", "after": %q,
		"repository": {"name": "app", "full_name": "acme/app", "default_branch": "main", "owner": {"login": "acme"}},
		"pusher": {"name": "alice"}, "sender": {"login": "alice"}}`, sha), 0o644))
	return p
}

// gitRepo makes dir a git work tree of acme/app on main with two commits,
// the second adding the files, and returns the second's SHA.
func gitRepo(t *testing.T, files map[string]string) (dir, sha string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		testenv.ToolUnavailable(t, "git", err)
	}
	dir = pipelineDir(t, map[string]string{"README.md": "the first commit\n"})
	gitIn(t, dir, "init", "-q", "-b", "main")
	gitIn(t, dir, "remote", "add", "origin", "https://github.com/acme/app.git")
	gitIn(t, dir, "add", "-A")
	gitIn(t, dir, "commit", "-q", "-m", "one")
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	gitIn(t, dir, "add", "-A")
	gitIn(t, dir, "commit", "-q", "-m", "two")
	return dir, strings.TrimSpace(gitIn(t, dir, "rev-parse", "HEAD"))
}

// jobLines returns, by job, the lines of cikit run's output that each job
// of the report printed, without their prefix.
func jobLines(stdout string, r *result) map[string]string {
	width := 0
	for _, j := range r.Jobs {
		width = max(width, len("["+j.ID+"]"))
	}
	out := map[string]string{}
	for _, line := range strings.SplitAfter(stdout, "\n") {
		for _, j := range r.Jobs {
			// The prefix is padded to the widest job of the plan, which
			// the variants of a run-time matrix may pass: at most width.
			p := "[" + j.ID + "] "
			if !strings.HasPrefix(line, p) {
				continue
			}
			rest := line[len(p):]
			for n := width - len(p) + 1; n > 0 && strings.HasPrefix(rest, " "); n-- {
				rest = rest[1:]
			}
			out[j.ID] += rest
			break
		}
	}
	return out
}

// TestRunJobWorld: cikit run gives a GitHub workflow and a GitLab file
// the world TestJobWorld of the platform asserts on the server: the full
// history checked out, a composite action's input defaults and outputs,
// $GITHUB_ENV between steps, needs.a.outputs.x, an ::error annotation,
// and the index and commit of each parallel variant of a GitLab job.
func TestRunJobWorld(t *testing.T) {
	t.Parallel()
	dir, sha := gitRepo(t, semantics.WorldFiles)

	out, r := reportOf(t, dir, "-file", ".github/workflows/ci.yml", "-event-path", pushPayload(t, sha))
	require.Equal(t, ExitOK, out.code, out.stdout+out.stderr)
	require.Equal(t, map[string]cikit.JobState{"a": cikit.JobSucceeded, "b": cikit.JobSucceeded}, jobStates(r))
	logs := jobLines(out.stdout, r)
	a := logs["a"]
	require.Contains(t, a, "commits=2\n", "fetch-depth: 0 has the full history")
	require.Contains(t, a, "greeting world\n")
	require.Contains(t, a, "greeting cikit\n")
	require.Contains(t, a, "said 'hello world' and 'hello cikit'\n")
	require.Contains(t, a, "stage is from-the-env-file\n")
	require.Contains(t, a, "##[error]boom\n")
	require.Contains(t, logs["b"], "x is forty-two\n")
	for _, j := range r.Jobs {
		if j.ID == "a" {
			require.Equal(t, map[string]string{"x": "forty-two"}, j.Outputs)
		}
	}

	out, r = reportOf(t, dir, "-file", ".gitlab-ci.yml")
	require.Equal(t, ExitOK, out.code, out.stdout+out.stderr)
	logs = jobLines(out.stdout, r)
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("test %d/3", i)
		require.Contains(t, logs[id], fmt.Sprintf("node %d of 3 at %s\n", i, sha), "%s:\n%s", id, out.stdout)
	}
}

// TestRunSemantics runs the cases of package semantics, one per run-time
// semantic of a format, with cikit run.
func TestRunSemantics(t *testing.T) {
	t.Parallel()
	for _, c := range semantics.Cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			files := map[string]string{c.Path: c.File}
			for k, v := range c.Files {
				files[k] = v
			}
			dir, sha := gitRepo(t, files)
			if c.Error != "" {
				out := runIn(t, dir, "-file", c.Path, "-event-path", pushPayload(t, sha))
				require.Equal(t, ExitInvalid, out.code, out.stdout+out.stderr)
				require.Contains(t, out.stderr, c.Error)
				return
			}
			args := []string{"-file", c.Path, "-event-path", pushPayload(t, sha)}
			if c.Inputs != nil {
				args = append(args, "-event", "workflow_dispatch")
				for _, k := range slices.Sorted(maps.Keys(c.Inputs)) {
					args = append(args, "-input", k+"="+c.Inputs[k])
				}
			}
			out, r := reportOf(t, dir, args...)
			states := map[string]cikit.JobState{}
			for id, j := range c.Jobs {
				states[id] = cikit.JobSucceeded
				if j.Failed {
					states[id] = cikit.JobFailed
				}
			}
			for _, id := range c.Skipped {
				states[id] = cikit.JobSkipped
			}
			require.Equal(t, states, jobStates(r), "%s\n%s", out.stdout, out.stderr)
			require.Equal(t, map[bool]cikit.RunState{false: cikit.RunSucceeded, true: cikit.RunFailed}[c.RunFailed()], r.State)
			logs := jobLines(out.stdout, r)
			for id, j := range c.Jobs {
				for _, l := range j.Lines {
					require.Contains(t, logs[id], strings.ReplaceAll(l, semantics.SHA, sha)+"\n", "job %s:\n%s", id, out.stdout)
				}
				for _, n := range j.Never {
					require.NotContains(t, logs[id], n, "job %s", id)
				}
			}
		})
	}
}
