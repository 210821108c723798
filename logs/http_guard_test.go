package logs_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/internal/httpguard"
	"github.com/cikit/cikit/internal/httpguard/httpguardtest"
	"github.com/cikit/cikit/logs"
)

// TestHTTPChunkCutByTheBodyGuardIs408: a chunk whose body the server's
// guard cut for arriving too slowly is answered 408, which a runner
// sends again, not 400, which says the server will not take the log. It
// failed before: the answer was 400 "reading the body". (The guard's
// clock is an hour behind, so its first read deadline has passed: the
// body is cut at once, whatever the machine's speed.)
func TestHTTPChunkCutByTheBodyGuardIs408(t *testing.T) {
	t.Parallel()
	b := setup(t, logs.Config{})
	h, err := logs.NewHandler(logs.HandlerConfig{Hub: b.hub, AuthorizeWrite: logs.AllowAll, AuthorizeFollow: logs.AllowAll, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	guard, err := httpguard.NewBodies(httpguard.BodiesConfig{Now: func() time.Time { return time.Now().Add(-time.Hour) }})
	require.NoError(t, err)
	srv := httptest.NewServer(guard.Handler(h))
	t.Cleanup(srv.Close)

	// The headers of a 5-byte chunk, and none of its bytes by the time
	// the guard reads.
	got := httpguardtest.Send(t.Context(), httpguardtest.SlowRequest{Addr: srv.Listener.Addr().String(), Method: http.MethodPatch,
		Path: "/v1/jobs/run-1/build/log?attempt=1&step=0&seq=0", Header: http.Header{"Content-Range": {"bytes 0-4"}}, Length: 5, Interval: time.Hour})
	require.NoError(t, got.Err)
	require.Equal(t, http.StatusRequestTimeout, got.Status)
}
