package approvals

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/cikit/cikit"
)

// MemoryStore is a Store in memory. The zero value is ready to use.
type MemoryStore struct {
	mu   sync.Mutex
	runs map[string][]Approval
}

var _ Store = (*MemoryStore)(nil)

// Record implements Store.
func (s *MemoryStore) Record(_ context.Context, a Approval) error {
	if err := a.Validate(); err != nil {
		return err
	}
	a = a.normalized()
	s.mu.Lock()
	defer s.mu.Unlock()
	if slices.ContainsFunc(s.runs[a.RunID], func(o Approval) bool { return o.JobID == a.JobID && o.Attempt == a.Attempt }) {
		return fmt.Errorf("approvals: attempt %d of job %q of run %q is decided already: %w", a.Attempt, a.JobID, a.RunID, cikit.ErrConflict)
	}
	if s.runs == nil {
		s.runs = make(map[string][]Approval)
	}
	s.runs[a.RunID] = append(s.runs[a.RunID], a)
	return nil
}

// List implements Store.
func (s *MemoryStore) List(_ context.Context, runID string) ([]Approval, error) {
	s.mu.Lock()
	out := slices.Clone(s.runs[runID])
	s.mu.Unlock()
	if out == nil {
		return []Approval{}, nil
	}
	slices.SortStableFunc(out, compare)
	return out, nil
}

// compare orders records as List returns them.
func compare(a, b Approval) int {
	return cmp.Or(a.Time.Compare(b.Time), cmp.Compare(a.JobID, b.JobID), cmp.Compare(a.Attempt, b.Attempt))
}
