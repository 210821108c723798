package dag_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/dag/dagtest"
	"github.com/cikit/cikit/internal/pgtest"
)

// TestPostgresStore runs the Store conformance suite on PostgreSQL, each
// store in a schema of its own.
func TestPostgresStore(t *testing.T) {
	t.Parallel()
	dagtest.Exercise(t, func(t *testing.T, now func() time.Time) dag.Store {
		db := pgtest.New(t)
		s, err := dag.NewPostgresStore(dag.PostgresConfig{Pool: db.Pool, Now: now})
		require.NoError(t, err)
		require.NoError(t, s.Migrate(t.Context()))
		require.NoError(t, s.Migrate(t.Context()), "migrating twice is a no-op")
		return s
	})
}

func TestNewPostgresStoreValidates(t *testing.T) {
	t.Parallel()
	_, err := dag.NewPostgresStore(dag.PostgresConfig{})
	require.ErrorContains(t, err, "Pool is required")
}

// TestPostgresStoreRules runs the rules state machine on PostgreSQL, with
// fewer runs than on the memory store: each costs real round trips.
func TestPostgresStoreRules(t *testing.T) {
	t.Parallel()
	runs := 100
	if testing.Short() {
		runs = 5
	}
	dagtest.Rules(t, func(t *testing.T, now func() time.Time) dag.Store {
		db := pgtest.New(t)
		s, err := dag.NewPostgresStore(dag.PostgresConfig{Pool: db.Pool, Now: now})
		require.NoError(t, err)
		require.NoError(t, s.Migrate(t.Context()))
		return s
	}, runs)
}
