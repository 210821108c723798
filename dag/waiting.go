package dag

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cikit/cikit"
)

// Limits of WaitingListParams.Limit.
const (
	// DefaultWaitingListLimit is how many jobs JobListWaiting returns
	// when WaitingListParams.Limit is zero.
	DefaultWaitingListLimit = 500
	// MaxWaitingListLimit is the largest WaitingListParams.Limit.
	MaxWaitingListLimit = 5000
)

// WaitingListParams are the arguments of Store.JobListWaiting. The zero
// value lists the first DefaultWaitingListLimit waiting jobs of all runs.
type WaitingListParams struct {
	// CreatedSince, when set, lists only the jobs of runs created at or
	// after it.
	CreatedSince time.Time
	// After, when set, lists the jobs that come after it in the list's
	// order: a page's last job gives the next page. A job the run does
	// not have comes before all of the run's.
	After *JobKey
	// Limit is the most jobs returned, from 1 to MaxWaitingListLimit;
	// zero means DefaultWaitingListLimit.
	Limit int
}

// Validate returns an error matching ErrInvalidParams when p cannot be
// listed: a limit out of range, or a cursor that is not UTF-8 without NUL
// bytes.
func (p *WaitingListParams) Validate() error {
	if p.Limit < 0 || p.Limit > MaxWaitingListLimit {
		return fmt.Errorf("dag: WaitingListParams.Limit must be from 1 to %d (0 for %d), got %d: %w",
			MaxWaitingListLimit, DefaultWaitingListLimit, p.Limit, ErrInvalidParams)
	}
	if p.After != nil && (!validText(p.After.RunID) || !validText(p.After.JobID)) {
		return fmt.Errorf("dag: WaitingListParams.After must be UTF-8 without NUL bytes: %w", ErrInvalidParams)
	}
	return nil
}

func (p *WaitingListParams) limit() int { return cmp.Or(p.Limit, DefaultWaitingListLimit) }

// Key returns the job's key, for WaitingListParams.After.
func (j *Job) Key() JobKey { return JobKey{RunID: j.RunID, JobID: j.ID()} }

// waitingState reports whether a job in state s waits for a runner, as
// JobListWaiting lists it.
func waitingState(s cikit.JobState) bool { return s == cikit.JobReady || s == cikit.JobQueued }

func (s *MemoryStore) JobListWaiting(ctx context.Context, p *WaitingListParams) ([]*Job, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var runs []*memRun
	for i := len(s.order) - 1; i >= 0; i-- {
		r := s.order[i]
		if r.run.CreatedAt.Round(0).Before(p.CreatedSince.Round(0)) {
			break // s.order is by creation time
		}
		if p.After == nil || r.run.ID >= p.After.RunID {
			runs = append(runs, r)
		}
	}
	slices.SortFunc(runs, func(a, b *memRun) int { return strings.Compare(a.run.ID, b.run.ID) })
	out := []*Job{}
	for _, r := range runs {
		from := 0
		if p.After != nil && r.run.ID == p.After.RunID {
			if i, ok := r.graph.Index(p.After.JobID); ok {
				from = i + 1
			}
		}
		for i := from; i < len(r.jobs); i++ {
			if !waitingState(r.jobs[i].State) {
				continue
			}
			if len(out) == p.limit() {
				return out, nil
			}
			out = append(out, r.jobs[i].clone())
		}
	}
	return out, nil
}

// waitingJobs pages through the waiting jobs over index jobs_waiting:
// the runs' rows are read only for the jobs the index yields.
const waitingJobs = `SELECT j.run_id, j.job_id, j.state, j.attempt, j.exit_code, j.reason, j.runner,
		j.ready_at, j.queued_at, j.started_at, j.finished_at, j.allow_failure
	FROM jobs j JOIN pipeline_runs r ON r.id = j.run_id
	WHERE j.state IN ('ready', 'queued')
		AND (j.run_id COLLATE "C", j.position) > ($1::text COLLATE "C",
			coalesce((SELECT position FROM jobs WHERE run_id = $1 AND job_id = $2), -1))
		AND r.created_at >= $3
	ORDER BY j.run_id COLLATE "C", j.position LIMIT $4`

func (s *PostgresStore) JobListWaiting(ctx context.Context, p *WaitingListParams) ([]*Job, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var after JobKey
	if p.After != nil {
		after = *p.After
	}
	var out []*Job
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, nestedLoops); err != nil {
			return interpretError(err)
		}
		rows, err := tx.Query(ctx, waitingJobs, after.RunID, after.JobID, p.CreatedSince, p.limit())
		if err != nil {
			return interpretError(err)
		}
		out, err = scanJobs(rows)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dag: listing waiting jobs: %w", err)
	}
	for _, j := range out {
		rg, i, ok, err := s.graphOf(ctx, s.pool, j.RunID, j.Spec.ID)
		if err != nil {
			return nil, fmt.Errorf("dag: listing waiting jobs: %w", err)
		}
		if !ok {
			return nil, fmt.Errorf("dag: run %q has a job %q its graph has not", j.RunID, j.Spec.ID)
		}
		j.Spec = rg.specs[i].Clone()
	}
	if out == nil {
		out = []*Job{}
	}
	return out, nil
}
