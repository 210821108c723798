package logs_test

import (
	"bufio"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/internal/httpguard"
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

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	// The headers of a 5-byte chunk, and none of its bytes.
	_, err = fmt.Fprintf(conn, "PATCH /v1/jobs/run-1/build/log?attempt=1&step=0&seq=0 HTTP/1.1\r\nHost: x\r\nContent-Range: bytes 0-4\r\nContent-Length: 5\r\n\r\n")
	require.NoError(t, err)
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusRequestTimeout, res.StatusCode)
}
