package dag_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/dag/dagtest"
	"github.com/cikit/cikit/internal/pgtest"
	"github.com/cikit/cikit/internal/redistest"
)

// newPostgresStore returns a migrated store in a schema of its own, with
// dependency counters in a Redis namespace of its own when ns is not nil.
func newPostgresStore(t testing.TB, now func() time.Time, ns *redistest.NS) *dag.PostgresStore {
	t.Helper()
	db := pgtest.New(t)
	cfg := dag.PostgresConfig{Pool: db.Pool, Now: now}
	if ns != nil {
		cfg.Redis, cfg.KeyPrefix = ns.Client, ns.Prefix
	}
	s, err := dag.NewPostgresStore(cfg)
	require.NoError(t, err)
	require.NoError(t, s.Migrate(t.Context()))
	return s
}

// TestPostgresStore runs the Store conformance suite on PostgreSQL, each
// store in a schema of its own: alone, and with Redis counters.
func TestPostgresStore(t *testing.T) {
	t.Parallel()
	t.Run("PostgreSQL", func(t *testing.T) {
		t.Parallel()
		dagtest.Exercise(t, func(t *testing.T, now func() time.Time) dag.Store {
			s := newPostgresStore(t, now, nil)
			require.NoError(t, s.Migrate(t.Context()), "migrating twice is a no-op")
			return s
		})
	})
	t.Run("Redis", func(t *testing.T) {
		t.Parallel()
		dagtest.Exercise(t, func(t *testing.T, now func() time.Time) dag.Store {
			return newPostgresStore(t, now, redistest.New(t))
		})
	})
}

func TestNewPostgresStoreValidates(t *testing.T) {
	t.Parallel()
	_, err := dag.NewPostgresStore(dag.PostgresConfig{})
	require.ErrorContains(t, err, "Pool is required")
	db := pgtest.New(t)
	_, err = dag.NewPostgresStore(dag.PostgresConfig{Pool: db.Pool, CounterTTL: -time.Second})
	require.ErrorContains(t, err, "CounterTTL is negative")
}

// TestPostgresStoreRules runs the rules state machine on PostgreSQL, with
// fewer runs than on the memory store: each costs real round trips. With
// Redis, the rules also lose the counters at random (a FLUSHALL of the
// store's namespace) and repair them, checking the counters against a
// recount after every step.
func TestPostgresStoreRules(t *testing.T) {
	t.Parallel()
	runs := 100
	if testing.Short() {
		runs = 5
	}
	t.Run("PostgreSQL", func(t *testing.T) {
		t.Parallel()
		dagtest.Rules(t, func(t *testing.T, now func() time.Time) dag.Store {
			return newPostgresStore(t, now, nil)
		}, dagtest.RulesConfig{Runs: runs})
	})
	t.Run("Redis", func(t *testing.T) {
		t.Parallel()
		var ns *redistest.NS
		dagtest.Rules(t, func(t *testing.T, now func() time.Time) dag.Store {
			ns = redistest.New(t)
			return newPostgresStore(t, now, ns)
		}, dagtest.RulesConfig{Runs: runs, Flush: func(ctx context.Context) error { return ns.Flush(ctx) }})
	})
}
