package cikit_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
)

func TestFormatBytes(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{0: "0 B", 100: "100 B", 1 << 10: "1 KiB", 1536 << 10: "1536 KiB",
		4 << 20: "4 MiB", 1<<20 + 1: "1048577 B", 2 << 30: "2 GiB"} {
		require.Equal(t, want, cikit.FormatBytes(n), n)
	}
	require.Equal(t, "\n[cikit] log truncated at 4 MiB: the rest of the output is discarded\n", cikit.LogTruncatedLine(cikit.DefaultMaxLogBytes))
}

// TestRetryNeverRetriesConfig: a job that cannot run as stored fails the
// same way every attempt, so no policy retries it, not even "always".
func TestRetryNeverRetriesConfig(t *testing.T) {
	t.Parallel()
	for _, r := range []*cikit.Retry{{Max: 2}, {Max: 2, When: []string{"always"}}} {
		require.False(t, r.Retries(cikit.FailureConfig, 1, 1), "%+v", r)
		require.True(t, r.Retries(cikit.FailureInfrastructure, -1, 1), "%+v", r)
	}
}
