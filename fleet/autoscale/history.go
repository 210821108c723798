package autoscale

import (
	"slices"
	"time"
)

// Sample is a pool's demand at one moment: its busy runners plus the jobs
// queued for it.
type Sample struct {
	At     time.Time
	Demand int
}

// History is the demand record a caller keeps for one pool between
// decisions: it adds a sample each tick and copies Samples and IdleSince
// into the pool's snapshot. It keeps the samples of the last Window
// before the newest one. The zero value is ready to use, with a Window of
// DefaultDemandWindow; set Window to the pool's Policy.HistoryWindow.
//
// A History is not safe for concurrent use.
type History struct {
	Window time.Duration

	samples   []Sample // oldest first
	idle      bool     // the newest sample has no demand
	idleSince time.Time
}

// Add records s and forgets the samples that fell out of the window. A
// sample older than the newest one is ignored, so a clock that steps back
// does not rewrite the record.
func (h *History) Add(s Sample) {
	if n := len(h.samples); n > 0 && s.At.Before(h.samples[n-1].At) {
		return
	}
	switch {
	case s.Demand > 0:
		h.idle = false
	case !h.idle:
		h.idle, h.idleSince = true, s.At
	}
	h.samples = append(h.samples, s)
	window := h.Window
	if window <= 0 {
		window = DefaultDemandWindow
	}
	cut := s.At.Add(-window)
	old := 0
	for old < len(h.samples) && !h.samples[old].At.After(cut) {
		old++
	}
	h.samples = slices.Delete(h.samples, 0, old)
}

// Samples returns a copy of the samples kept, oldest first.
func (h *History) Samples() []Sample { return slices.Clone(h.samples) }

// Peak returns the highest demand kept, 0 if none.
func (h *History) Peak() int {
	peak := 0
	for _, s := range h.samples {
		peak = max(peak, s.Demand)
	}
	return peak
}

// IdleSince returns when the pool's demand last fell to zero and has
// stayed there, or the zero time if the newest sample has demand or there
// is none. It survives the window: a pool idle for longer than Window
// still reports when it went idle.
func (h *History) IdleSince() time.Time {
	if !h.idle {
		return time.Time{}
	}
	return h.idleSince
}
