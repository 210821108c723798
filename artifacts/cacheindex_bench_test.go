package artifacts_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/artifacts"
	"github.com/cikit/cikit/internal/pgtest"
)

// BenchmarkCacheLookup looks up a key that misses exactly and is found by
// its second restore key, among 20,000 entries in 4 scopes.
func BenchmarkCacheLookup(b *testing.B) {
	for _, impl := range []struct {
		name string
		// new returns an empty index and what to call once it is filled.
		new func(b *testing.B) (artifacts.CacheIndex, func())
	}{
		{"memory", func(*testing.B) (artifacts.CacheIndex, func()) { return artifacts.NewMemoryCacheIndex(), func() {} }},
		{"postgres", func(b *testing.B) (artifacts.CacheIndex, func()) {
			db := pgtest.New(b)
			c, err := artifacts.NewPostgresCacheIndex(db.Pool)
			require.NoError(b, err)
			require.NoError(b, c.Migrate(context.Background()))
			// Statistics, as autovacuum would gather them.
			analyze := func() {
				_, err := db.Pool.Exec(context.Background(), "ANALYZE cache_entries")
				require.NoError(b, err)
			}
			return c, analyze
		}},
	} {
		b.Run(impl.name, func(b *testing.B) {
			c, filled := impl.new(b)
			ctx := context.Background()
			for i := range 20000 {
				e := &artifacts.CacheEntry{
					Repo: "acme/api", Scope: fmt.Sprint("scope-", i%4), Key: fmt.Sprintf("go-%d-%05d", i%50, i),
					SHA256: fmt.Sprintf("%064x", i), Size: 1000, BlobKey: fmt.Sprint("cache/", i), CreatedAt: propertyEpoch,
				}
				require.NoError(b, c.CacheInsert(ctx, e))
			}
			filled()
			q := artifacts.IndexQuery{Repo: "acme/api", Scopes: []string{"scope-1", "scope-0"}, CacheQuery: artifacts.CacheQuery{
				Key: "go-7-99999", FallbackKeys: []string{"go-7-default"}, RestoreKeys: []string{"go-", "go-7-", "linux-"},
			}}
			b.ReportAllocs()
			for b.Loop() {
				e, err := c.CacheLookup(ctx, q, propertyEpoch)
				if err != nil || e == nil {
					b.Fatalf("lookup: %v, %v", e, err)
				}
			}
		})
	}
}
