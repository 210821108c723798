package local_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/fleet/fleettest"
	"github.com/cikit/cikit/fleet/local"
	"github.com/cikit/cikit/fleet/process"
	"github.com/cikit/cikit/internal/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// The runners' shared HTTP client keeps idle connections to the
		// suite's servers until they close.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"))
}

func newBackend(t *testing.T, cfg local.Config) *local.Backend {
	cfg.Labels, cfg.MaxRunners, cfg.Wait = []string{"linux", "local", "x64"}, 8, 500*time.Millisecond
	b, err := local.New(cfg)
	if errors.Is(err, process.ErrSandboxUnavailable) {
		testenv.ToolUnavailable(t, testenv.Bubblewrap, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	return b
}

// TestConformance runs the Backend conformance suite with each job in a
// bubblewrap sandbox, as the backend does by default where bubblewrap
// works, and with plain processes.
func TestConformance(t *testing.T) {
	for name, cfg := range map[string]local.Config{
		"sandboxed":   {Process: process.Config{Sandbox: &process.Sandbox{Mode: process.SandboxRequire}}},
		"unsandboxed": {Unsandboxed: true},
	} {
		t.Run(name, func(t *testing.T) {
			fleettest.Exercise(t, fleettest.Config{New: func(t *testing.T) fleet.Backend { return newBackend(t, cfg) },
				Labels: []string{"linux", "local"}})
		})
	}
}

// TestIsolation: the backend sandboxes by default where it can, and says
// what isolation its runners have.
func TestIsolation(t *testing.T) {
	info, err := newBackend(t, local.Config{Process: process.Config{Sandbox: &process.Sandbox{Mode: process.SandboxRequire}}}).Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Isolation != "bubblewrap" {
		t.Fatalf("a sandboxed backend reports isolation %q", info.Isolation)
	}
	info, err = newBackend(t, local.Config{}).Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Isolation != "bubblewrap" {
		t.Fatalf("by default, with bubblewrap working, the backend reports isolation %q", info.Isolation)
	}
	info, err = newBackend(t, local.Config{Unsandboxed: true}).Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Isolation != "process" {
		t.Fatalf("an unsandboxed backend reports isolation %q", info.Isolation)
	}
}

// TestNewSweepsLeftoverWorkspaces: a backend starting on a work root
// removes the workspaces a killed runner left there (a workspace whose
// lock file nobody holds, as fleet/process's
// TestNewSweepsWorkspacesOfDeadExecutors leaves with a real SIGKILL), and
// by default every backend of this user shares one work root, so a
// restarted server finds what the killed one left. It failed before:
// each backend had a fresh work root of its own and swept nothing.
func TestNewSweepsLeftoverWorkspaces(t *testing.T) {
	work := local.DefaultWorkRoot()
	if err := os.MkdirAll(work, 0o711); err != nil {
		t.Fatal(err)
	}
	leftover := filepath.Join(work, "cikit-killed-job-"+strconv.Itoa(os.Getpid()))
	if err := os.MkdirAll(filepath.Join(leftover, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(leftover+".cikit-lock", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	newBackend(t, local.Config{Unsandboxed: true})
	if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the leftover workspace %s is still there: %v", leftover, err)
	}
	if _, err := os.Stat(leftover + ".cikit-lock"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the leftover lock file is still there: %v", err)
	}
}
