package fleet_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/fleet"
)

// TestRunners: the Server follows each runner from registration through
// waiting, running a job and finishing it, and forgets one that stopped
// calling.
func TestRunners(t *testing.T) {
	t.Parallel()
	b := setup(t)
	token := b.register(t, "linux", "large")
	runners := b.server.Runners()
	require.Len(t, runners, 1)
	r := runners[0]
	require.Equal(t, "r", r.Name)
	require.Equal(t, []string{"large", "linux"}, r.Labels)
	require.Equal(t, fleet.RunnerAway, r.State)

	got := make(chan *claimed, 1)
	go func() { got <- b.claim(t, token, "30") }()
	require.Eventually(t, func() bool { return b.server.Runners()[0].State == fleet.RunnerIdle }, 5*time.Second, time.Millisecond)

	b.newRun(t, spec("build"))
	c := <-got
	r = b.server.Runners()[0]
	require.Equal(t, fleet.RunnerBusy, r.State)
	require.NotNil(t, r.Job)
	require.Equal(t, c.RunID, r.Job.RunID)
	require.Equal(t, "build", r.Job.JobID)
	require.Equal(t, 1, r.Job.Attempt)

	status, _ := b.call(t, http.MethodPost, jobPath(c, "complete"), c.Token, map[string]any{"result": "succeeded"})
	require.Equal(t, http.StatusOK, status)
	r = b.server.Runners()[0]
	require.Equal(t, fleet.RunnerAway, r.State)
	require.Nil(t, r.Job)

	b.clock.Advance(3*fleet.DefaultMaxWait + time.Second)
	require.Empty(t, b.server.Runners())
}
