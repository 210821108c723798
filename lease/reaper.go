package lease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

// Defaults of ReaperConfig.
const (
	DefaultReapBatchSize = 100
	// MaxReapInterval bounds the default interval, TTL/3.
	MaxReapInterval = 5 * time.Second
	// DefaultReaperGrace is the default ReaperConfig.Grace, unless the
	// TTL asks for more (see MinReaperGrace).
	DefaultReaperGrace = 5 * time.Second
)

// The margins of the at-most-one-executing-attempt guarantee (see
// docs/runner-protocol.md, "At most one executing attempt"). A runner
// measures its monotonic clock just before each heartbeat it sends and
// tells the job's supervisor, a process of its own beside the job, to
// let the job run for the lease's remaining time counted from then; the
// supervisor kills the job's whole process tree when that time passes
// without a new confirmation. So the supervisor's deadline is never
// after the lease's expiry on the server, except by the errors these
// constants bound, and the reaper waits ReaperConfig.Grace past the
// expiry, more than they add up to, before another attempt may start.
const (
	// SupervisorKillMargin bounds the time from a supervisor's deadline
	// to the job's processes being gone: the renewal's way from the
	// runner to the supervisor (a local socket), the supervisor's timer
	// firing late on a loaded machine, its SIGKILL of every process of
	// the job and the kernel's tearing them down. A process blocked in
	// an uninterruptible wait (a hung NFS mount) can take longer; that is
	// outside the guarantee.
	SupervisorKillMargin = 2 * time.Second
	// MaxClockRateDrift bounds how much faster or slower the runner's
	// monotonic clock may run than the server's clock, as a fraction:
	// 0.1%, twice the 500 ppm NTP allows a clock to be slewed by. It
	// applies to the lease's remaining time, so the allowance grows with
	// the TTL.
	MaxClockRateDrift = 0.001
)

// MinReaperGrace returns the smallest ReaperConfig.Grace that keeps the
// guarantee for leases of ttl: SupervisorKillMargin plus the drift
// MaxClockRateDrift allows over a ttl. A Grace must be larger.
func MinReaperGrace(ttl time.Duration) time.Duration {
	return SupervisorKillMargin + time.Duration(float64(ttl)*MaxClockRateDrift)
}

// ReaperConfig configures a Reaper.
type ReaperConfig struct {
	// Manager is whose leases are reaped: its Store, dag store, Redis,
	// clock and TTL. Required.
	Manager *Manager
	// Interval is the time between passes of Run. Default: the Manager's
	// TTL/3, at most MaxReapInterval.
	Interval time.Duration
	// Grace is how long past its expiry a lease is left before it is
	// reaped and its job may get another attempt: long enough for the
	// job's supervisor to have killed the attempt's processes, whatever
	// became of its runner. It must be larger than MinReaperGrace of the
	// Manager's TTL. It assumes that the servers' clocks (whose
	// readings record expiries and decide reaping) agree to within
	// Grace - MinReaperGrace(TTL). Default: DefaultReaperGrace or, for a
	// TTL long enough to need more, MinReaperGrace(TTL) plus a second.
	Grace time.Duration
	// BatchSize is how many expired leases a pass reads at once.
	// Default: DefaultReapBatchSize.
	BatchSize int
	// MaxQueueTime, when positive, makes each pass also fail the jobs
	// that waited READY or QUEUED longer (dag.Store.JobsExpire, whose
	// reasons start with dag.ReasonQueueTimeout). 0: no limit.
	MaxQueueTime time.Duration
	// Logger receives what a pass did and what failed. Default: the
	// Manager's.
	Logger *slog.Logger
	// OnTransition, when set, is given every transition a pass applied:
	// an attempt ended (which may have made a new attempt READY, or jobs
	// that need it READY or SKIPPED), a job failed for its queue time, or
	// a delayed job made READY.
	// A dispatcher passes them on, so that what became READY is queued.
	// It is called from the pass's goroutine.
	OnTransition func(*dag.TransitionResult)
}

// Reaper ends the attempts whose runners stopped renewing their leases.
// Every action it takes is conditional (the dag transition on the
// attempt, the lease deletion on the token), so any number of Reapers may
// run at once, and a runner that completes while its lease is reaped
// either completes or is fenced, never both.
type Reaper struct {
	m        *Manager
	interval time.Duration
	grace    time.Duration
	batch    int
	maxQueue time.Duration
	log      *slog.Logger
	notify   func(*dag.TransitionResult)
}

// NewReaper returns a Reaper of cfg.
func NewReaper(cfg ReaperConfig) (*Reaper, error) {
	switch {
	case cfg.Manager == nil:
		return nil, errors.New("lease: ReaperConfig.Manager is required")
	case cfg.Interval < 0:
		return nil, fmt.Errorf("lease: ReaperConfig.Interval must not be negative, got %s", cfg.Interval)
	case cfg.BatchSize < 0:
		return nil, fmt.Errorf("lease: ReaperConfig.BatchSize must not be negative, got %d", cfg.BatchSize)
	case cfg.Grace != 0 && cfg.Grace <= MinReaperGrace(cfg.Manager.ttl):
		return nil, fmt.Errorf("lease: ReaperConfig.Grace must be longer than %s (the supervisor's kill margin, SupervisorKillMargin, plus clock drift over the TTL %s), got %s: "+
			"a shorter one lets the next attempt start before the job's supervisor has certainly killed the last", MinReaperGrace(cfg.Manager.ttl), cfg.Manager.ttl, cfg.Grace)
	case cfg.MaxQueueTime < 0:
		return nil, fmt.Errorf("lease: ReaperConfig.MaxQueueTime must not be negative, got %s", cfg.MaxQueueTime)
	}
	r := &Reaper{
		m:        cfg.Manager,
		interval: cmp.Or(cfg.Interval, min(cfg.Manager.ttl/3, MaxReapInterval)),
		grace:    cmp.Or(cfg.Grace, DefaultGrace(cfg.Manager.ttl)),
		batch:    cmp.Or(cfg.BatchSize, DefaultReapBatchSize),
		maxQueue: cfg.MaxQueueTime,
		log:      cmp.Or(cfg.Logger, cfg.Manager.log),
		notify:   cfg.OnTransition,
	}
	if r.notify == nil {
		r.notify = func(*dag.TransitionResult) {}
	}
	return r, nil
}

// DefaultGrace returns the ReaperConfig.Grace used for leases of ttl when
// none is set.
func DefaultGrace(ttl time.Duration) time.Duration {
	return max(DefaultReaperGrace, MinReaperGrace(ttl)+time.Second)
}

// Grace returns how long past its expiry a lease is left before it is
// reaped.
func (r *Reaper) Grace() time.Duration { return r.grace }

// ReapReport counts what a pass did.
type ReapReport struct {
	Cancelled int // attempts whose cancellation was requested, now CANCELLED
	Retried   int // attempts failed as runner_lost whose jobs got a new attempt
	Failed    int // attempts failed as runner_lost for good
	// StaleDeleted counts expired leases of attempts that had ended
	// otherwise (completed, timed out, superseded), now deleted.
	StaleDeleted int
	// QueueTimeouts counts jobs failed for waiting past MaxQueueTime;
	// Timeouts RUNNING jobs past their spec's timeout, which the same
	// dag.Store.JobsExpire call fails.
	QueueTimeouts int
	Timeouts      int
	// Released counts delayed jobs whose start_in had passed, made READY
	// (dag.Store.JobsRelease).
	Released int
	// Errors counts leases the pass could not handle; they are logged
	// and tried again by the next pass.
	Errors int
}

// Run reaps at once and then every Interval until ctx ends; a failed pass
// is logged and the next one tries again. It returns nil when ctx ends.
func (r *Reaper) Run(ctx context.Context) error {
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		if rep, err := r.Reap(ctx); err != nil && ctx.Err() == nil {
			r.log.WarnContext(ctx, "lease: reaping failed", "err", err)
		} else if rep != nil && *rep != (ReapReport{}) {
			r.log.InfoContext(ctx, "lease: reaped", "cancelled", rep.Cancelled, "retried", rep.Retried, "failed", rep.Failed,
				"stale", rep.StaleDeleted, "queue_timeouts", rep.QueueTimeouts, "timeouts", rep.Timeouts, "released", rep.Released, "errors", rep.Errors)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Reap makes one full pass at the Manager's current time: every lease
// expired for longer than Grace by then, in batches, then the queue
// timeouts. A lease that
// cannot be handled is logged, counted in Errors and left for the next
// pass; the error return is for the pass itself failing (the store could
// not list leases, JobsExpire failed), with the report of what was done.
func (r *Reaper) Reap(ctx context.Context) (*ReapReport, error) {
	now := r.m.now()
	cutoff := now.Add(-r.grace)
	rep := &ReapReport{}
	failed := map[string]bool{} // leases this pass could not handle
	for {
		batch, err := r.m.store.LeaseExpired(ctx, cutoff, r.batch)
		if err != nil {
			return rep, err
		}
		progress := false
		for _, l := range batch {
			if failed[l.Token] {
				continue
			}
			progress = true
			if err := r.reap(ctx, cutoff, l, rep); err != nil {
				if ctx.Err() != nil {
					return rep, ctx.Err()
				}
				failed[l.Token] = true
				rep.Errors++
				r.log.WarnContext(ctx, "lease: reaping a lease failed", "run", l.RunID, "job", l.JobID, "attempt", l.Attempt.Attempt, "err", err)
			}
		}
		// A short batch was the last; a full one of leases that failed
		// would come back as it is.
		if len(batch) < r.batch || !progress {
			break
		}
	}
	// Delayed jobs are due on the same clock as leases: each pass makes
	// READY those whose start_in has passed, for the dispatcher to offer.
	released, err := r.m.jobs.JobsRelease(ctx, now)
	for _, tr := range released {
		r.notify(tr)
		rep.Released++
	}
	if err != nil {
		return rep, err
	}
	if r.maxQueue > 0 {
		res, err := r.m.jobs.JobsExpire(ctx, &dag.ExpireParams{Now: now, MaxQueueTime: r.maxQueue})
		for _, tr := range res {
			r.notify(tr)
			if len(tr.Changed) > 0 && strings.Contains(tr.Changed[0].Reason, dag.ReasonQueueTimeout) {
				rep.QueueTimeouts++
			} else {
				rep.Timeouts++
			}
		}
		if err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// reap ends the attempt of one lease expired before cutoff, as the job's
// state says, then deletes the lease.
func (r *Reaper) reap(ctx context.Context, cutoff time.Time, l *Lease, rep *ReapReport) error {
	// The holder may have renewed since the batch was read: look again.
	cur, err := r.m.store.LeaseGet(ctx, l.RunID, l.JobID)
	switch {
	case errors.Is(err, cikit.ErrNotFound):
		return nil // another reaper, or the holder, ended it
	case err != nil:
		return err
	case cur.Attempt != l.Attempt || cur.Token != l.Token || cur.Expires.After(cutoff):
		return nil
	}
	outcome, err := r.end(ctx, l)
	if err != nil {
		return err
	}
	switch outcome {
	case cikit.JobCancelled:
		rep.Cancelled++
	case cikit.JobFailed:
		rep.Failed++
	case cikit.JobReady, cikit.JobPending:
		rep.Retried++
	default:
		rep.StaleDeleted++
	}
	if err := r.m.store.LeaseDelete(ctx, l.Attempt, l.Token); err != nil {
		return err
	}
	r.m.releaseRedis(ctx, l.Attempt, l.Token)
	return nil
}

// end ends the attempt of an expired lease if it still runs, and returns
// the state the job was left in, or "" if the lease was stale.
func (r *Reaper) end(ctx context.Context, l *Lease) (cikit.JobState, error) {
	j, err := r.m.jobs.JobGet(ctx, l.RunID, l.JobID)
	if errors.Is(err, cikit.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if j.Attempt != l.Attempt.Attempt || (j.State != cikit.JobRunning && j.State != cikit.JobCancelRequested) {
		return "", nil
	}
	p := &dag.JobCompleteParams{RunID: l.RunID, JobID: l.JobID, Attempt: l.Attempt.Attempt, ExitCode: -1}
	if j.State == cikit.JobCancelRequested {
		p.Outcome, p.Reason = cikit.JobCancelled, ReasonRunnerLost+fmt.Sprintf("runner %q stopped renewing its lease while the job was being cancelled", l.Runner)
	} else {
		p.Outcome, p.FailureClass = cikit.JobFailed, cikit.FailureInfrastructure
		p.Reason = ReasonRunnerLost + fmt.Sprintf("runner %q stopped renewing its lease (expired %s)", l.Runner, l.Expires.Format(time.RFC3339))
	}
	res, err := r.m.jobs.JobComplete(ctx, p)
	if errors.Is(err, cikit.ErrInvalidTransition) {
		return "", nil // the attempt ended meanwhile: the lease is stale
	}
	if err != nil {
		return "", err
	}
	r.notify(res)
	for _, c := range res.Changed {
		if c.ID() == l.JobID && c.RunID == l.RunID {
			return c.State, nil
		}
	}
	return "", nil // a repeat: another reaper ended it
}
