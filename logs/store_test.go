package logs_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/internal/pgtest"
	"github.com/cikit/cikit/logs"
	"github.com/cikit/cikit/logs/logstest"
)

func TestMemorySegmentStore(t *testing.T) {
	t.Parallel()
	logstest.Exercise(t, func(t *testing.T) logs.SegmentStore { return &logs.MemorySegmentStore{} })
}

func TestPostgresSegmentStore(t *testing.T) {
	t.Parallel()
	logstest.Exercise(t, func(t *testing.T) logs.SegmentStore { return newPostgresStore(t) })
}

func newPostgresStore(t testing.TB) *logs.PostgresSegmentStore {
	t.Helper()
	db := pgtest.New(t)
	s, err := logs.NewPostgresSegmentStore(db.Pool)
	require.NoError(t, err)
	require.NoError(t, s.Migrate(context.Background()))
	require.NoError(t, s.Migrate(context.Background()), "migrating twice")
	return s
}

func TestMemorySink(t *testing.T) {
	t.Parallel()
	logstest.ExerciseSink(t, func(t *testing.T) logs.Sink { return &logs.MemorySink{} })
}

func TestFileSink(t *testing.T) {
	t.Parallel()
	logstest.ExerciseSink(t, func(t *testing.T) logs.Sink { return &logs.FileSink{Dir: t.TempDir()} })
}
