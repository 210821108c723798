package httpguard

import (
	"cmp"
	"container/list"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// DefaultMaxSources is how many sources a Limiter remembers unless
// configured otherwise.
const DefaultMaxSources = 10000

// LimiterConfig configures a Limiter.
type LimiterConfig struct {
	// Rate is the requests per second each source may send, after a
	// burst of Burst. Both are required.
	Rate  rate.Limit
	Burst int
	// MaxSources bounds the sources remembered; the least recently seen
	// is forgotten first (and starts with a full bucket when it comes
	// back). Default: DefaultMaxSources.
	MaxSources int
	// TrustedProxies are the proxies whose X-Forwarded-For is believed:
	// for a connection from one of them, the source is the last address
	// of the header that is not itself a trusted proxy. Without them the
	// header is ignored and the source is the connection's address.
	TrustedProxies []netip.Prefix
	// Now is the clock of the buckets. Default: time.Now.
	Now func() time.Time
}

// Limiter limits the requests of each source with a token bucket; see the
// package documentation. It is safe for concurrent use.
type Limiter struct {
	rate    rate.Limit
	burst   int
	max     int
	trusted []netip.Prefix
	now     func() time.Time

	mu      sync.Mutex
	lru     *list.List // of *source, the most recently seen first
	sources map[netip.Prefix]*list.Element
}

type source struct {
	key netip.Prefix
	lim *rate.Limiter
}

// NewLimiter validates cfg and returns a Limiter.
func NewLimiter(cfg LimiterConfig) (*Limiter, error) {
	if cfg.Rate <= 0 || cfg.Burst <= 0 {
		return nil, fmt.Errorf("httpguard: LimiterConfig.Rate (%v) and Burst (%d) must be positive", cfg.Rate, cfg.Burst)
	}
	if cfg.MaxSources < 0 {
		return nil, fmt.Errorf("httpguard: LimiterConfig.MaxSources must not be negative, got %d", cfg.MaxSources)
	}
	l := &Limiter{
		rate: cfg.Rate, burst: cfg.Burst, max: cmp.Or(cfg.MaxSources, DefaultMaxSources),
		trusted: cfg.TrustedProxies, now: cfg.Now,
		lru: list.New(), sources: map[netip.Prefix]*list.Element{},
	}
	if l.now == nil {
		l.now = time.Now
	}
	return l, nil
}

// ParseProxies parses trusted proxies given as addresses or CIDR
// prefixes ("10.0.0.0/8", "192.0.2.7").
func ParseProxies(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	var errs []error
	for _, s := range list {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
		} else if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
		} else {
			errs = append(errs, fmt.Errorf("%q is neither an IP address nor a CIDR prefix", s))
		}
	}
	return out, errors.Join(errs...)
}

// Handler limits the requests next serves. A request over its source's
// limit is answered 429 with Retry-After, the seconds until its bucket
// holds a token again.
func (l *Limiter) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if wait := l.take(l.Source(r)); wait > 0 {
			w.Header().Set("Retry-After", seconds(wait))
			refuseJSON(w, http.StatusTooManyRequests, "too many requests from this address; retry after "+seconds(wait)+"s")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// take takes a token of src's bucket, or says how long until it has one.
func (l *Limiter) take(src netip.Prefix) time.Duration {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	var s *source
	if e, ok := l.sources[src]; ok {
		l.lru.MoveToFront(e)
		s = e.Value.(*source)
	} else {
		if l.lru.Len() >= l.max {
			oldest := l.lru.Back()
			delete(l.sources, oldest.Value.(*source).key)
			l.lru.Remove(oldest)
		}
		s = &source{key: src, lim: rate.NewLimiter(l.rate, l.burst)}
		l.sources[src] = l.lru.PushFront(s)
	}
	res := s.lim.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return d
	}
	return 0
}

// Source is the source a request counts against: its client's address,
// an IPv6 address by its /64. An address that cannot be parsed counts as
// the zero prefix, one source for all such requests.
func (l *Limiter) Source(r *http.Request) netip.Prefix {
	addr := remoteAddr(r.RemoteAddr)
	if addr.IsValid() && l.isTrusted(addr) {
		hops := r.Header.Values("X-Forwarded-For")
		// The rightmost address not of a trusted proxy is the first one
		// a trusted proxy saw: what is left of it the client wrote.
		for i := len(hops) - 1; i >= 0; i-- {
			parts := strings.Split(hops[i], ",")
			for j := len(parts) - 1; j >= 0; j-- {
				a, err := netip.ParseAddr(strings.TrimSpace(parts[j]))
				if err != nil {
					return prefixOf(addr)
				}
				addr = a.Unmap()
				if !l.isTrusted(addr) {
					return prefixOf(addr)
				}
			}
		}
	}
	return prefixOf(addr)
}

func (l *Limiter) isTrusted(a netip.Addr) bool {
	for _, p := range l.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// remoteAddr parses a RemoteAddr, host:port.
func remoteAddr(s string) netip.Addr {
	host, _, err := net.SplitHostPort(s)
	if err != nil {
		host = s
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}

// prefixOf is the source an address belongs to: itself, or its /64 for
// IPv6, where one client commonly holds a whole /64.
func prefixOf(a netip.Addr) netip.Prefix {
	if !a.IsValid() {
		return netip.Prefix{}
	}
	bits := a.BitLen()
	if a.Is6() {
		bits = 64
	}
	p, _ := a.Prefix(bits)
	return p
}
