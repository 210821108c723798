package platform_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/vcs/status"
)

func TestMain(m *testing.M) {
	if code, ok := serveMain(); ok {
		os.Exit(code)
	}
	goleak.VerifyTestMain(m,
		// Idle keep-alive connections of http.DefaultClient.
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	)
}

// TestEndToEndEmbedded: a push webhook of a local git repository runs its
// five jobs on the embedded platform's local runners, the logs can be
// read, every job's and the pipeline's commit status reaches GitHub, and
// a second copy of the delivery creates nothing.
func TestEndToEndEmbedded(t *testing.T) {
	w := newWorld(t, map[string]string{".cikit.yml": pipeline, "README.md": "hello\n"})
	endToEnd(t, w)
}

// TestEndToEndPostgres is TestEndToEndEmbedded on PostgreSQL and Redis.
func TestEndToEndPostgres(t *testing.T) {
	w := newWorld(t, map[string]string{".cikit.yml": pipeline, "README.md": "hello\n"})
	w.onPostgres(t)
	endToEnd(t, w)
}

func endToEnd(t *testing.T, w *world) {
	s := serve(t, w.cfg)
	base := s.p.URL()
	push := pushBody(w.sha)
	code, body := deliver(t, base, "delivery-1", push)
	require.Equal(t, 202, code, body)

	got := w.waitStatuses(t, 60*time.Second, jobIDs...)
	pipe := got[status.PipelineContext(".cikit.yml")]
	require.Equal(t, "success", pipe.State, "%+v", got)
	for _, id := range jobIDs {
		st, ok := got[status.JobContext(".cikit.yml", id)]
		require.True(t, ok, "no status for job %s: %+v", id, got)
		require.Equal(t, "success", st.State, "job %s: %+v", id, st)
	}
	require.Contains(t, got[status.JobContext(".cikit.yml", "lint")].Description, "allowed to fail")
	runID := runIDOf(t, pipe)

	// The logs are readable.
	code, text := getText(t, base+"/api/v1/runs/"+runID+"/jobs/lint/log")
	require.Equal(t, 200, code, text)
	require.Contains(t, text, "lint found 3 problems")
	code, text = getText(t, base+"/api/v1/runs/"+runID+"/jobs/build/log")
	require.Equal(t, 200, code, text)
	require.Contains(t, text, "\x1b[32mbuilt\x1b[0m")

	// The run as the API shows it.
	var run struct {
		State string `json:"state"`
		SHA   string `json:"sha"`
		Jobs  []struct {
			ID    string `json:"id"`
			State string `json:"state"`
		} `json:"jobs"`
	}
	require.Equal(t, 200, getJSON(t, base+"/api/v1/runs/"+runID, &run))
	require.Equal(t, "succeeded", run.State)
	require.Equal(t, w.sha, run.SHA)
	states := map[string]string{}
	for _, j := range run.Jobs {
		states[j.ID] = j.State
	}
	require.Equal(t, map[string]string{"setup": "succeeded", "build": "succeeded", "lint": "failed", "test": "succeeded", "deploy": "succeeded"}, states)

	// A second copy of the delivery creates nothing: the receiver knows
	// it. A delivery of its id with another body is no redelivery: the
	// receiver refuses it with a conflict and it never reaches Kafka (a
	// server that did not see the first would take it, and the ingester
	// drop it, logging the conflict).
	sent := w.github.Stats().StatusesCreated
	code, body = deliver(t, base, "delivery-1", push)
	require.Equal(t, 202, code, body)
	require.Contains(t, body, `"duplicate":true`)
	code, body = deliver(t, base, "delivery-1", bytes.Replace(push, []byte(`"alice"`), []byte(`"alice" `), 1))
	require.Equal(t, 409, code, body)
	require.NotContains(t, body, `"duplicate"`)
	waitFor(t, 20*time.Second, "the ingest consumer to take the copy", func() bool {
		_, text := getText(t, base+"/metrics")
		return regexp.MustCompile(`(?m)^cikit_consumer_lag\{group="cikit-ingest",topic="cikit.vcs-events"\} 0$`).MatchString(text)
	})
	var list struct {
		Runs []struct {
			ID string `json:"id"`
		} `json:"runs"`
	}
	require.Equal(t, 200, getJSON(t, base+"/api/v1/runs", &list))
	require.Len(t, list.Runs, 1)
	require.Equal(t, runID, list.Runs[0].ID)
	s.shutdown(t) // flushes statuses and commits offsets
	require.Equal(t, sent, w.github.Stats().StatusesCreated, "the duplicate posted statuses")
}

// TestGracefulShutdown: shutting down while a job runs hands the job back
// (its attempt ends as an infrastructure failure and a new attempt waits)
// instead of leaving it to the reaper, and Run returns without error.
func TestGracefulShutdown(t *testing.T) {
	w := newWorld(t, map[string]string{".cikit.yml": "jobs:\n  long:\n    steps:\n      - echo started\n      - sleep 60\n"})
	s := serve(t, w.cfg)
	code, body := deliver(t, s.p.URL(), "delivery-graceful", pushBody(w.sha))
	require.Equal(t, 202, code, body)
	var runID string
	waitFor(t, 30*time.Second, "the job to run", func() bool {
		st, ok := w.statuses(t)[status.JobContext(".cikit.yml", "long")]
		if ok && strings.HasPrefix(st.Description, "running") {
			runID = runIDOf(t, st)
			return true
		}
		return false
	})
	s.shutdown(t)

	j, err := s.p.Jobs().JobGet(context.Background(), runID, "long")
	require.NoError(t, err)
	require.Contains(t, []cikit.JobState{cikit.JobReady, cikit.JobQueued}, j.State, "the job waits for its next attempt")
	require.Equal(t, 2, j.Attempt)
	ended, err := s.p.Jobs().JobAttempts(context.Background(), runID, "long")
	require.NoError(t, err)
	require.Len(t, ended, 1)
	require.Equal(t, cikit.JobFailed, ended[0].State)
}

// TestManualTrigger: the API starts the pipelines of a ref of a local
// repository; the same Idempotency-Key again starts nothing more.
func TestManualTrigger(t *testing.T) {
	w := newWorld(t, map[string]string{".cikit.yml": "on: [push, manual]\n" + pipeline})
	s := serve(t, w.cfg)
	trigger := func() (int, map[string]any) {
		req, err := http.NewRequest(http.MethodPost, s.p.URL()+"/api/v1/repos/acme/app/pipelines", strings.NewReader(`{"ref":"main"}`))
		require.NoError(t, err)
		req.Header.Set("Idempotency-Key", "manual-1")
		req.Header.Set("Content-Type", "application/json")
		resp, err := doAsAdmin(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var out map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		return resp.StatusCode, out
	}
	code, first := trigger()
	require.Equal(t, http.StatusCreated, code, "%v", first)
	require.Equal(t, w.sha, first["sha"])
	require.Len(t, first["run_ids"], 1)
	code, again := trigger()
	require.Equal(t, http.StatusOK, code, "%v", again)
	require.Equal(t, first["run_ids"], again["run_ids"])
	w.waitStatuses(t, 60*time.Second, jobIDs...)
}
