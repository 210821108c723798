package vcs_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/vcs"
	"github.com/cikit/cikit/vcs/vcstest"
)

func TestCachedConformance(t *testing.T) {
	t.Parallel()
	vcstest.Exercise(t, vcstest.Config{New: func(t *testing.T) (vcs.Provider, vcstest.Fixture) {
		m := &vcs.Memory{}
		return vcs.Cached(m, 4), &memoryFixture{m: m, snapshots: map[string]map[string]string{}, numbers: map[string]int{}}
	}})
}

// counting is a Provider that counts the calls that reach it. While
// block is not nil, ReadFile waits for it to close (or its context to
// end); fail is the error ReadFile and ReadDir answer while set.
type counting struct {
	vcs.Provider
	mu    sync.Mutex
	calls map[string]int
	block chan struct{}
	fail  error
}

func (c *counting) count(method string) (block chan struct{}, fail error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[method]++
	return c.block, c.fail
}

func (c *counting) n(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[method]
}

func (c *counting) ReadFile(ctx context.Context, repo, sha, path string) ([]byte, error) {
	block, fail := c.count("ReadFile")
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if fail != nil {
		return nil, fail
	}
	return c.Provider.ReadFile(ctx, repo, sha, path)
}

func (c *counting) ReadDir(ctx context.Context, repo, sha, dir string) ([]string, error) {
	if _, fail := c.count("ReadDir"); fail != nil {
		return nil, fail
	}
	return c.Provider.ReadDir(ctx, repo, sha, dir)
}

func (c *counting) ResolveRef(ctx context.Context, repo, ref string) (string, error) {
	c.count("ResolveRef")
	return c.Provider.ResolveRef(ctx, repo, ref)
}

const (
	commitA = "1111111111111111111111111111111111111111"
	commitB = "2222222222222222222222222222222222222222222222222222222222222222"
)

func setupCache(t *testing.T, size int) (vcs.Provider, *counting) {
	t.Helper()
	m := &vcs.Memory{}
	m.AddCommit("acme/api", commitA, map[string]string{".cikit.yml": "one", "ci/a.yml": "a", "ci/b.yml": "b", "x": "x"})
	m.AddCommit("acme/api", commitB, map[string]string{".cikit.yml": "two"})
	m.AddCommit("acme/api", "short", map[string]string{".cikit.yml": "short"})
	m.SetRef("acme/api", "main", commitA)
	c := &counting{Provider: m, calls: map[string]int{}}
	return vcs.Cached(c, size), c
}

func TestCachedHits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, c := setupCache(t, 10)
	for range 3 {
		data, err := p.ReadFile(ctx, "acme/api", commitA, ".cikit.yml")
		require.NoError(t, err)
		require.Equal(t, "one", string(data))
		data[0] = 'X' // a copy: the next read is unchanged
		names, err := p.ReadDir(ctx, "acme/api", commitA, "ci")
		require.NoError(t, err)
		require.Equal(t, []string{"a.yml", "b.yml"}, names)
		names[0] = "X"
		_, err = p.ReadFile(ctx, "acme/api", commitA, "missing.yml")
		require.ErrorIs(t, err, vcs.ErrNotFound, "not-found answers are kept")
	}
	require.Equal(t, 2, c.n("ReadFile"))
	require.Equal(t, 1, c.n("ReadDir"))

	// Keys are (repo, sha, path): each differing part is its own answer.
	data, err := p.ReadFile(ctx, "acme/api", commitB, ".cikit.yml")
	require.NoError(t, err)
	require.Equal(t, "two", string(data), "a SHA-256 commit is cached too")
	_, err = p.ReadFile(ctx, "acme/web", commitA, ".cikit.yml")
	require.ErrorIs(t, err, vcs.ErrNotFound)
	_, err = p.ReadDir(ctx, "acme/api", commitA, ".cikit.yml")
	require.ErrorIs(t, err, vcs.ErrNotFound, "a file is not a directory")
	require.Equal(t, 4, c.n("ReadFile"))
	require.Equal(t, 2, c.n("ReadDir"))
}

func TestCachedOnlyCommits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, c := setupCache(t, 10)
	for range 2 {
		data, err := p.ReadFile(ctx, "acme/api", "short", ".cikit.yml")
		require.NoError(t, err)
		require.Equal(t, "short", string(data))
		_, err = p.ReadFile(ctx, "acme/api", "main", ".cikit.yml")
		require.ErrorIs(t, err, vcs.ErrNotFound)
		_, err = p.ReadFile(ctx, "acme/api", commitA[:39]+"g", ".cikit.yml")
		require.ErrorIs(t, err, vcs.ErrNotFound)
		_, err = p.ReadDir(ctx, "acme/api", "main", "ci")
		require.ErrorIs(t, err, vcs.ErrNotFound)
		sha, err := p.ResolveRef(ctx, "acme/api", "main")
		require.NoError(t, err)
		require.Equal(t, commitA, sha)
	}
	require.Equal(t, 6, c.n("ReadFile"), "refs and short or malformed SHAs are not cached")
	require.Equal(t, 2, c.n("ReadDir"))
	require.Equal(t, 2, c.n("ResolveRef"), "other methods pass through")
}

func TestCachedErrorsNotKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, c := setupCache(t, 10)
	limited := &vcs.RateLimitError{Err: errors.New("403")}
	c.fail = limited
	_, err := p.ReadFile(ctx, "acme/api", commitA, ".cikit.yml")
	require.ErrorIs(t, err, limited)
	_, err = p.ReadDir(ctx, "acme/api", commitA, "ci")
	require.ErrorIs(t, err, limited)
	c.mu.Lock()
	c.fail = nil
	c.mu.Unlock()
	data, err := p.ReadFile(ctx, "acme/api", commitA, ".cikit.yml")
	require.NoError(t, err)
	require.Equal(t, "one", string(data))
	_, err = p.ReadDir(ctx, "acme/api", commitA, "ci")
	require.NoError(t, err)
	require.Equal(t, 2, c.n("ReadFile"))
	require.Equal(t, 2, c.n("ReadDir"))

	// A provider's own cancellation error, under a live context, is its
	// answer: not a reason to call again.
	c.mu.Lock()
	c.fail = fmt.Errorf("forge gave up: %w", context.Canceled)
	c.mu.Unlock()
	_, err = p.ReadFile(ctx, "acme/api", commitA, "x")
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 3, c.n("ReadFile"))

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = p.ReadFile(cancelled, "acme/api", commitA, ".cikit.yml")
	require.ErrorIs(t, err, context.Canceled, "even when the answer is kept")
}

func TestCachedBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, c := setupCache(t, 2)
	read := func(path string) {
		t.Helper()
		_, err := p.ReadFile(ctx, "acme/api", commitA, path)
		require.NoError(t, err)
	}
	read(".cikit.yml")
	read("x")
	read(".cikit.yml") // now the most recently used
	read("ci/a.yml")   // drops x
	require.Equal(t, 3, c.n("ReadFile"))
	read(".cikit.yml")
	read("ci/a.yml")
	require.Equal(t, 3, c.n("ReadFile"), "kept")
	read("x")
	require.Equal(t, 4, c.n("ReadFile"), "dropped, the least recently used")
}

func TestCachedSingleFlight(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p, c := setupCache(t, 10)
		c.block = make(chan struct{})
		release := sync.OnceFunc(func() { close(c.block) })
		defer release() // a failed assertion leaves no reader blocked
		var wg sync.WaitGroup
		results := make([]string, 8)
		for i := range results {
			wg.Go(func() {
				data, err := p.ReadFile(context.Background(), "acme/api", commitA, ".cikit.yml")
				if err == nil {
					results[i] = string(data)
				}
			})
		}
		synctest.Wait() // every reader waits: one in the provider, the others for it
		require.Equal(t, 1, c.n("ReadFile"))
		release()
		wg.Wait()
		for _, r := range results {
			require.Equal(t, "one", r)
		}
		require.Equal(t, 1, c.n("ReadFile"))
	})
}

// A waiter leaves when its own context ends; when the caller whose
// context the call runs under leaves, a waiter calls again under its own.
func TestCachedSingleFlightCancel(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p, c := setupCache(t, 10)
		c.block = make(chan struct{})
		release := sync.OnceFunc(func() { close(c.block) })
		defer release() // a failed assertion leaves no reader blocked
		leaderCtx, cancelLeader := context.WithCancel(context.Background())
		waiterCtx, cancelWaiter := context.WithCancel(context.Background())
		errs := make(chan error, 3)
		var data []byte
		go func() {
			_, err := p.ReadFile(leaderCtx, "acme/api", commitA, ".cikit.yml")
			errs <- err
		}()
		synctest.Wait()
		go func() {
			_, err := p.ReadFile(waiterCtx, "acme/api", commitA, ".cikit.yml")
			errs <- err
		}()
		done := make(chan struct{})
		go func() {
			defer close(done)
			var err error
			data, err = p.ReadFile(context.Background(), "acme/api", commitA, ".cikit.yml")
			errs <- err
		}()
		synctest.Wait()
		require.Equal(t, 1, c.n("ReadFile"), "both wait for the leader")

		cancelWaiter()
		require.ErrorIs(t, <-errs, context.Canceled, "the waiter left")
		cancelLeader()
		require.ErrorIs(t, <-errs, context.Canceled, "the leader left")
		synctest.Wait()
		require.Equal(t, 2, c.n("ReadFile"), "the last waiter called again")
		release()
		<-done
		require.NoError(t, <-errs)
		require.Equal(t, "one", string(data))
	})
}
