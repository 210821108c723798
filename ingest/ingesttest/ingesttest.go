// Package ingesttest is the conformance suite of ingest.RunStore: a
// platform team runs it on a store of its own, as the package runs it on
// MemoryRunStore and PostgresRunStore.
package ingesttest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/ingest"
	"github.com/cikit/cikit/internal/clocktest"
)

// Factory returns a new, empty RunStore whose clock is now, and the dag
// store it creates runs in.
type Factory func(t *testing.T, now func() time.Time) (ingest.RunStore, dag.Store)

var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// Push returns a push event of acme/api's branch to sha, delivered as
// delivery, that happened at t0 + after.
func Push(delivery, branch, before, sha string, after time.Duration) *ingest.Event {
	return &ingest.Event{Provider: ingest.GitHub, DeliveryID: delivery, HookID: "hook-1", Kind: ingest.KindPush,
		Org: "acme", Repo: "api", RefType: ingest.RefBranch, RefName: branch, SHA: sha, Before: before,
		DefaultBranch: "main", EventTime: t0.Add(after)}
}

// Runs returns the params of n runs of a two-job pipeline.
func Runs(n int) []*dag.RunCreateParams {
	var out []*dag.RunCreateParams
	for i := range n {
		out = append(out, &dag.RunCreateParams{Pipeline: fmt.Sprintf("acme/api:p%d.yml", i), Branch: "feature", Jobs: []*cikit.JobSpec{
			{ID: "build", Steps: []cikit.Step{{Run: "make"}}},
			{ID: "test", Needs: []string{"build"}, Steps: []cikit.Step{{Run: "make test"}}},
		}})
	}
	return out
}

type bundle struct {
	runs  ingest.RunStore
	dag   dag.Store
	clock *clocktest.Clock
}

func setup(t *testing.T, factory Factory) *bundle {
	c := clocktest.New(t0)
	runs, d := factory(t, c.Now)
	return &bundle{runs: runs, dag: d, clock: c}
}

func (b *bundle) create(t *testing.T, ev *ingest.Event, runs []*dag.RunCreateParams, reason string) (*ingest.Delivery, bool) {
	t.Helper()
	d, created, err := b.runs.CreateRuns(context.Background(), &ingest.CreateRunsParams{Event: ev, Runs: runs, Reason: reason})
	require.NoError(t, err)
	return d, created
}

// Exercise runs the conformance suite against the stores factory makes.
func Exercise(t *testing.T, factory Factory) {
	t.Run("CreateOnce", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := setup(t, factory)
		ev := Push("d1", "feature", "aaa", "bbb", 0)
		seen, err := b.runs.Seen(ctx, ev)
		require.NoError(t, err)
		require.Nil(t, seen)

		d, created := b.create(t, ev, Runs(2), "")
		require.True(t, created)
		require.Len(t, d.RunIDs, 2)
		require.Empty(t, d.Dropped)
		require.Equal(t, ingest.SemanticKey(ev), d.SemanticKey)
		require.Equal(t, t0, d.CreatedAt)
		for i, id := range d.RunIDs {
			run, err := b.dag.RunGet(ctx, id)
			require.NoError(t, err)
			require.Equal(t, fmt.Sprintf("acme/api:p%d.yml", i), run.Pipeline)
			jobs, err := b.dag.JobList(ctx, id)
			require.NoError(t, err)
			require.Equal(t, cikit.JobReady, jobs[0].State)
		}

		again, created := b.create(t, ev, Runs(2), "")
		require.False(t, created, "a redelivery creates nothing")
		require.Equal(t, d.RunIDs, again.RunIDs)

		b.clock.Set(t0.Add(72 * time.Hour))
		later, created := b.create(t, ev, Runs(2), "")
		require.False(t, created, "days later, still within the window")
		require.Equal(t, d.RunIDs, later.RunIDs)

		forged := *ev
		forged.DeliveryID = "forged"
		replay, created := b.create(t, &forged, Runs(2), "")
		require.False(t, created, "a replayed body under a forged delivery id creates nothing")
		require.Equal(t, d.RunIDs, replay.RunIDs)

		seen, err = b.runs.Seen(ctx, ev)
		require.NoError(t, err)
		require.Equal(t, d.RunIDs, seen.RunIDs)
		seen, err = b.runs.Seen(ctx, &forged)
		require.NoError(t, err)
		require.NotNil(t, seen, "found by its semantic key")
	})

	t.Run("Concurrent", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		ev := Push("d1", "feature", "aaa", "bbb", 0)
		var wg sync.WaitGroup
		var createdN atomic.Int32
		ids := make([][]string, 50)
		for i := range ids {
			wg.Go(func() {
				d, created, err := b.runs.CreateRuns(context.Background(), &ingest.CreateRunsParams{Event: ev, Runs: Runs(1)})
				if err != nil {
					t.Errorf("delivery %d: %v", i, err)
					return
				}
				if created {
					createdN.Add(1)
				}
				ids[i] = d.RunIDs
			})
		}
		wg.Wait()
		require.Equal(t, int32(1), createdN.Load(), "one of 50 concurrent deliveries creates")
		for _, got := range ids {
			require.Equal(t, ids[0], got)
		}
		evs, err := b.dag.OutboxPending(context.Background(), 1000)
		require.NoError(t, err)
		created := 0
		for _, e := range evs {
			if e.Type == dag.EventPipelineCreated {
				created++
			}
		}
		require.Equal(t, 1, created, "one set of outbox rows")
	})

	t.Run("OutOfOrder", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		newer, created := b.create(t, Push("d2", "feature", "bbb", "ccc", time.Minute), Runs(1), "")
		require.True(t, created)
		require.Len(t, newer.RunIDs, 1)
		older, created := b.create(t, Push("d1", "feature", "aaa", "bbb", 0), Runs(1), "")
		require.True(t, created, "recorded, so a redelivery is dropped at once too")
		require.Empty(t, older.RunIDs)
		require.Contains(t, older.Dropped, "out of order")
		other, _ := b.create(t, Push("d3", "other", "aaa", "bbb", 0), Runs(1), "")
		require.Len(t, other.RunIDs, 1, "refs are ordered on their own")
		undated := Push("d4", "feature", "ccc", "ddd", 0)
		undated.EventTime = time.Time{}
		d, _ := b.create(t, undated, Runs(1), "")
		require.Len(t, d.RunIDs, 1, "an event without a time is not ordered")
	})

	t.Run("Reasons", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		d, created := b.create(t, Push("d1", "feature", "aaa", "bbb", 0), nil, "no pipeline is triggered")
		require.True(t, created)
		require.Empty(t, d.RunIDs)
		require.Equal(t, "no pipeline is triggered", d.Dropped)
	})

	t.Run("PullRequestHeads", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := setup(t, factory)
		pr := &ingest.Event{Provider: ingest.GitHub, DeliveryID: "p1", HookID: "hook-1", Kind: ingest.KindPullRequest,
			Org: "acme", Repo: "api", RefType: ingest.RefBranch, RefName: "feature", SHA: "bbb", PRNumber: 7, BaseRef: "main", EventTime: t0}
		b.create(t, pr, Runs(1), "")
		n, ok, err := b.runs.PullRequestHead(ctx, "acme", "api", "feature", "bbb")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, 7, n)
		_, ok, err = b.runs.PullRequestHead(ctx, "acme", "api", "feature", "ccc")
		require.NoError(t, err)
		require.False(t, ok, "another head")
		push, created := b.create(t, Push("d1", "feature", "aaa", "bbb", time.Second), Runs(1), "")
		require.True(t, created, "a push and a pull request of one commit are different requests")
		require.Len(t, push.RunIDs, 1)
	})

	t.Run("Dispatches", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		ev := &ingest.Event{Provider: ingest.Manual, DeliveryID: "k1", Kind: ingest.KindDispatch, Org: "acme", Repo: "api",
			RefType: ingest.RefBranch, RefName: "main", SHA: "bbb"}
		first, _ := b.create(t, ev, Runs(1), "")
		second := *ev
		second.DeliveryID = "k2"
		d, created := b.create(t, &second, Runs(1), "")
		require.True(t, created, "each dispatch is its own request")
		require.NotEqual(t, first.RunIDs, d.RunIDs)
	})

	t.Run("RawDigest", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := setup(t, factory)
		ev := Push("d1", "feature", "aaa", "bbb", 0)
		ev.Raw = []byte(`{"after":"bbb"}`)
		d, _ := b.create(t, ev, Runs(1), "")
		require.Equal(t, ev.RawDigest(), d.RawDigest, "the record holds the body's digest")
		require.NotEmpty(t, d.RawDigest)
		seen, err := b.runs.Seen(ctx, ev)
		require.NoError(t, err)
		require.Equal(t, ev.RawDigest(), seen.RawDigest)
		other := *ev
		other.Raw = []byte(`{"after":"ccc"}`)
		again, created := b.create(t, &other, Runs(1), "")
		require.False(t, created, "another body under a recorded key creates nothing")
		require.Equal(t, ev.RawDigest(), again.RawDigest, "and the record keeps the first body's digest")
		bare, _ := b.create(t, Push("d2", "feature", "bbb", "ccc", time.Second), Runs(1), "")
		require.Empty(t, bare.RawDigest, "an event without a body has no digest")
		seen, err = b.runs.Seen(ctx, Push("d2", "feature", "bbb", "ccc", time.Second))
		require.NoError(t, err)
		require.Empty(t, seen.RawDigest)
	})

	t.Run("Prune", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := setup(t, factory)
		old := Push("d1", "feature", "aaa", "bbb", 0)
		first, _ := b.create(t, old, Runs(1), "")
		b.clock.Set(t0.Add(8 * 24 * time.Hour))
		recent, _ := b.create(t, Push("d2", "feature", "bbb", "ccc", time.Hour), Runs(1), "")
		n, err := b.runs.PruneDeliveries(ctx, t0.Add(7*24*time.Hour))
		require.NoError(t, err)
		require.Equal(t, 1, n)
		seen, err := b.runs.Seen(ctx, old)
		require.NoError(t, err)
		require.Nil(t, seen, "pruned")
		seen, err = b.runs.Seen(ctx, Push("d2", "feature", "bbb", "ccc", time.Hour))
		require.NoError(t, err)
		require.Equal(t, recent.RunIDs, seen.RunIDs, "kept")
		require.NotEmpty(t, first.RunIDs)
	})
}
