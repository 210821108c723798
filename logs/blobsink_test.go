package logs_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/artifacts"
	"github.com/cikit/cikit/internal/s3test"
	"github.com/cikit/cikit/logs"
	"github.com/cikit/cikit/logs/logstest"
)

func TestBlobSinkFileStore(t *testing.T) {
	t.Parallel()
	logstest.ExerciseSink(t, func(t *testing.T) logs.Sink {
		store, err := artifacts.NewFileStore(t.TempDir())
		require.NoError(t, err)
		return logs.NewBlobSink(store, "")
	})
}

func TestBlobSinkS3Store(t *testing.T) {
	t.Parallel()
	logstest.ExerciseSink(t, func(t *testing.T) logs.Sink {
		return logs.NewBlobSink(newS3Store(t), "logs")
	})
}

func newS3Store(t *testing.T) *artifacts.S3Store {
	t.Helper()
	store, err := artifacts.NewS3Store(t.Context(), s3test.New(t, "ci").Config("ci"))
	require.NoError(t, err)
	return store
}

// TestHubS3 runs a log through a Hub into S3: the production shape of a
// finished log.
func TestHubS3(t *testing.T) {
	t.Parallel()
	store := newS3Store(t)
	b := setup(t, logs.Config{Sink: logs.NewBlobSink(store, "ci/logs")})
	log := testLog(250_000)
	writeLog(t, b, log, 64<<10, 100_000)
	require.True(t, b.finish(t, log).Complete)

	segs, err := b.segments.SegmentsList(context.Background(), b.key)
	require.NoError(t, err)
	require.Len(t, segs, 3)
	for step, seg := range segs {
		require.Equal(t, fmt.Sprintf("ci/logs/run-1/build/1/%d.log", step), seg.BlobKey, "the segment names the blob in the store")
		rc, err := store.Get(context.Background(), seg.BlobKey)
		require.NoError(t, err)
		got, err := io.ReadAll(rc)
		require.NoError(t, rc.Close())
		require.NoError(t, err)
		require.Equal(t, log[step*100_000:min(len(log), (step+1)*100_000)], string(got), "step %d", step)
	}
	for _, from := range []int64{0, 99_999, 100_000, 249_999, 250_000} {
		got, _, res := follow(t, b.hub, b.key, from)
		require.Equal(t, log[from:], got, "following the finished log from %d", from)
		require.Equal(t, &logs.FinishResult{Complete: true, Bytes: int64(len(log))}, res)
	}
}

func TestBlobSinkInvalidPrefix(t *testing.T) {
	t.Parallel()
	store, err := artifacts.NewFileStore(t.TempDir())
	require.NoError(t, err)
	key := logs.Key{RunID: "run-1", JobID: "build", Attempt: 1}
	for _, prefix := range []string{"/logs", "logs/", "../logs"} {
		sink := logs.NewBlobSink(store, prefix)
		_, err := sink.StepPut(context.Background(), key, 0, strings.NewReader("x"), 1)
		require.ErrorIs(t, err, artifacts.ErrInvalidKey, "prefix %q", prefix)
		_, err = sink.StepGet(context.Background(), key, 0)
		require.ErrorIs(t, err, artifacts.ErrInvalidKey, "prefix %q", prefix)
	}
}
