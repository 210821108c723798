package vcs

import (
	"container/list"
	"context"
	"errors"
	"slices"
	"sync"

	"golang.org/x/sync/singleflight"
)

// DefaultCacheSize is the number of answers Cached keeps when given no
// size.
const DefaultCacheSize = 1024

// Cached returns a Provider that remembers p's ReadFile and ReadDir
// answers at commits: the platform reads the same pipeline files of a
// commit for every event about it, and a forge counts each read against
// its rate limit.
//
// An answer is kept only when sha is a full commit SHA (40 or 64
// hexadecimal digits), whose files never change, so nothing is ever
// invalidated; a branch or tag name, which moves, is always passed to p.
// Contents and listings are kept, and so are not-found answers — a
// missing pipeline file is the common case. Only give it SHAs that exist:
// a commit not found is remembered as not found. Other errors, such as
// rate limits and cancellations, are not kept. At most size answers are
// kept (DefaultCacheSize when size < 1), the least recently used dropped
// first. Concurrent reads of one uncached answer make one call to p; each
// caller still returns when its own context ends.
//
// The other methods call p directly.
func Cached(p Provider, size int) Provider {
	if size < 1 {
		size = DefaultCacheSize
	}
	return &cached{Provider: p, size: size, lru: list.New(), entries: map[cacheKey]*list.Element{}}
}

type cached struct {
	Provider
	size   int
	flight singleflight.Group

	mu      sync.Mutex
	lru     *list.List // of *cacheEntry, most recently used first
	entries map[cacheKey]*list.Element
}

type cacheKey struct {
	dir             bool
	repo, sha, path string
}

// cacheEntry is an answer: the file's contents or the directory's names,
// or err, which is a not-found error.
type cacheEntry struct {
	key   cacheKey
	data  []byte
	names []string
	err   error
}

func (c *cached) ReadFile(ctx context.Context, repo, sha, path string) ([]byte, error) {
	e, err := c.get(ctx, cacheKey{repo: repo, sha: sha, path: path}, func(ctx context.Context) (*cacheEntry, error) {
		data, err := c.Provider.ReadFile(ctx, repo, sha, path)
		return &cacheEntry{data: data}, err
	})
	if err != nil {
		return nil, err
	}
	return slices.Clone(e.data), nil
}

func (c *cached) ReadDir(ctx context.Context, repo, sha, dir string) ([]string, error) {
	e, err := c.get(ctx, cacheKey{dir: true, repo: repo, sha: sha, path: dir}, func(ctx context.Context) (*cacheEntry, error) {
		names, err := c.Provider.ReadDir(ctx, repo, sha, dir)
		return &cacheEntry{names: names}, err
	})
	if err != nil {
		return nil, err
	}
	return slices.Clone(e.names), nil
}

// get returns the answer for key, from the cache or from one call of
// read shared by concurrent callers.
func (c *cached) get(ctx context.Context, key cacheKey, read func(context.Context) (*cacheEntry, error)) (*cacheEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !isCommitSHA(key.sha) {
		return read(ctx)
	}
	if e, ok := c.lookup(key); ok {
		return e, e.err
	}
	flightKey := "f\x00"
	if key.dir {
		flightKey = "d\x00"
	}
	flightKey += key.repo + "\x00" + key.sha + "\x00" + key.path
	for {
		// The call runs under the context of the caller that started it;
		// the others wait with their own.
		led := false
		ch := c.flight.DoChan(flightKey, func() (any, error) {
			led = true
			e, err := read(ctx)
			if err == nil || IsNotFound(err) {
				e.key, e.err = key, err
				c.add(e)
			}
			return e, err
		})
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case r := <-ch:
			// The caller that started the call gave up: try again under
			// this one's context.
			if r.Err != nil && !led && ctx.Err() == nil && (errors.Is(r.Err, context.Canceled) || errors.Is(r.Err, context.DeadlineExceeded)) {
				if e, ok := c.lookup(key); ok {
					return e, e.err
				}
				continue
			}
			if r.Err != nil {
				return nil, r.Err
			}
			return r.Val.(*cacheEntry), nil
		}
	}
}

func (c *cached) lookup(key cacheKey) (*cacheEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		return nil, false
	}
	c.lru.MoveToFront(el)
	return el.Value.(*cacheEntry), true
}

func (c *cached) add(e *cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[e.key]; ok {
		el.Value = e
		c.lru.MoveToFront(el)
		return
	}
	c.entries[e.key] = c.lru.PushFront(e)
	for c.lru.Len() > c.size {
		oldest := c.lru.Back()
		c.lru.Remove(oldest)
		delete(c.entries, oldest.Value.(*cacheEntry).key)
	}
}

// isCommitSHA reports whether s is a full SHA-1 or SHA-256 object name.
func isCommitSHA(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
			return false
		}
	}
	return true
}

// ListFiles lists through p, uncached, when p is a FileLister (see
// ListFiles).
func (c *cached) ListFiles(ctx context.Context, repo, sha, dir string, max int) ([]string, error) {
	return ListFiles(ctx, c.Provider, repo, sha, dir, max)
}
