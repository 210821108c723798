// Package logs carries the output of jobs from runners to the people
// watching them and into storage: the chunk protocol runners speak, the
// live tail, and the assembly of finished logs into per-step objects.
//
// # What it owns
//
// One log is the output of one attempt of one job, named by a Key (run,
// job, attempt): a single byte stream across the job's steps. A runner
// sends it in Chunks, about once a second or every 64 KiB, over plain
// outbound HTTP (Handler; the wire format is in README.md). A Hub keeps
// each running log in memory, fans it out to any number of Followers, and
// when the runner finishes the log it stores each step's bytes in a Sink
// (FileSink, MemorySink, or BlobSink over S3 or another
// artifacts.BlobStore) and records them in a SegmentStore (the
// log_segments table: MemorySegmentStore, PostgresSegmentStore).
//
// # The chunk rules
//
// The byte offset decides, not the arrival order:
//
//   - A chunk carries the offset of its first byte in the whole log. A
//     log begins at offset 0.
//   - A chunk starting after the end of the log is refused with a
//     *GapError naming the end (HTTP 416 with Range: 0-<end>); the
//     runner sends again from there. A runner therefore keeps its log
//     until Finish is acknowledged.
//   - A chunk whose bytes the log already holds, identically and in the
//     same step, is a no-op success: retries are safe. A chunk that
//     overlaps the end appends only its new tail, once its overlap
//     matches.
//   - Different bytes for a range already written, bytes labelled with a
//     step other than the one they were written in, and a step lower
//     than the last one are refused with a *ConflictError (matching
//     cikit.ErrConflict; HTTP 409).
//   - Each chunk belongs to one step; steps appear in increasing order
//     and a step without output has no bytes, and no segment.
//   - Seq numbers a runner's chunks; errors name it, the offset decides.
//   - A log keeps at most Config.MaxLogBytes of output (4 MiB by
//     default, GitLab Runner's output_limit). The chunk that goes past it
//     keeps its bytes up to the limit followed by the line "[cikit] log
//     truncated at 4 MiB: the rest of the output is discarded"
//     (cikit.LogTruncatedLine), which followers see like any output;
//     later bytes are answered as taken, discarded and counted
//     (FinishResult.Truncated and DroppedBytes). A runner that cuts its
//     log itself sends the same line, which is kept as it is. All
//     live logs of a Hub together hold at most Config.MaxLiveBytes (2 GiB
//     by default); beyond it chunks are refused with ErrBusy (HTTP 503,
//     send again later).
//
// Finish gives the runner's total length and SHA-256 digest. A log that
// does not match them is stored anyway and marked incomplete; the runner
// learns it from the result, not from an error. After Finish a log takes
// no chunk (ErrFinished), not even a copy of one it holds.
//
// # Guarantees
//
//   - A follower receives the log in order and without gaps from the
//     offset it asked for, whether it connects before, during or after
//     the writing; once the log is finished, from the Sink.
//   - Followers never hold a writer up and never lose bytes: they read
//     the log's buffer at their own pace (the buffer holds the whole live
//     log), and each keeps at most one event's bytes of its own.
//   - Logs share no lock (only an atomic count of their bytes): appends to
//     different logs run in parallel, and a log's lock is held only to
//     compare, copy and hash one chunk.
//   - Finish is idempotent; a failure to store leaves the log sealed and
//     live, and Finish may be called again.
//
// # Runners that vanish
//
// A log whose runner never finishes it would stay in memory. The platform
// calls Hub.Abandon when it gives up on an attempt (its lease expired),
// and Hub.Run, a long-running loop, abandons logs that received no bytes
// for Config.IdleTimeout. An abandoned log is stored like a finished one,
// marked incomplete; its runner's late Finish is refused.
//
// The live buffer is in one process's memory: a platform with several
// server replicas routes all requests of one attempt to one replica (for
// example by hashing the key), and a restart loses the live logs, which
// their runners then send again from offset 0 when the next chunk is
// answered with a gap.
//
// # Stability
//
// The wire format (README.md) is versioned by its /v1 path and changes
// only by addition. The Go API may still change before cikit 1.0; the
// Sink and SegmentStore interfaces are its most stable parts, and
// logstest.Exercise and logstest.ExerciseSink define their semantics.
package logs
