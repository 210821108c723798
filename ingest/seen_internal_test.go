package ingest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSeenCache(t *testing.T) {
	t.Parallel()
	c := newSeenCache(3)
	ev := func(id, sha string) *Event {
		return &Event{Provider: GitHub, DeliveryID: id, Kind: KindPush, Org: "a", Repo: "b", RefName: "main", SHA: sha}
	}
	record := func(e *Event) *Delivery { return &Delivery{DeliveryID: e.DeliveryID, SemanticKey: SemanticKey(e)} }
	require.Nil(t, c.get(ev("d1", "s1")))
	d1 := record(ev("d1", "s1"))
	d1.RunIDs = []string{"r1"}
	c.put(ev("d1", "s1"), d1)
	got := c.get(ev("d1", "s1"))
	require.Equal(t, []string{"r1"}, got.RunIDs)
	got.RunIDs[0] = "changed"
	require.Equal(t, []string{"r1"}, c.get(ev("d1", "s1")).RunIDs, "results are copies")
	require.NotNil(t, c.get(ev("forged", "s1")), "found by the semantic key")

	c.put(ev("d2", "s2"), record(ev("d2", "s2"))) // 4 keys in a cache of 3: d1's delivery key goes
	require.NotNil(t, c.get(ev("d1", "s1")), "still found by its semantic key")
	c.put(ev("d3", "s3"), record(ev("d3", "s3")))
	require.Nil(t, c.get(ev("d1", "s1")), "the oldest are forgotten")
	require.NotNil(t, c.get(ev("d3", "s3")))
	require.Len(t, c.byKey, 3)

	// A delivery found by its key with another body (another semantic
	// key): that semantic key is not the record's, and is not cached.
	c.put(ev("d3", "s4"), record(ev("d3", "s3")))
	require.NotNil(t, c.get(ev("d3", "s4")), "found by its delivery key")
	require.Nil(t, c.get(ev("d5", "s4")), "its semantic key is not taken for seen")

	var none *seenCache
	none.put(ev("d1", "s1"), &Delivery{})
	require.Nil(t, none.get(ev("d1", "s1")), "a nil cache remembers nothing")
}
