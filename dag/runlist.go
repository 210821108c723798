package dag

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits of RunListParams.Limit.
const (
	// DefaultRunListLimit is how many runs RunList returns when
	// RunListParams.Limit is zero.
	DefaultRunListLimit = 50
	// MaxRunListLimit is the largest RunListParams.Limit.
	MaxRunListLimit = 500
)

// ErrInvalidParams is matched by the errors of a Store call whose params
// are not valid, such as a RunList limit out of range: the caller's
// mistake, not the store's failure.
var ErrInvalidParams = errors.New("invalid params")

// RunListParams are the arguments of Store.RunList. The zero value lists
// the DefaultRunListLimit newest runs.
type RunListParams struct {
	// Limit is the most runs returned, from 1 to MaxRunListLimit; zero
	// means DefaultRunListLimit.
	Limit int
	// Before, when set, lists the runs that come after it in the list's
	// order: those created earlier, and those created at the same
	// instant with a smaller ID. A page's last run's Cursor gives the
	// next page.
	Before *RunCursor
	// Pipeline, when set, lists only the runs of this pipeline
	// (RunCreateParams.Pipeline, compared exactly).
	Pipeline string
	// Branch, when set, lists only the runs of this branch
	// (RunCreateParams.Branch, compared exactly).
	Branch string
}

// RunCursor is a position in the list of runs: the run with this
// creation time and ID, which need not exist any more.
type RunCursor struct {
	CreatedAt time.Time
	ID        string
}

// Cursor returns the run's position in the list of runs, for
// RunListParams.Before.
func (r *Run) Cursor() *RunCursor { return &RunCursor{CreatedAt: r.CreatedAt, ID: r.ID} }

// Validate returns an error matching ErrInvalidParams when p cannot be
// listed: a limit out of range, a cursor without a time, or a string that
// is not UTF-8 without NUL bytes (which no run has).
func (p *RunListParams) Validate() error {
	if p.Limit < 0 || p.Limit > MaxRunListLimit {
		return fmt.Errorf("dag: RunListParams.Limit must be from 1 to %d (0 for %d), got %d: %w", MaxRunListLimit, DefaultRunListLimit, p.Limit, ErrInvalidParams)
	}
	if p.Before != nil && p.Before.CreatedAt.IsZero() {
		return fmt.Errorf("dag: RunListParams.Before has no CreatedAt: %w", ErrInvalidParams)
	}
	if p.Before != nil && !validText(p.Before.ID) || !validText(p.Pipeline) || !validText(p.Branch) {
		return fmt.Errorf("dag: RunListParams: the cursor's ID, Pipeline and Branch must be UTF-8 without NUL bytes: %w", ErrInvalidParams)
	}
	return nil
}

// validText reports whether s can be stored as PostgreSQL text.
func validText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// limit is the number of runs p asks for.
func (p *RunListParams) limit() int { return cmp.Or(p.Limit, DefaultRunListLimit) }

// match reports whether r passes p's filters.
func (p *RunListParams) match(r *Run) bool {
	return (p.Pipeline == "" || r.Pipeline == p.Pipeline) && (p.Branch == "" || r.Branch == p.Branch)
}

// compareRuns orders runs as the list does, oldest first: by creation
// time (the wall clock's, whether or not a time has a monotonic reading),
// then by ID (bytewise).
func compareRuns(aAt time.Time, aID string, bAt time.Time, bID string) int {
	if c := aAt.Round(0).Compare(bAt.Round(0)); c != 0 {
		return c
	}
	return strings.Compare(aID, bID)
}
