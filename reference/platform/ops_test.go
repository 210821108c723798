package platform_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/internal/syncbuf"
	"github.com/cikit/cikit/reference/config"
	"github.com/cikit/cikit/reference/platform"
)

// records returns the JSON log records written to b so far.
func records(t *testing.T, b *syncbuf.Buffer) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b.Bytes()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r), "%s", sc.Bytes())
		out = append(out, r)
	}
	return out
}

// TestMetricsAndCorrelation: after a push has run, /metrics counts the
// webhook, the run, the finished jobs, their queue waits and log bytes;
// and the log records of the webhook, of the runs it created and of the
// run's end carry one trace id; a request that brings its own trace
// context keeps its trace id.
func TestMetricsAndCorrelation(t *testing.T) {
	w := newWorld(t, map[string]string{".cikit.yml": pipeline})
	var logBuf syncbuf.Buffer
	s := serveLogging(t, w.cfg, platform.NewLogger(&logBuf, config.Log{Level: "info", Format: "json"}))
	base := s.p.URL()
	code, body := deliver(t, base, "delivery-ops", pushBody(w.sha))
	require.Equal(t, 202, code, body)
	w.waitStatuses(t, 60*time.Second, jobIDs...)

	code, text := getText(t, base+"/metrics")
	require.Equal(t, 200, code)
	metric := func(name string) float64 {
		t.Helper()
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(text)
		require.NotNil(t, m, "no %s in\n%s", name, text)
		v, err := strconv.ParseFloat(m[1], 64)
		require.NoError(t, err)
		return v
	}
	require.Equal(t, 1.0, metric(`cikit_webhook_requests_total{code="202",provider="github"}`))
	require.Equal(t, 1.0, metric(`cikit_webhook_duration_seconds_count{provider="github"}`))
	require.Equal(t, 1.0, metric(`cikit_runs_created_total`))
	require.Equal(t, 4.0, metric(`cikit_jobs_finished_total{state="succeeded"}`))
	require.Equal(t, 1.0, metric(`cikit_jobs_finished_total{state="failed"}`))
	require.Equal(t, 5.0, metric(`cikit_job_queue_wait_seconds_count{lane="p1",tenant="acme"}`))
	require.Greater(t, metric(`cikit_log_bytes_total`), 50.0)
	require.Equal(t, 0.0, metric(`cikit_lease_expiries_total`))
	require.GreaterOrEqual(t, metric(`cikit_outbox_lag_seconds`), 0.0)
	require.Regexp(t, `(?m)^cikit_consumer_lag\{group="cikit-ingest",topic="cikit.vcs-events"\} \d+$`, text)

	// A request's own trace context is kept and answered.
	req, err := http.NewRequest(http.MethodGet, base+"/healthz", nil)
	require.NoError(t, err)
	req.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Regexp(t, `^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$`, resp.Header.Get("Traceparent"))

	// One trace id from the webhook to the run's end.
	s.shutdown(t)
	var webhook, created, completed string
	for _, r := range records(t, &logBuf) {
		id, _ := r["trace_id"].(string)
		switch {
		case r["msg"] == "http" && r["path"] == "/webhooks/github":
			webhook = id
		case r["msg"] == "runs created":
			created = id
		case r["msg"] == "run completed":
			completed = id
		}
	}
	require.Regexp(t, `^[0-9a-f]{32}$`, webhook)
	require.Equal(t, webhook, created, "the ingester's record")
	require.Equal(t, webhook, completed, "the status consumer's record")

}
