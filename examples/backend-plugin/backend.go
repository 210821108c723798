package main

import (
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
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/fleet/agent"
	"github.com/cikit/cikit/fleet/process"
)

// config is what the plugin's flags set.
type config struct {
	// Labels are the labels the backend's runners may have; nil: any.
	Labels []string
	// MaxRunners bounds the runners alive at once; 0: no bound.
	MaxRunners int
	// Wait is how long a runner's claim waits for work; 0:
	// agent.DefaultWait.
	Wait time.Duration
	// Logger receives the backend's and its runners' logs.
	Logger *slog.Logger
}

// backend is a fleet.Backend whose runners are runner agents in this
// process, each running its jobs as local processes in an empty
// workspace.
//
// A team's own backend keeps its shape — the bookkeeping of runners and
// their states, the checks of Provision, idempotency by ID, Destroy that
// waits for the runner to go — and replaces what backend.boot does: there,
// it asks its cloud for a machine that runs `cikit runner` (or its own
// agent) with the request's server, token, name and labels, and watches
// it come up.
type backend struct {
	cfg  config
	log  *slog.Logger
	http *http.Client // shared by the runners; idle connections closed by Close

	mu      sync.Mutex
	runners map[string]*runner
	closed  bool
	wg      sync.WaitGroup // the runners' goroutines
}

// runner is one runner and its life.
type runner struct {
	inst   fleet.Instance // guarded by backend.mu
	cancel context.CancelFunc
	done   chan struct{} // closed when the runner has ended
}

// destroyGrace is how long a destroyed runner's job gets before it is
// killed and handed back to the platform for another attempt. Destroy
// kills jobs: the grace is the shortest the agent takes (zero means its
// default of 30 s).
const destroyGrace = time.Millisecond

func newBackend(cfg config) *backend {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &backend{
		cfg:     cfg,
		log:     cfg.Logger,
		http:    &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment}},
		runners: map[string]*runner{},
	}
}

var _ fleet.Backend = (*backend)(nil)

func (b *backend) Info(ctx context.Context) (*fleet.BackendInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// A cloud backend describes its machines here: the labels its images
	// give, its quota, how long a machine takes to boot and what it costs.
	return &fleet.BackendInfo{Name: "example", Labels: slices.Clone(b.cfg.Labels), MaxRunners: b.cfg.MaxRunners,
		StartupHint: 100 * time.Millisecond, Isolation: "process"}, nil
}

func (b *backend) Provision(ctx context.Context, req *fleet.ProvisionRequest) (*fleet.Instance, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if ok, missing := (&fleet.BackendInfo{Labels: b.cfg.Labels}).CanProvide(req.Labels); !ok {
		return nil, fmt.Errorf("example: no runner can have the labels %v: %w", missing, fleet.ErrLabelsUnsupported)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errors.New("example: the backend is closed")
	}
	if r, ok := b.runners[req.ID]; ok {
		// The fleet may ask again for a runner it asked for before (its
		// answer was lost): the same ID is the same runner.
		return r.instance(), nil
	}
	alive := 0
	for _, r := range b.runners {
		if !r.inst.State.Ended() {
			alive++
		}
	}
	if b.cfg.MaxRunners > 0 && alive >= b.cfg.MaxRunners {
		return nil, fmt.Errorf("example: %d runners alive: %w", alive, fleet.ErrCapacity)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	r := &runner{cancel: cancel, done: make(chan struct{}), inst: fleet.Instance{ID: req.ID, Pool: req.Pool,
		Labels: slices.Clone(req.Labels), Ephemeral: req.Ephemeral, State: fleet.InstanceProvisioning, Created: time.Now().UTC()}}
	b.runners[req.ID] = r
	b.wg.Add(1)
	// Provision returns at once with the runner provisioning; the runner
	// reports running once its agent has registered. A cloud backend
	// returns once the cloud accepted the request for a machine.
	go func() {
		defer b.wg.Done()
		defer close(r.done)
		b.boot(runCtx, r, req)
	}()
	return r.instance(), nil
}

// boot runs runner r until it ends, recording its states.
func (b *backend) boot(ctx context.Context, r *runner, req *fleet.ProvisionRequest) {
	log := b.log.With("runner", req.ID)
	// This is where a cloud backend creates the machine, with a start-up
	// script that runs the agent, `cikit runner -server <req.Server>
	// -labels <req.Labels> -name <req.ID>` with the token in
	// CIKIT_REGISTRATION_TOKEN (and, for an ephemeral runner, an agent
	// with MaxJobs 1 after which the machine shuts down); then it polls
	// the cloud until the machine runs or failed to boot.
	dir, err := os.MkdirTemp("", "example-runner-")
	if err != nil {
		b.end(r, fleet.InstanceFailed, err.Error())
		return
	}
	defer func() {
		if err := os.RemoveAll(dir); err != nil {
			log.Warn("example: removing the runner's directory", "error", err)
		}
	}()
	source, work := filepath.Join(dir, "source"), filepath.Join(dir, "work")
	for _, d := range []string{source, work} {
		if err := os.Mkdir(d, 0o700); err != nil {
			b.end(r, fleet.InstanceFailed, err.Error())
			return
		}
	}
	// Jobs start in an empty workspace and fetch what they need.
	ex, err := process.New(process.Config{Source: source, WorkRoot: work, Logger: log})
	if err != nil {
		b.end(r, fleet.InstanceFailed, err.Error())
		return
	}
	maxJobs := 0
	if req.Ephemeral {
		maxJobs = 1
	}
	a, err := agent.New(agent.Config{Server: req.Server, RegistrationToken: req.RegistrationToken, Name: req.ID,
		Labels: req.Labels, Executor: agent.ProcessExecutor{Executor: ex}, HTTPClient: b.http, Wait: b.cfg.Wait,
		ShutdownGrace: destroyGrace, MaxJobs: maxJobs, Logger: log})
	if err != nil {
		b.end(r, fleet.InstanceFailed, err.Error())
		return
	}
	if err := a.Register(ctx); err != nil {
		if ctx.Err() != nil {
			b.end(r, fleet.InstanceStopped, "destroyed while provisioning")
			return
		}
		b.end(r, fleet.InstanceFailed, err.Error())
		return
	}
	b.set(r, fleet.InstanceRunning, "")
	err = a.Run(ctx)
	switch {
	case ctx.Err() != nil:
		b.end(r, fleet.InstanceStopped, "destroyed")
	case err != nil:
		b.end(r, fleet.InstanceFailed, err.Error())
	default:
		b.end(r, fleet.InstanceStopped, "took its one job")
	}
}

func (b *backend) set(r *runner, st fleet.InstanceState, msg string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r.inst.State, r.inst.Message = st, msg
}

func (b *backend) end(r *runner, st fleet.InstanceState, msg string) {
	b.set(r, st, msg)
	b.log.Info("example: runner ended", "runner", r.inst.ID, "state", st, "why", msg)
}

// instance is a copy of r's Instance. backend.mu is held.
func (r *runner) instance() *fleet.Instance {
	in := r.inst
	in.Labels = slices.Clone(in.Labels)
	return &in
}

func (b *backend) Instance(ctx context.Context, id string) (*fleet.Instance, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.runners[id]
	if !ok {
		return nil, fmt.Errorf("example: runner %q: %w", id, cikit.ErrNotFound)
	}
	return r.instance(), nil
}

func (b *backend) Instances(ctx context.Context) ([]*fleet.Instance, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// A cloud backend lists its machines here, by the tag it gave them,
	// so that a restarted plugin finds the runners it had: the host adopts
	// them instead of reporting them lost.
	b.mu.Lock()
	defer b.mu.Unlock()
	list := make([]*fleet.Instance, 0, len(b.runners))
	for _, r := range b.runners {
		list = append(list, r.instance())
	}
	slices.SortFunc(list, func(x, y *fleet.Instance) int { return strings.Compare(x.ID, y.ID) })
	return list, nil
}

// Destroy stops runner id, killing its job (which the platform gives
// another attempt), waits for it to end, and forgets it.
func (b *backend) Destroy(ctx context.Context, id string) error {
	b.mu.Lock()
	r, ok := b.runners[id]
	b.mu.Unlock()
	if !ok {
		return nil
	}
	// A cloud backend terminates the machine here and waits until the
	// cloud says it is gone.
	r.cancel()
	select {
	case <-r.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.runners[id] == r {
		delete(b.runners, id)
	}
	return nil
}

// Close stops every runner and waits for them. plugin.Serve calls it
// when the host stops the plugin: runners that live in the plugin's
// process end with it. (A cloud backend's machines outlive the plugin;
// its Close only lets go of its clients.)
func (b *backend) Close() error {
	b.mu.Lock()
	b.closed = true
	for _, r := range b.runners {
		r.cancel()
	}
	b.mu.Unlock()
	b.wg.Wait()
	b.http.CloseIdleConnections()
	return nil
}
