package ingest

import (
	"context"
	"sync"
)

// MaxBatch is the most deliveries PostgresRunStore writes in one
// transaction.
const MaxBatch = 128

// groupCommit joins concurrent CreateRuns calls into transactions of
// many. Up to writers calls at a time are writers: each takes the calls
// waiting, up to max, writes them in one transaction and answers them,
// and goes on until its own call is answered; it then hands its place to
// a call still waiting, or gives it up when none is. The others wait for
// their answer. Nobody waits for a timer: a lone call is written at once,
// and no call goes on writing for others once its own is written.
type groupCommit struct {
	max     int // calls per transaction
	writers int // transactions at once
	one     func(context.Context, *CreateRunsParams) (*Delivery, bool, error)
	many    func(context.Context, []*CreateRunsParams) ([]created, error)

	mu      sync.Mutex
	queue   []*call // waiting, not taken by a writer
	writing int     // writers, at most writers
}

// call is one CreateRuns waiting in a groupCommit. The fields after lead
// are guarded by the groupCommit's mu.
type call struct {
	p    *CreateRunsParams
	res  created
	err  error
	done chan struct{} // closed once res and err are set
	lead chan struct{} // closed when the call is made a writer

	answered  bool // res and err are set
	writer    bool // took a writer's place, or was handed one
	abandoned bool // its caller stopped waiting: never to be made a writer
}

func (g *groupCommit) do(ctx context.Context, p *CreateRunsParams) (*Delivery, bool, error) {
	c := &call{p: p, done: make(chan struct{}), lead: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, c)
	write := g.writing < g.writers
	if write {
		g.writing++
		c.writer = true
	}
	g.mu.Unlock()
	if write {
		g.serve(ctx, c)
	} else {
		select {
		case <-c.done:
		case <-c.lead:
		case <-ctx.Done():
		}
		g.mu.Lock()
		write = c.writer
		if !write && !c.answered {
			c.abandoned = true
		}
		g.mu.Unlock()
		if write {
			g.serve(ctx, c)
		}
	}
	select {
	case <-c.done:
		return c.res.d, c.res.created, c.err
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
}

// serve writes batches as a writer until own is answered, then hands the
// writer's place to the first call still waiting, or gives it up when the
// queue is empty. The writes go on when own's caller stops waiting: they
// are idempotent, and the others still wait.
func (g *groupCommit) serve(ctx context.Context, own *call) {
	ctx = context.WithoutCancel(ctx)
	for {
		g.mu.Lock()
		if len(g.queue) == 0 {
			g.writing--
			g.mu.Unlock()
			return
		}
		if own.answered {
			for _, next := range g.queue {
				if !next.abandoned && !next.writer {
					next.writer = true
					close(next.lead)
					g.mu.Unlock()
					return
				}
			}
			// Every call waiting was abandoned by its caller, or has
			// a writer's place already: write on.
		}
		n := min(len(g.queue), g.max)
		batch := g.queue[:n:n]
		g.queue = g.queue[n:]
		g.mu.Unlock()
		g.write(ctx, batch)
	}
}

func (g *groupCommit) write(ctx context.Context, batch []*call) {
	defer func() {
		g.mu.Lock()
		for _, c := range batch {
			c.answered = true
		}
		g.mu.Unlock()
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
