package logs_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"pgregory.net/rapid"

	"github.com/cikit/cikit/logs"
)

// TestPropertyUnreliableRunner sends a log through a network that loses,
// repeats and reorders chunks, with a runner that rewinds on gaps.
//
// SAFETY: the Hub's log is always a prefix of the runner's; no chunk of
// the runner is refused except for a gap, and a gap names the Hub's end.
// LIVENESS: once the runner has had every byte acknowledged, Finish
// finds the log complete, a follower reads exactly the runner's log, and
// there is one segment per step with output, at the step's offsets.
func TestPropertyUnreliableRunner(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		ctx := context.Background()
		log := rapid.SliceOfN(rapid.ByteRange('a', 'd'), 1, 3000).Draw(t, "log")
		// stepOf[i] is the step of byte i: non-decreasing, with jumps.
		stepOf := make([]int, len(log))
		step := rapid.IntRange(0, 2).Draw(t, "first step")
		for i := range log {
			if i > 0 && rapid.IntRange(0, 99).Draw(t, "new step") < 2 {
				step += rapid.IntRange(1, 3).Draw(t, "step jump")
			}
			stepOf[i] = step
		}
		store := &logs.MemorySegmentStore{}
		hub, err := logs.NewHub(logs.Config{Sink: &logs.MemorySink{}, Segments: store, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		key := logs.Key{RunID: "run", JobID: "job", Attempt: 1}
		var serverEnd, acked int64 // the model of the Hub's end; what the runner was told
		var seq int64
		for i := 0; acked < int64(len(log)); i++ {
			if i > 2000 {
				t.Fatalf("no progress: acked %d of %d", acked, len(log))
			}
			var start int64
			switch rapid.IntRange(0, 9).Draw(t, "kind") {
			case 0, 1: // a retry of something earlier
				start = rapid.Int64Range(0, acked).Draw(t, "retry start")
			case 2: // an earlier chunk was lost
				start = min(int64(len(log))-1, acked+rapid.Int64Range(1, 200).Draw(t, "skip"))
			default:
				start = acked
			}
			if start >= int64(len(log)) {
				continue
			}
			n := rapid.Int64Range(1, 300).Draw(t, "length")
			end := min(start+n, int64(len(log)))
			for j := start + 1; j < end; j++ { // a chunk is of one step
				if stepOf[j] != stepOf[start] {
					end = j
					break
				}
			}
			res, err := hub.Append(ctx, &logs.Chunk{Key: key, Step: stepOf[start], Seq: seq, Offset: start, Data: log[start:end]})
			seq++
			if gap, ok := errors.AsType[*logs.GapError](err); ok {
				if start <= serverEnd || gap.Expected != serverEnd {
					t.Fatalf("a gap at %d with the log at %d: %v", start, serverEnd, err)
				}
				acked = gap.Expected // the runner rewinds
				continue
			}
			if err != nil {
				t.Fatalf("chunk [%d, %d) refused: %v", start, end, err)
			}
			serverEnd = max(serverEnd, end)
			if res.NextOffset != serverEnd {
				t.Fatalf("next offset %d, want %d", res.NextOffset, serverEnd)
			}
			acked = res.NextOffset
		}
		fin, err := hub.Finish(ctx, key, logs.FinishParams{TotalBytes: int64(len(log)), SHA256: digest(string(log))})
		if err != nil || !fin.Complete {
			t.Fatalf("finish: %+v, %v", fin, err)
		}
		segs, err := store.SegmentsList(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		var want []logs.Segment
		for i := range log {
			if i == 0 || stepOf[i] != stepOf[i-1] {
				want = append(want, logs.Segment{Step: stepOf[i], Offset: int64(i)})
			}
			want[len(want)-1].Bytes++
		}
		if len(segs) != len(want) {
			t.Fatalf("%d segments, want %d", len(segs), len(want))
		}
		for i, s := range segs {
			if s.Step != want[i].Step || s.Offset != want[i].Offset || s.Bytes != want[i].Bytes || !s.Complete {
				t.Fatalf("segment %d is %+v, want step %d at %d with %d bytes", i, s, want[i].Step, want[i].Offset, want[i].Bytes)
			}
		}
		f, err := hub.Follow(ctx, key, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var got []byte
		for {
			ev, err := f.Next(ctx)
			if err != nil {
				break
			}
			for k := range ev.Data {
				if stepOf[ev.Offset+int64(k)] != ev.Step {
					t.Fatalf("byte %d is of step %d, the event says %d", ev.Offset+int64(k), stepOf[ev.Offset+int64(k)], ev.Step)
				}
			}
			got = append(got, ev.Data...)
		}
		if string(got) != string(log) {
			t.Fatalf("followed %q, want %q", got, log)
		}
	})
}
