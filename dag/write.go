package dag

import (
	"cmp"
	"fmt"
	"time"

	"github.com/cikit/cikit"
)

// write is one store write worked out on a run's current jobs, the same
// way for every store: which event applies (a covered failure becomes an
// automatic retry, a redelivered completion a repair), what changes, and
// how the changed jobs' records read afterwards. Stores only load the jobs
// before and persist after.
type write struct {
	ev       Event
	job      *JobEvent // the job event, nil for run events
	retrying bool      // a failure retried on its own: the event's job gets a new attempt
	// repairs is set for a redelivered completion, which settles the
	// jobs below its job (ev.Job).
	repairs bool
	// reason is why a cancel event cancels; "run cancelled" when empty.
	reason string
	// allowed is whether the failure the job event reports, if it
	// reports one, is allowed (AllowedFailure): the rules read it for the
	// event's job, the job's record keeps it.
	allowed bool
	// settles, when set, are jobs just added to the run (a placeholder's
	// variants, PENDING) that the write settles by the rules (see
	// settle), in topological order.
	settles []int
}

// newWrite resolves a run event ev, or the job event je when it is not
// nil, against the jobs of the run, in graph order.
func newWrite(g *Graph, jobs []*Job, runID string, je *JobEvent, ev Event) (*write, error) {
	w := &write{ev: ev, job: je}
	if je == nil {
		return w, nil
	}
	w.ev = Event{Kind: je.Kind, Outcome: je.Outcome, seen: je.seen}
	i, ok := g.Index(je.JobID)
	if !ok {
		return nil, fmt.Errorf("dag: run %q has no job %q: %w", runID, je.JobID, cikit.ErrNotFound)
	}
	j := jobs[i]
	if j == nil {
		return nil, &unreadError{jobs: []int{i}}
	}
	if j.Attempt != je.Attempt {
		return nil, &cikit.TransitionError{Job: je.JobID, Attempt: je.Attempt, From: j.State,
			Reason: fmt.Sprintf("stale attempt: the current attempt is %d", j.Attempt)}
	}
	if je.Kind == EventComplete && j.State == je.Outcome {
		// Redelivered: applied before. Whatever the first delivery
		// left undone below the job (a scheduler stopped between its
		// steps) is done now; usually nothing is.
		w.ev, w.repairs = Event{Kind: EventRepair, Job: i}, true
		return w, nil
	}
	w.ev.Job = i
	w.allowed = j.FailureAllowed
	switch {
	case je.Kind == EventReject || je.FailureClass == cikit.FailurePolicy:
		// Nothing ran, so no exit code limits what the spec allows.
		w.allowed = j.Spec.AllowFailure
	case je.Outcome == cikit.JobFailed:
		w.allowed = AllowedFailure(j.Spec, je.FailureClass, je.ExitCode)
	}
	failing := j.State == cikit.JobRunning || je.Kind == EventExpire && waiting(j.State)
	if (je.Kind == EventComplete || je.Kind == EventExpire) && je.Outcome == cikit.JobFailed && failing &&
		RetryOnFailure(j.Spec, je.FailureClass, je.ExitCode, j.Attempt) {
		w.ev.Kind, w.retrying = EventRetryJob, true
	}
	return w, nil
}

// initialJob is job i of a new run of g, whose jobs start in states (see
// Initial), as it is created at now.
func initialJob(g *Graph, spec *cikit.JobSpec, states []cikit.JobState, i int, now time.Time) Job {
	j := Job{Spec: spec, State: states[i], Attempt: 1, FailureAllowed: spec.AllowFailure}
	switch j.State {
	case cikit.JobReady:
		j.ReadyAt = now
	case cikit.JobDelayed:
		j.ReadyAt = now.Add(spec.StartIn)
	case cikit.JobManual:
		j.ReadyAt, j.Reason = now, GateWaiting(spec.Gate)
	case cikit.JobFailed: // denied by the policy (Node.Denied)
		j.FinishedAt, j.ExitCode, j.Reason = now, -1, deniedReason(spec)
	case cikit.JobSkipped:
		j.FinishedAt, j.Reason = now, ConsequenceReason(g, states, i)
	}
	return j
}

// applied is what a write changed: the jobs as they are now, in the order
// of the changes, and the attempts it ended, as they ended.
type applied struct {
	changed []*Job
	from    []cikit.JobState // from[k] is the state changed[k] left
	ended   []*Job
}

// unreadError reports that a write needed jobs its store did not read:
// a store that reads part of a run reads them and writes again.
type unreadError struct{ jobs []int }

func (e *unreadError) Error() string {
	return fmt.Sprintf("dag: the write needs %d jobs that were not read", len(e.jobs))
}

// view gives the rules the states of a run's jobs, of which a store may
// have read only some (nil in jobs): it records the jobs asked for that
// were not read.
type view struct {
	jobs   []*Job
	unread []int
}

func (v *view) state(i int) cikit.JobState {
	if j := v.jobs[i]; j != nil {
		return j.State
	}
	v.unread = append(v.unread, i)
	return cikit.JobPending
}

// rules is g deciding failures as the run's jobs recorded them, and the
// failure the job event reports as the write decided it (allowed).
func (w *write) rules(g *Graph, jobs []*Job) *Graph {
	own := -1
	if w.job != nil && !w.repairs {
		own = w.ev.Job
	}
	return g.withAllowed(func(i int) bool {
		switch j := jobs[i]; {
		case i == own:
			return w.allowed
		case j != nil:
			return j.FailureAllowed
		}
		return g.Node(i).AllowFailure
	})
}

// changes are the changes of the write, or an *unreadError naming the
// jobs it needs that jobs does not hold (nil there). A run event needs
// every job; a job event its job, the jobs below it and the jobs those
// need (see nextJob).
func (w *write) changes(g *Graph, jobs []*Job) ([]Change, error) {
	g = w.rules(g, jobs)
	v := &view{jobs: jobs}
	var changes []Change
	var err error
	switch {
	case w.settles != nil:
		changes = settle(g, v.state, w.settles)
	case w.repairs:
		changes = settleBelow(g, v.state, w.ev.Job)
	case w.job != nil:
		changes, err = nextJob(g, v.state, w.ev)
	default:
		states := make([]cikit.JobState, len(jobs))
		for i := range jobs {
			states[i] = v.state(i)
		}
		if len(v.unread) == 0 {
			changes, err = Next(g, states, w.ev)
		}
	}
	for k, c := range changes {
		// The reason apply records for a job a consequence ended reads
		// the jobs it needs up to the one that blocks it, which the
		// rules need not have read (a job skipped below an on_failure
		// job that was skipped): they must have been read all the same.
		own := k == 0 && w.job != nil && w.ev.Kind != EventRepair
		if c.To.Terminal() && !own && w.ev.Kind != EventCancel {
			consequenceReason(g, v.state, c.Job)
		}
	}
	if len(v.unread) > 0 {
		return nil, &unreadError{jobs: v.unread}
	}
	return changes, err
}

// apply computes the changes with Next and records them on jobs: states,
// attempts, times, runners and reasons. Jobs that the write does not need
// may be nil (see changes).
func (w *write) apply(g *Graph, jobs []*Job, now time.Time) (*applied, error) {
	changes, err := w.changes(g, jobs)
	if err != nil {
		if te, ok := err.(*cikit.TransitionError); ok && w.job != nil {
			te.Attempt = w.job.Attempt
		}
		return nil, err
	}
	g = w.rules(g, jobs)
	v := &view{jobs: jobs}
	out := &applied{changed: make([]*Job, 0, len(changes))}
	for k, c := range changes {
		j := jobs[c.Job]
		own := k == 0 && w.job != nil && w.ev.Kind != EventRepair
		if own && w.retrying {
			last := j.clone()
			last.State, last.FinishedAt, last.ExitCode, last.Reason = cikit.JobFailed, now, w.job.ExitCode, w.job.Reason
			last.FailureAllowed = w.allowed
			last.Result = w.job.Result.Clone()
			out.ended = append(out.ended, last)
		}
		if c.From.Terminal() || own && w.retrying {
			j.newAttempt()
		}
		j.State = c.To
		if c.From == cikit.JobManual {
			// What it waited for is over: the gate's sentence and the
			// time it began to wait go.
			j.Reason, j.ReadyAt = "", time.Time{}
		}
		switch {
		case c.To == cikit.JobManual:
			j.ReadyAt, j.Reason = now, GateWaiting(j.Spec.Gate)
		case c.To == cikit.JobReady:
			j.ReadyAt = now
			if own && w.retrying {
				j.Reason = retryReason(j.Attempt-1, w.job)
			}
		case c.To == cikit.JobDelayed:
			j.ReadyAt = now.Add(approvalDelay(j.Spec))
		case c.To == cikit.JobQueued:
			j.QueuedAt = now
		case c.To == cikit.JobRunning:
			j.StartedAt, j.Runner = now, w.job.Runner
		case c.To == cikit.JobCancelRequested:
			j.Reason = w.cancelReason()
		case c.To.Terminal():
			j.FinishedAt = now
			switch {
			case w.ev.Kind == EventCancel || own && w.ev.Kind == EventCancelJob:
				j.Reason = w.cancelReason()
			case own && w.ev.Kind == EventReject:
				// No step ran.
				j.ExitCode, j.Reason, j.FailureAllowed = -1, cmp.Or(w.job.Reason, "rejected"), w.allowed
			case own:
				j.ExitCode, j.Reason, j.Result = w.job.ExitCode, w.job.Reason, w.job.Result.Clone()
				j.FailureAllowed = w.allowed
			default:
				j.Reason = consequenceReason(g, v.state, c.Job)
				if g.Expanded(c.Job) {
					j.Result = variantsResult(g, v, c.Job)
				}
			}
		}
		out.changed, out.from = append(out.changed, j.clone()), append(out.from, c.From)
		if c.To.Terminal() {
			out.ended = append(out.ended, j.clone())
		}
	}
	if len(v.unread) > 0 {
		// The reasons read what the changes did not: a rule that
		// changed without changes changing too.
		return nil, fmt.Errorf("dag: recording the changes needed %d jobs that were not read", len(v.unread))
	}
	return out, nil
}

// cancelReason is the reason recorded on the jobs a cancel event cancels.
func (w *write) cancelReason() string {
	if w.reason == "" {
		return "run cancelled"
	}
	return w.reason
}

// refusedAlone is the refusal the rules answer job event je with when the
// job it is about, j, suffices to tell: an event of another attempt, or a
// queue, start or completion the job's state does not allow. The error is
// the one newWrite and Next give for the same event on the whole run. It
// returns nil when the answer depends on more than the job: the event
// applies, or a completion is redelivered (a repair). A store that finds
// an event refused this way need not read the rest of the run.
func refusedAlone(j *Job, je *JobEvent) error {
	if j.Attempt != je.Attempt {
		return &cikit.TransitionError{Job: je.JobID, Attempt: je.Attempt, From: j.State,
			Reason: fmt.Sprintf("stale attempt: the current attempt is %d", j.Attempt)}
	}
	if je.seen != "" {
		return nil
	}
	var want, to cikit.JobState
	switch je.Kind {
	case EventQueue:
		want, to = cikit.JobReady, cikit.JobQueued
	case EventStart:
		want, to = cikit.JobQueued, cikit.JobRunning
	case EventComplete:
		switch {
		case j.State == je.Outcome, j.State == cikit.JobCancelRequested:
			return nil // a repair, or how a job told to stop ended
		case je.Outcome != cikit.JobSucceeded && je.Outcome != cikit.JobFailed && je.Outcome != cikit.JobCancelled:
			return nil
		}
		want, to = cikit.JobRunning, je.Outcome
	default:
		return nil
	}
	if j.State == want {
		return nil
	}
	return &cikit.TransitionError{Job: je.JobID, Attempt: je.Attempt, From: j.State, To: to,
		Reason: fmt.Sprintf("%s needs the job to be %s", je.Kind, want)}
}
