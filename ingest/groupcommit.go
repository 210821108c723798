package ingest

import (
	"context"
	"sync"
)

// MaxBatch is the most deliveries PostgresRunStore writes in one
// transaction.
const MaxBatch = 128

// groupCommit joins concurrent CreateRuns calls into transactions of
// many: the caller that finds no write in progress leads, writing every
// call waiting (its own first) until none is left; the others wait for
// their answer. Nobody waits for a timer: a lone call is written at once.
type groupCommit struct {
	max  int
	one  func(context.Context, *CreateRunsParams) (*Delivery, bool, error)
	many func(context.Context, []*CreateRunsParams) ([]created, error)

	mu      sync.Mutex
	queue   []*call
	leading bool
}

// call is one CreateRuns waiting in a groupCommit.
type call struct {
	p    *CreateRunsParams
	res  created
	err  error
	done chan struct{}
}

func (g *groupCommit) do(ctx context.Context, p *CreateRunsParams) (*Delivery, bool, error) {
	c := &call{p: p, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, c)
	lead := !g.leading
	g.leading = true
	g.mu.Unlock()
	if lead {
		// The writes go on for the others when the leader's caller stops
		// waiting: they are idempotent, and the others still wait.
		g.lead(context.WithoutCancel(ctx))
	}
	select {
	case <-c.done:
		return c.res.d, c.res.created, c.err
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
}

// lead writes the waiting calls, a batch at a time, until none is left.
func (g *groupCommit) lead(ctx context.Context) {
	for {
		g.mu.Lock()
		n := min(len(g.queue), g.max)
		if n == 0 {
			g.leading = false
			g.mu.Unlock()
			return
		}
		batch := g.queue[:n:n]
		g.queue = g.queue[n:]
		g.mu.Unlock()
		g.write(ctx, batch)
	}
}

func (g *groupCommit) write(ctx context.Context, batch []*call) {
	defer func() {
		for _, c := range batch {
			close(c.done)
		}
	}()
	if len(batch) > 1 {
		ps := make([]*CreateRunsParams, len(batch))
		for i, c := range batch {
			ps[i] = c.p
		}
		if res, err := g.many(ctx, ps); err == nil {
			for i, c := range batch {
				c.res = res[i]
			}
			return
		}
		// One of them may be at fault: each alone, so it fails alone.
	}
	for _, c := range batch {
		c.res.d, c.res.created, c.err = g.one(ctx, c.p)
	}
}
