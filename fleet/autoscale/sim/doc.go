// Package sim simulates one autoscaled runner pool under a load, in
// simulated time, so a policy can be tuned and checked before it runs a
// fleet: how long jobs wait, how often the pool scales, what it costs in
// runner time.
//
// Run takes a Policy, the backend's start-up time, a load (jobs with an
// arrival time and a duration) and a decision interval. Events between
// decisions (runners becoming ready, jobs arriving and ending) happen at
// their exact times; decisions are autoscale.Decide's, or any function of
// the same shape, on the same snapshots a fleet manager would build. The
// Result holds every tick, each job's wait, scaling counts and runner
// time; Table prints ticks for a log.
//
// The model is simple on purpose: one pool, a backend that always starts
// a runner in exactly Startup and destroys one at once, runners that never
// fail, and jobs that a runner takes the moment both are free. Runs are
// deterministic: the same Config gives the same Result.
//
// # Stability
//
// Experimental: the API may change.
package sim
