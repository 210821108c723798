package fleet

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBatcher(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var sizes []int
	release := make(chan struct{})
	b := newBatcher(func(_ context.Context, reqs []int) []int {
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
	b.max = 8

	got, err := b.do(t.Context(), 4)
	require.NoError(t, err)
	require.Equal(t, 40, got, "a lone call is made at once")
	require.Equal(t, []int{1}, sizes)

	const n = 30
	results := make([]int, n)
	var wg sync.WaitGroup
	wg.Go(func() { results[0], _ = b.do(t.Context(), -1) })
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.writing == 1 && len(b.queue) == 0
	}, 5*time.Second, time.Millisecond, "the leader took its own call")
	for i := 1; i < n; i++ {
		wg.Go(func() { results[i], _ = b.do(t.Context(), i) })
	}
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.queue) == n-1
	}, 5*time.Second, time.Millisecond, "the others wait")

	// One of them gives up: it is answered with its context's error, and
	// its call is still made for it.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = b.do(ctx, 99)
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
