package cikit_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cikit/cikit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestJobStates(t *testing.T) {
	t.Parallel()
	terminal := map[cikit.JobState]bool{cikit.JobSucceeded: true, cikit.JobFailed: true, cikit.JobSkipped: true, cikit.JobCancelled: true}
	for _, s := range cikit.JobStates {
		require.True(t, s.Valid())
		require.Equal(t, terminal[s], s.Terminal(), s)
		require.Equal(t, s == cikit.JobQueued || s == cikit.JobRunning || s == cikit.JobCancelRequested, s.Active(), s)
	}
	require.False(t, cikit.JobState("").Valid())
	require.False(t, cikit.JobState("").Terminal())
	for _, s := range []cikit.RunState{cikit.RunSucceeded, cikit.RunFailed, cikit.RunCancelled} {
		require.True(t, s.Terminal())
	}
	require.False(t, cikit.RunRunning.Terminal())
	require.False(t, cikit.RunPending.Terminal())
	require.False(t, cikit.RunBlocked.Terminal(), "a blocked run waits for a person")
	require.False(t, cikit.JobManual.Terminal() || cikit.JobManual.Active())
	require.False(t, cikit.JobDelayed.Terminal() || cikit.JobDelayed.Active())
}

func TestJobStateJSON(t *testing.T) {
	t.Parallel()
	var s cikit.JobState
	require.NoError(t, json.Unmarshal([]byte(`"skipped"`), &s))
	require.Equal(t, cikit.JobSkipped, s)
	require.ErrorContains(t, json.Unmarshal([]byte(`"exploded"`), &s), `unknown job state "exploded"`)
	require.Equal(t, cikit.JobSkipped, s, "a refused value leaves the state alone")
}

func TestTransitionError(t *testing.T) {
	t.Parallel()
	err := error(&cikit.TransitionError{Job: "build", Attempt: 2, From: cikit.JobPending, To: cikit.JobRunning, Reason: "not queued"})
	require.ErrorIs(t, err, cikit.ErrInvalidTransition)
	require.False(t, errors.Is(err, cikit.ErrConflict))
	require.Equal(t, `job "build" attempt 2: cannot go from pending to running: not queued`, err.Error())
}

func TestJobSpecCloneIsDeep(t *testing.T) {
	t.Parallel()
	orig := &cikit.JobSpec{ID: "a", Needs: []string{"b"}, Env: map[string]string{"K": "v"}, Timeout: time.Minute,
		Steps:    []cikit.Step{{Name: "s", Run: "true", Env: map[string]string{"S": "1"}}},
		IDTokens: []cikit.IDToken{{Name: "T", Audience: []string{"aud"}}}}
	c := orig.Clone()
	require.Equal(t, orig, c)
	c.Needs[0], c.Env["K"], c.Steps[0].Run, c.Steps[0].Env["S"] = "x", "x", "x", "x"
	c.IDTokens[0].Audience[0] = "x"
	require.Equal(t, "aud", orig.IDTokens[0].Audience[0])
	require.Equal(t, "b", orig.Needs[0])
	require.Equal(t, "v", orig.Env["K"])
	require.Equal(t, "true", orig.Steps[0].Run)
	require.Equal(t, "1", orig.Steps[0].Env["S"])
	require.Equal(t, "a", orig.DisplayName())
	orig.Name = "Build"
	require.Equal(t, "Build", orig.DisplayName())
}

func TestRetryPolicy(t *testing.T) {
	t.Parallel()
	var none *cikit.Retry
	all := &cikit.Retry{Max: 2}
	infra := &cikit.Retry{Max: 1, When: []string{"runner_system_failure", "stuck_or_timeout_failure"}}
	native := &cikit.Retry{Max: 1, When: []string{"failure"}}
	oom := &cikit.Retry{Max: 1, ExitCodes: []int{137}}
	oomOrInfra := &cikit.Retry{Max: 1, When: []string{"runner_system_failure"}, ExitCodes: []int{137}}
	for _, c := range []struct {
		name     string
		r        *cikit.Retry
		class    cikit.FailureClass
		exitCode int
		attempt  int
		want     bool
	}{
		{"no policy", none, cikit.FailureInfrastructure, -1, 1, false},
		{"always, first retry", all, cikit.FailureScript, 1, 1, true},
		{"always, second retry", all, cikit.FailureScript, 1, 2, true},
		{"two retries: attempts 2 and 3", all, cikit.FailureScript, 1, 3, false},
		{"when runner failure", infra, cikit.FailureInfrastructure, -1, 1, true},
		{"when timeout", infra, cikit.FailureTimeout, -1, 1, true},
		{"test failures are not retried", infra, cikit.FailureScript, 1, 1, false},
		{"native failure", native, cikit.FailureScript, 1, 1, true},
		{"native failure is not infrastructure", native, cikit.FailureInfrastructure, -1, 1, false},
		{"exit code listed", oom, cikit.FailureScript, 137, 1, true},
		{"exit code not listed", oom, cikit.FailureScript, 1, 1, false},
		{"exit codes alone retry nothing else", oom, cikit.FailureInfrastructure, -1, 1, false},
		{"a timeout is no step exit", oom, cikit.FailureTimeout, 137, 1, false},
		{"exit codes within max", oom, cikit.FailureScript, 137, 2, false},
		{"when or exit code: the code", oomOrInfra, cikit.FailureScript, 137, 1, true},
		{"when or exit code: the class", oomOrInfra, cikit.FailureInfrastructure, -1, 1, true},
		{"when or exit code: neither", oomOrInfra, cikit.FailureScript, 2, 1, false},
	} {
		require.Equal(t, c.want, c.r.Retries(c.class, c.exitCode, c.attempt), c.name)
	}
}

// imageSpec is a job with every image and service option set.
func imageSpec() *cikit.JobSpec {
	return &cikit.JobSpec{ID: "a", Image: "alpine:3.19", Steps: []cikit.Step{{Run: "true"}},
		ImageOptions: &cikit.ImageOptions{
			Entrypoint:  []string{""},
			PullPolicy:  []string{cikit.PullIfNotPresent, cikit.PullAlways},
			User:        "1000:1000",
			Env:         map[string]string{"K": "${{ matrix.k }}"},
			Credentials: &cikit.RegistryCredentials{Username: "u", Password: "${{ secrets.P }}"},
			Options:     []string{"--cpus", "2"},
		},
		Services: []cikit.Service{{Name: "db", Image: "postgres", Options: "--health-cmd pg_isready --cpus 1",
			ImageOptions: &cikit.ImageOptions{Entrypoint: []string{"docker-entrypoint.sh"}, Options: []string{"--cpus", "1"}},
			Health:       &cikit.ServiceHealth{Cmd: "pg_isready", Interval: time.Second, Timeout: 2 * time.Second, StartPeriod: time.Minute, Retries: 5}}},
	}
}

func TestJobSpecImageOptionsJSON(t *testing.T) {
	t.Parallel()
	orig := imageSpec()
	b, err := json.Marshal(orig)
	require.NoError(t, err)
	var back cikit.JobSpec
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, orig, &back)

	// Without options the JSON is what it was before they existed, so
	// stored specs and their digests do not change.
	plain := &cikit.JobSpec{ID: "a", Image: "alpine", Steps: []cikit.Step{{Run: "true"}},
		Services: []cikit.Service{{Name: "db", Image: "postgres", Options: "--cpus 1"}}}
	b, err = json.Marshal(plain)
	require.NoError(t, err)
	require.NotContains(t, string(b), "image_options")
	require.NotContains(t, string(b), "health")
	require.NotContains(t, string(b), "credentials")
}

func TestJobSpecCloneCopiesImageOptions(t *testing.T) {
	t.Parallel()
	orig := imageSpec()
	c := orig.Clone()
	require.Equal(t, orig, c)
	o, s := c.ImageOptions, &c.Services[0]
	o.Entrypoint[0], o.PullPolicy[0], o.Env["K"], o.Options[0] = "x", "x", "x", "x"
	o.Credentials.Password, o.User = "x", "x"
	s.ImageOptions.Entrypoint[0], s.ImageOptions.Options[0], s.Health.Cmd, s.Health.Retries = "x", "x", "x", 0
	require.Equal(t, imageSpec(), orig)
}
