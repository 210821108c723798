package fleet_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/fleet/runnerstest"
	"github.com/cikit/cikit/internal/pgtest"
)

func TestMemoryRunnerStore(t *testing.T) {
	t.Parallel()
	runnerstest.Exercise(t.Context(), t, func(*testing.T) fleet.RunnerStore { return fleet.NewMemoryRunnerStore() })
}

func TestPostgresRunnerStore(t *testing.T) {
	t.Parallel()
	runnerstest.Exercise(t.Context(), t, func(t *testing.T) fleet.RunnerStore { return newPostgresRunners(t, pgtest.New(t)) })
}

// newPostgresRunners returns a migrated PostgresRunnerStore in db.
func newPostgresRunners(t testing.TB, db *pgtest.DB) *fleet.PostgresRunnerStore {
	t.Helper()
	s, err := fleet.NewPostgresRunnerStore(db.Pool)
	require.NoError(t, err)
	require.NoError(t, s.Migrate(t.Context()))
	return s
}
