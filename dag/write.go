package dag

import (
	"fmt"
	"time"

	"github.com/cikit/cikit"
)

// write is one store write worked out on a run's current jobs, the same
// way for every store: which event applies (a covered failure becomes an
// automatic retry), what changes, and how the changed jobs' records read
// afterwards. Stores only load the jobs before and persist after.
type write struct {
	ev       Event
	complete *JobCompleteParams
	retrying bool // a failure retried on its own: the event's job gets a new attempt
	// duplicate is set for a completion that was already applied: the
	// store writes nothing and answers with the run as it is.
	duplicate bool
	// reason is why a cancel event cancels; "run cancelled" when empty.
	reason string
}

// newWrite resolves the event for target (nil for run events) against the
// jobs of the run, in graph order.
func newWrite(g *Graph, jobs []*Job, runID string, target *JobTransitionParams, ev Event, complete *JobCompleteParams) (*write, error) {
	w := &write{ev: ev, complete: complete}
	if target == nil {
		return w, nil
	}
	i, ok := g.Index(target.JobID)
	if !ok {
		return nil, fmt.Errorf("dag: run %q has no job %q: %w", runID, target.JobID, cikit.ErrNotFound)
	}
	j := jobs[i]
	if j.Attempt != target.Attempt {
		return nil, &cikit.TransitionError{Job: target.JobID, Attempt: target.Attempt, From: j.State,
			Reason: fmt.Sprintf("stale attempt: the current attempt is %d", j.Attempt)}
	}
	if complete != nil && j.State == complete.Outcome {
		w.duplicate = true
		return w, nil
	}
	w.ev.Job = i
	if complete != nil && complete.Outcome == cikit.JobFailed && j.State == cikit.JobRunning &&
		RetryOnFailure(j.Spec, complete.FailureClass, j.Attempt) {
		w.ev.Kind, w.retrying = EventRetryJob, true
	}
	return w, nil
}

// apply computes the changes with Next and records them on jobs: states,
// attempts, times and reasons. It returns copies of the changed jobs, in
// the order of the changes.
func (w *write) apply(g *Graph, jobs []*Job, target *JobTransitionParams, now time.Time) ([]*Job, error) {
	states := make([]cikit.JobState, len(jobs))
	for i, j := range jobs {
		states[i] = j.State
	}
	changes, err := Next(g, states, w.ev)
	if err != nil {
		if te, ok := err.(*cikit.TransitionError); ok && target != nil {
			te.Attempt = target.Attempt
		}
		return nil, err
	}
	changed := make([]*Job, 0, len(changes))
	for k, c := range changes {
		j := jobs[c.Job]
		own := k == 0 && w.ev.Kind != EventCancel && w.ev.Kind != EventRetryFailed
		if c.From.Terminal() || own && w.retrying {
			j.newAttempt()
		}
		j.State = c.To
		states[c.Job] = c.To
		switch {
		case c.To == cikit.JobReady:
			j.ReadyAt = now
			if own && w.retrying {
				j.Reason = retryReason(j.Attempt-1, w.complete)
			}
		case c.To == cikit.JobQueued:
			j.QueuedAt = now
		case c.To == cikit.JobRunning:
			j.StartedAt = now
		case c.To == cikit.JobCancelRequested:
			j.Reason = w.cancelReason()
		case c.To.Terminal():
			j.FinishedAt = now
			switch {
			case w.ev.Kind == EventCancel || own && w.ev.Kind == EventCancelJob:
				j.Reason = w.cancelReason()
			case own && w.complete != nil:
				j.ExitCode, j.Reason = w.complete.ExitCode, w.complete.Reason
			default:
				j.Reason = ConsequenceReason(g, states, c.Job)
			}
		}
		changed = append(changed, j.clone())
	}
	return changed, nil
}

// cancelReason is the reason recorded on the jobs a cancel event cancels.
func (w *write) cancelReason() string {
	if w.reason == "" {
		return "run cancelled"
	}
	return w.reason
}
