package sim_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/fleet/autoscale"
	"github.com/cikit/cikit/fleet/autoscale/sim"
)

// planFunc returns a Decide that plans provision and destroy at the
// given ticks and nothing else, and records every snapshot.
func planFunc(plans map[time.Duration]autoscale.Decision, seen *[]autoscale.Snapshot) func(autoscale.Snapshot) []autoscale.Decision {
	return func(s autoscale.Snapshot) []autoscale.Decision {
		if seen != nil {
			*seen = append(*seen, s)
		}
		return []autoscale.Decision{plans[s.Now.Sub(sim.Epoch)]}
	}
}

func TestRunProvisioning(t *testing.T) {
	t.Parallel()
	res, err := sim.Run(sim.Config{
		Policy:  autoscale.Policy{Max: 1},
		Startup: 7 * time.Second,
		Jobs:    []sim.Job{{Arrive: 500 * time.Millisecond, Duration: 10 * time.Second}},
	})
	require.NoError(t, err)
	require.Equal(t, []sim.JobResult{{Started: true, Finished: true, Wait: 7500 * time.Millisecond, Runner: 1}}, res.Jobs,
		"provisioned at the 1s tick, ready 7s later")
	require.Equal(t, 1, res.Finished)
	require.Equal(t, 1, res.ScaleUps)
	require.Equal(t, 1, res.Provisioned)
	require.Equal(t, 1, res.MaxSize)
	require.Equal(t, 18*time.Second, res.End, "the tick the job ended at")
	require.Equal(t, 17*time.Second, res.RunnerTime, "alive from 1s")
	require.Zero(t, res.IdleTime, "the job was waiting when the runner was ready")
	require.Len(t, res.Ticks, 19)
	require.Equal(t, sim.Tick{At: 2 * time.Second, Queued: 1, Provisioning: 1, Decision: res.Ticks[2].Decision}, res.Ticks[2])
	require.Equal(t, autoscale.WaitScalingUp, res.Ticks[2].Decision.Wait.Kind)
	require.Equal(t, 6*time.Second, res.Ticks[2].Decision.Wait.ETA, "the hint is the start-up")
}

func TestRunStartupHint(t *testing.T) {
	t.Parallel()
	var seen []autoscale.Snapshot
	_, err := sim.Run(sim.Config{
		Policy:      autoscale.Policy{Max: 1},
		StartupHint: time.Minute,
		Until:       time.Second,
		Decide:      planFunc(nil, &seen),
	})
	require.NoError(t, err)
	require.Len(t, seen, 2)
	require.Equal(t, time.Minute, seen[0].Pools[0].StartupHint)
}

func TestRunZeroStartup(t *testing.T) {
	t.Parallel()
	res, err := sim.Run(sim.Config{
		Policy: autoscale.Policy{Max: 2},
		Jobs:   []sim.Job{{Duration: time.Second}, {Duration: 0}},
	})
	require.NoError(t, err)
	require.Zero(t, res.WaitQuantile(1), "runners that start in no time take the jobs at the tick")
	require.Equal(t, 2, res.Finished)
	require.Equal(t, time.Second, res.End)
}

func TestRunEphemeral(t *testing.T) {
	t.Parallel()
	res, err := sim.Run(sim.Config{
		Policy:  autoscale.Policy{Max: 1, Ephemeral: true},
		Startup: 5 * time.Second,
		Initial: 1,
		Jobs:    []sim.Job{{Duration: 10 * time.Second}, {Duration: 10 * time.Second}},
	})
	require.NoError(t, err)
	require.Equal(t, []sim.JobResult{
		{Started: true, Finished: true, Runner: 1},
		{Started: true, Finished: true, Wait: 15 * time.Second, Runner: 2},
	}, res.Jobs, "runner 1 is gone after its job; runner 2 is provisioned at 10s")
	require.Zero(t, res.Ticks[10].Idle+res.Ticks[10].Busy)
}

func TestRunDestroy(t *testing.T) {
	t.Parallel()
	res, err := sim.Run(sim.Config{
		Policy:  autoscale.Policy{Max: 5},
		Initial: 3,
		Until:   10 * time.Second,
		Decide:  planFunc(map[time.Duration]autoscale.Decision{2 * time.Second: {Destroy: 2}}, nil),
	})
	require.NoError(t, err)
	require.Equal(t, 1, res.ScaleDowns)
	require.Equal(t, 2, res.Destroyed)
	require.Equal(t, 3, res.Ticks[2].Idle)
	require.Equal(t, 1, res.Ticks[3].Idle)
	require.Equal(t, 3*2*time.Second+1*8*time.Second, res.RunnerTime)
	require.Equal(t, res.RunnerTime, res.IdleTime)
	require.Len(t, res.Ticks, 11, "ticks 0s to Until")
	require.Equal(t, 10*time.Second, res.End)
}

func TestRunSnapshots(t *testing.T) {
	t.Parallel()
	var seen []autoscale.Snapshot
	pol := autoscale.Policy{Max: 3, Warm: 1}
	plans := map[time.Duration]autoscale.Decision{
		0:                {Provision: 1},
		10 * time.Second: {Provision: 1},
		20 * time.Second: {Destroy: 1},
	}
	_, err := sim.Run(sim.Config{
		Policy:      pol,
		Startup:     4 * time.Second,
		StartupHint: 3 * time.Second,
		LagDelay:    5 * time.Second,
		Jobs:        []sim.Job{{Arrive: 10 * time.Second, Duration: 2 * time.Second}},
		Until:       30 * time.Second,
		Decide:      planFunc(plans, &seen),
	})
	require.NoError(t, err)
	require.Len(t, seen, 31)
	pool := func(at time.Duration) autoscale.Pool {
		s := seen[at/time.Second]
		require.Equal(t, sim.Epoch.Add(at), s.Now)
		require.Len(t, s.Pools, 1)
		return s.Pools[0]
	}
	require.Equal(t, []time.Time{sim.Epoch}, pool(time.Second).Provisioning)
	require.Equal(t, sim.Epoch, pool(time.Second).LastScaleUp)
	require.Equal(t, 1, pool(4*time.Second).Idle)
	require.Zero(t, pool(4*time.Second).Lag)
	require.Equal(t, 1, pool(5*time.Second).Lag, "lag from Arrive - LagDelay")
	require.Equal(t, 1, pool(9*time.Second).Lag)
	p := pool(10 * time.Second)
	require.Equal(t, autoscale.Pool{
		Name:        "sim",
		Policy:      pol,
		Busy:        1,
		StartupHint: 3 * time.Second,
		LastScaleUp: sim.Epoch,
		Demand:      p.Demand,
	}, p, "the job took the idle runner")
	require.Len(t, p.Demand, 11)
	require.Equal(t, autoscale.Sample{At: sim.Epoch.Add(10 * time.Second), Demand: 1}, p.Demand[10])
	require.True(t, pool(11*time.Second).IdleSince.IsZero(), "not idle while busy")
	require.Equal(t, sim.Epoch.Add(12*time.Second), pool(12*time.Second).IdleSince)
	require.Equal(t, sim.Epoch.Add(10*time.Second), pool(20*time.Second).LastScaleUp)
	require.Equal(t, 2, pool(20*time.Second).Idle)
	require.Equal(t, sim.Epoch.Add(20*time.Second), pool(21*time.Second).LastScaleDown)
	require.Equal(t, 1, pool(21*time.Second).Idle)
}

func TestRunLimit(t *testing.T) {
	t.Parallel()
	res, err := sim.Run(sim.Config{
		Policy: autoscale.Policy{Max: 1},
		Tick:   time.Hour,
		Jobs:   []sim.Job{{Duration: time.Second}},
		Decide: planFunc(nil, nil), // never provisions
	})
	require.NoError(t, err)
	require.Equal(t, sim.Limit, res.End)
	require.Zero(t, res.Finished)
	require.False(t, res.Jobs[0].Started)
	require.Zero(t, res.WaitQuantile(0.5), "no job started")
}

func TestRunDeterministic(t *testing.T) {
	t.Parallel()
	cfg := sim.Config{Policy: autoscale.Policy{Max: 4, AutoWarm: true, MinWarm: 1}, Startup: 3 * time.Second, LagDelay: 2 * time.Second}
	for i := range 30 {
		cfg.Jobs = append(cfg.Jobs, sim.Job{Arrive: time.Duration(i*i%17) * time.Second, Duration: time.Duration(i%7) * time.Second})
	}
	a, err := sim.Run(cfg)
	require.NoError(t, err)
	b, err := sim.Run(cfg)
	require.NoError(t, err)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Fatalf("two runs differ (-first +second):\n%s", diff)
	}
	require.Equal(t, 30, a.Finished)
}

func TestRunRefuses(t *testing.T) {
	t.Parallel()
	ok := autoscale.Policy{Max: 1}
	for _, tc := range []struct {
		cfg  sim.Config
		want string
	}{
		{sim.Config{}, "autoscale: Max must be at least 1, not 0"},
		{sim.Config{Policy: ok, Startup: -1}, "sim: Startup, StartupHint, Tick, LagDelay and Until must not be negative"},
		{sim.Config{Policy: ok, Initial: -1}, "sim: Initial must not be negative (-1)"},
		{sim.Config{Policy: ok, Jobs: []sim.Job{{}, {Arrive: -time.Second}}}, "sim: job 1 arrives at -1s and runs for 0s; neither may be negative"},
		{sim.Config{Policy: ok, Decide: func(autoscale.Snapshot) []autoscale.Decision { return nil }}, "sim: at 0s the plan has 0 decisions for 1 pool"},
		{sim.Config{Policy: ok, Initial: 1, Decide: planFunc(map[time.Duration]autoscale.Decision{0: {Destroy: 2}}, nil)},
			"sim: at 0s the plan provisions 0 and destroys 2 runners, with 1 idle"},
		{sim.Config{Policy: ok, Decide: planFunc(map[time.Duration]autoscale.Decision{0: {Provision: -1}}, nil)},
			"sim: at 0s the plan provisions -1 and destroys 0 runners, with 0 idle"},
	} {
		_, err := sim.Run(tc.cfg)
		require.EqualError(t, err, tc.want)
	}
}

func TestWaitQuantile(t *testing.T) {
	t.Parallel()
	r := &sim.Result{Jobs: []sim.JobResult{
		{Started: true, Wait: 3}, {Started: true, Wait: 1}, {}, {Started: true, Wait: 4}, {Started: true, Wait: 2},
	}}
	require.Equal(t, time.Duration(1), r.WaitQuantile(0))
	require.Equal(t, time.Duration(2), r.WaitQuantile(0.5))
	require.Equal(t, time.Duration(3), r.WaitQuantile(0.75))
	require.Equal(t, time.Duration(4), r.WaitQuantile(0.76))
	require.Equal(t, time.Duration(4), r.WaitQuantile(1))
}

func TestTable(t *testing.T) {
	t.Parallel()
	res, err := sim.Run(sim.Config{
		Policy:  autoscale.Policy{Max: 3},
		Startup: 2 * time.Second,
		Jobs:    []sim.Job{{Duration: time.Second}},
	})
	require.NoError(t, err)
	require.Equal(t, []sim.Tick{res.Ticks[0]}, res.Scaling())
	lines := strings.Split(sim.Table(res.Scaling()), "\n")
	require.Equal(t, []string{
		"  time  queued  lag  idle  busy  prov  desired  +prov  -destroy  wait             reason",
		"    0s       1    0     0     0     0        1      1         0  scaling_up       need 1 (busy 0 + queued 1 + lag 0 + warm 0); have 0: provision 1",
		"",
	}, lines)
}
