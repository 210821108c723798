package artifactstest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/artifacts"
)

// CacheIndexFactory returns a new, empty index. Each call must return an
// index that shares nothing with the others.
type CacheIndexFactory func(t *testing.T) artifacts.CacheIndex

func entry(repo, scope, key string, created int) *artifacts.CacheEntry {
	return &artifacts.CacheEntry{
		Repo: repo, Scope: scope, Key: key, SHA256: fmt.Sprintf("%064x", len(key)), Size: 100,
		BlobKey: "cache/" + repo + "/" + scope + "/" + key, CreatedAt: at(created), UploadID: "up-" + key,
	}
}

func insert(t *testing.T, c artifacts.CacheIndex, entries ...*artifacts.CacheEntry) {
	t.Helper()
	for _, e := range entries {
		require.NoError(t, c.CacheInsert(context.Background(), e), "CacheInsert %s %s %s", e.Repo, e.Scope, e.Key)
	}
}

func entries(t *testing.T, c artifacts.CacheIndex, repo string) []artifacts.CacheEntry {
	t.Helper()
	got, err := c.CacheList(context.Background(), repo)
	require.NoError(t, err, "CacheList %s", repo)
	return got
}

// entryNames names entries scope/key.
func entryNames(es []artifacts.CacheEntry) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, e.Scope+"/"+e.Key)
	}
	return out
}

// ExerciseCacheIndex runs the CacheIndex conformance suite.
func ExerciseCacheIndex(t *testing.T, factory CacheIndexFactory) {
	t.Run("Insert", func(t *testing.T) {
		t.Parallel()
		c := factory(t)
		ctx := context.Background()
		e := entry("acme/api", "main", "go-abc", 0)
		insert(t, c, e)
		e.Size = 1 // the caller's change after
		other := entry("acme/api", "main", "go-abc", 5)
		other.SHA256 = strings.Repeat("f", 64)
		require.ErrorIs(t, c.CacheInsert(ctx, other), artifacts.ErrCacheExists, "a key the scope holds")
		insert(t, c, entry("acme/api", "pr-1", "go-abc", 1), entry("acme/web", "main", "go-abc", 2))
		requireDiff(t, []artifacts.CacheEntry{*entry("acme/api", "pr-1", "go-abc", 1), *entry("acme/api", "main", "go-abc", 0)},
			entries(t, c, "acme/api"), "the first insert of a key stays, as it was inserted")
		requireDiff(t, []string{"main/go-abc"}, entryNames(entries(t, c, "acme/web")), "another repository's")
		requireDiff(t, []string{}, entryNames(entries(t, c, "acme/none")), "a repository without entries")
	})

	t.Run("InsertConcurrently", func(t *testing.T) {
		t.Parallel()
		c := factory(t)
		// SAFETY: of concurrent inserts of one key, exactly one is
		// recorded; the others are ErrCacheExists.
		const n = 8
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				e := entry("acme/api", "main", "k", 0)
				e.SHA256 = fmt.Sprintf("%064x", i)
				errs[i] = c.CacheInsert(context.Background(), e)
			})
		}
		wg.Wait()
		won := -1
		for i, err := range errs {
			if err == nil {
				require.Equal(t, -1, won, "two inserts succeeded")
				won = i
			} else {
				require.ErrorIs(t, err, artifacts.ErrCacheExists)
			}
		}
		require.NotEqual(t, -1, won, "no insert succeeded: %v", errs)
		got := entries(t, c, "acme/api")
		require.Len(t, got, 1)
		require.Equal(t, fmt.Sprintf("%064x", won), got[0].SHA256, "the winner's entry")
	})

	t.Run("Lookup", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name    string
			entries []*artifacts.CacheEntry
			q       artifacts.CacheQuery
			scopes  []string
			want    string // scope/key; "" for a miss
		}{
			{"exact", []*artifacts.CacheEntry{entry("r", "pr", "k", 0)}, artifacts.CacheQuery{Key: "k"}, []string{"pr", "main"}, "pr/k"},
			{"exact, first scope", []*artifacts.CacheEntry{entry("r", "pr", "k", 0), entry("r", "main", "k", 5)},
				artifacts.CacheQuery{Key: "k"}, []string{"pr", "main"}, "pr/k"},
			{"exact in a later scope before a fallback in the first", []*artifacts.CacheEntry{entry("r", "pr", "fb", 9), entry("r", "main", "k", 0)},
				artifacts.CacheQuery{Key: "k", FallbackKeys: []string{"fb"}}, []string{"pr", "main"}, "main/k"},
			{"fallbacks in order", []*artifacts.CacheEntry{entry("r", "pr", "fb2", 9), entry("r", "main", "fb1", 0)},
				artifacts.CacheQuery{Key: "k", FallbackKeys: []string{"fb1", "fb2"}}, []string{"pr", "main"}, "main/fb1"},
			{"a fallback before a prefix", []*artifacts.CacheEntry{entry("r", "pr", "k-longer", 9), entry("r", "main", "fb", 0)},
				artifacts.CacheQuery{Key: "k", FallbackKeys: []string{"fb"}, RestoreKeys: []string{"k-"}}, []string{"pr", "main"}, "main/fb"},
			{"the longest prefix, though in a later scope and listed last", []*artifacts.CacheEntry{
				entry("r", "pr", "linux-a", 9), entry("r", "main", "linux-go-x", 0)},
				artifacts.CacheQuery{Key: "k", RestoreKeys: []string{"linux-", "linux-go-"}}, []string{"pr", "main"}, "main/linux-go-x"},
			{"the first scope with a match, though older", []*artifacts.CacheEntry{
				entry("r", "pr", "linux-old", 0), entry("r", "main", "linux-new", 9)},
				artifacts.CacheQuery{Key: "k", RestoreKeys: []string{"linux-"}}, []string{"pr", "main"}, "pr/linux-old"},
			{"the most recently created in the scope", []*artifacts.CacheEntry{
				entry("r", "main", "linux-a", 0), entry("r", "main", "linux-b", 9), entry("r", "main", "linux-c", 5)},
				artifacts.CacheQuery{Key: "k", RestoreKeys: []string{"linux-"}}, []string{"pr", "main"}, "main/linux-b"},
			{"a prefix that is a whole key", []*artifacts.CacheEntry{entry("r", "main", "linux", 0), entry("r", "main", "linux-b", 9)},
				artifacts.CacheQuery{Key: "k", RestoreKeys: []string{"linux"}}, []string{"main"}, "main/linux-b"},
			{"only the scopes asked", []*artifacts.CacheEntry{entry("r", "other", "k", 0), entry("r", "other", "k-1", 0)},
				artifacts.CacheQuery{Key: "k", RestoreKeys: []string{"k"}}, []string{"pr", "main"}, ""},
			{"only the repository asked", []*artifacts.CacheEntry{entry("elsewhere", "main", "k", 0)},
				artifacts.CacheQuery{Key: "k", RestoreKeys: []string{""}}, []string{"main"}, ""},
			{"no scopes", []*artifacts.CacheEntry{entry("r", "main", "k", 0)}, artifacts.CacheQuery{Key: "k"}, nil, ""},
			{"an empty prefix matches every key", []*artifacts.CacheEntry{entry("r", "main", "a", 0), entry("r", "main", "b", 3)},
				artifacts.CacheQuery{Key: "k", RestoreKeys: []string{""}}, []string{"main"}, "main/b"},
			{"a miss", []*artifacts.CacheEntry{entry("r", "main", "linux-a", 0)},
				artifacts.CacheQuery{Key: "k", FallbackKeys: []string{"linux"}, RestoreKeys: []string{"mac-", "linux-a-"}}, []string{"main"}, ""},
			{"% is no wildcard", []*artifacts.CacheEntry{entry("r", "main", "axb", 9), entry("r", "main", "a%b", 0)},
				artifacts.CacheQuery{Key: "k", RestoreKeys: []string{"a%"}}, []string{"main"}, "main/a%b"},
			{"% alone", []*artifacts.CacheEntry{entry("r", "main", "axb", 9)},
				artifacts.CacheQuery{Key: "k", RestoreKeys: []string{"%"}}, []string{"main"}, ""},
			{"_ is no wildcard", []*artifacts.CacheEntry{entry("r", "main", "axc", 9), entry("r", "main", "a_c", 0)},
				artifacts.CacheQuery{Key: "k", RestoreKeys: []string{"a_"}}, []string{"main"}, "main/a_c"},
			{`\ is no escape`, []*artifacts.CacheEntry{entry("r", "main", "a_d", 9), entry("r", "main", `a\_d`, 0)},
				artifacts.CacheQuery{Key: "k", RestoreKeys: []string{`a\_`}}, []string{"main"}, `main/a\_d`},
			{`a trailing \`, []*artifacts.CacheEntry{entry("r", "main", "ab", 9), entry("r", "main", `a\b`, 0)},
				artifacts.CacheQuery{Key: "k", RestoreKeys: []string{`a\`}}, []string{"main"}, `main/a\b`},
			{"bytes, not letters", []*artifacts.CacheEntry{entry("r", "main", "éa", 0), entry("r", "main", "e-long", 9)},
				artifacts.CacheQuery{Key: "k", RestoreKeys: []string{"e", "é"}}, []string{"main"}, "main/éa"},
			{"the last code point", []*artifacts.CacheEntry{
				entry("r", "main", "a\U0010FFFF\U0010FFFFz", 0), entry("r", "main", "b", 9), entry("r", "main", "a\U0010FFFE", 9)},
				artifacts.CacheQuery{Key: "k", RestoreKeys: []string{"a\U0010FFFF"}}, []string{"main"}, "main/a\U0010FFFF\U0010FFFFz"},
			{"case matters", []*artifacts.CacheEntry{entry("r", "main", "Linux-a", 0)},
				artifacts.CacheQuery{Key: "linux-a", RestoreKeys: []string{"linux"}}, []string{"main"}, ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				c := factory(t)
				ctx := context.Background()
				insert(t, c, tc.entries...)
				got, err := c.CacheLookup(ctx, artifacts.IndexQuery{Repo: "r", Scopes: tc.scopes, CacheQuery: tc.q}, at(60))
				require.NoError(t, err)
				if tc.want == "" {
					require.Nil(t, got, "a miss")
					for _, e := range entries(t, c, "r") {
						require.True(t, e.LastHitAt.IsZero(), "a miss hits nothing: %s", e.Key)
					}
					return
				}
				require.NotNil(t, got, "a hit")
				require.Equal(t, tc.want, got.Scope+"/"+got.Key)
				want := *entry("r", got.Scope, got.Key, 0)
				for _, e := range tc.entries {
					if e.Scope == got.Scope && e.Key == got.Key {
						want = *e
					}
				}
				want.LastHitAt = at(60)
				requireDiff(t, &want, got, "the entry hit, last hit now")
				for _, e := range entries(t, c, "r") {
					if e.Scope == got.Scope && e.Key == got.Key {
						require.True(t, e.LastHitAt.Equal(at(60)), "the hit is recorded")
					} else {
						require.True(t, e.LastHitAt.IsZero(), "only the hit is: %s", e.Key)
					}
				}
			})
		}
	})

	t.Run("HasDigest", func(t *testing.T) {
		t.Parallel()
		c := factory(t)
		ctx := context.Background()
		e := entry("acme/api", "main", "k", 0)
		insert(t, c, e)
		for _, tc := range []struct {
			repo, scope, sha string
			want             bool
		}{
			{"acme/api", "main", e.SHA256, true},
			{"acme/api", "pr-1", e.SHA256, false},
			{"acme/web", "main", e.SHA256, false},
			{"acme/api", "main", strings.Repeat("0", 64), false},
		} {
			got, err := c.CacheHasDigest(ctx, tc.repo, tc.scope, tc.sha)
			require.NoError(t, err)
			require.Equal(t, tc.want, got, "%+v", tc)
		}
	})

	t.Run("List", func(t *testing.T) {
		t.Parallel()
		c := factory(t)
		ctx := context.Background()
		insert(t, c, entry("r", "main", "a", 0), entry("r", "main", "b", 10), entry("r", "pr", "c", 20), entry("r", "main", "d", 10))
		_, err := c.CacheLookup(ctx, artifacts.IndexQuery{Repo: "r", Scopes: []string{"main"}, CacheQuery: artifacts.CacheQuery{Key: "a"}}, at(30))
		require.NoError(t, err)
		requireDiff(t, []string{"main/a", "pr/c", "main/b", "main/d"}, entryNames(entries(t, c, "r")),
			"most recently hit first, created when never hit (ties by scope, key)")
		got := entries(t, c, "r")
		got[0].Key = "changed by the reader"
		require.Equal(t, "a", entries(t, c, "r")[0].Key, "answers are copies")
	})

	t.Run("EvictByAge", func(t *testing.T) {
		t.Parallel()
		c := factory(t)
		ctx := context.Background()
		shared := func(e *artifacts.CacheEntry) *artifacts.CacheEntry { e.BlobKey = "cache/shared"; return e }
		insert(t, c, entry("r", "main", "old-hit", 0), entry("r", "main", "old", 1), entry("r", "main", "new", 50),
			shared(entry("r", "main", "s1", 2)), shared(entry("r", "pr", "s2", 3)), shared(entry("r", "pr", "s3", 60)),
			entry("q", "main", "older", -10))
		hit := func(key string, now int) {
			e, err := c.CacheLookup(ctx, artifacts.IndexQuery{Repo: "r", Scopes: []string{"main"}, CacheQuery: artifacts.CacheQuery{Key: key}}, at(now))
			require.NoError(t, err)
			require.NotNil(t, e, key)
		}
		hit("old-hit", 45)
		removed, orphans, err := c.CacheEvict(ctx, 0, at(40), 3)
		require.NoError(t, err)
		requireDiff(t, []string{"main/older", "main/old", "main/s1"}, entryNames(removed), "the least recently used first, up to limit")
		requireDiff(t, []string{"cache/q/main/older", "cache/r/main/old"}, sorted(orphans), "s1's blob is still s2's and s3's")

		removed, orphans, err = c.CacheEvict(ctx, 0, at(40), 10)
		require.NoError(t, err)
		requireDiff(t, []string{"pr/s2"}, entryNames(removed), "the rest of those used before olderThan; old-hit was hit since")
		require.Empty(t, orphans, "s3 still has the shared blob")
		requireDiff(t, []string{"pr/s3", "main/new", "main/old-hit"}, entryNames(entries(t, c, "r")), "what is left")

		removed, orphans, err = c.CacheEvict(ctx, 0, at(61), 10)
		require.NoError(t, err)
		requireDiff(t, []string{"main/old-hit", "main/new", "pr/s3"}, entryNames(removed), "all")
		requireDiff(t, []string{"cache/r/main/new", "cache/r/main/old-hit", "cache/shared"}, sorted(orphans), "the last of the shared blob")
		removed, orphans, err = c.CacheEvict(ctx, 0, at(100), 10)
		require.NoError(t, err)
		require.Empty(t, removed)
		require.Empty(t, orphans)
		_, _, err = c.CacheEvict(ctx, 0, at(100), 0)
		require.Error(t, err, "a limit of 0")
	})

	t.Run("DeleteBlob", func(t *testing.T) {
		t.Parallel()
		c := factory(t)
		ctx := context.Background()
		shared := func(e *artifacts.CacheEntry) *artifacts.CacheEntry { e.BlobKey = "cache/shared"; return e }
		insert(t, c, shared(entry("r", "pr", "b", 0)), shared(entry("r", "main", "a", 1)), entry("r", "main", "own", 2),
			shared(entry("q", "main", "c", 3)))
		removed, err := c.CacheDeleteBlob(ctx, "cache/shared")
		require.NoError(t, err)
		requireDiff(t, []string{"main/c", "main/a", "pr/b"}, entryNames(removed), "every entry of the blob, by repository, scope and key")
		requireDiff(t, []string{"main/own"}, entryNames(entries(t, c, "r")), "the others stay")
		hit, err := c.CacheHasDigest(ctx, "r", "pr", removed[2].SHA256)
		require.NoError(t, err)
		require.False(t, hit, "a removed entry's digest is gone with it")
		removed, err = c.CacheDeleteBlob(ctx, "cache/shared")
		require.NoError(t, err)
		require.Empty(t, removed, "deleting twice")
		require.NoError(t, c.CacheInsert(ctx, shared(entry("r", "pr", "b", 5))), "the key may be saved again")
	})

	t.Run("EvictByBudget", func(t *testing.T) {
		t.Parallel()
		c := factory(t)
		ctx := context.Background()
		sized := func(e *artifacts.CacheEntry, size int64) *artifacts.CacheEntry { e.Size = size; return e }
		insert(t, c,
			sized(entry("big", "main", "a", 0), 100), sized(entry("big", "main", "b", 10), 100),
			sized(entry("big", "pr", "c", 20), 100), sized(entry("big", "main", "d", 30), 100),
			sized(entry("small", "main", "e", 0), 150), sized(entry("ancient", "main", "f", -100), 10))
		_, err := c.CacheLookup(ctx, artifacts.IndexQuery{Repo: "big", Scopes: []string{"main"}, CacheQuery: artifacts.CacheQuery{Key: "a"}}, at(40))
		require.NoError(t, err)
		// big holds 400 bytes; used in order b, c, d, a.
		removed, _, err := c.CacheEvict(ctx, 150, at(-50), 2)
		require.NoError(t, err)
		requireDiff(t, []string{"main/f", "main/b"}, entryNames(removed), "age first, then over budget, up to limit")
		removed, orphans, err := c.CacheEvict(ctx, 150, at(-50), 10)
		require.NoError(t, err)
		requireDiff(t, []string{"pr/c", "main/d"}, entryNames(removed), "until big is within 150 bytes; small is at it")
		requireDiff(t, []string{"cache/big/main/d", "cache/big/pr/c"}, sorted(orphans), "the blobs of the removed")
		requireDiff(t, []string{"main/a"}, entryNames(entries(t, c, "big")), "the most recently hit stays")
		removed, _, err = c.CacheEvict(ctx, 0, at(-50), 10)
		require.NoError(t, err)
		require.Empty(t, removed, "no budget")
	})

	t.Run("BadInput", func(t *testing.T) {
		t.Parallel()
		c := factory(t)
		ctx := context.Background()
		long := strings.Repeat("k", artifacts.MaxNameLen+1)
		longest := strings.Repeat("k", artifacts.MaxNameLen)
		require.ErrorIs(t, c.CacheInsert(ctx, entry("r", "main", long, 0)), artifacts.ErrRefused, "a key too long")
		require.ErrorIs(t, c.CacheInsert(ctx, entry("r", "main", "", 0)), artifacts.ErrRefused, "an empty key")
		require.ErrorIs(t, c.CacheInsert(ctx, entry("r", "main", "a\x00b", 0)), artifacts.ErrRefused, "a NUL")
		require.ErrorIs(t, c.CacheInsert(ctx, entry("r", "main", "a\xffb", 0)), artifacts.ErrRefused, "not UTF-8")
		require.ErrorIs(t, c.CacheInsert(ctx, nil), artifacts.ErrRefused, "no entry")
		requireDiff(t, []string{}, entryNames(entries(t, c, "r")), "nothing refused is recorded")
		insert(t, c, entry("r", "main", longest, 0))

		many := make([]string, artifacts.MaxRestoreKeys+1)
		for i := range many {
			many[i] = fmt.Sprint("p", i)
		}
		for _, q := range []artifacts.CacheQuery{
			{Key: long},
			{Key: ""},
			{Key: "k", FallbackKeys: []string{long}},
			{Key: "k", RestoreKeys: []string{long}},
			{Key: "k", RestoreKeys: many},
			{Key: "k", FallbackKeys: many[:artifacts.MaxRestoreKeys/2+1], RestoreKeys: many[:artifacts.MaxRestoreKeys/2]},
			{Key: "k", RestoreKeys: []string{"a\x00"}},
		} {
			_, err := c.CacheLookup(ctx, artifacts.IndexQuery{Repo: "r", Scopes: []string{"main"}, CacheQuery: q}, at(1))
			require.ErrorIs(t, err, artifacts.ErrRefused, "%+v", q)
		}
		got, err := c.CacheLookup(ctx, artifacts.IndexQuery{Repo: "r", Scopes: []string{"main"},
			CacheQuery: artifacts.CacheQuery{Key: "x", RestoreKeys: many[:artifacts.MaxRestoreKeys-1], FallbackKeys: []string{longest}}}, at(1))
		require.NoError(t, err, "keys of MaxNameLen bytes and MaxRestoreKeys of them")
		require.NotNil(t, got)
	})

	t.Run("CancelledContext", func(t *testing.T) {
		t.Parallel()
		c := factory(t)
		cancelled, cancel := context.WithCancel(context.Background())
		cancel()
		require.ErrorIs(t, c.CacheInsert(cancelled, entry("r", "main", "k", 0)), context.Canceled)
		_, err := c.CacheLookup(cancelled, artifacts.IndexQuery{Repo: "r", Scopes: []string{"main"}, CacheQuery: artifacts.CacheQuery{Key: "k"}}, at(1))
		require.ErrorIs(t, err, context.Canceled)
		requireDiff(t, []string{}, entryNames(entries(t, c, "r")), "nothing recorded")
	})

	t.Run("Concurrent", func(t *testing.T) {
		t.Parallel()
		c := factory(t)
		ctx := context.Background()
		// Lookups, inserts and evictions at once: each call succeeds, and
		// an entry is either listed or was removed by exactly one
		// eviction.
		const n = 24
		var wg sync.WaitGroup
		errs := make([]error, 3*n)
		var mu sync.Mutex
		evicted := map[string]int{}
		for i := range n {
			wg.Go(func() { errs[i] = c.CacheInsert(ctx, entry("r", "main", fmt.Sprint("k-", i), i)) })
			wg.Go(func() {
				_, errs[n+i] = c.CacheLookup(ctx, artifacts.IndexQuery{Repo: "r", Scopes: []string{"main"},
					CacheQuery: artifacts.CacheQuery{Key: fmt.Sprint("k-", i), RestoreKeys: []string{"k-"}}}, at(100+i))
			})
			wg.Go(func() {
				removed, _, err := c.CacheEvict(ctx, 1000, time.Time{}, 2)
				errs[2*n+i] = err
				mu.Lock()
				defer mu.Unlock()
				for _, e := range removed {
					evicted[e.Key]++
				}
			})
		}
		wg.Wait()
		for i, err := range errs {
			require.NoError(t, err, "call %d", i)
		}
		left := entries(t, c, "r")
		for _, e := range left {
			require.Zero(t, evicted[e.Key], "%s is listed and was evicted", e.Key)
		}
		for k, count := range evicted {
			require.Equal(t, 1, count, "%s is evicted once", k)
		}
		require.Len(t, evicted, n-len(left), "every entry is listed or evicted")
		var total int64
		for _, e := range left {
			total += e.Size
		}
		removed, _, err := c.CacheEvict(ctx, 1000, time.Time{}, n)
		require.NoError(t, err)
		require.LessOrEqual(t, total-int64(len(removed))*100, int64(1000), "within budget after a last eviction")
	})
}

func sorted(s []string) []string {
	return slices.Sorted(slices.Values(s))
}
