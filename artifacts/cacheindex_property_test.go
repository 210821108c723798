package artifacts_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"

	"github.com/cikit/cikit/artifacts"
)

var propertyEpoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// propertyKey draws short keys from runes that sit at the edges of byte
// order and of LIKE's syntax, so that keys share prefixes often.
func propertyKey(minRunes, maxRunes int) *rapid.Generator[string] {
	r := rapid.SampledFrom([]rune{'a', 'b', '-', '%', '_', '\\', 'é', 0x10FFFF})
	return rapid.Custom(func(t *rapid.T) string {
		return string(rapid.SliceOfN(r, minRunes, maxRunes).Draw(t, "runes"))
	})
}

// referenceLookup is CacheLookup's documented order, restated plainly:
// the scope and key of the entry q finds among entries, or "".
func referenceLookup(entries []artifacts.CacheEntry, q artifacts.IndexQuery) string {
	inScopes := func(e artifacts.CacheEntry) bool { return e.Repo == q.Repo && slices.Contains(q.Scopes, e.Scope) }
	for _, key := range append([]string{q.Key}, q.FallbackKeys...) {
		for _, scope := range q.Scopes {
			for _, e := range entries {
				if e.Repo == q.Repo && e.Scope == scope && e.Key == key {
					return scope + "/" + key
				}
			}
		}
	}
	// The longest prefix that any entry of the scopes matches; of two of
	// one length, the first listed.
	best := -1
	for i, p := range q.RestoreKeys {
		if best >= 0 && len(p) <= len(q.RestoreKeys[best]) {
			continue
		}
		if slices.ContainsFunc(entries, func(e artifacts.CacheEntry) bool { return inScopes(e) && strings.HasPrefix(e.Key, p) }) {
			best = i
		}
	}
	if best < 0 {
		return ""
	}
	for _, scope := range q.Scopes {
		var found []artifacts.CacheEntry
		for _, e := range entries {
			if e.Repo == q.Repo && e.Scope == scope && strings.HasPrefix(e.Key, q.RestoreKeys[best]) {
				found = append(found, e)
			}
		}
		if len(found) > 0 {
			// The most recently created; of two created at once, the key
			// that sorts first.
			e := slices.MinFunc(found, func(a, b artifacts.CacheEntry) int {
				return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(a.Key, b.Key))
			})
			return e.Scope + "/" + e.Key
		}
	}
	return ""
}

// TestCacheIndexesAgree checks that the memory and PostgreSQL indexes
// answer every sequence of inserts, lookups and evictions alike, and that
// their lookups find what referenceLookup finds.
func TestCacheIndexesAgree(t *testing.T) {
	t.Parallel()
	pg := newPostgresCacheIndex(t)
	ctx := context.Background()
	var round atomic.Int64
	scopes := []string{"main", "pr", "dev"}
	rapid.Check(t, func(t *rapid.T) {
		// Each check has a repository of its own in the one database,
		// emptied first of what an earlier check (or a failed one being
		// shrunk) left, since an eviction spans repositories.
		repo := fmt.Sprintf("repo-%d", round.Add(1))
		if _, _, err := pg.CacheEvict(ctx, 0, propertyEpoch.Add(24*time.Hour), 1<<20); err != nil {
			t.Fatalf("emptying the PostgreSQL index: %v", err)
		}
		mem := artifacts.NewMemoryCacheIndex()
		indexes := []artifacts.CacheIndex{mem, pg}
		var model []artifacts.CacheEntry

		n := rapid.IntRange(0, 12).Draw(t, "entries")
		for range n {
			digest := rapid.IntRange(0, 3).Draw(t, "digest")
			e := artifacts.CacheEntry{
				Repo: repo, Scope: rapid.SampledFrom(scopes).Draw(t, "scope"), Key: propertyKey(1, 4).Draw(t, "key"),
				SHA256: fmt.Sprintf("%064x", digest), Size: int64(rapid.IntRange(1, 100).Draw(t, "size")),
				BlobKey:   fmt.Sprintf("cache/%s/%d", repo, digest),
				CreatedAt: propertyEpoch.Add(time.Duration(rapid.IntRange(0, 5).Draw(t, "created")) * time.Minute),
			}
			var errs [2]error
			for i, c := range indexes {
				errs[i] = c.CacheInsert(ctx, &e)
			}
			if errors.Is(errs[0], artifacts.ErrCacheExists) != errors.Is(errs[1], artifacts.ErrCacheExists) || (errs[0] == nil) != (errs[1] == nil) {
				t.Fatalf("insert %s/%s: memory %v, PostgreSQL %v", e.Scope, e.Key, errs[0], errs[1])
			}
			if errs[0] == nil {
				model = append(model, e)
			}
		}

		for i := range rapid.IntRange(1, 6).Draw(t, "lookups") {
			q := artifacts.IndexQuery{
				Repo:   repo,
				Scopes: rapid.SliceOfNDistinct(rapid.SampledFrom(scopes), 0, 3, func(s string) string { return s }).Draw(t, "scopes"),
				CacheQuery: artifacts.CacheQuery{
					Key:          propertyKey(1, 4).Draw(t, "lookup key"),
					FallbackKeys: rapid.SliceOfN(propertyKey(1, 4), 0, 2).Draw(t, "fallback keys"),
					RestoreKeys:  rapid.SliceOfN(propertyKey(0, 3), 0, 3).Draw(t, "restore keys"),
				},
			}
			now := propertyEpoch.Add(time.Duration(10+i) * time.Minute)
			want := referenceLookup(model, q)
			for _, c := range indexes {
				e, err := c.CacheLookup(ctx, q, now)
				if err != nil {
					t.Fatalf("%T: lookup %+v: %v", c, q, err)
				}
				got := ""
				if e != nil {
					got = e.Scope + "/" + e.Key
				}
				if got != want {
					t.Fatalf("%T: lookup %+v found %q, the reference %q", c, q, got, want)
				}
			}
		}

		lists := make([][]artifacts.CacheEntry, 2)
		for i, c := range indexes {
			var err error
			if lists[i], err = c.CacheList(ctx, repo); err != nil {
				t.Fatalf("%T: list: %v", c, err)
			}
		}
		if diff := gocmp.Diff(lists[0], lists[1], cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("lists differ (-memory +PostgreSQL):\n%s", diff)
		}

		budget := int64(rapid.IntRange(1, 300).Draw(t, "budget"))
		limit := rapid.IntRange(1, 6).Draw(t, "limit")
		olderThan := propertyEpoch.Add(time.Duration(rapid.IntRange(0, 20).Draw(t, "older than")) * time.Minute)
		type eviction struct {
			Removed []artifacts.CacheEntry
			Orphans []string
		}
		var got [2]eviction
		for i, c := range indexes {
			removed, orphans, err := c.CacheEvict(ctx, budget, olderThan, limit)
			if err != nil {
				t.Fatalf("%T: evict: %v", c, err)
			}
			got[i] = eviction{Removed: removed, Orphans: orphans}
		}
		if diff := gocmp.Diff(got[0], got[1], cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("evictions with budget %d, limit %d differ (-memory +PostgreSQL):\n%s", budget, limit, diff)
		}
	})
}
