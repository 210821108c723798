package plugin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet"
)

// Defaults of Config.
const (
	DefaultStartTimeout    = 30 * time.Second
	DefaultMinRestartDelay = 100 * time.Millisecond
	DefaultMaxRestartDelay = 30 * time.Second
)

// LostMessage is the Message of a runner the host reports failed because
// the plugin that held it exited and its successor does not have it.
const LostMessage = "plugin restarted; runner lost"

// Errors of a Host.
var (
	// ErrUnavailable: no plugin process answers, because it exited under
	// the call or could not be restarted. The Host keeps restarting it.
	ErrUnavailable = errors.New("plugin: the backend plugin is not running")
	// ErrClosed: the Host was closed.
	ErrClosed = errors.New("plugin: the host is closed")
)

// Config configures a Host. Path is required.
type Config struct {
	// Path is the plugin's executable.
	Path string
	// Args are the plugin's arguments.
	Args []string
	// Env is added to the host's environment for the plugin.
	Env []string
	// StartTimeout bounds a start of the plugin: its handshake and, after
	// a restart, its answer listing its runners. Default:
	// DefaultStartTimeout.
	StartTimeout time.Duration
	// MinRestartDelay is the wait before the first restart after the
	// plugin exited; it doubles after each exit or failed start, up to
	// MaxRestartDelay, and is back at MinRestartDelay once a plugin has
	// stayed up for MaxRestartDelay. Defaults: DefaultMinRestartDelay,
	// DefaultMaxRestartDelay.
	MinRestartDelay time.Duration
	MaxRestartDelay time.Duration
	// OnRestart, if set, is called after each restart, once the restarted
	// plugin's runners are known: lost are the runners the host knew of
	// that the plugin no longer holds, now InstanceFailed with
	// LostMessage; adopted are all the runners the plugin holds. It is
	// called from the Host's own goroutine, which watches for the next
	// exit only once it returns; it may call the Host's methods, except
	// Close.
	OnRestart func(lost, adopted []*fleet.Instance)
	// Logger receives the host's diagnostics and, with their levels and
	// attributes, the logs of the plugin (those it writes with NewLogger,
	// and lines it prints). Default: slog.Default().
	Logger *slog.Logger
}

// Host runs a backend plugin and is the fleet.Backend it serves: each
// method is a call to the plugin, with the caller's context (deadline and
// cancellation) carried across. See the package documentation for what
// happens when the plugin exits.
type Host struct {
	cfg  Config
	log  *slog.Logger
	stop context.CancelFunc
	done chan struct{} // closed when the supervising goroutine has exited

	mu sync.Mutex
	// changed is closed, and replaced, when cur, downErr or closed change.
	changed chan struct{}
	cur     *proc // the plugin that answers calls; nil while it restarts
	downErr error // why the last start failed, while no plugin answers
	closed  bool
	// gen counts the plugin's starts; answers from an older plugin do
	// not change what the host knows.
	gen uint64
	// seq counts the recordings in known: an answer may forget only what
	// was recorded before its call began.
	seq   uint64
	known map[string]knownInstance
	// lost are the runners lost with a plugin, until they are destroyed.
	lost map[string]*fleet.Instance
}

var _ fleet.Backend = (*Host)(nil)

type knownInstance struct {
	inst *fleet.Instance
	seq  uint64
}

// proc is one plugin process and the connection to it.
type proc struct {
	client *goplugin.Client
	be     *remote
	gen    uint64
	// kill ends the process's exec.CommandContext, killing it if it still
	// runs.
	kill context.CancelFunc
}

// stop shuts the plugin down (it gets a moment to exit by itself) and
// waits for go-plugin's goroutines of it to end.
func (p *proc) stop() {
	p.client.Kill()
	p.kill()
}

// Open starts the plugin at cfg.Path and returns a Host serving it once
// the plugin has answered the handshake. ctx bounds the start only;
// cancelling it kills the plugin being started.
func Open(ctx context.Context, cfg Config) (*Host, error) {
	if cfg.Path == "" {
		return nil, errors.New("plugin: Config.Path is required")
	}
	cfg.StartTimeout = cmp.Or(cfg.StartTimeout, DefaultStartTimeout)
	cfg.MinRestartDelay = cmp.Or(cfg.MinRestartDelay, DefaultMinRestartDelay)
	cfg.MaxRestartDelay = cmp.Or(cfg.MaxRestartDelay, DefaultMaxRestartDelay)
	if cfg.StartTimeout < 0 || cfg.MinRestartDelay < 0 || cfg.MaxRestartDelay < cfg.MinRestartDelay {
		return nil, fmt.Errorf("plugin: Config.StartTimeout (%s) must be positive, and MaxRestartDelay (%s) at least MinRestartDelay (%s)",
			cfg.StartTimeout, cfg.MaxRestartDelay, cfg.MinRestartDelay)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := &Host{
		cfg:     cfg,
		log:     cfg.Logger.With("backend", filepath.Base(cfg.Path)),
		done:    make(chan struct{}),
		changed: make(chan struct{}),
		known:   make(map[string]knownInstance),
		lost:    make(map[string]*fleet.Instance),
	}
	p, err := h.start(ctx)
	if err != nil {
		return nil, err
	}
	h.gen, p.gen, h.cur = 1, 1, p
	runCtx, stop := context.WithCancel(context.Background())
	h.stop = stop
	go h.supervise(runCtx, p)
	return h, nil
}

// start starts a plugin process and connects to it.
func (h *Host) start(ctx context.Context) (*proc, error) {
	procCtx, kill := context.WithCancel(context.Background())
	cmd := exec.CommandContext(procCtx, h.cfg.Path, h.cfg.Args...)
	cmd.Env = append(os.Environ(), h.cfg.Env...)
	client := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig:  handshake,
		Plugins:          goplugin.PluginSet{pluginName: &backendPlugin{}},
		Cmd:              cmd,
		SkipHostEnv:      true,
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		AutoMTLS:         true,
		StartTimeout:     h.cfg.StartTimeout,
		Logger:           newHCLogAdapter(h.log.Handler()),
		SyncStdout:       &lineWriter{log: h.log.With("stream", "stdout")},
		SyncStderr:       &lineWriter{log: h.log.With("stream", "stderr")},
	})
	p := &proc{client: client, kill: kill}
	// go-plugin's start takes no context: ending ours kills the process,
	// which ends the start.
	stopKilling := context.AfterFunc(ctx, kill)
	be, err := dispense(client)
	if !stopKilling() && err == nil {
		err = ctx.Err()
	}
	if err != nil {
		p.stop()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("plugin: starting %s: %w", h.cfg.Path, err)
	}
	p.be = be
	return p, nil
}

func dispense(client *goplugin.Client) (*remote, error) {
	conn, err := client.Client()
	if err != nil {
		return nil, err
	}
	raw, err := conn.Dispense(pluginName)
	if err != nil {
		return nil, err
	}
	return raw.(*remote), nil
}

// supervise owns the plugin process: it restarts the plugin when it exits
// and stops it when the Host is closed.
func (h *Host) supervise(ctx context.Context, p *proc) {
	defer close(h.done)
	delay := h.cfg.MinRestartDelay
	for {
		healthy := time.NewTimer(h.cfg.MaxRestartDelay)
		for exited := false; !exited; {
			select {
			case <-ctx.Done():
				healthy.Stop()
				p.stop()
				return
			case <-healthy.C:
				delay = h.cfg.MinRestartDelay
			case <-p.be.exited:
				exited = true
			}
		}
		healthy.Stop()
		h.log.Error("plugin: the backend plugin exited; restarting it", "in", delay)
		h.setDown(nil)
		p.stop()

		var lost, adopted []*fleet.Instance
		for {
			wait := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				wait.Stop()
				return
			case <-wait.C:
			}
			delay = min(delay*2, h.cfg.MaxRestartDelay)
			var err error
			if p, lost, adopted, err = h.restart(ctx); err == nil {
				break
			}
			if ctx.Err() != nil {
				return
			}
			h.log.Error("plugin: restarting the backend plugin failed", "error", err, "retry_in", delay)
			h.setDown(err)
		}
		h.log.Info("plugin: the backend plugin restarted", "lost", len(lost), "adopted", len(adopted))
		if h.cfg.OnRestart != nil && ctx.Err() == nil {
			h.cfg.OnRestart(lost, adopted)
		}
	}
}

// setDown records that no plugin answers calls, and why, if a start
// failed.
func (h *Host) setDown(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cur, h.downErr = nil, err
	h.signal()
}

// signal wakes the calls waiting for a change. h.mu is held.
func (h *Host) signal() {
	close(h.changed)
	h.changed = make(chan struct{})
}

// restart starts a new plugin, asks it for its runners, and makes it the
// one that answers calls. It returns the runners lost and adopted, each a
// copy of its own.
func (h *Host) restart(ctx context.Context) (p *proc, lost, adopted []*fleet.Instance, err error) {
	if p, err = h.start(ctx); err != nil {
		return nil, nil, nil, err
	}
	lctx, cancel := context.WithTimeout(ctx, h.cfg.StartTimeout)
	reported, err := p.be.Instances(lctx)
	cancel()
	if err != nil {
		p.stop()
		return nil, nil, nil, fmt.Errorf("plugin: listing the runners of the restarted plugin: %w", err)
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	known := make(map[string]*fleet.Instance, len(h.known))
	for id, k := range h.known {
		known[id] = k.inst
	}
	lost = reconcile(known, reported)
	h.known = make(map[string]knownInstance, len(reported))
	for _, inst := range reported {
		h.seq++
		h.known[inst.ID] = knownInstance{inst: cloneInstance(inst), seq: h.seq}
		delete(h.lost, inst.ID)
		adopted = append(adopted, cloneInstance(inst))
	}
	for _, inst := range lost {
		h.lost[inst.ID] = cloneInstance(inst)
	}
	h.gen++
	p.gen = h.gen
	h.cur, h.downErr = p, nil
	h.signal()
	return p, lost, adopted, nil
}

// reconcile decides what became of the runners the host knew of (by ID,
// as last reported) when a restarted plugin reports it holds reported:
// those it does not hold, and that had not ended, are lost, and returned
// as failed, in ID order. Those that had ended are forgotten, as a
// backend may forget ended runners.
func reconcile(known map[string]*fleet.Instance, reported []*fleet.Instance) []*fleet.Instance {
	held := make(map[string]bool, len(reported))
	for _, inst := range reported {
		held[inst.ID] = true
	}
	var lost []*fleet.Instance
	for _, id := range slices.Sorted(maps.Keys(known)) {
		inst := known[id]
		if held[id] || inst.State.Ended() {
			continue
		}
		l := cloneInstance(inst)
		l.State, l.Message = fleet.InstanceFailed, LostMessage
		lost = append(lost, l)
	}
	return lost
}

func cloneInstance(i *fleet.Instance) *fleet.Instance {
	c := *i
	c.Labels = slices.Clone(i.Labels)
	return &c
}

// acquire returns the plugin to call, and the recording count as the call
// begins. While the plugin restarts it waits, up to ctx.
func (h *Host) acquire(ctx context.Context) (*proc, uint64, error) {
	for {
		h.mu.Lock()
		switch {
		case h.closed:
			h.mu.Unlock()
			return nil, 0, ErrClosed
		case h.cur != nil:
			p, seq := h.cur, h.seq
			h.mu.Unlock()
			return p, seq, nil
		case h.downErr != nil:
			err := h.downErr
			h.mu.Unlock()
			return nil, 0, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		changed := h.changed
		h.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, 0, fmt.Errorf("plugin: waiting for the backend plugin to restart: %w", ctx.Err())
		case <-changed:
		}
	}
}

// record notes inst as a plugin's answer. h.mu is held.
func (h *Host) record(p *proc, inst *fleet.Instance) {
	if p.gen != h.gen {
		return
	}
	h.seq++
	h.known[inst.ID] = knownInstance{inst: cloneInstance(inst), seq: h.seq}
}

// forget drops id, as of a call that began at seq, unless a later answer
// recorded it. h.mu is held.
func (h *Host) forget(p *proc, id string, seq uint64) {
	if k, ok := h.known[id]; ok && p.gen == h.gen && k.seq <= seq {
		delete(h.known, id)
	}
}

// Info asks the plugin for its BackendInfo.
func (h *Host) Info(ctx context.Context) (*fleet.BackendInfo, error) {
	p, _, err := h.acquire(ctx)
	if err != nil {
		return nil, err
	}
	return p.be.Info(ctx)
}

// Provision asks the plugin for a runner.
func (h *Host) Provision(ctx context.Context, req *fleet.ProvisionRequest) (*fleet.Instance, error) {
	p, _, err := h.acquire(ctx)
	if err != nil {
		return nil, err
	}
	inst, err := p.be.Provision(ctx, req)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.record(p, inst)
	delete(h.lost, inst.ID)
	return inst, nil
}

// Instance reports a runner: a lost one as the host recorded it, others
// as the plugin reports them.
func (h *Host) Instance(ctx context.Context, id string) (*fleet.Instance, error) {
	p, seq, err := h.acquire(ctx)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	l, isLost := h.lost[id]
	h.mu.Unlock()
	if isLost {
		return cloneInstance(l), nil
	}
	inst, err := p.be.Instance(ctx, id)
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case errors.Is(err, cikit.ErrNotFound):
		h.forget(p, id, seq)
		return nil, err
	case err != nil:
		return nil, err
	}
	h.record(p, inst)
	return inst, nil
}

// Instances lists the plugin's runners and the lost ones, ordered by ID.
func (h *Host) Instances(ctx context.Context) ([]*fleet.Instance, error) {
	p, seq, err := h.acquire(ctx)
	if err != nil {
		return nil, err
	}
	list, err := p.be.Instances(ctx)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	held := make(map[string]bool, len(list))
	for _, inst := range list {
		held[inst.ID] = true
		h.record(p, inst)
	}
	for id := range h.known {
		if !held[id] {
			h.forget(p, id, seq)
		}
	}
	for id, l := range h.lost {
		if !held[id] {
			list = append(list, cloneInstance(l))
		}
	}
	slices.SortFunc(list, func(a, b *fleet.Instance) int { return strings.Compare(a.ID, b.ID) })
	return list, nil
}

// Destroy asks the plugin to destroy a runner; a lost runner is forgotten
// once the plugin agreed.
func (h *Host) Destroy(ctx context.Context, id string) error {
	p, seq, err := h.acquire(ctx)
	if err != nil {
		return err
	}
	if err := p.be.Destroy(ctx, id); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.forget(p, id, seq)
	delete(h.lost, id)
	return nil
}

// Close stops the plugin (it gets a moment to exit by itself; see Serve)
// and every goroutine of the Host. Calls after Close fail with ErrClosed.
// Close is safe to call more than once.
func (h *Host) Close() error {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		h.cur = nil
		h.signal()
	}
	h.mu.Unlock()
	h.stop()
	<-h.done
	return nil
}
