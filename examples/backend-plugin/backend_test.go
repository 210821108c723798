package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/fleet/fleettest"
)

func newTestBackend(t *testing.T, cfg config) *backend {
	cfg.Logger = slog.New(slog.DiscardHandler)
	b := newBackend(cfg)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	return b
}

// TestConformance runs the backend in this process through the Backend
// conformance suite; fleet/plugin's tests run it through the plugin
// boundary.
func TestConformance(t *testing.T) {
	fleettest.Exercise(t, fleettest.Config{
		New: func(t *testing.T) fleet.Backend {
			return newTestBackend(t, config{Labels: []string{"linux", "x64", "example"}, MaxRunners: 8, Wait: 500 * time.Millisecond})
		},
		Labels: []string{"linux", "example"},
	})
}

// TestRunnerStates: a runner is provisioning until its agent registered,
// and fails when it cannot register; a failed runner holds no capacity.
func TestRunnerStates(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		http.Error(w, `{"error":"registration refused"}`, http.StatusForbidden)
	}))
	t.Cleanup(srv.Close)
	b := newTestBackend(t, config{MaxRunners: 1})
	ctx := context.Background()
	request := func(id string) *fleet.ProvisionRequest {
		return &fleet.ProvisionRequest{ID: id, Server: srv.URL, RegistrationToken: "token"}
	}

	in, err := b.Provision(ctx, request("r1"))
	require.NoError(t, err)
	require.Equal(t, fleet.InstanceProvisioning, in.State)
	_, err = b.Provision(ctx, request("r2"))
	require.ErrorIs(t, err, fleet.ErrCapacity)
	in, err = b.Instance(ctx, "r1")
	require.NoError(t, err)
	require.Equal(t, fleet.InstanceProvisioning, in.State, "the agent has not registered")

	close(release)
	require.Eventually(t, func() bool {
		in, err = b.Instance(ctx, "r1")
		return err == nil && in.State == fleet.InstanceFailed
	}, time.Minute, 5*time.Millisecond)
	require.Contains(t, in.Message, "registration refused")
	_, err = b.Provision(ctx, request("r2"))
	require.NoError(t, err)
}
