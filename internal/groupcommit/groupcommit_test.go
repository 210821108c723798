package groupcommit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBatcher(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var sizes []int
	release := make(chan struct{})
	b := New(8, 1, func(_ context.Context, reqs []int) []int {
		mu.Lock()
		sizes = append(sizes, len(reqs))
		mu.Unlock()
		if reqs[0] == -1 {
			<-release // the leader's call holds the others back, so they gather
		}
		out := make([]int, len(reqs))
		for i, r := range reqs {
			out[i] = r * 10
		}
		return out
	})

	got, err := b.Do(t.Context(), 4)
	require.NoError(t, err)
	require.Equal(t, 40, got, "a lone call is made at once")
	require.Equal(t, []int{1}, sizes)

	const n = 30
	results := make([]int, n)
	var wg sync.WaitGroup
	wg.Go(func() { results[0], _ = b.Do(t.Context(), -1) })
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.writing == 1 && len(b.queue) == 0
	}, time.Minute, time.Millisecond, "the leader took its own call")
	for i := 1; i < n; i++ {
		wg.Go(func() { results[i], _ = b.Do(t.Context(), i) })
	}
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.queue) == n-1
	}, time.Minute, time.Millisecond, "the others wait")

	// One of them gives up: it is answered with its context's error, and
	// its call is still made for it.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = b.Do(ctx, 99)
	require.ErrorIs(t, err, context.Canceled)

	close(release)
	wg.Wait()
	require.Equal(t, -10, results[0])
	for i := 1; i < n; i++ {
		require.Equal(t, i*10, results[i], "each call gets its own answer")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	require.Zero(t, b.writing, "every writer gave its place up")
	require.Empty(t, b.queue)
	total := 0
	for _, s := range sizes[1:] {
		require.LessOrEqual(t, s, 8)
		total += s
	}
	require.Equal(t, n+1, total, "every call was made once, the abandoned one too")
	require.Less(t, len(sizes), n, "the waiting calls were batched")
}

// startWriting starts a call "lead" and waits until it is the writer,
// alone; its error arrives on the channel returned.
func startWriting(t *testing.T, b *Batcher[string, string]) <-chan error {
	t.Helper()
	led := make(chan error, 1)
	go func() {
		_, err := b.Do(context.Background(), "lead")
		led <- err
	}()
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.writing == 1 && len(b.queue) == 0
	}, time.Minute, time.Millisecond, "the first call is writing")
	return led
}

// TestBatcherWriterReturnsWithItsAnswer: a call that writes for others
// returns once its own call is answered, handing its place to a waiting
// call, rather than writing until nobody waits (which held up its caller
// behind the others').
func TestBatcherWriterReturnsWithItsAnswer(t *testing.T) {
	t.Parallel()
	first, second := make(chan struct{}), make(chan struct{})
	var batches atomic.Int32
	b := New(2, 1, func(_ context.Context, reqs []string) []string {
		if reqs[0] == "lead" {
			<-first
		} else if batches.Add(1) == 1 {
			<-second
		}
		return reqs
	})
	led := startWriting(t, b)
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			_, err := b.Do(context.Background(), fmt.Sprint(i))
			assert.NoError(t, err)
		})
	}
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.queue) == 6
	}, time.Minute, time.Millisecond, "the others wait")
	close(first)
	select {
	case err := <-led:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the first call still writes for the others")
	}
	// The place was handed on: the next batch is being written, the
	// rest wait for it.
	require.Eventually(t, func() bool { return batches.Load() == 1 }, time.Minute, time.Millisecond)
	b.mu.Lock()
	require.Equal(t, 1, b.writing)
	require.Len(t, b.queue, 4)
	b.mu.Unlock()
	close(second)
	wg.Wait()
	b.mu.Lock()
	defer b.mu.Unlock()
	require.Zero(t, b.writing, "the place is given up when nobody waits")
	require.Empty(t, b.queue)
}

// TestBatcherStress: many calls, some of whose callers stop waiting, with
// two writers: every call still waiting gets its own answer, each call is
// made exactly once, and no writer's place is lost.
func TestBatcherStress(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	made := map[string]int{}
	b := New(4, 2, func(_ context.Context, reqs []string) []string {
		time.Sleep(100 * time.Microsecond) // a transaction takes a while
		mu.Lock()
		defer mu.Unlock()
		for _, r := range reqs {
			made[r]++
		}
		return reqs
	})
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
				got, err := b.Do(ctx, id)
				cancel()
				if err != nil {
					assert.ErrorIs(t, err, context.Canceled)
					continue
				}
				assert.Equal(t, id, got, "its own answer")
			}
		})
	}
	wg.Wait()
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.writing == 0 && len(b.queue) == 0
	}, time.Minute, time.Millisecond, "every call made, every place given up")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, made, callers*calls)
	for id, n := range made {
		require.Equal(t, 1, n, "call %s made", id)
	}
}
