package approvals_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cikit/cikit/internal/pgtest"
	"github.com/cikit/cikit/reference/approvals"
	"github.com/cikit/cikit/reference/approvals/approvalstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMemoryStore(t *testing.T) {
	t.Parallel()
	approvalstest.Exercise(t, func(*testing.T) approvals.Store { return &approvals.MemoryStore{} })
}

func TestPostgresStore(t *testing.T) {
	t.Parallel()
	approvalstest.Exercise(t, func(t *testing.T) approvals.Store {
		db := pgtest.New(t)
		s, err := approvals.NewPostgresStore(db.Pool)
		require.NoError(t, err)
		require.NoError(t, s.Migrate(t.Context()))
		require.NoError(t, s.Migrate(t.Context()), "migrating twice changes nothing")
		return s
	})
}
