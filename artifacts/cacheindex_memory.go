package artifacts

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// MemoryCacheIndex is a CacheIndex in memory, for tests and `cikit run`.
// Its zero value is not ready: use NewMemoryCacheIndex.
type MemoryCacheIndex struct {
	mu      sync.Mutex
	entries map[entryID]CacheEntry
}

// entryID is a cache entry's primary key.
type entryID struct{ repo, scope, key string }

var _ CacheIndex = (*MemoryCacheIndex)(nil)

// NewMemoryCacheIndex returns an empty index.
func NewMemoryCacheIndex() *MemoryCacheIndex {
	return &MemoryCacheIndex{entries: map[entryID]CacheEntry{}}
}

// CacheLookup implements CacheIndex. Of two prefixes of one length that
// match, the first in q.RestoreKeys wins; of two entries created at once,
// the one whose key sorts first.
func (c *MemoryCacheIndex) CacheLookup(ctx context.Context, q IndexQuery, now time.Time) (*CacheEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkQuery(q); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	hit := func(id entryID) *CacheEntry {
		e := c.entries[id]
		e.LastHitAt = storedTime(now)
		c.entries[id] = e
		return &e
	}
	for _, key := range append([]string{q.Key}, q.FallbackKeys...) {
		for _, scope := range q.Scopes {
			id := entryID{q.Repo, scope, key}
			if _, ok := c.entries[id]; ok {
				return hit(id), nil
			}
		}
	}
	for _, i := range prefixOrder(q.RestoreKeys) {
		// The most recent match of the prefix in each scope.
		best := make([]CacheEntry, len(q.Scopes))
		found := false
		for id, e := range c.entries {
			if id.repo != q.Repo || !strings.HasPrefix(id.key, q.RestoreKeys[i]) {
				continue
			}
			for s, scope := range q.Scopes {
				if scope == id.scope && (best[s].Key == "" || cmp.Or(best[s].CreatedAt.Compare(e.CreatedAt), cmp.Compare(e.Key, best[s].Key)) < 0) {
					best[s], found = e, true
				}
			}
		}
		if !found {
			continue
		}
		for _, e := range best {
			if e.Key != "" {
				return hit(entryID{e.Repo, e.Scope, e.Key}), nil
			}
		}
	}
	return nil, nil
}

// prefixOrder returns the indexes of prefixes, longest first, and of two
// of one length the first first.
func prefixOrder(prefixes []string) []int {
	order := make([]int, len(prefixes))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(len(prefixes[b]), len(prefixes[a])) })
	return order
}

// CacheInsert implements CacheIndex.
func (c *MemoryCacheIndex) CacheInsert(ctx context.Context, e *CacheEntry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkEntry(e); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	id := entryID{e.Repo, e.Scope, e.Key}
	if _, ok := c.entries[id]; ok {
		return fmt.Errorf("artifacts: cache key %q in scope %q of %s: %w", e.Key, e.Scope, e.Repo, ErrCacheExists)
	}
	c.entries[id] = storedEntry(*e)
	return nil
}

// CacheHasDigest implements CacheIndex.
func (c *MemoryCacheIndex) CacheHasDigest(ctx context.Context, repo, scope, sha256 string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := checkTexts("the repository", repo, "the scope", scope, "the SHA-256", sha256); err != nil {
		return false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, e := range c.entries {
		if id.repo == repo && id.scope == scope && e.SHA256 == sha256 {
			return true, nil
		}
	}
	return false, nil
}

// CacheEvict implements CacheIndex. Entries go least recently used first
// (last hit, or created when never hit), of two used at once by
// repository, scope and key; the orphan blob keys are sorted.
func (c *MemoryCacheIndex) CacheEvict(ctx context.Context, budget int64, olderThan time.Time, limit int) ([]CacheEntry, []string, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if err := checkLimit(limit); err != nil {
		return nil, nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var old []CacheEntry
	for _, e := range c.entries {
		if lastUsed(e).Before(olderThan) {
			old = append(old, e)
		}
	}
	slices.SortFunc(old, byUse)
	removed := old[:min(len(old), limit)]
	c.remove(removed)

	if budget > 0 && len(removed) < limit {
		byRepo := map[string][]CacheEntry{}
		for _, e := range c.entries {
			byRepo[e.Repo] = append(byRepo[e.Repo], e)
		}
		var over []CacheEntry
		for _, entries := range byRepo {
			slices.SortFunc(entries, byUse)
			var total int64
			for _, e := range entries {
				total += e.Size
			}
			for _, e := range entries {
				if total <= budget {
					break
				}
				over = append(over, e)
				total -= e.Size
			}
		}
		slices.SortFunc(over, byUse)
		over = over[:min(len(over), limit-len(removed))]
		c.remove(over)
		removed = append(removed, over...)
	}

	var orphans []string
	for _, e := range removed {
		if !slices.Contains(orphans, e.BlobKey) && !c.refers(e.BlobKey) {
			orphans = append(orphans, e.BlobKey)
		}
	}
	slices.Sort(orphans)
	return removed, orphans, nil
}

func (c *MemoryCacheIndex) remove(entries []CacheEntry) {
	for _, e := range entries {
		delete(c.entries, entryID{e.Repo, e.Scope, e.Key})
	}
}

// CacheDeleteBlob implements CacheIndex. The entries are sorted by
// repository, scope and key.
func (c *MemoryCacheIndex) CacheDeleteBlob(ctx context.Context, blobKey string) ([]CacheEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkText("the blob key", blobKey, 0); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var removed []CacheEntry
	for id, e := range c.entries {
		if e.BlobKey == blobKey {
			removed = append(removed, e)
			delete(c.entries, id)
		}
	}
	slices.SortFunc(removed, byID)
	return removed, nil
}

func byID(a, b CacheEntry) int {
	return cmp.Or(strings.Compare(a.Repo, b.Repo), strings.Compare(a.Scope, b.Scope), strings.Compare(a.Key, b.Key))
}

// refers reports whether an entry has blobKey.
func (c *MemoryCacheIndex) refers(blobKey string) bool {
	for _, e := range c.entries {
		if e.BlobKey == blobKey {
			return true
		}
	}
	return false
}

// CacheList implements CacheIndex. Of two entries used at once, the one
// whose scope, then key, sorts first comes first.
func (c *MemoryCacheIndex) CacheList(ctx context.Context, repo string) ([]CacheEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkText("the repository", repo, 0); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []CacheEntry
	for _, e := range c.entries {
		if e.Repo == repo {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b CacheEntry) int {
		return cmp.Or(lastUsed(b).Compare(lastUsed(a)), cmp.Compare(a.Scope, b.Scope), cmp.Compare(a.Key, b.Key))
	})
	return out, nil
}

// lastUsed is when e was last hit, or created when never hit.
func lastUsed(e CacheEntry) time.Time {
	if e.LastHitAt.IsZero() {
		return e.CreatedAt
	}
	return e.LastHitAt
}

// byUse orders entries least recently used first, then by repository,
// scope and key.
func byUse(a, b CacheEntry) int {
	return cmp.Or(lastUsed(a).Compare(lastUsed(b)), cmp.Compare(a.Repo, b.Repo), cmp.Compare(a.Scope, b.Scope), cmp.Compare(a.Key, b.Key))
}

// checkQuery refuses a lookup either index could not answer alike.
func checkQuery(q IndexQuery) error {
	if err := checkName("the cache key", q.Key); err != nil {
		return err
	}
	if n := len(q.FallbackKeys) + len(q.RestoreKeys); n > MaxRestoreKeys {
		return fmt.Errorf("artifacts: a cache lookup has %d fallback and restore keys, expected at most %d: %w", n, MaxRestoreKeys, ErrRefused)
	}
	for _, k := range q.FallbackKeys {
		if err := checkName("a fallback key", k); err != nil {
			return err
		}
	}
	for _, k := range q.RestoreKeys {
		if err := checkText("a restore key", k, MaxNameLen); err != nil {
			return err
		}
	}
	for _, s := range q.Scopes {
		if err := checkText("a scope", s, 0); err != nil {
			return err
		}
	}
	return checkText("the repository", q.Repo, 0)
}

// checkEntry refuses an entry either index could not keep.
func checkEntry(e *CacheEntry) error {
	if e == nil {
		return fmt.Errorf("artifacts: no cache entry: %w", ErrRefused)
	}
	if err := checkName("the cache key", e.Key); err != nil {
		return err
	}
	return checkTexts("the cache entry's repository", e.Repo, "its scope", e.Scope, "its SHA-256", e.SHA256, "its blob key", e.BlobKey,
		"its upload ID", e.UploadID)
}

// storedEntry is e as the indexes keep it.
func storedEntry(e CacheEntry) CacheEntry {
	e.CreatedAt = storedTime(e.CreatedAt)
	e.LastHitAt = storedTime(e.LastHitAt)
	return e
}
