package lease_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/lease"
)

// TestReaperReleasesDelayedJobs: each pass makes READY the delayed jobs
// whose start_in has passed on the Manager's clock, and hands them to
// OnTransition for dispatch; not one before its time.
func TestReaperReleasesDelayedJobs(t *testing.T) {
	t.Parallel()
	forStacks(t, func(t *testing.T, st stack) {
		b := setup(t, st, &cikit.JobSpec{ID: "later", When: cikit.WhenDelayed, StartIn: time.Minute, Steps: []cikit.Step{{Run: "true"}}})
		var told []*dag.TransitionResult
		r := b.reaper(t, lease.ReaperConfig{OnTransition: func(res *dag.TransitionResult) { told = append(told, res) }})
		b.clock.Advance(time.Minute - time.Second)
		require.Equal(t, lease.ReapReport{}, reap(t, r))
		require.Equal(t, cikit.JobDelayed, b.job(t, "later").State)
		b.clock.Advance(time.Second)
		require.Equal(t, lease.ReapReport{Released: 1}, reap(t, r))
		require.Equal(t, cikit.JobReady, b.job(t, "later").State)
		require.Len(t, told, 1)
		require.Equal(t, "later", told[0].Changed[0].ID())
	})
}

// recordsHandler sends the records it handles to a channel.
type recordsHandler struct{ records chan<- slog.Record }

func (h recordsHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordsHandler) Handle(_ context.Context, r slog.Record) error {
	h.records <- r.Clone()
	return nil
}
func (h recordsHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordsHandler) WithGroup(string) slog.Handler      { return h }

// TestReaperLogsReleasedJobs: the line Run logs for a pass that did
// something counts the delayed jobs it released. It failed before: a pass
// that only released jobs logged "lease: reaped" with every count zero.
func TestReaperLogsReleasedJobs(t *testing.T) {
	t.Parallel()
	forStacks(t, func(t *testing.T, st stack) {
		b := setup(t, st, &cikit.JobSpec{ID: "later", When: cikit.WhenDelayed, StartIn: time.Minute, Steps: []cikit.Step{{Run: "true"}}})
		records := make(chan slog.Record, 16)
		r := b.reaper(t, lease.ReaperConfig{Logger: slog.New(recordsHandler{records: records})})
		b.clock.Advance(time.Minute)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		defer func() {
			cancel()
			require.NoError(t, <-done)
		}()
		for rec := range records {
			if rec.Message != "lease: reaped" {
				continue
			}
			attrs := map[string]int64{}
			rec.Attrs(func(a slog.Attr) bool {
				attrs[a.Key] = a.Value.Int64()
				return true
			})
			require.Equal(t, int64(1), attrs["released"], "%v", attrs)
			return
		}
	})
}
