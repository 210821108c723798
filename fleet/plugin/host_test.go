package plugin_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/fleet/plugin"
	"github.com/cikit/cikit/internal/proctest"
)

// build builds the main package pkg into a directory of t's and returns
// the binary's path.
func build(t *testing.T, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput()
	require.NoError(t, err, "go build %s:\n%s", pkg, out)
	return bin
}

// recorder is a slog.Handler that keeps the records it is given.
type recorder struct {
	mu    *sync.Mutex
	recs  *[]record
	attrs []slog.Attr
}

type record struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func newRecorder() *recorder { return &recorder{mu: new(sync.Mutex), recs: new([]record)} }

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	attrs := map[string]string{}
	for _, a := range r.attrs {
		attrs[a.Key] = a.Value.String()
	}
	rec.Attrs(func(a slog.Attr) bool {
		attrs[a.Key] = a.Value.String()
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.recs = append(*r.recs, record{level: rec.Level, msg: rec.Message, attrs: attrs})
	return nil
}

func (r *recorder) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &recorder{mu: r.mu, recs: r.recs, attrs: append(r.attrs[:len(r.attrs):len(r.attrs)], attrs...)}
}

func (r *recorder) WithGroup(string) slog.Handler { return r }

// has reports whether a record with msg and attrs (and, when level is not
// nil, at that level) was logged.
func (r *recorder) has(msg string, level *slog.Level, attrs map[string]string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range *r.recs {
		if rec.msg != msg || level != nil && rec.level != *level {
			continue
		}
		ok := true
		for k, v := range attrs {
			ok = ok && rec.attrs[k] == v
		}
		if ok {
			return true
		}
	}
	return false
}

func levelOf(l slog.Level) *slog.Level { return &l }

// open opens a Host on the test plugin, closed when the test ends.
func open(t *testing.T, cfg plugin.Config) (*plugin.Host, *recorder) {
	t.Helper()
	rec := newRecorder()
	cfg.Logger = slog.New(rec)
	h, err := plugin.Open(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, h.Close()) })
	return h, rec
}

// pidOf is the process ID of the test plugin h runs.
func pidOf(t *testing.T, h *plugin.Host) int {
	t.Helper()
	info, err := h.Info(context.Background())
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimPrefix(info.Name, "testplugin-"))
	require.NoError(t, err, "name %q", info.Name)
	return pid
}

func request(id string, labels ...string) *fleet.ProvisionRequest {
	return &fleet.ProvisionRequest{ID: id, Pool: "pool", Labels: labels, Server: "https://ci.example.com", RegistrationToken: "token"}
}

// TestHost drives the test plugin, built once, through a Host.
func TestHost(t *testing.T) {
	t.Parallel()
	bin := build(t, "github.com/cikit/cikit/fleet/plugin/internal/testplugin")
	ctx := context.Background()

	t.Run("Calls", func(t *testing.T) {
		t.Parallel()
		h, logs := open(t, plugin.Config{Path: bin, Args: []string{"-labels", "linux,x64", "-max", "2"}})

		info, err := h.Info(ctx)
		require.NoError(t, err)
		require.Empty(t, cmp.Diff(&fleet.BackendInfo{Labels: []string{"linux", "x64"}, MaxRunners: 2, StartupHint: 1500 * time.Millisecond,
			CostPerHour: 0.25, Isolation: "none"}, info, cmpopts.IgnoreFields(fleet.BackendInfo{}, "Name")))

		r1, err := h.Provision(ctx, request("r1", "linux"))
		require.NoError(t, err)
		require.Equal(t, fleet.InstanceRunning, r1.State)
		require.Equal(t, []string{"linux"}, r1.Labels)
		again, err := h.Provision(ctx, request("r1", "linux"))
		require.NoError(t, err)
		require.True(t, r1.Created.Equal(again.Created), "Provision is idempotent by ID")

		_, err = h.Provision(ctx, request("r2", "gpu"))
		require.ErrorIs(t, err, fleet.ErrLabelsUnsupported)
		require.EqualError(t, err, `testplugin: label "gpu": `+fleet.ErrLabelsUnsupported.Error())
		_, err = h.Provision(ctx, request("r2", "x64"))
		require.NoError(t, err)
		_, err = h.Provision(ctx, request("r3"))
		require.ErrorIs(t, err, fleet.ErrCapacity)
		_, err = h.Provision(ctx, &fleet.ProvisionRequest{ID: "r4"})
		require.ErrorContains(t, err, "needs a Server")

		_, err = h.Instance(ctx, "nope")
		require.ErrorIs(t, err, cikit.ErrNotFound)
		require.EqualError(t, err, `testplugin: runner "nope": not found`)
		list, err := h.Instances(ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"r1", "r2"}, ids(list))

		require.NoError(t, h.Destroy(ctx, "r1"))
		require.NoError(t, h.Destroy(ctx, "r1"), "destroying a runner that is gone is no error")
		_, err = h.Instance(ctx, "r1")
		require.ErrorIs(t, err, cikit.ErrNotFound)

		// The plugin's logs reach the host's logger with their level and
		// attributes, and what it prints arrives a record a line.
		require.Eventually(t, func() bool {
			return logs.has("testplugin: provisioned", levelOf(slog.LevelInfo), map[string]string{"runner": "r1", "backend": "testplugin"}) &&
				logs.has("provisioning r2", nil, map[string]string{"stream": "stdout"})
		}, time.Minute, 10*time.Millisecond)
	})

	t.Run("Context", func(t *testing.T) {
		t.Parallel()
		h, logs := open(t, plugin.Config{Path: bin})

		dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		_, err := h.Provision(dctx, request("block-deadline"))
		require.ErrorIs(t, err, context.DeadlineExceeded)

		cctx, cancel := context.WithCancel(ctx)
		go func() {
			for !logs.has("provisioning block-cancel", nil, nil) {
				time.Sleep(time.Millisecond)
			}
			cancel()
		}()
		_, err = h.Provision(cctx, request("block-cancel"))
		require.ErrorIs(t, err, context.Canceled)

		_, err = h.Provision(cctx, request("r1"))
		require.ErrorIs(t, err, context.Canceled, "an ended context fails the call before it is made")

		// The plugin's backend saw both contexts end: the blocked
		// Provision calls recorded how.
		ended := func(id string) string {
			var msg string
			require.Eventually(t, func() bool {
				inst, err := h.Instance(ctx, id)
				if err != nil {
					return false
				}
				msg = inst.Message
				return true
			}, time.Minute, 5*time.Millisecond, "%s ended in the plugin", id)
			return msg
		}
		require.Regexp(t, `^provision ended: context (deadline exceeded|canceled); deadline set: true$`, ended("block-deadline"))
		require.Equal(t, "provision ended: context canceled; deadline set: false", ended("block-cancel"))
	})

	t.Run("Restart", func(t *testing.T) {
		t.Parallel()
		state := filepath.Join(t.TempDir(), "state.json")
		type restart struct{ lost, adopted []*fleet.Instance }
		restarts := make(chan restart, 1)
		h, logs := open(t, plugin.Config{Path: bin, Args: []string{"-state", state}, MinRestartDelay: 10 * time.Millisecond,
			OnRestart: func(lost, adopted []*fleet.Instance) { restarts <- restart{lost, adopted} }})

		a, err := h.Provision(ctx, request("a", "linux"))
		require.NoError(t, err)
		b, err := h.Provision(ctx, request("b"))
		require.NoError(t, err)
		inflight := make(chan error, 1)
		go func() {
			_, err := h.Provision(ctx, request("block-inflight"))
			inflight <- err
		}()
		require.Eventually(t, func() bool { return logs.has("provisioning block-inflight", nil, nil) }, time.Minute, time.Millisecond)

		// What the restarted plugin will find: "b" is gone, "c" appeared.
		c := &fleet.Instance{ID: "c", Pool: "other", State: fleet.InstanceRunning, Created: a.Created}
		data, err := json.Marshal([]*fleet.Instance{a, c})
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(state, data, 0o600))

		pid := pidOf(t, h)
		require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
		require.ErrorIs(t, <-inflight, plugin.ErrUnavailable, "a call in flight fails")

		r := <-restarts
		lostB := *b
		lostB.State, lostB.Message = fleet.InstanceFailed, plugin.LostMessage
		require.Empty(t, cmp.Diff([]*fleet.Instance{&lostB}, r.lost))
		require.Empty(t, cmp.Diff([]*fleet.Instance{a, c}, r.adopted))
		require.NotEqual(t, pid, pidOf(t, h), "a new process")
		require.False(t, proctest.Alive(pid))

		got, err := h.Instance(ctx, "b")
		require.NoError(t, err)
		require.Empty(t, cmp.Diff(&lostB, got), "a lost runner is reported failed")
		list, err := h.Instances(ctx)
		require.NoError(t, err)
		require.Empty(t, cmp.Diff([]*fleet.Instance{a, &lostB, c}, list))

		require.NoError(t, h.Destroy(ctx, "b"))
		_, err = h.Instance(ctx, "b")
		require.ErrorIs(t, err, cikit.ErrNotFound, "a destroyed lost runner is forgotten")
		list, err = h.Instances(ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"a", "c"}, ids(list))
		require.True(t, logs.has("plugin: the backend plugin exited; restarting it", levelOf(slog.LevelError), nil))
	})

	t.Run("FailedRestart", func(t *testing.T) {
		t.Parallel()
		fail := filepath.Join(t.TempDir(), "fail")
		restarts := make(chan []*fleet.Instance, 1)
		h, logs := open(t, plugin.Config{Path: bin, Args: []string{"-fail-if", fail},
			MinRestartDelay: 10 * time.Millisecond, MaxRestartDelay: 100 * time.Millisecond,
			OnRestart: func(lost, _ []*fleet.Instance) { restarts <- lost }})
		_, err := h.Provision(ctx, request("a"))
		require.NoError(t, err)

		require.NoError(t, os.WriteFile(fail, nil, 0o600))
		require.NoError(t, syscall.Kill(pidOf(t, h), syscall.SIGKILL))
		// Once a start failed, calls fail at once with the start's error.
		require.Eventually(t, func() bool {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			_, err := h.Info(cctx)
			return errors.Is(err, plugin.ErrUnavailable) && strings.Contains(err.Error(), "starting")
		}, time.Minute, 5*time.Millisecond)
		require.Eventually(t, func() bool { return logs.has("testplugin: told to fail", nil, nil) }, time.Minute, 5*time.Millisecond,
			"the failing plugin's output reaches the log")

		require.NoError(t, os.Remove(fail))
		lost := <-restarts
		require.Equal(t, []string{"a"}, ids(lost))
		_, err = h.Info(ctx)
		require.NoError(t, err)
	})

	t.Run("HostGone", func(t *testing.T) {
		t.Parallel()
		// A host that dies without stopping its plugin: sh started it as
		// a host would, and is killed.
		dir := t.TempDir()
		closed, handshake, pidFile := filepath.Join(dir, "closed"), filepath.Join(dir, "handshake"), filepath.Join(dir, "pid")
		sh := exec.Command("sh", "-c", `"$0" -closed "$1" >"$2" 2>/dev/null & echo $! >"$3"; wait`, bin, closed, handshake, pidFile)
		sh.Env = append(os.Environ(), "CIKIT_BACKEND_PLUGIN=8d1f3c2e-cikit-fleet-backend", "PLUGIN_PROTOCOL_VERSIONS=1")
		require.NoError(t, sh.Start())
		var pid int
		require.Eventually(t, func() bool {
			out, _ := os.ReadFile(handshake)
			data, _ := os.ReadFile(pidFile)
			var err error
			pid, err = strconv.Atoi(strings.TrimSpace(string(data)))
			return len(out) > 0 && err == nil
		}, time.Minute, 5*time.Millisecond, "the plugin serves")
		require.NoError(t, sh.Process.Kill())
		require.Error(t, sh.Wait())
		require.Eventually(t, func() bool { return !proctest.Alive(pid) }, time.Minute, 10*time.Millisecond, "the plugin exits")
		require.FileExists(t, closed, "the backend was closed")
	})

	t.Run("Close", func(t *testing.T) {
		t.Parallel()
		closed := filepath.Join(t.TempDir(), "closed")
		h, err := plugin.Open(ctx, plugin.Config{Path: bin, Args: []string{"-closed", closed}, Logger: slog.New(newRecorder())})
		require.NoError(t, err)
		pid := pidOf(t, h)
		require.NoError(t, h.Close())
		require.FileExists(t, closed, "Serve closed the backend")
		require.False(t, proctest.Alive(pid))
		_, err = h.Info(ctx)
		require.ErrorIs(t, err, plugin.ErrClosed)
		require.NoError(t, h.Close(), "twice")
	})
}

func TestOpenFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	log := slog.New(newRecorder())
	_, err := plugin.Open(ctx, plugin.Config{})
	require.ErrorContains(t, err, "Path is required")
	_, err = plugin.Open(ctx, plugin.Config{Path: "x", MinRestartDelay: time.Second, MaxRestartDelay: time.Millisecond})
	require.ErrorContains(t, err, "MaxRestartDelay")
	_, err = plugin.Open(ctx, plugin.Config{Path: filepath.Join(t.TempDir(), "missing"), Logger: log})
	require.ErrorContains(t, err, "starting")
	trueBin, err := exec.LookPath("true")
	require.NoError(t, err)
	_, err = plugin.Open(ctx, plugin.Config{Path: trueBin, Logger: log})
	require.ErrorContains(t, err, "starting", "a program that is no plugin")

	// A start that does not finish ends with its context.
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	sleep, err := exec.LookPath("sleep")
	require.NoError(t, err)
	_, err = plugin.Open(cctx, plugin.Config{Path: sleep, Args: []string{"60"}, Logger: log})
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func ids(list []*fleet.Instance) []string {
	var ids []string
	for _, inst := range list {
		ids = append(ids, inst.ID)
	}
	return ids
}
