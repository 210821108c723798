package local_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/fleet/fleettest"
	"github.com/cikit/cikit/fleet/image"
	"github.com/cikit/cikit/fleet/local"
	"github.com/cikit/cikit/fleet/process"
	"github.com/cikit/cikit/internal/imagetest"
	"github.com/cikit/cikit/internal/testenv"
	"github.com/cikit/cikit/lease"
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

// TestJobRunsInItsImage: a job naming an image, given to a runner of a
// backend whose executor has Config.Process.Images, runs in that image,
// pulled from the registry: its step finds the image's os-release, which
// the host has not. Close releases the image directory, which another
// store may then lock.
func TestJobRunsInItsImage(t *testing.T) {
	reg := imagetest.NewRegistry(t, nil)
	reg.Push(t, "test/busybox:1", imagetest.BusyboxImage(t, "1"))
	root := t.TempDir()
	// The sandbox's user, another than root's when the test runs as
	// root, must reach the image directory.
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(root, "images")
	b := newBackend(t, local.Config{Process: process.Config{Sandbox: &process.Sandbox{Mode: process.SandboxRequire},
		Images: &process.Images{Pull: image.Config{Dir: dir, Insecure: []string{reg.Host}}}}})

	jobs := dag.NewMemoryStore(dag.MemoryConfig{})
	leases, err := lease.NewManager(lease.Config{Store: lease.NewMemoryStore(), Jobs: jobs, TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const token = "local-test-registration-token"
	server, err := fleet.NewServer(fleet.ServerConfig{Jobs: jobs, Leases: leases, RegistrationTokens: []string{token},
		SigningKeys: [][]byte{[]byte(strings.Repeat("local-test", 4))}, HeartbeatInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(server)
	defer srv.Close()
	ctx := context.Background()
	run, err := jobs.RunCreate(ctx, &dag.RunCreateParams{Jobs: []*cikit.JobSpec{{ID: "in-image", RunsOn: []string{"linux"}, Format: "gitlab",
		Image: reg.Host + "/test/busybox:1", Steps: []cikit.Step{{Run: "grep -q '^ID=cikit-busybox$' /etc/os-release"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := server.DispatchRun(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Provision(ctx, &fleet.ProvisionRequest{ID: "image-runner", Pool: "local", Labels: []string{"linux"},
		Server: srv.URL, RegistrationToken: token, Ephemeral: true}); err != nil {
		t.Fatal(err)
	}
	var job *dag.Job
	deadline := time.Now().Add(60 * time.Second)
	for job == nil || !job.State.Terminal() {
		if time.Now().After(deadline) {
			t.Fatalf("the job did not end: %+v", job)
		}
		time.Sleep(20 * time.Millisecond)
		list, err := jobs.JobList(ctx, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		job = list[0]
	}
	if job.State != cikit.JobSucceeded {
		t.Fatalf("the job in its image ended %s: %s", job.State, job.Reason)
	}

	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := image.NewStore(image.Config{Dir: dir}, image.Limits{})
	if err != nil {
		t.Fatalf("the closed backend still holds its image directory: %v", err)
	}
	s.Close()
}

// TestImagesNeedTheSandbox: a backend told to run jobs unsandboxed
// refuses Config.Process.Images, saying why.
func TestImagesNeedTheSandbox(t *testing.T) {
	_, err := local.New(local.Config{Unsandboxed: true, Process: process.Config{Images: &process.Images{Pull: image.Config{Dir: t.TempDir()}}}})
	if err == nil || !strings.Contains(err.Error(), "Config.Process.Images needs the sandbox") {
		t.Fatalf("an unsandboxed backend with images: %v", err)
	}
}
