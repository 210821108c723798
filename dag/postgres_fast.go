package dag

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/internal/groupcommit"
)

// runGraph is a run's graph and compiled specs, which change only when an
// expansion adds a placeholder's variants, so a store keeps them in
// memory.
type runGraph struct {
	g      *Graph
	specs  []*cikit.JobSpec
	branch string // the run's, which scopes its concurrency groups
	// pipeline and sha are the run's, which its outbox events name.
	pipeline string
	sha      string
	// manual says that a job of the run is of When manual or gated,
	// which may be left waiting while the run ends: the run's
	// completions take the locked path, which decides with RunStatus.
	manual bool
	// expansions is the run's count of expansions (pipeline_runs) the
	// graph was read at; the locked path reads the graph again when the
	// run's has grown since.
	expansions int
	// placeholders says that the run has jobs to expand, whose
	// expansions grow it.
	placeholders bool
	// conditions says that a job of the run has a run-time condition
	// (cikit.JobSpec.If), which the locked path decides.
	conditions bool
}

// newRunGraph is the runGraph of a run's graph and specs.
func newRunGraph(g *Graph, specs []*cikit.JobSpec, branch, pipeline, sha string) *runGraph {
	rg := &runGraph{g: g, specs: specs, branch: branch, pipeline: pipeline, sha: sha}
	for _, s := range specs {
		rg.manual = rg.manual || s.When == cikit.WhenManual || s.Gate != nil
		rg.placeholders = rg.placeholders || s.Expand != nil
		rg.conditions = rg.conditions || s.If != nil
	}
	return rg
}

// defaultGraphCache is how many runs' graphs a PostgresStore keeps.
const defaultGraphCache = 4096

// graphCache holds the graphs of recently used runs.
type graphCache struct {
	mu  sync.Mutex
	m   map[string]*runGraph
	max int
}

func (c *graphCache) get(runID string) (*runGraph, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rg, ok := c.m[runID]
	return rg, ok
}

// drop forgets a run's graph, to be read again.
func (c *graphCache) drop(runID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, runID)
}

func (c *graphCache) put(runID string, rg *runGraph) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]*runGraph)
	}
	if len(c.m) >= c.max {
		for id := range c.m { // any one: map order is random
			delete(c.m, id)
			break
		}
	}
	c.m[runID] = rg
}

// querier is what graph needs of a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// conn is a pool or a transaction: reads outside a transaction run on the
// pool, and a batch sent to it is one implicit transaction.
type conn interface {
	querier
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// graph returns a run's graph, from the cache or from its jobs' specs.
func (s *PostgresStore) graph(ctx context.Context, q querier, runID string) (*runGraph, error) {
	if rg, ok := s.graphs.get(runID); ok {
		return rg, nil
	}
	return s.readGraph(ctx, q, runID)
}

// graphOf returns a run's graph and the index of one of its jobs, reading
// the graph again when the one cached lacks the job: an expansion by
// another store added it since. ok is false when the run has no such job.
func (s *PostgresStore) graphOf(ctx context.Context, q querier, runID, jobID string) (rg *runGraph, i int, ok bool, err error) {
	if rg, err = s.graph(ctx, q, runID); err != nil {
		return nil, 0, false, err
	}
	if i, ok = rg.g.Index(jobID); ok || !rg.expandable() {
		return rg, i, ok, nil
	}
	if rg, err = s.readGraph(ctx, q, runID); err != nil {
		return nil, 0, false, err
	}
	i, ok = rg.g.Index(jobID)
	return rg, i, ok, nil
}

// expandable reports whether a run has placeholders, whose expansions
// grow it.
func (rg *runGraph) expandable() bool { return rg.placeholders }

// readGraph reads a run's graph from its jobs' specs, and caches it.
func (s *PostgresStore) readGraph(ctx context.Context, q querier, runID string) (*runGraph, error) {
	rows, err := q.Query(ctx, `SELECT j.spec, r.branch, r.pipeline, r.sha, r.expansions FROM jobs j JOIN pipeline_runs r ON r.id = j.run_id
		WHERE j.run_id = $1 ORDER BY j.position`, runID)
	if err != nil {
		return nil, interpretError(err)
	}
	var branch, pipeline, sha string
	var expansions int
	specs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*cikit.JobSpec, error) {
		var data []byte
		if err := row.Scan(&data, &branch, &pipeline, &sha, &expansions); err != nil {
			return nil, err
		}
		spec := &cikit.JobSpec{}
		if err := json.Unmarshal(data, spec); err != nil {
			return nil, fmt.Errorf("dag: run %q: a stored job spec is corrupt: %w", runID, err)
		}
		return spec, nil
	})
	if err != nil {
		return nil, interpretError(err)
	}
	if len(specs) == 0 { // every run has jobs
		return nil, fmt.Errorf("dag: run %q: %w", runID, cikit.ErrNotFound)
	}
	g, err := FromSpecs(specs)
	if err != nil {
		return nil, fmt.Errorf("dag: run %q: stored jobs do not form a graph: %w", runID, err)
	}
	rg := newRunGraph(g, specs, branch, pipeline, sha)
	rg.expansions = expansions
	s.graphs.put(runID, rg)
	return rg, nil
}

func cloneSpecs(specs []*cikit.JobSpec) []*cikit.JobSpec {
	out := make([]*cikit.JobSpec, len(specs))
	for i, s := range specs {
		out[i] = s.Clone()
	}
	return out
}

// refusal reports whether err refuses one event rather than saying the
// store failed.
func refusal(err error) bool {
	return errors.Is(err, cikit.ErrInvalidTransition) || errors.Is(err, cikit.ErrNotFound) || errors.Is(err, cikit.ErrConflict)
}

func (s *PostgresStore) JobApply(ctx context.Context, evs []*JobEvent) ([]*JobEventResult, error) {
	return s.JobApplyWith(ctx, evs, nil)
}

// ApplyWith queues a caller's statements in a transaction of
// JobApplyWith, given the events the transaction applies.
type ApplyWith func(b *pgx.Batch, applied []*JobEvent)

// JobApplyWith is JobApply with writes of the caller's in the same
// transactions: each transaction that applies some of evs calls with once
// their updates are made and before its COMMIT, with the events it
// applies (in the order of evs), and what with queues in b commits with
// them or rolls back with them. The statements' results are not read; one
// that fails fails the transaction, and JobApplyWith returns its error.
// The tables they name must be in the store's database, on its
// connections' search path. with only queues: it is called again when a
// transaction is tried again after a deadlock. A nil with is JobApply.
//
// It is how a package keeping rows beside the jobs (lease's table of
// leases) writes them atomically with the jobs' transitions, without a
// round trip of its own.
func (s *PostgresStore) JobApplyWith(ctx context.Context, evs []*JobEvent, with ApplyWith) ([]*JobEventResult, error) {
	out := make([]*JobEventResult, len(evs))
	todo := make([]int, 0, len(evs))
	for i, e := range evs {
		if err := e.validate(); err != nil {
			out[i] = &JobEventResult{Err: err}
			continue
		}
		todo = append(todo, i)
	}
	// Rounds of at most one event per job keep a job's events in order.
	for _, round := range groupcommit.Rounds(todo, func(i int) [2]string { return [2]string{evs[i].RunID, evs[i].JobID} }) {
		if err := s.applyRound(ctx, evs, round, out, with); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// fastEvent is an event the fast path may apply.
type fastEvent struct {
	i   int // index in the batch
	e   *JobEvent
	rg  *runGraph
	job int // index in the graph
}

// applyRound applies events about distinct jobs: those the fast path can
// take in one batch, the others (and those the fast path found it could
// not apply after all) one by one on the locked path.
func (s *PostgresStore) applyRound(ctx context.Context, evs []*JobEvent, round []int, out []*JobEventResult, with ApplyWith) error {
	var fast []*fastEvent
	var slow []int
	var at time.Time // of the fast path's write, kept by the events it missed
	for _, i := range round {
		e := evs[i]
		rg, j, ok, err := s.graphOf(ctx, s.pool, e.RunID, e.JobID)
		if err != nil {
			if !refusal(err) {
				return err
			}
			out[i] = &JobEventResult{Err: err}
			continue
		}
		switch {
		case !ok:
			out[i] = &JobEventResult{Err: fmt.Errorf("dag: run %q has no job %q: %w", e.RunID, e.JobID, cikit.ErrNotFound)}
		case e.Kind == EventQueue && rg.specs[j].Concurrency != nil && rg.specs[j].Concurrency.Group != "":
			res, err := s.queueInGroup(ctx, e, rg.specs[j].Concurrency, rg.branch, with)
			if err != nil && !refusal(err) {
				return err
			}
			out[i] = &JobEventResult{TransitionResult: res, Err: err}
		case fastEligible(rg, j, e):
			fast = append(fast, &fastEvent{i: i, e: e, rg: rg, job: j})
		default:
			slow = append(slow, i)
		}
	}
	if len(fast) > 0 {
		missed, now, err := s.fast(ctx, fast, out, with)
		if err != nil {
			return err
		}
		if missed, err = s.refuseMissed(ctx, evs, missed, out); err != nil {
			return err
		}
		slow = append(slow, missed...)
		at = now
	}
	if len(slow) == 0 {
		return nil
	}
	items := make([]lockedEvent, len(slow))
	for k, i := range slow {
		items[k] = lockedEvent{runID: evs[i].RunID, job: evs[i], at: at}
	}
	results, errs, err := s.transitions(ctx, items, with)
	if err != nil {
		return err
	}
	for k, i := range slow {
		out[i] = &JobEventResult{TransitionResult: results[k], Err: errs[k]}
	}
	return nil
}

// missedJobs reads the state and attempt of the jobs of events the fast
// path missed, one index probe each (see JobGetMany).
const missedJobs = `SELECT t.i, j.state, j.attempt FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS t(r, jid, i)
	CROSS JOIN LATERAL (SELECT state, attempt FROM jobs WHERE run_id = t.r AND job_id = t.jid LIMIT 1) j`

// refuseMissed answers the events the fast path missed that their jobs'
// rows alone refuse (see refusedAlone): an attempt that was retried or a
// job that moved on, as when another server queued the job first or a
// runner claims a job of a cancelled run. It returns the others, whose
// answer needs the whole run, for the locked path. Refused here, an
// event costs one row instead of a read of every job of its run under
// the run's exclusive lock. A job's state only moves forward within an
// attempt, so what refuses the event now refused it when it was missed.
func (s *PostgresStore) refuseMissed(ctx context.Context, evs []*JobEvent, missed []int, out []*JobEventResult) ([]int, error) {
	if len(missed) == 0 {
		return nil, nil
	}
	runIDs, jobIDs := make([]string, len(missed)), make([]string, len(missed))
	for k, i := range missed {
		runIDs[k], jobIDs[k] = evs[i].RunID, evs[i].JobID
	}
	rows, err := s.pool.Query(ctx, missedJobs, runIDs, jobIDs)
	if err != nil {
		return nil, interpretError(err)
	}
	found := make(map[int]*Job, len(missed))
	for rows.Next() {
		var k int
		j := &Job{}
		if err := rows.Scan(&k, &j.State, &j.Attempt); err != nil {
			rows.Close()
			return nil, interpretError(err)
		}
		found[k-1] = j
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(err)
	}
	var rest []int
	for k, i := range missed {
		if j, ok := found[k]; ok {
			if err := refusedAlone(j, evs[i]); err != nil {
				out[i] = &JobEventResult{Err: err}
				continue
			}
		}
		rest = append(rest, i)
	}
	return rest, nil
}

// fastEligible reports whether event e about job i can take the fast
// path: its effect is the job's own change and, for a completion, jobs
// that need it becoming READY, nothing else. A completion qualifies when
// it satisfies the jobs needing it (success, or an allowed failure that
// is not retried) and they all run on success: skips, retries, the
// decisions of always and on_failure jobs, jobs that become MANUAL or
// DELAYED instead of READY, and the end of a run are the locked path's.
func fastEligible(rg *runGraph, i int, e *JobEvent) bool {
	spec := rg.specs[i]
	switch e.Kind {
	case EventQueue:
		return spec.Concurrency == nil
	case EventStart:
		return true
	case EventComplete:
		satisfied := e.Outcome == cikit.JobSucceeded ||
			e.Outcome == cikit.JobFailed && AllowedFailure(spec, e.FailureClass, e.ExitCode) &&
				!RetryOnFailure(spec, e.FailureClass, e.ExitCode, e.Attempt)
		children := rg.g.Children(i)
		if !satisfied || rg.manual {
			// In a run with a manual job, any completion may end the
			// run: the jobs left PENDING may be waiting for a person.
			return false
		}
		// A job nothing needs may end the run: fastUpdate applies it only
		// while a job of the run other than the batch's leaves is
		// unfinished (see leafCompletion). One of a concurrency group
		// frees the group, which is the locked path's to tell.
		if len(children) == 0 {
			return spec.Concurrency == nil
		}
		for _, c := range children {
			if rg.g.Node(c).Expand || rg.specs[c].If != nil || rg.g.Node(c).Gated {
				// A placeholder is expanded, or ends with its variants,
				// a run-time condition decided, and a gated job made
				// MANUAL, on the locked path.
				return false
			}
			switch rg.g.Node(c).When {
			case cikit.WhenAlways, cikit.WhenOnFailure, cikit.WhenManual, cikit.WhenDelayed:
				return false
			}
		}
		return true
	}
	return false
}

// leafCompletion reports whether e completes job i of a run that no job
// needs: the completion that may end the run.
func leafCompletion(rg *runGraph, i int, e *JobEvent) bool {
	return e.Kind == EventComplete && len(rg.g.Children(i)) == 0
}

// fastUpdate is the conditional update of the fast path: each job moves
// only from the state its event starts from, at the event's attempt; a
// completion only while some job that needs it is still PENDING, or, for
// a job nothing needs (leaf), while a job of the run other than the
// batch's leaves is unfinished, so that it cannot be the event that ends
// the run; the batch's leaves are named by jobKey in $12 (one array
// compared with each unfinished job costs less than a join with the
// event arrays). Two batches at once may each count on the other's leaves
// being unfinished, so after committing each checks whether it left its
// runs with every job finished (endedRuns) and settles those on the
// locked path: whichever commits last sees both.
const fastUpdate = `UPDATE jobs j SET state = v.to_state,
		queued_at = CASE WHEN v.kind = 1 THEN $10::timestamptz ELSE j.queued_at END,
		started_at = CASE WHEN v.kind = 2 THEN $10::timestamptz ELSE j.started_at END,
		runner = CASE WHEN v.kind = 2 THEN v.runner ELSE j.runner END,
		finished_at = CASE WHEN v.kind = 3 THEN $10::timestamptz ELSE j.finished_at END,
		exit_code = CASE WHEN v.kind = 3 THEN v.exit_code ELSE j.exit_code END,
		reason = CASE WHEN v.kind = 3 THEN v.reason ELSE j.reason END,
		result = CASE WHEN v.kind = 3 THEN v.result::jsonb ELSE j.result END
	FROM unnest($1::text[], $2::text[], $3::int[], $4::int[], $5::text[], $6::text[], $7::text[], $8::int[], $9::text[], $11::bool[], $13::text[])
		AS v(run_id, job_id, attempt, kind, from_state, to_state, runner, exit_code, reason, leaf, result)
	WHERE j.run_id = v.run_id AND j.job_id = v.job_id AND j.attempt = v.attempt AND j.state = v.from_state
		AND (v.kind <> 3
			OR NOT v.leaf AND EXISTS (SELECT 1 FROM job_deps d JOIN jobs c ON c.run_id = d.run_id AND c.job_id = d.job_id
				WHERE d.run_id = j.run_id AND d.needs_job_id = j.job_id AND c.state = 'pending')
			OR v.leaf AND EXISTS (SELECT 1 FROM jobs o WHERE o.run_id = j.run_id
				AND o.state NOT IN ('succeeded', 'failed', 'skipped', 'cancelled')
				AND octet_length(o.run_id) || ':' || o.run_id || o.job_id <> ALL($12::text[])))
	RETURNING j.run_id, j.job_id, j.state, j.attempt, j.exit_code, j.reason, j.runner,
		j.ready_at, j.queued_at, j.started_at, j.finished_at, j.allow_failure`

// jobKey is job jobID of run runID as one string, as fastUpdate spells
// it in SQL: the run ID's length in bytes, a colon, the run ID and the
// job ID. The length makes it unambiguous whatever the IDs hold.
func jobKey(runID, jobID string) string {
	return strconv.Itoa(len(runID)) + ":" + runID + jobID
}

// endedRuns lists the runs, among those a batch completed leaves of, whose
// jobs have all finished while the run has not. It runs after the batch's
// COMMIT, in a snapshot of its own.
const endedRuns = `SELECT p.id FROM pipeline_runs p WHERE p.id = ANY($1) AND p.state IN ('pending', 'running')
	AND NOT EXISTS (SELECT 1 FROM jobs o WHERE o.run_id = p.id AND o.state NOT IN ('succeeded', 'failed', 'skipped', 'cancelled'))`

// lockRuns takes the shared lock of fast writes on runs (see lockRun):
// the locked path's exclusive lock waits for it, and it for that. The
// runs' IDs come sorted.
const lockRuns = `SELECT pg_advisory_xact_lock_shared(hashtextextended(id, 0)) FROM unnest($1::text[]) AS id`

// nestedLoops makes the rest of a transaction join a batch's events to
// jobs by their primary key, one index probe per event. Left to itself,
// the planner hashes the whole jobs table of a small or young database
// for a batch of a few dozen events, which costs more with every run
// stored. It also makes the transaction's prepared statements use their
// generic plans: planning the fast update for each batch's arrays took
// longer than running it (0.4 ms against 0.2 ms a batch).
const nestedLoops = `SELECT set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true),
	set_config('plan_cache_mode', 'force_generic_plan', true)`

// readRuns reads runs' rows, after lockRuns: a statement of its own, so
// that it sees what was committed while it waited for the locks.
const readRuns = `SELECT id, state, created_at, finished_at, idempotency_key, number FROM pipeline_runs WHERE id = ANY($1)`

// lockChildren locks PENDING jobs before readyChildren counts their needs:
// two writes completing two needs of one job take turns here, and the
// second sees the first's need satisfied.
const lockChildren = `SELECT c.job_id FROM jobs c
	JOIN unnest($1::text[], $2::text[]) AS v(run_id, job_id) ON c.run_id = v.run_id AND c.job_id = v.job_id
	WHERE c.state = 'pending' ORDER BY c.run_id, c.job_id FOR UPDATE OF c`

// readyChildren makes READY the PENDING jobs whose needs are all
// satisfied: SUCCEEDED, or FAILED with allow_failure.
const readyChildren = `UPDATE jobs c SET state = 'ready', ready_at = $3
	FROM unnest($1::text[], $2::text[]) AS v(run_id, job_id)
	WHERE c.run_id = v.run_id AND c.job_id = v.job_id AND c.state = 'pending'
		AND NOT EXISTS (SELECT 1 FROM job_deps d JOIN jobs p ON p.run_id = d.run_id AND p.job_id = d.needs_job_id
			WHERE d.run_id = c.run_id AND d.job_id = c.job_id
				AND NOT (p.state = 'succeeded' OR p.state = 'failed' AND p.allow_failure))
	RETURNING c.run_id, c.job_id, c.state, c.attempt, c.exit_code, c.reason, c.runner,
		c.ready_at, c.queued_at, c.started_at, c.finished_at, c.allow_failure`

// fast applies events in one batch: a transaction of conditional updates,
// then, with Redis, the count-down of the jobs that need the completed
// ones and a second transaction making those whose count reached zero
// READY; without Redis, the first transaction makes them READY itself.
// It fills out for the events it applied and returns the indexes of
// those it did not (a state or attempt other than expected, or a
// completion that turned out to end the run), for the locked path to
// apply or refuse.
func (s *PostgresStore) fast(ctx context.Context, fast []*fastEvent, out []*JobEventResult, with ApplyWith) ([]int, time.Time, error) {
	slices.SortFunc(fast, func(a, b *fastEvent) int { // one lock order for all writers
		return cmp.Or(cmp.Compare(a.e.RunID, b.e.RunID), cmp.Compare(a.e.JobID, b.e.JobID))
	})
	now := s.now()
	var (
		runs    map[string]*Run
		own     map[[2]string]*Job
		readied []*Job
		missed  []int
		edges   []edge
		// endedIDs are the runs left with every job finished.
		endedIDs []string
	)
	err := s.inPipeTx(ctx, func(tx *pipeTx) error {
		var err error
		runs, own, err = s.fastUpdate(ctx, tx, fast, now)
		if err != nil {
			return err
		}
		missed, edges, endedIDs = nil, nil, nil
		b := &pgx.Batch{}
		var queuedRuns []string
		var ended []*Job
		for _, f := range fast {
			j, ok := own[[2]string{f.e.RunID, f.e.JobID}]
			if !ok {
				missed = append(missed, f.i)
				continue
			}
			j.Spec = f.rg.specs[f.job]
			switch f.e.Kind {
			case EventQueue:
				queuedRuns = append(queuedRuns, f.e.RunID)
			case EventComplete:
				j.Result = f.e.Result.Clone()
				ended = append(ended, j)
				for _, c := range f.rg.g.Children(f.job) {
					edges = append(edges, edge{Run: f.e.RunID, Child: f.rg.g.Node(c).ID, Parent: f.e.JobID})
				}
			}
		}
		readied = nil
		if s.counters == nil && len(edges) > 0 {
			if readied, err = s.readyChildren(ctx, tx, edges, now); err != nil {
				return err
			}
		}
		if len(queuedRuns) > 0 {
			b.Queue(`UPDATE pipeline_runs SET state = 'running' WHERE id = ANY($1) AND state = 'pending'`, queuedRuns)
			for _, id := range queuedRuns {
				runs[id].State = cikit.RunRunning
			}
		}
		if err := queueAttempts(b, ended); err != nil {
			return err
		}
		var changed []*Job
		var applied []*fastEvent
		for _, f := range fast {
			if j, ok := own[[2]string{f.e.RunID, f.e.JobID}]; ok {
				changed, applied = append(changed, j), append(applied, f)
			}
		}
		evs, err := s.jobEvents(ctx, now, append(changed, readied...))
		if err != nil {
			return err
		}
		queueOutbox(b, evs)
		if with != nil && len(applied) > 0 {
			// fast is sorted by job; with gets the batch's order.
			slices.SortFunc(applied, func(a, b *fastEvent) int { return cmp.Compare(a.i, b.i) })
			evs := make([]*JobEvent, len(applied))
			for n, f := range applied {
				evs[n] = f.e
			}
			with(b, evs)
		}
		if err := s.step("fast:written"); err != nil {
			return err
		}
		var leafRuns []string
		for _, f := range fast {
			if _, ok := own[[2]string{f.e.RunID, f.e.JobID}]; ok && leafCompletion(f.rg, f.job, f.e) {
				leafRuns = append(leafRuns, f.e.RunID)
			}
		}
		if len(leafRuns) == 0 {
			return interpretError(tx.commit(ctx, b))
		}
		b.Queue("commit")
		b.Queue(endedRuns, slices.Compact(leafRuns)).Query(func(rows pgx.Rows) error {
			var err error
			endedIDs, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return err
		})
		return interpretError(tx.SendBatch(ctx, b).Close())
	})
	if err != nil {
		return nil, now, err
	}
	// Runs whose last jobs two batches completed at once end on the locked
	// path; the events of the batch about them report the run as it ended.
	settled := make(map[string]*Run, len(endedIDs))
	for _, id := range endedIDs {
		res, err := s.Repair(ctx, id)
		if err != nil {
			if !refusal(err) {
				return nil, now, err
			}
			continue
		}
		settled[id] = res.Run
	}
	if s.counters != nil && len(edges) > 0 {
		if err := s.step("fast:committed"); err != nil {
			return nil, now, err
		}
		if check := s.counters.countDown(ctx, edges); len(check) > 0 {
			if err := s.step("fast:counted"); err != nil {
				return nil, now, err
			}
			if readied, err = s.readyChecked(ctx, check, now); err != nil {
				return nil, now, err
			}
		}
	}
	// Each job made READY is told with the first event that counted one
	// of its needs.
	byChild := make(map[[2]string]*Job, len(readied))
	for _, c := range readied {
		byChild[[2]string{c.RunID, c.ID()}] = c
	}
	for _, f := range fast {
		j, ok := own[[2]string{f.e.RunID, f.e.JobID}]
		if !ok {
			continue
		}
		res := &TransitionResult{Changed: []*Job{j.clone()}}
		if f.e.Kind == EventComplete {
			for _, c := range f.rg.g.Children(f.job) {
				k := [2]string{f.e.RunID, f.rg.g.Node(c).ID}
				if rj, ok := byChild[k]; ok {
					res.Changed = append(res.Changed, rj.clone())
					delete(byChild, k)
				}
			}
		}
		run := *runs[f.e.RunID]
		if r, ok := settled[f.e.RunID]; ok {
			run = *r
		}
		res.Run = &run
		out[f.i] = &JobEventResult{TransitionResult: res}
	}
	return missed, now, nil
}

// fastUpdate locks the events' runs (shared) and applies their
// conditional updates, returning the runs and the jobs that moved.
func (s *PostgresStore) fastUpdate(ctx context.Context, tx batchSender, fast []*fastEvent, now time.Time) (map[string]*Run, map[[2]string]*Job, error) {
	var runIDs, runIDsPerEvent, jobIDs, from, to, runners, reasons []string
	leafKeys := []string{} // never NULL, which <> ALL would answer with NULL
	var attempts, kinds, exitCodes []int
	var leaves []bool
	var results []*string
	for _, f := range fast {
		r, err := encodeResult(f.e.Result)
		if err != nil {
			return nil, nil, err
		}
		results = append(results, r)
		leaf := leafCompletion(f.rg, f.job, f.e)
		leaves = append(leaves, leaf)
		if leaf {
			leafKeys = append(leafKeys, jobKey(f.e.RunID, f.e.JobID))
		}
		if len(runIDs) == 0 || runIDs[len(runIDs)-1] != f.e.RunID {
			runIDs = append(runIDs, f.e.RunID)
		}
		var fs, ts cikit.JobState
		switch f.e.Kind {
		case EventQueue:
			fs, ts = cikit.JobReady, cikit.JobQueued
		case EventStart:
			fs, ts = cikit.JobQueued, cikit.JobRunning
		case EventComplete:
			fs, ts = cikit.JobRunning, f.e.Outcome
		}
		runIDsPerEvent, jobIDs, attempts = append(runIDsPerEvent, f.e.RunID), append(jobIDs, f.e.JobID), append(attempts, f.e.Attempt)
		kinds, from, to = append(kinds, int(f.e.Kind)), append(from, string(fs)), append(to, string(ts))
		runners, exitCodes, reasons = append(runners, f.e.Runner), append(exitCodes, f.e.ExitCode), append(reasons, f.e.Reason)
	}
	b := &pgx.Batch{}
	b.Queue(nestedLoops)
	b.Queue(lockRuns, runIDs)
	b.Queue(readRuns, runIDs)
	b.Queue(fastUpdate, runIDsPerEvent, jobIDs, attempts, kinds, from, to, runners, exitCodes, reasons, now, leaves, leafKeys, results)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	for range 2 { // nestedLoops, lockRuns
		if _, err := br.Exec(); err != nil {
			return nil, nil, interpretError(err)
		}
	}
	rows, err := br.Query()
	if err != nil {
		return nil, nil, interpretError(err)
	}
	runs := make(map[string]*Run, len(runIDs))
	for rows.Next() {
		r := &Run{}
		var finished *time.Time
		var key *string
		if err := rows.Scan(&r.ID, &r.State, &r.CreatedAt, &finished, &key, &r.Number); err != nil {
			return nil, nil, interpretError(err)
		}
		r.CreatedAt, r.FinishedAt = r.CreatedAt.UTC(), deref(finished)
		if key != nil {
			r.IdempotencyKey = *key
		}
		runs[r.ID] = r
	}
	if err := rows.Err(); err != nil {
		return nil, nil, interpretError(err)
	}
	for _, f := range fast { // the rest of the run's row, from its graph
		if r, ok := runs[f.e.RunID]; ok {
			r.Pipeline, r.Branch, r.SHA = f.rg.pipeline, f.rg.branch, f.rg.sha
		}
	}
	rows, err = br.Query()
	if err != nil {
		return nil, nil, interpretError(err)
	}
	moved, err := scanJobs(rows)
	if err != nil {
		return nil, nil, err
	}
	own := make(map[[2]string]*Job, len(moved))
	for _, j := range moved {
		own[[2]string{j.RunID, j.Spec.ID}] = j
	}
	return runs, own, br.Close()
}

// scanJobs reads the jobs RETURNING clauses of the fast path list. Their
// Spec holds only the ID until the caller sets it.
func scanJobs(rows pgx.Rows) ([]*Job, error) {
	defer rows.Close()
	var out []*Job
	for rows.Next() {
		j := &Job{Spec: &cikit.JobSpec{}}
		var ready, queued, started, finished *time.Time
		if err := rows.Scan(&j.RunID, &j.Spec.ID, &j.State, &j.Attempt, &j.ExitCode, &j.Reason, &j.Runner,
			&ready, &queued, &started, &finished, &j.FailureAllowed); err != nil {
			return nil, interpretError(err)
		}
		j.ReadyAt, j.QueuedAt, j.StartedAt, j.FinishedAt = deref(ready), deref(queued), deref(started), deref(finished)
		out = append(out, j)
	}
	return out, interpretError(rows.Err())
}

// jobEvents lists the outbox events of jobs of runs that do not end with
// this write (the fast path's).
func (s *PostgresStore) jobEvents(ctx context.Context, now time.Time, jobs []*Job) ([]*OutboxEvent, error) {
	var out []*OutboxEvent
	for _, j := range jobs {
		rg, err := s.graph(ctx, s.pool, j.RunID)
		if err != nil {
			return nil, err
		}
		out = append(out, events(newEventID, now, &Run{ID: j.RunID, Pipeline: rg.pipeline, SHA: rg.sha}, false, []*Job{j})...)
	}
	return out, nil
}

// readyChildren makes READY, in tx, the children of edges whose needs are
// all satisfied, and returns them with their specs.
func (s *PostgresStore) readyChildren(ctx context.Context, tx batchSender, edges []edge, now time.Time) ([]*Job, error) {
	seen := make(map[[2]string]bool, len(edges))
	var runs, ids []string
	for _, e := range edges {
		if k := [2]string{e.Run, e.Child}; !seen[k] {
			seen[k] = true
			runs, ids = append(runs, e.Run), append(ids, e.Child)
		}
	}
	b := &pgx.Batch{}
	b.Queue(lockChildren, runs, ids)
	b.Queue(readyChildren, runs, ids, now)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return nil, interpretError(err)
	}
	rows, err := br.Query()
	if err != nil {
		return nil, interpretError(err)
	}
	readied, err := scanJobs(rows)
	if err != nil {
		return nil, err
	}
	for _, j := range readied {
		rg, err := s.graph(ctx, s.pool, j.RunID)
		if err != nil {
			return nil, err
		}
		i, _ := rg.g.Index(j.Spec.ID)
		j.Spec = rg.specs[i]
	}
	return readied, br.Close()
}

// readyChecked is the second transaction of a fast completion with Redis:
// the jobs whose count reached zero, or whose counter is missing, are
// checked against PostgreSQL and made READY.
func (s *PostgresStore) readyChecked(ctx context.Context, check []edge, now time.Time) ([]*Job, error) {
	var readied []*Job
	err := s.inPipeTx(ctx, func(tx *pipeTx) error {
		var runIDs []string
		for _, e := range check {
			runIDs = append(runIDs, e.Run)
		}
		slices.Sort(runIDs)
		b := &pgx.Batch{}
		b.Queue(nestedLoops)
		b.Queue(lockRuns, slices.Compact(runIDs))
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return interpretError(err)
		}
		var err error
		if readied, err = s.readyChildren(ctx, tx, check, now); err != nil {
			return err
		}
		evs, err := s.jobEvents(ctx, now, readied)
		if err != nil {
			return err
		}
		b = &pgx.Batch{}
		queueOutbox(b, evs)
		return interpretError(tx.commit(ctx, b))
	})
	return readied, err
}
