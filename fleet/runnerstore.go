package fleet

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cikit/cikit"
)

// RunnerRecord is what the platform keeps of a runner that registered.
type RunnerRecord struct {
	ID      string
	Name    string
	Labels  []string
	Version string
	// RegisteredAt is when it registered.
	RegisteredAt time.Time
	// LastSeen is when a Server last wrote that it called: at most every
	// ServerConfig.RunnerSeenInterval, not at every call.
	LastSeen time.Time
	// RevokedAt is when it was revoked; zero while it is not. A revoked
	// runner's calls are refused for good.
	RevokedAt time.Time
	// RevokedBy is who revoked it, and Reason why.
	RevokedBy string
	Reason    string
}

// Revoked reports whether the runner was revoked.
func (r *RunnerRecord) Revoked() bool { return !r.RevokedAt.IsZero() }

func (r *RunnerRecord) clone() *RunnerRecord {
	c := *r
	c.Labels = slices.Clone(r.Labels)
	return &c
}

// RunnerRevokeParams are the arguments of RunnerStore.RunnerRevoke.
type RunnerRevokeParams struct {
	ID string
	// By is who revokes it (a user name), Reason why; both are kept.
	By, Reason string
	At         time.Time
}

// RunnerListParams are the arguments of RunnerStore.RunnerList.
type RunnerListParams struct {
	// After, when set, lists the runners whose IDs sort after it: the
	// last ID of the previous page.
	After string
	// Limit bounds the records returned; 0 or less, or more than
	// MaxRunnerList, means MaxRunnerList.
	Limit int
}

// MaxRunnerList is the most records one RunnerList returns.
const MaxRunnerList = 1000

// RunnerStore keeps the runners that registered, so that a runner can be
// revoked, and a runner token whose runner is gone is refused. Each
// Server checks a runner's record at its calls, through a cache (see
// ServerConfig.RunnerCheckTTL), so servers sharing one store agree on
// revocations within that TTL.
//
// Implementations: MemoryRunnerStore and PostgresRunnerStore; both pass
// the conformance suite in package fleet/runnerstest. They must be safe
// for concurrent use. Errors other than those below are the store
// failing, which a Server answers 503.
type RunnerStore interface {
	// RunnerCreate records a newly registered runner. A record with its
	// ID is refused with an error matching cikit.ErrConflict.
	RunnerCreate(ctx context.Context, r *RunnerRecord) error
	// RunnerGet returns runner id's record, or an error matching
	// cikit.ErrNotFound.
	RunnerGet(ctx context.Context, id string) (*RunnerRecord, error)
	// RunnerSeen moves runner id's LastSeen to at, unless it is later
	// already; a revoked runner's too. An unknown id is
	// cikit.ErrNotFound.
	RunnerSeen(ctx context.Context, id string, at time.Time) error
	// RunnerRevoke revokes a runner and returns its record. Revoking a
	// revoked runner changes nothing and returns the first revocation.
	// An unknown ID is cikit.ErrNotFound.
	RunnerRevoke(ctx context.Context, p *RunnerRevokeParams) (*RunnerRecord, error)
	// RunnerList returns records by ID (byte order), revoked ones
	// included, a page at a time (see RunnerListParams).
	RunnerList(ctx context.Context, p *RunnerListParams) ([]*RunnerRecord, error)
}

func (p *RunnerListParams) limit() int {
	if p == nil || p.Limit <= 0 || p.Limit > MaxRunnerList {
		return MaxRunnerList
	}
	return p.Limit
}

// MemoryRunnerStore is a RunnerStore in memory: one process's, gone when
// it ends (its runners must then register again).
type MemoryRunnerStore struct {
	mu sync.Mutex
	m  map[string]*RunnerRecord
}

var _ RunnerStore = (*MemoryRunnerStore)(nil)

// NewMemoryRunnerStore returns an empty MemoryRunnerStore.
func NewMemoryRunnerStore() *MemoryRunnerStore {
	return &MemoryRunnerStore{m: map[string]*RunnerRecord{}}
}

func (s *MemoryRunnerStore) RunnerCreate(_ context.Context, r *RunnerRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[r.ID]; ok {
		return fmt.Errorf("fleet: runner %s is registered already: %w", r.ID, cikit.ErrConflict)
	}
	c := r.clone()
	c.RegisteredAt, c.LastSeen, c.RevokedAt = c.RegisteredAt.UTC(), c.LastSeen.UTC(), c.RevokedAt.UTC()
	s.m[r.ID] = c
	return nil
}

func (s *MemoryRunnerStore) RunnerGet(_ context.Context, id string) (*RunnerRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[id]
	if !ok {
		return nil, unknownRunner(id)
	}
	return r.clone(), nil
}

func (s *MemoryRunnerStore) RunnerSeen(_ context.Context, id string, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[id]
	if !ok {
		return unknownRunner(id)
	}
	if at.After(r.LastSeen) {
		r.LastSeen = at.UTC()
	}
	return nil
}

func (s *MemoryRunnerStore) RunnerRevoke(_ context.Context, p *RunnerRevokeParams) (*RunnerRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[p.ID]
	if !ok {
		return nil, unknownRunner(p.ID)
	}
	if !r.Revoked() {
		r.RevokedAt, r.RevokedBy, r.Reason = p.At.UTC(), p.By, p.Reason
	}
	return r.clone(), nil
}

func (s *MemoryRunnerStore) RunnerList(_ context.Context, p *RunnerListParams) ([]*RunnerRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	after := ""
	if p != nil {
		after = p.After
	}
	out := make([]*RunnerRecord, 0, min(len(s.m), p.limit()))
	for _, r := range s.m {
		if r.ID > after {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *RunnerRecord) int { return strings.Compare(a.ID, b.ID) })
	out = out[:min(len(out), p.limit())]
	for i, r := range out {
		out[i] = r.clone()
	}
	return out, nil
}

func unknownRunner(id string) error {
	return fmt.Errorf("fleet: no runner %s is registered: %w", cmp.Or(id, `""`), cikit.ErrNotFound)
}
