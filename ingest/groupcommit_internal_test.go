package ingest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
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
	g := &groupCommit{max: 8, writers: 1,
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
	g := &groupCommit{max: 8, writers: 1,
		one: func(_ context.Context, p *CreateRunsParams) (*Delivery, bool, error) {
			<-release
			return &Delivery{DeliveryID: p.Event.DeliveryID}, true, nil
		},
		many: func(_ context.Context, ps []*CreateRunsParams) ([]created, error) {
			return answers(ps), nil
		},
	}
	led := startWriting(t, g)
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

// TestGroupCommitWriterReturnsWithItsAnswer: a call that writes for others
// returns once its own call is answered, handing its place to a waiting
// call, rather than writing until nobody waits (which held up its caller,
// and in the consumer the deliveries of its ref, behind the others').
func TestGroupCommitWriterReturnsWithItsAnswer(t *testing.T) {
	t.Parallel()
	first, second := make(chan struct{}), make(chan struct{})
	var batches atomic.Int32
	write := func(id string) {
		if id == "lead" {
			<-first
			return
		}
		if batches.Add(1) == 1 {
			<-second
		}
	}
	g := &groupCommit{max: 2, writers: 1,
		one: func(_ context.Context, p *CreateRunsParams) (*Delivery, bool, error) {
			write(p.Event.DeliveryID)
			return &Delivery{DeliveryID: p.Event.DeliveryID}, true, nil
		},
		many: func(_ context.Context, ps []*CreateRunsParams) ([]created, error) {
			write(ps[0].Event.DeliveryID)
			return answers(ps), nil
		},
	}
	led := startWriting(t, g)
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			_, _, err := g.do(context.Background(), &CreateRunsParams{Event: &Event{DeliveryID: fmt.Sprint(i)}})
			assert.NoError(t, err)
		})
	}
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.queue) == 6
	}, 5*time.Second, time.Millisecond, "the others wait")
	close(first)
	select {
	case err := <-led:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the first call still writes for the others")
	}
	// The place was handed on: the next batch is being written, the
	// rest wait for it.
	require.Eventually(t, func() bool { return batches.Load() == 1 }, 5*time.Second, time.Millisecond)
	g.mu.Lock()
	require.Equal(t, 1, g.writing)
	require.Len(t, g.queue, 4)
	g.mu.Unlock()
	close(second)
	wg.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	require.Zero(t, g.writing, "the place is given up when nobody waits")
	require.Empty(t, g.queue)
}

// TestGroupCommitStress: many calls, some of whose callers stop waiting,
// with two writers: every call still waiting gets its own answer, each
// call is written exactly once, and no writer's place is lost.
func TestGroupCommitStress(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	written := map[string]int{}
	record := func(id string) {
		mu.Lock()
		written[id]++
		mu.Unlock()
	}
	g := &groupCommit{max: 4, writers: 2,
		one: func(_ context.Context, p *CreateRunsParams) (*Delivery, bool, error) {
			record(p.Event.DeliveryID)
			return &Delivery{DeliveryID: p.Event.DeliveryID}, true, nil
		},
		many: func(_ context.Context, ps []*CreateRunsParams) ([]created, error) {
			time.Sleep(100 * time.Microsecond) // a transaction takes a while
			out := make([]created, len(ps))
			for i, p := range ps {
				record(p.Event.DeliveryID)
				out[i] = created{d: &Delivery{DeliveryID: p.Event.DeliveryID}, created: true}
			}
			return out, nil
		},
	}
	const callers, calls = 16, 200
	var wg sync.WaitGroup
	for w := range callers {
		wg.Go(func() {
			for i := range calls {
				id := fmt.Sprintf("%d-%d", w, i)
				ctx, cancel := context.WithCancel(context.Background())
				if i%7 == 0 {
					cancel() // this caller does not wait
				}
				d, _, err := g.do(ctx, &CreateRunsParams{Event: &Event{DeliveryID: id}})
				cancel()
				if err != nil {
					assert.ErrorIs(t, err, context.Canceled)
					continue
				}
				assert.Equal(t, id, d.DeliveryID, "its own answer")
			}
		})
	}
	wg.Wait()
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.writing == 0 && len(g.queue) == 0
	}, 10*time.Second, time.Millisecond, "every call written, every place given up")

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, written, callers*calls)
	for id, n := range written {
		require.Equal(t, 1, n, "call %s written", id)
	}
}

// answers are the answers of a batch written without fault.
func answers(ps []*CreateRunsParams) []created {
	out := make([]created, len(ps))
	for i, p := range ps {
		out[i] = created{d: &Delivery{DeliveryID: p.Event.DeliveryID}, created: true}
	}
	return out
}

// startWriting starts a call "lead" and waits until it is writing, alone;
// its error arrives on the channel returned.
func startWriting(t *testing.T, g *groupCommit) <-chan error {
	t.Helper()
	led := make(chan error, 1)
	go func() {
		_, _, err := g.do(context.Background(), &CreateRunsParams{Event: &Event{DeliveryID: "lead"}})
		led <- err
	}()
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.writing == 1 && len(g.queue) == 0
	}, 5*time.Second, time.Millisecond, "the first call is writing")
	return led
}
