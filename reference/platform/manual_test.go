package platform_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// manualPipeline is GitLab's: deploy-prod is a manual job (allowed to
// fail, as GitLab makes a manual job without rules), verify-prod needs it,
// and later is delayed by a second.
const manualPipeline = `stages: [build, deploy]
build:
  stage: build
  script:
    - echo built
later:
  stage: deploy
  when: delayed
  start_in: 1 second
  script:
    - echo later
deploy-prod:
  stage: deploy
  when: manual
  script:
    - echo DEPLOYING TO PRODUCTION
verify-prod:
  stage: deploy
  needs: [deploy-prod]
  script:
    - echo verified
`

type apiRun struct {
	ID    string `json:"id"`
	State string `json:"state"`
	Jobs  []struct {
		ID           string    `json:"id"`
		State        string    `json:"state"`
		WaitingFor   string    `json:"waiting_for"`
		DelayedUntil time.Time `json:"delayed_until"`
		StartedAt    time.Time `json:"started_at"`
		FinishedAt   time.Time `json:"finished_at"`
	} `json:"jobs"`
}

func (r *apiRun) states() map[string]string {
	m := map[string]string{}
	for _, j := range r.Jobs {
		m[j.ID] = j.State
	}
	return m
}

// TestManualJobEmbedded: on the embedded platform, a manual deploy-prod
// job waits MANUAL (it used to run on its own), the API shows it, the run
// succeeds without it and the delayed job runs after its start_in; then
// POST .../start runs it and what needs it.
func TestManualJobEmbedded(t *testing.T) {
	w := newWorld(t, map[string]string{".gitlab-ci.yml": manualPipeline})
	s := serve(t, w.cfg)
	base := s.p.URL()
	code, body := deliver(t, base, "delivery-1", pushBody(w.sha))
	require.Equal(t, 202, code, body)

	var run apiRun
	waitFor(t, 60*time.Second, "the run to end without its manual job", func() bool {
		var list struct {
			Runs []apiRun `json:"runs"`
		}
		if getJSON(t, base+"/api/v1/runs", &list) != 200 || len(list.Runs) == 0 {
			return false
		}
		run = apiRun{}
		return getJSON(t, base+"/api/v1/runs/"+list.Runs[0].ID, &run) == 200 && run.State == "succeeded"
	})
	require.Equal(t, map[string]string{"build": "succeeded", "later": "succeeded", "deploy-prod": "manual", "verify-prod": "pending"}, run.states())
	byID := map[string]int{}
	for i, j := range run.Jobs {
		byID[j.ID] = i
	}
	require.Equal(t, "a person to start it", run.Jobs[byID["deploy-prod"]].WaitingFor)
	require.GreaterOrEqual(t, run.Jobs[byID["later"]].StartedAt.Sub(run.Jobs[byID["build"]].FinishedAt), time.Second,
		"the delayed job waited its start_in")

	var why struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	require.Equal(t, 200, getJSON(t, base+"/api/v1/runs/"+run.ID+"/jobs/deploy-prod/why", &why))
	require.Equal(t, "manual", why.Code)
	require.Contains(t, why.Message, "waiting for a person to start it")

	resp, err := doAsAdmin(mustRequest(t, http.MethodPost, base+"/api/v1/runs/"+run.ID+"/jobs/build/start"))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	resp, err = doAsAdmin(mustRequest(t, http.MethodPost, base+"/api/v1/runs/"+run.ID+"/jobs/deploy-prod/start"))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)

	runID := run.ID
	waitFor(t, 60*time.Second, "the started job and what needs it to run", func() bool {
		run = apiRun{}
		return getJSON(t, base+"/api/v1/runs/"+runID, &run) == 200 && run.State == "succeeded" && run.states()["verify-prod"] == "succeeded"
	})
	require.Equal(t, map[string]string{"build": "succeeded", "later": "succeeded", "deploy-prod": "succeeded", "verify-prod": "succeeded"}, run.states())
	_, text := getText(t, base+"/api/v1/runs/"+runID+"/jobs/deploy-prod/log")
	require.Contains(t, text, "DEPLOYING TO PRODUCTION")
}
