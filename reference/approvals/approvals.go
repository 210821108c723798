package approvals

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Decision is what a person decided on a gated job.
type Decision string

// The decisions.
const (
	// Approve lets the job run (dag.EventPlay).
	Approve Decision = "approve"
	// Reject fails it (dag.EventReject).
	Reject Decision = "reject"
)

// MaxCommentBytes bounds an approval's comment.
const MaxCommentBytes = 512

// maxIDBytes bounds the run, job and login of a record: longer ones
// name nothing the platform made.
const maxIDBytes = 256

// ErrInvalid is wrapped by the error of Record for a record that fails
// Validate.
var ErrInvalid = errors.New("approvals: invalid approval")

// Approval is one decision on one attempt of a gated job.
type Approval struct {
	RunID   string `json:"run_id"`
	JobID   string `json:"job_id"`
	Attempt int    `json:"attempt"`
	// Login is who decided (auth.Principal.Login).
	Login    string   `json:"login"`
	Decision Decision `json:"decision"`
	// Comment is what they wrote with it; at most MaxCommentBytes.
	Comment string `json:"comment,omitempty"`
	// Time is when they decided. Stores keep it in UTC to the
	// microsecond (PostgreSQL's precision).
	Time time.Time `json:"time"`
}

// Validate reports what is wrong with a, wrapping ErrInvalid: every
// field but Comment is required; texts are UTF-8 without NUL bytes.
func (a *Approval) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
	}
	for _, f := range []struct{ name, v string }{{"run ID", a.RunID}, {"job ID", a.JobID}, {"login", a.Login}} {
		switch {
		case f.v == "":
			return bad("the %s is empty", f.name)
		case len(f.v) > maxIDBytes:
			return bad("the %s has %d bytes, more than %d", f.name, len(f.v), maxIDBytes)
		case !text(f.v):
			return bad("the %s is not UTF-8 without NUL bytes", f.name)
		}
	}
	switch {
	case a.Attempt < 1:
		return bad("attempt %d: attempts count from 1", a.Attempt)
	case a.Decision != Approve && a.Decision != Reject:
		return bad("decision %q: want %q or %q", a.Decision, Approve, Reject)
	case len(a.Comment) > MaxCommentBytes:
		return bad("the comment has %d bytes, more than %d", len(a.Comment), MaxCommentBytes)
	case !text(a.Comment):
		return bad("the comment is not UTF-8 without NUL bytes")
	case a.Time.IsZero():
		return bad("the time is not set")
	}
	return nil
}

func text(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// normalized is a as stores keep it.
func (a Approval) normalized() Approval {
	a.Time = a.Time.UTC().Truncate(time.Microsecond)
	return a
}

// Store keeps the records of decisions on gated jobs.
//
// Record stores a, which must pass Validate (else an error wrapping
// ErrInvalid); a second record of the same run, job and attempt fails
// with an error wrapping cikit.ErrConflict and leaves the first. List
// returns the records of a run, oldest first (then by job and attempt),
// an empty slice for a run without any (unknown runs included). Both
// are safe for concurrent use.
type Store interface {
	Record(ctx context.Context, a Approval) error
	List(ctx context.Context, runID string) ([]Approval, error)
}
