package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

// Attempt identifies one attempt of a job of a run. The attempt number is
// the first half of the fencing token: a lease, heartbeat or completion of
// an attempt that is no longer the job's current one is refused.
type Attempt struct {
	RunID   string
	JobID   string
	Attempt int // starts at 1, as dag.Job.Attempt
}

func (a Attempt) String() string {
	return fmt.Sprintf("job %q attempt %d of run %q", a.JobID, a.Attempt, a.RunID)
}

func (a Attempt) validate() error {
	switch {
	case a.RunID == "":
		return errors.New("lease: the attempt has no RunID")
	case a.JobID == "":
		return errors.New("lease: the attempt has no JobID")
	case a.Attempt < 1:
		return fmt.Errorf("lease: attempt numbers start at 1, got %d", a.Attempt)
	}
	return nil
}

// Lease is the right of one runner to run one attempt of a job until
// Expires. Token, with the attempt number, fences the runner's calls: it
// is secret to the runner and the platform, and every heartbeat, log
// chunk, artifact and completion carries it.
type Lease struct {
	Attempt
	Token   string
	Runner  string
	Expires time.Time
}

// Errors. Both match cikit.ErrConflict with errors.Is, so an HTTP layer
// that maps conflicts to 409 needs nothing more.
var (
	// ErrFenced: the call named an attempt and token that do not hold the
	// job's current lease: the attempt was reaped, completed, returned or
	// superseded, or the token is not the holder's. The runner must stop
	// working on the attempt. Manager methods return a *FencedError.
	ErrFenced = fmt.Errorf("lease fenced: %w", cikit.ErrConflict)
	// ErrNotClaimed: the attempt cannot be claimed: the job is not QUEUED
	// at that attempt, or the attempt (or a later one) is already leased.
	ErrNotClaimed = fmt.Errorf("lease not claimed: %w", cikit.ErrConflict)
)

// FencedError reports a refused call of a runner whose lease is not the
// job's current one. It matches ErrFenced and cikit.ErrConflict.
type FencedError struct {
	Attempt Attempt
	Reason  string // why, for people: "the job is succeeded at attempt 1"
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("lease of %s is fenced: %s", e.Attempt, e.Reason)
}

// Is makes errors.Is(err, ErrFenced) and errors.Is(err, cikit.ErrConflict)
// true.
func (e *FencedError) Is(target error) bool {
	return target == ErrFenced || target == cikit.ErrConflict
}

// Store holds the authoritative lease records: at most one per job, of the
// job's latest leased attempt. Redis, when a Manager has it, is a hint in
// front of a Store; the Store decides.
//
// Every write is conditional, so any number of managers and reapers may
// share a Store. Times are stored to the microsecond (PostgreSQL's
// precision); callers that compare them pass truncated times.
// Implementations are safe for concurrent use and return copies.
// leasetest.Exercise is the conformance suite every implementation
// passes.
type Store interface {
	// LeaseInsert records a new lease. It returns an error matching
	// ErrNotClaimed, and changes nothing, if the job already has a lease
	// of this attempt or a later one; a lease of an earlier attempt is a
	// leftover of an attempt that ended, and is replaced.
	LeaseInsert(ctx context.Context, l *Lease) error
	// LeaseRenew moves the expiry of the lease of attempt a held by
	// token. It returns an error matching ErrFenced if the job's lease is
	// not of that attempt and token (or there is none).
	LeaseRenew(ctx context.Context, a Attempt, token string, expires time.Time) error
	// LeaseGet returns the lease of a job, or an error matching
	// cikit.ErrNotFound when it has none.
	LeaseGet(ctx context.Context, runID, jobID string) (*Lease, error)
	// LeaseDelete deletes the lease of attempt a if token holds it. A
	// lease of another attempt or token, or none, is left alone, and is
	// not an error: deleting is idempotent.
	LeaseDelete(ctx context.Context, a Attempt, token string) error
	// LeaseInsertMany inserts each lease as LeaseInsert would, in order,
	// and answers each with LeaseInsert's error in the same place of the
	// returned slice: a refused lease leaves the others alone. The
	// returned error is for the store failing; then any of the leases
	// may have been inserted. Of several leases of one job, each is
	// decided after the ones before it.
	LeaseInsertMany(ctx context.Context, ls []*Lease) ([]error, error)
	// LeaseGetMany returns the leases of the jobs keys name, in their
	// order, as LeaseGet would, in one read; a job without a lease is
	// nil.
	LeaseGetMany(ctx context.Context, keys []dag.JobKey) ([]*Lease, error)
	// LeaseDeleteMany deletes each lease of ls as LeaseDelete would:
	// the job's lease only if it is of that attempt and token (Runner
	// and Expires are ignored).
	LeaseDeleteMany(ctx context.Context, ls []*Lease) error
	// LeaseExpired returns up to limit leases whose Expires is not after
	// now, the oldest expiry first. limit must be positive.
	LeaseExpired(ctx context.Context, now time.Time, limit int) ([]*Lease, error)
}
