package dagtest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

// outboxSetup returns a store whose outbox holds the seven events of a run
// of pipeline "acme/api:.cikit.yml" whose build succeeded, and those events.
func outboxSetup(t *testing.T, factory Factory) (*bundle, []*dag.OutboxEvent) {
	t.Helper()
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := factory(t, c.now)
	run, err := s.RunCreate(ctx, &dag.RunCreateParams{Jobs: pipeline(), Pipeline: "acme/api:.cikit.yml"})
	require.NoError(t, err)
	b := &bundle{store: s, run: run}
	b.advance(t, "build", cikit.JobSucceeded)
	evs, err := b.store.OutboxPending(ctx, 1000)
	require.NoError(t, err)
	require.Len(t, evs, 7)
	return b, evs
}

// collect is a publish func that records what it was given.
type collect struct {
	mu  sync.Mutex
	got [][]*dag.OutboxEvent
}

func (c *collect) publish(_ context.Context, evs []*dag.OutboxEvent) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, evs)
	return nil
}

// exerciseOutboxPublish covers OutboxPublish.
func exerciseOutboxPublish(t *testing.T, factory Factory) {
	t.Run("OldestFirst", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b, want := outboxSetup(t, factory)
		c := &collect{}
		n, err := b.store.OutboxPublish(ctx, 3, c.publish)
		require.NoError(t, err)
		require.Equal(t, 3, n, "limit")
		n, err = b.store.OutboxPublish(ctx, 1000, c.publish)
		require.NoError(t, err)
		require.Equal(t, 4, n)
		require.Len(t, c.got, 2)
		require.Equal(t, want[:3], c.got[0])
		require.Equal(t, want[3:], c.got[1], "a published event is not handed out again")
		for _, e := range want {
			require.Equal(t, "acme/api:.cikit.yml", e.Pipeline)
		}

		n, err = b.store.OutboxPublish(ctx, 1000, c.publish)
		require.NoError(t, err)
		require.Zero(t, n)
		require.Len(t, c.got, 2, "publish is not called without events")
		pending, err := b.store.OutboxPending(ctx, 1000)
		require.NoError(t, err)
		require.Empty(t, pending)
	})

	t.Run("ErrorLeavesPending", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b, want := outboxSetup(t, factory)
		boom := errors.New("broker down")
		n, err := b.store.OutboxPublish(ctx, 5, func(_ context.Context, evs []*dag.OutboxEvent) error {
			evs[0].Type = "changed by the caller"
			return boom
		})
		require.ErrorIs(t, err, boom)
		require.Zero(t, n)
		pending, err := b.store.OutboxPending(ctx, 1000)
		require.NoError(t, err)
		require.Equal(t, want, pending, "events stay pending, as they were")

		c := &collect{}
		n, err = b.store.OutboxPublish(ctx, 5, c.publish)
		require.NoError(t, err)
		require.Equal(t, 5, n)
		require.Equal(t, [][]*dag.OutboxEvent{want[:5]}, c.got, "a failed claim is handed out again")
	})

	t.Run("PublishGetsContext", func(t *testing.T) {
		t.Parallel()
		type key struct{}
		ctx := context.WithValue(context.Background(), key{}, "relay")
		b, _ := outboxSetup(t, factory)
		var got any
		_, err := b.store.OutboxPublish(ctx, 1, func(ctx context.Context, _ []*dag.OutboxEvent) error {
			got = ctx.Value(key{})
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, "relay", got)
	})

	t.Run("Concurrent", func(t *testing.T) {
		t.Parallel()
		b, want := outboxSetup(t, factory)
		// Each publish waits until the other is inside too; a store that
		// let one claim wait for the other would never get there. When a
		// call returns early, the other's wait is cancelled.
		var mu sync.Mutex
		inside := 0
		both := make(chan struct{})
		publish := func(ctx context.Context, _ []*dag.OutboxEvent) error {
			mu.Lock()
			if inside++; inside == 2 {
				close(both)
			}
			mu.Unlock()
			select {
			case <-both:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var wg sync.WaitGroup
		got := make([]*collect, 2)
		ns := make([]int, 2)
		errs := make([]error, 2)
		for i := range 2 {
			got[i] = &collect{}
			wg.Go(func() {
				defer func() {
					select {
					case <-both:
					default:
						cancel()
					}
				}()
				ns[i], errs[i] = b.store.OutboxPublish(ctx, 3, func(ctx context.Context, evs []*dag.OutboxEvent) error {
					return errors.Join(got[i].publish(ctx, evs), publish(ctx, evs))
				})
			})
		}
		wg.Wait()
		seen := map[string]bool{}
		for i := range 2 {
			require.NoError(t, errs[i])
			require.Equal(t, 3, ns[i])
			require.Len(t, got[i].got, 1)
			for _, e := range got[i].got[0] {
				require.False(t, seen[e.ID], "event %s handed to both callers", e.ID)
				seen[e.ID] = true
			}
		}
		for _, e := range want[:6] {
			require.True(t, seen[e.ID], "the oldest events are claimed")
		}
		pending, err := b.store.OutboxPending(context.Background(), 1000)
		require.NoError(t, err)
		require.Equal(t, want[6:], pending)
	})

	t.Run("Limit", func(t *testing.T) {
		t.Parallel()
		b, want := outboxSetup(t, factory)
		for _, limit := range []int{0, -1} {
			c := &collect{}
			_, err := b.store.OutboxPublish(context.Background(), limit, c.publish)
			require.ErrorContains(t, err, "limit must be positive")
			require.Empty(t, c.got)
		}
		pending, err := b.store.OutboxPending(context.Background(), 1000)
		require.NoError(t, err)
		require.Equal(t, want, pending)
	})
}
