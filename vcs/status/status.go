// Package status delivers the statuses of runs and jobs to a forge
// (vcs.Provider.SetStatus) without ever making the scheduler wait: Report
// records the latest status of each check and returns at once; workers
// deliver them in the background, coalescing rapid updates of one check
// into its latest, within a rate limit per installation or organization,
// waiting out the forge's rate-limit answers (vcs.RateLimitError: 403 or
// 429 with Retry-After) and retrying failures with backoff.
//
// A check is a status Context on a commit of a repository. Only its
// latest state matters, so a check that changes faster than it can be
// delivered is delivered fewer times, and it always ends in the state
// reported last.
package status

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/cikit/cikit/vcs"
)

// Defaults of Config.
const (
	// DefaultRate is how many statuses per second go to one key. GitHub
	// asks integrations to stay under about 80 content-creating requests a
	// minute per installation; one a second with bursts leaves room for
	// the rest of the platform's calls.
	DefaultRate       = 1.0
	DefaultBurst      = 20
	DefaultWorkers    = 4
	DefaultMaxBackoff = time.Minute
	DefaultAttempts   = 10
	DefaultTimeout    = 30 * time.Second
)

// Config configures a Reporter. Provider is required.
type Config struct {
	// Provider receives the statuses.
	Provider vcs.Provider
	// Key names the rate-limit bucket of a repository, such as its GitHub
	// App installation. Default: the repository's owner (the part before
	// the first '/').
	Key func(repo string) string
	// Rate and Burst bound the statuses per second sent for one key.
	// Default: DefaultRate and DefaultBurst.
	Rate  float64
	Burst int
	// Workers is how many statuses are in flight at once.
	// Default: DefaultWorkers.
	Workers int
	// Attempts bounds how often one status is tried after failures other
	// than rate limits; then it is dropped with a log line (a newer status
	// of the check is tried afresh). Default: DefaultAttempts.
	Attempts int
	// MaxBackoff bounds the wait between attempts. Default:
	// DefaultMaxBackoff.
	MaxBackoff time.Duration
	// Timeout bounds one SetStatus call. Default: DefaultTimeout.
	Timeout time.Duration
	// Logger receives the reporter's diagnostics. Default:
	// slog.Default().
	Logger *slog.Logger
}

// PipelineContext is the status context of the runs of a pipeline file,
// such as "cikit/.github/workflows/ci.yml".
func PipelineContext(file string) string { return "cikit/" + file }

// check names one status: a context on a commit.
type check struct {
	repo, sha, context string
}

// entry is what the Reporter holds of a check.
type entry struct {
	check
	key     string
	order   string      // of the latest status reported (ReportOrdered)
	next    *vcs.Status // the latest status not yet sent, nil if none
	sending bool        // a worker is sending one
	queued  bool        // in its key's queue
	tries   int         // failed attempts of the status in next
	after   time.Time   // not before, after a failure
}

// bucket is a key's queue and limits.
type bucket struct {
	queue    []*entry // checks with a status to send, oldest first
	limit    *rate.Limiter
	paused   time.Time // a rate-limit answer asked to wait until then
	inFlight int
}

// maxInFlightPerKey bounds the statuses of one key in flight at once, so
// that a key whose forge hangs does not hold every worker.
const maxInFlightPerKey = 2

// rememberOrders is how many checks' latest orders (ReportOrdered) the
// Reporter keeps after their statuses went out.
const rememberOrders = 1 << 16

// Reporter delivers statuses. Report may be called before Run, from any
// goroutine.
type Reporter struct {
	cfg  Config
	log  *slog.Logger
	wake chan struct{} // buffered 1: something changed

	mu       sync.Mutex
	checks   map[check]*entry
	buckets  map[string]*bucket
	ring     []*bucket // the buckets, served in turn
	turn     int       // the ring's next bucket
	orders   map[check]string
	ordered  []check // orders' keys, oldest first, for eviction
	inFlight int
	idle     chan struct{} // closed when nothing is pending or in flight
	sent     int
	dropped  int
}

// New validates cfg and returns a Reporter.
func New(cfg Config) (*Reporter, error) {
	if cfg.Provider == nil {
		return nil, errors.New("status: Config.Provider is required")
	}
	if cfg.Rate < 0 || cfg.Burst < 0 || cfg.Workers < 0 || cfg.Attempts < 0 || cfg.MaxBackoff < 0 || cfg.Timeout < 0 {
		return nil, errors.New("status: Config values must not be negative")
	}
	cfg.Rate = cmp.Or(cfg.Rate, DefaultRate)
	cfg.Burst = cmp.Or(cfg.Burst, DefaultBurst)
	cfg.Workers = cmp.Or(cfg.Workers, DefaultWorkers)
	cfg.Attempts = cmp.Or(cfg.Attempts, DefaultAttempts)
	cfg.MaxBackoff = cmp.Or(cfg.MaxBackoff, DefaultMaxBackoff)
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	if cfg.Key == nil {
		cfg.Key = func(repo string) string { owner, _, _ := strings.Cut(repo, "/"); return owner }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	idle := make(chan struct{})
	close(idle)
	return &Reporter{cfg: cfg, log: cfg.Logger, wake: make(chan struct{}, 1), checks: map[check]*entry{},
		buckets: map[string]*bucket{}, orders: map[check]string{}, idle: idle}, nil
}

// Report records st as the latest status of its check on commit sha of
// repo, to be delivered. It never waits. It refuses only an invalid
// status.
func (r *Reporter) Report(repo, sha string, st vcs.Status) error {
	return r.ReportOrdered(repo, sha, st, "")
}

// ReportOrdered is Report for statuses that may come out of order, as a
// run's events do from several relays: order ranks them (larger is
// later), and a status ranked before the latest one reported for its
// check is ignored, also after that one went out (the Reporter remembers
// the latest order of its 65,536 most recent checks). An empty order is
// never ignored.
func (r *Reporter) ReportOrdered(repo, sha string, st vcs.Status, order string) error {
	if err := st.Validate(); err != nil {
		return err
	}
	if repo == "" || sha == "" {
		return errors.New("status: Report needs a repository and a commit")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := check{repo, sha, st.Context}
	if order != "" {
		if order < r.orders[k] {
			return nil
		}
		r.rememberLocked(k, order)
	}
	e, ok := r.checks[k]
	if !ok {
		e = &entry{check: k, key: r.cfg.Key(repo)}
		r.checks[k] = e
	}
	e.next, e.tries, e.after = &st, 0, time.Time{}
	if !e.queued && !e.sending {
		r.enqueueLocked(e)
	}
	r.busyLocked()
	r.poke()
	return nil
}

// rememberLocked records order as the latest of check k.
func (r *Reporter) rememberLocked(k check, order string) {
	if _, ok := r.orders[k]; !ok {
		r.ordered = append(r.ordered, k)
		if len(r.ordered) > rememberOrders {
			delete(r.orders, r.ordered[0])
			r.ordered[0] = check{}
			r.ordered = r.ordered[1:]
		}
	}
	r.orders[k] = order
}

func (r *Reporter) enqueueLocked(e *entry) {
	b := r.buckets[e.key]
	if b == nil {
		b = &bucket{limit: rate.NewLimiter(rate.Limit(r.cfg.Rate), r.cfg.Burst)}
		r.buckets[e.key] = b
		r.ring = append(r.ring, b)
	}
	b.queue = append(b.queue, e)
	e.queued = true
}

// busyLocked notes that work is pending.
func (r *Reporter) busyLocked() {
	select {
	case <-r.idle:
		r.idle = make(chan struct{})
	default:
	}
}

func (r *Reporter) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run delivers statuses until ctx ends, then returns nil. What is still
// pending stays pending.
func (r *Reporter) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for range r.cfg.Workers {
		wg.Go(func() { r.work(ctx) })
	}
	wg.Wait()
	return nil
}

// work takes the next status that may go and sends it, until ctx ends.
func (r *Reporter) work(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for ctx.Err() == nil {
		e, st, wait := r.next(time.Now())
		if e == nil {
			t.Reset(wait)
			select {
			case <-ctx.Done():
				return
			case <-r.wake:
			case <-t.C:
			}
			continue
		}
		r.poke() // another worker may take the next one
		sctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
		err := r.cfg.Provider.SetStatus(sctx, e.repo, e.sha, st)
		cancel()
		r.done(e, st, err, time.Now())
	}
}

// next returns a check whose status may go now and the status, or how
// long to wait before one may.
func (r *Reporter) next(now time.Time) (*entry, *vcs.Status, time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	wait := time.Hour
	// The keys take turns, from the one after the last served.
	for n := range len(r.ring) {
		i := (r.turn + n) % len(r.ring)
		b := r.ring[i]
		if len(b.queue) == 0 || b.inFlight >= maxInFlightPerKey {
			continue
		}
		if now.Before(b.paused) {
			wait = min(wait, b.paused.Sub(now))
			continue
		}
		// The oldest check whose backoff is over.
		at := -1
		for i, e := range b.queue {
			if !now.Before(e.after) {
				at = i
				break
			}
			wait = min(wait, e.after.Sub(now))
		}
		if at < 0 {
			continue
		}
		if tokens := b.limit.TokensAt(now); tokens < 1 {
			wait = min(wait, time.Duration((1-tokens)/r.cfg.Rate*float64(time.Second))+time.Millisecond)
			continue
		}
		b.limit.AllowN(now, 1)
		e := b.queue[at]
		copy(b.queue[at:], b.queue[at+1:])
		b.queue[len(b.queue)-1] = nil
		b.queue = b.queue[:len(b.queue)-1]
		st := e.next
		e.next, e.queued, e.sending = nil, false, true
		r.inFlight++
		b.inFlight++
		r.turn = i + 1
		return e, st, 0
	}
	return nil, nil, max(wait, time.Millisecond)
}

// done records how sending st for e went.
func (r *Reporter) done(e *entry, st *vcs.Status, err error, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inFlight--
	r.buckets[e.key].inFlight--
	e.sending = false
	var rl *vcs.RateLimitError
	switch {
	case err == nil:
		r.sent++
	case errors.As(err, &rl):
		// The forge's limit: the whole key waits, and the status goes
		// again unless a newer one came meanwhile.
		b := r.buckets[e.key]
		b.paused = now.Add(max(rl.RetryAfter, time.Second))
		r.log.Warn("status: rate limited by the forge; waiting", "key", e.key, "retry_after", rl.RetryAfter)
		if e.next == nil {
			e.next = st
		}
	case e.next != nil:
		// Failed, but a newer status replaces it anyway.
	default:
		e.tries++
		if e.tries >= r.cfg.Attempts {
			r.dropped++
			r.log.Error("status: giving up on a status", "repo", e.repo, "sha", e.sha, "context", e.context, "state", st.State,
				"attempts", e.tries, "err", err)
			e.tries = 0
			break
		}
		e.next = st
		e.after = now.Add(min(r.cfg.MaxBackoff, time.Second<<min(e.tries-1, 16)))
		r.log.Warn("status: sending a status failed; retrying", "repo", e.repo, "context", e.context, "err", err, "retry_in", e.after.Sub(now))
	}
	if e.next != nil {
		r.enqueueLocked(e)
	} else {
		delete(r.checks, e.check)
	}
	if len(r.checks) == 0 && r.inFlight == 0 {
		close(r.idle)
	}
	r.poke()
}

// Flush waits until the Reporter has nothing pending or in flight (every
// status reported has been delivered or dropped), or ctx ends: for tests
// and shutdown, since under steady reporting it may not return before ctx
// ends. Run must be running.
func (r *Reporter) Flush(ctx context.Context) error {
	for {
		r.mu.Lock()
		idle := r.idle
		r.mu.Unlock()
		select {
		case <-idle:
			r.mu.Lock()
			same := r.idle == idle // no Report since
			r.mu.Unlock()
			if same {
				return nil
			}
		case <-ctx.Done():
			return fmt.Errorf("status: flush: %w", ctx.Err())
		}
	}
}

// Stats says how many statuses were sent and dropped, and how many checks
// wait to be sent.
func (r *Reporter) Stats() (sent, dropped, pending int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sent, r.dropped, len(r.checks)
}
