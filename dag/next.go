package dag

import (
	"fmt"
	"slices"

	"github.com/cikit/cikit"
)

// EventKind names what happened to a run.
type EventKind int

const (
	// EventQueue hands a READY job to the dispatch machinery.
	EventQueue EventKind = iota + 1
	// EventStart records that an executor started a QUEUED job.
	EventStart
	// EventComplete records a RUNNING job's outcome (Event.Outcome).
	EventComplete
	// EventCancel cancels the run: every job that has not started ends
	// CANCELLED; RUNNING jobs become CANCEL_REQUESTED until their executor
	// reports, because only the executor can stop them.
	EventCancel
	// EventRetryJob gives a job that failed a new attempt: it is READY
	// again (an automatic retry). The job is RUNNING, or READY or QUEUED
	// when it expired waiting for a runner.
	EventRetryJob
	// EventRetryFailed starts a new attempt of a finished run's failed,
	// skipped and cancelled jobs; the jobs that succeeded are kept with
	// their results (seed 004's "retry failed only").
	EventRetryFailed
	// EventRepair settles PENDING jobs the rules would already have moved
	// (see Settle): what a redelivered completion does after a scheduler
	// died between the steps of handling the first delivery.
	EventRepair
	// EventExpire fails a job that is past a deadline: a RUNNING job that
	// outlived its timeout, a READY or QUEUED one that waited too long
	// for a runner, or a gated one that waited MANUAL too long for an
	// approval. The failure has the consequences of any other.
	EventExpire
	// EventCancelJob cancels one job (Event.Job), as EventCancel does the
	// run's: RUNNING becomes CANCEL_REQUESTED, a job that has not started
	// CANCELLED with the consequences of a cancellation. A job that ended
	// or is being cancelled is left as it is. A concurrency group's
	// cancel_in_progress uses it.
	EventCancelJob
	// EventPlay is a person starting a MANUAL job: it becomes READY and
	// runs like any other. For a gated job (Node.Gated) it is the
	// approval: READY, or DELAYED for the gate's WaitTimer (and a When
	// delayed job's StartIn) when the node says so
	// (Node.DelayedAfterApproval). Besides a cancellation, EventReject
	// and the expiry of a gate, it is the only way out of MANUAL.
	EventPlay
	// EventRelease makes READY a DELAYED job whose StartIn has passed;
	// the stores' JobsRelease applies it on their clock.
	EventRelease
	// EventReject is a reviewer rejecting a gated job waiting MANUAL
	// (cikit.JobSpec.Gate), or a person a When manual one: it becomes
	// FAILED with the event's reason, of class cikit.FailurePolicy, with
	// the consequences of any failure. It is never retried.
	EventReject
	// eventExpandFailed fails a placeholder (Node.Expand) whose
	// expansion failed: PENDING becomes FAILED, with the consequences of
	// any failure. Stores apply it in the write that tried to expand.
	eventExpandFailed
	// eventConditionFalse skips a job whose run-time condition
	// (cikit.JobSpec.If) is false: PENDING becomes SKIPPED, with the
	// consequences of any skip. Stores apply it in the write that decided
	// the condition.
	eventConditionFalse
)

func (k EventKind) String() string {
	switch k {
	case EventQueue:
		return "queue"
	case EventStart:
		return "start"
	case EventComplete:
		return "complete"
	case EventCancel:
		return "cancel"
	case EventRetryFailed:
		return "retry-failed"
	case EventRetryJob:
		return "retry-job"
	case EventRepair:
		return "repair"
	case EventExpire:
		return "expire"
	case EventCancelJob:
		return "cancel-job"
	case EventPlay:
		return "play"
	case EventRelease:
		return "release"
	case EventReject:
		return "reject"
	case eventExpandFailed:
		return "expand-failed"
	case eventConditionFalse:
		return "condition-false"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is one input to Next.
type Event struct {
	Kind EventKind
	// Job is the index of the job the event is about; unused by
	// EventCancel and EventRetryFailed.
	Job int
	// Outcome is the terminal state reported by EventComplete:
	// JobSucceeded, JobFailed or JobCancelled.
	Outcome cikit.JobState
	// seen, when set, is the state the job was in when the event was
	// decided on: the event applies only if the job is still in it.
	seen cikit.JobState
}

// Change is one job's state change, caused by an event directly or as its
// consequence.
type Change struct {
	Job  int
	From cikit.JobState
	To   cikit.JobState
}

// Initial returns the states of a new run of g: jobs that need nothing are
// READY (MANUAL or DELAYED for jobs of When manual and delayed and for
// gated jobs, see Arrival), all others PENDING, except that a job marked
// Never, and every job that needs one, is SKIPPED, and a job marked
// Denied is FAILED, with the consequences of a failure: the jobs that
// need it SKIPPED (READY when it allows failure), always and on_failure
// jobs decided.
func Initial(g *Graph) []cikit.JobState {
	states := make([]cikit.JobState, g.Len())
	for i := range states {
		switch n := &g.nodes[i]; {
		case n.Never:
			states[i] = cikit.JobSkipped
		case n.Denied:
			states[i] = cikit.JobFailed
		default:
			states[i] = cikit.JobPending
		}
	}
	state := func(i int) cikit.JobState { return states[i] }
	for _, i := range g.Order() {
		if states[i] == cikit.JobPending && (len(g.parents[i]) == 0 || slices.ContainsFunc(g.parents[i], func(p int) bool { return states[p].Terminal() })) {
			// A job none of whose needs has ended waits: only those
			// that need nothing, or a job that never runs or was
			// denied, are decided at creation.
			states[i] = settleOne(g, state, i)
		}
	}
	return states
}

// Arrival is the state job i enters when its needs are satisfied: READY,
// except MANUAL for a job of When manual, which waits for a person to
// start it (EventPlay), and DELAYED for one of When delayed, which waits
// for its StartIn (EventRelease). A gated job (Node.Gated) is MANUAL
// whatever its When: it waits for its approval first.
func Arrival(g *Graph, i int) cikit.JobState {
	n := &g.nodes[i]
	if n.Gated {
		return cikit.JobManual
	}
	switch n.When {
	case cikit.WhenManual:
		return cikit.JobManual
	case cikit.WhenDelayed:
		return cikit.JobDelayed
	}
	return cikit.JobReady
}

// Satisfied reports whether a job in state s with the given allow_failure
// lets the jobs that need it run. For a FAILED job, allowFailure is
// whether its failure was allowed (Job.FailureAllowed, see
// AllowedFailure), not only what its spec asks.
func Satisfied(s cikit.JobState, allowFailure bool) bool {
	return s == cikit.JobSucceeded || s == cikit.JobFailed && allowFailure
}

// Next applies ev to a run of g whose jobs are in states, and returns every
// resulting change in the order it happens: the event's own transition
// first, then its consequences. It does not modify states. A transition
// the rules forbid returns a *cikit.TransitionError and no changes.
//
// A FAILED job allows failure as its node says (Node.AllowFailure); the
// stores, which know how each attempt failed, decide a failure limited
// to exit codes by it (AllowedFailure) and give the rules their answer.
//
// The rules, from seed 004:
//   - When a job finishes, every PENDING job whose needs are now all
//     satisfied (SUCCEEDED, or FAILED with allow_failure) becomes READY.
//   - A job that FAILED without allow_failure, or was SKIPPED, makes every
//     PENDING job that needs it SKIPPED, transitively: its descendants can
//     never run.
//   - A CANCELLED job makes the PENDING jobs that need it CANCELLED.
//   - A job of When manual or delayed whose needs are satisfied becomes
//     MANUAL or DELAYED instead of READY (see Arrival); the jobs that need
//     it stay PENDING until it ends. EventPlay and EventRelease make it
//     READY; a cancellation ends it as any job that has not started.
//   - A gated job (Node.Gated) arrives MANUAL whatever its When.
//     EventPlay approves it: READY, or DELAYED when the node says so
//     (Node.DelayedAfterApproval). EventReject fails a MANUAL job, and
//     EventExpire a gated MANUAL one, with the consequences of a failure.
//   - A job marked Denied starts FAILED (see Initial) and is never
//     retried.
//   - Cancelling a finished run changes nothing, even when manual jobs
//     that allow failure still wait in it.
func Next(g *Graph, states []cikit.JobState, ev Event) ([]Change, error) {
	if len(states) != g.Len() {
		return nil, fmt.Errorf("dag: %d states for a graph of %d jobs", len(states), g.Len())
	}
	if ev.Kind == EventCancel {
		if RunStatus(g, states).Terminal() {
			return nil, nil
		}
		var changes []Change
		next := slices.Clone(states)
		for _, i := range g.Order() {
			switch s := states[i]; {
			case s == cikit.JobPending && g.Expanded(i):
				// An expanded placeholder ends as its variants do:
				// with them when none runs, else once those running
				// have reported.
				if to, decided := joinDecided(g, i, func(v int) cikit.JobState { return next[v] }); decided {
					changes = append(changes, Change{Job: i, From: s, To: to})
					next[i] = to
				}
			case s == cikit.JobRunning:
				changes = append(changes, Change{Job: i, From: s, To: cikit.JobCancelRequested})
				next[i] = cikit.JobCancelRequested
			case !s.Terminal() && s != cikit.JobCancelRequested:
				changes = append(changes, Change{Job: i, From: s, To: cikit.JobCancelled})
				next[i] = cikit.JobCancelled
			}
		}
		return changes, nil
	}
	if ev.Kind == EventRetryFailed {
		return retryFailed(g, states)
	}
	if ev.Kind == EventRepair {
		return Settle(g, states), nil
	}
	return nextJob(g, func(i int) cikit.JobState { return states[i] }, ev)
}

// nextJob is Next for an event about one job (ev.Job), on the states
// that state reports. It reads the states of the event's job, of jobs
// that descend from it and of the jobs those need, nothing else: a store
// that holds only those may decide the event.
func nextJob(g *Graph, state func(int) cikit.JobState, ev Event) ([]Change, error) {
	if ev.Job < 0 || ev.Job >= g.Len() {
		return nil, fmt.Errorf("dag: job index %d out of range [0,%d)", ev.Job, g.Len())
	}
	from := state(ev.Job)
	if ev.Kind == EventCancelJob {
		switch {
		case ev.seen != "" && from != ev.seen:
			return nil, &cikit.TransitionError{Job: g.Node(ev.Job).ID, From: from, To: cikit.JobCancelled,
				Reason: fmt.Sprintf("the job is no longer %s", ev.seen)}
		case from == cikit.JobRunning:
			return []Change{{Job: ev.Job, From: from, To: cikit.JobCancelRequested}}, nil
		case from.Terminal() || from == cikit.JobCancelRequested:
			return nil, nil
		}
		return propagate(g, state, ev.Job, cikit.JobCancelled, []Change{{Job: ev.Job, From: from, To: cikit.JobCancelled}}), nil
	}
	var to, want cikit.JobState
	switch ev.Kind {
	case EventQueue:
		want, to = cikit.JobReady, cikit.JobQueued
	case EventStart:
		want, to = cikit.JobQueued, cikit.JobRunning
	case EventPlay:
		want, to = cikit.JobManual, cikit.JobReady
		if g.Node(ev.Job).DelayedAfterApproval {
			to = cikit.JobDelayed
		}
	case EventReject:
		want, to = cikit.JobManual, cikit.JobFailed
	case EventRelease:
		want, to = cikit.JobDelayed, cikit.JobReady
	case eventExpandFailed:
		want, to = cikit.JobPending, cikit.JobFailed
	case eventConditionFalse:
		want, to = cikit.JobPending, cikit.JobSkipped
	case EventRetryJob, EventExpire:
		to = cikit.JobFailed
		if ev.Kind == EventRetryJob {
			to = cikit.JobReady
		}
		gateExpires := ev.Kind == EventExpire && from == cikit.JobManual && g.Node(ev.Job).Gated
		if from != cikit.JobRunning && !waiting(from) && !gateExpires {
			return nil, &cikit.TransitionError{Job: g.Node(ev.Job).ID, From: from, To: to,
				Reason: fmt.Sprintf("%s needs the job to be ready, queued or running", ev.Kind)}
		}
		want = from
	case EventComplete:
		want, to = cikit.JobRunning, ev.Outcome
		switch ev.Outcome {
		case cikit.JobSucceeded, cikit.JobFailed, cikit.JobCancelled:
		default:
			return nil, &cikit.TransitionError{Job: g.Node(ev.Job).ID, From: from, To: to,
				Reason: "a completion must report succeeded, failed or cancelled"}
		}
	default:
		return nil, fmt.Errorf("dag: unknown event kind %v", ev.Kind)
	}
	if ev.Kind == EventComplete && from == cikit.JobCancelRequested {
		want = from // an executor told to stop reports how the job ended
	}
	if ev.seen != "" && from != ev.seen {
		return nil, &cikit.TransitionError{Job: g.Node(ev.Job).ID, From: from, To: to,
			Reason: fmt.Sprintf("the job is no longer %s", ev.seen)}
	}
	if from != want {
		return nil, &cikit.TransitionError{Job: g.Node(ev.Job).ID, From: from, To: to,
			Reason: fmt.Sprintf("%s needs the job to be %s", ev.Kind, want)}
	}
	changes := []Change{{Job: ev.Job, From: from, To: to}}
	if to.Terminal() {
		changes = propagate(g, state, ev.Job, to, changes)
	}
	return changes, nil
}

// propagate appends the consequences of job j ending in state s. It works
// on a private overlay of states so a job reached twice changes once.
func propagate(g *Graph, base func(int) cikit.JobState, j int, s cikit.JobState, changes []Change) []Change {
	overlay := map[int]cikit.JobState{j: s}
	state := func(i int) cikit.JobState {
		if s, ok := overlay[i]; ok {
			return s
		}
		return base(i)
	}
	set := func(i int, to cikit.JobState) {
		changes = append(changes, Change{Job: i, From: state(i), To: to})
		overlay[i] = to
	}
	queue := []int{j}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		ps := state(p)
		for _, c := range g.Children(p) {
			if state(c) != cikit.JobPending {
				continue
			}
			if g.Expanded(c) {
				// An expanded placeholder ends once its variants have.
				if to, decided := joinDecided(g, c, state); decided {
					set(c, to)
					queue = append(queue, c)
				}
				continue
			}
			if w := g.Node(c).When; w == cikit.WhenAlways || w == cikit.WhenOnFailure {
				// Such a job waits for all its needs to end, whatever
				// their outcome, then runs (always), or runs if one of
				// them did not succeed (on_failure).
				if to, decided := whenDecided(g, c, state); decided {
					set(c, to)
					if to == cikit.JobSkipped {
						queue = append(queue, c)
					}
				}
				continue
			}
			switch {
			case Satisfied(ps, g.allowsFailure(p)):
				if allSatisfied(g, c, state) {
					set(c, Arrival(g, c))
				}
			case ps == cikit.JobCancelled:
				set(c, cikit.JobCancelled)
				queue = append(queue, c)
			default: // FAILED without allow_failure, or SKIPPED
				set(c, cikit.JobSkipped)
				queue = append(queue, c)
			}
		}
	}
	return changes
}

// Settle returns the changes that bring every PENDING job of a run to the
// state the rules give it, in graph order: READY (or its Arrival) when its
// needs are satisfied, SKIPPED or CANCELLED below a need that blocks it, and for
// always and on_failure jobs whatever their ended needs decide. A run
// whose events were all applied in full needs none; a store whose
// scheduler stopped after committing a completion but before making its
// children READY (a fast path in several steps) is repaired by it.
func Settle(g *Graph, states []cikit.JobState) []Change {
	return settle(g, func(i int) cikit.JobState { return states[i] }, g.Order())
}

// settleBelow is Settle for what job i's end left undone: the jobs that
// need i, then, below each of those that ends (SKIPPED or CANCELLED), the
// jobs that need it, and so on; a job that does not end holds back the
// jobs below it. It reads the states of those jobs and of the jobs they
// need.
func settleBelow(g *Graph, base func(int) cikit.JobState, i int) []Change {
	next := make(map[int]cikit.JobState)
	state := func(i int) cikit.JobState {
		if s, ok := next[i]; ok {
			return s
		}
		return base(i)
	}
	// todo holds the jobs to settle, sorted by topological rank, so a
	// job is settled after every job it needs that is settled too.
	var todo []int
	add := func(p int) {
		for _, c := range g.Children(p) {
			pos, found := slices.BinarySearchFunc(todo, c, func(a, b int) int { return g.rank[a] - g.rank[b] })
			if !found {
				todo = slices.Insert(todo, pos, c)
			}
		}
	}
	add(i)
	var changes []Change
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		ch := settle(g, state, []int{c})
		if len(ch) == 0 {
			continue
		}
		changes = append(changes, ch...)
		next[c] = ch[0].To
		if ch[0].To.Terminal() {
			add(c)
		}
	}
	return changes
}

// settle is Settle for the jobs of order, a topological order of some of
// g's jobs, on the states state reports.
func settle(g *Graph, base func(int) cikit.JobState, order []int) []Change {
	next := make(map[int]cikit.JobState)
	state := func(i int) cikit.JobState {
		if s, ok := next[i]; ok {
			return s
		}
		return base(i)
	}
	var changes []Change
	for _, i := range order {
		if state(i) != cikit.JobPending {
			continue
		}
		if to := settleOne(g, state, i); to != cikit.JobPending {
			changes = append(changes, Change{Job: i, From: cikit.JobPending, To: to})
			next[i] = to
		}
	}
	return changes
}

// settleOne is the state the rules give PENDING job i on the states
// state reports of the jobs it needs (or its variants): PENDING when
// nothing is decided yet.
func settleOne(g *Graph, state func(int) cikit.JobState, i int) cikit.JobState {
	to := cikit.JobPending
	if g.Expanded(i) {
		if s, decided := joinDecided(g, i, state); decided {
			to = s
		}
	} else if w := g.nodes[i].When; w == cikit.WhenAlways || w == cikit.WhenOnFailure {
		if s, decided := whenDecided(g, i, state); decided {
			to = s
		}
	} else {
		for _, p := range g.Parents(i) {
			switch s := state(p); {
			case to != cikit.JobPending:
			case s == cikit.JobCancelled:
				to = cikit.JobCancelled
			case s.Terminal() && !Satisfied(s, g.allowsFailure(p)):
				to = cikit.JobSkipped
			}
		}
		if to == cikit.JobPending && allSatisfied(g, i, state) {
			to = Arrival(g, i)
		}
	}
	return to
}

// whenDecided settles a job of When always or on_failure once all its
// needs are terminal: READY (MANUAL for a gated one) for always, and for
// on_failure when a need was not satisfied; SKIPPED otherwise.
func whenDecided(g *Graph, i int, state func(int) cikit.JobState) (cikit.JobState, bool) {
	unsatisfied := false
	for _, p := range g.Parents(i) {
		s := state(p)
		if !s.Terminal() {
			return "", false
		}
		unsatisfied = unsatisfied || !Satisfied(s, g.allowsFailure(p))
	}
	if g.Node(i).When == cikit.WhenAlways || unsatisfied {
		return Arrival(g, i), true
	}
	return cikit.JobSkipped, true
}

// joinDecided decides an expanded placeholder once all its variants have
// ended: SUCCEEDED when they are all satisfied (see Satisfied), else
// CANCELLED when one was cancelled, else FAILED.
func joinDecided(g *Graph, i int, state func(int) cikit.JobState) (cikit.JobState, bool) {
	satisfied, cancelled := true, false
	for _, v := range g.variants[i] {
		s := state(v)
		if !s.Terminal() {
			return "", false
		}
		satisfied = satisfied && Satisfied(s, g.allowsFailure(v))
		cancelled = cancelled || s == cikit.JobCancelled
	}
	switch {
	case satisfied:
		return cikit.JobSucceeded, true
	case cancelled:
		return cikit.JobCancelled, true
	}
	return cikit.JobFailed, true
}

func allSatisfied(g *Graph, i int, state func(int) cikit.JobState) bool {
	for _, p := range g.Parents(i) {
		if !Satisfied(state(p), g.allowsFailure(p)) {
			return false
		}
	}
	return true
}

// Apply writes changes into states.
func Apply(states []cikit.JobState, changes []Change) {
	for _, c := range changes {
		states[c.Job] = c.To
	}
}

// RunStatus aggregates job states into the run's state:
//   - some job not terminal that runs or will run on its own (not MANUAL,
//     nor PENDING below a MANUAL job): RUNNING once any job was queued or
//     finished, PENDING before;
//   - otherwise CANCELLED if any job was cancelled, else FAILED if a job
//     without allow_failure failed, else BLOCKED while a manual job
//     without allow_failure waits for a person, else SUCCEEDED. A job
//     skipped because a required job failed needs no rule of its own:
//     that job fails the run; one skipped because it never runs fails
//     nothing.
//
// A manual job that allows failure (a manual job without rules does, in
// GitLab) never holds the run: the run ends without it, the job staying
// MANUAL and the jobs that need it PENDING, for a person to start it
// later, which makes the run RUNNING again.
func RunStatus(g *Graph, states []cikit.JobState) cikit.RunState {
	var sum runSummary
	// person[i] says that job i waits for a person, itself or through a
	// job it needs: personWaits for a manual job that allows failure,
	// personHolds for one that blocks the run.
	const (
		personWaits = 1
		personHolds = 2
	)
	person := make([]uint8, len(states))
	for _, i := range g.Order() {
		s := states[i]
		switch s {
		case cikit.JobManual:
			person[i] = personWaits
			if !g.allowsFailure(i) {
				person[i] = personHolds
			}
		case cikit.JobPending:
			for _, p := range g.Parents(i) {
				person[i] = max(person[i], person[p])
			}
			sum.open = sum.open || person[i] == 0
		}
		sum.add(s, g.allowsFailure(i))
	}
	return sum.state()
}

// runSummary is what a run's state is made of: which kinds of job states
// its jobs are in.
type runSummary struct {
	open      bool // a job runs or will run without a person
	started   bool // a job was queued or has ended, other than SKIPPED
	cancelled bool
	failed    bool // a job without allow_failure failed
	held      bool // a manual job without allow_failure waits for a person
}

// add counts a job in state s with allow_failure allowFailure, except
// for the openness of a PENDING job, which depends on the jobs it needs
// (see RunStatus).
func (sum *runSummary) add(s cikit.JobState, allowFailure bool) {
	switch s {
	case cikit.JobManual:
		sum.held = sum.held || !allowFailure
	case cikit.JobReady, cikit.JobDelayed:
		sum.open = true
	case cikit.JobQueued, cikit.JobRunning, cikit.JobCancelRequested:
		sum.open, sum.started = true, true
	case cikit.JobCancelled:
		sum.cancelled, sum.started = true, true
	case cikit.JobFailed:
		sum.started = true
		sum.failed = sum.failed || !allowFailure
	case cikit.JobPending, cikit.JobSkipped:
		// A job skipped at creation ran nothing.
	default:
		sum.started = true
	}
}

// state is the run state of sum, by RunStatus's rules.
func (sum runSummary) state() cikit.RunState {
	switch {
	case sum.open && sum.started:
		return cikit.RunRunning
	case sum.open:
		return cikit.RunPending
	case sum.cancelled:
		return cikit.RunCancelled
	case sum.failed:
		return cikit.RunFailed
	case sum.held:
		return cikit.RunBlocked
	}
	return cikit.RunSucceeded
}

// ConsequenceReason explains why job i was skipped or cancelled as a
// consequence of another job, naming the first job it needs that blocks
// it. It returns "" when no needed job blocks i.
func ConsequenceReason(g *Graph, states []cikit.JobState, i int) string {
	return consequenceReason(g, func(p int) cikit.JobState { return states[p] }, i)
}

// consequenceReason is ConsequenceReason on the states state reports, of
// the jobs i needs.
func consequenceReason(g *Graph, state func(int) cikit.JobState, i int) string {
	if g.Node(i).Never {
		return "its condition is false"
	}
	if g.Node(i).When == cikit.WhenOnFailure {
		return "it runs on failure, and nothing it needs failed"
	}
	for _, p := range g.Parents(i) {
		switch s := state(p); {
		case s == cikit.JobFailed && !g.allowsFailure(p):
			return fmt.Sprintf("needs %s, which failed", g.Node(p).ID)
		case s == cikit.JobSkipped || s == cikit.JobCancelled:
			return fmt.Sprintf("needs %s, which was %s", g.Node(p).ID, s)
		}
	}
	return ""
}

// ErrRunNotFinished is returned for a retry of a run that has not ended.
var ErrRunNotFinished = fmt.Errorf("%w: the run has not finished", cikit.ErrInvalidTransition)

// retryFailed resets the failed, skipped and cancelled jobs of a finished
// run, and every job that needs one of them, to PENDING, then settles them
// as a new run would be: READY when their needs are satisfied, and so on.
// Jobs that never run stay SKIPPED, and those the policy denied FAILED;
// jobs that succeeded with nothing retried above them are kept.
// A change whose From is terminal starts a new attempt of that job.
func retryFailed(g *Graph, states []cikit.JobState) ([]Change, error) {
	if !RunStatus(g, states).Terminal() {
		return nil, ErrRunNotFinished
	}
	next := slices.Clone(states)
	retried := make([]bool, len(states))
	for _, i := range g.Order() {
		s := states[i]
		// A manual job still waiting for a person, and what waits for
		// it, are not retried: they have not run.
		retry := s.Terminal() && s != cikit.JobSucceeded && !(s == cikit.JobFailed && g.allowsFailure(i))
		for _, p := range g.Parents(i) {
			// What ran after a retried job (always and on_failure jobs,
			// and what needs them) runs again after its new attempt.
			retry = retry || retried[p]
		}
		if retry && !g.Node(i).Never && !g.Node(i).Denied {
			next[i], retried[i] = cikit.JobPending, true
		}
	}
	state := func(i int) cikit.JobState { return next[i] }
	for _, i := range g.Order() {
		if !retried[i] {
			continue
		}
		if g.Expanded(i) {
			// It waits again for its variants, the failed ones of
			// which are retried above it.
			if to, decided := joinDecided(g, i, state); decided {
				next[i] = to
			}
			continue
		}
		if w := g.Node(i).When; w == cikit.WhenAlways || w == cikit.WhenOnFailure {
			if to, decided := whenDecided(g, i, state); decided {
				next[i] = to
			}
			continue
		}
		blocked := false
		for _, p := range g.Parents(i) {
			blocked = blocked || next[p].Terminal() && !Satisfied(next[p], g.allowsFailure(p))
		}
		switch {
		case blocked:
			next[i] = cikit.JobSkipped
		case allSatisfied(g, i, state):
			next[i] = Arrival(g, i)
		}
	}
	var changes []Change
	for _, i := range g.Order() {
		if retried[i] && (states[i].Terminal() || next[i] != states[i]) {
			changes = append(changes, Change{Job: i, From: states[i], To: next[i]})
		}
	}
	return changes, nil
}
