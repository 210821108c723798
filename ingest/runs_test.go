package ingest_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/ingest"
	"github.com/cikit/cikit/ingest/ingesttest"
	"github.com/cikit/cikit/internal/pgtest"
)

func TestMemoryRunStore(t *testing.T) {
	t.Parallel()
	ingesttest.Exercise(t, func(t *testing.T, now func() time.Time) (ingest.RunStore, dag.Store) {
		d := dag.NewMemoryStore(dag.MemoryConfig{Now: now})
		return ingest.NewMemoryRunStore(d, now), d
	})
}

// newPostgresRunStore returns a migrated run store and its dag store in a
// schema of their own.
func newPostgresRunStore(t testing.TB, now func() time.Time) (*ingest.PostgresRunStore, *dag.PostgresStore) {
	t.Helper()
	db := pgtest.New(t)
	d, err := dag.NewPostgresStore(dag.PostgresConfig{Pool: db.Pool, Now: now})
	require.NoError(t, err)
	require.NoError(t, d.Migrate(t.Context()))
	s, err := ingest.NewPostgresRunStore(db.Pool, d, now)
	require.NoError(t, err)
	require.NoError(t, s.Migrate(t.Context()))
	return s, d
}

func TestPostgresRunStore(t *testing.T) {
	t.Parallel()
	ingesttest.Exercise(t, func(t *testing.T, now func() time.Time) (ingest.RunStore, dag.Store) {
		return newPostgresRunStore(t, now)
	})
}

func TestNewPostgresRunStoreValidates(t *testing.T) {
	t.Parallel()
	_, err := ingest.NewPostgresRunStore(nil, nil, nil)
	require.ErrorContains(t, err, "needs a pool and a dag store")
}
