package platform_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/internal/syncbuf"
	"github.com/cikit/cikit/reference/config"
	"github.com/cikit/cikit/reference/platform"
	"github.com/cikit/cikit/vcs/status"
)

// TestShutdownFlushesStatuses: commit statuses still queued when a
// graceful shutdown starts are delivered before it ends (the reporter
// keeps running until its Flush returns).
func TestShutdownFlushesStatuses(t *testing.T) {
	w := newWorld(t, map[string]string{".cikit.yml": "jobs:\n  long:\n    steps:\n      - echo started\n      - sleep 60\n"})
	// A GitHub that holds statuses until the shutdown has begun: they
	// queue up in the reporter.
	var hold atomic.Bool
	var posts atomic.Int32
	release := make(chan struct{})
	gh := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if hold.Load() && r.Method == http.MethodPost && strings.Contains(r.URL.Path, "/statuses/") {
			posts.Add(1)
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		w.github.ServeHTTP(rw, r)
	}))
	t.Cleanup(gh.Close)
	var released sync.Once
	t.Cleanup(func() { released.Do(func() { close(release) }) }) // before gh.Close, which waits for the handlers
	w.cfg.VCS.GitHub.BaseURL = gh.URL + "/"
	// Only a bound: the flush ends as soon as GitHub answers.
	w.cfg.ShutdownTimeout = 20 * time.Second
	var logBuf syncbuf.Buffer
	s := serveLogging(t, w.cfg, platform.NewLogger(&logBuf, config.Log{Level: "info", Format: "json"}))
	hold.Store(true)
	code, body := deliver(t, s.p.URL(), "delivery-flush", pushBody(w.sha))
	require.Equal(t, 202, code, body)
	waitFor(t, 30*time.Second, "the job to run", func() bool {
		runs, err := s.p.Jobs().RunList(context.Background(), &dag.RunListParams{})
		if err != nil || len(runs) == 0 {
			return false
		}
		j, err := s.p.Jobs().JobGet(context.Background(), runs[0].ID, "long")
		return err == nil && j.State == cikit.JobRunning
	})
	// Two statuses in flight (the reporter's most per key), more pending.
	waitFor(t, 30*time.Second, "statuses in flight", func() bool { return posts.Load() >= 2 })
	stop := s.stop
	s.stop = nil
	stop()
	waitFor(t, 30*time.Second, "the shutdown to begin", func() bool {
		return slices.ContainsFunc(records(t, &logBuf), func(r map[string]any) bool { return r["msg"] == "shutting down" })
	})
	released.Do(func() { close(release) })
	select {
	case err := <-s.done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the platform did not shut down within 30s")
	}
	for _, r := range records(t, &logBuf) {
		require.NotEqual(t, "flush commit statuses", r["msg"], "statuses left undelivered at shutdown: %v", r)
	}
	_, ok := w.statuses(t)[status.JobContext(".cikit.yml", "long")]
	require.True(t, ok)
}
