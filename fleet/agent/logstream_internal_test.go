package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/logs"
)

// restartableLogs serves the log protocol from a Hub that the test can
// replace, as a server restart loses its live logs.
type restartableLogs struct {
	mu  sync.Mutex
	hub *logs.Hub
	h   http.Handler
}

func (r *restartableLogs) restart(t *testing.T) {
	t.Helper()
	hub, err := logs.NewHub(logs.Config{Sink: &logs.MemorySink{}, Segments: &logs.MemorySegmentStore{}})
	require.NoError(t, err)
	h, err := logs.NewHandler(logs.HandlerConfig{Hub: hub, AuthorizeWrite: logs.AllowAll, AuthorizeFollow: logs.AllowAll})
	require.NoError(t, err)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hub, r.h = hub, h
}

func (r *restartableLogs) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	h := r.h
	r.mu.Unlock()
	h.ServeHTTP(w, req)
}

func (r *restartableLogs) read(t *testing.T, key logs.Key) (string, []int, *logs.FinishResult) {
	t.Helper()
	r.mu.Lock()
	hub := r.hub
	r.mu.Unlock()
	f, err := hub.Follow(context.Background(), key, 0)
	require.NoError(t, err)
	defer f.Close()
	var b strings.Builder
	var steps []int
	for {
		ev, err := f.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return b.String(), steps, f.Result()
		}
		require.NoError(t, err)
		b.Write(ev.Data)
		if len(steps) == 0 || steps[len(steps)-1] != ev.Step {
			steps = append(steps, ev.Step)
		}
	}
}

// TestLogStreamSurvivesServerRestart: the server loses the live log
// midway; the stream sends it again from the start out of its spool, and
// the finished log is whole, its steps in order.
func TestLogStreamSurvivesServerRestart(t *testing.T) {
	t.Parallel()
	srv := &restartableLogs{}
	srv.restart(t)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	base, err := url.Parse(ts.URL)
	require.NoError(t, err)
	c := &client{base: base, http: ts.Client()}
	j := &job{RunID: "run", JobID: "test 1/3", Attempt: 1, JobToken: "t"}
	quiet := slog.New(slog.DiscardHandler)
	s := newLogStream(context.Background(), c, j, 10*time.Millisecond, 8, quiet, func() { t.Error("not stale") })

	var want strings.Builder
	write := func(step int, text string) {
		s.setStep(step)
		_, _ = io.WriteString(s, text)
		want.WriteString(text)
	}
	write(0, "first step, ")
	write(1, "second step")
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.acked == s.written
	}, time.Minute, time.Millisecond, "sent")
	srv.restart(t) // the server forgets
	write(2, ", third step after the restart")
	totals := s.close(context.Background())
	defer s.remove()

	err = c.finishLog(context.Background(), j, totals)
	if ae, ok := errors.AsType[*apiError](err); ok && ae.Status == http.StatusNotFound {
		s.resend(context.Background())
		err = c.finishLog(context.Background(), j, totals)
	}
	require.NoError(t, err)
	got, steps, res := srv.read(t, logs.Key{RunID: "run", JobID: "test 1/3", Attempt: 1})
	require.Equal(t, want.String(), got)
	require.Equal(t, []int{0, 1, 2}, steps)
	require.True(t, res.Complete)
}

// cutOnce answers the first log chunk as the server's body guard answers
// a body that arrived too slowly (408), then serves the log protocol.
type cutOnce struct {
	next http.Handler
	cut  sync.Once
}

func (c *cutOnce) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPatch {
		cut := false
		c.cut.Do(func() { cut = true })
		if cut {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusRequestTimeout)
			_, _ = io.WriteString(w, `{"error": "the request body arrived too slowly"}`)
			return
		}
	}
	c.next.ServeHTTP(w, r)
}

// TestLogStreamRetriesAChunkCutAsTooSlow: a chunk the server cut because
// its body came slower than the minimum rate (408, as from a runner
// starved or briefly stopped mid-upload) is sent again; the log stays
// whole. It failed before: the 408 counted as the server refusing the
// log, and nothing more of it was sent.
func TestLogStreamRetriesAChunkCutAsTooSlow(t *testing.T) {
	t.Parallel()
	srv := &restartableLogs{}
	srv.restart(t)
	ts := httptest.NewServer(&cutOnce{next: srv})
	t.Cleanup(ts.Close)
	base, err := url.Parse(ts.URL)
	require.NoError(t, err)
	c := &client{base: base, http: ts.Client()}
	j := &job{RunID: "run", JobID: "slow", Attempt: 1, JobToken: "t"}
	s := newLogStream(context.Background(), c, j, 10*time.Millisecond, 8, slog.New(slog.DiscardHandler), func() { t.Error("not stale") })
	const text = "output sent after a chunk was cut"
	_, _ = io.WriteString(s, text)
	totals := s.close(context.Background())
	defer s.remove()
	require.NoError(t, c.finishLog(context.Background(), j, totals))
	got, _, res := srv.read(t, logs.Key{RunID: "run", JobID: "slow", Attempt: 1})
	require.Equal(t, text, got)
	require.True(t, res.Complete)
}
