package lease

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

// MemoryStore is a Store in process memory, for the embedded platform
// and tests. Its zero value is not usable; call NewMemoryStore.
type MemoryStore struct {
	mu     sync.Mutex
	leases map[[2]string]Lease // by run and job ID
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{leases: make(map[[2]string]Lease)}
}

func (s *MemoryStore) LeaseInsert(ctx context.Context, l *Lease) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := l.Attempt.validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := [2]string{l.RunID, l.JobID}
	if cur, ok := s.leases[k]; ok && cur.Attempt.Attempt >= l.Attempt.Attempt {
		return fmt.Errorf("lease: %s: the job has a lease of attempt %d: %w", l.Attempt, cur.Attempt.Attempt, ErrNotClaimed)
	}
	c := *l
	c.Expires = c.Expires.Truncate(time.Microsecond)
	s.leases[k] = c
	return nil
}

func (s *MemoryStore) LeaseInsertMany(ctx context.Context, ls []*Lease) ([]error, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]error, len(ls))
	for i, l := range ls {
		out[i] = s.LeaseInsert(ctx, l)
	}
	return out, nil
}

func (s *MemoryStore) LeaseGetMany(ctx context.Context, keys []dag.JobKey) ([]*Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Lease, len(keys))
	for i, k := range keys {
		if cur, ok := s.leases[[2]string{k.RunID, k.JobID}]; ok {
			out[i] = &cur
		}
	}
	return out, nil
}

func (s *MemoryStore) LeaseDeleteMany(ctx context.Context, ls []*Lease) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, l := range ls {
		if err := s.LeaseDelete(ctx, l.Attempt, l.Token); err != nil {
			return err
		}
	}
	return nil
}

func (s *MemoryStore) LeaseRenew(ctx context.Context, a Attempt, token string, expires time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := [2]string{a.RunID, a.JobID}
	cur, ok := s.leases[k]
	if !ok || cur.Attempt != a || cur.Token != token {
		return &FencedError{Attempt: a, Reason: "the store holds no lease of this attempt and token"}
	}
	cur.Expires = expires.Truncate(time.Microsecond)
	s.leases[k] = cur
	return nil
}

func (s *MemoryStore) LeaseGet(ctx context.Context, runID, jobID string) (*Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.leases[[2]string{runID, jobID}]
	if !ok {
		return nil, fmt.Errorf("lease: job %q of run %q has no lease: %w", jobID, runID, cikit.ErrNotFound)
	}
	return &cur, nil
}

func (s *MemoryStore) LeaseDelete(ctx context.Context, a Attempt, token string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := [2]string{a.RunID, a.JobID}
	if cur, ok := s.leases[k]; ok && cur.Attempt == a && cur.Token == token {
		delete(s.leases, k)
	}
	return nil
}

func (s *MemoryStore) LeaseExpired(ctx context.Context, now time.Time, limit int) ([]*Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, fmt.Errorf("lease: LeaseExpired needs a positive limit, got %d", limit)
	}
	s.mu.Lock()
	var out []*Lease
	for _, l := range s.leases {
		if !l.Expires.After(now) {
			c := l
			out = append(out, &c)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b *Lease) int {
		return cmp.Or(a.Expires.Compare(b.Expires), strings.Compare(a.RunID, b.RunID), strings.Compare(a.JobID, b.JobID))
	})
	return out[:min(limit, len(out))], nil
}
