package secrets

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cikit/cikit"
)

// OwnedLease is a lease and the owner it was granted to.
type OwnedLease struct {
	// Owner is the job attempt holding the lease: "RUN/JOB/ATTEMPT".
	Owner string
	Lease Lease
}

// LeaseStore records the leases of dynamic secrets granted to owners, so
// that a Keeper renews them while their owner runs and revokes them when
// it ends — also from another process, after this one died. An owner is
// a job attempt, written "RUN/JOB/ATTEMPT".
//
// A lease is identified by its provider and its ID (Lease.Provider,
// Lease.ID) and belongs to one owner. SetExpires and Remove name a lease
// by its owner and ID: they act on the owner's leases of that ID, of
// whichever provider (providers' IDs do not collide in practice).
//
// A lease stays recorded until Remove: the Keeper removes it only once
// its provider revoked it, so that a revocation that failed is retried.
//
// Expiry times are kept to the microsecond and returned in UTC.
// Implementations are safe for concurrent use; MemoryLeaseStore and
// PostgresLeaseStore implement it, and secretstest.RunLeaseStoreTests
// says what every implementation does.
type LeaseStore interface {
	// Add records leases as owner's. Adding a lease owner already holds
	// replaces its expiry; a lease recorded for another owner is a
	// conflict (cikit.ErrConflict), and then none of leases is added. An
	// empty owner, or a lease without ID, provider or expiry, is
	// ErrInvalid.
	Add(ctx context.Context, owner string, leases []Lease) error
	// Owned returns owner's leases, by provider and ID; none is an
	// empty result, not an error.
	Owned(ctx context.Context, owner string) ([]Lease, error)
	// Due returns at most limit leases, of any owner, expiring before
	// before, the soonest first. limit must be positive.
	Due(ctx context.Context, before time.Time, limit int) ([]OwnedLease, error)
	// SetExpires changes the expiry of owner's lease id. ErrNotFound:
	// owner holds no lease id.
	SetExpires(ctx context.Context, owner, id string, expires time.Time) error
	// Remove forgets owner's leases ids. An ID owner does not hold is
	// skipped: removing is idempotent.
	Remove(ctx context.Context, owner string, ids ...string) error
}

// validLeases checks what Add is given, and returns leases without
// repeats (the last of a repeated lease wins), in UTC to the microsecond.
func validLeases(owner string, leases []Lease) ([]Lease, error) {
	if owner == "" {
		return nil, fmt.Errorf("%w: a lease's owner is its job attempt, RUN/JOB/ATTEMPT; it is empty", ErrInvalid)
	}
	out := make([]Lease, 0, len(leases))
	at := make(map[[2]string]int, len(leases))
	for _, l := range leases {
		switch {
		case l.ID == "" || l.Provider == "":
			return nil, fmt.Errorf("%w: lease %s/%s of %s: a lease needs an ID and a provider", ErrInvalid, l.Provider, l.ID, owner)
		case l.Expires.IsZero():
			return nil, fmt.Errorf("%w: lease %s/%s of %s has no expiry", ErrInvalid, l.Provider, l.ID, owner)
		}
		l.Expires = leaseTime(l.Expires)
		k := [2]string{l.Provider, l.ID}
		if i, ok := at[k]; ok {
			out[i] = l
			continue
		}
		at[k] = len(out)
		out = append(out, l)
	}
	return out, nil
}

// leaseTime is t as the stores keep it: PostgreSQL's precision, UTC.
func leaseTime(t time.Time) time.Time { return t.Round(time.Microsecond).UTC() }

func compareLeases(a, b Lease) int {
	return cmp.Or(cmp.Compare(a.Provider, b.Provider), cmp.Compare(a.ID, b.ID))
}

// MemoryLeaseStore is a LeaseStore in memory, for tests and for a
// platform of one process (whose leases a restart forgets: they expire
// at their providers on their own).
type MemoryLeaseStore struct {
	mu     sync.Mutex
	leases map[[2]string]OwnedLease // by provider and ID
}

var _ LeaseStore = (*MemoryLeaseStore)(nil)

// NewMemoryLeaseStore returns an empty store.
func NewMemoryLeaseStore() *MemoryLeaseStore {
	return &MemoryLeaseStore{leases: make(map[[2]string]OwnedLease)}
}

// Add implements LeaseStore.
func (s *MemoryLeaseStore) Add(ctx context.Context, owner string, leases []Lease) error {
	leases, err := validLeases(owner, leases)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range leases {
		if old, ok := s.leases[[2]string{l.Provider, l.ID}]; ok && old.Owner != owner {
			return leaseConflict(l, old.Owner)
		}
	}
	for _, l := range leases {
		s.leases[[2]string{l.Provider, l.ID}] = OwnedLease{Owner: owner, Lease: l}
	}
	return nil
}

func leaseConflict(l Lease, holder string) error {
	return fmt.Errorf("secrets: lease %s/%s is held by %s: %w", l.Provider, l.ID, holder, cikit.ErrConflict)
}

// Owned implements LeaseStore.
func (s *MemoryLeaseStore) Owned(ctx context.Context, owner string) ([]Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []Lease{}
	for _, ol := range s.leases {
		if ol.Owner == owner {
			out = append(out, ol.Lease)
		}
	}
	slices.SortFunc(out, compareLeases)
	return out, nil
}

// Due implements LeaseStore.
func (s *MemoryLeaseStore) Due(ctx context.Context, before time.Time, limit int) ([]OwnedLease, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("%w: Due needs a positive limit, not %d", ErrInvalid, limit)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []OwnedLease{}
	for _, ol := range s.leases {
		if ol.Lease.Expires.Before(before) {
			out = append(out, ol)
		}
	}
	slices.SortFunc(out, func(a, b OwnedLease) int {
		return cmp.Or(a.Lease.Expires.Compare(b.Lease.Expires), compareLeases(a.Lease, b.Lease))
	})
	return out[:min(limit, len(out))], nil
}

// SetExpires implements LeaseStore.
func (s *MemoryLeaseStore) SetExpires(ctx context.Context, owner, id string, expires time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	found := false
	for k, ol := range s.leases {
		if ol.Owner == owner && ol.Lease.ID == id {
			ol.Lease.Expires = leaseTime(expires)
			s.leases[k] = ol
			found = true
		}
	}
	if !found {
		return fmt.Errorf("secrets: %s holds no lease %q: %w", owner, id, ErrNotFound)
	}
	return nil
}

// Remove implements LeaseStore.
func (s *MemoryLeaseStore) Remove(ctx context.Context, owner string, ids ...string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, ol := range s.leases {
		if ol.Owner == owner && slices.Contains(ids, ol.Lease.ID) {
			delete(s.leases, k)
		}
	}
	return nil
}
