package ingest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/internal/pgtest"
)

func TestGroupCommit(t *testing.T) {
	t.Parallel()
	var batches, singles atomic.Int32
	var largest atomic.Int32
	release := make(chan struct{})
	g := &groupCommit{max: 8,
		one: func(_ context.Context, p *CreateRunsParams) (*Delivery, bool, error) {
			singles.Add(1)
			if p.Event.DeliveryID == "lead" {
				<-release // the leader's write holds the others back, so they gather
			}
			if p.Reason == "bad" {
				return nil, false, errors.New("bad delivery")
			}
			return &Delivery{DeliveryID: p.Event.DeliveryID}, true, nil
		},
		many: func(_ context.Context, ps []*CreateRunsParams) ([]created, error) {
			batches.Add(1)
			if n := int32(len(ps)); n > largest.Load() {
				largest.Store(n)
			}
			out := make([]created, len(ps))
			for i, p := range ps {
				if p.Reason == "bad" {
					return nil, errors.New("bad batch")
				}
				out[i] = created{d: &Delivery{DeliveryID: p.Event.DeliveryID}, created: true}
			}
			return out, nil
		},
	}
	ev := func(id string) *Event { return &Event{DeliveryID: id} }
	// A lone call is written at once, alone.
	d, ok, err := g.do(context.Background(), &CreateRunsParams{Event: ev("solo")})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "solo", d.DeliveryID)
	require.Equal(t, int32(1), singles.Load())

	var wg sync.WaitGroup
	results := make([]error, 30)
	first := make(chan struct{})
	wg.Go(func() {
		close(first)
		_, _, results[0] = g.do(context.Background(), &CreateRunsParams{Event: ev("lead")})
	})
	<-first
	for i := 1; i < 30; i++ {
		reason := ""
		if i == 17 {
			reason = "bad"
		}
		wg.Go(func() {
			_, _, results[i] = g.do(context.Background(), &CreateRunsParams{Event: ev("d"), Reason: reason})
		})
	}
	// Let the followers queue up behind the leader, then release it.
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.queue) >= 20
	}, 5*time.Second, time.Millisecond)
	close(release)
	wg.Wait()
	for i, err := range results {
		if i == 17 {
			require.ErrorContains(t, err, "bad delivery", "the bad one fails alone")
			continue
		}
		require.NoError(t, err, "call %d", i)
	}
	require.LessOrEqual(t, largest.Load(), int32(8), "batches are bounded")
	require.Greater(t, largest.Load(), int32(1), "waiting calls are written together")

}

// TestGroupCommitWaiterGivesUp: a call waiting behind a leader returns
// when its context ends; the leader's write goes on.
func TestGroupCommitWaiterGivesUp(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	g := &groupCommit{max: 8,
		one: func(_ context.Context, p *CreateRunsParams) (*Delivery, bool, error) {
			<-release
			return &Delivery{DeliveryID: p.Event.DeliveryID}, true, nil
		},
		many: func(_ context.Context, ps []*CreateRunsParams) ([]created, error) {
			out := make([]created, len(ps))
			for i, p := range ps {
				out[i] = created{d: &Delivery{DeliveryID: p.Event.DeliveryID}, created: true}
			}
			return out, nil
		},
	}
	led := make(chan error)
	go func() {
		_, _, err := g.do(context.Background(), &CreateRunsParams{Event: &Event{DeliveryID: "lead"}})
		led <- err
	}()
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.leading && len(g.queue) == 0
	}, 5*time.Second, time.Millisecond, "the leader is writing")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := g.do(ctx, &CreateRunsParams{Event: &Event{DeliveryID: "late"}})
	require.ErrorIs(t, err, context.Canceled, "a follower whose context ended stops waiting")
	close(release)
	require.NoError(t, <-led)
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
