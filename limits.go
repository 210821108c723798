package cikit

import "fmt"

// Limits every part of the platform agrees on. They live here, in the
// vocabulary every package shares, because the compiler that produces a
// value and the runner that decodes it must use the same bound: a spec the
// compiler accepts but a runner cannot read fails far from its cause.
const (
	// MaxJobSpecBytes bounds the JSON form of one compiled JobSpec: 4 MiB.
	// The compiler refuses a job whose spec is larger (a diagnostic), the
	// server refuses to hand out a stored one that is (a failure of the
	// job of class FailureConfig, never retried), and a runner decodes at
	// most MaxClaimBytes of a claim's answer. A pipeline file is at most
	// 1 MiB by default (compiler.DefaultMaxFileBytes); four times that
	// leaves room for what anchors, extends and defaults copy into each
	// job, and keeps a runner's decode of one job small.
	MaxJobSpecBytes = 4 << 20
	// ClaimOverheadBytes is what a claim's answer holds besides the spec
	// (identifiers, the job token, times): a few hundred bytes, with a
	// wide margin for fields added later.
	ClaimOverheadBytes = 64 << 10
	// MaxJobContextBytes bounds the JSON form of the JobContext a claim's
	// answer carries: the run's payload (at most MaxPayloadBytes) and
	// the outputs of the jobs it needs (at most MaxOutputsBytes each).
	// The server fails a job whose context is larger (FailureConfig,
	// never retried) rather than hand out what no runner reads.
	MaxJobContextBytes = 4 << 20
	// MaxClaimBytes is the most a runner reads of a claim's answer:
	// derived from MaxJobSpecBytes and MaxJobContextBytes, so that every
	// spec and context the server hands out can be decoded.
	MaxClaimBytes = MaxJobSpecBytes + MaxJobContextBytes + ClaimOverheadBytes

	// MaxOutputValueBytes bounds one output of a job (JobSpec.Outputs):
	// 128 KiB, Linux's MAX_ARG_STRLEN, the most one environment variable
	// of a later job's process can hold.
	MaxOutputValueBytes = 128 << 10
	// MaxOutputsBytes bounds all the outputs of one job together (names
	// and values): 1 MiB, GitHub Actions' limit per job.
	MaxOutputsBytes = 1 << 20
	// MaxExpandBytes bounds JobSpec.Expand, what the compiler keeps of a
	// job whose matrix only the run can compute to expand it then: 2 MiB,
	// room for the pipeline file (at most 1 MiB by default) and what it
	// calls. The compiler refuses a larger one with a diagnostic.
	MaxExpandBytes = 2 << 20

	// DefaultMaxLogBytes is the default size of a job's log: 4 MiB, the
	// default of GitLab Runner's output_limit (4096 KiB). Past it the log
	// holds LogTruncatedLine and the rest of the output is discarded and
	// counted. Platforms raise it in their configuration.
	DefaultMaxLogBytes = 4 << 20
)

// FailureConfig is the failure of a job whose configuration cannot run as
// stored (a spec larger than MaxJobSpecBytes): neither the code's fault
// nor the platform's, and never retried, since every attempt would fail
// the same way.
const FailureConfig FailureClass = "config"

// LogTruncatedLine is the line a log holds where it was cut at limit
// bytes: the runner writes it when it stops sending, and the log server
// when a runner sent more than limit anyway. Both write the same bytes,
// so a runner that cut its log sends the server exactly what the server
// would have kept.
func LogTruncatedLine(limit int64) string {
	return fmt.Sprintf("\n[cikit] log truncated at %s: the rest of the output is discarded\n", FormatBytes(limit))
}

// FormatBytes writes n in the largest binary unit that divides it
// ("4 MiB", "1536 KiB", "100 B"), for messages about limits.
func FormatBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
