package ingest

import "sync"

// seenCache remembers the records of recent deliveries by their delivery
// key and semantic key, the oldest forgotten first. Records never change
// once committed, so a hit is as good as the store's answer; a delivery
// pruned from the store may still hit, which only spares it a second
// look. A nil cache remembers nothing.
type seenCache struct {
	mu    sync.Mutex
	byKey map[string]*Delivery
	order fifo[string]
}

func newSeenCache(max int) *seenCache {
	return &seenCache{byKey: make(map[string]*Delivery, max), order: fifo[string]{max: max}}
}

// fifo is the order in which at most max keys were added, to forget the
// oldest first.
type fifo[K comparable] struct {
	max   int
	order []K // a ring, oldest at next once full
	next  int
}

// add records k as the newest key; when that makes one too many, it
// returns the oldest, which it forgets.
func (f *fifo[K]) add(k K) (oldest K, full bool) {
	if len(f.order) < f.max {
		f.order = append(f.order, k)
		return oldest, false
	}
	oldest = f.order[f.next]
	f.order[f.next] = k
	f.next = (f.next + 1) % f.max
	return oldest, true
}

func cacheKeys(ev *Event) (delivery, semantic string) {
	delivery = string(ev.Provider) + "\x00" + ev.HookID + "\x00" + ev.DeliveryID
	if k := SemanticKey(ev); k != "" {
		semantic = "\x01" + k
	}
	return delivery, semantic
}

func (c *seenCache) get(ev *Event) *Delivery {
	if c == nil {
		return nil
	}
	dk, sk := cacheKeys(ev)
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.byKey[dk]
	if !ok && sk != "" {
		d, ok = c.byKey[sk]
	}
	if !ok {
		return nil
	}
	return d.clone()
}

func (c *seenCache) put(ev *Event, d *Delivery) {
	if c == nil {
		return
	}
	dk, sk := cacheKeys(ev)
	if SemanticKey(ev) != d.SemanticKey {
		// ev's delivery key was recorded with another body: its
		// semantic key is not d's, and another delivery of it is new.
		sk = ""
	}
	d = d.clone()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range []string{dk, sk} {
		if k == "" {
			continue
		}
		if _, ok := c.byKey[k]; ok {
			c.byKey[k] = d
			continue
		}
		if oldest, full := c.order.add(k); full {
			delete(c.byKey, oldest)
		}
		c.byKey[k] = d
	}
}
