package httpguard

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

// Defaults of BodiesConfig.
const (
	// DefaultMaxBytesInFlight is the budget of request-body bytes read
	// at once across all requests: 64 MiB.
	DefaultMaxBytesInFlight = 64 << 20
	// DefaultMinRate is the slowest a body may arrive, on average over
	// each Timeout: 32 KiB/s, a 25 MiB webhook in under 14 minutes.
	DefaultMinRate = 32 << 10
	// DefaultTimeout is the window a body's bytes are counted over.
	DefaultTimeout = 10 * time.Second
	// DefaultRetryAfter is the Retry-After of a request refused for the
	// budget: bodies in flight end within a few windows.
	DefaultRetryAfter = 5 * time.Second
)

// Body read failures, wrapped by the errors a guarded body's Read
// returns.
var (
	// ErrBudget: the budget of bytes in flight cannot take more of this
	// body now. Transient: the sender should retry later.
	ErrBudget = errors.New("the server is reading too many request bodies at once")
	// ErrTooSlow: the body arrived slower than the minimum rate and was
	// cut. The connection cannot be used again.
	ErrTooSlow = errors.New("the request body arrived too slowly")
)

// Status is the answer to a request whose body failed with err: 503 and a
// Retry-After (in seconds) for ErrBudget, 408 for ErrTooSlow, and 0 for
// other errors, which the handler answers as it would.
func Status(err error) (status int, retryAfter string) {
	switch {
	case errors.Is(err, ErrBudget):
		return http.StatusServiceUnavailable, seconds(DefaultRetryAfter)
	case errors.Is(err, ErrTooSlow):
		return http.StatusRequestTimeout, ""
	}
	return 0, ""
}

// BodiesConfig configures Bodies; the zero value takes the defaults.
type BodiesConfig struct {
	// MaxBytesInFlight is the most request-body bytes reserved at once.
	// A request whose Content-Length is larger is answered 413.
	// Default: DefaultMaxBytesInFlight.
	MaxBytesInFlight int64
	// MinRate, in bytes per second, and Timeout: each Timeout of reading
	// a body must bring MinRate × Timeout bytes or the rest of the body.
	// Defaults: DefaultMinRate, DefaultTimeout.
	MinRate int64
	Timeout time.Duration
	// Now is the clock of the read deadlines. Default: time.Now.
	Now func() time.Time
}

// Bodies guards the request bodies of a handler; see the package
// documentation. It is safe for concurrent use.
type Bodies struct {
	max     int64
	quota   int64 // bytes each window must bring
	timeout time.Duration
	now     func() time.Time

	mu       sync.Mutex
	inFlight int64
}

// NewBodies validates cfg and returns a Bodies.
func NewBodies(cfg BodiesConfig) (*Bodies, error) {
	if cfg.MaxBytesInFlight < 0 || cfg.MinRate < 0 || cfg.Timeout < 0 {
		return nil, fmt.Errorf("httpguard: MaxBytesInFlight (%d), MinRate (%d) and Timeout (%s) must not be negative",
			cfg.MaxBytesInFlight, cfg.MinRate, cfg.Timeout)
	}
	b := &Bodies{
		max:     cmp.Or(cfg.MaxBytesInFlight, DefaultMaxBytesInFlight),
		timeout: cmp.Or(cfg.Timeout, DefaultTimeout),
		now:     cfg.Now,
	}
	rate := cmp.Or(cfg.MinRate, DefaultMinRate)
	b.quota = max(1, int64(float64(rate)*b.timeout.Seconds()))
	if b.now == nil {
		b.now = time.Now
	}
	return b, nil
}

// InFlight is how many body bytes are reserved now.
func (b *Bodies) InFlight() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inFlight
}

// reserve takes n bytes of the budget, if it has them.
func (b *Bodies) reserve(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.inFlight+n > b.max {
		return false
	}
	b.inFlight += n
	return true
}

// reserveUpTo takes up to n bytes of the budget and returns how many.
func (b *Bodies) reserveUpTo(n int64) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	n = max(0, min(n, b.max-b.inFlight))
	b.inFlight += n
	return n
}

func (b *Bodies) release(n int64) {
	b.mu.Lock()
	b.inFlight -= n
	b.mu.Unlock()
}

// Handler guards the bodies of the requests next serves. Requests without
// a body pass untouched. Mount it outermost, over the server's own
// ResponseWriter: the read deadlines need http.ResponseController to
// reach the connection (a writer that hides it leaves only the budget).
func (b *Bodies) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			next.ServeHTTP(w, r)
			return
		}
		g := &guardedBody{b: b, rc: r.Body, ctl: http.NewResponseController(w), known: r.ContentLength > 0}
		if g.known {
			if r.ContentLength > b.max {
				refuse(w, http.StatusRequestEntityTooLarge, "", fmt.Sprintf("the body is larger than the %d bytes this server reads at once", b.max))
				return
			}
			if !b.reserve(r.ContentLength) {
				refuse(w, http.StatusServiceUnavailable, seconds(DefaultRetryAfter), ErrBudget.Error()+"; retry later")
				return
			}
			g.reserved = r.ContentLength
		}
		defer g.finish()
		r.Body = g
		next.ServeHTTP(w, r)
	})
}

// Streaming guards the bodies of the requests next serves by their rate
// only, as Handler does, without the budget: for a handler that streams
// a body to disk, bounded by a size it checks itself, rather than hold
// it in memory. Mount it outermost too.
func (b *Bodies) Streaming(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			next.ServeHTTP(w, r)
			return
		}
		// known: nothing is reserved as the body is read.
		g := &guardedBody{b: b, rc: r.Body, ctl: http.NewResponseController(w), known: true}
		defer g.finish()
		r.Body = g
		next.ServeHTTP(w, r)
	})
}

// refuse answers a request the guard refuses before its handler runs.
func refuse(w http.ResponseWriter, status int, retryAfter, msg string) {
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	// The body is not read: the connection closes after the answer.
	w.Header().Set("Connection", "close")
	refuseJSON(w, status, msg)
}

// refuseJSON answers status with a JSON error.
func refuseJSON(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Error string `json:"error"`
	}{msg})
}

// reserveStep is how much of the budget a body of unknown length
// reserves at a time.
const reserveStep = 32 << 10

// guardedBody is a request body read under the budget and the rate rule.
// A handler reads it from one goroutine, as net/http allows.
type guardedBody struct {
	b     *Bodies
	rc    io.ReadCloser
	ctl   *http.ResponseController
	known bool // Content-Length was reserved up front

	reserved int64 // bytes of the budget held
	read     int64
	mark     int64 // bytes read when the window began
	armed    bool  // a read deadline is set
	done     bool  // the body was read to its end
	err      error // the first failure, returned again
}

func (g *guardedBody) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	if g.done {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !g.armed {
		g.armed = true
		g.window()
	}
	if !g.known {
		want := int64(min(len(p), reserveStep))
		if free := g.reserved - g.read; free < want {
			g.reserved += g.b.reserveUpTo(want - free)
		}
		if g.reserved == g.read {
			g.err = fmt.Errorf("%w: %d bytes in flight", ErrBudget, g.b.max)
			return 0, g.err
		}
		p = p[:min(want, g.reserved-g.read)]
	}
	n, err := g.rc.Read(p)
	g.read += int64(n)
	switch {
	case errors.Is(err, io.EOF):
		g.done = true
		// The body is in: what follows (a long poll, a stream) must not
		// be cut by the body's deadline.
		_ = g.ctl.SetReadDeadline(time.Time{})
	case errors.Is(err, os.ErrDeadlineExceeded):
		g.err = fmt.Errorf("%w: less than %d bytes in %s: %w", ErrTooSlow, g.b.quota, g.b.timeout, err)
		return n, g.err
	case err != nil:
		g.err = err
	case g.read-g.mark >= g.b.quota:
		g.window()
	}
	return n, err
}

// window begins a window: the next quota of bytes is due within the
// timeout.
func (g *guardedBody) window() {
	g.mark = g.read
	// Without a deadline (a writer that hides the connection) only the
	// budget applies.
	_ = g.ctl.SetReadDeadline(g.b.now().Add(g.b.timeout))
}

func (g *guardedBody) Close() error { return g.rc.Close() }

// finish releases the body's reservation when its handler returns. A body
// left unread keeps a deadline, so that the server's discarding of the
// rest cannot be trickled either.
func (g *guardedBody) finish() {
	if !g.done && !g.armed {
		_ = g.ctl.SetReadDeadline(g.b.now().Add(g.b.timeout))
	}
	g.b.release(g.reserved)
}

// seconds is d as a Retry-After: whole seconds, at least 1.
func seconds(d time.Duration) string {
	return strconv.FormatInt(max(1, int64((d+time.Second-1)/time.Second)), 10)
}
