// Package groupcommit joins concurrent calls into batches without
// timers: the first caller that finds no batch in flight makes the calls
// waiting with one call of many, and hands the making on once its own is
// answered. A store writes one transaction for many requests this way
// (ingest's run creation, fleet's lease claims and completions).
//
// # Stability
//
// Internal to cikit; changes with its callers.
package groupcommit

import (
	"context"
	"sync"
)

// Batcher joins concurrent calls into batches: a group commit. Up
// to writers calls at a time are writers: each takes the calls waiting,
// up to max, makes them with one call of many and answers them, and goes
// on until its own call is answered; it then hands its place to a call
// still waiting, or gives it up when none is. The others wait for their
// answer. Nobody waits for a timer: a lone call is made at once, and no
// call goes on writing for others once its own is answered. many answers
// each request in the same place of its result and never fails as a
// whole.
type Batcher[Req, Res any] struct {
	max     int
	writers int
	many    func(context.Context, []Req) []Res

	mu      sync.Mutex
	queue   []*batchCall[Req, Res] // waiting, not taken by a writer
	writing int                    // writers, at most writers
}

// batchCall is one call waiting in a Batcher. The fields after lead are
// guarded by the Batcher's mu.
type batchCall[Req, Res any] struct {
	req  Req
	res  Res
	done chan struct{} // closed once res is set
	lead chan struct{} // closed when the call is made a writer

	answered  bool // res is set
	writer    bool // took a writer's place, or was handed one
	abandoned bool // its caller stopped waiting: never to be made a writer
}

// New returns a Batcher making calls with many, up to size of them in one
// call, by up to writers callers at a time (at least one of each).
func New[Req, Res any](size, writers int, many func(context.Context, []Req) []Res) *Batcher[Req, Res] {
	return &Batcher[Req, Res]{max: max(size, 1), writers: max(writers, 1), many: many}
}

// Do makes req in a batch and returns its answer, or ctx's error if ctx
// ends first; the call may still be made then.
func (b *Batcher[Req, Res]) Do(ctx context.Context, req Req) (Res, error) {
	c := &batchCall[Req, Res]{req: req, done: make(chan struct{}), lead: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, c)
	write := b.writing < b.writers
	if write {
		b.writing++
		c.writer = true
	}
	b.mu.Unlock()
	if write {
		b.serve(ctx, c)
	} else {
		select {
		case <-c.done:
		case <-c.lead:
		case <-ctx.Done():
		}
		b.mu.Lock()
		write = c.writer
		if !write && !c.answered {
			c.abandoned = true
		}
		b.mu.Unlock()
		if write {
			b.serve(ctx, c)
		}
	}
	select {
	case <-c.done:
		return c.res, nil
	case <-ctx.Done():
		var zero Res
		return zero, ctx.Err()
	}
}

// serve makes batches as a writer until own is answered, then hands the
// writer's place to the first call still waiting, or gives it up when the
// queue is empty. The batches go on when own's caller stops waiting: the
// others still wait.
func (b *Batcher[Req, Res]) serve(ctx context.Context, own *batchCall[Req, Res]) {
	ctx = context.WithoutCancel(ctx)
	for {
		b.mu.Lock()
		if len(b.queue) == 0 {
			b.writing--
			b.mu.Unlock()
			return
		}
		if own.answered {
			for _, next := range b.queue {
				if !next.abandoned && !next.writer {
					next.writer = true
					close(next.lead)
					b.mu.Unlock()
					return
				}
			}
			// Every call waiting was abandoned by its caller, or has a
			// writer's place already: write on.
		}
		n := min(len(b.queue), b.max)
		batch := b.queue[:n:n]
		b.queue = b.queue[n:]
		b.mu.Unlock()
		b.write(ctx, batch)
	}
}

func (b *Batcher[Req, Res]) write(ctx context.Context, batch []*batchCall[Req, Res]) {
	reqs := make([]Req, len(batch))
	for i, c := range batch {
		reqs[i] = c.req
	}
	res := b.many(ctx, reqs)
	b.mu.Lock()
	for i, c := range batch {
		c.res = res[i]
		c.answered = true
	}
	b.mu.Unlock()
	for _, c := range batch {
		close(c.done)
	}
}
