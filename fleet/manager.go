package fleet

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/fleet/autoscale"
)

// DefaultManagerInterval is how often a Manager looks at its pools.
const DefaultManagerInterval = time.Second

// PoolConfig is a runner pool: runners with the same labels from one
// Backend, scaled by one policy.
type PoolConfig struct {
	// Name names the pool: 1 to 64 letters, digits, '-', '_' or '.'.
	Name string
	// Labels are the labels of the pool's runners. A job runs on the pool
	// when each of its runs_on labels is one of them.
	Labels []string
	// Backend provisions the pool's runners.
	Backend Backend
	// Policy sizes the pool (see package fleet/autoscale).
	Policy autoscale.Policy
}

// ManagerConfig configures a Manager. Server is required; ServerURL and
// RegistrationToken are required with pools. A Manager without pools
// provisions nothing and answers Why from the runners that call the Server
// (self-hosted runners).
type ManagerConfig struct {
	// Server is the runner protocol's server: the Manager reads what its
	// runners do and what waits in its Dispatcher.
	Server *Server
	// ServerURL is the base URL runners register with.
	ServerURL string
	// RegistrationToken is given to the runners the Manager provisions;
	// it must be one of the Server's.
	RegistrationToken string
	// Pools are the runner pools, in order of preference: a queued job
	// several pools can run counts towards the first.
	Pools []PoolConfig
	// Lag, when set, reports per pool name the jobs on their way that
	// are not queued yet, such as the consumer lag of the dispatch
	// topic; the pools provision for them as if they were queued.
	Lag func(ctx context.Context) (map[string]int, error)
	// Interval is how often Run looks at the pools.
	// Default: DefaultManagerInterval.
	Interval time.Duration
	// OnUnmatched, when set, is told about the jobs that wait with labels
	// no pool and no runner has, each attempt once: the platform says so
	// in the jobs' commit statuses instead of leaving them waiting
	// silently. It is called from the Manager's loop and must not block
	// for long.
	OnUnmatched func(offers []Offer, labels []string)
	// Now is the clock. Default: time.Now.
	Now func() time.Time
	// Logger receives the Manager's diagnostics. Default: slog.Default().
	Logger *slog.Logger
}

// Manager keeps the runner pools sized to their demand: each tick it
// reconciles every pool with its Backend, counts the pool's idle, busy and
// starting runners and the queued jobs it can run, asks the autoscaler
// (autoscale.Decide) for a plan and carries it out, provisioning runners
// or destroying idle ones. Single-use runners that ended are replaced the
// same way. It also says why a queued job is not running yet (Why).
type Manager struct {
	cfg   ManagerConfig
	log   *slog.Logger
	pools []*pool

	mu        sync.Mutex
	status    map[string]*PoolStatus // by pool name, from the last tick
	unmatched map[string]bool        // label sets reported unservable
	// told are the attempts OnUnmatched was told about and that still
	// waited at the last look; tellMu serialises the looks.
	tellMu sync.Mutex
	told   map[attemptKey]bool
}

// pool is a pool and what the Manager keeps of it between ticks.
type pool struct {
	PoolConfig
	info     *BackendInfo
	history  autoscale.History
	lastUp   time.Time
	lastDown time.Time
	failed   map[string]bool // listed instances whose failure was logged
}

// PoolStatus is a pool as the Manager saw it at its last tick.
type PoolStatus struct {
	Name   string
	Labels []string
	// Idle, Busy and Starting count the pool's runners.
	Idle, Busy, Starting int
	// Queued is how many queued jobs count towards the pool.
	Queued int
	// Decision is the autoscaler's plan at the tick.
	Decision autoscale.Decision
	// At is the tick's time.
	At time.Time
}

// NewManager validates cfg and returns a Manager. It asks each backend
// for its Info, so it takes a context.
func NewManager(ctx context.Context, cfg ManagerConfig) (*Manager, error) {
	switch {
	case cfg.Server == nil:
		return nil, errors.New("fleet: ManagerConfig.Server is required")
	case len(cfg.Pools) > 0 && (cfg.ServerURL == "" || cfg.RegistrationToken == ""):
		return nil, errors.New("fleet: ManagerConfig needs the ServerURL and RegistrationToken runners register with")
	case cfg.Interval < 0:
		return nil, errors.New("fleet: ManagerConfig.Interval must not be negative")
	}
	cfg.Interval = cmp.Or(cfg.Interval, DefaultManagerInterval)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m := &Manager{cfg: cfg, log: cfg.Logger, status: map[string]*PoolStatus{}, unmatched: map[string]bool{}, told: map[attemptKey]bool{}}
	seen := map[string]bool{}
	for i, pc := range cfg.Pools {
		if err := validPoolName(pc.Name); err != nil {
			return nil, fmt.Errorf("fleet: pool %d: %w", i, err)
		}
		if seen[pc.Name] {
			return nil, fmt.Errorf("fleet: two pools are named %q", pc.Name)
		}
		seen[pc.Name] = true
		if pc.Backend == nil {
			return nil, fmt.Errorf("fleet: pool %s has no Backend", pc.Name)
		}
		if err := validLabels(pc.Labels); err != nil {
			return nil, fmt.Errorf("fleet: pool %s: %w", pc.Name, err)
		}
		if err := pc.Policy.Validate(); err != nil {
			return nil, fmt.Errorf("fleet: pool %s: %w", pc.Name, err)
		}
		info, err := pc.Backend.Info(ctx)
		if err != nil {
			return nil, fmt.Errorf("fleet: pool %s: the backend's Info: %w", pc.Name, err)
		}
		if ok, missing := info.CanProvide(pc.Labels); !ok {
			return nil, fmt.Errorf("fleet: pool %s: backend %s cannot provide labels %v: %w", pc.Name, info.Name, missing, ErrLabelsUnsupported)
		}
		_, pc.Labels = labelKey(pc.Labels)
		p := &pool{PoolConfig: pc, info: info}
		p.history.Window = pc.Policy.HistoryWindow()
		m.pools = append(m.pools, p)
	}
	return m, nil
}

func validPoolName(name string) error {
	if name == "" || len(name) > 64 || strings.IndexFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
	}) >= 0 {
		return fmt.Errorf("pool name %q must be 1 to 64 letters, digits, '-', '_' or '.'", name)
	}
	return nil
}

// Run ticks every Interval until ctx ends, then returns nil. Runners it
// provisioned keep running: destroying them is the backends' Close.
func (m *Manager) Run(ctx context.Context) error {
	t := time.NewTicker(m.cfg.Interval)
	defer t.Stop()
	for {
		if err := m.Tick(ctx); err != nil && ctx.Err() == nil {
			m.log.Warn("fleet: manager tick failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Tick looks at every pool once and carries out the autoscaler's plan.
// Pools are independent: the error of one (a backend that cannot list its
// runners) is returned, joined with the others', and the rest go on.
func (m *Manager) Tick(ctx context.Context) error {
	now := m.cfg.Now()
	var lag map[string]int
	if m.cfg.Lag != nil {
		var err error
		if lag, err = m.cfg.Lag(ctx); err != nil {
			m.log.Warn("fleet: reading the lag failed; scaling on queued jobs alone", "err", err)
		}
	}
	queued := m.assignQueued()
	runners := map[string]RunnerInfo{}
	for _, r := range m.cfg.Server.Runners() {
		runners[r.Name] = r
	}
	var errs []error
	snap := autoscale.Snapshot{Now: now}
	var live [][]*Instance // per pool, its idle runners' instances
	var counted []*pool
	for _, p := range m.pools {
		all, err := p.Backend.Instances(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("pool %s: %w", p.Name, err))
			continue
		}
		ap := autoscale.Pool{Name: p.Name, Policy: p.Policy, Queued: queued[p.Name], Lag: lag[p.Name], StartupHint: p.info.StartupHint,
			LastScaleUp: p.lastUp, LastScaleDown: p.lastDown}
		var idle []*Instance
		failed := map[string]bool{} // kept for the instances still listed
		for _, in := range all {
			if in.Pool != p.Name {
				continue
			}
			if in.State == InstanceFailed {
				if !p.failed[in.ID] {
					m.log.Warn("fleet: runner failed", "pool", p.Name, "runner", in.ID, "message", in.Message)
				}
				failed[in.ID] = true
			}
			if in.State.Ended() {
				continue
			}
			r, seen := runners[in.ID]
			switch {
			case in.State == InstanceProvisioning || !seen:
				ap.Provisioning = append(ap.Provisioning, in.Created)
			case r.State == RunnerBusy:
				ap.Busy++
			case p.Policy.Ephemeral && r.Jobs > 0:
				// A single-use runner that ran its job is on its way
				// out: neither idle (to destroy, or to count on) nor
				// busy.
			default:
				ap.Idle++
				idle = append(idle, in)
			}
		}
		p.failed = failed
		p.history.Add(autoscale.Sample{At: now, Demand: ap.Busy + ap.Queued})
		ap.Demand, ap.IdleSince = p.history.Samples(), p.history.IdleSince()
		snap.Pools = append(snap.Pools, ap)
		live = append(live, idle)
		counted = append(counted, p)
	}
	decisions := autoscale.Decide(snap)
	var wg sync.WaitGroup
	var emu sync.Mutex
	for k, d := range decisions {
		p, ap := counted[k], snap.Pools[k]
		m.mu.Lock()
		m.status[p.Name] = &PoolStatus{Name: p.Name, Labels: p.Labels, Idle: ap.Idle, Busy: ap.Busy, Starting: len(ap.Provisioning),
			Queued: ap.Queued, Decision: d, At: now}
		m.mu.Unlock()
		if d.Provision > 0 {
			p.lastUp = now
			m.log.Info("fleet: scaling up", "pool", p.Name, "runners", d.Provision, "reason", d.Reason)
		}
		if d.Destroy > 0 {
			p.lastDown = now
			m.log.Info("fleet: scaling down", "pool", p.Name, "runners", d.Destroy, "reason", d.Reason)
		}
		for range d.Provision {
			wg.Go(func() {
				if err := m.provision(ctx, p); err != nil {
					emu.Lock()
					errs = append(errs, err)
					emu.Unlock()
				}
			})
		}
		// The newest idle runners go first: the oldest have proven they
		// start.
		idle := live[k]
		slices.SortFunc(idle, func(a, b *Instance) int { return b.Created.Compare(a.Created) })
		for _, in := range idle[:min(d.Destroy, len(idle))] {
			wg.Go(func() {
				if err := p.Backend.Destroy(ctx, in.ID); err != nil {
					emu.Lock()
					errs = append(errs, fmt.Errorf("pool %s: destroying %s: %w", p.Name, in.ID, err))
					emu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// provision asks p's backend for one runner.
func (m *Manager) provision(ctx context.Context, p *pool) error {
	var b [6]byte
	_, _ = rand.Read(b[:])
	req := &ProvisionRequest{ID: p.Name + "-" + hex.EncodeToString(b[:]), Pool: p.Name, Labels: p.Labels,
		Server: m.cfg.ServerURL, RegistrationToken: m.cfg.RegistrationToken, Ephemeral: p.Policy.Ephemeral}
	if _, err := p.Backend.Provision(ctx, req); err != nil {
		return fmt.Errorf("pool %s: provisioning %s: %w", p.Name, req.ID, err)
	}
	return nil
}

// assignQueued counts the jobs waiting in the Dispatcher towards the first
// pool that can run them, and reports once each label set no pool and no
// runner can serve.
func (m *Manager) assignQueued() map[string]int {
	m.tellMu.Lock()
	defer m.tellMu.Unlock()
	out := map[string]int{}
	still := map[attemptKey]bool{}
	for _, q := range m.cfg.Server.Dispatcher().Queues() {
		if q.Restricted > 0 && m.assignRestricted(q, out) {
			continue
		}
		p := m.poolFor(q.Labels)
		if p != nil {
			// Jobs their tenants' limits hold back need no runner yet.
			out[p.Name] += q.Len - q.Held
			continue
		}
		key := strings.Join(q.Labels, " ")
		m.mu.Lock()
		first := !m.unmatched[key]
		m.unmatched[key] = true
		m.mu.Unlock()
		if m.runnerMatches(q.Labels) {
			continue
		}
		if first {
			m.log.Warn("fleet: jobs wait that no runner matches", "labels", q.Labels, "jobs", q.Len)
		}
		if m.cfg.OnUnmatched == nil {
			continue
		}
		var tell []Offer
		for _, o := range m.cfg.Server.Dispatcher().Waiting(q.Labels) {
			k := attemptKey{o.RunID, o.JobID, o.Attempt}
			still[k] = true
			if !m.told[k] {
				tell = append(tell, o)
			}
		}
		if len(tell) > 0 {
			m.cfg.OnUnmatched(tell, slices.Clone(q.Labels))
		}
	}
	m.told = still
	return out
}

// assignRestricted counts the offers of queue q, some of whose
// Admissions restrict the runners that may take them, towards the first
// pool each may run on, and reports whether every offer has one; if
// not, nothing is counted and the queue is told of as unmatched (the
// offers that have a pool then grow it through the queue's own pool,
// as far as one matches).
func (m *Manager) assignRestricted(q Queue, out map[string]int) bool {
	d := m.cfg.Server.Dispatcher()
	offers := d.Waiting(q.Labels)
	pools := make([]*pool, len(offers))
	for i, o := range offers {
		if pools[i] = m.poolForJob(q.Labels, o.Spec); pools[i] == nil {
			return false
		}
	}
	for i, o := range offers {
		// Jobs their tenants' limits hold back need no runner yet.
		if running, limit := d.TenantRunning(o.Tenant); limit > 0 && running >= limit {
			continue
		}
		out[pools[i].Name]++
	}
	return true
}

// poolFor returns the first pool whose runners have every label of
// labels, or nil.
func (m *Manager) poolFor(labels []string) *pool {
	return m.poolForJob(labels, nil)
}

// poolForJob returns the first pool whose runners have every label of
// labels and may run a job of spec (its Admission allows their labels),
// or nil.
func (m *Manager) poolForJob(labels []string, spec *cikit.JobSpec) *pool {
	for _, p := range m.pools {
		if hasAll(p.Labels, labels) && mayRun(spec, p.Labels) {
			return p
		}
	}
	return nil
}

// runnerMatches reports whether a runner the Server knows has every label
// of labels: a self-hosted runner, say, outside the pools.
func (m *Manager) runnerMatches(labels []string) bool {
	return m.runnerMatchesJob(labels, nil)
}

// runnerMatchesJob is runnerMatches for the runners that may run a job
// of spec.
func (m *Manager) runnerMatchesJob(labels []string, spec *cikit.JobSpec) bool {
	for _, r := range m.cfg.Server.Runners() {
		if hasAll(r.Labels, labels) && mayRun(spec, r.Labels) {
			return true
		}
	}
	return false
}

func hasAll(have, need []string) bool {
	for _, l := range need {
		if !slices.Contains(have, l) {
			return false
		}
	}
	return true
}

// Pools returns the pools as the last tick saw them, in configuration
// order; a pool not counted yet has only its name and labels.
func (m *Manager) Pools() []PoolStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]PoolStatus, 0, len(m.pools))
	for _, p := range m.pools {
		if st, ok := m.status[p.Name]; ok {
			c := *st
			c.Labels = slices.Clone(c.Labels)
			out = append(out, c)
			continue
		}
		out = append(out, PoolStatus{Name: p.Name, Labels: slices.Clone(p.Labels)})
	}
	return out
}

// WaitCode classifies why a job is not running.
type WaitCode string

// The reasons a job waits.
const (
	// WaitNotWaiting: the job is not waiting for a runner (it is
	// pending on its needs, running or finished).
	WaitNotWaiting WaitCode = "not_waiting"
	// WaitNoRunnerMatches: no pool and no runner has all the job's
	// labels; it waits until one registers, or its queue timeout.
	WaitNoRunnerMatches WaitCode = "no_runner_matches"
	// WaitRunnerAvailable: an idle runner is about to take it.
	WaitRunnerAvailable WaitCode = "runner_available"
	// WaitScalingUp: runners are starting for it.
	WaitScalingUp WaitCode = "scaling_up"
	// WaitWarmPoolEmpty: nothing is idle or starting; the pool grows at
	// its next scale-up.
	WaitWarmPoolEmpty WaitCode = "warm_pool_empty"
	// WaitPoolAtMax: the pool is at its maximum; the job waits for a busy
	// runner.
	WaitPoolAtMax WaitCode = "pool_at_max"
	// WaitSelfHosted: only runners outside the pools match, and none is
	// idle.
	WaitSelfHosted WaitCode = "self_hosted_busy"
	// WaitTenantLimit: the job's tenant has as many jobs running as its
	// limit allows (ServerConfig.TenantLimit).
	WaitTenantLimit WaitCode = "tenant_limit"
	// WaitManual: the job is a manual one and waits for a person to
	// start it; it never starts on its own.
	WaitManual WaitCode = "manual"
	// WaitApproval: the job is held by an approval gate
	// (cikit.JobSpec.Gate) and waits for a person allowed to approve it.
	WaitApproval WaitCode = "approval"
	// WaitNotAllowed: runners match the job's labels, but the policy
	// that admitted it (cikit.Admission.RunnerLabelsAllowed) lets none
	// of them take it.
	WaitNotAllowed WaitCode = "runner_not_allowed"
	// WaitDelayed: the job is a delayed one and waits for its start_in
	// to pass (its ReadyAt), then becomes READY.
	WaitDelayed WaitCode = "delayed"
)

// WaitReason says why a job is not running yet.
type WaitReason struct {
	RunID, JobID string
	State        cikit.JobState
	Code         WaitCode
	// Message says it in a sentence, such as "no runner matches labels
	// [gpu large]".
	Message string
	// Pool is the pool the job counts towards, if any.
	Pool string
	// ETA, when ETAKnown, estimates how long until a runner is ready for
	// it (Code WaitScalingUp).
	ETA      time.Duration
	ETAKnown bool
}

// Why says why job jobID of run runID is not running yet. The job's state
// and labels come from the Server's job store; the pools' state from the
// last tick.
func (m *Manager) Why(ctx context.Context, runID, jobID string) (*WaitReason, error) {
	j, err := m.cfg.Server.cfg.Jobs.JobGet(ctx, runID, jobID)
	if err != nil {
		return nil, err
	}
	w := &WaitReason{RunID: runID, JobID: jobID, State: j.State}
	switch j.State {
	case cikit.JobManual:
		if j.Spec != nil && j.Spec.Gate != nil {
			w.Code, w.Message = WaitApproval, dag.GateWaiting(j.Spec.Gate)
			return w, nil
		}
		w.Code, w.Message = WaitManual, "the job is manual: waiting for a person to start it"
		return w, nil
	case cikit.JobDelayed:
		w.Code, w.Message = WaitDelayed, "the job is delayed until "+j.ReadyAt.UTC().Format(time.RFC3339)
		return w, nil
	}
	if j.State != cikit.JobReady && j.State != cikit.JobQueued {
		w.Code, w.Message = WaitNotWaiting, fmt.Sprintf("the job is %s, not waiting for a runner", j.State)
		return w, nil
	}
	var labels []string
	if j.Spec != nil {
		_, labels = labelKey(j.Spec.RunsOn)
	}
	p := m.poolForJob(labels, j.Spec)
	allowed := p != nil || m.runnerMatchesJob(labels, j.Spec)
	if !allowed && restricted(j.Spec) && (m.poolFor(labels) != nil || m.runnerMatches(labels)) {
		w.Code, w.Message = WaitNotAllowed, notAllowed(j.Spec.Admission)
		return w, nil
	}
	if allowed {
		srv := m.cfg.Server
		if tenant := srv.tenant(ctx, nil, runID); tenant != "" {
			if running, limit := srv.dispatch.TenantRunning(tenant); limit > 0 && running >= limit {
				w.Code = WaitTenantLimit
				w.Message = fmt.Sprintf("tenant %s is at its limit of %d running jobs; the job waits for one of them to end", tenant, limit)
				return w, nil
			}
		}
	}
	if p == nil {
		var idle, busy int
		for _, r := range m.cfg.Server.Runners() {
			if !hasAll(r.Labels, labels) || !mayRun(j.Spec, r.Labels) {
				continue
			}
			if r.State == RunnerIdle {
				idle++
			} else {
				busy++
			}
		}
		switch {
		case idle+busy == 0:
			w.Code, w.Message = WaitNoRunnerMatches, fmt.Sprintf("no runner matches labels [%s]", strings.Join(labels, " "))
		case idle > 0:
			w.Code, w.Message = WaitRunnerAvailable, fmt.Sprintf("%d idle runners match labels [%s]; one takes the job next", idle, strings.Join(labels, " "))
		default:
			w.Code, w.Message = WaitSelfHosted, fmt.Sprintf("all %d runners matching labels [%s] are busy; no pool can add more", busy, strings.Join(labels, " "))
		}
		return w, nil
	}
	w.Pool = p.Name
	m.mu.Lock()
	st, ok := m.status[p.Name]
	m.mu.Unlock()
	if !ok {
		w.Code, w.Message = WaitWarmPoolEmpty, fmt.Sprintf("pool %s has not been sized yet", p.Name)
		return w, nil
	}
	wait := st.Decision.Wait
	w.Message = wait.Message(p.Name)
	switch wait.Kind {
	case autoscale.WaitAvailable:
		w.Code = WaitRunnerAvailable
	case autoscale.WaitScalingUp:
		w.Code = WaitScalingUp
		w.ETA, w.ETAKnown = wait.ETA, wait.ETAKnown
	case autoscale.WaitAtMax:
		w.Code = WaitPoolAtMax
	default:
		w.Code = WaitWarmPoolEmpty
	}
	return w, nil
}

// whyResponse is the JSON form of a WaitReason.
type whyResponse struct {
	RunID      string         `json:"run_id"`
	JobID      string         `json:"job_id"`
	State      cikit.JobState `json:"state"`
	Code       WaitCode       `json:"code"`
	Message    string         `json:"message"`
	Pool       string         `json:"pool,omitempty"`
	ETASeconds *float64       `json:"eta_seconds,omitempty"`
}

// WhyHandler answers GET requests with the WaitReason of the job named by
// the request's run_id and job_id path values, as JSON: the platform's API
// mounts it at a pattern with both, such as
// "GET /api/v1/runs/{run_id}/jobs/{job_id}/wait", behind its own
// authorization.
func (m *Manager) WhyHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, "only GET is allowed")
			return
		}
		runID, jobID := r.PathValue("run_id"), r.PathValue("job_id")
		if runID == "" || jobID == "" {
			writeError(w, http.StatusInternalServerError, "the handler is mounted without {run_id} and {job_id} in its pattern")
			return
		}
		why, err := m.Why(r.Context(), runID, jobID)
		switch {
		case errors.Is(err, cikit.ErrNotFound):
			writeError(w, http.StatusNotFound, err.Error())
			return
		case err != nil:
			m.log.Error("fleet: why", "run", runID, "job", jobID, "err", err)
			writeError(w, http.StatusServiceUnavailable, "the job store is unavailable; try again")
			return
		}
		resp := whyResponse{RunID: why.RunID, JobID: why.JobID, State: why.State, Code: why.Code, Message: why.Message, Pool: why.Pool}
		if why.ETAKnown {
			eta := why.ETA.Seconds()
			resp.ETASeconds = &eta
		}
		writeJSON(w, http.StatusOK, resp)
	})
}

// notAllowed says that the policy that admitted a job lets none of the
// runners that match it take it.
func notAllowed(a *cikit.Admission) string {
	msg := "no runner may take it: the policy allows runners labelled [" + strings.Join(a.RunnerLabelsAllowed, " ") + "] only"
	if a.Reason != "" {
		msg += " (" + a.Reason + ")"
	}
	return msg
}
