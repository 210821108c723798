package fleet

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/internal/httpguard"
	"github.com/cikit/cikit/internal/httpguard/httpguardtest"
)

// TestDecodeBodyCutByTheBodyGuard: a runner call whose body the server's
// guard cut for arriving too slowly is answered 408, which the agent
// sends again, not 400, on which it gives the call up (a completion given
// up leaves the job to the reaper as runner_lost). It failed before: the
// answer was 400 "reading the body". (The guard's clock is an hour
// behind, so its first read deadline has passed and the body is cut at
// once, whatever the machine's speed.)
func TestDecodeBodyCutByTheBodyGuard(t *testing.T) {
	t.Parallel()
	guard, err := httpguard.NewBodies(httpguard.BodiesConfig{Now: func() time.Time { return time.Now().Add(-time.Hour) }})
	require.NoError(t, err)
	srv := httptest.NewServer(guard.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v map[string]any
		if decodeBody(w, r, &v) {
			w.WriteHeader(http.StatusNoContent)
		}
	})))
	t.Cleanup(srv.Close)
	// The headers of a 2-byte JSON body, and none of its bytes by the
	// time the guard reads.
	got := httpguardtest.Send(t.Context(), httpguardtest.SlowRequest{Addr: srv.Listener.Addr().String(), Path: "/v1/jobs/r/j/complete",
		Header: http.Header{"Content-Type": {"application/json"}}, Length: 2, Interval: time.Hour})
	require.NoError(t, got.Err)
	require.Equal(t, http.StatusRequestTimeout, got.Status)
}
