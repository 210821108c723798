package platform_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/ingest"
	"github.com/cikit/cikit/internal/kafkatest"
	"github.com/cikit/cikit/vcs/status"
)

// TestServersShareTheWork: two servers on one PostgreSQL, Redis and Kafka,
// only the second with runners. A push delivered to the first runs on the
// second's runners; both serve the same run; every job's status and the
// pipeline's are reported.
func TestServersShareTheWork(t *testing.T) {
	w := newWorld(t, map[string]string{".cikit.yml": pipeline})
	w.onPostgres(t)
	kafka := kafkatest.New(t, ingest.TopicVCSEvents, ingest.TopicVCSEventsDLQ, ingest.TopicPipelineEvents,
		ingest.TopicDispatchP0, ingest.TopicDispatchP1, ingest.TopicDispatchP2)
	w.cfg.Kafka.Brokers = kafka.Addrs()

	front := *w.cfg
	front.Instance, front.Runners.Local = "front", 0
	back := *w.cfg
	back.Instance, back.Postgres.Migrate = "back", false
	a := serve(t, &front)
	b := serve(t, &back)

	code, body := deliver(t, a.p.URL(), "delivery-shared", pushBody(w.sha))
	require.Equal(t, 202, code, body)
	got := w.waitStatuses(t, 60*time.Second, jobIDs...)
	pipe := got[status.PipelineContext(".cikit.yml")]
	require.Equal(t, "success", pipe.State, "%+v", got)
	for _, id := range jobIDs {
		require.Equal(t, "success", got[status.JobContext(".cikit.yml", id)].State, id)
	}
	runID := runIDOf(t, pipe)
	for _, s := range []*serving{a, b} {
		var run struct {
			State string `json:"state"`
			Jobs  []struct {
				ID, Runner string
				Attempt    int
			} `json:"jobs"`
		}
		require.Equal(t, 200, getJSON(t, s.p.URL()+"/api/v1/runs/"+runID, &run))
		require.Equal(t, "succeeded", run.State)
		for _, j := range run.Jobs {
			require.NotEmpty(t, j.Runner, "job %s ran nowhere", j.ID)
			require.Equal(t, 1, j.Attempt, "job %s ran more than once", j.ID)
		}
	}
}
