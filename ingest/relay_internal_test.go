package ingest

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/dag"
)

func TestRelayBackoff(t *testing.T) {
	t.Parallel()
	r := &Relay{cfg: RelayConfig{RetryBackoff: 100 * time.Millisecond, MaxRetryBackoff: time.Second}}
	for failures, ceiling := range map[int]time.Duration{
		1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond, 4: 800 * time.Millisecond,
		5: time.Second, 6: time.Second, 1000: time.Second, math.MaxInt: time.Second,
	} {
		for range 100 {
			d := r.backoff(failures)
			require.GreaterOrEqual(t, d, ceiling/2, "after %d failures", failures)
			require.LessOrEqual(t, d, ceiling, "after %d failures", failures)
		}
	}

	huge := &Relay{cfg: RelayConfig{RetryBackoff: math.MaxInt64 / 3, MaxRetryBackoff: math.MaxInt64}}
	require.GreaterOrEqual(t, huge.backoff(3), time.Duration(math.MaxInt64/2), "no overflow")
}

func TestRelayKey(t *testing.T) {
	t.Parallel()
	for pipeline, want := range map[string]string{
		"acme/api:.cikit.yml":               "acme/api",
		"acme/platform/api:.gitlab-ci.yml":  "acme/platform/api",
		"acme/web:.github/workflows/ci.yml": "acme/web",
		"acme/bare":                         "acme/bare",
		"":                                  "run-1",
	} {
		require.Equal(t, want, relayKey(&dag.OutboxEvent{RunID: "run-1", Pipeline: pipeline}), "pipeline %q", pipeline)
	}
}
