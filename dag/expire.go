package dag

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cikit/cikit"
)

// ExpireParams are the arguments of Store.JobsExpire. The limits are the
// scheduler's backstop: executors enforce step and job timeouts
// themselves, and JobsExpire fails the jobs whose executor did not report
// in time, or that no runner took.
type ExpireParams struct {
	// Now is the time the deadlines are compared with. Required.
	Now time.Time
	// MaxQueueTime is how long a job may wait READY or QUEUED, from the
	// moment it became ready, before it fails; 0 means no limit.
	MaxQueueTime time.Duration
	// DefaultTimeout is how long a job whose spec sets no Timeout may run
	// before it fails; 0 means no limit.
	DefaultTimeout time.Duration
	// GateTimeout is how long a gated job (cikit.JobSpec.Gate) whose
	// gate sets no Expires waits MANUAL for an approval, from the moment
	// it began to wait, before it fails as not approved (class
	// cikit.FailurePolicy, never retried); 0 means such gates never
	// expire.
	GateTimeout time.Duration
}

func (p *ExpireParams) validate() error {
	switch {
	case p.Now.IsZero():
		return errors.New("dag: ExpireParams.Now is required")
	case p.MaxQueueTime < 0:
		return fmt.Errorf("dag: ExpireParams.MaxQueueTime must not be negative, got %s", p.MaxQueueTime)
	case p.DefaultTimeout < 0:
		return fmt.Errorf("dag: ExpireParams.DefaultTimeout must not be negative, got %s", p.DefaultTimeout)
	case p.GateTimeout < 0:
		return fmt.Errorf("dag: ExpireParams.GateTimeout must not be negative, got %s", p.GateTimeout)
	}
	return nil
}

// Reasons of the failures JobsExpire makes start with one of these
// prefixes, so that people and programs can tell the deadlines apart.
const (
	ReasonTimeout      = "timeout: "       // a RUNNING job ran past its timeout
	ReasonQueueTimeout = "queue_timeout: " // a job waited past the max queue time
)

// expiry returns why a job in state, ready (or MANUAL) since readyAt,
// started at startedAt, limited to timeout by its spec (0 for none) and
// held by gate (nil for none), is past its deadline at p.Now, or "" when
// it is not; class is the failure's.
func (p *ExpireParams) expiry(state cikit.JobState, readyAt, startedAt time.Time, timeout time.Duration, gate *cikit.Gate) (reason string, class cikit.FailureClass) {
	switch {
	case state == cikit.JobManual:
		return gateExpiry(gate, readyAt, p.Now, p.GateTimeout), cikit.FailurePolicy
	case state == cikit.JobRunning:
		if timeout <= 0 {
			timeout = p.DefaultTimeout
		}
		if timeout > 0 && startedAt.Add(timeout).Before(p.Now) {
			return fmt.Sprintf("%sexceeded its timeout of %s", ReasonTimeout, timeout), cikit.FailureTimeout
		}
	case waiting(state):
		if p.MaxQueueTime > 0 && readyAt.Add(p.MaxQueueTime).Before(p.Now) {
			return fmt.Sprintf("%swaited %s in the queue, longer than the max queue time of %s", ReasonQueueTimeout, p.Now.Sub(readyAt), p.MaxQueueTime), cikit.FailureTimeout
		}
	}
	return "", ""
}

// waiting reports whether a job in state s waits for a runner.
func waiting(s cikit.JobState) bool { return s == cikit.JobReady || s == cikit.JobQueued }

// overdue is a job a store's scan found past its deadline.
type overdue struct {
	runID, jobID string
	attempt      int
	state        cikit.JobState
	reason       string
	class        cikit.FailureClass
}

// transitionFunc is the transition method both stores share: it applies
// one event to a run under the store's lock.
type transitionFunc func(ctx context.Context, runID string, je *JobEvent, ev Event) (*TransitionResult, error)

// expire applies EventExpire to each overdue job, one transition per job,
// each conditional on the attempt and state the scan saw: a job that moved
// on since is left alone. The failure reads as a completion of class
// timeout, so the job's retry policy applies; that of an expired gate is
// of class policy, never retried.
func expire(ctx context.Context, due []overdue, transition transitionFunc) ([]*TransitionResult, error) {
	var out []*TransitionResult
	for _, d := range due {
		failure := &JobEvent{Kind: EventExpire, RunID: d.runID, JobID: d.jobID, Attempt: d.attempt, Outcome: cikit.JobFailed,
			ExitCode: -1, Reason: d.reason, FailureClass: d.class, seen: d.state}
		res, err := transition(ctx, d.runID, failure, Event{})
		switch {
		case errors.Is(err, cikit.ErrInvalidTransition):
			// It moved on since the scan: finished, started or retried.
		case err != nil:
			return out, fmt.Errorf("dag: expire job %q of run %q: %w", d.jobID, d.runID, err)
		case len(res.Changed) > 0:
			out = append(out, res)
		}
	}
	return out, nil
}

func (s *MemoryStore) JobsExpire(ctx context.Context, p *ExpireParams) ([]*TransitionResult, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var due []overdue
	s.mu.Lock()
	for id, r := range s.runs {
		for i := range r.jobs {
			j := &r.jobs[i]
			if reason, class := p.expiry(j.State, j.ReadyAt, j.StartedAt, j.Spec.Timeout, j.Spec.Gate); reason != "" {
				due = append(due, overdue{runID: id, jobID: j.ID(), attempt: j.Attempt, state: j.State, reason: reason, class: class})
			}
		}
	}
	s.mu.Unlock()
	// Runs in the byte order of their IDs, each run's jobs in plan order,
	// as PostgresStore.
	slices.SortStableFunc(due, func(a, b overdue) int { return strings.Compare(a.runID, b.runID) })
	return expire(ctx, due, s.transition)
}

func (s *PostgresStore) JobsExpire(ctx context.Context, p *ExpireParams) ([]*TransitionResult, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	due, err := s.overdue(ctx, p)
	if err != nil {
		return nil, err
	}
	return expire(ctx, due, s.transition)
}

// overdue finds the jobs past their deadline at p.Now, runs in the byte
// order of their IDs (as MemoryStore): the RUNNING jobs, as many as there
// are runners, whose deadlines depend on each spec's timeout and are
// checked here, the waiting jobs ready since before the max queue
// time, found by the index jobs_waiting_since (the waiting jobs of a
// large run are not read while they are in time), and the gated jobs
// waiting MANUAL, found by the index jobs_gated, whose deadlines depend
// on each gate's expiry.
func (s *PostgresStore) overdue(ctx context.Context, p *ExpireParams) ([]overdue, error) {
	rows, err := s.pool.Query(ctx, `SELECT run_id, job_id, attempt, state, ready_at, started_at, spec->'timeout', spec->'gate' FROM (
			SELECT run_id, job_id, position, attempt, state, ready_at, started_at, spec FROM jobs WHERE state = 'running'
			UNION ALL
			SELECT run_id, job_id, position, attempt, state, ready_at, started_at, spec FROM jobs
				WHERE $1 AND state IN ('ready', 'queued') AND ready_at < $2
			UNION ALL
			SELECT run_id, job_id, position, attempt, state, ready_at, started_at, spec FROM jobs
				WHERE state = 'manual' AND spec ? 'gate'
		) j ORDER BY run_id COLLATE "C", position`, p.MaxQueueTime > 0, p.Now.Add(-p.MaxQueueTime))
	if err != nil {
		return nil, interpretError(err)
	}
	defer rows.Close()
	var due []overdue
	for rows.Next() {
		var d overdue
		var ready, started *time.Time
		var rawTimeout, rawGate []byte
		if err := rows.Scan(&d.runID, &d.jobID, &d.attempt, &d.state, &ready, &started, &rawTimeout, &rawGate); err != nil {
			return nil, interpretError(err)
		}
		var timeout time.Duration
		if rawTimeout != nil {
			if err := json.Unmarshal(rawTimeout, &timeout); err != nil {
				return nil, fmt.Errorf("dag: run %q: the stored timeout of job %q is corrupt: %w", d.runID, d.jobID, err)
			}
		}
		var gate *cikit.Gate
		if rawGate != nil {
			if err := json.Unmarshal(rawGate, &gate); err != nil {
				return nil, fmt.Errorf("dag: run %q: the stored gate of job %q is corrupt: %w", d.runID, d.jobID, err)
			}
		}
		if d.reason, d.class = p.expiry(d.state, deref(ready), deref(started), timeout, gate); d.reason != "" {
			due = append(due, d)
		}
	}
	return due, interpretError(rows.Err())
}
