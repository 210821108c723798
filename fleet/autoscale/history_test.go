package autoscale_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/fleet/autoscale"
)

func TestHistory(t *testing.T) {
	t.Parallel()
	at := func(s int) time.Time { return now.Add(time.Duration(s) * time.Second) }
	h := autoscale.History{Window: 10 * time.Second}
	require.Zero(t, h.Peak())
	require.Empty(t, h.Samples())
	require.True(t, h.IdleSince().IsZero(), "unknown before any sample")

	h.Add(autoscale.Sample{At: at(0), Demand: 4})
	h.Add(autoscale.Sample{At: at(5), Demand: 9})
	h.Add(autoscale.Sample{At: at(8), Demand: 0})
	require.Equal(t, 9, h.Peak())
	require.Equal(t, at(8), h.IdleSince())

	h.Add(autoscale.Sample{At: at(7), Demand: 50})
	require.Equal(t, 9, h.Peak(), "a sample older than the newest is ignored")

	h.Add(autoscale.Sample{At: at(10), Demand: 0})
	require.Equal(t, []autoscale.Sample{{At: at(5), Demand: 9}, {At: at(8)}, {At: at(10)}}, h.Samples(),
		"the sample exactly Window before the newest is out")
	require.Equal(t, at(8), h.IdleSince(), "idle since the first sample without demand")

	got := h.Samples()
	got[0].Demand = 1000
	require.Equal(t, 9, h.Peak(), "Samples returns a copy")

	h.Add(autoscale.Sample{At: at(30), Demand: 0})
	require.Equal(t, []autoscale.Sample{{At: at(30)}}, h.Samples())
	require.Zero(t, h.Peak())
	require.Equal(t, at(8), h.IdleSince(), "kept beyond the window")

	h.Add(autoscale.Sample{At: at(31), Demand: 2})
	require.True(t, h.IdleSince().IsZero(), "demand now")
	h.Add(autoscale.Sample{At: at(32), Demand: 0})
	require.Equal(t, at(32), h.IdleSince())
}

func TestHistoryDefaultWindow(t *testing.T) {
	t.Parallel()
	var h autoscale.History
	h.Add(autoscale.Sample{At: now, Demand: 3})
	h.Add(autoscale.Sample{At: now.Add(autoscale.DefaultDemandWindow - time.Second), Demand: 1})
	require.Equal(t, 3, h.Peak())
	h.Add(autoscale.Sample{At: now.Add(autoscale.DefaultDemandWindow), Demand: 1})
	require.Equal(t, 1, h.Peak())
}
