package platform_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/reference/web/webtest"
	"github.com/cikit/cikit/vcs/status"
)

// TestBrowserRunPage: in headless Chromium, the platform's run page draws
// the DAG of a running pipeline with its jobs' states, and the job page
// shows the live log of the job while it runs.
func TestBrowserRunPage(t *testing.T) {
	w := newWorld(t, map[string]string{".cikit.yml": `jobs:
  setup:
    steps:
      - echo ready
  watch:
    needs: [setup]
    steps:
      - printf 'watching \033[1;32mlive\033[0m\n'
      - sleep 60
  after:
    needs: [watch]
    steps:
      - echo done
`})
	ctx := webtest.Browser(t)
	s := serve(t, w.cfg)
	base := s.p.URL()
	code, body := deliver(t, base, "delivery-browser", pushBody(w.sha))
	require.Equal(t, 202, code, body)
	var runID string
	waitFor(t, 30*time.Second, "watch to run", func() bool {
		st, ok := w.statuses(t)[status.JobContext(".cikit.yml", "watch")]
		if ok && strings.HasPrefix(st.Description, "running") {
			runID = runIDOf(t, st)
			return true
		}
		return false
	})

	// The checks wait for what they look for; a page that never shows it
	// fails them at the deadline.
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, webtest.CheckRunPage(ctx, base, runID, webtest.RunPageWant{
		State: "running",
		Jobs:  map[string]string{"setup": "succeeded", "watch": "running", "after": "pending"},
		Edges: [][2]string{{"setup", "watch"}, {"watch", "after"}},
	}))
	require.NoError(t, webtest.CheckLiveLog(ctx, base, runID, "watch", "watching live"))

	// The log was live: the job is still running.
	var job struct {
		State string `json:"state"`
	}
	require.Equal(t, 200, getJSON(t, base+"/api/v1/runs/"+runID+"/jobs/watch", &job))
	require.Equal(t, "running", job.State)
}
