// Package agent is the runner side of the runner protocol
// (docs/runner-protocol.md): a process that only makes outbound calls to a
// cikit server, and runs the jobs it is handed. `cikit runner` is an
// Agent over the local process executor; a platform team embeds one over
// an Executor of its own.
//
// # What an Agent does
//
// It registers with a registration token (or uses a runner token it was
// given), then loops: a long-poll claim, and for the job claimed a first
// heartbeat — a job whose lease cannot be renewed once is never started —
// then the steps on its Executor while it heartbeats every interval the
// server names and streams the output in chunks (every ChunkInterval, or
// as soon as ChunkBytes wait), then the log's totals and the result.
//
// # Guarantees
//
//   - Fencing: when the server answers a heartbeat, a log chunk, the
//     log's finish or an artifact or cache call with 409 stale, or no heartbeat succeeded for as long
//     as the lease lasts, the Agent cancels the job at once and sends
//     nothing more about it: another attempt owns the job.
//   - At most one executing attempt: the Executor is given the lease's
//     end on this machine's monotonic clock (counted from just before
//     each confirmed heartbeat was sent, with the remaining time the
//     server answered) and every renewal; the process executor's job
//     supervisor, a process apart from the agent's, kills the job when
//     it passes, so a stopped or frozen agent leaves no job running after
//     the server may have given it to another runner
//     (docs/runner-protocol.md, "At most one executing attempt").
//   - Cancellation: a heartbeat saying cancel_requested cancels the job's
//     context; the Executor stops its processes (the process executor:
//     SIGTERM, a grace period, SIGKILL, per process group) and the job is
//     completed as cancelled.
//   - Output is spooled to a temporary file until the log is finished, so
//     that any part of it can be sent again — after a lost answer, or to a
//     server that lost its live log. Chunks never span two steps.
//   - Shutdown: when Run's context ends, the job running gets
//     ShutdownGrace to finish and be reported; after that it is cancelled
//     and returned to the server, which gives it a new attempt elsewhere.
//   - Artifacts and caches: the Executor's process.Job.Files is the
//     attempt's artifacts.Broker over the protocol. Its calls are sent
//     again with backoff, a few times within their context, while the
//     server answers 5xx, 408 or 429 or cannot be reached; its refusals
//     match artifacts.ErrRefused (with the server's message),
//     artifacts.ErrCacheExists, cikit.ErrNotFound, ErrStale, or
//     ErrNoArtifacts from a server that serves none. The result's cache
//     reports go with the completion.
//   - Secrets: for a job whose claim carries a secrets token, the
//     Executor's process.Job.FetchSecrets makes the secrets call, sent
//     again with backoff a few times while the server answers 5xx, 408
//     or 429; a 422 or 403 (a secret not found, a fork's pull request)
//     matches process.ErrSecretsRefused with the server's message, which
//     fails the job as a configuration failure.
//   - Single use: with Config.MaxJobs 1, Run returns after the agent's
//     first job is reported, as an ephemeral runner's agent must.
//
// # Stability
//
// The Config fields and the Executor interface may still grow.
package agent
