package artifacts_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/artifacts"
	"github.com/cikit/cikit/artifacts/artifactstest"
	"github.com/cikit/cikit/internal/pgtest"
)

func TestMemoryManifest(t *testing.T) {
	t.Parallel()
	artifactstest.ExerciseManifest(t, func(t *testing.T) artifacts.Manifest { return artifacts.NewMemoryManifest() })
}

func TestPostgresManifest(t *testing.T) {
	t.Parallel()
	artifactstest.ExerciseManifest(t, func(t *testing.T) artifacts.Manifest { return newPostgresManifest(t) })
}

func newPostgresManifest(t testing.TB) *artifacts.PostgresManifest {
	t.Helper()
	db := pgtest.New(t)
	m, err := artifacts.NewPostgresManifest(db.Pool)
	require.NoError(t, err)
	require.NoError(t, m.Migrate(context.Background()))
	require.NoError(t, m.Migrate(context.Background()), "migrating twice")
	return m
}

func TestNewPostgresNeedsPool(t *testing.T) {
	t.Parallel()
	_, err := artifacts.NewPostgresManifest(nil)
	require.Error(t, err)
	_, err = artifacts.NewPostgresCacheIndex(nil)
	require.Error(t, err)
}
