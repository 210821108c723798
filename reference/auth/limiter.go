package auth

import (
	"container/list"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// RateLimitedError is the ErrRateLimited of a client address that failed
// to authenticate too often: it may try again after RetryAfter.
type RateLimitedError struct {
	RetryAfter time.Duration
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("%v from this address; try again in %s", ErrRateLimited, e.RetryAfter.Round(time.Second))
}

// Is makes errors.Is(err, ErrRateLimited) true.
func (e *RateLimitedError) Is(target error) bool { return target == ErrRateLimited }

// failures is a token bucket of failed authentications per client
// address. A request is refused while its address's bucket is empty,
// before any lookup; each failure takes a token. It remembers at most
// max addresses, forgetting the least recently failed first, so an
// attacker with many addresses cannot grow it; a forgotten address
// starts again with a full bucket.
type failures struct {
	every time.Duration
	burst int
	max   int

	mu    sync.Mutex
	lru   *list.List // of *failing, the most recent first
	addrs map[string]*list.Element
}

type failing struct {
	addr string
	lim  *rate.Limiter
}

func newFailures(burst int, every time.Duration, max int) *failures {
	return &failures{every: every, burst: burst, max: max, lru: list.New(), addrs: map[string]*list.Element{}}
}

// check returns a *RateLimitedError when addr may not try now.
func (f *failures) check(addr string, now time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.addrs[addr]
	if !ok {
		return nil
	}
	lim := e.Value.(*failing).lim
	if lim.TokensAt(now) >= 1 {
		return nil
	}
	r := lim.ReserveN(now, 1)
	wait := r.DelayFrom(now)
	r.CancelAt(now)
	return &RateLimitedError{RetryAfter: max(wait, time.Second)}
}

// fail takes a token of addr's bucket.
func (f *failures) fail(addr string, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.addrs[addr]
	if ok {
		f.lru.MoveToFront(e)
	} else {
		if f.lru.Len() >= f.max {
			oldest := f.lru.Back()
			delete(f.addrs, oldest.Value.(*failing).addr)
			f.lru.Remove(oldest)
		}
		e = f.lru.PushFront(&failing{addr: addr, lim: rate.NewLimiter(rate.Every(f.every), f.burst)})
		f.addrs[addr] = e
	}
	e.Value.(*failing).lim.AllowN(now, 1)
}

// size is how many addresses are remembered.
func (f *failures) size() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lru.Len()
}

// RemoteAddr is the default Config.ClientAddr: the connection's address
// without its port, an IPv6 address by its /64 (one client commonly
// holds a whole /64). Behind a proxy, configure a ClientAddr that
// believes the proxy's X-Forwarded-For.
func RemoteAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}
