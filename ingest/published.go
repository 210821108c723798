package ingest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"
)

// DefaultRemember is how many published deliveries a Receiver remembers
// unless configured otherwise.
const DefaultRemember = 65536

// RawDigest identifies the body of ev's delivery: "sha256:" and the hex
// SHA-256 of ev.Raw, or "" for an event without a body (a manual
// trigger's). A redelivery has the digest of the first delivery; the
// same delivery id with another digest is a conflicting redelivery (see
// Receiver and Delivery.RawDigest).
func (ev *Event) RawDigest() string { return rawDigest(ev.Raw) }

func rawDigest(body []byte) string {
	if len(body) == 0 {
		return ""
	}
	sum := sha256.Sum256(body)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// publishedSet remembers the last max deliveries a Receiver published,
// by their delivery key (provider, hook and delivery id, as the delivery
// record is keyed), with the digest of each one's body, the oldest
// forgotten first; and the publications in flight, so that copies
// arriving together wait for one publication instead of each making its
// own. Nil remembers nothing.
type publishedSet struct {
	mu       sync.Mutex
	done     map[string]string // delivery key -> body digest
	order    fifo[string]
	inFlight map[string]*publication
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
		order:    fifo[string]{max: max},
		done:     make(map[string]string, max),
		inFlight: make(map[string]*publication),
	}
}

// publishOutcome is what publishedSet.publish did with a delivery.
type publishOutcome int

const (
	// attempted: fn was called, and answered the request.
	attempted publishOutcome = iota
	// duplicate: the delivery was published before with the same body.
	duplicate
	// conflict: a delivery with the same key was published before with
	// another body.
	conflict
)

// publish calls fn, which publishes the delivery of key, whose body has
// digest, and answers its request, unless a delivery of key was
// published before: then it returns at once, duplicate when that one had
// the same digest, conflict (with the digest seen) when not, and the
// caller answers. A copy arriving while another of its key is being
// published waits for that attempt: when it published, the copy is a
// duplicate or a conflict; when it did not (the delivery was refused,
// ignored, or the Publisher failed) the copy makes its own attempt. err
// is the context's when it ended while waiting.
func (s *publishedSet) publish(ctx context.Context, key, digest string, fn func() (published bool)) (out publishOutcome, seen string, err error) {
	if s == nil {
		fn()
		return attempted, "", nil
	}
	s.mu.Lock()
	for {
		if seen, ok := s.done[key]; ok {
			s.mu.Unlock()
			if seen != digest {
				return conflict, seen, nil
			}
			return duplicate, seen, nil
		}
		p, ok := s.inFlight[key]
		if !ok {
			break
		}
		s.mu.Unlock()
		select {
		case <-p.done:
		case <-ctx.Done():
			return attempted, "", ctx.Err()
		}
		s.mu.Lock()
	}
	p := &publication{done: make(chan struct{})}
	s.inFlight[key] = p
	s.mu.Unlock()

	published := false
	defer func() {
		s.mu.Lock()
		delete(s.inFlight, key)
		if published {
			s.remember(key, digest)
		}
		s.mu.Unlock()
		close(p.done)
	}()
	published = fn()
	return attempted, "", nil
}

// remember records key's digest, forgetting the oldest key when full.
// s.mu is held.
func (s *publishedSet) remember(key, digest string) {
	if _, ok := s.done[key]; ok {
		return
	}
	if oldest, full := s.order.add(key); full {
		delete(s.done, oldest)
	}
	s.done[key] = digest
}
