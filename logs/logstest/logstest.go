// Package logstest is the conformance suite of the logs package's seams:
// Exercise for logs.SegmentStore and ExerciseSink for logs.Sink. Every
// implementation, the memory ones included, runs them, so that a log is
// indexed and stored the same in a test, the embedded platform and
// production — and in a store a platform team writes itself.
//
//	func TestMyStore(t *testing.T) {
//		logstest.Exercise(t, func(t *testing.T) logs.SegmentStore {
//			return newMyStore(t)
//		})
//	}
package logstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/logs"
)

// Factory returns a new, empty store. Each call must return a store that
// shares nothing with the others.
type Factory func(t *testing.T) logs.SegmentStore

// SinkFactory returns a new, empty sink, likewise.
type SinkFactory func(t *testing.T) logs.Sink

var created = time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)

// segments returns a finished log of key with the given step lengths.
func segments(key logs.Key, complete bool, lengths ...int64) []logs.Segment {
	var segs []logs.Segment
	var off int64
	for i, n := range lengths {
		step := i * 2 // steps without output have no segment
		segs = append(segs, logs.Segment{
			Key: key, Step: step, Offset: off, Bytes: n,
			SHA256:  strings.Repeat(fmt.Sprintf("%x", i%16), 64),
			BlobKey: logs.BlobKey(key, step), Complete: complete, CreatedAt: created,
		})
		off += n
	}
	return segs
}

// Exercise runs the SegmentStore conformance suite.
func Exercise(t *testing.T, factory Factory) {
	t.Run("PutList", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		ctx := context.Background()
		key := logs.Key{RunID: "run-1", JobID: "build", Attempt: 1}
		got, err := s.SegmentsList(ctx, key)
		require.NoError(t, err)
		require.Empty(t, got, "a log not finished has no segments")

		want := segments(key, true, 10, 0, 25)
		require.NoError(t, s.SegmentsPut(ctx, key, want))
		got, err = s.SegmentsList(ctx, key)
		require.NoError(t, err)
		require.Equal(t, want, got)

		other := key
		other.Attempt = 2
		got, err = s.SegmentsList(ctx, other)
		require.NoError(t, err)
		require.Empty(t, got, "another attempt is another log")
	})

	t.Run("PutIsIdempotent", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		ctx := context.Background()
		key := logs.Key{RunID: "run-1", JobID: "build", Attempt: 1}
		want := segments(key, false, 3, 4)
		require.NoError(t, s.SegmentsPut(ctx, key, want))
		again := segments(key, false, 3, 4)
		for i := range again {
			again[i].CreatedAt = created.Add(time.Hour)
		}
		require.NoError(t, s.SegmentsPut(ctx, key, again), "the same segments again, at another time")
		got, err := s.SegmentsList(ctx, key)
		require.NoError(t, err)
		require.Equal(t, want, got, "the first put stays")
	})

	t.Run("PutConflict", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		ctx := context.Background()
		key := logs.Key{RunID: "run-1", JobID: "build", Attempt: 1}
		require.NoError(t, s.SegmentsPut(ctx, key, segments(key, true, 3, 4)))
		for name, segs := range map[string][]logs.Segment{
			"other lengths":  segments(key, true, 3, 5),
			"other verdict":  segments(key, false, 3, 4),
			"fewer segments": segments(key, true, 7),
		} {
			err := s.SegmentsPut(ctx, key, segs)
			require.ErrorIs(t, err, cikit.ErrConflict, name)
		}
		got, err := s.SegmentsList(ctx, key)
		require.NoError(t, err)
		require.Equal(t, segments(key, true, 3, 4), got)
	})

	t.Run("PutInvalid", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		ctx := context.Background()
		key := logs.Key{RunID: "run-1", JobID: "build", Attempt: 1}
		gap := segments(key, true, 3, 4)
		gap[1].Offset = 5
		mixed := segments(key, true, 3, 4)
		mixed[1].Complete = false
		foreign := segments(logs.Key{RunID: "run-2", JobID: "build", Attempt: 1}, true, 3)
		for name, segs := range map[string][]logs.Segment{
			"none":       nil,
			"gap":        gap,
			"mixed":      mixed,
			"other log":  foreign,
			"not sorted": {segments(key, true, 3, 4)[1], segments(key, true, 3, 4)[0]},
		} {
			require.Error(t, s.SegmentsPut(ctx, key, segs), name)
		}
		got, err := s.SegmentsList(ctx, key)
		require.NoError(t, err)
		require.Empty(t, got, "nothing is recorded of a refused put")
	})

	t.Run("ConcurrentPuts", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		ctx := context.Background()
		key := logs.Key{RunID: "run-1", JobID: "build", Attempt: 1}
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() {
				lengths := []int64{3, 4}
				if i%2 == 1 {
					lengths = []int64{5}
				}
				errs[i] = s.SegmentsPut(ctx, key, segments(key, true, lengths...))
			})
		}
		wg.Wait()
		ok, conflicts := 0, 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case errors.Is(err, cikit.ErrConflict):
				conflicts++
			default:
				t.Fatalf("unexpected error: %v", err)
			}
		}
		require.Equal(t, 4, ok, "the puts of the winning version all succeed")
		require.Equal(t, 4, conflicts, "the puts of the other version are conflicts")
	})

	t.Run("Delete", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		ctx := context.Background()
		key := logs.Key{RunID: "run-1", JobID: "build", Attempt: 1}
		other := logs.Key{RunID: "run-1", JobID: "test", Attempt: 1}
		require.NoError(t, s.SegmentsPut(ctx, key, segments(key, true, 3)))
		require.NoError(t, s.SegmentsPut(ctx, other, segments(other, true, 9)))
		require.NoError(t, s.SegmentsDelete(ctx, key))
		require.NoError(t, s.SegmentsDelete(ctx, key), "deleting twice")
		got, err := s.SegmentsList(ctx, key)
		require.NoError(t, err)
		require.Empty(t, got)
		got, err = s.SegmentsList(ctx, other)
		require.NoError(t, err)
		require.Len(t, got, 1, "other logs stay")
		require.NoError(t, s.SegmentsPut(ctx, key, segments(key, false, 4)), "a deleted log can be recorded anew")
	})
}

// ExerciseSink runs the Sink conformance suite.
func ExerciseSink(t *testing.T, factory SinkFactory) {
	t.Run("PutGet", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		ctx := context.Background()
		key := logs.Key{RunID: "run-1", JobID: "build", Attempt: 1}
		_, err := s.StepGet(ctx, key, 0)
		require.ErrorIs(t, err, cikit.ErrNotFound)

		data := bytes.Repeat([]byte("hello\n"), 50000)
		blob, err := s.StepPut(ctx, key, 0, bytes.NewReader(data), int64(len(data)))
		require.NoError(t, err)
		require.NotEmpty(t, blob)
		_, err = s.StepPut(ctx, key, 3, strings.NewReader(""), 0)
		require.NoError(t, err, "an empty step")

		require.Equal(t, data, get(t, s, key, 0))
		require.Empty(t, get(t, s, key, 3))
		_, err = s.StepGet(ctx, key, 1)
		require.ErrorIs(t, err, cikit.ErrNotFound)
		other := key
		other.Attempt = 2
		_, err = s.StepGet(ctx, other, 0)
		require.ErrorIs(t, err, cikit.ErrNotFound, "another attempt is another log")
	})

	t.Run("PutReplaces", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		ctx := context.Background()
		key := logs.Key{RunID: "run-1", JobID: "build", Attempt: 1}
		_, err := s.StepPut(ctx, key, 0, strings.NewReader("first"), 5)
		require.NoError(t, err)
		_, err = s.StepPut(ctx, key, 0, strings.NewReader("second"), 6)
		require.NoError(t, err)
		require.Equal(t, "second", string(get(t, s, key, 0)))
	})

	t.Run("WrongSize", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		ctx := context.Background()
		key := logs.Key{RunID: "run-1", JobID: "build", Attempt: 1}
		_, err := s.StepPut(ctx, key, 0, strings.NewReader("abc"), 10)
		require.Error(t, err, "a reader shorter than size")
		_, err = s.StepPut(ctx, key, 0, strings.NewReader("abcdef"), 3)
		require.Error(t, err, "a reader longer than size")
		_, err = s.StepGet(ctx, key, 0)
		require.ErrorIs(t, err, cikit.ErrNotFound, "nothing is stored of a failed put")
	})

	t.Run("InvalidKey", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		ctx := context.Background()
		for _, key := range []logs.Key{
			{RunID: "", JobID: "build", Attempt: 1},
			{RunID: "run", JobID: "a\nb", Attempt: 1},
			{RunID: "run", JobID: strings.Repeat("j", 257), Attempt: 1},
			{RunID: "run", JobID: "build", Attempt: 0},
		} {
			_, err := s.StepPut(ctx, key, 0, strings.NewReader("x"), 1)
			require.Error(t, err, "key %+v", key)
		}
	})
	t.Run("KeysThatLookLikePaths", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		ctx := context.Background()
		// IDs are names, not paths: each is its own log.
		keys := []logs.Key{
			{RunID: "..", JobID: "build", Attempt: 1},
			{RunID: "run", JobID: "a/../../b", Attempt: 1},
			{RunID: "run", JobID: "test 1/3", Attempt: 1},
			{RunID: "run", JobID: "test 1", Attempt: 1},
		}
		for i, key := range keys {
			_, err := s.StepPut(ctx, key, 0, strings.NewReader(fmt.Sprint(i)), 1)
			require.NoError(t, err, "key %+v", key)
		}
		for i, key := range keys {
			require.Equal(t, fmt.Sprint(i), string(get(t, s, key, 0)), "key %+v", key)
		}
	})
}

func get(t *testing.T, s logs.Sink, key logs.Key, step int) []byte {
	t.Helper()
	rc, err := s.StepGet(context.Background(), key, step)
	require.NoError(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	return b
}
