package cikit

import "fmt"

// JobState is where a job is in its life. The zero value is not a state.
//
// A job starts PENDING (or READY when it needs nothing), becomes READY when
// every job it needs is satisfied, QUEUED when it is handed to the dispatch
// machinery, RUNNING when an executor has started it, and ends in exactly one
// terminal state: SUCCEEDED, FAILED, SKIPPED or CANCELLED.
//
// A job of When manual becomes MANUAL instead of READY, and stays there
// until a person starts it (or it is cancelled); one of When delayed
// becomes DELAYED and turns READY on its own once its StartIn has passed.
// A job with a Gate is MANUAL whatever its When, until a reviewer approves
// it (READY, or DELAYED for the gate's WaitTimer) or rejects it (FAILED).
// Neither is terminal nor active: nothing runs, nothing is offered.
type JobState string

const (
	JobPending JobState = "pending" // waiting for the jobs it needs
	JobReady   JobState = "ready"   // all needs satisfied; may be queued
	JobQueued  JobState = "queued"  // waiting for an executor or runner
	// JobManual: the needs are satisfied and the job waits for a person to
	// start it (When manual), or to approve or reject it (a Gate). It
	// never starts on its own.
	JobManual JobState = "manual"
	// JobDelayed: the needs are satisfied and the job waits for its
	// StartIn to pass (When delayed), then becomes READY.
	JobDelayed JobState = "delayed"
	JobRunning JobState = "running" // an executor is running its steps
	// JobCancelRequested: the run was cancelled while the job ran; its
	// executor has been told to stop and will report how it ended.
	JobCancelRequested JobState = "cancel_requested"
	JobSucceeded       JobState = "succeeded" // every step exited 0
	JobFailed          JobState = "failed"    // a step failed, timed out or could not start; or the policy or a reviewer kept it from running
	JobSkipped         JobState = "skipped"   // a job it needs failed (without allow_failure)
	JobCancelled       JobState = "cancelled" // the run was cancelled before the job finished
)

// JobStates lists every job state in lifecycle order.
var JobStates = []JobState{JobPending, JobManual, JobDelayed, JobReady, JobQueued, JobRunning, JobCancelRequested, JobSucceeded, JobFailed, JobSkipped, JobCancelled}

// Terminal reports whether s is a final state: no transition leaves it.
func (s JobState) Terminal() bool {
	switch s {
	case JobSucceeded, JobFailed, JobSkipped, JobCancelled:
		return true
	}
	return false
}

// Active reports whether a job in state s holds, or waits for, an executor.
// MANUAL and DELAYED jobs are not active: they wait for a person or a time.
func (s JobState) Active() bool { return s == JobQueued || s == JobRunning || s == JobCancelRequested }

// Valid reports whether s is one of the declared states.
func (s JobState) Valid() bool {
	for _, v := range JobStates {
		if s == v {
			return true
		}
	}
	return false
}

// RunState is the aggregate state of a pipeline run. It is a pure function
// of the states of the run's jobs (see dag.RunStatus).
type RunState string

const (
	RunPending RunState = "pending" // no job has been queued yet
	RunRunning RunState = "running" // some job is not terminal
	// RunBlocked: nothing runs or will run on its own, and a manual job
	// that blocks the run (one without allow_failure) waits for a person
	// to start it, or a gated one for its approval.
	RunBlocked   RunState = "blocked"
	RunSucceeded RunState = "succeeded" // every job terminal, no required failure
	RunFailed    RunState = "failed"    // a job without allow_failure failed
	RunCancelled RunState = "cancelled" // the run was cancelled
)

// Terminal reports whether s is a final run state: nothing of the run
// runs or will run on its own. A finished run may still hold manual jobs
// that allow failure, left MANUAL for a person to start later; starting
// one makes the run RUNNING again, as GitLab does.
func (s RunState) Terminal() bool {
	return s == RunSucceeded || s == RunFailed || s == RunCancelled
}

// UnmarshalText accepts only declared job states, so a corrupt row or a
// hostile payload cannot smuggle an unknown state into the scheduler.
func (s *JobState) UnmarshalText(b []byte) error {
	v := JobState(b)
	if !v.Valid() {
		return fmt.Errorf("unknown job state %q", b)
	}
	*s = v
	return nil
}
