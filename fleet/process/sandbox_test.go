package process_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet/process"
	"github.com/cikit/cikit/internal/proctest"
	"github.com/cikit/cikit/internal/syncbuf"
	"github.com/cikit/cikit/internal/testenv"
)

// markers makes command lines no other test uses: `sleep <marker>` is
// found on the host by its command line, whatever its pid in the sandbox.
var markers atomic.Int64

func marker() string {
	return fmt.Sprintf("%d.%06d", 1000+markers.Add(1), os.Getpid()%1000000)
}

// waitOutput waits until the job's steps have printed s.
func waitOutput(t *testing.T, b *bundle, s string) {
	t.Helper()
	require.Eventually(t, func() bool { return strings.Contains(printed(b.out.String()), s) }, time.Minute, 10*time.Millisecond,
		"waiting for %q in the output: %s", s, b.out.String())
}

func TestSandboxRunsAsItsOwnUser(t *testing.T) {
	t.Parallel()
	b := setup(t, sandboxed)
	res := b.exec.Run(context.Background(), &cikit.JobSpec{ID: "who", Steps: steps(
		`echo "$(id -un) $(id -u) $(id -gn) $(hostname) $HOME"`,
		`grep -c . /etc/passwd`,
		`grep ^CapEff /proc/self/status`,
		`unshare --user true 2>/dev/null && echo "nested user namespace" || echo "no nested user namespace"`,
	)})
	require.Equal(t, cikit.JobSucceeded, res.State, b.out.String())
	out := b.out.String()
	require.Contains(t, out, "cikit 1000 cikit cikit /tmp\n")
	require.Contains(t, out, "--- grep -c . /etc/passwd\n2\n", "the sandbox's passwd knows cikit and nobody only")
	require.Contains(t, out, "CapEff:\t0000000000000000\n")
	require.Contains(t, out, "no nested user namespace\n")
}

// TestSandboxJobsCannotSeeEachOther runs two jobs at once: the first
// writes a marker into its workspace and waits; the second looks for it
// by the first's absolute path and in the work root, and finds neither.
func TestSandboxJobsCannotSeeEachOther(t *testing.T) {
	t.Parallel()
	b := setup(t, sandboxed)
	first := make(chan process.Result)
	go func() {
		first <- b.exec.Run(context.Background(), &cikit.JobSpec{ID: "first", Steps: steps(
			`echo secret > marker.txt; echo "marker written"; while [ ! -e release ]; do sleep 0.02; done`)})
	}()
	waitOutput(t, b, "marker written")
	found, err := filepath.Glob(filepath.Join(b.work, "cikit-first-*", "workspace", "marker.txt"))
	require.NoError(t, err)
	require.Len(t, found, 1, "the first job's marker is on the host")
	firstWS := filepath.Dir(found[0])

	out := &syncbuf.Buffer{}
	second := b.exec.RunOutput(context.Background(), &cikit.JobSpec{ID: "second", Env: map[string]string{"FIRST": firstWS}, Steps: steps(
		`if [ -e "$FIRST/marker.txt" ] || [ -e "$FIRST" ]; then echo "sees the first workspace"; fi`,
		`ls -A "$(dirname "$(dirname "$CIKIT_WORKSPACE")")"`,
		`cat "$FIRST/marker.txt" 2>&1 || true`,
	)}, out, nil)
	require.NoError(t, os.WriteFile(filepath.Join(firstWS, "release"), nil, 0o644))
	require.Equal(t, cikit.JobSucceeded, (<-first).State, b.out.String())
	require.Equal(t, cikit.JobSucceeded, second.State, out.String())

	got := strings.Split(strings.TrimSuffix(printed(out.String()), "\n"), "\n")
	require.Len(t, got, 2, "the second job printed: %q", got)
	require.Regexp(t, `^cikit-second-\d+$`, got[0], "the work root shows only the job's own workspace")
	require.Equal(t, "cat: "+firstWS+"/marker.txt: No such file or directory", got[1])
}

// TestSandboxHidesHostProcesses: the job's /proc lists only the sandbox's
// processes, and a host process it is told about cannot be signalled.
func TestSandboxHidesHostProcesses(t *testing.T) {
	t.Parallel()
	host := exec.Command("sleep", marker())
	require.NoError(t, host.Start())
	t.Cleanup(func() {
		_ = host.Process.Kill()
		_ = host.Wait()
	})
	b := setup(t, sandboxed)
	res := b.exec.Run(context.Background(), &cikit.JobSpec{ID: "ps", Env: map[string]string{
		"TEST_PID": strconv.Itoa(os.Getpid()), "HOST_PID": strconv.Itoa(host.Process.Pid),
	}, Steps: steps(
		`echo pids $(ls /proc | grep -E '^[0-9]+$')`,
		`tr '\0' ' ' < /proc/1/cmdline | cut -d' ' -f1`,
		`test -e "/proc/$TEST_PID" && echo "sees the test" || echo "test not visible"`,
		`kill "$HOST_PID" 2>/dev/null && echo "signalled the host" || echo "cannot signal the host"`,
	)})
	require.Equal(t, cikit.JobSucceeded, res.State, b.out.String())
	got := strings.Split(printed(b.out.String()), "\n")
	require.Len(t, got, 5, "%q", got)
	require.Equal(t, "bwrap", filepath.Base(got[1]), "pid 1 is the sandbox's init")
	require.Equal(t, []string{"test not visible", "cannot signal the host", ""}, got[2:])
	pids := strings.Fields(strings.TrimPrefix(got[0], "pids "))
	require.NotEmpty(t, pids)
	require.Less(t, len(pids), 10, "only the sandbox's processes: %v", pids)
	for _, p := range pids {
		n, err := strconv.Atoi(p)
		require.NoError(t, err)
		require.NotEqual(t, os.Getpid(), n)
		require.NotEqual(t, host.Process.Pid, n)
	}
	require.True(t, proctest.Alive(host.Process.Pid), "the host process survived the job")
}

// TestSandboxCannotWriteOutsideItsWorkspace: the system, the root, the
// work root and the host's /tmp are out of reach; /tmp is the job's own
// and gone with it.
func TestSandboxCannotWriteOutsideItsWorkspace(t *testing.T) {
	t.Parallel()
	b := setup(t, sandboxed)
	// A directory anyone may write on the host, beside the workspaces.
	open := filepath.Join(b.work, "open")
	require.NoError(t, os.Mkdir(open, 0o777))
	require.NoError(t, os.Chmod(open, 0o777))
	name := "cikit-sandbox-probe-" + strings.ReplaceAll(marker(), ".", "-")
	res := b.exec.Run(context.Background(), &cikit.JobSpec{ID: "write", Env: map[string]string{"OPEN": open, "NAME": name}, Steps: steps(
		`for p in /etc/$NAME /usr/$NAME /usr/local/$NAME /$NAME "$OPEN/$NAME" "$(dirname "$CIKIT_WORKSPACE")/$NAME" /proc/$NAME; do
			if touch "$p" 2>/dev/null; then echo "wrote $p"; else echo "refused $p"; fi
		done`,
		`echo private > /tmp/$NAME && echo private > /dev/shm/$NAME && echo "wrote tmp"`,
		`cat /tmp/$NAME`,
		`echo ws > "$NAME" && echo "wrote workspace"`,
	)})
	require.Equal(t, cikit.JobSucceeded, res.State, b.out.String())
	out := b.out.String()
	for _, p := range []string{"/etc/", "/usr/", "/usr/local/", "/", "/proc/"} {
		require.Contains(t, out, "refused "+p+name+"\n")
	}
	require.Contains(t, out, "refused "+open+"/"+name+"\n", "a writable host directory outside the workspace is not there")
	require.Contains(t, out, "wrote tmp\n--- cat /tmp/$NAME\nprivate\n", "/tmp is writable and shared by the job's steps")
	require.Contains(t, out, "wrote workspace\n")

	// Whatever the job could write (the work root's path and /tmp lie in
	// its private /tmp) never reached the host.
	for _, dir := range []string{os.TempDir(), "/tmp", "/dev/shm", b.work, open} {
		require.NoFileExists(t, filepath.Join(dir, name))
	}
	left, err := os.ReadDir(b.work)
	require.NoError(t, err)
	require.Len(t, left, 1, "only the test's own directory is left in the work root")
	inOpen, err := os.ReadDir(open)
	require.NoError(t, err)
	require.Empty(t, inOpen)
}

// TestSandboxNetwork: a listener the test opens on the host's 127.0.0.1 is
// unreachable from a job without Network and reachable with it.
func TestSandboxNetwork(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "hello from the host\n")
			_ = c.Close()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	connect := cikit.Step{Name: "connect", Shell: "bash", Run: `{ exec 3<>"/dev/tcp/127.0.0.1/$PORT"; } 2>/dev/null && head -n 1 <&3 || echo unreachable`}

	for _, tc := range []struct {
		name    string
		network bool
		want    string
	}{
		{"without Network", false, "unreachable\n"},
		{"with Network", true, "hello from the host\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(c *process.Config) { c.Sandbox = &process.Sandbox{Network: tc.network} })
			res := b.exec.Run(context.Background(), &cikit.JobSpec{ID: "net", Env: map[string]string{"PORT": port}, Steps: []cikit.Step{connect}})
			require.Equal(t, cikit.JobSucceeded, res.State, b.out.String())
			require.Contains(t, b.out.String(), "--- connect\n"+tc.want)
		})
	}
}

// TestSandboxLeavesNothingBehind: background processes, one of which left
// its session, live until the job ends and are gone when Run returns;
// so are the workspace and the job's /tmp.
func TestSandboxLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	b := setup(t, sandboxed)
	bg, escaped := marker(), marker()
	pidFile := "cikit-sandbox-bg-" + strings.ReplaceAll(bg, ".", "-")
	res := b.exec.Run(context.Background(), &cikit.JobSpec{ID: "bg", Env: map[string]string{"BG": bg, "ESCAPED": escaped, "PID_FILE": pidFile}, Steps: steps(
		`sleep "$BG" & echo $! > "/tmp/$PID_FILE"; setsid sleep "$ESCAPED" & echo started`,
		`kill -0 "$(cat "/tmp/$PID_FILE")" && echo "still there in the next step"`,
	)})
	require.Equal(t, cikit.JobSucceeded, res.State, b.out.String())
	require.Contains(t, printed(b.out.String()), "still there in the next step\n", "background processes live until the job ends")
	require.Empty(t, proctest.Running("sleep", bg), "the background process outlived the job")
	require.Empty(t, proctest.Running("sleep", escaped), "the process that left its session outlived the job")
	require.NoFileExists(t, filepath.Join(os.TempDir(), pidFile), "the job's /tmp is its own")
	require.NoFileExists(t, filepath.Join("/tmp", pidFile))
	left, err := os.ReadDir(b.work)
	require.NoError(t, err)
	require.Empty(t, left, "the workspace is removed after the job")
}

// TestSandboxCancelTerminatesThenKills is TestRunCancelTerminatesThenKills
// in a sandbox, where the processes are found by command line.
func TestSandboxCancelTerminatesThenKills(t *testing.T) {
	t.Parallel()
	for name, script := range map[string]string{
		"traps TERM":   `trap 'echo got TERM; exit 143' TERM; sleep "$BG" & echo started; wait`,
		"ignores TERM": `trap '' TERM; sleep "$BG" & echo started; wait; wait`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, sandboxed, termGrace(name))
			bg := marker()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan process.Result)
			go func() {
				done <- b.exec.Run(ctx, &cikit.JobSpec{ID: "c", Env: map[string]string{"BG": bg}, Steps: steps(script, "echo never")})
			}()
			waitOutput(t, b, "started")
			require.Eventually(t, func() bool { return len(proctest.Running("sleep", bg)) == 1 }, time.Minute, 10*time.Millisecond)
			cancel()
			res := <-done
			require.Equal(t, cikit.JobCancelled, res.State)
			require.NotContains(t, b.out.String(), "never")
			if name == "traps TERM" {
				require.Contains(t, printed(b.out.String()), "got TERM\n")
			}
			require.Empty(t, proctest.Running("sleep", bg), "the background process outlived the job")
			left, err := os.ReadDir(b.work)
			require.NoError(t, err)
			require.Empty(t, left)
		})
	}
}

func TestSandboxTimeoutKillsEverything(t *testing.T) {
	t.Parallel()
	b := setup(t, sandboxed)
	bg := marker()
	res := b.exec.Run(context.Background(), &cikit.JobSpec{ID: "slow", Timeout: 500 * time.Millisecond, Env: map[string]string{"BG": bg},
		Steps: steps(`setsid sleep "$BG" & sleep "$BG"`)})
	require.Equal(t, cikit.JobFailed, res.State)
	require.Equal(t, cikit.FailureTimeout, res.FailureClass)
	require.Contains(t, res.Reason, "timed out after 500ms")
	require.Empty(t, proctest.Running("sleep", bg))
}

func TestSandboxLimits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		limits process.Limits
		ok     string // a step within the limit
		over   string // a step beyond it
		reason string
		output string
	}{{
		name:   "memory",
		limits: process.Limits{Memory: 64 << 20},
		// tail keeps the last line, here all of it.
		ok:     "head -c 4000000 /dev/zero | tail -n 1 > /dev/null",
		over:   "head -c 100000000 /dev/zero | tail -n 1 > /dev/null",
		reason: "exited with code 1; if it ran out of memory: each process may map at most 64 MiB (Sandbox.Limits.Memory)",
		output: "memory exhausted",
	}, {
		name:   "processes",
		limits: process.Limits{Processes: process.MinProcesses},
		ok:     "for i in $(seq 8); do sleep 30 & done",
		over:   "for i in $(seq 64); do sleep 30 & done",
		reason: fmt.Sprintf("exited with code 2; the job was at its limit of %d processes and threads (Sandbox.Limits.Processes)", process.MinProcesses),
		output: "Cannot fork",
	}, {
		name:   "file size",
		limits: process.Limits{FileSize: 1 << 20},
		ok:     "head -c 1000000 /dev/zero > small",
		over:   "head -c 2000000 /dev/zero > big",
		reason: "exited with code 153; a process exceeded the file size limit of 1 MiB (Sandbox.Limits.FileSize)",
	}, {
		name:   "CPU time",
		limits: process.Limits{CPUTime: time.Second},
		ok:     "true",
		over:   "while :; do :; done",
		reason: "was killed by signal 24 (CPU time limit exceeded); a process exceeded the CPU time limit of 1s (Sandbox.Limits.CPUTime)",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(c *process.Config) { c.Sandbox = &process.Sandbox{Limits: tc.limits} })
			res := b.exec.Run(context.Background(), &cikit.JobSpec{ID: "ok", Steps: steps(tc.ok)})
			require.Equal(t, cikit.JobSucceeded, res.State, "within the limit: %s", b.out.String())

			res = b.exec.Run(context.Background(), &cikit.JobSpec{ID: "over", Steps: []cikit.Step{{Name: "over", Run: tc.over}}})
			require.Equal(t, cikit.JobFailed, res.State, b.out.String())
			require.Equal(t, cikit.FailureScript, res.FailureClass)
			require.Equal(t, `step "over" `+tc.reason, res.Reason)
			require.Contains(t, b.out.String(), tc.output)
		})
	}
}

// logRecords is a slog handler that keeps the records it is given.
type logRecords struct {
	mu      sync.Mutex
	records []slog.Record
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecords) WithGroup(string) slog.Handler            { return l }
func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r)
	return nil
}

func (l *logRecords) warnings() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var w []string
	for _, r := range l.records {
		if r.Level == slog.LevelWarn {
			w = append(w, r.Message)
		}
	}
	return w
}

// TestSandboxAutoFallsBack: without bubblewrap, SandboxAuto runs jobs as
// plain processes, warns once per executor and says so in every job's
// output; SandboxRequire refuses to start.
func TestSandboxAutoFallsBack(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "no-bwrap-here")
	logs := &logRecords{}
	b := setup(t, func(c *process.Config) {
		c.Sandbox = &process.Sandbox{Mode: process.SandboxAuto, Bwrap: missing}
		c.Logger = slog.New(logs)
	})
	for _, id := range []string{"one", "two"} {
		out := &syncbuf.Buffer{}
		res := b.exec.RunOutput(context.Background(), &cikit.JobSpec{ID: id, Steps: steps("echo ran")}, out, nil)
		require.Equal(t, cikit.JobSucceeded, res.State, out.String())
		require.Regexp(t, `^--- warning: this job is NOT SANDBOXED \(.*no-bwrap-here.*\); it runs as plain processes with the runner's user, file system and network\n--- workspace: .*\n--- echo ran\nran\n$`, out.String())
	}
	warnings := logs.warnings()
	require.Len(t, warnings, 1, "one warning per executor")
	require.Contains(t, warnings[0], "NOT SANDBOXED")

	_, err := process.New(process.Config{Source: b.src, WorkRoot: b.work, Sandbox: &process.Sandbox{Bwrap: missing}})
	require.ErrorIs(t, err, process.ErrSandboxUnavailable)
	require.ErrorContains(t, err, "apt-get install bubblewrap")

	// A bwrap that runs but creates no sandbox fails the self-check.
	_, err = process.New(process.Config{Source: b.src, WorkRoot: b.work, Sandbox: &process.Sandbox{Bwrap: "false"}})
	require.ErrorContains(t, err, "the sandbox did not start")
}

func TestSandboxValidates(t *testing.T) {
	t.Parallel()
	src, work := t.TempDir(), searchableDir(t)
	for _, tc := range []struct {
		sandbox  process.Sandbox
		workRoot string
		err      string
	}{
		{process.Sandbox{Mode: 7}, work, "Mode 7 is not SandboxRequire or SandboxAuto"},
		{process.Sandbox{Limits: process.Limits{Memory: -1}}, work, "must not be negative"},
		{process.Sandbox{Limits: process.Limits{Processes: 4}}, work, "at least 32 (MinProcesses)"},
		{process.Sandbox{ReadOnly: []string{"usr"}}, work, `"usr" is not an absolute path`},
		{process.Sandbox{ReadOnly: []string{"/"}}, work, "must not contain /"},
		{process.Sandbox{ReadOnly: []string{"/tmp/tools"}}, work, "/tmp/tools lies in /tmp"},
		{process.Sandbox{ReadOnly: []string{"/var"}}, "/var/lib/cikit", "/var overlaps Config.WorkRoot /var/lib/cikit"},
		{process.Sandbox{ReadOnly: []string{"/var/lib/cikit/tools"}}, "/var/lib/cikit", "overlaps Config.WorkRoot"},
		{process.Sandbox{}, "/usr/local/cikit", "/usr overlaps Config.WorkRoot /usr/local/cikit"},
	} {
		_, err := process.New(process.Config{Source: src, WorkRoot: tc.workRoot, Sandbox: &tc.sandbox})
		require.ErrorContains(t, err, tc.err)
		require.False(t, errors.Is(err, process.ErrSandboxUnavailable), "a mistake in Config is not an unavailable sandbox: %v", err)
	}
}

// TestSandboxWorkRootMustBeReachable: the sandbox's user, not root, must
// be able to reach the work root.
func TestSandboxWorkRootMustBeReachable(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("skipping: jobs run as the test's own user, who reaches its own directories")
	}
	private := t.TempDir() // 0700, owned by root
	_, err := process.New(process.Config{Source: t.TempDir(), WorkRoot: private, Sandbox: &process.Sandbox{}})
	if errors.Is(err, process.ErrSandboxUnavailable) {
		testenv.ToolUnavailable(t, testenv.Bubblewrap, err)
	}
	require.ErrorContains(t, err, "the sandbox's user (uid 65534, gid 65534) cannot reach Config.WorkRoot")
	require.ErrorContains(t, err, "chmod o+x "+filepath.Dir(private))
}

// TestSandboxJobCannotHangTheExecutor: the supervisor runs as the job's
// user, so the job can kill or stop it. The job then fails, or times out,
// and nothing of it is left.
func TestSandboxJobCannotHangTheExecutor(t *testing.T) {
	t.Parallel()
	// The job's timeout runs from before its sandbox starts, which can
	// take a second on a busy machine: the job whose supervisor dies ends
	// at once, and has a minute; the one whose supervisor stops ends only
	// at its timeout, long enough for the step to start and stop it.
	for _, tc := range []struct {
		name, signal string
		timeout      time.Duration
		want         func(t *testing.T, res process.Result)
	}{
		{"kills its supervisor", "KILL", time.Minute, func(t *testing.T, res process.Result) {
			require.Equal(t, cikit.JobFailed, res.State)
			require.Contains(t, res.Reason, `step "attack": the sandbox's supervisor ended`)
		}},
		{"stops its supervisor", "STOP", 5 * time.Second, func(t *testing.T, res process.Result) {
			require.Equal(t, cikit.JobFailed, res.State)
			require.Equal(t, cikit.FailureTimeout, res.FailureClass)
			require.Contains(t, res.Reason, `timed out after 5s in step "attack"`)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, sandboxed)
			bg := marker()
			res := b.exec.Run(context.Background(), &cikit.JobSpec{ID: "hang", Timeout: tc.timeout, Env: map[string]string{"BG": bg, "SIG": tc.signal},
				Steps: []cikit.Step{{Name: "attack", Run: `sleep "$BG" & test "$(cat /proc/2/comm)" = 5 && kill -s "$SIG" 2; sleep "$BG"`}, {Name: "never", Run: "true"}}})
			tc.want(t, res)
			require.Len(t, res.Steps, 1)
			require.Empty(t, proctest.Running("sleep", bg))
			left, err := os.ReadDir(b.work)
			require.NoError(t, err)
			require.Empty(t, left)
		})
	}
}

// TestSandboxDefaultLimits: with DefaultLimits a fork bomb stops at the
// process limit and the job fails naming it, and the job's output starts
// with the limits in force and what enforces them. Not parallel: a
// thousand processes would slow the tests with tight timeouts.
func TestSandboxDefaultLimits(t *testing.T) {
	limits := process.DefaultLimits()
	b := setup(t, func(c *process.Config) { c.Sandbox = &process.Sandbox{Limits: limits} })
	res := b.exec.Run(context.Background(), &cikit.JobSpec{ID: "bomb", Steps: []cikit.Step{{Name: "bomb",
		Run: fmt.Sprintf("for i in $(seq %d); do sleep 600 & done", limits.Processes+50)}}})
	require.Equal(t, cikit.JobFailed, res.State, b.out.String())
	require.Contains(t, res.Reason, fmt.Sprintf("the job was at its limit of %d processes and threads (Sandbox.Limits.Processes)", limits.Processes))
	header, _, _ := strings.Cut(b.out.String(), "\n")
	require.Equal(t, fmt.Sprintf("--- limits: processes %d (rlimit), CPU time 4h0m0s per process (rlimit), file size 16 GiB (rlimit), /tmp and /dev/shm 2 GiB each (tmpfs); "+
		"NOT ENFORCED (no cgroup v2 delegated to this runner): memory 4 GiB", limits.Processes), header)
}
