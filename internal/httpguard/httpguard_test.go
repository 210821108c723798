package httpguard_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"golang.org/x/time/rate"

	"github.com/cikit/cikit/internal/httpguard"
	"github.com/cikit/cikit/internal/httpguard/httpguardtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// readAll is a handler that reads the body and answers what the guard
// says about its failure.
func readAll(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if status, retry := httpguard.Status(err); status != 0 {
		if retry != "" {
			w.Header().Set("Retry-After", retry)
		}
		http.Error(w, err.Error(), status)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	fmt.Fprintf(w, "read %d bytes", len(body))
}

func guarded(t *testing.T, cfg httpguard.BodiesConfig, h http.HandlerFunc) (*httpguard.Bodies, string) {
	t.Helper()
	b, err := httpguard.NewBodies(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(b.Handler(h))
	t.Cleanup(srv.Close)
	return b, srv.Listener.Addr().String()
}

// TestTrickledBodyIsCut: a body sent a byte every 4s against a rate of
// 1 KiB/s over 1s windows is answered 408 after its first window, not
// when it would have ended.
func TestTrickledBodyIsCut(t *testing.T) {
	t.Parallel()
	timeout := time.Second
	_, addr := guarded(t, httpguard.BodiesConfig{MinRate: 1 << 10, Timeout: timeout}, readAll)
	ctx, cancel := context.WithTimeout(context.Background(), 2*timeout+4*time.Second)
	defer cancel()
	got := httpguardtest.Send(ctx, httpguardtest.SlowRequest{Addr: addr, Path: "/", Length: 1000, Interval: 4 * time.Second})
	require.NoError(t, got.Err, "the trickled body was not cut")
	require.Equal(t, http.StatusRequestTimeout, got.Status)
}

// TestBodyAtTheRateIsRead: a body that keeps the rate is read whole, and
// the deadline is lifted once it is in: a handler that then waits three
// windows (a long poll) is not cut.
func TestBodyAtTheRateIsRead(t *testing.T) {
	t.Parallel()
	timeout := time.Second
	_, addr := guarded(t, httpguard.BodiesConfig{MinRate: 10, Timeout: timeout}, func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		select {
		case <-r.Context().Done():
			http.Error(w, "cut", http.StatusInternalServerError)
		case <-time.After(3 * timeout):
			fmt.Fprintf(w, "read %d bytes", len(body))
		}
	})
	pr, pw := io.Pipe()
	go func() {
		// 10 bytes, a window's quota, ten times a window.
		for range 3 {
			_, _ = pw.Write([]byte("abcdefghij"))
			time.Sleep(timeout / 10)
		}
		pw.Close()
	}()
	resp, err := http.Post("http://"+addr, "text/plain", pr)
	require.NoError(t, err)
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(got))
	require.Equal(t, "read 30 bytes", string(got))
}

// TestBudget: bodies reserve their Content-Length up front and give it
// back when their handler ends; a request the budget cannot take is
// answered 503 with Retry-After before its handler runs, and one larger
// than the whole budget 413. A body of unknown length fails its read
// with ErrBudget past the budget.
func TestBudget(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	holding := make(chan struct{})
	b, addr := guarded(t, httpguard.BodiesConfig{MaxBytesInFlight: 100}, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			_, _ = io.ReadAll(r.Body)
			close(holding)
			<-release
		}
		readAll(w, r)
	})
	post := func(path string, body io.Reader) (*http.Response, string) {
		resp, err := http.Post("http://"+addr+path, "text/plain", body)
		require.NoError(t, err)
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		return resp, string(got)
	}
	held := make(chan int)
	go func() {
		resp, _ := post("/hold", strings.NewReader(strings.Repeat("a", 80)))
		held <- resp.StatusCode
	}()
	<-holding
	require.EqualValues(t, 80, b.InFlight())

	resp, body := post("/", strings.NewReader(strings.Repeat("b", 30)))
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, body)
	require.NotEmpty(t, resp.Header.Get("Retry-After"))

	// Unknown length: reserved as read.
	resp, body = post("/", io.MultiReader(strings.NewReader(strings.Repeat("c", 30))))
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, body)
	require.NotEmpty(t, resp.Header.Get("Retry-After"))

	resp, body = post("/", strings.NewReader(strings.Repeat("d", 20)))
	require.Equal(t, http.StatusOK, resp.StatusCode, body)

	close(release)
	require.Equal(t, http.StatusOK, <-held)
	require.EqualValues(t, 0, b.InFlight())

	resp, body = post("/", strings.NewReader(strings.Repeat("e", 101)))
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, body)
	resp, body = post("/", io.MultiReader(strings.NewReader(strings.Repeat("f", 90))))
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Equal(t, "read 90 bytes", body)
}

func TestStatus(t *testing.T) {
	t.Parallel()
	status, retry := httpguard.Status(fmt.Errorf("read: %w", httpguard.ErrBudget))
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.NotEmpty(t, retry)
	status, _ = httpguard.Status(httpguard.ErrTooSlow)
	require.Equal(t, http.StatusRequestTimeout, status)
	status, _ = httpguard.Status(errors.New("other"))
	require.Zero(t, status)
}

func TestNewBodiesRefusesNegatives(t *testing.T) {
	t.Parallel()
	_, err := httpguard.NewBodies(httpguard.BodiesConfig{MinRate: -1})
	require.ErrorContains(t, err, "must not be negative")
}

// fixedClock is a clock that moves only when told.
type fixedClock struct{ t time.Time }

func (c *fixedClock) now() time.Time { return c.t }

func limited(t *testing.T, cfg httpguard.LimiterConfig) (func(remote string, hdr ...string) *httptest.ResponseRecorder, *fixedClock) {
	t.Helper()
	clock := &fixedClock{t: time.Unix(1_700_000_000, 0)}
	cfg.Now = clock.now
	l, err := httpguard.NewLimiter(cfg)
	require.NoError(t, err)
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	return func(remote string, hdr ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/webhooks/github", nil)
		r.RemoteAddr = remote
		for _, v := range hdr {
			r.Header.Add("X-Forwarded-For", v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}, clock
}

// TestLimiterPerSource: a source's burst passes, the next request is 429
// with the seconds until a token; another source is unaffected; tokens
// come back with time.
func TestLimiterPerSource(t *testing.T) {
	t.Parallel()
	do, clock := limited(t, httpguard.LimiterConfig{Rate: rate.Every(10 * time.Second), Burst: 3})
	for range 3 {
		require.Equal(t, http.StatusNoContent, do("192.0.2.1:1234").Code)
	}
	w := do("192.0.2.1:999")
	require.Equal(t, http.StatusTooManyRequests, w.Code)
	require.Equal(t, "10", w.Header().Get("Retry-After"))
	require.Equal(t, http.StatusNoContent, do("192.0.2.2:1234").Code, "another source")
	// An IPv6 source is its /64.
	for range 3 {
		require.Equal(t, http.StatusNoContent, do("[2001:db8::1]:1").Code)
	}
	require.Equal(t, http.StatusTooManyRequests, do("[2001:db8::2]:1").Code)
	clock.t = clock.t.Add(10 * time.Second)
	require.Equal(t, http.StatusNoContent, do("192.0.2.1:1234").Code)
	require.Equal(t, http.StatusTooManyRequests, do("192.0.2.1:1234").Code)
}

// TestLimiterForwardedFor: X-Forwarded-For counts only from a trusted
// proxy, and then its rightmost untrusted address is the source.
func TestLimiterForwardedFor(t *testing.T) {
	t.Parallel()
	proxies, err := httpguard.ParseProxies([]string{"10.0.0.0/8", "192.0.2.9"})
	require.NoError(t, err)
	do, _ := limited(t, httpguard.LimiterConfig{Rate: rate.Every(time.Hour), Burst: 1, TrustedProxies: proxies})
	// Untrusted peer: the header is the client's own claim.
	require.Equal(t, http.StatusNoContent, do("198.51.100.1:1", "203.0.113.1").Code)
	require.Equal(t, http.StatusTooManyRequests, do("198.51.100.1:1", "203.0.113.2").Code)
	// Through the proxies: the client is the rightmost untrusted hop.
	require.Equal(t, http.StatusNoContent, do("10.1.1.1:1", "6.6.6.6, 203.0.113.7", "192.0.2.9").Code)
	require.Equal(t, http.StatusTooManyRequests, do("192.0.2.9:1", "1.2.3.4, 203.0.113.7").Code)
	require.Equal(t, http.StatusNoContent, do("192.0.2.9:1", "203.0.113.8").Code)

	_, err = httpguard.ParseProxies([]string{"not-an-ip"})
	require.ErrorContains(t, err, "neither an IP address nor a CIDR prefix")
}

// TestLimiterForgetsOldSources: the limiter remembers at most MaxSources;
// a forgotten source starts again with a full bucket.
func TestLimiterForgetsOldSources(t *testing.T) {
	t.Parallel()
	do, _ := limited(t, httpguard.LimiterConfig{Rate: rate.Every(time.Hour), Burst: 1, MaxSources: 2})
	require.Equal(t, http.StatusNoContent, do("192.0.2.1:1").Code)
	require.Equal(t, http.StatusTooManyRequests, do("192.0.2.1:1").Code)
	require.Equal(t, http.StatusNoContent, do("192.0.2.2:1").Code)
	require.Equal(t, http.StatusTooManyRequests, do("192.0.2.1:1").Code, "remembered: seen more recently than .2")
	require.Equal(t, http.StatusNoContent, do("192.0.2.3:1").Code) // forgets .2
	require.Equal(t, http.StatusNoContent, do("192.0.2.2:1").Code, "forgotten, so a full bucket")
}

func TestNewLimiterValidates(t *testing.T) {
	t.Parallel()
	_, err := httpguard.NewLimiter(httpguard.LimiterConfig{Burst: 1})
	require.ErrorContains(t, err, "must be positive")
	_, err = httpguard.NewLimiter(httpguard.LimiterConfig{Rate: 1, Burst: 1, MaxSources: -1})
	require.ErrorContains(t, err, "must not be negative")
}

// TestEmptyRead: a read into an empty buffer reads nothing and fails
// nothing, also for a body of unknown length, which reserves as it reads.
func TestEmptyRead(t *testing.T) {
	t.Parallel()
	_, addr := guarded(t, httpguard.BodiesConfig{}, func(w http.ResponseWriter, r *http.Request) {
		n, err := r.Body.Read(nil)
		require.NoError(t, err)
		require.Zero(t, n)
		readAll(w, r)
	})
	resp, err := http.Post("http://"+addr, "text/plain", io.MultiReader(strings.NewReader("abc")))
	require.NoError(t, err)
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	require.Equal(t, "read 3 bytes", string(got))
}

// TestStreaming: Streaming reads a body larger than the whole budget,
// reserving none of it, and still cuts a trickled one.
func TestStreaming(t *testing.T) {
	t.Parallel()
	timeout := time.Second
	b, err := httpguard.NewBodies(httpguard.BodiesConfig{MaxBytesInFlight: 100, MinRate: 1 << 10, Timeout: timeout})
	require.NoError(t, err)
	seen := make(chan int64, 1)
	srv := httptest.NewServer(b.Streaming(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- b.InFlight()
		readAll(w, r)
	})))
	t.Cleanup(srv.Close)

	resp, err := http.Post(srv.URL, "text/plain", strings.NewReader(strings.Repeat("a", 1000)))
	require.NoError(t, err)
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(got))
	require.Equal(t, "read 1000 bytes", string(got))
	require.EqualValues(t, 0, <-seen, "a streamed body reserves nothing of the budget")

	ctx, cancel := context.WithTimeout(context.Background(), 2*timeout+4*time.Second)
	defer cancel()
	slow := httpguardtest.Send(ctx, httpguardtest.SlowRequest{Addr: srv.Listener.Addr().String(), Path: "/", Length: 1000, Interval: 4 * time.Second})
	require.NoError(t, slow.Err, "the trickled body was not cut")
	require.Equal(t, http.StatusRequestTimeout, slow.Status)
}
