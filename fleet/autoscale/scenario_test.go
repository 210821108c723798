package autoscale_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/cikit/cikit/fleet/autoscale"
	"github.com/cikit/cikit/fleet/autoscale/sim"
)

// The scenarios run Decide through package sim and log each run as a
// table of its scaling decisions (go test -v -run TestScenario). Their
// bounds are derived from the scenario's numbers, not from a run.

// size is the pool's size once the tick's plan is carried out.
func size(tk sim.Tick) int {
	return tk.Idle + tk.Busy + tk.Provisioning + tk.Decision.Provision - tk.Decision.Destroy
}

// summary is a run's one-line summary for the log.
func summary(res *sim.Result) string {
	return fmt.Sprintf("jobs finished %d; wait p50 %s, p95 %s, max %s; scale-ups %d (%d runners), scale-downs %d (%d runners); max size %d; runner time %s, idle %s",
		res.Finished, res.WaitQuantile(0.5), res.WaitQuantile(0.95), res.WaitQuantile(1),
		res.ScaleUps, res.Provisioned, res.ScaleDowns, res.Destroyed, res.MaxSize,
		res.RunnerTime.Round(time.Second), res.IdleTime.Round(time.Second))
}

// TestScenarioBurst: 1,000 jobs of 60 s at once on a pool of at most 100
// runners that keeps 5 warm, with a 20 s start-up.
func TestScenarioBurst(t *testing.T) {
	t.Parallel()
	const (
		n       = 1000
		maxSize = 100
		warm    = 5
		startup = 20 * time.Second
		job     = time.Minute
		tick    = time.Second
	)
	jobs := make([]sim.Job, n)
	for i := range jobs {
		jobs[i] = sim.Job{Duration: job}
	}
	pol := autoscale.Policy{Max: maxSize, Warm: warm}
	res, err := sim.Run(sim.Config{Policy: pol, Startup: startup, Tick: tick, Initial: warm, Jobs: jobs, Until: 30 * time.Minute})
	require.NoError(t, err)
	t.Logf("scaling decisions:\n%s%s", sim.Table(res.Scaling()), summary(res))

	require.Equal(t, n, res.Finished, "every job finishes")
	for i, j := range res.Jobs {
		if i < warm {
			require.Zero(t, j.Wait, "job %d starts on a warm runner", i)
		} else {
			require.GreaterOrEqual(t, j.Wait, startup, "job %d waits for a runner to start", i)
		}
	}
	require.Equal(t, maxSize, res.MaxSize, "reaches Max and never exceeds it")
	for _, tk := range res.Ticks {
		require.LessOrEqual(t, size(tk), maxSize, "at %s", tk.At)
	}
	// Scale up fast: the first tick provisions everything Max allows, and
	// every runner is busy one start-up later.
	require.Equal(t, maxSize-warm, res.Ticks[0].Decision.Provision)
	require.Equal(t, 1, res.ScaleUps)
	allBusy := -1
	for i, tk := range res.Ticks {
		if tk.Busy == maxSize {
			allBusy = i
			break
		}
	}
	require.NotEqual(t, -1, allBusy)
	require.LessOrEqual(t, res.Ticks[allBusy].At, startup+tick)

	// Waits: no job waits longer than a start-up plus the rounds of Max
	// jobs ahead of it, and the last ones wait at least those rounds.
	rounds := time.Duration((n + maxSize - 1) / maxSize)
	require.LessOrEqual(t, res.WaitQuantile(0.95), startup+rounds*job+tick)
	require.LessOrEqual(t, res.WaitQuantile(1), startup+rounds*job+tick)
	require.GreaterOrEqual(t, res.WaitQuantile(1), (rounds-1)*job)

	// Down slowly: after the last job, in steps of at most half the pool,
	// a cooldown apart, never below the warm target.
	var lastEnd time.Duration
	for i, j := range res.Jobs {
		lastEnd = max(lastEnd, jobs[i].Arrive+j.Wait+jobs[i].Duration)
	}
	var downs []sim.Tick
	for _, tk := range res.Scaling() {
		if tk.Decision.Destroy > 0 {
			downs = append(downs, tk)
		}
	}
	require.GreaterOrEqual(t, len(downs), 2, "the pool shrinks after the burst")
	require.GreaterOrEqual(t, downs[0].At, lastEnd+autoscale.DefaultScaleDownCooldown-tick,
		"not before demand has stayed low for the cooldown")
	for i, tk := range downs {
		sz := tk.Idle + tk.Busy + tk.Provisioning
		require.LessOrEqual(t, tk.Decision.Destroy, (sz+1)/2, "at most half the pool a step")
		require.GreaterOrEqual(t, size(tk), warm)
		if i > 0 {
			require.GreaterOrEqual(t, tk.At-downs[i-1].At, autoscale.DefaultScaleDownCooldown)
		}
	}
}

// TestScenarioFlapping: 30 jobs of 30 s every minute, a load that comes
// and goes far faster than the scale-down cooldown. The default policy
// holds its runners; the same Decide with cooldowns and step caps
// switched off scales up and down with every wave.
func TestScenarioFlapping(t *testing.T) {
	t.Parallel()
	const (
		waves   = 30
		perWave = 30
		startup = 20 * time.Second
	)
	var jobs []sim.Job
	for w := range waves {
		for range perWave {
			jobs = append(jobs, sim.Job{Arrive: time.Duration(w) * time.Minute, Duration: 30 * time.Second})
		}
	}
	tuned := autoscale.Policy{Max: 50, AutoWarm: true, MinWarm: 2}
	naive := tuned
	naive.ScaleUpCooldown, naive.ScaleDownCooldown, naive.ScaleDownFraction = -1, -1, 1

	run := func(pol autoscale.Policy) *sim.Result {
		res, err := sim.Run(sim.Config{Policy: pol, Startup: startup, Initial: 2, Jobs: jobs, Until: waves * time.Minute})
		require.NoError(t, err)
		require.Equal(t, len(jobs), res.Finished)
		return res
	}
	good, bad := run(tuned), run(naive)
	naiveTable := strings.SplitAfter(sim.Table(bad.Scaling()), "\n")
	t.Logf("defaults, scaling decisions:\n%s%s", sim.Table(good.Scaling()), summary(good))
	t.Logf("no cooldowns or step caps, the first 3 minutes of %d scaling decisions:\n%s%s",
		len(bad.Scaling()), strings.Join(naiveTable[:1+9], ""), summary(bad))

	events := func(r *sim.Result) int { return r.ScaleUps + r.ScaleDowns }
	require.LessOrEqual(t, events(good), 2, "the defaults hardly scale")
	require.GreaterOrEqual(t, events(bad), 2*(waves-1), "without them, up and down with every wave")
	require.GreaterOrEqual(t, events(bad), 20*events(good))
	require.Zero(t, good.WaitQuantile(0.95), "held runners take every wave at once")
	require.GreaterOrEqual(t, bad.WaitQuantile(0.95), startup, "every wave waits for a start-up")
}

// TestScenarioScaleToZero: a pool with Min 0 and an automatic warm target
// runs a batch of jobs, goes to zero once idle, and scales up again for a
// job an hour later.
func TestScenarioScaleToZero(t *testing.T) {
	t.Parallel()
	const (
		startup = 20 * time.Second
		tick    = time.Second
		late    = time.Hour
	)
	pol := autoscale.Policy{Max: 20, AutoWarm: true, MinWarm: 1, DemandWindow: 10 * time.Minute, IdleToZero: 15 * time.Minute}
	var jobs []sim.Job
	for range 40 {
		jobs = append(jobs, sim.Job{Duration: 2 * time.Minute})
	}
	jobs = append(jobs, sim.Job{Arrive: late, Duration: time.Minute})
	res, err := sim.Run(sim.Config{Policy: pol, Startup: startup, Tick: tick, Jobs: jobs})
	require.NoError(t, err)
	t.Logf("scaling decisions:\n%s%s", sim.Table(res.Scaling()), summary(res))
	require.Equal(t, len(jobs), res.Finished)

	var batchEnd time.Duration
	for i, j := range res.Jobs[:40] {
		batchEnd = max(batchEnd, jobs[i].Arrive+j.Wait+jobs[i].Duration)
	}
	zero := time.Duration(-1)
	for _, tk := range res.Ticks {
		if tk.At > batchEnd && size(tk) == 0 {
			zero = tk.At
			break
		}
	}
	require.NotEqual(t, time.Duration(-1), zero, "the pool goes to zero")
	require.LessOrEqual(t, zero, batchEnd+pol.IdleToZero+autoscale.DefaultScaleDownCooldown+tick,
		"within the idle period and a cooldown")
	for _, tk := range res.Ticks {
		if tk.At >= zero && tk.At < late {
			require.Zero(t, size(tk), "stays at zero until the late job, at %s", tk.At)
		}
	}
	at := int(late / tick)
	require.Equal(t, late, res.Ticks[at].At)
	require.Positive(t, res.Ticks[at].Decision.Provision, "the late job scales the pool up")
	require.Equal(t, autoscale.WaitScalingUp, res.Ticks[at].Decision.Wait.Kind)
	require.Equal(t, startup, res.Jobs[40].Wait, "the late job waits one start-up")
}

// TestScenarioEphemeral: single-use runners, a 30 s job every 10 s, 3
// kept warm. Each job gets a fresh runner, and the warm pool, refilled as
// runners are used up, starts every job at once.
func TestScenarioEphemeral(t *testing.T) {
	t.Parallel()
	const warm = 3
	pol := autoscale.Policy{Max: 20, Warm: warm, Ephemeral: true}
	var jobs []sim.Job
	for i := range 60 {
		jobs = append(jobs, sim.Job{Arrive: time.Duration(i) * 10 * time.Second, Duration: 30 * time.Second})
	}
	res, err := sim.Run(sim.Config{Policy: pol, Startup: 20 * time.Second, Initial: warm, Jobs: jobs})
	require.NoError(t, err)
	var first []sim.Tick
	for _, tk := range res.Scaling() {
		if tk.At <= time.Minute {
			first = append(first, tk)
		}
	}
	t.Logf("the first minute's scaling decisions:\n%s%s", sim.Table(first), summary(res))

	require.Equal(t, len(jobs), res.Finished)
	used := map[int]int{}
	for i, j := range res.Jobs {
		require.Zero(t, j.Wait, "job %d starts on a warm runner", i)
		used[j.Runner]++
		require.Equal(t, 1, used[j.Runner], "runner %d runs a second job", j.Runner)
	}
	require.GreaterOrEqual(t, res.Provisioned, len(jobs)-warm, "every used runner is replaced")
	require.Zero(t, res.Destroyed)
	for _, tk := range res.Ticks {
		d := tk.Decision
		require.GreaterOrEqual(t, tk.Idle-d.Destroy+tk.Provisioning+d.Provision, tk.Queued+warm,
			"at %s: the warm target is kept, counting starting runners", tk.At)
	}
	last := res.Ticks[len(res.Ticks)-1]
	require.Equal(t, warm, size(last), "warm runners wait for the next job")
}

// TestScenarioLag: jobs the autoscaler sees as consumer lag 30 s before
// they are queued find runners started for them.
func TestScenarioLag(t *testing.T) {
	t.Parallel()
	const startup = 20 * time.Second
	var jobs []sim.Job
	for range 20 {
		jobs = append(jobs, sim.Job{Arrive: time.Minute, Duration: time.Minute})
	}
	cfg := sim.Config{Policy: autoscale.Policy{Max: 50}, Startup: startup, Jobs: jobs}
	blind, err := sim.Run(cfg)
	require.NoError(t, err)
	cfg.LagDelay = 30 * time.Second
	seeing, err := sim.Run(cfg)
	require.NoError(t, err)
	t.Logf("without lag:\n%s%s", sim.Table(blind.Scaling()), summary(blind))
	t.Logf("with lag:\n%s%s", sim.Table(seeing.Scaling()), summary(seeing))
	require.Equal(t, startup, blind.WaitQuantile(1))
	require.Zero(t, seeing.WaitQuantile(1))
	require.Equal(t, 30*time.Second, seeing.Scaling()[0].At)
	require.Equal(t, 20, seeing.Scaling()[0].Lag)
}

// TestPropertySimulation runs random loads through random valid policies:
//
//   - LIVENESS: every job finishes, whatever the policy;
//   - SAFETY: the pool never grows beyond Max, each job runs once, and an
//     ephemeral pool's runner runs at most one job;
//   - SAFETY: two scale-ups are at least ScaleUpCooldown apart unless the
//     pool is ephemeral, and a scale-down comes at least
//     ScaleDownCooldown after any scaling event.
func TestPropertySimulation(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		pol := genPolicy(t)
		var jobs []sim.Job
		for range rapid.IntRange(0, 40).Draw(t, "jobs") {
			jobs = append(jobs, sim.Job{
				Arrive:   time.Duration(rapid.IntRange(0, 600).Draw(t, "arrive")) * time.Second,
				Duration: time.Duration(rapid.IntRange(0, 300).Draw(t, "duration")) * time.Second,
			})
		}
		cfg := sim.Config{
			Policy:   pol,
			Startup:  time.Duration(rapid.IntRange(0, 60).Draw(t, "startup")) * time.Second,
			Tick:     time.Duration(rapid.IntRange(2, 10).Draw(t, "tick")) * time.Second,
			LagDelay: time.Duration(rapid.IntRange(0, 30).Draw(t, "lag")) * time.Second,
			Initial:  rapid.IntRange(0, pol.Max).Draw(t, "initial"),
			Jobs:     jobs,
		}
		res, err := sim.Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if res.Finished != len(jobs) {
			t.Fatalf("LIVENESS: %d of %d jobs finished by %s", res.Finished, len(jobs), res.End)
		}
		if res.MaxSize > pol.Max {
			t.Fatalf("the pool reached %d runners, Max is %d", res.MaxSize, pol.Max)
		}
		used := map[int]int{}
		for i, j := range res.Jobs {
			if !j.Started || !j.Finished {
				t.Fatalf("job %d: %+v", i, j)
			}
			used[j.Runner]++
			if pol.Ephemeral && used[j.Runner] > 1 {
				t.Fatalf("ephemeral runner %d ran %d jobs", j.Runner, used[j.Runner])
			}
		}
		p := pol.WithDefaults()
		lastUp, lastAny := time.Duration(-1), time.Duration(-1)
		for _, tk := range res.Scaling() {
			if tk.Decision.Provision > 0 {
				if !p.Ephemeral && p.ScaleUpCooldown > 0 && lastUp >= 0 && tk.At-lastUp < p.ScaleUpCooldown {
					t.Fatalf("scale-ups at %s and %s", lastUp, tk.At)
				}
				lastUp = tk.At
			} else if p.ScaleDownCooldown > 0 && lastAny >= 0 && tk.At-lastAny < p.ScaleDownCooldown {
				t.Fatalf("a scaling event at %s and a scale-down at %s", lastAny, tk.At)
			}
			lastAny = tk.At
		}
	})
}
