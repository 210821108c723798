package ingest

import "sync"

// seenCache remembers the records of recent deliveries by their delivery
// key and semantic key, the oldest forgotten first. Records never change
// once committed, so a hit is as good as the store's answer; a delivery
// pruned from the store may still hit, which only spares it a second
// look. A nil cache remembers nothing.
type seenCache struct {
	mu    sync.Mutex
	max   int
	byKey map[string]*Delivery
	order []string // ring of keys, oldest at next
	next  int
}

func newSeenCache(max int) *seenCache {
	return &seenCache{max: max, byKey: make(map[string]*Delivery, max)}
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
		if len(c.order) < c.max {
			c.order = append(c.order, k)
		} else {
			delete(c.byKey, c.order[c.next])
			c.order[c.next] = k
			c.next = (c.next + 1) % c.max
		}
		c.byKey[k] = d
	}
}
