package dag

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cikit/cikit"
)

// GroupKey names a concurrency group on one branch. The jobs whose spec
// places them in Group (JobSpec.Concurrency) and whose runs build Branch
// (RunCreateParams.Branch) form one group, across all runs: at most one
// of them is active (QUEUED, RUNNING or CANCEL_REQUESTED) at a time, and
// the READY ones take their turns first come, first served — by the time
// they became READY, then by their runs' creation.
//
// JobQueue enforces the turns: it refuses a job whose turn has not come
// with a *GroupBusyError, and the job stays READY. When a job of a group
// ends, the write's TransitionResult.Freed lists the group and
// GroupNext returns the job whose turn it is now. A job with
// cancel_in_progress does not wait for the jobs ahead of it: queueing it
// cancels them (a RUNNING one becomes CANCEL_REQUESTED, the others
// CANCELLED, with the consequences in their runs of any cancellation),
// and it is queued once none of them is active any more.
type GroupKey struct {
	Group  string
	Branch string
}

// groupKey returns the group of a job with concurrency c in a run of
// branch; ok is false for a job without a group.
func groupKey(c *cikit.Concurrency, branch string) (key GroupKey, ok bool) {
	if c == nil || c.Group == "" {
		return GroupKey{}, false
	}
	return GroupKey{Group: c.Group, Branch: branch}, true
}

// ErrGroupBusy is matched by a *GroupBusyError. It wraps
// cikit.ErrConflict.
var ErrGroupBusy = fmt.Errorf("%w: concurrency group busy", cikit.ErrConflict)

// GroupBusyError is JobQueue's refusal of a job whose turn in its
// concurrency group has not come. The job stays READY; it may be queued
// once GroupNext returns it. It matches ErrGroupBusy and
// cikit.ErrConflict with errors.Is.
type GroupBusyError struct {
	Key GroupKey
	// RunID and JobID name the job refused.
	RunID, JobID string
	// HolderRunID and HolderJobID name the job in its way: the group's
	// active job, or a READY one that has waited longer. HolderState is
	// its state.
	HolderRunID, HolderJobID string
	HolderState              cikit.JobState
	// Cancelled lists the jobs the refused job's cancel_in_progress
	// cancelled, with the consequences in their runs. Those changes are
	// made although the job was refused: a holder told to stop is active
	// until its executor reports.
	Cancelled []*Job
}

func (e *GroupBusyError) Error() string {
	way := "is held by"
	if e.HolderState == cikit.JobReady {
		way = "has been waited for longer by"
	}
	return fmt.Sprintf("dag: job %q of run %s must wait: concurrency group %q on branch %q %s job %q of run %s (%s)",
		e.JobID, e.RunID, e.Key.Group, e.Key.Branch, way, e.HolderJobID, e.HolderRunID, e.HolderState)
}

// Unwrap returns ErrGroupBusy.
func (e *GroupBusyError) Unwrap() error { return ErrGroupBusy }

// Freed returns the concurrency groups in which the write made room: the
// groups of the jobs that ended in it, each once, in the order of the
// changes. For each, GroupNext returns the job whose turn it is now.
func (r *TransitionResult) Freed() []GroupKey {
	var keys []GroupKey
	for _, j := range r.Changed {
		// Every job a write changes is of a run of r.Run's branch: its
		// own run, or one whose job shares a group with it.
		if key, ok := groupKey(j.Spec.Concurrency, r.Run.Branch); ok && j.State.Terminal() && !slices.Contains(keys, key) {
			keys = append(keys, key)
		}
	}
	return keys
}

// groupMember is a job of a concurrency group that is READY or active.
type groupMember struct {
	runID, jobID string
	position     int // in its run's plan
	state        cikit.JobState
	attempt      int
	readyAt      time.Time
	runCreatedAt time.Time
}

// compareTurns orders READY members by their turn: by the time they
// became READY, then by their runs' creation, then by run ID and plan
// position, so the order is total.
func compareTurns(a, b groupMember) int {
	return cmp.Or(a.readyAt.Compare(b.readyAt), a.runCreatedAt.Compare(b.runCreatedAt),
		strings.Compare(a.runID, b.runID), cmp.Compare(a.position, b.position))
}

// ahead returns the members in target's way: the active ones, then the
// READY ones whose turn comes before target's, in turn order.
func ahead(target groupMember, members []groupMember) []groupMember {
	var active, waiting []groupMember
	for _, m := range members {
		switch {
		case m.runID == target.runID && m.jobID == target.jobID:
		case m.state.Active():
			active = append(active, m)
		case compareTurns(m, target) < 0:
			waiting = append(waiting, m)
		}
	}
	slices.SortFunc(active, compareTurns)
	slices.SortFunc(waiting, compareTurns)
	return append(active, waiting...)
}

// nextInGroup returns the member whose turn it is: the READY one first
// in turn order, when none is active.
func nextInGroup(members []groupMember) (groupMember, bool) {
	var next groupMember
	found := false
	for _, m := range members {
		if m.state.Active() {
			return groupMember{}, false
		}
		if !found || compareTurns(m, next) < 0 {
			next, found = m, true
		}
	}
	return next, found
}

func findMember(members []groupMember, p *JobEvent) (groupMember, bool) {
	i := slices.IndexFunc(members, func(m groupMember) bool { return m.runID == p.RunID && m.jobID == p.JobID })
	if i < 0 {
		return groupMember{}, false
	}
	return members[i], true
}

// groupTx is a store's view of a concurrency group within one write
// that holds the group's lock: a PostgreSQL transaction holding the
// group's row lock, or the memory store's mutex.
type groupTx interface {
	// members returns the group's READY and active jobs.
	members(ctx context.Context, key GroupKey) ([]groupMember, error)
	// lockRuns takes the row locks of the runs, in an order every
	// writer that locks several runs uses.
	lockRuns(ctx context.Context, runIDs []string) error
	// transition applies one event to a run, as the store's other
	// writes do; reason is why a cancel event cancels.
	transition(ctx context.Context, runID string, je *JobEvent, reason string) (*TransitionResult, error)
}

// queueInGroup is JobQueue of a job of group key, in tx. Only writes
// that hold a group's lock make its jobs active, so what it reads of
// the group's active jobs stays true until it commits; the runs it
// writes to, it locks before it reads them. Jobs of other runs may only
// leave the group or join it as READY meanwhile.
func queueInGroup(ctx context.Context, tx groupTx, key GroupKey, p *JobEvent, cancelInProgress bool) (*TransitionResult, error) {
	runs := []string{p.RunID}
	if cancelInProgress {
		members, err := tx.members(ctx, key)
		if err != nil {
			return nil, err
		}
		if target, ok := findMember(members, p); ok {
			for _, m := range ahead(target, members) {
				runs = append(runs, m.runID)
			}
		}
	}
	slices.Sort(runs)
	runs = slices.Compact(runs)
	if err := tx.lockRuns(ctx, runs); err != nil {
		return nil, err
	}
	members, err := tx.members(ctx, key)
	if err != nil {
		return nil, err
	}
	target, ok := findMember(members, p)
	if !ok || target.state != cikit.JobReady || target.attempt != p.Attempt {
		// Not this attempt of a READY job: the transition refuses it,
		// saying why.
		return tx.transition(ctx, p.RunID, p, "")
	}
	var cancelled []*Job
	if cancelInProgress {
		reason := fmt.Sprintf("cancelled by %s/%s in concurrency group %s", p.RunID, p.JobID, key.Group)
		for _, m := range ahead(target, members) {
			// A job of a run not locked joined the group since the first
			// read: it waits its turn like any other.
			if m.state == cikit.JobCancelRequested || !slices.Contains(runs, m.runID) {
				continue
			}
			res, err := tx.transition(ctx, m.runID, &JobEvent{Kind: EventCancelJob, RunID: m.runID, JobID: m.jobID, Attempt: m.attempt}, reason)
			if err != nil {
				return nil, err
			}
			cancelled = append(cancelled, res.Changed...)
		}
		if len(cancelled) > 0 {
			if members, err = tx.members(ctx, key); err != nil {
				return nil, err
			}
		}
	}
	if way := ahead(target, members); len(way) > 0 {
		h := way[0]
		return nil, &GroupBusyError{Key: key, RunID: p.RunID, JobID: p.JobID,
			HolderRunID: h.runID, HolderJobID: h.jobID, HolderState: h.state, Cancelled: cancelled}
	}
	res, err := tx.transition(ctx, p.RunID, p, "")
	if err != nil {
		return nil, err
	}
	res.Changed = append(res.Changed, cancelled...)
	return res, nil
}

// memGroupTx is the memory store's groupTx; the store's mutex is held.
type memGroupTx struct{ s *MemoryStore }

func (t memGroupTx) members(_ context.Context, key GroupKey) ([]groupMember, error) {
	var out []groupMember
	for _, m := range t.s.groups[key] {
		j := &m.run.jobs[m.i]
		if j.State == cikit.JobReady || j.State.Active() {
			out = append(out, groupMember{runID: j.RunID, jobID: j.ID(), position: m.i, state: j.State,
				attempt: j.Attempt, readyAt: j.ReadyAt, runCreatedAt: m.run.run.CreatedAt})
		}
	}
	return out, nil
}

// lockRuns has nothing to do: the store's mutex serialises all writes.
func (memGroupTx) lockRuns(context.Context, []string) error { return nil }

func (t memGroupTx) transition(ctx context.Context, runID string, je *JobEvent, reason string) (*TransitionResult, error) {
	return t.s.transitionLocked(ctx, runID, je, Event{}, reason)
}

func (s *MemoryStore) GroupNext(ctx context.Context, key GroupKey) (*Job, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	members, err := memGroupTx{s}.members(ctx, key)
	if err != nil {
		return nil, err
	}
	next, ok := nextInGroup(members)
	if !ok {
		return nil, nil
	}
	return s.runs[next.runID].jobs[next.position].clone(), nil
}

// pgGroupTx is the PostgreSQL store's groupTx: a transaction holding the
// group's row lock.
type pgGroupTx struct {
	s  *PostgresStore
	tx pgx.Tx
}

func (t pgGroupTx) members(ctx context.Context, key GroupKey) ([]groupMember, error) {
	return t.s.groupMembers(ctx, t.tx, key)
}

// lockRuns takes the runs' exclusive locks in the order of their IDs, as
// every write that locks several runs does.
func (t pgGroupTx) lockRuns(ctx context.Context, runIDs []string) error {
	return lockRunsTx(ctx, t.tx, runIDs)
}

func (t pgGroupTx) transition(ctx context.Context, runID string, je *JobEvent, reason string) (*TransitionResult, error) {
	res, errs, err := t.s.transitionsTx(ctx, t.tx, []string{runID}, []lockedEvent{{runID: runID, job: je, reason: reason}}, nil)
	if err != nil {
		return nil, err
	}
	if errs[0] != nil {
		return nil, errs[0]
	}
	for _, j := range res[0].Changed {
		j.Spec = j.Spec.Clone()
	}
	return res[0], nil
}

// groupMembers reads the READY and active jobs of a group. The state
// list and the group expression are those of the index jobs_group.
func (s *PostgresStore) groupMembers(ctx context.Context, tx pgx.Tx, key GroupKey) ([]groupMember, error) {
	rows, err := tx.Query(ctx, `SELECT j.run_id, j.job_id, j.position, j.state, j.attempt, j.ready_at, r.created_at
		FROM jobs j JOIN pipeline_runs r ON r.id = j.run_id
		WHERE j.spec->'concurrency'->>'group' = $1 AND r.branch = $2
			AND j.state IN ('ready', 'queued', 'running', 'cancel_requested')`, key.Group, key.Branch)
	if err != nil {
		return nil, interpretError(err)
	}
	defer rows.Close()
	var out []groupMember
	for rows.Next() {
		var m groupMember
		var ready *time.Time
		if err := rows.Scan(&m.runID, &m.jobID, &m.position, &m.state, &m.attempt, &ready, &m.runCreatedAt); err != nil {
			return nil, interpretError(err)
		}
		m.readyAt = deref(ready)
		out = append(out, m)
	}
	return out, interpretError(rows.Err())
}

// queueInGroup is JobQueue of e, a job of a concurrency group, in a
// transaction that takes the group's row lock before any run's lock, so
// that writes to one group are serialised and two of them, each locking
// the runs it writes in the order of their IDs, cannot deadlock. A
// refusal commits what cancel_in_progress cancelled before it.
func (s *PostgresStore) queueInGroup(ctx context.Context, e *JobEvent, conc *cikit.Concurrency, branch string, with ApplyWith) (res *TransitionResult, err error) {
	key, _ := groupKey(conc, branch)
	var busy *GroupBusyError
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		busy = nil
		if _, err := tx.Exec(ctx, `INSERT INTO concurrency_groups (name, branch) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
			key.Group, key.Branch); err != nil {
			return interpretError(err)
		}
		if _, err := tx.Exec(ctx, `SELECT 1 FROM concurrency_groups WHERE name = $1 AND branch = $2 FOR UPDATE`,
			key.Group, key.Branch); err != nil {
			return interpretError(err)
		}
		var err error
		res, err = queueInGroup(ctx, pgGroupTx{s: s, tx: tx}, key, e, conc.CancelInProgress)
		if errors.As(err, &busy) {
			return nil
		}
		if err != nil || with == nil {
			return err
		}
		b := &pgx.Batch{}
		if with(b, []*JobEvent{e}); b.Len() == 0 {
			return nil
		}
		return interpretError(tx.SendBatch(ctx, b).Close())
	})
	if err != nil {
		return nil, err
	}
	if busy != nil {
		return nil, busy
	}
	return res, nil
}

func (s *PostgresStore) GroupNext(ctx context.Context, key GroupKey) (*Job, error) {
	var next *Job
	// One snapshot for the group and the job's run.
	opts := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	err := pgx.BeginTxFunc(ctx, s.pool, opts, func(tx pgx.Tx) error {
		members, err := s.groupMembers(ctx, tx, key)
		if err != nil {
			return err
		}
		m, ok := nextInGroup(members)
		if !ok {
			return nil
		}
		rg, i, ok, err := s.graphOf(ctx, tx, m.runID, m.jobID)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("dag: run %q has no job %q: %w", m.runID, m.jobID, cikit.ErrNotFound)
		}
		r := &lockedRun{rg: rg, jobs: make([]*Job, rg.g.Len())}
		if _, err := s.readJobs(ctx, tx, m.runID, r, []int{i}, false); err != nil {
			return err
		}
		next = r.jobs[i].clone()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return next, nil
}
