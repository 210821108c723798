package platform_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/internal/httpguard/httpguardtest"
)

// webhookHeader is the header of a GitHub push delivery whose signature
// has the right form, so that the receiver reads its body to check it.
func webhookHeader(delivery string) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("X-GitHub-Event", "push")
	h.Set("X-GitHub-Delivery", delivery)
	h.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64))
	return h
}

// TestTrickledWebhookIsCut: a webhook body sent a byte every 4s is
// answered 408 one body-read-timeout after it started, instead of being
// read for as long as the sender keeps trickling.
func TestTrickledWebhookIsCut(t *testing.T) {
	w := newWorld(t, map[string]string{".cikit.yml": pipeline})
	w.cfg.Runners.Local = 0
	w.cfg.HTTP.BodyReadTimeout = 2 * time.Second
	w.cfg.HTTP.MinBodyRate = 1 << 10
	s := serve(t, w.cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*w.cfg.HTTP.BodyReadTimeout)
	defer cancel()
	got := httpguardtest.Send(ctx, httpguardtest.SlowRequest{
		Addr: strings.TrimPrefix(s.p.URL(), "http://"), Path: "/webhooks/github",
		Header: webhookHeader("trickle-1"), Length: 1000, Interval: 4 * time.Second,
	})
	require.NoError(t, got.Err, "the trickled body was not cut")
	require.Equal(t, http.StatusRequestTimeout, got.Status)

	// The server still takes webhooks.
	code, body := deliver(t, s.p.URL(), "after-trickle", pushBody(w.sha))
	require.Equal(t, http.StatusAccepted, code, body)
}

// TestSourceRateLimits: past its burst, one address's webhooks and
// manual triggers are answered 429 with Retry-After, each endpoint with
// a bucket of its own, while another address is unaffected.
func TestSourceRateLimits(t *testing.T) {
	w := newWorld(t, map[string]string{".cikit.yml": pipeline})
	w.cfg.Runners.Local = 0
	w.cfg.HTTP.SourceRequestsPerMinute = 1
	w.cfg.HTTP.SourceBurst = 3
	s := serve(t, w.cfg)
	from := func(local string) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
		tr := &http.Transport{DialContext: d.DialContext}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr}
	}
	post := func(c *http.Client, path string) *http.Response {
		// Unsigned, without an Idempotency-Key: refused, but counted.
		req, err := http.NewRequest(http.MethodPost, s.p.URL()+path, strings.NewReader(`{}`))
		require.NoError(t, err)
		req.Header.Set("X-GitHub-Event", "push")
		resp, err := c.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	one, other := from("127.0.0.1"), from("127.0.0.2")
	for _, path := range []string{"/webhooks/github", "/api/v1/repos/acme/app/pipelines"} {
		for i := range 3 {
			require.NotEqual(t, http.StatusTooManyRequests, post(one, path).StatusCode, "%s: request %d of the burst", path, i+1)
		}
		resp := post(one, path)
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, path)
		wait, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		require.NoError(t, err, "Retry-After %q", resp.Header.Get("Retry-After"))
		require.True(t, wait >= 1 && wait <= 60, "Retry-After %ds: a token a minute", wait)
		require.NotEqual(t, http.StatusTooManyRequests, post(other, path).StatusCode, "%s: another address", path)
	}
	// Other routes are not limited.
	resp, err := one.Do(asAdmin(mustRequest(t, http.MethodGet, s.p.URL()+"/api/v1/runs")))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// TestSlowHeadersAreCut: a connection that sends its request's headers
// slower than http.read-header-timeout is closed.
func TestSlowHeadersAreCut(t *testing.T) {
	w := newWorld(t, map[string]string{".cikit.yml": pipeline})
	w.cfg.Runners.Local = 0
	w.cfg.HTTP.ReadHeaderTimeout = 2 * time.Second
	s := serve(t, w.cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*w.cfg.HTTP.ReadHeaderTimeout)
	defer cancel()
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.p.URL(), "http://"))
	require.NoError(t, err)
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	closed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, conn)
		close(closed)
	}()
	_, err = io.WriteString(conn, "POST /webhooks/github HTTP/1.1\r\nHost: cikit\r\n")
	require.NoError(t, err)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-closed:
			require.NoError(t, ctx.Err(), "the connection was not closed within twice the header timeout")
			return
		case <-tick.C:
			// Another header line, never the end of the headers.
			if _, err := io.WriteString(conn, "X-Slow: "+strings.Repeat("x", i%7+1)+"\r\n"); err != nil {
				<-closed
				require.NoError(t, ctx.Err(), "the connection was not closed within twice the header timeout")
				return
			}
		}
	}
}

// TestSourceRateLimitsBehindAProxy: with the proxy's address in
// http.trusted-proxies, the client its X-Forwarded-For names is the
// source, so clients behind one proxy do not share a bucket.
func TestSourceRateLimitsBehindAProxy(t *testing.T) {
	w := newWorld(t, map[string]string{".cikit.yml": pipeline})
	w.cfg.Runners.Local = 0
	w.cfg.HTTP.SourceRequestsPerMinute = 1
	w.cfg.HTTP.SourceBurst = 1
	w.cfg.HTTP.TrustedProxies = []string{"127.0.0.1"}
	s := serve(t, w.cfg)
	post := func(client string) int {
		req, err := http.NewRequest(http.MethodPost, s.p.URL()+"/webhooks/github", strings.NewReader(`{}`))
		require.NoError(t, err)
		req.Header.Set("X-GitHub-Event", "push")
		req.Header.Set("X-Forwarded-For", client)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.NotEqual(t, http.StatusTooManyRequests, post("203.0.113.1"))
	require.Equal(t, http.StatusTooManyRequests, post("203.0.113.1"))
	require.NotEqual(t, http.StatusTooManyRequests, post("203.0.113.2"), "another client behind the proxy")
}
