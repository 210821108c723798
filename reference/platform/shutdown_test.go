package platform_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
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
	// A GitHub that takes 2s per status: statuses queue up in the reporter.
	var slow atomic.Bool
	var posts atomic.Int32
	gh := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if slow.Load() && r.Method == http.MethodPost && strings.Contains(r.URL.Path, "/statuses/") {
			posts.Add(1)
			time.Sleep(2 * time.Second)
		}
		w.github.ServeHTTP(rw, r)
	}))
	t.Cleanup(gh.Close)
	w.cfg.VCS.GitHub.BaseURL = gh.URL + "/"
	w.cfg.ShutdownTimeout = 8 * time.Second
	var logBuf syncbuf.Buffer
	s := serveLogging(t, w.cfg, platform.NewLogger(&logBuf, config.Log{Level: "info", Format: "json"}))
	slow.Store(true)
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
	s.shutdown(t)
	for _, r := range records(t, &logBuf) {
		require.NotEqual(t, "flush commit statuses", r["msg"], "statuses left undelivered at shutdown: %v", r)
	}
	_, ok := w.statuses(t)[status.JobContext(".cikit.yml", "long")]
	require.True(t, ok)
}
