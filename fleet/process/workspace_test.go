package process_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet/image"
	"github.com/cikit/cikit/fleet/process"
)

// The test binary, started with childWorkRoot and childSource set, is an
// executor running one job that never ends (runChildExecutor).
const (
	childWorkRoot = "CIKIT_TEST_CHILD_WORK_ROOT"
	childSource   = "CIKIT_TEST_CHILD_SOURCE"
)

// runChildExecutor runs a sandboxed job that marks its workspace and
// sleeps, until the process is killed.
func runChildExecutor() {
	ex, err := process.New(process.Config{Source: os.Getenv(childSource), WorkRoot: os.Getenv(childWorkRoot), Sandbox: &process.Sandbox{}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	ex.Run(context.Background(), &cikit.JobSpec{ID: "orphan", Steps: steps("touch orphan-started; sleep 600")})
	os.Exit(4) // the job never ends by itself
}

// waitWorkspace waits for a workspace in work that holds file and
// returns the directory of its job.
func waitWorkspace(t *testing.T, work, file string) string {
	t.Helper()
	var ws string
	require.Eventually(t, func() bool {
		m, _ := filepath.Glob(filepath.Join(work, "cikit-*", "workspace", file))
		if len(m) == 1 {
			ws = filepath.Dir(filepath.Dir(m[0]))
		}
		return ws != ""
	}, 30*time.Second, 10*time.Millisecond, "waiting for a workspace with %s in %s", file, work)
	return ws
}

// TestNewSweepsWorkspacesOfDeadExecutors: a SIGKILLed executor leaves its
// job's workspace; the next executor on the work root removes it, and
// leaves alone the live workspace of another executor, the kept ones and
// what is not a workspace. It failed before workspaces had lock files:
// the killed executor's workspace stayed.
func TestNewSweepsWorkspacesOfDeadExecutors(t *testing.T) {
	t.Parallel()
	live := setup(t, sandboxed) // also checks that the sandbox works here
	work := live.work

	// A kept workspace and a directory of someone else's.
	keep := setup(t, func(c *process.Config) { c.WorkRoot, c.KeepWorkspaces = work, true })
	require.Equal(t, cikit.JobSucceeded, keep.exec.Run(context.Background(), &cikit.JobSpec{ID: "kept", Steps: steps("touch kept")}).State)
	kept := waitWorkspace(t, work, "kept")
	other := filepath.Join(work, "cikit-not-a-workspace")
	require.NoError(t, os.Mkdir(other, 0o755))

	// Another executor's job, running.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan cikit.JobState, 1)
	go func() {
		done <- live.exec.Run(ctx, &cikit.JobSpec{ID: "live", Steps: steps("touch live-started; sleep 600")}).State
	}()
	defer func() {
		cancel()
		require.Equal(t, cikit.JobCancelled, <-done)
	}()
	liveWS := waitWorkspace(t, work, "live-started")

	// An executor killed while its job runs.
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childWorkRoot+"="+work, childSource+"="+live.src)
	child.Stderr = os.Stderr
	require.NoError(t, child.Start())
	orphan := waitWorkspace(t, work, "orphan-started")
	require.NoError(t, child.Process.Kill())
	_ = child.Wait()
	require.DirExists(t, orphan, "the killed executor left its workspace")
	// And the view of its job's image, still mounted.
	rootfs := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(rootfs, "f"), []byte("image\n"), 0o644))
	views := orphan + ".cikit-views"
	require.NoError(t, os.Mkdir(views, 0o755))
	view, err := image.NewView(context.Background(), rootfs, filepath.Join(views, "job"), image.ViewOptions{})
	require.NoError(t, err)

	_ = setup(t, func(c *process.Config) { c.WorkRoot = work })
	require.NoDirExists(t, orphan, "the leftover workspace was not swept")
	require.NoFileExists(t, orphan+".cikit-lock")
	require.NoDirExists(t, views, "the leftover view was not swept")
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	require.NotContains(t, string(mounts), view.Root(), "the leftover view is still mounted")
	got, err := os.ReadFile(filepath.Join(rootfs, "f"))
	require.NoError(t, err)
	require.Equal(t, "image\n", string(got), "the image under the view is untouched")
	require.DirExists(t, liveWS, "a live job's workspace was swept")
	require.FileExists(t, filepath.Join(liveWS, "workspace", "live-started"))
	require.DirExists(t, kept)
	require.DirExists(t, other)
}
