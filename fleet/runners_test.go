package fleet_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/lease"
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
	require.Eventually(t, func() bool { return b.server.Runners()[0].State == fleet.RunnerIdle }, time.Minute, time.Millisecond)

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

// gatedJobs holds the claims' reads of jobs until its gate opens.
type gatedJobs struct {
	*dag.MemoryStore
	entered chan struct{}
	gate    chan struct{}
}

func (g *gatedJobs) JobGetMany(ctx context.Context, keys []dag.JobKey) ([]*dag.Job, error) {
	g.entered <- struct{}{}
	<-g.gate
	return g.MemoryStore.JobGetMany(ctx, keys)
}

// TestRunnerBusyWhileHandedAJob: from the moment a runner is handed a job
// until its claim is answered, it is busy, not idle: a pool's manager must
// not destroy it then.
func TestRunnerBusyWhileHandedAJob(t *testing.T) {
	t.Parallel()
	jobs := &gatedJobs{MemoryStore: dag.NewMemoryStore(dag.MemoryConfig{}), entered: make(chan struct{}, 1), gate: make(chan struct{})}
	leases, err := lease.NewManager(lease.Config{Store: lease.NewMemoryStore(), Jobs: jobs, TTL: 10 * time.Second})
	require.NoError(t, err)
	s, err := fleet.NewServer(fleet.ServerConfig{Jobs: jobs, Leases: leases, RegistrationTokens: []string{regToken},
		SigningKeys: [][]byte{[]byte(strings.Repeat("k", 32))}})
	require.NoError(t, err)
	srv := httptest.NewServer(s)
	defer srv.Close()
	var open sync.Once
	release := func() { open.Do(func() { close(jobs.gate) }) }
	defer release() // before the server closes, should the test fail while the claim is held
	b := &bundle{srv: srv, server: s, jobs: jobs}
	token := b.register(t)
	run, err := jobs.RunCreate(context.Background(), &dag.RunCreateParams{Jobs: []*cikit.JobSpec{spec("build")}})
	require.NoError(t, err)
	require.NoError(t, s.DispatchRun(context.Background(), run.ID))

	got := make(chan *claimed, 1)
	go func() { got <- b.claim(t, token, "30") }()
	<-jobs.entered // the claim is being made
	r := s.Runners()[0]
	require.Equal(t, fleet.RunnerBusy, r.State)
	require.Equal(t, "build", r.Job.JobID)
	release()
	require.Equal(t, "build", (<-got).JobID)
	require.Equal(t, fleet.RunnerBusy, s.Runners()[0].State)
}
