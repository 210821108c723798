// Package lease owns execution leases: the right of one runner to run one
// attempt of a job, fenced by a token, kept alive by heartbeats and taken
// back by a reaper when the runner goes quiet.
//
// A runner is an untrusted, unreliable process far away. It may crash,
// hang, lose its network, or come back after its attempt was given to
// another runner. Leases make sure that whatever it does, at most one
// attempt of a job commits, and a stale attempt is refused everywhere.
//
// # What it owns
//
// The lease records (Store: PostgresStore in the table job_leases, with
// embedded numbered migrations applied by Migrate, and MemoryStore), the
// Redis hint of each lease, the Manager that grants, renews, checks and
// ends leases, and the Reaper. It does not own job states: those are the
// dag.Store's, and every lease action that changes one is a conditional
// dag transition.
//
// # The protocol
//
// Claim leases attempt a of a job that is QUEUED at attempt a: it reads
// the job, sets the Redis hint (SET NX, replacing only a hint of an
// earlier attempt), inserts the lease record (conditional: no lease of
// this attempt or a later one) and starts the job (dag JobStart,
// conditional on QUEUED at attempt a). A refusal at any step undoes the
// steps before it and returns ErrNotClaimed.
//
// The runner then calls Renew every TTL/3 or so; Renew checks that the
// job still runs at that attempt and extends the record (conditional on
// attempt and token), then the hint (compare-and-set), and says whether
// the run was cancelled. Log chunks and artifact uploads pass Check: a
// matching hint is a fast accept, anything else asks the Store and the
// job. Complete and Return end the attempt with a dag JobComplete,
// conditional on the attempt, then delete the record and the hint.
//
// ClaimMany and CompleteMany do the same for many attempts at once, each
// step one round trip for the whole batch (one read of the jobs or
// records, one Redis pipeline, one Store call, one dag JobApply), and
// answer each attempt as Claim and Complete would; those two are batches
// of one. A server that takes claims and completions from many runners
// joins them into batches (fleet.Server does).
//
// When the Store is a PostgresStore over the pool of a dag.PostgresStore
// (one database), the records are written in the job store's
// transactions (dag.PostgresStore.JobApplyWith): a claim sets the Redis
// hint, then starts the job and records its lease in one transaction, so
// a refusal has nothing to undo; a completion ends the job and deletes the
// record in one transaction while the hint is released, without reading
// the record first: the transaction rolls back unless every completion of
// the batch found its record to delete, and then the Manager reads the
// records (the hints, then the Store) and completes those that hold. A claim's
// transaction commits without waiting for the write-ahead log to reach
// the disk. A claim lost in a PostgreSQL crash cannot run: the runner's
// first Renew, which the protocol requires before the job starts, either
// finds it gone (and fences the runner) or commits after it, which makes
// it durable.
//
// The Reaper scans the records expired for longer than its Grace in
// batches. The grace is the time the job's supervisor (see
// docs/runner-protocol.md) has to kill an attempt whose runner went quiet
// before the next attempt may start; NewReaper refuses one not longer
// than MinReaperGrace. An attempt whose job still
// runs at it is failed as an infrastructure failure (reason
// "runner_lost: …"), which dag's retry policy turns into a new attempt or
// a final failure; one being cancelled is cancelled; any other record is
// stale and deleted. With MaxQueueTime it also fails the jobs that waited
// too long for a runner (dag.Store.JobsExpire), and every pass makes READY
// the delayed jobs whose start_in has passed (dag.Store.JobsRelease).
//
// # Guarantees
//
//   - SAFETY: of the attempts of a job, at most one commits, since every
//     completion is a dag transition conditional on the attempt.
//   - SAFETY: Renew, Complete and Return accept only the token of the
//     job's current lease while the job runs at that attempt. They decide
//     by the Store and the dag.Store, never by Redis, so a lost, flushed or
//     unreachable Redis lets no stale attempt through; it only costs the
//     fast paths.
//   - Check may accept the token of an attempt that just ended for as
//     long as Redis keeps a hint that could not be deleted (at most the
//     TTL). It guards log chunks and artifacts, never commits.
//   - Any number of Managers and Reapers may run at once: every write is
//     conditional.
//   - LIVENESS: a job whose runner stops renewing is reaped within TTL
//     plus the reaper's grace and interval, and retried by dag's policy.
//
// The rapid state-machine test of this package checks the safety
// properties against a model, with the clock, reaper, cancellations and
// Redis flushes interleaved at random.
//
// # Stability
//
// The Manager's methods, the Store interface and the errors are the
// contract of the runner API and are stable. The Redis key layout and the
// value in it are internal and may change.
package lease
