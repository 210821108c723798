package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/internal/proctest"
	"github.com/cikit/cikit/internal/testenv"
)

// TestWatchdogKillsWithoutTheExecutor: once the job's lease has run out,
// the supervisor kills the job's processes and exits while the executor
// does nothing at all, as when its runner is stopped: it neither reads
// the supervisor's reports nor ends the job.
func TestWatchdogKillsWithoutTheExecutor(t *testing.T) {
	t.Parallel()
	for _, sandboxed := range []bool{false, true} {
		t.Run(fmt.Sprintf("sandboxed=%v", sandboxed), func(t *testing.T) {
			t.Parallel()
			work := t.TempDir()
			require.NoError(t, os.Chmod(filepath.Dir(work), 0o711))
			require.NoError(t, os.Chmod(work, 0o711))
			cfg := Config{Source: t.TempDir(), WorkRoot: work, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			if sandboxed {
				cfg.Sandbox = &Sandbox{}
			}
			e, err := New(cfg)
			if errors.Is(err, ErrSandboxUnavailable) {
				testenv.ToolUnavailable(t, testenv.Bubblewrap, err)
			}
			require.NoError(t, err)
			ws, err := e.newWorkspace("watchdog")
			require.NoError(t, err)
			t.Cleanup(func() { e.removeWorkspace(ws) })
			pr, pw, err := os.Pipe()
			require.NoError(t, err)
			t.Cleanup(func() { _ = pr.Close(); _ = pw.Close() })
			go func() { _, _ = io.Copy(io.Discard, pr) }()

			lease := NewLeaseDeadline(time.Now().Add(time.Hour))
			procs, err := e.startProcs(context.Background(), &sandboxSpec{ws: ws, out: pw}, lease)
			require.NoError(t, err)
			w := procs.(*watched)
			var s *sandboxJob
			var supervisor int // the supervisor, or the sandbox's init, on the host
			if p, ok := w.jobProcs.(*plainSupervised); ok {
				s, supervisor = p.sandboxJob, p.cmd.Process.Pid
			} else {
				s = w.jobProcs.(*sandboxJob)
				supervisor = s.init.Pid
			}
			t.Cleanup(func() { procs.end(t.Logf) })

			bg, escaped, fg := marker(t, 1), marker(t, 2), marker(t, 3)
			require.NoError(t, s.request(supervisorRequest{ID: 1, Argv: []string{"sh", "-c", fmt.Sprintf(`sleep %s & setsid sleep %s & sleep %s`, bg, escaped, fg)},
				Env: []string{"PATH=" + os.Getenv("PATH")}, Dir: ws}))
			require.Eventually(t, func() bool {
				return len(proctest.Running("sleep", bg)) == 1 && len(proctest.Running("sleep", escaped)) == 1 && len(proctest.Running("sleep", fg)) == 1
			}, 20*time.Second, 5*time.Millisecond, "the job's processes start")

			lease.Renew(time.Now()) // the lease runs out now
			require.Eventually(t, func() bool {
				return !proctest.Alive(supervisor) && len(proctest.Running("sleep", bg)) == 0 &&
					len(proctest.Running("sleep", escaped)) == 0 && len(proctest.Running("sleep", fg)) == 0
			}, 20*time.Second, 5*time.Millisecond, "the supervisor kills the job and ends")
			// What the executor reads once it can: the expiry, and the end.
			<-s.readerDone
			select {
			case <-s.expired:
			default:
				t.Fatal("the supervisor ended without reporting the expiry")
			}
		})
	}
}

// marker returns a number of seconds only this test's processes sleep.
func marker(t *testing.T, n int) string {
	return fmt.Sprintf("%d.%06d%d", 2000+n, os.Getpid()%1000000, len(t.Name()))
}
