package sim

import (
	"cmp"
	"container/heap"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cikit/cikit/fleet/autoscale"
)

// DefaultTick is the default time between two decisions.
const DefaultTick = time.Second

// Limit is the longest a run simulates when Config.Until is 0 and its
// jobs do not all finish.
const Limit = 24 * time.Hour

// Epoch is the simulated clock at the start of a run: snapshots carry
// Epoch plus the time simulated.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Job is one job of a load.
type Job struct {
	// Arrive is when the job is queued, from the start of the run.
	Arrive time.Duration
	// Duration is how long it runs once a runner takes it.
	Duration time.Duration
}

// Config describes a run: one pool, its policy and backend, and a load.
type Config struct {
	// Policy is the pool's policy; it must be valid.
	Policy autoscale.Policy
	// Startup is how long the backend takes from provisioning a runner
	// to the runner waiting for work.
	Startup time.Duration
	// StartupHint is the start-up time the backend tells the autoscaler;
	// 0 means Startup.
	StartupHint time.Duration
	// Tick is the time between two decisions; 0 means DefaultTick.
	Tick time.Duration
	// LagDelay is how long before its Arrive each job counts as consumer
	// lag: an event the autoscaler sees that is not yet a queued job.
	LagDelay time.Duration
	// Initial is how many idle runners the pool has at the start.
	Initial int
	// Jobs is the load, in any order.
	Jobs []Job
	// Until is how long to simulate; 0 means until every job has
	// finished, or Limit.
	Until time.Duration
	// Decide plans each tick; nil means autoscale.Decide. A plan must
	// have one decision, provisioning and destroying no negative number
	// and destroying no more runners than are idle; Run fails otherwise.
	Decide func(autoscale.Snapshot) []autoscale.Decision
}

func (c *Config) validate() error {
	var errs []error
	if err := c.Policy.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Startup < 0 || c.StartupHint < 0 || c.Tick < 0 || c.LagDelay < 0 || c.Until < 0 {
		errs = append(errs, errors.New("sim: Startup, StartupHint, Tick, LagDelay and Until must not be negative"))
	}
	if c.Initial < 0 {
		errs = append(errs, fmt.Errorf("sim: Initial must not be negative (%d)", c.Initial))
	}
	for i, j := range c.Jobs {
		if j.Arrive < 0 || j.Duration < 0 {
			errs = append(errs, fmt.Errorf("sim: job %d arrives at %s and runs for %s; neither may be negative", i, j.Arrive, j.Duration))
			break
		}
	}
	return errors.Join(errs...)
}

// Tick is the pool at one decision: its counts when the snapshot was
// taken, and the decision.
type Tick struct {
	At                                    time.Duration
	Queued, Lag, Idle, Busy, Provisioning int
	Decision                              autoscale.Decision
}

// JobResult is what happened to one job.
type JobResult struct {
	// Started and Finished say whether the job got a runner and ended
	// before the run did.
	Started, Finished bool
	// Wait is how long it was queued before a runner took it.
	Wait time.Duration
	// Runner numbers the runner that took it, from 1.
	Runner int
}

// Result is what a run did.
type Result struct {
	// Ticks has one entry per decision, in time order.
	Ticks []Tick
	// Jobs has one entry per job of Config.Jobs, in its order.
	Jobs []JobResult
	// Finished is how many jobs finished.
	Finished int
	// ScaleUps and ScaleDowns count the decisions that provisioned or
	// destroyed runners; Provisioned and Destroyed count the runners.
	ScaleUps, ScaleDowns   int
	Provisioned, Destroyed int
	// MaxSize is the most runners the pool had at once, provisioning
	// ones included.
	MaxSize int
	// RunnerTime is the runners' time alive (provisioning, idle or
	// busy) summed over runners: what the pool cost. IdleTime is the part
	// of it they were idle.
	RunnerTime, IdleTime time.Duration
	// End is when the last tick was.
	End time.Duration
}

// WaitQuantile returns the q-quantile (0 to 1, nearest rank) of the waits
// of the jobs that started; 0 if none did.
func (r *Result) WaitQuantile(q float64) time.Duration {
	var waits []time.Duration
	for _, j := range r.Jobs {
		if j.Started {
			waits = append(waits, j.Wait)
		}
	}
	if len(waits) == 0 {
		return 0
	}
	slices.Sort(waits)
	rank := int(math.Ceil(q*float64(len(waits))-1e-9)) - 1
	return waits[min(max(rank, 0), len(waits)-1)]
}

// Scaling returns the ticks whose decision provisioned or destroyed
// runners.
func (r *Result) Scaling() []Tick {
	var out []Tick
	for _, t := range r.Ticks {
		if t.Decision.Provision > 0 || t.Decision.Destroy > 0 {
			out = append(out, t)
		}
	}
	return out
}

// Table formats ticks as a table with a header: the counts, the decision
// and its wait kind and reason.
func Table(ticks []Tick) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	// Text after the last tab is no cell, so the wait and the reason
	// stay left-aligned.
	fmt.Fprintf(w, "time\tqueued\tlag\tidle\tbusy\tprov\tdesired\t+prov\t-destroy\t  %-15s  %s\n", "wait", "reason")
	for _, t := range ticks {
		d := t.Decision
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t  %-15s  %s\n",
			t.At, t.Queued, t.Lag, t.Idle, t.Busy, t.Provisioning, d.Desired, d.Provision, d.Destroy, d.Wait.Kind, d.Reason)
	}
	w.Flush()
	return b.String()
}

// Run simulates cfg. Time advances in ticks of cfg.Tick; between ticks,
// runners become ready, jobs arrive and finish at their exact times, and
// an idle runner takes the oldest queued job as soon as both exist. At
// each tick the pool is snapshot, the plan decided, and carried out at
// once: provisioned runners are ready Startup later, destroyed idle
// runners are gone, and an ephemeral pool's runner is gone when its job
// ends.
func Run(cfg Config) (*Result, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := newState(cfg)
	for {
		s.advance(s.now)
		if err := s.tick(); err != nil {
			return nil, err
		}
		s.advance(s.now) // runners that start in no time
		until := cfg.Until
		if until == 0 {
			if s.res.Finished == len(cfg.Jobs) {
				break
			}
			until = Limit
		}
		if s.now+s.step > until {
			break
		}
		s.now += s.step
	}
	s.res.End = s.now
	return s.res, nil
}

type state struct {
	cfg     Config
	decide  func(autoscale.Snapshot) []autoscale.Decision
	step    time.Duration
	hint    time.Duration
	now     time.Duration
	last    time.Duration // the time accounted up to
	order   []int         // job indices by arrival
	arrived int           // jobs of order that arrived
	queue   []int         // queued job indices, oldest first
	prov    []runner      // provisioning, oldest first (all start alike)
	idle    []int         // idle runner numbers, longest idle first
	busy    ends
	runners int
	history autoscale.History
	lastUp  time.Time
	lastDn  time.Time
	res     *Result
}

type runner struct {
	id      int
	created time.Duration
}

func newState(cfg Config) *state {
	s := &state{
		cfg:     cfg,
		decide:  cfg.Decide,
		step:    cmp.Or(cfg.Tick, DefaultTick),
		hint:    cmp.Or(cfg.StartupHint, cfg.Startup),
		history: autoscale.History{Window: cfg.Policy.HistoryWindow()},
		res:     &Result{Jobs: make([]JobResult, len(cfg.Jobs))},
	}
	if s.decide == nil {
		s.decide = autoscale.Decide
	}
	s.order = make([]int, len(cfg.Jobs))
	for i := range s.order {
		s.order[i] = i
	}
	slices.SortStableFunc(s.order, func(a, b int) int { return cmp.Compare(cfg.Jobs[a].Arrive, cfg.Jobs[b].Arrive) })
	for range cfg.Initial {
		s.runners++
		s.idle = append(s.idle, s.runners)
	}
	s.res.MaxSize = cfg.Initial
	return s
}

// advance processes every event up to t, in time order; at one instant,
// runners become ready, then jobs end, then jobs arrive, then idle runners
// take queued jobs.
func (s *state) advance(t time.Duration) {
	for {
		next, ok := time.Duration(0), false
		consider := func(at time.Duration) {
			if at <= t && (!ok || at < next) {
				next, ok = at, true
			}
		}
		if len(s.prov) > 0 {
			consider(s.prov[0].created + s.cfg.Startup)
		}
		if len(s.busy) > 0 {
			consider(s.busy[0].at)
		}
		if s.arrived < len(s.order) {
			consider(s.cfg.Jobs[s.order[s.arrived]].Arrive)
		}
		if !ok {
			break
		}
		s.account(next)
		for len(s.prov) > 0 && s.prov[0].created+s.cfg.Startup == next {
			s.idle = append(s.idle, s.prov[0].id)
			s.prov = s.prov[1:]
		}
		for len(s.busy) > 0 && s.busy[0].at == next {
			e := heap.Pop(&s.busy).(end)
			s.res.Jobs[e.job].Finished = true
			s.res.Finished++
			if !s.cfg.Policy.Ephemeral {
				s.idle = append(s.idle, e.runner)
			}
		}
		for s.arrived < len(s.order) && s.cfg.Jobs[s.order[s.arrived]].Arrive == next {
			s.queue = append(s.queue, s.order[s.arrived])
			s.arrived++
		}
		for len(s.idle) > 0 && len(s.queue) > 0 {
			r, j := s.idle[0], s.queue[0]
			s.idle, s.queue = s.idle[1:], s.queue[1:]
			s.res.Jobs[j] = JobResult{Started: true, Wait: next - s.cfg.Jobs[j].Arrive, Runner: r}
			heap.Push(&s.busy, end{at: next + s.cfg.Jobs[j].Duration, runner: r, job: j})
		}
	}
	s.account(t)
}

// account adds the runners' time from the last accounted moment to t.
func (s *state) account(t time.Duration) {
	dt := t - s.last
	s.res.RunnerTime += dt * time.Duration(len(s.idle)+len(s.busy)+len(s.prov))
	s.res.IdleTime += dt * time.Duration(len(s.idle))
	s.last = t
}

// tick takes a snapshot, decides and carries the plan out.
func (s *state) tick() error {
	now := Epoch.Add(s.now)
	busy, queued := len(s.busy), len(s.queue)
	s.history.Add(autoscale.Sample{At: now, Demand: busy + queued})
	lagUntil := s.now + s.cfg.LagDelay
	lag, _ := slices.BinarySearchFunc(s.order[s.arrived:], lagUntil, func(j int, t time.Duration) int {
		if s.cfg.Jobs[j].Arrive <= t {
			return -1
		}
		return 1
	})
	pool := autoscale.Pool{
		Name:          "sim",
		Policy:        s.cfg.Policy,
		Idle:          len(s.idle),
		Busy:          busy,
		Queued:        queued,
		Lag:           lag,
		StartupHint:   s.hint,
		LastScaleUp:   s.lastUp,
		LastScaleDown: s.lastDn,
		Demand:        s.history.Samples(),
		IdleSince:     s.history.IdleSince(),
	}
	for _, r := range s.prov {
		pool.Provisioning = append(pool.Provisioning, Epoch.Add(r.created))
	}
	plan := s.decide(autoscale.Snapshot{Now: now, Pools: []autoscale.Pool{pool}})
	if len(plan) != 1 {
		return fmt.Errorf("sim: at %s the plan has %d decisions for 1 pool", s.now, len(plan))
	}
	d := plan[0]
	if d.Provision < 0 || d.Destroy < 0 || d.Destroy > len(s.idle) {
		return fmt.Errorf("sim: at %s the plan provisions %d and destroys %d runners, with %d idle", s.now, d.Provision, d.Destroy, len(s.idle))
	}
	s.res.Ticks = append(s.res.Ticks, Tick{At: s.now, Queued: queued, Lag: lag, Idle: len(s.idle), Busy: busy, Provisioning: len(s.prov), Decision: d})
	if d.Provision > 0 {
		s.res.ScaleUps++
		s.res.Provisioned += d.Provision
		s.lastUp = now
		for range d.Provision {
			s.runners++
			s.prov = append(s.prov, runner{id: s.runners, created: s.now})
		}
	}
	if d.Destroy > 0 {
		// Runners are alike here: the most recently idle go.
		s.res.ScaleDowns++
		s.res.Destroyed += d.Destroy
		s.lastDn = now
		s.idle = s.idle[:len(s.idle)-d.Destroy]
	}
	s.res.MaxSize = max(s.res.MaxSize, len(s.idle)+len(s.busy)+len(s.prov))
	return nil
}

// end is a running job's end.
type end struct {
	at     time.Duration
	runner int
	job    int
}

// ends is a min-heap of ends by time, then job index.
type ends []end

func (h ends) Len() int { return len(h) }
func (h ends) Less(i, j int) bool {
	return h[i].at < h[j].at || h[i].at == h[j].at && h[i].job < h[j].job
}
func (h ends) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *ends) Push(x any)   { *h = append(*h, x.(end)) }
func (h *ends) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
