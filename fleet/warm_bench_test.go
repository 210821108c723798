package fleet_test

import (
	"context"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/fleet/autoscale"
	"github.com/cikit/cikit/fleet/local"
	"github.com/cikit/cikit/fleet/process"
	"github.com/cikit/cikit/logs"
)

// BenchmarkReadyToFirstStep measures the time from a job becoming READY
// to a warm runner of a local pool starting its first step: dispatch, the
// runner's long poll waking, the claim over HTTP, the first heartbeat,
// the workspace and the step's process. The step prints the time it
// started; the job's READY time is the store's. Jobs go one at a time,
// so each finds the warm pool ready. Each job runs in a bubblewrap
// sandbox of its own, or, for comparison, as plain processes.
func BenchmarkReadyToFirstStep(b *testing.B) {
	for _, c := range []struct {
		name string
		cfg  local.Config
	}{
		{"sandbox=bubblewrap", local.Config{Process: process.Config{Sandbox: &process.Sandbox{Mode: process.SandboxRequire}}}},
		{"sandbox=none", local.Config{Unsandboxed: true}},
	} {
		b.Run(c.name, func(b *testing.B) { benchmarkReadyToFirstStep(b, c.cfg) })
	}
}

func benchmarkReadyToFirstStep(b *testing.B, lc local.Config) {
	sink := &logs.MemorySink{}
	hub, err := logs.NewHub(logs.Config{Sink: sink, Segments: &logs.MemorySegmentStore{}})
	require.NoError(b, err)
	lc.Wait = 30 * time.Second
	e := newFleetWith(b, lc, hub, fleet.PoolConfig{Name: "warm", Labels: []string{"linux"},
		Policy: noCooldowns(autoscale.Policy{Max: 8, Warm: 4})})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.manager.Run(ctx) }()
	defer func() { cancel(); require.NoError(b, <-done) }()
	deadline := time.Now().Add(30 * time.Second)
	for st := e.manager.Pools()[0]; st.Idle < 4; st = e.manager.Pools()[0] {
		require.True(b, time.Now().Before(deadline), "the warm pool did not fill: %+v", st)
		time.Sleep(10 * time.Millisecond)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		runID := e.run(b, onLabels("job", "date +%s%N", "linux"))
		var j = e.jobsOf(b, runID)[0]
		for deadline := time.Now().Add(30 * time.Second); j.State != cikit.JobSucceeded; j = e.jobsOf(b, runID)[0] {
			require.False(b, j.State.Terminal() || time.Now().After(deadline), "job %s: %s %s", runID, j.State, j.Reason)
			time.Sleep(time.Millisecond)
		}
		r, err := sink.StepGet(ctx, logs.Key{RunID: runID, JobID: "job", Attempt: 1}, 0)
		require.NoError(b, err)
		out, err := io.ReadAll(r)
		r.Close()
		require.NoError(b, err)
		ns, err := strconv.ParseInt(lastLine(string(out)), 10, 64)
		require.NoError(b, err, "step output %q", out)
		lat = append(lat, time.Unix(0, ns).Sub(j.ReadyAt))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "p95-ms")
}

// lastLine returns the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
