// Package autoscale decides how many runners each runner pool of a fleet
// should have, so that jobs find warm runners waiting instead of waiting
// for one to boot. The decision is a pure function, Decide, from a
// Snapshot of the pools to a Decision per pool: how many runners to
// provision, how many idle ones to destroy, the size the pool should have,
// the reason in words, and what a queued job waits for. The fleet manager
// builds the snapshot each tick, carries the decisions out and records
// when it did; package autoscale/sim runs Decide against simulated loads
// to tune policies.
//
// The package depends on nothing of the project, so package fleet can use
// it.
//
// # The decision
//
// For each pool, with warm its warm target:
//
//	desired = busy + queued + lag + warm, clamped to [Min, Max]
//
// Lag, events not yet turned into queued jobs, is demand that is about to
// arrive, and is provisioned for as if it were queued.
//
//   - Up fast: a pool smaller than desired provisions the difference at
//     once, in one step. Runners still provisioning count as the pool's,
//     so demand seen again while they boot is not provisioned twice. The
//     only brake is a short ScaleUpCooldown between scale-ups; ephemeral
//     pools, whose every job consumes a runner, do not wait for it.
//   - Down slowly: a pool larger than desired destroys idle runners only
//     once ScaleDownCooldown has passed since its last scaling event of
//     either direction; not below the peak demand of the last
//     ScaleDownCooldown plus the warm target, so a load that comes and
//     goes faster than the cooldown keeps its runners; at most
//     ScaleDownFraction of the pool (and ScaleDownMax runners) per step;
//     and only idle runners that queued jobs, lag and the warm target do
//     not need. Busy and provisioning runners are never destroyed.
//   - Warm target: a fixed Warm, or with AutoWarm, WarmFraction of the
//     peak demand (busy + queued) over the last DemandWindow, rounded up,
//     and at least MinWarm.
//   - To zero: a pool with Min 0 that has had no demand at all for
//     IdleToZero drops its warm target to zero and destroys every idle
//     runner in one step (still after the cooldown). The next job scales
//     it up again.
//
// Scale-up and scale-down never happen in the same decision.
//
// # Why am I waiting?
//
// Each Decision carries a Wait for the last job queued for the pool (or
// the next to come): WaitAvailable (an idle runner takes it),
// WaitScalingUp (a runner is starting for it, with an ETA from the
// backend's start-up hint and the runner's age), WaitWarmPoolEmpty
// (nothing idle or starting; the pool grows when its scale-up cooldown
// ends) or WaitAtMax (the pool is at Max; the job waits for a busy runner
// to finish). Wait.Message says it in a sentence.
//
// # Defaults, and why
//
//   - ScaleUpCooldown 10 s. Provisioning runners are counted, so the
//     cooldown is not what prevents double provisioning; it bounds how
//     often a pool changes size, turning arrivals spread over a few
//     seconds into one provisioning step instead of one per tick, since
//     every scaling event disturbs the fleet. It costs a job at most 10 s
//     more, less than a virtual machine's start-up (20 to 60 s), so it is
//     never the larger part of a wait.
//   - ScaleDownCooldown 5 min. The stages of a pipeline and a team's
//     pushes come minutes apart; a pool that shrinks between them boots
//     the same runners again seconds later, and every job of the next
//     stage waits a start-up. Five minutes of idle runners cost less than
//     that, and five minutes is also the default scale-down stabilization
//     window of Kubernetes' horizontal pod autoscaler.
//   - ScaleDownFraction 0.5. Halving per step takes a pool of 100 runners
//     to 12 in three steps (15 minutes); a load that returns meanwhile
//     finds part of the pool still there.
//   - WarmFraction 10 % of the recent peak: enough ready runners to start
//     the first jobs of a burst at once while the pool scales up for the
//     rest, at a tenth of the peak's cost.
//   - DemandWindow 15 min, three scale-down cooldowns: the warm target
//     remembers a burst through the lulls between a team's pipelines and
//     while the pool shrinks after it.
//   - IdleToZero 30 min: a pool without a job for half an hour is probably
//     unused for longer (nights, weekends), and its next job waits one
//     start-up. Pools that must answer at once keep Min above 0.
//
// # Guarantees
//
// Decide reads no clock and draws no random number: the same snapshot
// gives the same decisions, pool by pool, whatever other pools the
// snapshot holds. For a valid policy and counts:
//
//   - SAFETY: Min ≤ Desired ≤ Max; a scale-up never takes the pool beyond
//     Max.
//   - SAFETY: it destroys only idle runners, never more than are idle
//     beyond the queued jobs, lag and warm target, never within
//     ScaleDownCooldown of the last scaling event, never below the recent
//     peak demand plus warm target (up to Max; except going to zero after
//     IdleToZero), and never more than a step's cap.
//   - SAFETY: it provisions nothing while the idle runners cover the
//     queued jobs, lag and warm target and the pool has its Min.
//   - LIVENESS: a pool below desired and out of its scale-up cooldown
//     provisions the difference.
//
// The property tests of this package check these over random snapshots;
// its scenario tests run bursts, flapping loads, scale to zero and
// ephemeral pools through package sim.
//
// # Stability
//
// Experimental: the API may change while the fleet manager that uses it
// is written.
package autoscale
