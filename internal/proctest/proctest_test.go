package proctest_test

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cikit/cikit/internal/proctest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestAlive(t *testing.T) {
	t.Parallel()
	require.True(t, proctest.Alive(os.Getpid()))

	cmd := exec.Command("sleep", "60")
	require.NoError(t, cmd.Start())
	require.True(t, proctest.Alive(cmd.Process.Pid))
	require.NoError(t, cmd.Process.Kill())
	// Killed but not yet reaped: a zombie, which counts as gone.
	require.Eventually(t, func() bool { return !proctest.Alive(cmd.Process.Pid) }, time.Minute, 10*time.Millisecond)
	_ = cmd.Wait()
	require.False(t, proctest.Alive(cmd.Process.Pid))
}

func TestRunning(t *testing.T) {
	t.Parallel()
	// A duration no other test uses makes the command line unique.
	cmd := exec.Command("sleep", "60.123456")
	require.NoError(t, cmd.Start())
	require.Equal(t, []int{cmd.Process.Pid}, proctest.Running("sleep", "60.123456"))
	require.Empty(t, proctest.Running("sleep", "60.1234567"), "the whole command line must match")
	require.Empty(t, proctest.Running("sleep"))
	require.NoError(t, cmd.Process.Kill())
	require.Eventually(t, func() bool { return len(proctest.Running("sleep", "60.123456")) == 0 }, time.Minute, 10*time.Millisecond)
	_ = cmd.Wait()
}

func TestContaining(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sleep", "60.654321")
	require.NoError(t, cmd.Start())
	require.Equal(t, []int{cmd.Process.Pid}, proctest.Containing("60.65432"))
	require.Empty(t, proctest.Containing("60.6543210"))
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	require.Empty(t, proctest.Containing("60.65432"), "an ended process is not found")
}
