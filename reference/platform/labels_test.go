package platform_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/vcs/status"
)

// hostedWorkflow asks for a GitHub-hosted runner, which the local runners
// offer by default, and for a Windows one, which no runner of this
// platform has.
const hostedWorkflow = `on: push
jobs:
  hosted:
    runs-on: ubuntu-latest
    steps:
      - run: echo "ran on a hosted label"
  windows:
    runs-on: windows-latest
    steps:
      - run: echo "never"
`

// TestHostedLabelsRunOutOfTheBox: a workflow with runs-on: ubuntu-latest
// runs on the embedded platform without configuration, and a job whose
// labels no runner has is not left "queued for a runner": its commit
// status and why-waiting say that no runner matches its labels.
func TestHostedLabelsRunOutOfTheBox(t *testing.T) {
	const file = ".github/workflows/ci.yml"
	w := newWorld(t, map[string]string{file: hostedWorkflow})
	w.cfg.Runners.Local = 1
	s := serve(t, w.cfg)
	code, body := deliver(t, s.p.URL(), "delivery-hosted", pushBody(w.sha))
	require.Equal(t, 202, code, body)

	windows := status.JobContext(file, "windows")
	var got map[string]string
	waitFor(t, 60*time.Second, "the hosted job to succeed and the windows job's status to say no runner matches", func() bool {
		got = map[string]string{}
		for ctx, st := range w.statuses(t) {
			got[ctx] = st.State + ": " + st.Description
		}
		return strings.HasPrefix(got[status.JobContext(file, "hosted")], "success") &&
			strings.Contains(got[windows], "no runner matches labels [windows-latest]")
	})
	require.True(t, strings.HasPrefix(got[windows], "pending: "), "%v", got)

	st := w.statuses(t)[windows]
	var why struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	require.Equal(t, 200, getJSON(t, s.p.URL()+"/api/v1/runs/"+runIDOf(t, st)+"/jobs/windows/why", &why))
	require.Equal(t, "no_runner_matches", why.Code, "%+v", why)
	require.Contains(t, why.Message, "windows-latest")
}
