// Package clocktest is a clock that tests set and move by hand, for the
// Now of a component's Config. It is safe for concurrent use: the
// component reads it from its goroutines while the test moves it.
//
// # Stability
//
// Internal to cikit; changes with its callers.
package clocktest

import (
	"sync"
	"time"
)

// Clock is a settable clock.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New returns a clock showing t.
func New(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the time the clock shows.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Set makes the clock show t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// Advance moves the clock d forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
