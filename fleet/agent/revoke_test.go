package agent_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/fleet/agent"
	"github.com/cikit/cikit/lease"
)

// TestAgentStopsWhenRevoked: an agent whose runner is revoked stops
// claiming, and Run says why.
func TestAgentStopsWhenRevoked(t *testing.T) {
	t.Parallel()
	e := setup(t, longTTL)
	a, err := agent.New(agent.Config{Server: e.url, RegistrationToken: regToken, Name: "revoked", Executor: e.exec, Wait: time.Second})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background()) }()
	waitClaiming(t, e)
	list, err := e.server.RunnerList(context.Background())
	require.NoError(t, err)
	require.Len(t, list, 1)
	_, err = e.server.RunnerRevoke(context.Background(), list[0].ID, "alice", "decommissioned")
	require.NoError(t, err)
	err = <-done
	require.ErrorIs(t, err, agent.ErrRunnerRevoked)
	require.ErrorContains(t, err, "decommissioned")
}

// TestAgentRegistersAgainWhenUnknown: an agent whose runner token names a
// runner the platform has no record of (another store) registers again
// with its registration token and runs the platform's jobs.
func TestAgentRegistersAgainWhenUnknown(t *testing.T) {
	t.Parallel()
	e := setup(t, longTTL)
	// A runner token of another platform signed with the same keys.
	jobs := dag.NewMemoryStore(dag.MemoryConfig{})
	m, err := lease.NewManager(lease.Config{Store: lease.NewMemoryStore(), Jobs: jobs, TTL: longTTL})
	require.NoError(t, err)
	other, err := fleet.NewServer(fleet.ServerConfig{Jobs: jobs, Leases: m, RegistrationTokens: []string{regToken},
		SigningKeys: [][]byte{[]byte(strings.Repeat("k", 32))}, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	srv := httptest.NewServer(other)
	t.Cleanup(srv.Close)
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/runners", strings.NewReader(`{"name":"elsewhere"}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+regToken)
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	var reg struct {
		RunnerToken string `json:"runner_token"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&reg))

	a, err := agent.New(agent.Config{Server: e.url, RegistrationToken: regToken, RunnerToken: reg.RunnerToken, Name: "again", Executor: e.exec,
		Wait: time.Second, MaxJobs: 1})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background()) }()
	e.newRun(t)
	<-e.exec.started
	e.exec.release <- agent.Result{State: cikit.JobSucceeded}
	require.NoError(t, <-done)
	list, err := e.server.RunnerList(context.Background())
	require.NoError(t, err)
	require.Len(t, list, 1, "registered again with this platform")
	require.Equal(t, "again", list[0].Name)
}
