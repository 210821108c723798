package ingest

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// DefaultRetention is how long a delivery's record is kept: longer than
// the providers redeliver (GitHub and GitLab redeliver for days at most),
// so a redelivery always finds it.
const DefaultRetention = 7 * 24 * time.Hour

// PrunerConfig configures a Pruner.
type PrunerConfig struct {
	// Runs is the store to prune. Required.
	Runs RunStore
	// Retention is how long records are kept. Default: DefaultRetention.
	Retention time.Duration
	// Interval is how often it prunes. Default: an hour.
	Interval time.Duration
	// Now is the clock. Default: time.Now.
	Now func() time.Time
	// Logger receives a line per pruning. Default: slog.Default().
	Logger *slog.Logger
}

// Pruner deletes delivery records older than the retention, periodically.
type Pruner struct {
	cfg PrunerConfig
	log *slog.Logger
}

// NewPruner returns a Pruner.
func NewPruner(cfg PrunerConfig) (*Pruner, error) {
	if cfg.Runs == nil {
		return nil, errors.New("ingest: PrunerConfig.Runs is required")
	}
	if cfg.Retention < 0 || cfg.Interval < 0 {
		return nil, errors.New("ingest: PrunerConfig durations must not be negative")
	}
	if cfg.Retention == 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.Interval == 0 {
		cfg.Interval = time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Pruner{cfg: cfg, log: log}, nil
}

// Prune deletes the records older than the retention once, and returns
// how many.
func (p *Pruner) Prune(ctx context.Context) (int, error) {
	n, err := p.cfg.Runs.PruneDeliveries(ctx, p.cfg.Now().Add(-p.cfg.Retention))
	if err == nil && n > 0 {
		p.log.InfoContext(ctx, "pruned delivery records", "count", n, "retention", p.cfg.Retention)
	}
	return n, err
}

// Run prunes at once and then every Interval until ctx ends; a failed
// pruning is logged and tried again at the next. It returns nil when ctx
// ends.
func (p *Pruner) Run(ctx context.Context) error {
	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := p.Prune(ctx); err != nil && ctx.Err() == nil {
			p.log.WarnContext(ctx, "pruning delivery records failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
