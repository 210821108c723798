package autoscale_test

import (
	"math/big"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/cikit/cikit/fleet/autoscale"
)

// genPolicy draws a valid policy, defaults and switched-off mechanisms
// included.
func genPolicy(t *rapid.T) autoscale.Policy {
	p := autoscale.Policy{Max: rapid.IntRange(1, 40).Draw(t, "max")}
	p.Min = rapid.IntRange(0, min(p.Max, 5)).Draw(t, "min")
	if p.AutoWarm = rapid.Bool().Draw(t, "auto"); p.AutoWarm {
		p.MinWarm = rapid.IntRange(0, 4).Draw(t, "minWarm")
		p.WarmFraction = rapid.SampledFrom([]float64{0, 0.05, 0.1, 0.3, 1}).Draw(t, "warmFraction")
		p.DemandWindow = rapid.SampledFrom([]time.Duration{0, time.Minute, 10 * time.Minute}).Draw(t, "demandWindow")
	} else {
		p.Warm = rapid.IntRange(0, 8).Draw(t, "warm")
	}
	p.ScaleUpCooldown = rapid.SampledFrom([]time.Duration{0, -1, 5 * time.Second, time.Minute}).Draw(t, "upCooldown")
	p.ScaleDownCooldown = rapid.SampledFrom([]time.Duration{0, -1, time.Minute, 10 * time.Minute}).Draw(t, "downCooldown")
	p.ScaleDownFraction = rapid.SampledFrom([]float64{0, 0.1, 0.5, 1, 3}).Draw(t, "downFraction")
	p.ScaleDownMax = rapid.IntRange(0, 4).Draw(t, "downMax")
	p.IdleToZero = rapid.SampledFrom([]time.Duration{0, -1, time.Minute, 45 * time.Minute}).Draw(t, "idleToZero")
	p.Ephemeral = rapid.Bool().Draw(t, "ephemeral")
	return p
}

// genTime draws zero, or a time around now: mostly before it, sometimes
// after (a clock that stepped back).
func genTime(t *rapid.T, label string) time.Time {
	if rapid.IntRange(0, 3).Draw(t, label+"Zero") == 0 {
		return time.Time{}
	}
	return now.Add(-time.Duration(rapid.IntRange(-30, 4000).Draw(t, label)) * time.Second)
}

// genPool draws a pool with valid counts; its size may exceed its Max.
func genPool(t *rapid.T, name string) autoscale.Pool {
	p := autoscale.Pool{
		Name:          name,
		Policy:        genPolicy(t),
		Idle:          rapid.IntRange(0, 50).Draw(t, "idle"),
		Busy:          rapid.IntRange(0, 50).Draw(t, "busy"),
		Queued:        rapid.IntRange(0, 80).Draw(t, "queued"),
		Lag:           rapid.IntRange(0, 10).Draw(t, "lag"),
		StartupHint:   rapid.SampledFrom([]time.Duration{0, 20 * time.Second, time.Minute}).Draw(t, "hint"),
		LastScaleUp:   genTime(t, "lastUp"),
		LastScaleDown: genTime(t, "lastDown"),
		IdleSince:     genTime(t, "idleSince"),
	}
	for range rapid.IntRange(0, 12).Draw(t, "provisioning") {
		p.Provisioning = append(p.Provisioning, now.Add(-time.Duration(rapid.IntRange(0, 120).Draw(t, "age"))*time.Second))
	}
	for range rapid.IntRange(0, 20).Draw(t, "samples") {
		p.Demand = append(p.Demand, autoscale.Sample{
			At:     now.Add(-time.Duration(rapid.IntRange(-60, 1500).Draw(t, "sampleAge")) * time.Second),
			Demand: rapid.IntRange(0, 120).Draw(t, "demand"),
		})
	}
	slices.SortFunc(p.Demand, func(a, b autoscale.Sample) int { return a.At.Compare(b.At) })
	return p
}

// model computes, independently of Decide and exactly, what a pool's
// decision must respect.
type model struct {
	pol    autoscale.Policy // with defaults
	toZero bool             // the idle period has passed
	warm   int
	floor  int // no scale-down goes below it, unless to zero
	size   int
}

func modelOf(p autoscale.Pool) model {
	pol := p.Policy.WithDefaults()
	m := model{pol: pol, size: p.Idle + p.Busy + len(p.Provisioning)}
	m.toZero = pol.Min == 0 && pol.IdleToZero > 0 && p.Busy+p.Queued+p.Lag == 0 &&
		!p.IdleSince.IsZero() && !p.IdleSince.After(now.Add(-pol.IdleToZero))
	peakSince := func(window time.Duration, peak int) int {
		for _, s := range p.Demand {
			if s.At.After(now.Add(-window)) && !s.At.After(now) {
				peak = max(peak, s.Demand)
			}
		}
		return peak
	}
	switch {
	case m.toZero:
	case !pol.AutoWarm:
		m.warm = pol.Warm
	default:
		peak := peakSince(pol.DemandWindow, p.Busy+p.Queued)
		r := new(big.Rat).Mul(new(big.Rat).SetFloat64(pol.WarmFraction), big.NewRat(int64(peak), 1))
		q, rem := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
		m.warm = int(q.Int64())
		// WarmFraction is taken to a millionth: a remainder below that
		// is float noise, not a share of a runner.
		if new(big.Rat).SetFrac(rem, r.Denom()).Cmp(big.NewRat(1, 1_000_000)) >= 0 {
			m.warm++
		}
		m.warm = max(m.warm, pol.MinWarm)
	}
	if pol.ScaleDownCooldown > 0 && !m.toZero {
		m.floor = min(peakSince(pol.ScaleDownCooldown, p.Busy+p.Queued+p.Lag)+m.warm, pol.Max)
	}
	return m
}

func inCooldown(cooldown time.Duration, last time.Time) bool {
	return cooldown > 0 && !last.IsZero() && now.Sub(last) < cooldown
}

// TestPropertyDecide checks every decision of random snapshots against
// the package's guarantees.
//
//   - SAFETY: Min ≤ Desired ≤ Max, and Desired is busy + queued + lag +
//     warm clamped to them, with the warm target of the model.
//   - SAFETY: provisioning and destroying are never negative nor both;
//     a scale-up never takes the pool beyond Max; the pool never
//     provisions while idle runners cover queued, lag and warm and it has
//     its Min; a scale-up waits out ScaleUpCooldown unless ephemeral.
//   - SAFETY: it destroys only idle runners, leaving queued jobs, lag and
//     the warm target theirs; never within ScaleDownCooldown of either
//     last event; never below Desired nor, unless going to zero, below
//     the last cooldown's peak plus warm; never more than a step's cap
//     unless going to zero.
//   - LIVENESS: a pool below Desired out of its cooldown provisions the
//     difference; one above its target out of its cooldown with spare
//     idle runners destroys some.
//   - The Wait describes the plan's outcome.
//   - Decide is deterministic, leaves the snapshot alone, and decides
//     each pool as it would alone.
func TestPropertyDecide(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		var pools []autoscale.Pool
		for i := range rapid.IntRange(1, 3).Draw(t, "pools") {
			pools = append(pools, genPool(t, string(rune('a'+i))))
		}
		snap := autoscale.Snapshot{Now: now, Pools: pools}
		before := cloneSnapshot(snap)
		ds := autoscale.Decide(snap)
		if diff := cmp.Diff(before, snap); diff != "" {
			t.Fatalf("Decide modified the snapshot (-before +after):\n%s", diff)
		}
		if diff := cmp.Diff(ds, autoscale.Decide(cloneSnapshot(snap))); diff != "" {
			t.Fatalf("Decide is not deterministic (-first +second):\n%s", diff)
		}
		if len(ds) != len(pools) {
			t.Fatalf("%d decisions for %d pools", len(ds), len(pools))
		}
		for i, p := range pools {
			d := ds[i]
			alone := autoscale.Decide(autoscale.Snapshot{Now: now, Pools: []autoscale.Pool{p}})
			if diff := cmp.Diff(d, alone[0]); diff != "" {
				t.Fatalf("pool %s decided differently alone (-together +alone):\n%s", p.Name, diff)
			}
			checkDecision(t, p, d)
		}
	})
}

func checkDecision(t *rapid.T, p autoscale.Pool, d autoscale.Decision) {
	m := modelOf(p)
	pol := m.pol
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("pool %+v\ndecision %+v\n"+format, append([]any{p, d}, args...)...)
	}
	if d.Pool != p.Name || d.Size != m.size {
		fail("names pool %q of size %d", d.Pool, d.Size)
	}
	if d.Warm != m.warm {
		fail("warm target %d, the model's is %d", d.Warm, m.warm)
	}
	if want := min(max(p.Busy+p.Queued+p.Lag+m.warm, pol.Min), pol.Max); d.Desired != want {
		fail("desired %d, want %d", d.Desired, want)
	}
	if d.Desired < pol.Min || d.Desired > pol.Max {
		fail("desired outside [Min, Max]")
	}
	if d.Provision < 0 || d.Destroy < 0 || d.Provision > 0 && d.Destroy > 0 {
		fail("provision %d and destroy %d", d.Provision, d.Destroy)
	}

	// Scale-up.
	if d.Provision > 0 {
		if m.size+d.Provision > pol.Max {
			fail("a scale-up beyond Max")
		}
		if p.Idle >= p.Queued+p.Lag+m.warm && m.size >= pol.Min {
			fail("provisions though idle runners cover queued, lag and warm")
		}
		if !pol.Ephemeral && inCooldown(pol.ScaleUpCooldown, p.LastScaleUp) {
			fail("provisions within the scale-up cooldown")
		}
	}
	upFree := pol.Ephemeral || !inCooldown(pol.ScaleUpCooldown, p.LastScaleUp)
	if d.Desired > m.size && upFree && d.Provision != d.Desired-m.size {
		fail("LIVENESS: provisions %d to reach desired", d.Provision)
	}

	// Scale-down.
	downFree := !inCooldown(pol.ScaleDownCooldown, p.LastScaleDown) && !inCooldown(pol.ScaleDownCooldown, p.LastScaleUp)
	spare := p.Idle - p.Queued - p.Lag - m.warm
	target := max(d.Desired, m.floor)
	if d.Destroy > 0 {
		if d.Destroy > spare {
			fail("destroys %d of %d spare idle runners", d.Destroy, spare)
		}
		if !downFree {
			fail("destroys within the scale-down cooldown")
		}
		if m.size-d.Destroy < target {
			fail("shrinks below max(desired, recent peak + warm) = %d", target)
		}
		if !m.toZero && pol.ScaleDownFraction < 1 {
			capN := new(big.Rat).Mul(new(big.Rat).SetFloat64(pol.ScaleDownFraction), big.NewRat(int64(m.size), 1))
			if big.NewRat(int64(d.Destroy-1), 1).Cmp(capN) >= 0 {
				fail("destroys %d, more than a step of %s", d.Destroy, capN.FloatString(2))
			}
		}
		if !m.toZero && pol.ScaleDownMax > 0 && d.Destroy > pol.ScaleDownMax {
			fail("destroys more than ScaleDownMax")
		}
	}
	if m.size > target && spare > 0 && downFree && d.Destroy == 0 {
		fail("LIVENESS: keeps %d spare idle runners above the target %d", spare, target)
	}

	// Wait.
	w := d.Wait
	idle, startingN := p.Idle-d.Destroy, len(p.Provisioning)+d.Provision
	if w.Idle != idle || w.Starting != startingN || w.Queued != p.Queued || w.Max != pol.Max {
		fail("wait counts")
	}
	n := max(p.Queued, 1)
	switch w.Kind {
	case autoscale.WaitAvailable:
		if n > idle {
			fail("available, though %d idle for %d", idle, n)
		}
	case autoscale.WaitScalingUp:
		if n <= idle || n > idle+startingN {
			fail("scaling up, with %d idle and %d starting for %d", idle, startingN, n)
		}
		if w.ETAKnown != (p.StartupHint > 0) || w.ETA < 0 || w.ETA > p.StartupHint {
			fail("ETA %s (known %v) with a hint of %s", w.ETA, w.ETAKnown, p.StartupHint)
		}
	case autoscale.WaitAtMax:
		if n <= idle+startingN || idle+p.Busy+startingN < pol.Max || w.Beyond != max(p.Queued-idle-startingN, 0) {
			fail("at max wrongly")
		}
	case autoscale.WaitWarmPoolEmpty:
		if n <= idle+startingN || idle+p.Busy+startingN >= pol.Max {
			fail("warm pool empty wrongly")
		}
		if upFree && p.Queued > 0 {
			fail("warm pool empty for a queued job, though the pool could scale up")
		}
	default:
		fail("wait kind %q", w.Kind)
	}
}

func cloneSnapshot(s autoscale.Snapshot) autoscale.Snapshot {
	s.Pools = slices.Clone(s.Pools)
	for i := range s.Pools {
		s.Pools[i].Provisioning = slices.Clone(s.Pools[i].Provisioning)
		s.Pools[i].Demand = slices.Clone(s.Pools[i].Demand)
	}
	return s
}

// TestPropertyHistory checks History against a list of every sample
// added: it keeps exactly the in-order samples of the last Window before
// the newest, its peak is theirs, and IdleSince is the first sample of
// the newest run without demand.
func TestPropertyHistory(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		window := time.Duration(rapid.IntRange(1, 30).Draw(t, "window")) * time.Second
		h := autoscale.History{Window: window}
		var all []autoscale.Sample
		at := now
		for range rapid.IntRange(1, 60).Draw(t, "adds") {
			s := autoscale.Sample{
				At:     at.Add(time.Duration(rapid.IntRange(-3, 10).Draw(t, "step")) * time.Second),
				Demand: rapid.SampledFrom([]int{0, 0, 1, 5, 40}).Draw(t, "demand"),
			}
			h.Add(s)
			if s.At.Before(at) && len(all) > 0 {
				continue // ignored
			}
			all = append(all, s)
			at = s.At

			var kept []autoscale.Sample
			peak := 0
			for _, k := range all {
				if k.At.After(at.Add(-window)) {
					kept = append(kept, k)
					peak = max(peak, k.Demand)
				}
			}
			if diff := cmp.Diff(kept, h.Samples()); diff != "" {
				t.Fatalf("samples (-want +got):\n%s", diff)
			}
			if h.Peak() != peak {
				t.Fatalf("peak %d, want %d", h.Peak(), peak)
			}
			var idleSince time.Time
			for i := len(all) - 1; i >= 0 && all[i].Demand == 0; i-- {
				idleSince = all[i].At
			}
			if !h.IdleSince().Equal(idleSince) {
				t.Fatalf("idle since %s, want %s", h.IdleSince(), idleSince)
			}
		}
	})
}
