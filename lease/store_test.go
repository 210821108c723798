package lease_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/internal/pgtest"
	"github.com/cikit/cikit/lease"
	"github.com/cikit/cikit/lease/leasetest"
)

func TestMemoryStore(t *testing.T) {
	t.Parallel()
	leasetest.Exercise(t.Context(), t, func(t *testing.T) lease.Store { return lease.NewMemoryStore() })
}

// newPostgresStore returns a migrated lease store in a schema of its own.
func newPostgresStore(t testing.TB, db *pgtest.DB) *lease.PostgresStore {
	t.Helper()
	s, err := lease.NewPostgresStore(db.Pool)
	require.NoError(t, err)
	require.NoError(t, s.Migrate(t.Context()))
	return s
}

func TestPostgresStore(t *testing.T) {
	t.Parallel()
	leasetest.Exercise(t.Context(), t, func(t *testing.T) lease.Store {
		s := newPostgresStore(t, pgtest.New(t))
		require.NoError(t, s.Migrate(t.Context()), "migrating twice is a no-op")
		return s
	})
	_, err := lease.NewPostgresStore(nil)
	require.ErrorContains(t, err, "needs a pool")
}
