// Package bench measures the reference platform end to end, as `cikit
// bench` runs it: scenario benchmarks that each start a platform of their
// own (package platform), drive it over HTTP as GitHub and runners would,
// and report throughput and latency percentiles.
//
// The scenarios, in the order they run (Scenarios says the same):
//
//   - webhook-to-run: signed push webhooks until their runs are in the
//     store.
//   - duplicate-storm: copies of deliveries sent at once; fails when a copy
//     creates a run.
//   - claim-complete: runner protocol claim and complete cycles.
//   - webhook-to-first-step: a push until the first step of its job starts
//     on a warm local runner, timed by the step itself, the checkout of the
//     pushed commit included (against the same job with no checkout).
//   - dag-critical-path: a run's wall clock against its critical path.
//   - cache-hit: a job whose cache misses, then the same job restoring it;
//     the time saved per job is the miss's run time less the hit's.
//   - log-ingest: log chunks through the runner log API with followers.
//
// By default each platform is embedded: memory stores, an in-process Redis
// (miniredis) and Kafka (kfake). Config.PostgresURL and Config.RedisURL
// move the stores to PostgreSQL, in a schema per scenario, and the derived
// state to Redis, under a key prefix per scenario; both are removed when
// the scenario ends. Kafka stays in process. The scenarios with local
// runners report the isolation their jobs ran with (bubblewrap where it
// works, plain processes otherwise).
package bench
