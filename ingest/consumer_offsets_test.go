package ingest

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"pgregory.net/rapid"
)

func TestOffsetTrackerWaitsForOldest(t *testing.T) {
	t.Parallel()
	var tr offsetTracker
	o100 := tr.add(&kgo.Record{Offset: 100, LeaderEpoch: 3})
	o101 := tr.add(&kgo.Record{Offset: 101, LeaderEpoch: 3})
	o102 := tr.add(&kgo.Record{Offset: 102, LeaderEpoch: 4})

	require.False(t, tr.done(o101))
	require.False(t, tr.done(o102))
	require.Equal(t, kgo.EpochOffset{}, tr.commit, "nothing may be committed while 100 runs")

	require.True(t, tr.done(o100))
	require.Equal(t, kgo.EpochOffset{Epoch: 4, Offset: 103}, tr.commit)
	require.Empty(t, tr.pending)
}

// TestOffsetTrackerProperties hands off records with gaps between their
// offsets (compaction, transaction markers) and finishes them in random
// order.
//
// SAFETY: the commit offset never passes a record that is not done, and
// never moves back.
// LIVENESS: done reports true exactly when the commit offset moves, and
// once every record is done the commit offset is one past the last.
func TestOffsetTrackerProperties(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		var tr offsetTracker
		next := rapid.Int64Range(0, 1<<40).Draw(t, "first offset")
		last := int64(-1)
		running := make(map[int64]*trackedOffset)

		finish := func(t *rapid.T, offset int64) {
			before := tr.commit
			advanced := tr.done(running[offset])
			delete(running, offset)
			require.Equal(t, advanced, tr.commit != before, "done reported %v, commit moved from %v to %v", advanced, before, tr.commit)
			require.GreaterOrEqual(t, tr.commit.Offset, before.Offset, "commit moved back")
		}
		t.Repeat(map[string]func(*rapid.T){
			"add": func(t *rapid.T) {
				rec := &kgo.Record{Offset: next, LeaderEpoch: rapid.Int32Range(0, 3).Draw(t, "epoch")}
				running[next] = tr.add(rec)
				last = next
				next += rapid.Int64Range(1, 3).Draw(t, "gap")
			},
			"done": func(t *rapid.T) {
				if len(running) == 0 {
					t.Skip("nothing running")
				}
				offsets := sortedKeys(running)
				finish(t, rapid.SampledFrom(offsets).Draw(t, "offset"))
			},
			"": func(t *rapid.T) {
				for offset := range running {
					require.LessOrEqual(t, tr.commit.Offset, offset, "commit %d passed running record %d", tr.commit.Offset, offset)
				}
			},
		})

		for _, offset := range sortedKeys(running) {
			finish(t, offset)
		}
		if last >= 0 {
			require.Equal(t, last+1, tr.commit.Offset)
		}
		require.Empty(t, tr.pending)
	})
}

func sortedKeys(m map[int64]*trackedOffset) []int64 {
	keys := make([]int64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
