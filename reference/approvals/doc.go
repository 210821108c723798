// Package approvals records the decisions people take on gated jobs
// (cikit.JobSpec.Gate): who approved or rejected which attempt of which
// job, with their comment and when. The dag store applies a decision (a
// gated job waiting MANUAL becomes READY or FAILED); this package keeps
// the record of it, which the API shows with the job.
//
// # Stores
//
// Store is the seam. MemoryStore serves the embedded platform and
// tests; PostgresStore keeps the records in PostgreSQL's job_approvals
// table (Migrations, PostgresStore.Migrate). Both pass the conformance
// suite in package approvalstest.
//
// # Guarantees
//
// An attempt of a job has at most one decision: a gate is decided once,
// and a second Record for the same attempt is refused with
// cikit.ErrConflict (a retried job's new attempt is decided anew). A
// record is validated before it is stored (Approval.Validate); List
// returns a run's records oldest first.
//
// # Stability
//
// Part of the reference platform; changes with it.
package approvals
