package local_test

import (
	"context"
	"errors"
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
