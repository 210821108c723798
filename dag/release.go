package dag

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cikit/cikit"
)

// due is a DELAYED job a store's scan found whose time has come.
type due struct {
	runID, jobID string
	attempt      int
}

// errReleaseNow refuses a JobsRelease without a time.
var errReleaseNow = errors.New("dag: JobsRelease needs a time (now is zero)")

// release applies EventRelease to each job found due, one transition per
// job, each conditional on the attempt and on the job still being DELAYED:
// a job cancelled since the scan is left alone.
func release(ctx context.Context, jobs []due, transition transitionFunc) ([]*TransitionResult, error) {
	var out []*TransitionResult
	for _, d := range jobs {
		ev := &JobEvent{Kind: EventRelease, RunID: d.runID, JobID: d.jobID, Attempt: d.attempt, seen: cikit.JobDelayed}
		res, err := transition(ctx, d.runID, ev, Event{})
		switch {
		case errors.Is(err, cikit.ErrInvalidTransition):
			// It moved on since the scan: cancelled, or released by
			// another sweeper.
		case err != nil:
			return out, fmt.Errorf("dag: release job %q of run %q: %w", d.jobID, d.runID, err)
		case len(res.Changed) > 0:
			out = append(out, res)
		}
	}
	return out, nil
}

func (s *MemoryStore) JobsRelease(ctx context.Context, now time.Time) ([]*TransitionResult, error) {
	if now.IsZero() {
		return nil, errReleaseNow
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var found []due
	s.mu.Lock()
	for id, r := range s.runs {
		for i := range r.jobs {
			if j := &r.jobs[i]; j.State == cikit.JobDelayed && !j.ReadyAt.After(now) {
				found = append(found, due{runID: id, jobID: j.ID(), attempt: j.Attempt})
			}
		}
	}
	s.mu.Unlock()
	slices.SortStableFunc(found, func(a, b due) int { return strings.Compare(a.runID, b.runID) })
	return release(ctx, found, s.transition)
}

// JobsRelease finds the due jobs through the partial index jobs_delayed,
// which holds only DELAYED jobs.
func (s *PostgresStore) JobsRelease(ctx context.Context, now time.Time) ([]*TransitionResult, error) {
	if now.IsZero() {
		return nil, errReleaseNow
	}
	rows, err := s.pool.Query(ctx, `SELECT run_id, job_id, attempt FROM jobs
		WHERE state = 'delayed' AND ready_at <= $1 ORDER BY run_id COLLATE "C", position`, now)
	if err != nil {
		return nil, interpretError(err)
	}
	var found []due
	for rows.Next() {
		var d due
		if err := rows.Scan(&d.runID, &d.jobID, &d.attempt); err != nil {
			rows.Close()
			return nil, interpretError(err)
		}
		found = append(found, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, interpretError(err)
	}
	return release(ctx, found, s.transition)
}
