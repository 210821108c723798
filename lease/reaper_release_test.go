package lease_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/lease"
)

// TestReaperReleasesDelayedJobs: each pass makes READY the delayed jobs
// whose start_in has passed on the Manager's clock, and hands them to
// OnTransition for dispatch; not one before its time.
func TestReaperReleasesDelayedJobs(t *testing.T) {
	t.Parallel()
	forStacks(t, func(t *testing.T, st stack) {
		b := setup(t, st, &cikit.JobSpec{ID: "later", When: cikit.WhenDelayed, StartIn: time.Minute, Steps: []cikit.Step{{Run: "true"}}})
		var told []*dag.TransitionResult
		r := b.reaper(t, lease.ReaperConfig{OnTransition: func(res *dag.TransitionResult) { told = append(told, res) }})
		b.clock.Advance(time.Minute - time.Second)
		require.Equal(t, lease.ReapReport{}, reap(t, r))
		require.Equal(t, cikit.JobDelayed, b.job(t, "later").State)
		b.clock.Advance(time.Second)
		require.Equal(t, lease.ReapReport{Released: 1}, reap(t, r))
		require.Equal(t, cikit.JobReady, b.job(t, "later").State)
		require.Len(t, told, 1)
		require.Equal(t, "later", told[0].Changed[0].ID())
	})
}
