package dag

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/cikit/cikit"
)

// SupersedePolicy says whether a new run cancels the unfinished runs of
// its pipeline on its branch, which the push that started it has made
// outdated.
//
// A superseded run is cancelled as RunCancel cancels it, in the write
// that creates the new run: its jobs that have not started end CANCELLED,
// and its RUNNING jobs become CANCEL_REQUESTED, so the run goes on until
// their executors have reported how they ended. The reason of every job it
// cancels is "superseded by run <id>". Only a run with both a Pipeline and
// a Branch supersedes or is superseded; a creation that returns an
// existing run by its idempotency key cancels nothing.
//
// Whatever the policy, a new run cancels, in the same write, the gated
// jobs (cikit.JobSpec.Gate) still waiting MANUAL for an approval in the
// older unfinished runs of its pipeline and branch, with the same reason
// and the consequences of a cancellation (the jobs that need them
// CANCELLED): approving an older commit's deployment once a newer commit
// has a run would deploy stale code. The rest of those runs, on a default
// branch or under SupersedeNever, goes on to its end.
type SupersedePolicy int

const (
	// SupersedeExceptDefaultBranch, the zero value, supersedes on every
	// branch but the repository's default branch (see
	// RunCreateParams.DefaultBranch), where every commit's run goes to
	// its end: it may deploy, and its result is the branch's history.
	SupersedeExceptDefaultBranch SupersedePolicy = iota
	// SupersedeAlways supersedes on every branch, the default one too.
	SupersedeAlways
	// SupersedeNever lets every run go to its end.
	SupersedeNever
)

func (p SupersedePolicy) String() string {
	switch p {
	case SupersedeExceptDefaultBranch:
		return "except-default-branch"
	case SupersedeAlways:
		return "always"
	case SupersedeNever:
		return "never"
	}
	return fmt.Sprintf("SupersedePolicy(%d)", int(p))
}

// check refuses a policy that is not one of the declared ones.
func (p SupersedePolicy) check() error {
	if p < SupersedeExceptDefaultBranch || p > SupersedeNever {
		return fmt.Errorf("dag: unknown supersede policy %v", p)
	}
	return nil
}

// supersedes reports whether the run p creates cancels the unfinished
// runs of its pipeline and branch.
func (p *RunCreateParams) supersedes() bool {
	if p.Pipeline == "" || p.Branch == "" {
		return false
	}
	switch p.Supersede {
	case SupersedeAlways:
		return true
	case SupersedeNever:
		return false
	}
	return !p.DefaultBranch
}

// supersededReason is the reason of the jobs a new run cancels.
func supersededReason(runID string) string { return "superseded by run " + runID }

// line is a pipeline on a branch: the runs that may supersede each other.
type line struct{ pipeline, branch string }

// supersede cancels the unfinished runs of the new run r's line, in the
// order of their IDs, when p asks for it, and otherwise their gated jobs
// waiting MANUAL. The caller holds the lock.
func (s *MemoryStore) supersede(r *memRun, p *RunCreateParams) error {
	if p.Pipeline == "" || p.Branch == "" {
		return nil
	}
	var older []string
	for _, o := range s.lines[line{p.Pipeline, p.Branch}] {
		if o != r && !o.run.State.Terminal() {
			older = append(older, o.run.ID)
		}
	}
	slices.Sort(older)
	if !p.supersedes() {
		return s.supersedeGates(r, older)
	}
	for _, id := range older {
		// A cancellation expands nothing: no context is needed.
		if _, err := s.transitionLocked(context.Background(), id, nil, Event{Kind: EventCancel}, supersededReason(r.run.ID)); err != nil {
			return err
		}
	}
	return nil
}

// supersedeGates cancels the gated jobs waiting MANUAL of the runs older,
// superseded by r. The caller holds the lock.
func (s *MemoryStore) supersedeGates(r *memRun, older []string) error {
	for _, id := range older {
		o := s.runs[id]
		var gates []*JobEvent
		for i := range o.jobs {
			if j := &o.jobs[i]; j.State == cikit.JobManual && j.Spec.Gate != nil {
				gates = append(gates, gateCancel(id, j.ID(), j.Attempt))
			}
		}
		for _, e := range gates {
			if _, err := s.transitionLocked(context.Background(), id, e, Event{}, supersededReason(r.run.ID)); err != nil {
				return err
			}
		}
	}
	return nil
}

// gateCancel is the event that cancels a gated job waiting MANUAL, found
// so at attempt, that a newer run supersedes.
func gateCancel(runID, jobID string, attempt int) *JobEvent {
	return &JobEvent{Kind: EventCancelJob, RunID: runID, JobID: jobID, Attempt: attempt, seen: cikit.JobManual}
}

// supersedeTx cancels the unfinished runs of the new run's line, when p
// asks for it, in the transaction that creates run. An advisory lock per
// line serialises the creations of one line, so of two runs created at
// once the later one supersedes the earlier; the old runs' rows are
// locked in the order of their IDs, as every write that locks several
// runs does.
func (s *PostgresStore) supersedeTx(ctx context.Context, tx pgx.Tx, run *Run, p *RunCreateParams) error {
	if p.Pipeline == "" || p.Branch == "" {
		return nil
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('cikit.supersede'), hashtext($1))`,
		p.Pipeline+"\n"+p.Branch); err != nil {
		return interpretError(err)
	}
	if !p.supersedes() {
		return s.supersedeGatesTx(ctx, tx, run, p)
	}
	rows, err := tx.Query(ctx, `SELECT id FROM pipeline_runs
		WHERE pipeline = $1 AND branch = $2 AND state IN ('pending', 'running', 'blocked') AND id <> $3
`, p.Pipeline, p.Branch, run.ID)
	if err != nil {
		return interpretError(err)
	}
	older, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(older) == 0 {
		return interpretError(err)
	}
	slices.Sort(older) // in Go's order, which every writer locks runs in
	items := make([]lockedEvent, len(older))
	for i, id := range older {
		items[i] = lockedEvent{runID: id, ev: Event{Kind: EventCancel}, reason: supersededReason(run.ID)}
	}
	// transitionsTx locks the runs in the order of their IDs.
	_, errs, err := s.transitionsTx(ctx, tx, older, items, nil)
	if err != nil {
		return err
	}
	for i, err := range errs {
		// A run that finished or vanished meanwhile needs no cancel.
		if err != nil && !refusal(err) {
			return fmt.Errorf("dag: supersede run %s: %w", older[i], err)
		}
	}
	return nil
}

// supersedeGatesTx cancels, in tx, the gated jobs waiting MANUAL of the
// unfinished runs of the new run's line, found through the indexes
// pipeline_runs_unfinished and jobs_gated. The caller holds the line's
// lock.
func (s *PostgresStore) supersedeGatesTx(ctx context.Context, tx pgx.Tx, run *Run, p *RunCreateParams) error {
	rows, err := tx.Query(ctx, `SELECT j.run_id, j.job_id, j.attempt FROM pipeline_runs r JOIN jobs j ON j.run_id = r.id
		WHERE r.pipeline = $1 AND r.branch = $2 AND r.state IN ('pending', 'running', 'blocked') AND r.id <> $3
			AND j.state = 'manual' AND j.spec ? 'gate'`, p.Pipeline, p.Branch, run.ID)
	if err != nil {
		return interpretError(err)
	}
	var items []lockedEvent
	var ids []string
	for rows.Next() {
		var runID, jobID string
		var attempt int
		if err := rows.Scan(&runID, &jobID, &attempt); err != nil {
			rows.Close()
			return interpretError(err)
		}
		items = append(items, lockedEvent{runID: runID, job: gateCancel(runID, jobID, attempt), reason: supersededReason(run.ID)})
		ids = append(ids, runID)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(items) == 0 {
		return interpretError(err)
	}
	slices.Sort(ids) // in Go's order, which every writer locks runs in
	_, errs, err := s.transitionsTx(ctx, tx, slices.Compact(ids), items, nil)
	if err != nil {
		return err
	}
	for i, err := range errs {
		// A gate approved, rejected or cancelled meanwhile needs no cancel.
		if err != nil && !refusal(err) {
			return fmt.Errorf("dag: supersede job %s of run %s: %w", items[i].job.JobID, items[i].runID, err)
		}
	}
	return nil
}
