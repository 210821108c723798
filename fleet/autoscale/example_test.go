package autoscale_test

import (
	"fmt"
	"time"

	"github.com/cikit/cikit/fleet/autoscale"
)

// A fleet manager's tick: it records each pool's demand in the pool's
// History, builds the snapshot, decides, and would then provision or
// destroy runners and record when. The large pool is at its maximum; the
// small one keeps 2 runners warm and starts runners for its queue.
func Example() {
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	large := autoscale.Policy{Min: 2, Max: 10, AutoWarm: true, MinWarm: 1}
	small := autoscale.Policy{Max: 20, Warm: 2}
	histories := map[string]*autoscale.History{
		"linux-large": {Window: large.HistoryWindow()},
		"linux-small": {Window: small.HistoryWindow()},
	}
	pool := func(name string, p autoscale.Policy, idle, busy, queued int, starting []time.Time) autoscale.Pool {
		h := histories[name]
		h.Add(autoscale.Sample{At: now, Demand: busy + queued})
		return autoscale.Pool{
			Name: name, Policy: p,
			Idle: idle, Busy: busy, Queued: queued, Provisioning: starting,
			StartupHint: 30 * time.Second,
			LastScaleUp: now.Add(-time.Minute),
			Demand:      h.Samples(), IdleSince: h.IdleSince(),
		}
	}
	plan := autoscale.Decide(autoscale.Snapshot{Now: now, Pools: []autoscale.Pool{
		pool("linux-large", large, 0, 10, 14, nil),
		pool("linux-small", small, 0, 4, 3, []time.Time{now.Add(-10 * time.Second)}),
	}})
	for _, d := range plan {
		fmt.Printf("%s: provision %d, destroy %d\n  %s\n  %s\n", d.Pool, d.Provision, d.Destroy, d.Reason, d.Wait.Message(d.Pool))
	}
	// Output:
	// linux-large: provision 0, destroy 0
	//   need 27 (busy 10 + queued 14 + lag 0 + warm 3), capped at max 10; have 10
	//   pool linux-large is at its maximum of 10 runners; 14 queued jobs wait for runners to finish
	// linux-small: provision 4, destroy 0
	//   need 9 (busy 4 + queued 3 + lag 0 + warm 2); have 5: provision 4
	//   warm pool empty; 5 runners starting, ready in about 30s
}
