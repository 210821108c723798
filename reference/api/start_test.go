package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/reference/api"
)

// TestStartManualJob: a manual deploy waits MANUAL (the API shows it and
// what it waits for), the run ends without it, and POST .../start makes
// it READY, dispatches it and runs the run again; 409 for a job that is
// not waiting for a person, 404 for an unknown one.
func TestStartManualJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, api.Config{})
	step := []cikit.Step{{Run: "true"}}
	run, err := f.store.RunCreate(ctx, &dag.RunCreateParams{Jobs: []*cikit.JobSpec{
		{ID: "build", Steps: step},
		{ID: "deploy-prod", Needs: []string{"build"}, When: cikit.WhenManual, AllowFailure: true, Steps: step},
		{ID: "later", Needs: []string{"build"}, When: cikit.WhenDelayed, StartIn: time.Hour, Steps: step},
	}})
	require.NoError(t, err)
	f.start(t, run, "build", "runner-1", 0, 1)
	f.complete(t, run, "build", cikit.JobSucceeded, 0, 0, 10)

	var d api.RunDetail
	rec := f.do(t, http.MethodGet, "/api/v1/runs/"+run.ID)
	require.Equal(t, http.StatusOK, rec.Code)
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &d))
	require.Equal(t, cikit.JobManual, d.Jobs[1].State)
	require.Equal(t, "a person to start it", d.Jobs[1].WaitingFor)
	require.Equal(t, cikit.JobDelayed, d.Jobs[2].State)
	until := time.Date(2026, 3, 2, 11, 0, 10, 0, time.UTC)
	require.Equal(t, until, d.Jobs[2].DelayedUntil)
	require.Equal(t, "delayed until 2026-03-02T11:00:10Z", d.Jobs[2].WaitingFor)
	require.Equal(t, cikit.RunRunning, d.State, "the delayed job runs on its own")

	rec = f.do(t, http.MethodPost, "/api/v1/runs/"+run.ID+"/jobs/build/start")
	require.Equal(t, http.StatusConflict, rec.Code)
	require.Contains(t, rec.Body.String(), `job \"build\" of run \"run-1\" is succeeded: it is not a manual job`)
	rec = f.do(t, http.MethodPost, "/api/v1/runs/"+run.ID+"/jobs/nope/start")
	require.Equal(t, http.StatusNotFound, rec.Code)
	rec = f.do(t, http.MethodPost, "/api/v1/runs/nope/jobs/build/start")
	require.Equal(t, http.StatusNotFound, rec.Code)
	rec = f.do(t, http.MethodGet, "/api/v1/runs/"+run.ID+"/jobs/deploy-prod/start")
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	require.Empty(t, f.dispatchedResults())

	rec = f.do(t, http.MethodPost, "/api/v1/runs/"+run.ID+"/jobs/deploy-prod/start")
	require.Equal(t, http.StatusAccepted, rec.Code, rec.Body.String())
	d = api.RunDetail{}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &d))
	require.Equal(t, cikit.JobReady, d.Jobs[1].State)
	require.Empty(t, d.Jobs[1].WaitingFor)
	got := f.dispatchedResults()
	require.Len(t, got, 1, "the started job is offered to runners")
	require.Equal(t, "deploy-prod", got[0].Changed[0].ID())
	require.Equal(t, cikit.JobReady, got[0].Changed[0].State)

	rec = f.do(t, http.MethodPost, "/api/v1/runs/"+run.ID+"/jobs/deploy-prod/start")
	require.Equal(t, http.StatusConflict, rec.Code, "started once")
	require.Contains(t, rec.Body.String(), "it is not waiting for a person")
}
