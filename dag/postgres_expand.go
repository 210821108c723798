package dag

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cikit/cikit"
)

// expandsBelow reports whether a job that needs job i is a placeholder
// still to expand: the end of i may expand it, and what the expansion
// reads (the placeholder's needs) and may change (what is below it, when
// it fails) is below i.
func expandsBelow(g *Graph, i int) bool {
	for _, c := range g.Children(i) {
		if g.Node(c).Expand && !g.Expanded(c) {
			return true
		}
	}
	return false
}

// decidesBelow reports whether a job that needs job i has a run-time
// condition: the end of i may decide it, and a false one skips what is
// below it.
func decidesBelow(rg *runGraph, i int) bool {
	for _, c := range rg.g.Children(i) {
		if rg.specs[c].If != nil {
			return true
		}
	}
	return false
}

// expandLocked expands, on the locked path, the placeholders the write a
// on r made arrive (see expansion.expand). r takes the grown graph, which
// the store caches at once: a write that rolls back leaves a graph ahead
// of the run's rows, which the next lock of the run finds out (its count
// of expansions differs) and reads again.
func (s *PostgresStore) expandLocked(ctx context.Context, tx pgx.Tx, r *lockedRun, runID string, a *applied, now time.Time) error {
	if !r.rg.expandable() && !r.rg.conditions {
		return nil
	}
	er := &expandRun{runID: runID, g: r.rg.g, specs: r.rg.specs, jobs: r.jobs,
		context: func() (*cikit.RunContext, error) {
			var b []byte
			if err := tx.QueryRow(ctx, `SELECT context FROM pipeline_runs WHERE id = $1`, runID).Scan(&b); err != nil {
				return nil, interpretError(err)
			}
			return decodeContext(b)
		}}
	if err := s.x.expand(ctx, er, a, now); err != nil {
		return err
	}
	if len(er.added) == 0 {
		return nil
	}
	rg := newRunGraph(er.g, er.specs, r.rg.branch, r.rg.pipeline, r.rg.sha)
	rg.expansions = r.rg.expansions + 1
	r.rg, r.jobs, r.grown = rg, er.jobs, true
	r.read, r.added = append(r.read, er.added...), append(r.added, er.added...)
	for _, i := range er.added {
		if p, ok := rg.g.Index(rg.g.Node(i).VariantOf); ok && !slices.Contains(r.placeholders, p) {
			r.placeholders = append(r.placeholders, p)
		}
	}
	s.graphs.put(runID, rg)
	return nil
}

// queueWrites queues the writes of what r changed and has not written:
// the rows of the jobs expansions added, with their needs, then the
// updates of the changed jobs.
func (r *lockedRun) queueWrites(b *pgx.Batch, runID string) error {
	if len(r.added) > 0 {
		if err := queueAdded(b, runID, r.rg.g, r.jobs, r.added); err != nil {
			return err
		}
		r.added = nil
	}
	if r.grown {
		b.Queue(`UPDATE pipeline_runs SET expansions = $2 WHERE id = $1`, runID, r.rg.expansions)
		r.grown = false
	}
	return queueJobUpdates(b, runID, r.unwritten())
}

// queueAdded queues the insert of the jobs added (indexes of g and jobs)
// by expansions, and of their needs and their placeholders' needs of
// them (job_deps).
func queueAdded(b *pgx.Batch, runID string, g *Graph, jobs []*Job, added []int) error {
	var (
		ids, specs, states, reasons, runners []string
		positions, attempts, exitCodes       []int
		ready, finished                      []*time.Time
		allow                                []bool
		results                              []*string
		dJobs, dNeeds                        []string
	)
	for _, i := range added {
		j := jobs[i]
		data, err := json.Marshal(j.Spec)
		if err != nil {
			return fmt.Errorf("dag: job %q: %w", j.ID(), err)
		}
		res, err := encodeResult(j.Result)
		if err != nil {
			return err
		}
		ids, specs, states, reasons = append(ids, j.ID()), append(specs, string(data)), append(states, string(j.State)), append(reasons, j.Reason)
		runners, positions, attempts, exitCodes = append(runners, j.Runner), append(positions, i), append(attempts, j.Attempt), append(exitCodes, j.ExitCode)
		ready, finished = append(ready, nullTime(j.ReadyAt)), append(finished, nullTime(j.FinishedAt))
		allow, results = append(allow, j.FailureAllowed), append(results, res)
		for _, p := range g.Parents(i) {
			dJobs, dNeeds = append(dJobs, j.ID()), append(dNeeds, g.Node(p).ID)
		}
		dJobs, dNeeds = append(dJobs, g.Node(i).VariantOf), append(dNeeds, j.ID())
	}
	b.Queue(`INSERT INTO jobs (run_id, position, job_id, spec, state, reason, runner, attempt, exit_code, ready_at, finished_at, allow_failure, result)
		SELECT $1, pos, j, sp::jsonb, st, rs, rn, at, ec, rd, fn, af, res::jsonb
		FROM unnest($2::int[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::int[], $9::int[],
			$10::timestamptz[], $11::timestamptz[], $12::bool[], $13::text[])
			AS t(pos, j, sp, st, rs, rn, at, ec, rd, fn, af, res)`,
		runID, positions, ids, specs, states, reasons, runners, attempts, exitCodes, ready, finished, allow, results)
	b.Queue(`INSERT INTO job_deps (run_id, job_id, needs_job_id) SELECT $1, j, n FROM unnest($2::text[], $3::text[]) AS t(j, n)`,
		runID, dJobs, dNeeds)
	return nil
}

// rebuildSomeCounters sets the counters of the placeholders r expanded
// and of their variants, whose needs the expansions changed, from the
// states of their needs, which the write read: what a rebuild of the
// whole run would set them to.
func (s *PostgresStore) rebuildSomeCounters(ctx context.Context, runID string, r *lockedRun) {
	var jobs []int
	for _, p := range r.placeholders {
		jobs = append(jobs, p)
		jobs = append(jobs, r.rg.g.Variants(p)...)
	}
	state := func(i int) cikit.JobState { return r.jobs[i].State }
	if err := s.counters.rebuildJobs(ctx, runID, r.rg.g, state, jobs); err != nil {
		_ = s.counters.forget(ctx, runID, r.rg.g)
	}
	r.placeholders = nil
}

// initialJobs are the jobs of a new run of g, whose specs are specs, in
// their initial states.
func initialJobs(g *Graph, specs []*cikit.JobSpec, states []cikit.JobState, runID string, now time.Time) []*Job {
	jobs := make([]*Job, len(specs))
	for i, spec := range specs {
		j := initialJob(g, spec, states, i, now)
		j.RunID = runID
		jobs[i] = &j
	}
	return jobs
}

// expandCreated expands the placeholders of new run n that arrive as it
// is created (they need nothing, or only jobs that never run): n takes
// the grown graph, its states and jobs. The expansions commit with the
// run, whose count of expansions starts at zero: its graph is read from
// its rows.
func (s *PostgresStore) expandCreated(ctx context.Context, n *newRun, now time.Time) error {
	a := &applied{}
	for i, st := range n.states {
		if (n.g.Node(i).Expand || n.p.Jobs[i].If != nil) && arrives(st) {
			a.changed, a.from = append(a.changed, &Job{Spec: n.p.Jobs[i], State: st}), append(a.from, cikit.JobPending)
		}
	}
	if len(a.changed) == 0 {
		return nil
	}
	er := &expandRun{runID: n.run.ID, g: n.g, specs: n.p.Jobs, jobs: initialJobs(n.g, n.p.Jobs, n.states, n.run.ID, now),
		context: func() (*cikit.RunContext, error) { return n.p.Context, nil }}
	if err := s.x.expand(ctx, er, a, now); err != nil {
		return err
	}
	n.g, n.jobs = er.g, er.jobs
	n.states = statesOf(er.jobs)
	return nil
}
