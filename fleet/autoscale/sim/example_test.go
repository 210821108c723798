package sim_test

import (
	"fmt"
	"time"

	"github.com/cikit/cikit/fleet/autoscale"
	"github.com/cikit/cikit/fleet/autoscale/sim"
)

// Tuning a warm pool: 200 five-minute jobs arrive over two minutes, a VM
// takes 45 s to start. How much do 10, 40 or 80 warm runners save the
// jobs, and what do they cost? Only a warm pool about as large as the
// arrivals during a start-up (100 a minute for 45 s: 75) takes most of the
// wait away.
func ExampleRun() {
	var jobs []sim.Job
	for i := range 200 {
		jobs = append(jobs, sim.Job{Arrive: time.Duration(i) * 600 * time.Millisecond, Duration: 5 * time.Minute})
	}
	for _, warm := range []int{10, 40, 80} {
		res, err := sim.Run(sim.Config{
			Policy:  autoscale.Policy{Max: 250, Warm: warm},
			Startup: 45 * time.Second,
			Initial: warm,
			Jobs:    jobs,
		})
		if err != nil {
			panic(err)
		}
		fmt.Printf("warm %d: %d jobs, wait p50 %s, p95 %s; %d scale-ups; runner time %s\n",
			warm, res.Finished, res.WaitQuantile(0.5), res.WaitQuantile(0.95), res.ScaleUps, res.RunnerTime.Round(time.Minute))
	}
	// Output:
	// warm 10: 200 jobs, wait p50 43.8s, p95 48.4s; 13 scale-ups; runner time 23h32m0s
	// warm 40: 200 jobs, wait p50 24.8s, p95 30.2s; 13 scale-ups; runner time 26h5m0s
	// warm 80: 200 jobs, wait p50 0s, p95 6.2s; 12 scale-ups; runner time 26h53m0s
}
