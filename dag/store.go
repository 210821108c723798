package dag

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
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
// Unknown runs and jobs return errors matching cikit.ErrNotFound. Input a
// store cannot hold, such as a string with a NUL byte or invalid UTF-8 for
// PostgreSQL's text, returns an error matching ErrInvalidParams (or
// cikit.ErrNotFound, from a store that can hold it), never a failure to
// retry.
// Implementations are safe for concurrent use. Results are copies: callers
// may keep and modify them.
//
// A run grows when a placeholder of a run-time matrix (cikit.JobSpec.Expand)
// is expanded: the write that satisfies its needs adds its variants at the
// end of the run's plan, and the placeholder stays PENDING until they have
// all ended, then ends as they did (see the package documentation, "Run-time
// matrices"). JobList, JobGet and the other reads show the variants as jobs
// of the run; the placeholder is never READY, QUEUED or RUNNING.
type Store interface {
	// RunCreate stores a new run of the given jobs. Jobs that need nothing
	// are READY at once (or what Arrival says), the others PENDING; a job
	// the policy denied (cikit.Admission with DecisionDeny) is FAILED,
	// with the consequences of a failure (see Initial). The jobs must
	// form a valid graph (see FromSpecs), and their gates and admissions
	// stay within cikit.MaxGateReasons, MaxGateReviewers and
	// MaxGateTextBytes (else ErrInvalidParams). With an IdempotencyKey
	// already used, it returns the existing run and changes nothing. In
	// the same write, the new run supersedes the unfinished runs of its
	// pipeline and branch when its Supersede policy says so, and cancels
	// their gated jobs waiting MANUAL whatever it says (see
	// SupersedePolicy).
	RunCreate(ctx context.Context, params *RunCreateParams) (*Run, error)
	// RunGet returns a run.
	RunGet(ctx context.Context, runID string) (*Run, error)
	// RunList returns runs newest first (CreatedAt descending, then ID
	// descending), at most p.Limit of them, after the cursor p.Before when
	// it is set, and only those of p.Pipeline and p.Branch when they are
	// set. The next page starts after the last run returned: pass its
	// Cursor as Before. A list shorter than the limit is the last page.
	// Invalid params (see RunListParams.Validate) are an error matching
	// ErrInvalidParams.
	RunList(ctx context.Context, p *RunListParams) ([]*Run, error)
	// RunCancel cancels every job of the run that has not started
	// (EventCancel). RUNNING jobs are left to their executors, which
	// report them with JobComplete. Cancelling a finished run changes
	// nothing and is not an error.
	RunCancel(ctx context.Context, runID string) (*TransitionResult, error)
	// RunRetryFailed starts a new attempt of every job of a finished run
	// that failed (without allow_failure), was skipped or cancelled, and
	// of every job that needs one of them (an always or on_failure job
	// that ran after the failure runs again); the other jobs keep their
	// results. Retried jobs' attempts grow by
	// one, so completions of their old attempts are refused. A run that
	// has not finished returns ErrRunNotFinished; one without failures
	// changes nothing.
	RunRetryFailed(ctx context.Context, runID string) (*TransitionResult, error)
	// JobList returns the jobs of a run in plan order.
	JobList(ctx context.Context, runID string) ([]*Job, error)
	// JobGet returns one job of a run as JobList would, reading only that
	// job: it is how a lease manager checks, on every heartbeat, that the
	// attempt it fences is still the job's current one.
	JobGet(ctx context.Context, runID, jobID string) (*Job, error)
	// JobGetMany returns the jobs keys name, in their order, each as
	// JobGet would, in one read: how a lease manager checks a batch of
	// claims. The job of an unknown run or job is nil; the error is for
	// the store failing.
	JobGetMany(ctx context.Context, keys []JobKey) ([]*Job, error)
	// JobListWaiting returns the jobs waiting for a runner, READY or
	// QUEUED, of every run (of those created since p.CreatedSince when
	// it is set): runs by ID (bytewise), each run's jobs in plan order,
	// at most p.Limit of them, after the job p.After when it is set. The
	// next page starts after the last job returned; a page shorter than
	// the limit is the last. It reads only waiting jobs, whatever the
	// size of their runs: how a dispatcher that starts, or sweeps for
	// offers it missed, learns what waits. A job that moves while the
	// pages are read may be listed in its old state or missed. Invalid
	// params (see WaitingListParams.Validate) are an error matching
	// ErrInvalidParams.
	JobListWaiting(ctx context.Context, p *WaitingListParams) ([]*Job, error)
	// JobQueue moves a READY job to QUEUED. A job of a concurrency group
	// is queued only when its turn has come: no job of its group is
	// active and none has waited longer; otherwise JobQueue returns a
	// *GroupBusyError (ErrGroupBusy) and the job stays READY. A job with
	// cancel_in_progress first cancels the jobs of its group ahead of it.
	// See GroupKey.
	JobQueue(ctx context.Context, params *JobTransitionParams) (*TransitionResult, error)
	// JobStart moves a QUEUED job to RUNNING.
	JobStart(ctx context.Context, params *JobTransitionParams) (*TransitionResult, error)
	// JobComplete moves a RUNNING job to its outcome and applies the
	// consequences. A failure the retry policy covers (RetryOnFailure)
	// instead makes the job READY again as its next attempt. Repeating a
	// completion that was already applied (same attempt, same outcome) is
	// a no-op that returns no changes, so redelivered completion events
	// are harmless; one of an attempt that was since retried is stale.
	JobComplete(ctx context.Context, params *JobCompleteParams) (*TransitionResult, error)
	// JobApply applies a batch of job events, each exactly as JobQueue,
	// JobStart or JobComplete would, and answers each in its result: a
	// refused event's *cikit.TransitionError or ErrNotFound is its own
	// result's Err and leaves the others alone. The returned error is for
	// the store failing, and then any part of the batch may have been
	// applied: events are idempotent, so the caller delivers the batch
	// again. Events about one job apply in batch order; events about
	// different jobs may apply in any order, as if they had come from
	// different schedulers at once. It is how a scheduler worker commits
	// the events of a whole poll or consumer batch at once; a PostgreSQL
	// store writes a batch in few transactions.
	JobApply(ctx context.Context, events []*JobEvent) ([]*JobEventResult, error)
	// JobAttempts returns every ended attempt of a job, oldest first: how
	// it ended, when, on which runner. The current attempt is in JobList
	// until it ends.
	JobAttempts(ctx context.Context, runID, jobID string) ([]*Job, error)
	// JobsExpire fails the jobs of every run that are past a deadline at
	// params.Now (EventExpire): RUNNING jobs that started longer ago than
	// their spec's Timeout, or params.DefaultTimeout when it has none,
	// and READY or QUEUED jobs that became ready longer ago than
	// params.MaxQueueTime. Each failure is its own transition, applied
	// as a JobComplete failure of class cikit.FailureTimeout with exit
	// code -1 (so the job's retry policy applies) and conditional on the
	// attempt and state the job was found in: a job that moved on
	// meanwhile is left alone. It also fails the gated jobs waiting
	// MANUAL longer than their gate's Expires, or params.GateTimeout when
	// it sets none, counted from their ReadyAt: class
	// cikit.FailurePolicy, never retried, the reason starting with
	// ReasonApprovalExpired. It returns the results of the transitions
	// that changed something, runs in ID order and each run's jobs in
	// plan order. Only invalid params and store failures are errors;
	// with a store failure come the results of the transitions applied
	// before it.
	JobsExpire(ctx context.Context, params *ExpireParams) ([]*TransitionResult, error)
	// JobsRelease makes READY the DELAYED jobs of every run whose time
	// has come at now (EventRelease): those whose ReadyAt, the moment
	// their needs were satisfied plus their spec's StartIn (or their
	// approval plus their gate's WaitTimer and StartIn), is not after
	// now. Each release is its own transition, conditional on the
	// attempt and state the job was found in, as JobsExpire's; it
	// returns the results of those that changed something, runs in ID
	// order and each run's jobs in plan order, for a dispatcher to offer
	// the jobs. It is driven by whoever drives JobsExpire (lease.Reaper,
	// Driver); only a zero now and store failures are errors.
	JobsRelease(ctx context.Context, now time.Time) ([]*TransitionResult, error)
	// GroupNext returns the job whose turn it is in a concurrency group:
	// the READY job of the group that has waited longest, when no job of
	// the group is active. It returns nil when the group is busy or no
	// job waits. A scheduler calls it for the groups a write freed
	// (TransitionResult.Freed) and queues the job it returns.
	GroupNext(ctx context.Context, key GroupKey) (*Job, error)

	// OutboxPending returns up to limit events not yet marked published,
	// oldest first. Every write above records its events in the same
	// transaction as its changes: "pipeline.created" for a new run, one
	// event per job state change ("job.ready", "job.queued",
	// "job.started", "job.completed" with the terminal state), and
	// "pipeline.completed" when the run becomes terminal.
	OutboxPending(ctx context.Context, limit int) ([]*OutboxEvent, error)
	// OutboxMarkPublished marks events published; unknown or already
	// published IDs are ignored.
	OutboxMarkPublished(ctx context.Context, ids []string) error
	// OutboxPublish is how a relay publishes the outbox. It claims up to
	// limit events not yet marked published that no concurrent
	// OutboxPublish holds, oldest first, calls publish with them (not
	// at all when there are none) and marks them published if publish
	// returns nil. It returns how many events it published. When
	// publish fails, OutboxPublish returns its error unchanged and the
	// events stay pending, to be handed out again; so do the events of
	// a caller that dies before OutboxPublish returns. limit must be
	// positive.
	//
	// A claim lasts until publish returns, so any number of relays may
	// call OutboxPublish at once: each gets other events. Events stay
	// in OutboxPending while claimed. Publication is at least once: an
	// event the broker acknowledged whose mark was lost (the relay
	// crashed, the store failed) is published again, so consumers
	// deduplicate by OutboxEvent.ID. One caller publishes events in
	// order; concurrent callers may publish events of different claims
	// out of order.
	OutboxPublish(ctx context.Context, limit int, publish func(ctx context.Context, evs []*OutboxEvent) error) (int, error)
}

// OutboxEvent is one event a store write recorded, for a relay to publish.
// Consumers deduplicate by ID: a relay may publish an event twice.
type OutboxEvent struct {
	ID    string // unique, ordered by creation (UUIDv7)
	Type  string
	RunID string
	// Pipeline is the run's (RunCreateParams.Pipeline), "" if it has none.
	Pipeline string
	// SHA is the commit the run builds (RunCreateParams.SHA), "" if it
	// was not given.
	SHA       string
	JobID     string // "" for pipeline events
	Attempt   int    // 0 for pipeline events
	State     string // the job's or the run's new state
	Reason    string
	CreatedAt time.Time
}

// Event types.
const (
	EventPipelineCreated   = "pipeline.created"
	EventPipelineCompleted = "pipeline.completed"
	EventJobPending        = "job.pending" // a retried job waiting for its needs
	EventJobManual         = "job.manual"  // waiting for a person to start (or approve) it; a gate's Reason says what for
	EventJobDelayed        = "job.delayed" // waiting for its start_in to pass
	EventJobReady          = "job.ready"
	EventJobQueued         = "job.queued"
	EventJobStarted        = "job.started"
	EventJobCancelRequest  = "job.cancel_requested" // its runner must stop it
	EventJobCompleted      = "job.completed"
)

// jobEventType is the type of the event of a job entering state s.
func jobEventType(s cikit.JobState) string {
	switch s {
	case cikit.JobPending:
		return EventJobPending
	case cikit.JobManual:
		return EventJobManual
	case cikit.JobDelayed:
		return EventJobDelayed
	case cikit.JobReady:
		return EventJobReady
	case cikit.JobQueued:
		return EventJobQueued
	case cikit.JobRunning:
		return EventJobStarted
	case cikit.JobCancelRequested:
		return EventJobCancelRequest
	}
	return EventJobCompleted
}

// events lists the outbox events of a write: the job changes, then the
// run's completion when it became terminal now. The jobs are run's.
func events(newID func() string, now time.Time, run *Run, wasTerminal bool, changed []*Job) []*OutboxEvent {
	out := make([]*OutboxEvent, 0, len(changed)+1)
	for _, j := range changed {
		out = append(out, &OutboxEvent{ID: newID(), Type: jobEventType(j.State), RunID: j.RunID, Pipeline: run.Pipeline, SHA: run.SHA, JobID: j.ID(),
			Attempt: j.Attempt, State: string(j.State), Reason: j.Reason, CreatedAt: now})
	}
	if run.State.Terminal() && !wasTerminal {
		out = append(out, &OutboxEvent{ID: newID(), Type: EventPipelineCompleted, RunID: run.ID, Pipeline: run.Pipeline, SHA: run.SHA,
			State: string(run.State), CreatedAt: now})
	}
	return out
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
	// Pipeline identifies the pipeline the run executes: a repository
	// and a file of it, such as "acme/api:.cikit.yml". Runs without one
	// never supersede and are never superseded.
	Pipeline string
	// SHA is the commit the run builds, for the statuses posted on it.
	SHA string
	// Branch is the branch the run builds. It scopes superseding, which
	// a run without one is never part of, and the run's concurrency
	// groups (see GroupKey).
	Branch string
	// DefaultBranch says that Branch is the repository's default branch,
	// which the default Supersede policy leaves alone.
	DefaultBranch bool
	// Supersede says whether the new run cancels the unfinished runs of
	// the same Pipeline and Branch. The zero value supersedes on every
	// branch but the default branch. Whatever it says, the new run
	// cancels those runs' gated jobs waiting MANUAL (see
	// SupersedePolicy).
	Supersede SupersedePolicy
	// Context, when set, is recorded with the run for its jobs to read
	// (see Run.Context). Its Payload must be JSON.
	Context *cikit.RunContext
}

// JobKey names one job of a run.
type JobKey struct {
	RunID string
	JobID string
}

// JobTransitionParams name the job and attempt a transition applies to.
type JobTransitionParams struct {
	RunID   string
	JobID   string
	Attempt int
	// Runner names who runs the job; JobStart records it.
	Runner string
}

// JobEvent is one event about a job, for Store.JobApply: the arguments of
// JobQueue (Kind EventQueue), JobStart (EventStart) or JobComplete
// (EventComplete) as one value, a person starting or approving a MANUAL
// job (EventPlay), which makes it READY (or DELAYED, for a gate with a
// wait timer), or a person rejecting one (EventReject), which fails it
// with Reason ("rejected by alice: not today"), of class
// cikit.FailurePolicy, exit code -1, never retried. The store's clock
// times them all.
type JobEvent struct {
	Kind    EventKind
	RunID   string
	JobID   string
	Attempt int
	// Runner names who runs the job (EventStart).
	Runner string
	// Outcome, ExitCode, Reason and FailureClass are a completion's
	// (EventComplete); see JobCompleteParams.
	Outcome      cikit.JobState
	ExitCode     int
	Reason       string
	FailureClass cikit.FailureClass
	// Result is what the executor reported beyond the outcome
	// (EventComplete); see JobCompleteParams.
	Result *JobResult
	// seen, when set, is the state the job was in when the event was
	// decided on (EventExpire): it applies only if the job still is.
	seen cikit.JobState
}

func (p *JobTransitionParams) event(kind EventKind) *JobEvent {
	return &JobEvent{Kind: kind, RunID: p.RunID, JobID: p.JobID, Attempt: p.Attempt, Runner: p.Runner}
}

func (p *JobCompleteParams) event() *JobEvent {
	return &JobEvent{Kind: EventComplete, RunID: p.RunID, JobID: p.JobID, Attempt: p.Attempt,
		Outcome: p.Outcome, ExitCode: p.ExitCode, Reason: p.Reason, FailureClass: p.FailureClass, Result: p.Result}
}

// validate refuses an event no store could apply.
func (e *JobEvent) validate() error {
	switch e.Kind {
	case EventQueue, EventStart, EventComplete, EventPlay, EventReject:
		return nil
	}
	return fmt.Errorf("dag: job event of kind %v: want queue, start, complete, play or reject", e.Kind)
}

// JobEventResult answers one event of Store.JobApply: its TransitionResult,
// or the error that refused it.
type JobEventResult struct {
	*TransitionResult
	Err error
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
	// FailureClass says why a failure happened; with the job's retry
	// policy it decides whether the failure is final or the job gets a
	// new attempt (see RetryOnFailure).
	FailureClass cikit.FailureClass
	// Result, when set, is what the executor reported beyond the
	// outcome: the job's outputs, annotations, the commit it checked
	// out. It is recorded with the attempt it ends (Job.Result, and in
	// JobAttempts). A failure the retry policy covers records it on the
	// ended attempt only: the new attempt starts without one. A
	// redelivered completion changes nothing, its result included.
	// Stores do not bound it: the caller that accepts it from a runner
	// does (see JobResult).
	Result *JobResult
}

// JobResult is what an executor reported about a job's attempt beyond how
// it ended: what the dependent jobs read (outputs), what people read
// (annotations, the commit, the image it ran in, the names of the
// environment variables the steps saw) and how long the checkout took.
// It is stored as given; whoever accepts it from a runner bounds it
// (cikit.MaxOutputsBytes, cikit.MaxAnnotations).
type JobResult struct {
	// Outputs are the job's outputs (JobSpec.Outputs, evaluated at the
	// job's end), which the jobs that need it read.
	Outputs map[string]string `json:"outputs,omitempty"`
	// Annotations are the messages its steps attached to the run.
	Annotations []cikit.Annotation `json:"annotations,omitempty"`
	// Commit is the SHA the runner checked out, "" when it checked out
	// nothing.
	Commit string `json:"commit,omitempty"`
	// CheckoutDuration is how long the checkout took.
	CheckoutDuration time.Duration `json:"checkout_duration_ns,omitempty"`
	// EnvNames are the names, never the values, of the environment
	// variables the job's steps were given, sorted.
	EnvNames []string `json:"env_names,omitempty"`
	// Caches are how the job's caches were restored and saved.
	Caches []cikit.CacheReport `json:"caches,omitempty"`
	// ImageRef is the image the job ran in as it was asked for, such as
	// "alpine:3.19", and ImageDigest the digest ("sha256:…") that
	// reference resolved to: what the job ran on, to run it again on the
	// same. Both are "" for a job that ran on its runner's host.
	ImageRef    string `json:"image,omitempty"`
	ImageDigest string `json:"image_digest,omitempty"`
}

// Clone returns a deep copy of r; nil for nil.
func (r *JobResult) Clone() *JobResult {
	if r == nil {
		return nil
	}
	c := *r
	c.Outputs = maps.Clone(r.Outputs)
	c.Annotations = slices.Clone(r.Annotations)
	c.EnvNames = slices.Clone(r.EnvNames)
	c.Caches = slices.Clone(r.Caches)
	return &c
}

// DefaultInfrastructureRetries is how often a job whose runner or
// platform failed is retried when its own policy says nothing: such
// failures are not the code's, so they are retried on their own.
const DefaultInfrastructureRetries = 2

// RetryOnFailure decides whether attempt of job spec, failed with class
// and exitCode, gets a new attempt: by the job's retry policy (see
// cikit.Retry.Retries), or for an infrastructure failure without one, up
// to DefaultInfrastructureRetries. A failure of class cikit.FailurePolicy
// (denied, rejected, not approved in time) is never retried.
func RetryOnFailure(spec *cikit.JobSpec, class cikit.FailureClass, exitCode, attempt int) bool {
	if class == cikit.FailurePolicy {
		return false // a person or the policy decided: trying again changes nothing
	}
	if spec.Retry != nil {
		return spec.Retry.Retries(class, exitCode, attempt)
	}
	return class == cikit.FailureInfrastructure && attempt <= DefaultInfrastructureRetries
}

// AllowedFailure reports whether a failure of a job of spec, of class
// and with exitCode, is allowed: it lets the jobs that need the job run
// and stays out of the run's status. It is when the spec allows failure
// and, if it limits that to exit codes (AllowFailureExitCodes), a step
// exited with one of them: a timeout or a lost runner is not allowed
// then, whatever code the step had, as in GitLab. Every store decides a
// failure with it when the failure is reported, and records the answer
// in Job.FailureAllowed.
func AllowedFailure(spec *cikit.JobSpec, class cikit.FailureClass, exitCode int) bool {
	if !spec.AllowFailure {
		return false
	}
	return len(spec.AllowFailureExitCodes) == 0 ||
		class == cikit.FailureScript && slices.Contains(spec.AllowFailureExitCodes, exitCode)
}

// TransitionResult is what a transition changed.
type TransitionResult struct {
	// Changed lists every job whose state changed, in the order of the
	// changes (see Next). JobQueue of a job with cancel_in_progress lists
	// the job first, then the jobs it cancelled, which may belong to
	// other runs, and their consequences.
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
	// Pipeline, Branch and SHA are those the run was created with.
	Pipeline string
	Branch   string
	SHA      string
	// Number is the run's number among the runs of its Pipeline: 1 for
	// the first created, then 2, 3 … in creation order (GitHub's
	// run_number, GitLab's CI_PIPELINE_IID). Numbers are unique within a
	// pipeline and grow with creation; a store need not leave no gap.
	// An idempotent RunCreate returns the run with its number.
	Number int64
	// Context is what the run knows of the event that started it, as
	// RunCreateParams.Context gave it; nil when it was not given. Only
	// RunGet reads it (it may hold a payload of up to
	// cikit.MaxPayloadBytes): in the runs of RunCreate, RunList and
	// TransitionResult it is nil.
	Context *cikit.RunContext
}

// Job is one job of a run and its current state.
type Job struct {
	RunID   string
	Spec    *cikit.JobSpec
	State   cikit.JobState
	Attempt int // starts at 1
	// ExitCode is set by JobComplete; meaningful only after the job ran.
	ExitCode int
	// FailureAllowed says whether the attempt, once FAILED, lets the jobs
	// that need it run and stays out of the run's status: the spec's
	// AllowFailure until the attempt fails, then AllowedFailure of how it
	// failed. A new attempt starts again from the spec's.
	FailureAllowed bool
	// Runner is who runs or ran the attempt, as JobStart named it.
	Runner string
	// Reason explains a terminal state that is not success: a failure
	// message, the job whose failure skipped this one, a cancellation;
	// for CANCEL_REQUESTED, why the job is being cancelled; and for a
	// gated job waiting MANUAL, what it waits for (GateWaiting).
	Reason string
	// ReadyAt is when the job became READY; for a DELAYED job, when it
	// will: the moment its needs were satisfied plus its StartIn (for an
	// approved gated job, the approval plus its gate's WaitTimer and its
	// StartIn); for a MANUAL job, when it began to wait for a person,
	// the time a gate's expiry counts from. It is zero for a job that
	// left MANUAL without running.
	ReadyAt    time.Time
	QueuedAt   time.Time
	StartedAt  time.Time
	FinishedAt time.Time
	// Result is what the executor reported with the completion that
	// ended the attempt (JobCompleteParams.Result); nil before, and for
	// an attempt that ended without one. JobGet, JobGetMany, JobList and
	// JobAttempts read it; the jobs of a TransitionResult hold it only
	// for the completion the write applied.
	Result *JobResult
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

// newAttempt starts the next attempt of a finished job: what the last one
// recorded is cleared.
func (j *Job) newAttempt() {
	j.Attempt++
	j.ExitCode, j.Reason, j.Runner, j.Result = 0, "", "", nil
	j.FailureAllowed = j.Spec.AllowFailure
	j.ReadyAt, j.QueuedAt, j.StartedAt, j.FinishedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
}

// retryReason records why a job is on a new attempt.
func retryReason(failed int, c *JobEvent) string {
	return fmt.Sprintf("attempt %d failed (%s): %s; retrying", failed, c.FailureClass, c.Reason)
}

// encodeContext is the stored form of a run's context: JSON, nil for none.
// A payload that is not JSON is invalid params.
func encodeContext(rc *cikit.RunContext) ([]byte, error) {
	if rc == nil {
		return nil, nil
	}
	b, err := json.Marshal(rc)
	if err != nil {
		return nil, fmt.Errorf("dag: run context: %w: %v", ErrInvalidParams, err)
	}
	return b, nil
}

// decodeContext reads what encodeContext wrote.
func decodeContext(b []byte) (*cikit.RunContext, error) {
	if b == nil {
		return nil, nil
	}
	rc := &cikit.RunContext{}
	if err := json.Unmarshal(b, rc); err != nil {
		return nil, fmt.Errorf("dag: stored run context: %w", err)
	}
	return rc, nil
}
