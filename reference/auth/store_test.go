package auth_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/internal/pgtest"
	"github.com/cikit/cikit/reference/auth"
	"github.com/cikit/cikit/reference/auth/authtest"
)

func TestMemoryStore(t *testing.T) {
	t.Parallel()
	authtest.Exercise(t, func(*testing.T) (auth.Store, auth.Store) {
		s := auth.NewMemoryStore()
		return s, s
	})
}

// postgresStore returns a migrated PostgresStore of a fresh schema.
func postgresStore(t *testing.T) *auth.PostgresStore {
	t.Helper()
	db := pgtest.New(t)
	s, err := auth.NewPostgresStore(db.Pool)
	require.NoError(t, err)
	require.NoError(t, s.Migrate(t.Context()))
	return s
}

func TestPostgresStore(t *testing.T) {
	t.Parallel()
	authtest.Exercise(t, func(t *testing.T) (auth.Store, auth.Store) {
		db := pgtest.New(t)
		a, err := auth.NewPostgresStore(db.Pool)
		require.NoError(t, err)
		require.NoError(t, a.Migrate(t.Context()))
		b, err := auth.NewPostgresStore(db.Pool)
		require.NoError(t, err)
		require.NoError(t, b.Migrate(t.Context()), "migrating twice is fine")
		return a, b
	})
}
