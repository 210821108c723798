package artifacts_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/artifacts"
	"github.com/cikit/cikit/artifacts/artifactstest"
	"github.com/cikit/cikit/internal/pgtest"
)

func TestMemoryCacheIndex(t *testing.T) {
	t.Parallel()
	artifactstest.ExerciseCacheIndex(t, func(t *testing.T) artifacts.CacheIndex { return artifacts.NewMemoryCacheIndex() })
}

func TestPostgresCacheIndex(t *testing.T) {
	t.Parallel()
	artifactstest.ExerciseCacheIndex(t, func(t *testing.T) artifacts.CacheIndex { return newPostgresCacheIndex(t) })
}

func newPostgresCacheIndex(t testing.TB) *artifacts.PostgresCacheIndex {
	t.Helper()
	db := pgtest.New(t)
	c, err := artifacts.NewPostgresCacheIndex(db.Pool)
	require.NoError(t, err)
	require.NoError(t, c.Migrate(context.Background()))
	require.NoError(t, c.Migrate(context.Background()), "migrating twice")
	return c
}
