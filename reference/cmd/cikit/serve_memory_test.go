package main_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/ingest"
	"github.com/cikit/cikit/internal/httpguard/httpguardtest"
)

// The memory test's limits, as configured for `cikit serve`.
const (
	memBudget      = 64 << 20 // http.max-body-bytes-in-flight
	memBodyTimeout = 5 * time.Second
	memMinRate     = 64 << 10
	memSecret      = "memory-test-secret"
	// memSlack is what the bound allows beyond the budget and its GC
	// headroom: goroutines, connection buffers, the answers.
	memSlack = 64 << 20
)

// TestServeMemoryUnderSlowBodies: 50 clients each announce a 24 MiB
// webhook body, send 8 MiB of it at once and trickle the rest at a byte a
// second. The server takes as many as its budget of bytes in flight holds
// and answers the others 503 with Retry-After before reading them; the
// ones it took are cut by the rate rule; its peak memory stays under
// baseline + 2 × budget + slack (docs/serve.md, "Limits on requests"); and
// a normal webhook gets through afterwards. Before the guard every body
// was read, 50 × 8 MiB and more, and none was cut.
func TestServeMemoryUnderSlowBodies(t *testing.T) {
	dir := t.TempDir()
	addr := freeLoopbackAddr(t)
	cfg := filepath.Join(dir, "serve.yml")
	require.NoError(t, os.WriteFile(cfg, fmt.Appendf(nil, `listen: %s
data-dir: %s
log: {level: warn}
webhooks: {github-secrets: [%s]}
runners: {local: 0}
http:
  max-body-bytes-in-flight: %d
  body-read-timeout: %s
  min-body-rate: %d
`, addr, filepath.Join(dir, "data"), memSecret, memBudget, memBodyTimeout, memMinRate), 0o600))
	pid := startServe(t, cfg, "http://"+addr)

	webhook := func(delivery string) int {
		body := []byte(`{"ref":"refs/heads/main","before":"1111111111111111111111111111111111111111",` +
			`"after":"2222222222222222222222222222222222222222","repository":{"name":"app","owner":{"login":"acme"}},"sender":{"login":"alice"}}`)
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/webhooks/github", bytes.NewReader(body))
		require.NoError(t, err)
		req.Header = webhookHeader(delivery)
		req.Header.Set("X-Hub-Signature-256", ingest.SignGitHub(memSecret, body))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	require.Equal(t, http.StatusAccepted, webhook("warm-up"))
	baseline := procStatus(t, pid, "VmRSS")

	const clients, size, fast = 50, 24 << 20, 8 << 20
	head := bytes.Repeat([]byte(" "), fast) // shared by the clients: the test stays small
	outcomes := make([]httpguardtest.Outcome, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*memBodyTimeout)
			defer cancel()
			outcomes[i] = httpguardtest.Send(ctx, httpguardtest.SlowRequest{
				Addr: addr, Path: "/webhooks/github", Header: webhookHeader(fmt.Sprintf("slow-%d", i)),
				Length: size, Fast: head, Interval: time.Second,
			})
		})
	}
	wg.Wait()
	peak := procStatus(t, pid, "VmHWM")
	bound := baseline + 2*memBudget + memSlack
	t.Logf("baseline %d MiB, peak %d MiB, bound %d MiB", baseline>>20, peak>>20, bound>>20)

	refused, cut := 0, 0
	for i, o := range outcomes {
		require.NoError(t, o.Err, "client %d: neither answered nor cut within twice http.body-read-timeout", i)
		switch o.Status {
		case http.StatusServiceUnavailable:
			require.NotEmpty(t, o.RetryAfter, "client %d: a 503 without Retry-After", i)
			refused++
		case http.StatusRequestTimeout, 0: // cut: answered 408, or closed
			cut++
		default:
			t.Fatalf("client %d: answered %d", i, o.Status)
		}
	}
	require.NotZero(t, refused, "no request was refused for the budget")
	require.NotZero(t, cut, "no request was taken and cut")

	t.Logf("%d refused for the budget, %d taken and cut", refused, cut)
	require.LessOrEqual(t, peak, bound, "peak RSS %d MiB over baseline %d MiB + 2 × budget %d MiB + slack %d MiB",
		peak>>20, baseline>>20, memBudget>>20, memSlack>>20)

	require.Equal(t, http.StatusAccepted, webhook("after-the-storm"), "a normal webhook after the slow ones")
}

// webhookHeader is the header of a GitHub push delivery, with a
// signature of the right form (the receiver reads the body to check it).
func webhookHeader(delivery string) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("X-GitHub-Event", "push")
	h.Set("X-GitHub-Delivery", delivery)
	h.Set("X-GitHub-Hook-ID", "7")
	h.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64))
	return h
}

// procStatus reads a size field of /proc/<pid>/status, in bytes.
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			require.NoError(t, err, line)
			return kb << 10
		}
	}
	t.Fatalf("/proc/%d/status has no %s", pid, field)
	return 0
}

// startServe starts `cikit serve -config cfg` and waits until it is
// ready; it is stopped with SIGTERM when the test ends.
func startServe(t *testing.T, cfg, base string) int {
	t.Helper()
	cmd := exec.Command(binary, "serve", "-config", cfg)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Error("cikit serve did not stop within 30s of SIGTERM")
		}
		if t.Failed() {
			t.Logf("cikit serve's stderr:\n%s", stderr.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-done:
			t.Fatalf("cikit serve exited: %s", stderr.String())
		default:
		}
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return cmd.Process.Pid
			}
		}
		require.True(t, time.Now().Before(deadline), "cikit serve not ready within 60s")
		time.Sleep(50 * time.Millisecond)
	}
}

// freeLoopbackAddr returns a loopback address with a port free a moment
// ago.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}
