// Package dag owns the job graph of a pipeline run and the rules that move
// its jobs from PENDING to a terminal state.
//
// # The graph
//
// A Graph is a validated set of jobs and their needs: unique IDs, no
// unknown needs, no cycles (a cycle is a *CycleError that names its
// members in order). It gives a topological order and the critical path
// for any per-job durations.
//
// # The rules
//
// Next is the whole scheduling rule as a pure function of the graph, the
// job states and one event (queue, start, complete, cancel, expire). When
// a job finishes, every job whose needs are all satisfied — SUCCEEDED, or
// FAILED with allow_failure — becomes READY; a job that failed without
// allow_failure makes all its descendants SKIPPED. A failure limited to
// exit codes (GitLab's allow_failure:exit_codes) is allowed or not by how
// the attempt failed: a store decides it when the failure is reported
// (AllowedFailure), keeps the answer with the attempt (Job.FailureAllowed)
// and the rules read that. RunStatus aggregates job states into the run's
// state. A job the compiler decided never runs
// (Node.Never) starts SKIPPED with everything that needs it, and fails
// nothing. A job of When always runs once all its needs have ended,
// whatever their outcome; one of When on_failure only if one of them did
// not succeed. A job of When manual whose needs are satisfied becomes
// MANUAL instead of READY and waits for a person (EventPlay, through
// JobApply); one of When delayed becomes DELAYED and turns READY once its
// StartIn has passed (Store.JobsRelease, driven by a sweeper on the
// store's clock; the Driver releases its own run's). A manual job that
// allows failure does not hold its run, which ends without it; one that
// does not keeps the run BLOCKED (see RunStatus). Because the rules are
// pure, property tests check them on thousands of random graphs and
// interleavings.
//
// # Approval gates and policy denials
//
// A job held by an approval gate (cikit.JobSpec.Gate; Node.Gated) waits
// MANUAL once its needs are satisfied, whatever its When, its Reason and
// its "job.manual" outbox event saying what for (GateWaiting), and holds
// its run BLOCKED unless it allows failure, like a blocking manual job.
// EventPlay approves it: READY, or DELAYED for the gate's WaitTimer (plus
// a When delayed job's StartIn), released by JobsRelease. EventReject
// fails it (or a When manual job), with the reviewer's reason, class
// cikit.FailurePolicy, exit code -1, never retried, with the consequences
// of any failure. JobsExpire fails the gates nobody approved within their
// Expires or ExpireParams.GateTimeout ("approval expired: …"), counted
// from when they began to wait (Job.ReadyAt). A job the policy denied
// (cikit.Admission with DecisionDeny; Node.Denied) is created FAILED
// ("denied by policy: …") in the run's creating write, with the
// consequences of a failure, and is never retried. A new run of a
// pipeline and branch cancels the gates still waiting in the older
// unfinished runs, whatever its SupersedePolicy: approving an older
// commit's deployment would deploy stale code.
//
//	PENDING ──needs satisfied──► MANUAL (gated) ──approve──► READY, or DELAYED ──wait timer──► READY
//	                                ├──reject / not approved in time──► FAILED (policy)
//	                                └──a newer run of the branch──────► CANCELLED
//	(denied job) ──run created──► FAILED (policy) ──► descendants SKIPPED
//
//	PENDING ──needs satisfied──► READY ──► QUEUED ──► RUNNING ──► SUCCEEDED
//	   │ (manual) ──► MANUAL ──play─────┤
//	   │ (delayed) ─► DELAYED ─start_in─┘
//	   │                                                  ├─────► FAILED ──► descendants SKIPPED
//	   └──a need failed──► SKIPPED                        └─────► CANCELLED
//	   (any not-started job) ──run cancelled──► CANCELLED
//	   (placeholder) ──needs satisfied──► expanded: PENDING until its variants end ──► SUCCEEDED/FAILED/CANCELLED
//
// # Stores and drivers
//
// A Store applies the rules durably: each transition is a conditional
// write that commits the job's change and its consequences together;
// JobApply applies a batch of job events at once, and JobAttempts keeps
// every ended attempt. MemoryStore keeps runs in process memory;
// PostgresStore in PostgreSQL, with embedded numbered migrations
// (Migrate), RunCreateTx for callers' transactions, idempotent creation
// by key, and a fast path for events local to one job whose dependency
// counters live in Redis when configured (PostgresConfig.Redis): Redis
// only says which jobs are worth checking, PostgreSQL decides, and
// Repair rebuilds the counters. An event refused because its job moved
// on costs the job's row, not a read of its run, and JobListWaiting pages
// through the jobs waiting for a runner: the cost of a state change
// follows what it changes, not the size of its run. Every write records its events in the
// same transaction, in an outbox a relay publishes from: OutboxPublish
// claims events for a relay, several relays sharing the work;
// OutboxPending and OutboxMarkPublished inspect and mark. Both stores
// pass one conformance suite, dagtest.Exercise, which a platform team can
// run on a store of its own.
// JobsExpire fails the jobs past their timeout or the max queue time, and
// the gates nobody approved in time;
// JobsRelease makes READY the delayed jobs that are due, and
// Report summarises a run with the critical path of its actual durations.
// A Driver runs one run to its end in this process on an Executor, up to
// Parallel jobs at once; it is the scheduler loop of `cikit run`.
//
// # Run-time matrices
//
// A job whose matrix only the run can compute (cikit.JobSpec.Expand, a
// placeholder; Node.Expand) is expanded by the store's Expander in the
// write that would make it leave PENDING (READY, or MANUAL or DELAYED),
// at RunCreate when it needs nothing: the Expander is given the run's
// context, the job and how its needs ended, with their outputs. Its
// variants join the run in the same write, at the end of the plan (so
// positions never move), needing what it needs, and are settled by the
// rules as any job whose needs have ended (READY, usually). The graph
// then makes the placeholder need its variants (Node.VariantOf,
// Graph.Variants): it stays PENDING, so it is never dispatched, listed by
// JobListWaiting, expired or counted as running, and it ends in the write
// of the last of them to end: SUCCEEDED when all are satisfied, else
// CANCELLED when one was cancelled, else FAILED; its Result's outputs are
// theirs merged, the last variant to finish that set a key giving its
// value. The jobs that need it wait for it as for any job. An expansion
// that fails (the Expander's error, no Expander, a run past MaxJobs,
// variants that are not the placeholder's) fails the placeholder with its
// reason as a failure of class cikit.FailureConfig, exit code -1, with
// the consequences of any failure. RunCancel cancels the variants, and
// the placeholder with them, or once those running have reported.
// RunRetryFailed gives a placeholder that failed a new attempt: one that
// had expanded waits again for its variants, of which those that failed
// get new attempts and the others keep their results (its needs did not
// run again, so an expansion would give the same variants); one whose
// expansion failed is expanded again once its needs are satisfied. (A
// placeholder of When always or on_failure that expanded after a need
// failed keeps its variants when that need is retried: they run again as
// first expanded, not from the need's new outputs.)
// PostgresStore expands on the locked path only: completions of the
// jobs a placeholder needs, and of its variants, never take the fast
// path.
//
// # Run-time conditions
//
// A job's run-time condition (cikit.JobSpec.If) is decided by the store's
// Decider in the same write, before anything else happens to the job (a
// placeholder is decided before it is expanded): the Decider is given
// what an Expander is. A false condition skips the job, its reason "its
// condition is false: <expr>", and the jobs that need it react as to any
// skipped job (an always job still runs); a placeholder skipped so has no
// variants. A condition the Decider cannot decide (its error), or any
// condition in a store without a Decider, fails the job as a failure of
// class cikit.FailureConfig, exit code -1, the error its reason.
// RunRetryFailed decides the condition of the job's new attempt again.
// PostgresStore decides on the locked path only: completions of the jobs
// a job with a condition needs never take the fast path.
//
// # Superseded runs and concurrency groups
//
// A new run cancels the unfinished runs of its pipeline on its branch,
// except on the default branch unless asked (SupersedePolicy). Jobs of a
// concurrency group on one branch (GroupKey) run one at a time across
// all runs, taking turns in the order they became READY: JobQueue
// refuses a job whose turn has not come with a *GroupBusyError, and
// GroupNext names the job whose turn it is once a write freed the group
// (TransitionResult.Freed). A job with cancel_in_progress cancels the
// jobs of its group ahead of it instead of waiting for them to finish.
//
// # Stability
//
// The states and rules are stable. The Store interface will grow methods
// (retries, leases) as the platform does; implement it by embedding a
// provided store if you need to wrap one.
package dag
