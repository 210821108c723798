package cikit

import (
	"errors"
	"fmt"
)

// Sentinel errors. Implementations wrap them with context; callers test
// with errors.Is.
var (
	// ErrNotFound: the run, job or other entity does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the write lost to a concurrent or earlier one, or
	// repeats an earlier write with different content.
	ErrConflict = errors.New("conflict")
	// ErrInvalidTransition: the requested state change is not allowed
	// from the job's current state or attempt. Nothing was changed.
	ErrInvalidTransition = errors.New("invalid state transition")
)

// TransitionError reports a refused state change of one job. It matches
// ErrInvalidTransition with errors.Is.
type TransitionError struct {
	Job     string   // job ID
	Attempt int      // the attempt the caller named
	From    JobState // the job's current state
	To      JobState // the state the caller asked for
	Reason  string   // why it was refused, for people
}

func (e *TransitionError) Error() string {
	msg := fmt.Sprintf("job %q attempt %d: cannot go from %s to %s", e.Job, e.Attempt, e.From, e.To)
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg
}

// Is makes errors.Is(err, ErrInvalidTransition) true.
func (e *TransitionError) Is(target error) bool { return target == ErrInvalidTransition }
