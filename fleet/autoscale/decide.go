package autoscale

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Snapshot is what Decide reads: the moment, and the state of each pool
// at it. The caller builds one each tick from its own view of runners and
// queues.
type Snapshot struct {
	Now   time.Time
	Pools []Pool
}

// Pool is one runner pool as the caller sees it at Snapshot.Now. A runner
// is counted in exactly one of Idle, Busy and Provisioning; runners being
// destroyed, or exiting after their single job, are counted in none.
type Pool struct {
	Name   string
	Policy Policy

	// Idle runners are running and waiting for work.
	Idle int
	// Busy runners are running a job.
	Busy int
	// Provisioning holds, for each runner asked for and not yet waiting
	// for work, when it was asked for (fleet's Instance.Created). Decide
	// counts them so it does not provision twice for the same demand,
	// and ages them for the wait estimate.
	Provisioning []time.Time

	// Queued is how many queued jobs this pool's runners could take.
	Queued int
	// Lag is demand on its way: events not yet turned into queued jobs
	// that will be jobs for this pool (consumer lag, as the caller
	// estimates it). Decide provisions for it as if it were queued.
	Lag int

	// StartupHint is the backend's typical time from provisioning to a
	// runner waiting for work (fleet's BackendInfo.StartupHint); 0 means
	// unknown, and waits then carry no estimate.
	StartupHint time.Duration

	// LastScaleUp and LastScaleDown are when the caller last provisioned
	// or destroyed runners for the pool as a plan said; zero if never.
	LastScaleUp, LastScaleDown time.Time

	// Demand is the recent demand record, from History.Samples. Decide
	// reads the samples of the last Policy.HistoryWindow up to Now.
	Demand []Sample
	// IdleSince is when demand last fell to zero and stayed there, from
	// History.IdleSince; zero if there is demand now or it is unknown.
	// Only a known idle period takes a pool to zero.
	IdleSince time.Time
}

// Size is how many runners the pool has: idle, busy and provisioning.
func (p *Pool) Size() int { return p.Idle + p.Busy + len(p.Provisioning) }

func (p *Pool) validate() error {
	if p.Idle < 0 || p.Busy < 0 || p.Queued < 0 || p.Lag < 0 {
		return fmt.Errorf("autoscale: negative count (idle %d, busy %d, queued %d, lag %d)", p.Idle, p.Busy, p.Queued, p.Lag)
	}
	if p.StartupHint < 0 {
		return errors.New("autoscale: negative StartupHint")
	}
	return p.Policy.Validate()
}

// Decision is what Decide plans for one pool. The caller provisions
// Provision runners, or destroys Destroy of the idle ones, never both; it
// then records the time as the pool's LastScaleUp or LastScaleDown. A plan
// carried out in part (a backend at capacity, a runner that would not
// start) needs no repair: the next snapshot shows what there is, and
// Decide plans from that.
type Decision struct {
	Pool string
	// Size is the pool's size in the snapshot.
	Size int
	// Warm is the warm target Decide used.
	Warm int
	// Desired is busy + queued + lag + Warm, clamped to [Min, Max]: the
	// size the pool should have. It scales up to it at once, but down
	// only after the cooldown, in steps, and not below recent peak
	// demand, so Size may stay above Desired for a while.
	Desired int
	// Provision is how many runners to provision.
	Provision int
	// Destroy is how many idle runners to destroy.
	Destroy int
	// Reason says in words why.
	Reason string
	// Wait says what a job queued for the pool waits for once the plan is
	// carried out.
	Wait Wait
}

// Decide plans each pool of s, in the order of s.Pools. It is a pure
// function: it reads no clock, draws no random number, and does not
// modify s. A pool whose policy or counts are invalid gets a decision
// that changes nothing and whose Reason says what is wrong.
func Decide(s Snapshot) []Decision {
	out := make([]Decision, len(s.Pools))
	for i := range s.Pools {
		out[i] = decide(s.Now, &s.Pools[i])
	}
	return out
}

func decide(now time.Time, p *Pool) Decision {
	pol := p.Policy.WithDefaults()
	size := p.Size()
	d := Decision{Pool: p.Name, Size: size, Desired: size}
	if err := p.validate(); err != nil {
		d.Reason = "cannot decide: " + err.Error()
		d.Wait = waitFor(now, p, pol, d)
		return d
	}

	toZero := pol.Min == 0 && pol.IdleToZero > 0 && p.Busy+p.Queued+p.Lag == 0 &&
		!p.IdleSince.IsZero() && now.Sub(p.IdleSince) >= pol.IdleToZero
	if !toZero {
		d.Warm = warmTarget(now, p, pol)
	}
	need := p.Busy + p.Queued + p.Lag + d.Warm
	d.Desired = min(max(need, pol.Min), pol.Max)
	var why strings.Builder
	fmt.Fprintf(&why, "need %d (busy %d + queued %d + lag %d + warm %d)", need, p.Busy, p.Queued, p.Lag, d.Warm)
	switch {
	case need > pol.Max:
		fmt.Fprintf(&why, ", capped at max %d", pol.Max)
	case need < pol.Min:
		fmt.Fprintf(&why, ", raised to min %d", pol.Min)
	}
	if toZero {
		fmt.Fprintf(&why, ", idle for %s", now.Sub(p.IdleSince))
	}
	fmt.Fprintf(&why, "; have %d", size)

	switch {
	case d.Desired > size:
		want := d.Desired - size
		if left := cooldownLeft(now, pol.ScaleUpCooldown, p.LastScaleUp); left > 0 && !pol.Ephemeral {
			fmt.Fprintf(&why, ": scale-up by %d held by cooldown for %s", want, left)
			break
		}
		d.Provision = want
		fmt.Fprintf(&why, ": provision %d", want)
	case d.Desired < size:
		d.Destroy = scaleDown(now, p, pol, d, toZero, &why)
	}
	d.Reason = why.String()
	d.Wait = waitFor(now, p, pol, d)
	return d
}

// scaleDown returns how many idle runners to destroy from a pool larger
// than desired, and says why in why.
func scaleDown(now time.Time, p *Pool, pol Policy, d Decision, toZero bool, why *strings.Builder) int {
	target := d.Desired
	if !toZero && pol.ScaleDownCooldown > 0 {
		// Hold what the last cooldown's demand needed: a load that comes
		// and goes faster than the cooldown keeps its runners.
		recent := p.Busy + p.Queued + p.Lag
		from := now.Add(-pol.ScaleDownCooldown)
		for _, s := range p.Demand {
			if s.At.After(from) && !s.At.After(now) {
				recent = max(recent, s.Demand)
			}
		}
		if floor := min(recent+d.Warm, pol.Max); floor > target {
			target = floor
			if target >= d.Size {
				fmt.Fprintf(why, ": keeping them for the last %s's peak demand of %d", pol.ScaleDownCooldown, recent)
				return 0
			}
			fmt.Fprintf(why, ", keeping %d for the last %s's peak demand of %d", target, pol.ScaleDownCooldown, recent)
		}
	}
	surplus := d.Size - target
	// Only idle runners that queued jobs, lag and the warm target leave
	// over are spare: a surplus of provisioning runners is destroyed once
	// they are idle, so the pool keeps the runners that are ready now.
	n := min(surplus, max(p.Idle-p.Queued-p.Lag-d.Warm, 0))
	if n == 0 {
		fmt.Fprintf(why, ": %d more than needed, none of them spare idle", surplus)
		return 0
	}
	if !toZero {
		step := d.Size
		if pol.ScaleDownFraction < 1 {
			step = ceilShare(pol.ScaleDownFraction, d.Size)
		}
		if pol.ScaleDownMax > 0 {
			step = min(step, pol.ScaleDownMax)
		}
		if step < n {
			fmt.Fprintf(why, ", %d spare idle, at most %d a step", n, step)
			n = step
		}
	}
	left := max(cooldownLeft(now, pol.ScaleDownCooldown, p.LastScaleDown), cooldownLeft(now, pol.ScaleDownCooldown, p.LastScaleUp))
	if left > 0 {
		fmt.Fprintf(why, ": scale-down by %d held by cooldown for %s", n, left)
		return 0
	}
	fmt.Fprintf(why, ": destroy %d idle", n)
	return n
}

// warmTarget is the pool's warm target at now.
func warmTarget(now time.Time, p *Pool, pol Policy) int {
	if !pol.AutoWarm {
		return pol.Warm
	}
	peak := p.Busy + p.Queued
	from := now.Add(-pol.DemandWindow)
	for _, s := range p.Demand {
		if s.At.After(from) && !s.At.After(now) {
			peak = max(peak, s.Demand)
		}
	}
	return max(ceilShare(pol.WarmFraction, peak), pol.MinWarm)
}

// cooldownLeft is how much of a cooldown that started at last is left at
// now; nothing if there is no cooldown or no such event. A last in the
// future (a clock that stepped back) holds the whole cooldown.
func cooldownLeft(now time.Time, cooldown time.Duration, last time.Time) time.Duration {
	if cooldown <= 0 || last.IsZero() {
		return 0
	}
	return min(cooldown-now.Sub(last), cooldown)
}

// waitFor says what the last job queued for the pool (or the next to
// come, if none is queued) waits for once d is carried out.
func waitFor(now time.Time, p *Pool, pol Policy, d Decision) Wait {
	w := Wait{
		Idle:     p.Idle - d.Destroy,
		Starting: len(p.Provisioning) + d.Provision,
		Queued:   p.Queued,
		Max:      pol.Max,
	}
	n := max(p.Queued, 1)
	switch {
	case n <= w.Idle:
		w.Kind = WaitAvailable
	case n <= w.Idle+w.Starting:
		w.Kind = WaitScalingUp
		if p.StartupHint > 0 {
			ready := make([]time.Duration, 0, w.Starting)
			for _, at := range p.Provisioning {
				ready = append(ready, max(p.StartupHint-now.Sub(at), 0))
			}
			for range d.Provision {
				ready = append(ready, p.StartupHint)
			}
			slices.Sort(ready)
			w.ETA, w.ETAKnown = ready[n-w.Idle-1], true
		}
	case w.Idle+p.Busy+w.Starting >= pol.Max:
		w.Kind = WaitAtMax
		w.Beyond = max(p.Queued-w.Idle-w.Starting, 0)
	default:
		w.Kind = WaitWarmPoolEmpty
		if !pol.Ephemeral {
			w.Cooldown = max(cooldownLeft(now, pol.ScaleUpCooldown, p.LastScaleUp), 0)
		}
		if p.StartupHint > 0 {
			w.ETA, w.ETAKnown = w.Cooldown+p.StartupHint, true
		}
	}
	return w
}
