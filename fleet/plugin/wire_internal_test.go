package plugin

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	goplugin "github.com/hashicorp/go-plugin"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet"
)

// fakeBackend answers with what a test set; Provision hands the request
// it got to the test and, when block is set, waits for its context.
type fakeBackend struct {
	info     *fleet.BackendInfo
	inst     *fleet.Instance
	list     []*fleet.Instance
	err      error
	requests chan *fleet.ProvisionRequest
	block    bool
	// ended receives how a blocked Provision's context ended, and whether
	// it had a deadline.
	ended chan ctxEnd
}

type ctxEnd struct {
	err         error
	hasDeadline bool
}

func (f *fakeBackend) Info(context.Context) (*fleet.BackendInfo, error) { return f.info, f.err }

func (f *fakeBackend) Provision(ctx context.Context, req *fleet.ProvisionRequest) (*fleet.Instance, error) {
	f.requests <- req
	if f.block {
		<-ctx.Done()
		_, ok := ctx.Deadline()
		f.ended <- ctxEnd{ctx.Err(), ok}
		return nil, ctx.Err()
	}
	return f.inst, f.err
}

func (f *fakeBackend) Instance(context.Context, string) (*fleet.Instance, error) {
	return f.inst, f.err
}
func (f *fakeBackend) Instances(context.Context) ([]*fleet.Instance, error) { return f.list, f.err }
func (f *fakeBackend) Destroy(context.Context, string) error                { return f.err }

// connect serves f over go-plugin's in-process gRPC connection and returns
// the host's side of it.
func connect(t *testing.T, f *fakeBackend) fleet.Backend {
	t.Helper()
	f.requests = make(chan *fleet.ProvisionRequest, 1)
	f.ended = make(chan ctxEnd, 1)
	client, server := goplugin.TestPluginGRPCConn(t, false, goplugin.PluginSet{pluginName: &backendPlugin{impl: f}})
	t.Cleanup(func() {
		// Closing the client stops the server (go-plugin's shutdown call).
		require.NoError(t, client.Close())
		<-server.DoneCh
	})
	raw, err := client.Dispense(pluginName)
	require.NoError(t, err)
	return raw.(*remote)
}

func TestErrorsKeepTheirMeaning(t *testing.T) {
	t.Parallel()
	sentinels := []error{cikit.ErrNotFound, fleet.ErrLabelsUnsupported, fleet.ErrCapacity, context.Canceled, context.DeadlineExceeded}
	for _, sentinel := range sentinels {
		t.Run(sentinel.Error(), func(t *testing.T) {
			t.Parallel()
			pluginErr := fmt.Errorf("cloud: runner %q: %w", "r1", sentinel)
			b := connect(t, &fakeBackend{err: pluginErr})
			ctx := context.Background()
			_, err := b.Instance(ctx, "r1")
			require.ErrorIs(t, err, sentinel)
			require.Equal(t, pluginErr.Error(), err.Error(), "the plugin's message is kept")
			var re *RemoteError
			require.ErrorAs(t, err, &re)
			for _, other := range sentinels {
				if other != sentinel {
					require.NotErrorIs(t, err, other)
				}
			}
			require.ErrorIs(t, b.Destroy(ctx, "r1"), sentinel)
			_, err = b.Instances(ctx)
			require.ErrorIs(t, err, sentinel)
			_, err = b.Info(ctx)
			require.ErrorIs(t, err, sentinel)
		})
	}

	t.Run("other", func(t *testing.T) {
		t.Parallel()
		b := connect(t, &fakeBackend{err: errors.New("cloud: quota API down")})
		_, err := b.Instance(context.Background(), "r1")
		require.EqualError(t, err, "cloud: quota API down")
		for _, s := range sentinels {
			require.NotErrorIs(t, err, s)
		}
	})
}

func TestValuesCrossTheBoundary(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 3, 4, 5, 6, 7, 8, time.UTC)
	inst := &fleet.Instance{ID: "r1", Pool: "linux", Labels: []string{"linux", "x64"}, Ephemeral: true,
		State: fleet.InstanceFailed, Created: created, Message: "the VM did not boot"}
	f := &fakeBackend{inst: inst, list: []*fleet.Instance{inst, {ID: "r2", State: fleet.InstanceProvisioning}}}
	b := connect(t, f)
	ctx := context.Background()

	for _, labels := range [][]string{nil, {}, {"linux", "gpu"}} {
		f.info = &fleet.BackendInfo{Name: "vm", Labels: labels, MaxRunners: 12, StartupHint: 1500 * time.Millisecond,
			CostPerHour: 0.42, Isolation: "vm"}
		got, err := b.Info(ctx)
		require.NoError(t, err)
		require.Empty(t, cmp.Diff(f.info, got), "labels %#v", labels)
	}

	req := &fleet.ProvisionRequest{ID: "r1", Pool: "linux", Labels: []string{"linux", "x64"}, Server: "https://ci.example.com",
		RegistrationToken: "token", Ephemeral: true}
	got, err := b.Provision(ctx, req)
	require.NoError(t, err)
	require.Empty(t, cmp.Diff(req, <-f.requests))
	require.Empty(t, cmp.Diff(inst, got))

	got, err = b.Instance(ctx, "r1")
	require.NoError(t, err)
	require.Empty(t, cmp.Diff(inst, got))

	list, err := b.Instances(ctx)
	require.NoError(t, err)
	require.Empty(t, cmp.Diff(f.list, list))
}

// TestNothingIsAnError: a backend that answers with neither a value nor an
// error is a broken one, not an empty answer.
func TestNothingIsAnError(t *testing.T) {
	t.Parallel()
	b := connect(t, &fakeBackend{})
	_, err := b.Info(context.Background())
	require.ErrorContains(t, err, "returned neither a result nor an error")
	_, err = b.Instance(context.Background(), "r1")
	require.ErrorContains(t, err, "returned neither a result nor an error")
}

func TestContextCrossesTheBoundary(t *testing.T) {
	t.Parallel()
	req := &fleet.ProvisionRequest{ID: "r1", Server: "https://ci.example.com", RegistrationToken: "token"}

	t.Run("deadline", func(t *testing.T) {
		t.Parallel()
		f := &fakeBackend{block: true}
		b := connect(t, f)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := b.Provision(ctx, req)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		end := <-f.ended
		require.Error(t, end.err, "the plugin's context ended")
		require.True(t, end.hasDeadline, "the plugin's context had the deadline")
	})

	t.Run("cancel", func(t *testing.T) {
		t.Parallel()
		f := &fakeBackend{block: true}
		b := connect(t, f)
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			<-f.requests
			cancel()
		}()
		_, err := b.Provision(ctx, req)
		require.ErrorIs(t, err, context.Canceled)
		end := <-f.ended
		require.ErrorIs(t, end.err, context.Canceled)
		require.False(t, end.hasDeadline)
	})
}

func TestReconcile(t *testing.T) {
	t.Parallel()
	known := map[string]*fleet.Instance{
		"a": {ID: "a", Pool: "p", Labels: []string{"linux"}, State: fleet.InstanceRunning},
		"b": {ID: "b", State: fleet.InstanceProvisioning},
		"c": {ID: "c", State: fleet.InstanceRunning},
		"d": {ID: "d", State: fleet.InstanceStopped},
		"e": {ID: "e", State: fleet.InstanceFailed, Message: "boot failed"},
	}
	reported := []*fleet.Instance{{ID: "c", State: fleet.InstanceRunning}, {ID: "z", State: fleet.InstanceRunning}}
	lost := reconcile(known, reported)
	want := []*fleet.Instance{
		{ID: "a", Pool: "p", Labels: []string{"linux"}, State: fleet.InstanceFailed, Message: LostMessage},
		{ID: "b", State: fleet.InstanceFailed, Message: LostMessage},
	}
	require.Empty(t, cmp.Diff(want, lost), "runners that had not ended and are not reported are lost; ended ones are forgotten")
	require.Equal(t, fleet.InstanceRunning, known["a"].State, "what the host knew is not changed")
	require.Empty(t, reconcile(nil, reported))
}
