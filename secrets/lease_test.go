package secrets_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/internal/pgtest"
	"github.com/cikit/cikit/secrets"
	"github.com/cikit/cikit/secrets/secretstest"
)

func TestMemoryLeaseStore(t *testing.T) {
	t.Parallel()
	secretstest.RunLeaseStoreTests(t, func(t *testing.T) secrets.LeaseStore { return secrets.NewMemoryLeaseStore() })
}

func TestPostgresLeaseStore(t *testing.T) {
	t.Parallel()
	secretstest.RunLeaseStoreTests(t, func(t *testing.T) secrets.LeaseStore { return newPostgresLeaseStore(t) })
}

func newPostgresLeaseStore(t *testing.T) *secrets.PostgresLeaseStore {
	t.Helper()
	db := pgtest.New(t)
	s, err := secrets.NewPostgresLeaseStore(db.Pool)
	require.NoError(t, err)
	require.NoError(t, s.Migrate(t.Context()))
	require.NoError(t, s.Migrate(t.Context()), "migrating twice")
	return s
}
