// Package local is the fleet.Backend that runs runners on this machine: each
// runner is a runner agent (package fleet/agent) in this process, running
// every job with package fleet/process in a fresh single-use workspace that
// is removed after the job, sandboxed as process.Config says (see
// docs/isolation.md).
//
// It serves the embedded platform and small installations; a runner costs
// a goroutine until it takes a job, so warm pools are cheap.
package local

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/fleet/agent"
	"github.com/cikit/cikit/fleet/process"
)

// Config configures a Backend.
type Config struct {
	// Labels are the labels the backend's runners may have; nil means
	// any.
	Labels []string
	// MaxRunners bounds the runners alive at once; 0 means no bound.
	MaxRunners int
	// Process is the template of every runner's executor. An empty
	// Source means an empty directory: jobs start in an empty workspace
	// and fetch what they need. WorkRoot defaults to DefaultWorkRoot(),
	// shared by the backends of this user, so that one started after a
	// killed one removes the workspaces that one left (process.New
	// sweeps them; live ones are locked). A nil Sandbox means bubblewrap
	// when it is available, plain processes with a loud warning
	// otherwise (process.SandboxAuto), unless Unsandboxed.
	//
	// Images, when set, runs jobs in their container images: the
	// backend's runners share its one executor, and so its one image
	// directory, which the executor locks until Close. Images need the
	// sandbox: with Unsandboxed, or without bubblewrap, New fails.
	Process process.Config
	// Unsandboxed runs jobs as plain processes, without even trying the
	// sandbox: for trusted code only.
	Unsandboxed bool
	// Wait is how long a runner's claim waits for work before it claims
	// again. Default: agent.DefaultWait.
	Wait time.Duration
	// HTTPClient makes the runners' calls. Default: one client shared by
	// all runners.
	HTTPClient *http.Client
	// Retain is how long a stopped or failed runner is still reported by
	// Instance and Instances. Default: 10 minutes.
	Retain time.Duration
	// Logger receives the runners' diagnostics. Default: slog.Default().
	Logger *slog.Logger
}

// Backend runs runner agents in this process. It is safe for concurrent
// use; Close stops every runner.
type Backend struct {
	cfg  Config
	dir  string // the backend's own directory (empty source, work root)
	exec *process.Executor
	log  *slog.Logger

	mu      sync.Mutex
	runners map[string]*runner
	closed  bool
}

type runner struct {
	inst   fleet.Instance
	ended  time.Time
	cancel context.CancelFunc
	done   chan struct{} // closed when the agent has returned
}

// New returns a Backend.
func New(cfg Config) (*Backend, error) {
	if cfg.MaxRunners < 0 || cfg.Wait < 0 || cfg.Retain < 0 {
		return nil, errors.New("local: Config.MaxRunners, Wait and Retain must not be negative")
	}
	if cfg.Labels != nil {
		cfg.Labels = slices.Clone(cfg.Labels)
	}
	cfg.Retain = cmp.Or(cfg.Retain, 10*time.Minute)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 64}}
	}
	dir, err := os.MkdirTemp("", "cikit-local-")
	if err == nil {
		// The sandbox's user, another than the runner's when it runs
		// as root, must reach the workspaces below it.
		err = os.Chmod(dir, 0o711)
	}
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	pc := cfg.Process
	if pc.Source == "" {
		pc.Source = filepath.Join(dir, "source")
		if err := os.Mkdir(pc.Source, 0o755); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("local: %w", err)
		}
	}
	if pc.Sandbox == nil && !cfg.Unsandboxed {
		pc.Sandbox = &process.Sandbox{Mode: process.SandboxAuto}
	}
	if cfg.Unsandboxed {
		if pc.Images != nil {
			_ = os.RemoveAll(dir)
			return nil, errors.New("local: Config.Process.Images needs the sandbox, and Config.Unsandboxed says to run jobs without it")
		}
		pc.Sandbox = nil
	}
	if pc.WorkRoot == "" {
		pc.WorkRoot = DefaultWorkRoot()
		if err := ownDir(pc.WorkRoot); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("local: %w", err)
		}
	}
	if pc.Logger == nil {
		pc.Logger = cfg.Logger
	}
	ex, err := process.New(pc)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("local: %w", err)
	}
	return &Backend{cfg: cfg, dir: dir, exec: ex, log: cfg.Logger, runners: map[string]*runner{}}, nil
}

// DefaultWorkRoot is where a Backend's runners create workspaces unless
// Config.Process.WorkRoot says otherwise: cikit-local-work-<uid> in the
// temporary directory.
func DefaultWorkRoot() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("cikit-local-work-%d", os.Geteuid()))
}

// ownDir creates dir, mode 0711, or checks that the one there is a
// directory of this user that nobody else may write: in a shared
// temporary directory, anyone could have created it first.
func ownDir(dir string) error {
	if err := os.Mkdir(dir, 0o711); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("work root %s is not a directory of this user that only it may write; remove it or set Config.Process.WorkRoot", dir)
	}
	// The sandbox's user, another than the runner's when it runs as
	// root, must reach the workspaces below it.
	return os.Chmod(dir, 0o711)
}

// Info describes the backend.
func (b *Backend) Info(ctx context.Context) (*fleet.BackendInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &fleet.BackendInfo{Name: "local", Labels: slices.Clone(b.cfg.Labels), MaxRunners: b.cfg.MaxRunners,
		StartupHint: 10 * time.Millisecond, Isolation: b.exec.Isolation()}, nil
}

// Provision starts a runner agent for req.
func (b *Backend) Provision(ctx context.Context, req *fleet.ProvisionRequest) (*fleet.Instance, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if ok, missing := (&fleet.BackendInfo{Labels: b.cfg.Labels}).CanProvide(req.Labels); !ok {
		return nil, fmt.Errorf("local: labels %v: %w (it has %v)", missing, fleet.ErrLabelsUnsupported, b.cfg.Labels)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errors.New("local: the backend is closed")
	}
	b.pruneLocked(time.Now())
	if r, ok := b.runners[req.ID]; ok {
		return r.instance(), nil
	}
	if b.cfg.MaxRunners > 0 && b.aliveLocked() >= b.cfg.MaxRunners {
		return nil, fmt.Errorf("local: %d runners alive: %w", b.cfg.MaxRunners, fleet.ErrCapacity)
	}
	maxJobs := 0
	if req.Ephemeral {
		maxJobs = 1
	}
	a, err := agent.New(agent.Config{Server: req.Server, RegistrationToken: req.RegistrationToken, Name: req.ID,
		Labels: slices.Clone(req.Labels), Executor: agent.ProcessExecutor{Executor: b.exec}, HTTPClient: b.cfg.HTTPClient,
		Wait: b.cfg.Wait, ShutdownGrace: time.Nanosecond, MaxJobs: maxJobs, Logger: b.log.With("runner", req.ID)})
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	r := &runner{cancel: cancel, done: make(chan struct{}), inst: fleet.Instance{ID: req.ID, Pool: req.Pool,
		Labels: slices.Clone(req.Labels), Ephemeral: req.Ephemeral, State: fleet.InstanceRunning, Created: time.Now().UTC()}}
	b.runners[req.ID] = r
	go func() {
		defer close(r.done)
		err := a.Run(runCtx)
		b.mu.Lock()
		defer b.mu.Unlock()
		r.ended = time.Now()
		switch {
		case err != nil && runCtx.Err() == nil:
			r.inst.State, r.inst.Message = fleet.InstanceFailed, err.Error()
		case runCtx.Err() != nil:
			r.inst.State, r.inst.Message = fleet.InstanceStopped, "destroyed"
		default:
			r.inst.State, r.inst.Message = fleet.InstanceStopped, "took its one job"
		}
	}()
	return r.instance(), nil
}

func (r *runner) instance() *fleet.Instance {
	in := r.inst
	in.Labels = slices.Clone(in.Labels)
	return &in
}

// aliveLocked counts the runners that have not ended.
func (b *Backend) aliveLocked() int {
	n := 0
	for _, r := range b.runners {
		if !r.inst.State.Ended() {
			n++
		}
	}
	return n
}

// pruneLocked forgets runners that ended more than Retain ago.
func (b *Backend) pruneLocked(now time.Time) {
	for id, r := range b.runners {
		if r.inst.State.Ended() && now.Sub(r.ended) > b.cfg.Retain {
			delete(b.runners, id)
		}
	}
}

// Instance reports runner id.
func (b *Backend) Instance(ctx context.Context, id string) (*fleet.Instance, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.runners[id]
	if !ok {
		return nil, fmt.Errorf("local: runner %q: %w", id, cikit.ErrNotFound)
	}
	return r.instance(), nil
}

// Instances lists the runners, by ID.
func (b *Backend) Instances(ctx context.Context) ([]*fleet.Instance, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pruneLocked(time.Now())
	out := make([]*fleet.Instance, 0, len(b.runners))
	for _, r := range b.runners {
		out = append(out, r.instance())
	}
	slices.SortFunc(out, func(x, y *fleet.Instance) int { return strings.Compare(x.ID, y.ID) })
	return out, nil
}

// Destroy stops runner id: its job, if any, is cancelled and returned to
// the platform. It waits until the runner's processes are gone or ctx
// ends.
func (b *Backend) Destroy(ctx context.Context, id string) error {
	b.mu.Lock()
	r, ok := b.runners[id]
	b.mu.Unlock()
	if !ok {
		return nil
	}
	r.cancel()
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close destroys every runner, releases the executor's image directory
// and removes the backend's directory (the workspaces of its runners'
// jobs are gone by then). Closing again does nothing more.
func (b *Backend) Close() error {
	b.mu.Lock()
	first := !b.closed
	b.closed = true
	rs := make([]*runner, 0, len(b.runners))
	for _, r := range b.runners {
		rs = append(rs, r)
	}
	b.mu.Unlock()
	for _, r := range rs {
		r.cancel()
	}
	for _, r := range rs {
		<-r.done
	}
	var err error
	if first {
		err = b.exec.Close()
	}
	return errors.Join(err, os.RemoveAll(b.dir))
}
