package dag

import (
	"context"
	"time"

	"github.com/cikit/cikit"
)

// Store is the durable state of pipeline runs: the runs, their jobs and
// every job's state. It is the scheduler's source of truth; schedulers are
// stateless processors of the events they feed into it.
//
// Every transition method is a conditional write: it applies only when the
// job is in the state the transition starts from and the caller names the
// job's current attempt. Otherwise it changes nothing and returns a
// *cikit.TransitionError (errors.Is(err, cikit.ErrInvalidTransition)). A
// transition applies the rules of Next atomically: the job's own change and
// every consequence (jobs becoming READY, SKIPPED or CANCELLED) commit
// together, and the run's state is recomputed with RunStatus in the same
// write.
//
// Unknown runs and jobs return errors matching cikit.ErrNotFound.
// Implementations are safe for concurrent use. Results are copies: callers
// may keep and modify them.
type Store interface {
	// RunCreate stores a new run of the given jobs. Jobs that need nothing
	// are READY at once, the others PENDING. The jobs must form a valid
	// graph (see FromSpecs). With an IdempotencyKey already used, it
	// returns the existing run and changes nothing.
	RunCreate(ctx context.Context, params *RunCreateParams) (*Run, error)
	// RunGet returns a run.
	RunGet(ctx context.Context, runID string) (*Run, error)
	// RunCancel cancels every job of the run that has not started
	// (EventCancel). RUNNING jobs are left to their executors, which
	// report them with JobComplete. Cancelling a finished run changes
	// nothing and is not an error.
	RunCancel(ctx context.Context, runID string) (*TransitionResult, error)
	// JobList returns the jobs of a run in plan order.
	JobList(ctx context.Context, runID string) ([]*Job, error)
	// JobQueue moves a READY job to QUEUED.
	JobQueue(ctx context.Context, params *JobTransitionParams) (*TransitionResult, error)
	// JobStart moves a QUEUED job to RUNNING.
	JobStart(ctx context.Context, params *JobTransitionParams) (*TransitionResult, error)
	// JobComplete moves a RUNNING job to its outcome and applies the
	// consequences. Repeating a completion that was already applied (same
	// attempt, same outcome) is a no-op that returns no changes, so
	// redelivered completion events are harmless.
	JobComplete(ctx context.Context, params *JobCompleteParams) (*TransitionResult, error)
}

// RunCreateParams are the arguments of Store.RunCreate.
type RunCreateParams struct {
	// Jobs are the compiled jobs of the run, in plan order.
	Jobs []*cikit.JobSpec
	// IdempotencyKey, when set, makes the creation idempotent: a second
	// RunCreate with the same key returns the run the first one created
	// and writes nothing, however much later it comes (a webhook
	// redelivered, a manual trigger retried).
	IdempotencyKey string
}

// JobTransitionParams name the job and attempt a transition applies to.
type JobTransitionParams struct {
	RunID   string
	JobID   string
	Attempt int
}

// JobCompleteParams are the arguments of Store.JobComplete.
type JobCompleteParams struct {
	RunID   string
	JobID   string
	Attempt int
	// Outcome is JobSucceeded, JobFailed or JobCancelled.
	Outcome cikit.JobState
	// ExitCode is the exit code of the last step run, or -1 if none ran
	// to an exit.
	ExitCode int
	// Reason explains a failure or cancellation to people.
	Reason string
}

// TransitionResult is what a transition changed.
type TransitionResult struct {
	// Changed lists every job whose state changed, in the order of the
	// changes (see Next).
	Changed []*Job
	// Run is the run after the transition.
	Run *Run
}

// Run is one execution of a pipeline.
type Run struct {
	ID         string
	State      cikit.RunState
	CreatedAt  time.Time
	FinishedAt time.Time // zero until the run is terminal
	// IdempotencyKey is the key the run was created with, if any.
	IdempotencyKey string
}

// Job is one job of a run and its current state.
type Job struct {
	RunID   string
	Spec    *cikit.JobSpec
	State   cikit.JobState
	Attempt int // starts at 1
	// ExitCode is set by JobComplete; meaningful only after the job ran.
	ExitCode int
	// Reason explains a terminal state that is not success: a failure
	// message, the job whose failure skipped this one, a cancellation.
	Reason     string
	ReadyAt    time.Time
	QueuedAt   time.Time
	StartedAt  time.Time
	FinishedAt time.Time
}

// ID returns the job's ID within its run.
func (j *Job) ID() string { return j.Spec.ID }

// Duration is how long the job ran: from start to finish, or zero if it
// never started or has not finished.
func (j *Job) Duration() time.Duration {
	if j.StartedAt.IsZero() || j.FinishedAt.IsZero() {
		return 0
	}
	return j.FinishedAt.Sub(j.StartedAt)
}
