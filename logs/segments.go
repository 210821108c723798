package logs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cikit/cikit"
)

// Segment is one step of a finished log: where its bytes are in the whole
// log and where they are stored.
type Segment struct {
	Key    Key
	Step   int
	Offset int64 // of the step's first byte in the whole log
	Bytes  int64
	// SHA256 is the hex SHA-256 digest of the step's bytes.
	SHA256 string
	// BlobKey is what the Sink returned for the step.
	BlobKey string
	// Complete is the verdict of Finish on the whole log, the same on
	// each of its segments.
	Complete  bool
	CreatedAt time.Time
}

// SegmentStore is the index of finished logs: the log_segments table.
//
// Implementations must be safe for concurrent use. MemorySegmentStore and
// PostgresSegmentStore are in this package; logstest.Exercise checks an
// implementation.
type SegmentStore interface {
	// SegmentsPut records the segments of one finished log, all at once:
	// either all are recorded or none. segs are ordered by step, each
	// step at most once, each starting where the one before ends, the
	// first at offset 0, and all carry key and one Complete.
	//
	// It is idempotent: recording the same segments again (CreatedAt
	// aside) succeeds and changes nothing; recording different ones for
	// a key that has segments is cikit.ErrConflict.
	SegmentsPut(ctx context.Context, key Key, segs []Segment) error
	// SegmentsList returns the segments of key ordered by step; none (and
	// no error) when the log is not finished.
	SegmentsList(ctx context.Context, key Key) ([]Segment, error)
	// SegmentsDelete forgets the segments of key, for retention; the
	// caller deletes the blobs. Deleting what does not exist succeeds.
	SegmentsDelete(ctx context.Context, key Key) error
}

// checkSegments is the precondition of SegmentsPut.
func checkSegments(key Key, segs []Segment) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if len(segs) == 0 {
		return errors.New("a finished log has at least one segment")
	}
	var next int64
	for i, s := range segs {
		switch {
		case s.Key != key:
			return fmt.Errorf("segment %d is of log %s, not %s", i, s.Key, key)
		case s.Offset != next:
			return fmt.Errorf("segment %d starts at %d, not where the one before ends (%d)", i, s.Offset, next)
		case s.Bytes < 0 || s.Step < 0:
			return fmt.Errorf("segment %d has a negative step or length", i)
		case i > 0 && s.Step <= segs[i-1].Step:
			return fmt.Errorf("segment %d has step %d after step %d; steps are in increasing order", i, s.Step, segs[i-1].Step)
		case s.Complete != segs[0].Complete:
			return fmt.Errorf("segment %d disagrees with segment 0 on whether the log is complete", i)
		case s.BlobKey == "":
			return fmt.Errorf("segment %d has no blob key", i)
		}
		next += s.Bytes
	}
	return nil
}

// sameSegments reports whether a and b record the same log, CreatedAt
// aside.
func sameSegments(a, b []Segment) bool {
	return slices.EqualFunc(a, b, func(x, y Segment) bool {
		x.CreatedAt, y.CreatedAt = time.Time{}, time.Time{}
		return x == y
	})
}

// MemorySegmentStore is a SegmentStore in process memory. The zero value
// is ready to use.
type MemorySegmentStore struct {
	mu   sync.Mutex
	logs map[Key][]Segment
}

var _ SegmentStore = (*MemorySegmentStore)(nil)

// SegmentsPut implements SegmentStore.
func (s *MemorySegmentStore) SegmentsPut(ctx context.Context, key Key, segs []Segment) error {
	if err := checkSegments(key, segs); err != nil {
		return fmt.Errorf("logs: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.logs[key]; ok {
		if sameSegments(old, segs) {
			return nil
		}
		return fmt.Errorf("logs: log %s has other segments: %w", key, cikit.ErrConflict)
	}
	if s.logs == nil {
		s.logs = make(map[Key][]Segment)
	}
	stored := slices.Clone(segs)
	for i := range stored {
		stored[i].CreatedAt = stored[i].CreatedAt.UTC().Truncate(time.Microsecond)
	}
	s.logs[key] = stored
	return nil
}

// SegmentsList implements SegmentStore.
func (s *MemorySegmentStore) SegmentsList(ctx context.Context, key Key) ([]Segment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.logs[key]), nil
}

// SegmentsDelete implements SegmentStore.
func (s *MemorySegmentStore) SegmentsDelete(ctx context.Context, key Key) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.logs, key)
	return nil
}
