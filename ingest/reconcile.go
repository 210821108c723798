package ingest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/cikit/cikit/vcs"
)

// Defaults of ReconcilerConfig.
const (
	DefaultReconcileInterval = 5 * time.Minute
	DefaultReconcileWindow   = time.Hour
	DefaultReconcileGrace    = 2 * time.Minute
)

// ReconcilerConfig configures a Reconciler. Ingester, Pushes, Provider
// and Repos are required.
type ReconcilerConfig struct {
	// Ingester takes in the pushes whose delivery never came.
	Ingester *Ingester
	// Pushes lists the forge's recent pushes.
	Pushes vcs.PushLister
	// Provider is the forge the pushes come from, as events name it.
	Provider Provider
	// Repos returns the repositories to reconcile ("org/repo").
	Repos func(ctx context.Context) ([]string, error)
	// DefaultBranch returns a repository's default branch, which events
	// carry; nil leaves it unknown.
	DefaultBranch func(ctx context.Context, repo string) (string, error)
	// Window is how far back a pass looks. Default:
	// DefaultReconcileWindow.
	Window time.Duration
	// Grace leaves pushes younger than this to their webhooks, which may
	// still be on their way. Default: DefaultReconcileGrace.
	Grace time.Duration
	// Interval is how often Run makes a pass. Default:
	// DefaultReconcileInterval.
	Interval time.Duration
	// Now is the clock. Default: time.Now.
	Now func() time.Time
	// Logger receives a line per push taken in. Default: slog.Default().
	Logger *slog.Logger
}

// Reconciler compares the pushes a forge lists with the deliveries taken
// in, and takes in the pushes whose webhook never arrived (seed 002's
// data validation): a lost delivery delays a run by at most an interval
// instead of losing it. Each push goes through Ingester.Ingest as a
// delivery of its own whose semantic key is the push's, so a push that
// was delivered creates nothing, and a webhook arriving after the
// reconciliation creates nothing either.
type Reconciler struct {
	cfg ReconcilerConfig
	log *slog.Logger
}

// NewReconciler validates cfg and returns a Reconciler.
func NewReconciler(cfg ReconcilerConfig) (*Reconciler, error) {
	switch {
	case cfg.Ingester == nil || cfg.Pushes == nil || cfg.Repos == nil:
		return nil, errors.New("ingest: ReconcilerConfig needs an Ingester, Pushes and Repos")
	case cfg.Provider == "":
		return nil, errors.New("ingest: ReconcilerConfig needs the Provider the pushes come from")
	case cfg.Window < 0 || cfg.Grace < 0 || cfg.Interval < 0:
		return nil, errors.New("ingest: ReconcilerConfig durations must not be negative")
	}
	cfg.Window = cmp.Or(cfg.Window, DefaultReconcileWindow)
	cfg.Grace = cmp.Or(cfg.Grace, DefaultReconcileGrace)
	cfg.Interval = cmp.Or(cfg.Interval, DefaultReconcileInterval)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Reconciler{cfg: cfg, log: cfg.Logger}, nil
}

// ReconcileReport says what a pass did.
type ReconcileReport struct {
	// Pushes is how many pushes the window held; Taken how many of them
	// no delivery had taken in before, now taken in.
	Pushes, Taken int
}

// Reconcile makes one pass over every repository. A repository whose
// pushes cannot be listed, or a push that cannot be taken in, does not
// stop the others; their errors are returned joined.
func (r *Reconciler) Reconcile(ctx context.Context) (*ReconcileReport, error) {
	repos, err := r.cfg.Repos(ctx)
	if err != nil {
		return nil, fmt.Errorf("ingest: reconcile: listing repositories: %w", err)
	}
	now := r.cfg.Now()
	rep := &ReconcileReport{}
	var errs []error
	for _, repo := range repos {
		pushes, err := r.cfg.Pushes.Pushes(ctx, repo, now.Add(-r.cfg.Window))
		if err != nil {
			errs = append(errs, fmt.Errorf("ingest: reconcile %s: %w", repo, err))
			continue
		}
		var def string
		for _, p := range pushes {
			if now.Sub(p.At) < r.cfg.Grace {
				continue
			}
			rep.Pushes++
			if def == "" && r.cfg.DefaultBranch != nil {
				if def, err = r.cfg.DefaultBranch(ctx, repo); err != nil {
					errs = append(errs, fmt.Errorf("ingest: reconcile %s: default branch: %w", repo, err))
					break
				}
			}
			ev, err := r.event(repo, def, p)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			_, created, err := r.cfg.Ingester.Ingest(ctx, ev)
			if err != nil {
				errs = append(errs, fmt.Errorf("ingest: reconcile %s %s: %w", repo, p.SHA, err))
				continue
			}
			if created {
				rep.Taken++
				r.log.InfoContext(ctx, "reconcile: took in a push whose delivery never came", "repo", repo,
					"ref", ev.RefName, "sha", p.SHA, "pushed_at", p.At)
			}
		}
	}
	return rep, errors.Join(errs...)
}

// event is the delivery a reconciliation makes of push p of repo.
func (r *Reconciler) event(repo, defaultBranch string, p vcs.Push) (*Event, error) {
	org, name, ok := cutLast(repo)
	if !ok || p.SHA == "" || (p.Branch == "") == (p.Tag == "") {
		return nil, fmt.Errorf("ingest: reconcile %s: a push names no commit, or not exactly one of a branch and a tag: %+v", repo, p)
	}
	// No EventTime: a push's time is not its head commit's, which
	// webhooks carry and events of a ref are ordered by; a reconciled push
	// takes no part in that ordering.
	ev := &Event{Provider: r.cfg.Provider, HookID: "reconcile", Org: org, Repo: name, SHA: p.SHA, Before: p.Before,
		DefaultBranch: defaultBranch, Actor: p.Actor}
	if p.Tag != "" {
		ev.Kind, ev.RefType, ev.RefName = KindTag, RefTag, p.Tag
	} else {
		ev.Kind, ev.RefType, ev.RefName = KindPush, RefBranch, p.Branch
	}
	// The delivery is the push itself: two pushes never share one.
	ev.DeliveryID = "reconcile:" + SemanticKey(ev)
	return ev, nil
}

// cutLast splits "group/sub/repo" into "group/sub" and "repo".
func cutLast(repo string) (string, string, bool) {
	i := strings.LastIndexByte(repo, '/')
	if i <= 0 || i == len(repo)-1 {
		return "", "", false
	}
	return repo[:i], repo[i+1:], true
}

// Run makes a pass every Interval until ctx ends, then returns nil.
func (r *Reconciler) Run(ctx context.Context) error {
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		if rep, err := r.Reconcile(ctx); err != nil && ctx.Err() == nil {
			r.log.WarnContext(ctx, "reconcile: a pass failed in part", "err", err)
		} else if rep != nil && rep.Taken > 0 {
			r.log.InfoContext(ctx, "reconcile: pass done", "pushes", rep.Pushes, "taken", rep.Taken)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
