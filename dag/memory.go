package dag

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/cikit/cikit"
)

// MemoryConfig configures a MemoryStore. The zero value is ready to use.
type MemoryConfig struct {
	// Now returns the current time. Default: time.Now.
	Now func() time.Time
	// NewID returns a new, unique run ID. Default: a UUIDv7 string.
	NewID func() string
	// Expander expands the placeholders of run-time matrices
	// (cikit.JobSpec.Expand) in the writes that satisfy their needs.
	// Without one such a placeholder fails, saying the store has none.
	Expander Expander
	// Decider decides the run-time conditions of jobs
	// (cikit.JobSpec.If) in the writes that satisfy their needs. Without
	// one such a job fails, saying the store cannot decide it.
	Decider Decider
	// MaxJobs bounds the jobs of a run, variants included: an expansion
	// past it fails its placeholder. Default (0 or less): DefaultMaxJobs.
	MaxJobs int
}

// MemoryStore is a Store held in process memory. It serves the embedded
// default platform, local runs and fast property tests; state is lost when
// the process ends.
type MemoryStore struct {
	now   func() time.Time
	newID func() string
	x     *expansion

	mu   sync.Mutex
	runs map[string]*memRun
	keys map[string]string // idempotency key -> run ID
	// outbox holds unpublished events in creation order; claimed, those
	// an OutboxPublish is publishing.
	outbox  []*OutboxEvent
	claimed map[string]bool
	// lines holds the runs of each pipeline and branch, and groups the
	// jobs of each concurrency group, in creation order.
	lines  map[line][]*memRun
	groups map[GroupKey][]memJob
	// numbers holds the last run number of each pipeline.
	numbers map[string]int64
	// order holds every run by creation time, then ID, oldest first:
	// RunList reads it backwards.
	order []*memRun
}

func newEventID() string { return uuid.Must(uuid.NewV7()).String() }

type memRun struct {
	run   Run
	graph *Graph
	jobs  []Job // indexed like graph nodes
	// attempts holds each job's ended attempts, oldest first.
	attempts map[string][]*Job
	// context is the run's RunContext as JSON, nil without one: what
	// PostgreSQL stores, so both refuse the same contexts and answer
	// copies.
	context []byte
}

// memJob is a job of a run.
type memJob struct {
	run *memRun
	i   int
}

// index records a new run in the list order and the indexes of lines and
// groups. The caller holds the lock.
func (s *MemoryStore) index(r *memRun) {
	i, _ := slices.BinarySearchFunc(s.order, r, func(a, b *memRun) int {
		return compareRuns(a.run.CreatedAt, a.run.ID, b.run.CreatedAt, b.run.ID)
	})
	s.order = slices.Insert(s.order, i, r)
	if r.run.Pipeline != "" && r.run.Branch != "" {
		l := line{r.run.Pipeline, r.run.Branch}
		s.lines[l] = append(s.lines[l], r)
	}
	for i := range r.jobs {
		if key, ok := groupKey(r.jobs[i].Spec.Concurrency, r.run.Branch); ok {
			s.groups[key] = append(s.groups[key], memJob{run: r, i: i})
		}
	}
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore(cfg MemoryConfig) *MemoryStore {
	s := &MemoryStore{now: cfg.Now, newID: cfg.NewID, runs: make(map[string]*memRun), keys: make(map[string]string),
		lines: make(map[line][]*memRun), groups: make(map[GroupKey][]memJob), numbers: make(map[string]int64),
		x: &expansion{expander: cfg.Expander, decider: cfg.Decider, maxJobs: cfg.MaxJobs}}
	if s.x.maxJobs <= 0 {
		s.x.maxJobs = DefaultMaxJobs
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.newID == nil {
		s.newID = func() string { return uuid.Must(uuid.NewV7()).String() }
	}
	return s
}

var _ Store = (*MemoryStore)(nil)

func (s *MemoryStore) RunCreate(ctx context.Context, p *RunCreateParams) (*Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	g, err := FromSpecs(p.Jobs)
	if err != nil {
		return nil, err
	}
	if err := checkCreated(p.Jobs); err != nil {
		return nil, err
	}
	if err := p.Supersede.check(); err != nil {
		return nil, err
	}
	now := s.now()
	rc, err := encodeContext(p.Context)
	if err != nil {
		return nil, err
	}
	r := &memRun{graph: g, jobs: make([]Job, len(p.Jobs)), attempts: make(map[string][]*Job), context: rc}
	states := Initial(g)
	for i, spec := range p.Jobs {
		r.jobs[i] = initialJob(g, spec.Clone(), states, i, now)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.keys[p.IdempotencyKey]; ok && p.IdempotencyKey != "" {
		run := s.runs[id].run
		return &run, nil
	}
	id := s.newID()
	if _, dup := s.runs[id]; dup {
		return nil, fmt.Errorf("dag: run ID %q: %w", id, cikit.ErrConflict)
	}
	if err := r.expandCreated(ctx, s.x, id, now); err != nil {
		return nil, err
	}
	s.numbers[p.Pipeline]++
	r.run = Run{ID: id, CreatedAt: now, IdempotencyKey: p.IdempotencyKey, Pipeline: p.Pipeline, Branch: p.Branch, SHA: p.SHA,
		Number: s.numbers[p.Pipeline]}
	if p.IdempotencyKey != "" {
		s.keys[p.IdempotencyKey] = id
	}
	for i := range r.jobs {
		r.jobs[i].RunID = id
		if r.jobs[i].State.Terminal() {
			r.attempts[r.jobs[i].ID()] = []*Job{r.jobs[i].clone()}
		}
	}
	r.updateRun(now)
	s.runs[id] = r
	run := r.run
	s.outbox = append(s.outbox, &OutboxEvent{ID: newEventID(), Type: EventPipelineCreated, RunID: id, Pipeline: run.Pipeline, SHA: run.SHA,
		State: string(run.State), CreatedAt: now})
	var initial []*Job
	for i := range r.jobs {
		if r.jobs[i].State != cikit.JobPending {
			initial = append(initial, &r.jobs[i])
		}
	}
	s.outbox = append(s.outbox, events(newEventID, now, &run, false, initial)...)
	s.index(r)
	if err := s.supersede(r, p); err != nil {
		return nil, err
	}
	return &run, nil
}

func (s *MemoryStore) RunGet(ctx context.Context, runID string) (*Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.get(runID)
	if err != nil {
		return nil, err
	}
	run := r.run
	if run.Context, err = decodeContext(r.context); err != nil {
		return nil, err
	}
	return &run, nil
}

func (s *MemoryStore) RunList(ctx context.Context, p *RunListParams) ([]*Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	end := len(s.order)
	if c := p.Before; c != nil {
		end, _ = slices.BinarySearchFunc(s.order, c, func(r *memRun, c *RunCursor) int {
			return compareRuns(r.run.CreatedAt, r.run.ID, c.CreatedAt, c.ID)
		})
	}
	out := make([]*Run, 0, min(p.limit(), end))
	for i := end - 1; i >= 0 && len(out) < p.limit(); i-- {
		if run := s.order[i].run; p.match(&run) {
			out = append(out, &run)
		}
	}
	return out, nil
}

func (s *MemoryStore) RunCancel(ctx context.Context, runID string) (*TransitionResult, error) {
	return s.transition(ctx, runID, nil, Event{Kind: EventCancel})
}

func (s *MemoryStore) RunRetryFailed(ctx context.Context, runID string) (*TransitionResult, error) {
	return s.transition(ctx, runID, nil, Event{Kind: EventRetryFailed})
}

func (s *MemoryStore) JobList(ctx context.Context, runID string) ([]*Job, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.get(runID)
	if err != nil {
		return nil, err
	}
	jobs := make([]*Job, len(r.jobs))
	for i := range r.jobs {
		jobs[i] = r.jobs[i].clone()
	}
	return jobs, nil
}

func (s *MemoryStore) JobGet(ctx context.Context, runID, jobID string) (*Job, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.get(runID)
	if err != nil {
		return nil, err
	}
	i, ok := r.graph.Index(jobID)
	if !ok {
		return nil, fmt.Errorf("dag: run %q has no job %q: %w", runID, jobID, cikit.ErrNotFound)
	}
	return r.jobs[i].clone(), nil
}

func (s *MemoryStore) JobGetMany(ctx context.Context, keys []JobKey) ([]*Job, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Job, len(keys))
	for i, k := range keys {
		if r, ok := s.runs[k.RunID]; ok {
			if j, ok := r.graph.Index(k.JobID); ok {
				out[i] = r.jobs[j].clone()
			}
		}
	}
	return out, nil
}

func (s *MemoryStore) JobQueue(ctx context.Context, p *JobTransitionParams) (*TransitionResult, error) {
	return s.queue(ctx, p.event(EventQueue))
}

// queue is JobQueue of e: a job of a concurrency group waits its turn
// (see GroupKey).
func (s *MemoryStore) queue(ctx context.Context, e *JobEvent) (*TransitionResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.runs[e.RunID]; ok {
		if i, ok := r.graph.Index(e.JobID); ok {
			if key, ok := groupKey(r.jobs[i].Spec.Concurrency, r.run.Branch); ok {
				return queueInGroup(ctx, memGroupTx{s}, key, e, r.jobs[i].Spec.Concurrency.CancelInProgress)
			}
		}
	}
	return s.transitionLocked(ctx, e.RunID, e, Event{}, "")
}

func (s *MemoryStore) JobStart(ctx context.Context, p *JobTransitionParams) (*TransitionResult, error) {
	return s.transition(ctx, p.RunID, p.event(EventStart), Event{})
}

func (s *MemoryStore) JobComplete(ctx context.Context, p *JobCompleteParams) (*TransitionResult, error) {
	return s.transition(ctx, p.RunID, p.event(), Event{})
}

func (s *MemoryStore) JobApply(ctx context.Context, evs []*JobEvent) ([]*JobEventResult, error) {
	out := make([]*JobEventResult, len(evs))
	for i, e := range evs {
		if err := e.validate(); err != nil {
			out[i] = &JobEventResult{Err: err}
			continue
		}
		var res *TransitionResult
		var err error
		if e.Kind == EventQueue {
			res, err = s.queue(ctx, e)
		} else {
			res, err = s.transition(ctx, e.RunID, e, Event{})
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		out[i] = &JobEventResult{TransitionResult: res, Err: err}
	}
	return out, nil
}

func (s *MemoryStore) JobAttempts(ctx context.Context, runID, jobID string) ([]*Job, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.get(runID)
	if err != nil {
		return nil, err
	}
	if _, ok := r.graph.Index(jobID); !ok {
		return nil, fmt.Errorf("dag: run %q has no job %q: %w", runID, jobID, cikit.ErrNotFound)
	}
	var out []*Job
	for _, a := range r.attempts[jobID] {
		out = append(out, a.clone())
	}
	return out, nil
}

// transition applies the job event je, or the run event ev when je is
// nil, under the lock.
func (s *MemoryStore) transition(ctx context.Context, runID string, je *JobEvent, ev Event) (*TransitionResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.transitionLocked(ctx, runID, je, ev, "")
}

// transitionLocked is transition with the lock held; reason, when set, is
// why a cancel event cancels.
func (s *MemoryStore) transitionLocked(ctx context.Context, runID string, je *JobEvent, ev Event, reason string) (*TransitionResult, error) {
	r, err := s.get(runID)
	if err != nil {
		return nil, err
	}
	jobs := make([]*Job, len(r.jobs))
	for i := range r.jobs {
		jobs[i] = &r.jobs[i]
	}
	w, err := newWrite(r.graph, jobs, runID, je, ev)
	if err != nil {
		return nil, err
	}
	w.reason = reason
	now := s.now()
	a, err := w.apply(r.graph, jobs, now)
	if err != nil {
		return nil, err
	}
	if err := s.expand(ctx, r, jobs, a, now); err != nil {
		return nil, err
	}
	for _, j := range a.ended {
		r.attempts[j.ID()] = append(r.attempts[j.ID()], j)
	}
	res := &TransitionResult{Changed: a.changed}
	wasTerminal := r.run.State.Terminal()
	r.updateRun(now)
	run := r.run
	res.Run = &run
	s.outbox = append(s.outbox, events(newEventID, now, &run, wasTerminal, res.Changed)...)
	return res, nil
}

// expand expands the placeholders the write a on r's jobs made arrive
// (see expansion.expand) and records the variants in r and the store's
// indexes. The caller holds the lock.
func (s *MemoryStore) expand(ctx context.Context, r *memRun, jobs []*Job, a *applied, now time.Time) error {
	er := r.expandRun(jobs)
	if err := s.x.expand(ctx, er, a, now); err != nil {
		return err
	}
	r.grow(er)
	for _, i := range er.added {
		if key, ok := groupKey(r.jobs[i].Spec.Concurrency, r.run.Branch); ok {
			s.groups[key] = append(s.groups[key], memJob{run: r, i: i})
		}
	}
	return nil
}

// expandRun is r, whose jobs jobs points into, as an expansion sees it.
func (r *memRun) expandRun(jobs []*Job) *expandRun {
	specs := make([]*cikit.JobSpec, len(r.jobs))
	for i := range r.jobs {
		specs[i] = r.jobs[i].Spec
	}
	return &expandRun{runID: r.run.ID, g: r.graph, specs: specs, jobs: jobs,
		context: func() (*cikit.RunContext, error) { return decodeContext(r.context) }}
}

// grow takes what an expansion of r made: its graph and jobs.
func (r *memRun) grow(er *expandRun) {
	if len(er.added) == 0 {
		return
	}
	grown := make([]Job, len(er.jobs))
	for i, j := range er.jobs {
		grown[i] = *j
	}
	r.graph, r.jobs = er.g, grown
}

// expandCreated expands the placeholders of a new run, id, that arrive
// as it is created (they need nothing, or only jobs that never run).
func (r *memRun) expandCreated(ctx context.Context, x *expansion, id string, now time.Time) error {
	jobs := make([]*Job, len(r.jobs))
	a := &applied{}
	for i := range r.jobs {
		jobs[i] = &r.jobs[i]
		jobs[i].RunID = id
		if (r.graph.Node(i).Expand || r.jobs[i].Spec.If != nil) && arrives(jobs[i].State) {
			a.changed, a.from = append(a.changed, jobs[i].clone()), append(a.from, cikit.JobPending)
		}
	}
	if len(a.changed) == 0 {
		return nil
	}
	er := r.expandRun(jobs)
	er.runID = id
	if err := x.expand(ctx, er, a, now); err != nil {
		return err
	}
	r.grow(er)
	return nil
}

func (s *MemoryStore) get(runID string) (*memRun, error) {
	r, ok := s.runs[runID]
	if !ok {
		return nil, fmt.Errorf("dag: run %q: %w", runID, cikit.ErrNotFound)
	}
	return r, nil
}

func (r *memRun) states() []cikit.JobState {
	states := make([]cikit.JobState, len(r.jobs))
	for i := range r.jobs {
		states[i] = r.jobs[i].State
	}
	return states
}

func (r *memRun) updateRun(now time.Time) {
	g := r.graph.withAllowed(func(i int) bool { return r.jobs[i].FailureAllowed })
	r.run.State = RunStatus(g, r.states())
	switch {
	case !r.run.State.Terminal():
		r.run.FinishedAt = time.Time{} // running again after a retry
	case r.run.FinishedAt.IsZero():
		r.run.FinishedAt = now
	}
}

func (j *Job) clone() *Job {
	c := *j
	c.Spec = j.Spec.Clone()
	c.Result = j.Result.Clone()
	return &c
}

func (s *MemoryStore) OutboxPending(ctx context.Context, limit int) ([]*OutboxEvent, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := min(limit, len(s.outbox))
	out := make([]*OutboxEvent, n)
	for i, e := range s.outbox[:n] {
		c := *e
		out[i] = &c
	}
	return out, nil
}

func (s *MemoryStore) OutboxMarkPublished(ctx context.Context, ids []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	done := make(map[string]bool, len(ids))
	for _, id := range ids {
		done[id] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outbox = slices.DeleteFunc(s.outbox, func(e *OutboxEvent) bool { return done[e.ID] })
	return nil
}
