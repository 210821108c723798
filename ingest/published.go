package ingest

import (
	"context"
	"crypto/sha256"
	"hash"
	"net/http"
	"sync"
)

// DefaultRemember is how many published deliveries a Receiver remembers
// unless configured otherwise.
const DefaultRemember = 65536

// deliveryDigest identifies a verified delivery by everything its Event is
// made of: the provider, the delivery id, the headers normalization reads
// and the body. Two deliveries with one digest are one event.
type deliveryDigest [sha256.Size]byte

// digestDelivery computes the digest of a verified delivery.
func digestDelivery(provider Provider, id string, h http.Header, keyHeaders []string, body []byte) deliveryDigest {
	d := sha256.New()
	field := func(w hash.Hash, s string) {
		// Length-prefixed, so that no two different field lists hash the
		// same bytes.
		n := len(s)
		_, _ = w.Write([]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
		_, _ = w.Write([]byte(s))
	}
	field(d, string(provider))
	field(d, id)
	for _, k := range keyHeaders {
		field(d, h.Get(k))
	}
	_, _ = d.Write(body)
	var out deliveryDigest
	d.Sum(out[:0])
	return out
}

// publishedSet remembers the digests of the last max deliveries a
// Receiver published, the oldest forgotten first, and the publications in
// flight, so that copies arriving together wait for one publication
// instead of each making its own. Nil remembers nothing.
type publishedSet struct {
	mu       sync.Mutex
	done     map[deliveryDigest]struct{}
	order    fifo[deliveryDigest]
	inFlight map[deliveryDigest]*publication
}

// publication is one delivery being published; done is closed when the
// attempt ends, published or not.
type publication struct {
	done chan struct{}
}

func newPublishedSet(max int) *publishedSet {
	if max <= 0 {
		return nil
	}
	return &publishedSet{
		order:    fifo[deliveryDigest]{max: max},
		done:     make(map[deliveryDigest]struct{}, max),
		inFlight: make(map[deliveryDigest]*publication),
	}
}

// publish calls fn, which publishes the delivery of digest d and answers
// its request, unless the delivery was published before: then it returns
// true at once, and the caller answers. A copy arriving while another is
// being published waits for that attempt: when it published, the copy is
// a duplicate; when it did not (the delivery was refused, ignored, or the
// Publisher failed) the copy makes its own attempt. err is the context's
// when it ended while waiting.
func (s *publishedSet) publish(ctx context.Context, d deliveryDigest, fn func() (published bool)) (duplicate bool, err error) {
	if s == nil {
		fn()
		return false, nil
	}
	s.mu.Lock()
	for {
		if _, ok := s.done[d]; ok {
			s.mu.Unlock()
			return true, nil
		}
		p, ok := s.inFlight[d]
		if !ok {
			break
		}
		s.mu.Unlock()
		select {
		case <-p.done:
		case <-ctx.Done():
			return false, ctx.Err()
		}
		s.mu.Lock()
	}
	p := &publication{done: make(chan struct{})}
	s.inFlight[d] = p
	s.mu.Unlock()

	published := false
	defer func() {
		s.mu.Lock()
		delete(s.inFlight, d)
		if published {
			s.remember(d)
		}
		s.mu.Unlock()
		close(p.done)
	}()
	published = fn()
	return false, nil
}

// remember adds d, forgetting the oldest digest when full. s.mu is held.
func (s *publishedSet) remember(d deliveryDigest) {
	if _, ok := s.done[d]; ok {
		return
	}
	if oldest, full := s.order.add(d); full {
		delete(s.done, oldest)
	}
	s.done[d] = struct{}{}
}
