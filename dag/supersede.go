package dag

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
)

// SupersedePolicy says whether a new run cancels the unfinished runs of
// its pipeline on its branch, which the push that started it has made
// outdated.
//
// A superseded run is cancelled as RunCancel cancels it, in the write
// that creates the new run: its jobs that have not started end CANCELLED,
// and its RUNNING jobs become CANCEL_REQUESTED, so the run goes on until
// their executors have reported how they ended. The reason of every job it cancels is "superseded by run <id>". Only a
// run with both a Pipeline and a Branch supersedes or is superseded; a
// creation that returns an existing run by its idempotency key cancels
// nothing.
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
// order of their IDs, when p asks for it. The caller holds the lock.
func (s *MemoryStore) supersede(r *memRun, p *RunCreateParams) error {
	if !p.supersedes() {
		return nil
	}
	var older []string
	for _, o := range s.lines[line{p.Pipeline, p.Branch}] {
		if o != r && !o.run.State.Terminal() {
			older = append(older, o.run.ID)
		}
	}
	slices.Sort(older)
	for _, id := range older {
		// A cancellation expands nothing: no context is needed.
		if _, err := s.transitionLocked(context.Background(), id, nil, Event{Kind: EventCancel}, supersededReason(r.run.ID)); err != nil {
			return err
		}
	}
	return nil
}

// supersedeTx cancels the unfinished runs of the new run's line, when p
// asks for it, in the transaction that creates run. An advisory lock per
// line serialises the creations of one line, so of two runs created at
// once the later one supersedes the earlier; the old runs' rows are
// locked in the order of their IDs, as every write that locks several
// runs does.
func (s *PostgresStore) supersedeTx(ctx context.Context, tx pgx.Tx, run *Run, p *RunCreateParams) error {
	if !p.supersedes() {
		return nil
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('cikit.supersede'), hashtext($1))`,
		p.Pipeline+"\n"+p.Branch); err != nil {
		return interpretError(err)
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
