package ingest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/ingest"
	"github.com/cikit/cikit/ingest/ingesttest"
)

func TestPruner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	runs := ingest.NewMemoryRunStore(dag.NewMemoryStore(dag.MemoryConfig{}), clock)
	old := ingesttest.Push("d1", "main", "a", "b", 0)
	_, _, err := runs.CreateRuns(ctx, &ingest.CreateRunsParams{Event: old, Runs: ingesttest.Runs(1)})
	require.NoError(t, err)

	p, err := ingest.NewPruner(ingest.PrunerConfig{Runs: runs, Now: func() time.Time { return now.Add(6 * 24 * time.Hour) }})
	require.NoError(t, err)
	n, err := p.Prune(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "within the default retention of 7 days")

	p, err = ingest.NewPruner(ingest.PrunerConfig{Runs: runs, Now: func() time.Time { return now.Add(8 * 24 * time.Hour) }, Interval: time.Millisecond})
	require.NoError(t, err)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- p.Run(rctx) }()
	require.Eventually(t, func() bool {
		seen, err := runs.Seen(ctx, old)
		return err == nil && seen == nil
	}, time.Minute, time.Millisecond, "pruned once past the retention")
	cancel()
	require.NoError(t, <-done)

	_, err = ingest.NewPruner(ingest.PrunerConfig{})
	require.Error(t, err)
	_, err = ingest.NewPruner(ingest.PrunerConfig{Runs: runs, Retention: -time.Hour})
	require.Error(t, err)
}
