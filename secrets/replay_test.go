package secrets_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/internal/pgtest"
	"github.com/cikit/cikit/secrets"
	"github.com/cikit/cikit/secrets/secretstest"
)

func TestMemoryReplays(t *testing.T) {
	t.Parallel()
	secretstest.RunReplaysTests(t, func(t *testing.T, now func() time.Time) secrets.Replays {
		return secrets.NewMemoryReplays(now)
	})
}

func TestPostgresReplays(t *testing.T) {
	t.Parallel()
	secretstest.RunReplaysTests(t, func(t *testing.T, now func() time.Time) secrets.Replays {
		db := pgtest.New(t)
		r := secrets.NewPostgresReplays(db.Pool, now)
		require.NoError(t, r.Migrate(t.Context()))
		return r
	})
}
