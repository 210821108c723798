package autoscale

import (
	"cmp"
	"errors"
	"fmt"
	"time"
)

// Defaults of Policy. The package documentation explains each choice.
const (
	DefaultWarmFraction      = 0.10
	DefaultDemandWindow      = 15 * time.Minute
	DefaultScaleUpCooldown   = 10 * time.Second
	DefaultScaleDownCooldown = 5 * time.Minute
	DefaultScaleDownFraction = 0.5
	DefaultIdleToZero        = 30 * time.Minute
)

// Policy is how one pool scales. The zero value of a duration or fraction
// means its default (the Default constants); a negative duration switches
// the mechanism off where that is allowed. Counts mean what they say: a
// zero Min or Warm is zero.
type Policy struct {
	// Min and Max bound the pool's size: idle, busy and provisioning
	// runners together. Max must be at least 1 and at least Min.
	Min, Max int

	// Warm is a fixed warm target: how many idle runners to keep ready
	// beyond the ones queued work and consumer lag will take.
	Warm int
	// AutoWarm sizes the warm target from demand instead: WarmFraction of
	// the peak demand (busy + queued) over the last DemandWindow, rounded
	// up, and never below MinWarm. Warm must then be 0.
	AutoWarm bool
	// WarmFraction is the share of recent peak demand kept warm; 0 means
	// DefaultWarmFraction. It is taken to a millionth, so 0.035 of 200 is
	// 7, not the 8 that floating point gives. At most 1.
	WarmFraction float64
	// MinWarm is the least automatic warm target. Only with AutoWarm.
	MinWarm int
	// DemandWindow is how far back the automatic warm target looks for
	// its peak; 0 means DefaultDemandWindow.
	DemandWindow time.Duration

	// ScaleUpCooldown is the least time between two scale-ups; 0 means
	// DefaultScaleUpCooldown, negative means none. Ephemeral pools do not
	// wait for it.
	ScaleUpCooldown time.Duration
	// ScaleDownCooldown is the least time from any scaling event to a
	// scale-down, and how long demand must have stayed low before the
	// pool shrinks below it: a scale-down never goes below the peak
	// demand of the last ScaleDownCooldown plus the warm target. 0 means
	// DefaultScaleDownCooldown, negative means none.
	ScaleDownCooldown time.Duration
	// ScaleDownFraction caps one scale-down at this share of the pool's
	// size, rounded up, so a pool shrinks in steps; 0 means
	// DefaultScaleDownFraction, 1 or more means no cap.
	ScaleDownFraction float64
	// ScaleDownMax, if positive, caps one scale-down at this many runners
	// as well.
	ScaleDownMax int

	// IdleToZero is how long a pool with Min 0 must have had no demand
	// at all (nothing busy, queued or lagging) before its warm target
	// drops to zero and it shrinks to nothing, without step caps. 0 means
	// DefaultIdleToZero, negative means never.
	IdleToZero time.Duration

	// Ephemeral pools' runners take one job and exit: each job consumes a
	// runner, and provisioning replacements is how the pool keeps its
	// size, so it does not wait for ScaleUpCooldown.
	Ephemeral bool
}

// WithDefaults returns p with its zero durations and fractions set to the
// defaults.
func (p Policy) WithDefaults() Policy {
	p.WarmFraction = cmp.Or(p.WarmFraction, DefaultWarmFraction)
	p.DemandWindow = cmp.Or(p.DemandWindow, DefaultDemandWindow)
	p.ScaleUpCooldown = cmp.Or(p.ScaleUpCooldown, DefaultScaleUpCooldown)
	p.ScaleDownCooldown = cmp.Or(p.ScaleDownCooldown, DefaultScaleDownCooldown)
	p.ScaleDownFraction = cmp.Or(p.ScaleDownFraction, DefaultScaleDownFraction)
	p.IdleToZero = cmp.Or(p.IdleToZero, DefaultIdleToZero)
	return p
}

// HistoryWindow is how much demand history Decide reads for a pool with
// this policy: the longer of DemandWindow and ScaleDownCooldown. A
// History kept for the pool should hold at least this much.
func (p Policy) HistoryWindow() time.Duration {
	p = p.WithDefaults()
	return max(p.DemandWindow, p.ScaleDownCooldown)
}

// Validate reports what is wrong with p, if anything.
func (p Policy) Validate() error {
	p = p.WithDefaults()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if p.Max < 1 {
		bad("autoscale: Max must be at least 1, not %d", p.Max)
	}
	if p.Min < 0 {
		bad("autoscale: Min must not be negative (%d)", p.Min)
	}
	if p.Min > p.Max {
		bad("autoscale: Min (%d) must not exceed Max (%d)", p.Min, p.Max)
	}
	if p.Warm < 0 || p.MinWarm < 0 {
		bad("autoscale: Warm (%d) and MinWarm (%d) must not be negative", p.Warm, p.MinWarm)
	}
	if p.AutoWarm && p.Warm != 0 {
		bad("autoscale: Warm (%d) is a fixed warm target, AutoWarm sizes it from demand: set one of them (MinWarm is the automatic target's floor)", p.Warm)
	}
	if !p.AutoWarm && p.MinWarm != 0 {
		bad("autoscale: MinWarm (%d) is the floor of the automatic warm target and needs AutoWarm; a fixed target is Warm", p.MinWarm)
	}
	if p.WarmFraction < 0 || p.WarmFraction > 1 {
		bad("autoscale: WarmFraction must be more than 0 and at most 1, not %v", p.WarmFraction)
	}
	if p.DemandWindow < 0 {
		bad("autoscale: DemandWindow must not be negative (%s)", p.DemandWindow)
	}
	if p.ScaleDownFraction < 0 {
		bad("autoscale: ScaleDownFraction must not be negative (%v)", p.ScaleDownFraction)
	}
	if p.ScaleDownMax < 0 {
		bad("autoscale: ScaleDownMax must not be negative (%d)", p.ScaleDownMax)
	}
	return errors.Join(errs...)
}

// millionths is f taken to a millionth, for exact integer rounding.
func millionths(f float64) int64 { return int64(f*1e6 + 0.5) }

// ceilShare is ⌈f × n⌉ for n ≥ 0 with f taken to a millionth.
func ceilShare(f float64, n int) int {
	return int((int64(n)*millionths(f) + 999_999) / 1_000_000)
}
