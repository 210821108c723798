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

// TestHubPostgres runs a log through a Hub over PostgreSQL and files: the
// production shape.
func TestHubPostgres(t *testing.T) {
	t.Parallel()
	store := newPostgresStore(t)
	dir := t.TempDir()
	b := setup(t, logs.Config{Sink: &logs.FileSink{Dir: dir}, Segments: store})
	log := testLog(300_000)
	writeLog(t, b, log, 64<<10, 120_000)
	require.True(t, b.finish(t, log).Complete)

	segs, err := store.SegmentsList(context.Background(), b.key)
	require.NoError(t, err)
	require.Len(t, segs, 3)
	require.Equal(t, "run-1/build/1/2.log", segs[2].BlobKey)
	require.Equal(t, int64(240_000), segs[2].Offset)
	require.Equal(t, digest(log[240_000:]), segs[2].SHA256)

	// Another Hub — a restarted server — serves the finished log from
	// PostgreSQL and the files, and refuses to start it again.
	other := setup(t, logs.Config{Sink: &logs.FileSink{Dir: dir}, Segments: store})
	got, _, res := follow(t, other.hub, b.key, 100_000)
	require.Equal(t, log[100_000:], got)
	require.True(t, res.Complete)
	_, err = other.try(0, 0, 0, log[:10])
	require.ErrorIs(t, err, logs.ErrFinished)
	fin, err := other.hub.Finish(context.Background(), b.key, logs.FinishParams{TotalBytes: int64(len(log)), SHA256: digest(log)})
	require.NoError(t, err)
	require.Equal(t, &logs.FinishResult{Complete: true, Bytes: int64(len(log))}, fin)
}
