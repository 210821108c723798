package ingest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/internal/pgtest"
)

// TestBatchOrEach: a batch is written in one transaction; when that
// fails, each call alone, so that the bad one fails alone; a lone call is
// written alone.
func TestBatchOrEach(t *testing.T) {
	t.Parallel()
	var batches, singles atomic.Int32
	one := func(_ context.Context, p *CreateRunsParams) (*Delivery, bool, error) {
		singles.Add(1)
		if p.Reason == "bad" {
			return nil, false, errors.New("bad delivery")
		}
		return &Delivery{DeliveryID: p.Event.DeliveryID}, true, nil
	}
	many := func(_ context.Context, ps []*CreateRunsParams) ([]created, error) {
		batches.Add(1)
		out := make([]created, len(ps))
		for i, p := range ps {
			if p.Reason == "bad" {
				return nil, errors.New("bad batch")
			}
			out[i] = created{d: &Delivery{DeliveryID: p.Event.DeliveryID}, created: true}
		}
		return out, nil
	}
	params := func(reasons ...string) []*CreateRunsParams {
		var ps []*CreateRunsParams
		for i, r := range reasons {
			ps = append(ps, &CreateRunsParams{Event: &Event{DeliveryID: fmt.Sprint("d", i)}, Reason: r})
		}
		return ps
	}
	ctx := context.Background()

	res := batchOrEach(ctx, params(""), many, one)
	require.NoError(t, res[0].err)
	require.Equal(t, "d0", res[0].d.DeliveryID)
	require.Equal(t, [2]int32{0, 1}, [2]int32{batches.Load(), singles.Load()}, "a lone call is written alone")

	res = batchOrEach(ctx, params("", "", ""), many, one)
	for i, r := range res {
		require.NoError(t, r.err)
		require.True(t, r.created.created)
		require.Equal(t, fmt.Sprint("d", i), r.d.DeliveryID)
	}
	require.Equal(t, [2]int32{1, 1}, [2]int32{batches.Load(), singles.Load()}, "a batch in one write")

	res = batchOrEach(ctx, params("", "bad", ""), many, one)
	require.ErrorContains(t, res[1].err, "bad delivery", "the bad one fails alone")
	require.NoError(t, res[0].err)
	require.NoError(t, res[2].err)
	require.Equal(t, [2]int32{2, 4}, [2]int32{batches.Load(), singles.Load()}, "the failed batch written again one by one")
}

// TestCreateManyInOneBatch writes deliveries that meet in one batch: a
// redelivery of one of them, an older event of a ref after a newer one,
// a pull request and a dispatch.
func TestCreateManyInOneBatch(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := pgtest.New(t)
	d, err := dag.NewPostgresStore(dag.PostgresConfig{Pool: db.Pool})
	require.NoError(t, err)
	require.NoError(t, d.Migrate(ctx))
	s, err := NewPostgresRunStore(db.Pool, d, nil)
	require.NoError(t, err)
	require.NoError(t, s.Migrate(ctx))

	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	push := func(id, before, sha string, at time.Duration) *Event {
		return &Event{Provider: GitHub, HookID: "h", DeliveryID: id, Kind: KindPush, Org: "acme", Repo: "api",
			RefType: RefBranch, RefName: "main", Before: before, SHA: sha, EventTime: t0.Add(at)}
	}
	runs := []*dag.RunCreateParams{{Jobs: []*cikit.JobSpec{{ID: "build", Steps: []cikit.Step{{Run: "make"}}}}}}
	ps := []*CreateRunsParams{
		{Event: push("d1", "a", "b", time.Minute), Runs: runs},
		{Event: push("d0", "z", "a", 0), Runs: runs}, // older than d1
		{Event: push("d1", "a", "b", time.Minute), Runs: runs},
		{Event: &Event{Provider: GitHub, HookID: "h", DeliveryID: "p1", Kind: KindPullRequest, Org: "acme", Repo: "api",
			RefType: RefBranch, RefName: "feature", SHA: "c", PRNumber: 4, EventTime: t0}, Runs: runs},
		{Event: &Event{Provider: Manual, DeliveryID: "k1", Kind: KindDispatch, Org: "acme", Repo: "api",
			RefType: RefBranch, RefName: "main", SHA: "b"}, Reason: "nothing to run"},
	}
	var out []created
	require.NoError(t, pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		out, err = s.createMany(ctx, tx, ps)
		return err
	}))
	require.True(t, out[0].created)
	require.Len(t, out[0].d.RunIDs, 1)
	require.True(t, out[1].created)
	require.Contains(t, out[1].d.Dropped, "out of order")
	require.Empty(t, out[1].d.RunIDs)
	require.False(t, out[2].created, "the redelivery in the same batch")
	require.Equal(t, out[0].d.RunIDs, out[2].d.RunIDs)
	require.True(t, out[3].created)
	require.Len(t, out[3].d.RunIDs, 1)
	require.Equal(t, "nothing to run", out[4].d.Dropped)
	n, ok, err := s.PullRequestHead(ctx, "acme", "api", "feature", "c")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 4, n)
	seen, err := s.Seen(ctx, ps[1].Event)
	require.NoError(t, err)
	require.Contains(t, seen.Dropped, "out of order", "the drop is recorded")
}
