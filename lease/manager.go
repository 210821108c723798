package lease

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

// Defaults of Config.
const (
	DefaultTTL       = 30 * time.Second
	DefaultKeyPrefix = "job:lease:"
)

// Reason prefixes of the failures the package reports to dag, so that
// people and programs can tell why an attempt ended.
const (
	ReasonRunnerLost     = "runner_lost: "     // the reaper ended an attempt whose lease expired
	ReasonRunnerReturned = "runner_returned: " // the runner gave the job back (Manager.Return)
)

// Config configures a Manager.
type Config struct {
	// Store holds the authoritative lease records. Required.
	Store Store
	// Jobs is the dag store whose jobs are leased: claims start them,
	// completions complete them. Required.
	Jobs dag.Store
	// Redis, when set, holds a copy of every lease as a hint: claims of a
	// held job are refused without touching the Store, and Check accepts
	// a matching token without it. Redis is never trusted to refuse less:
	// a lost, flushed or unreachable Redis slows the Manager down (it
	// falls back to the Store, logging) and never lets a stale attempt
	// through Renew or Complete.
	Redis redis.UniversalClient
	// KeyPrefix starts the Redis key of each lease: KeyPrefix + runID +
	// "/" + jobID. Default: DefaultKeyPrefix.
	KeyPrefix string
	// TTL is how long a lease lasts without a heartbeat. Runners renew
	// well within it (a third is usual). Default: DefaultTTL.
	TTL time.Duration
	// Now returns the current time. Default: time.Now.
	Now func() time.Time
	// Logger receives the Redis failures the Manager works around.
	// Default: slog.Default().
	Logger *slog.Logger
	// NewToken returns a new, unguessable lease token. Default: 128
	// random bits from crypto/rand, in hex.
	NewToken func() string
}

// Manager grants, renews, checks and ends leases. It keeps no state of
// its own: any number of Managers may share a Store, a dag.Store and a
// Redis.
type Manager struct {
	store    Store
	jobs     dag.Store
	rdb      redis.UniversalClient
	prefix   string
	ttl      time.Duration
	now      func() time.Time
	log      *slog.Logger
	newToken func() string
}

// NewManager returns a Manager of cfg.
func NewManager(cfg Config) (*Manager, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("lease: Config.Store is required")
	case cfg.Jobs == nil:
		return nil, errors.New("lease: Config.Jobs is required")
	case cfg.TTL < 0:
		return nil, fmt.Errorf("lease: Config.TTL must not be negative, got %s", cfg.TTL)
	case cfg.TTL > 0 && cfg.TTL < time.Millisecond:
		return nil, fmt.Errorf("lease: Config.TTL must be at least 1ms (Redis expires in milliseconds), got %s", cfg.TTL)
	}
	m := &Manager{
		store:    cfg.Store,
		jobs:     cfg.Jobs,
		rdb:      cfg.Redis,
		prefix:   cmp.Or(cfg.KeyPrefix, DefaultKeyPrefix),
		ttl:      cmp.Or(cfg.TTL, DefaultTTL),
		now:      cfg.Now,
		log:      cmp.Or(cfg.Logger, slog.Default()),
		newToken: cfg.NewToken,
	}
	if m.now == nil {
		m.now = time.Now
	}
	if m.newToken == nil {
		m.newToken = randomToken
	}
	return m, nil
}

func randomToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error
	return hex.EncodeToString(b[:])
}

// TTL returns how long a lease lasts without a heartbeat.
func (m *Manager) TTL() time.Duration { return m.ttl }

func (m *Manager) key(a Attempt) string { return m.prefix + a.RunID + "/" + a.JobID }

// expiry is when a lease granted or renewed now ends, to the microsecond
// the stores keep.
func (m *Manager) expiry() time.Time { return m.now().Add(m.ttl).Truncate(time.Microsecond) }

// redisFailed logs a Redis failure the Manager works around.
func (m *Manager) redisFailed(ctx context.Context, op string, a Attempt, err error) {
	m.log.WarnContext(ctx, "lease: redis failed; the store decides alone", "op", op, "run", a.RunID, "job", a.JobID, "attempt", a.Attempt, "err", err)
}

// releaseRedis deletes the Redis hint of a lease if it still holds it.
func (m *Manager) releaseRedis(ctx context.Context, a Attempt, token string) {
	if m.rdb == nil {
		return
	}
	if err := release.Run(ctx, m.rdb, []string{m.key(a)}, redisValue(a, token)).Err(); err != nil {
		m.redisFailed(ctx, "release", a, err)
	}
}

// refused reports whether err is a store refusing a conditional write, as
// opposed to the store failing.
func refused(err error) bool {
	return errors.Is(err, cikit.ErrConflict) || errors.Is(err, cikit.ErrInvalidTransition)
}

// Claim leases attempt a of a QUEUED job to runner and starts it: the job
// is RUNNING at that attempt when Claim returns. Exactly one of any
// number of concurrent claims of an attempt succeeds; the others return
// an error matching ErrNotClaimed (which wraps why), and so does a claim
// of a job that is not QUEUED at attempt a. A refused claim leaves
// nothing behind. An unknown run or job returns cikit.ErrNotFound, and a
// store failure its error; then a lease may have been recorded, which
// expires and is reaped like any other.
func (m *Manager) Claim(ctx context.Context, a Attempt, runner string) (*Lease, error) {
	if err := a.validate(); err != nil {
		return nil, err
	}
	// The job first: only once it is QUEUED at attempt a are the leases
	// of earlier attempts leftovers that the claim may replace. Without
	// this, a claim of a later attempt would displace the holder's.
	j, err := m.jobs.JobGet(ctx, a.RunID, a.JobID)
	if err != nil {
		return nil, err
	}
	if j.Attempt != a.Attempt || j.State != cikit.JobQueued {
		return nil, fmt.Errorf("lease: cannot claim %s: %w: %w", a, ErrNotClaimed, &cikit.TransitionError{Job: a.JobID, Attempt: a.Attempt,
			From: j.State, To: cikit.JobRunning, Reason: fmt.Sprintf("the job is %s at attempt %d", j.State, j.Attempt)})
	}
	l := &Lease{Attempt: a, Token: m.newToken(), Runner: runner, Expires: m.expiry()}
	val := redisValue(a, l.Token)
	inRedis := false
	if m.rdb != nil {
		n, err := acquire.Run(ctx, m.rdb, []string{m.key(a)}, val, a.Attempt, m.ttl.Milliseconds()).Int()
		switch {
		case err != nil:
			m.redisFailed(ctx, "acquire", a, err)
		case n == 0:
			return nil, fmt.Errorf("lease: %s is held by another runner: %w", a, ErrNotClaimed)
		default:
			inRedis = true
		}
	}
	// undo removes what a refused claim did. Only a refusal proves that
	// a write did not happen: after a failed one, the lease stays, to
	// expire and be reaped like any other (the reaper fails the attempt
	// if it did start).
	undo := func(cause error, row bool) error {
		refusal := refused(cause) || errors.Is(cause, cikit.ErrNotFound)
		if !refusal {
			return cause
		}
		if row {
			if err := m.store.LeaseDelete(ctx, a, l.Token); err != nil {
				m.log.WarnContext(ctx, "lease: undoing a refused claim failed; the lease will be reaped", "run", a.RunID, "job", a.JobID, "attempt", a.Attempt, "err", err)
			}
		}
		if inRedis {
			m.releaseRedis(ctx, a, l.Token)
		}
		if errors.Is(cause, cikit.ErrNotFound) {
			return cause
		}
		if errors.Is(cause, ErrNotClaimed) {
			return cause
		}
		return fmt.Errorf("lease: cannot claim %s: %w: %w", a, ErrNotClaimed, cause)
	}
	if err := m.store.LeaseInsert(ctx, l); err != nil {
		return nil, undo(err, false)
	}
	if _, err := m.jobs.JobStart(ctx, &dag.JobTransitionParams{RunID: a.RunID, JobID: a.JobID, Attempt: a.Attempt, Runner: runner}); err != nil {
		return nil, undo(err, true)
	}
	return l, nil
}

// current returns the job of attempt a, or a *FencedError if a is not its
// current attempt or it no longer runs.
func (m *Manager) current(ctx context.Context, a Attempt) (*dag.Job, error) {
	j, err := m.jobs.JobGet(ctx, a.RunID, a.JobID)
	if err != nil {
		if errors.Is(err, cikit.ErrNotFound) {
			return nil, &FencedError{Attempt: a, Reason: "the job does not exist"}
		}
		return nil, err
	}
	if j.Attempt != a.Attempt || (j.State != cikit.JobRunning && j.State != cikit.JobCancelRequested) {
		return nil, &FencedError{Attempt: a, Reason: fmt.Sprintf("the job is %s at attempt %d", j.State, j.Attempt)}
	}
	return j, nil
}

// Renewal is the answer to a heartbeat.
type Renewal struct {
	// Expires is the new end of the lease.
	Expires time.Time
	// CancelRequested says that the run was cancelled: the runner should
	// stop the job and Complete it as cikit.JobCancelled.
	CancelRequested bool
}

// Renew extends the lease of attempt a held by token by the TTL: a
// runner's heartbeat. It returns a *FencedError (ErrFenced) when the
// token does not hold the job's lease or the job no longer runs at that
// attempt; the runner must then stop. Redis, when set, is updated after
// the Store, and put back if it lost the lease.
func (m *Manager) Renew(ctx context.Context, a Attempt, token string) (*Renewal, error) {
	j, err := m.current(ctx, a)
	if err != nil {
		return nil, err
	}
	expires := m.expiry()
	if err := m.store.LeaseRenew(ctx, a, token, expires); err != nil {
		return nil, err
	}
	if m.rdb != nil {
		n, err := extend.Run(ctx, m.rdb, []string{m.key(a)}, redisValue(a, token), m.ttl.Milliseconds()).Int()
		switch {
		case err != nil:
			m.redisFailed(ctx, "extend", a, err)
		case n == 0:
			m.log.WarnContext(ctx, "lease: redis holds another lease than the store; the store decides", "run", a.RunID, "job", a.JobID, "attempt", a.Attempt)
		}
	}
	return &Renewal{Expires: expires, CancelRequested: j.State == cikit.JobCancelRequested}, nil
}

// Check returns nil if token holds the lease of attempt a, and a
// *FencedError (ErrFenced) if not: the guard of a runner's log chunks and
// artifact uploads. A Redis hint that matches is accepted at once;
// anything else is decided by the Store and the job's state. So after an
// attempt ends, Check may accept its token for as long as Redis keeps a
// hint it could not delete (at most the TTL); Renew and Complete never
// do.
func (m *Manager) Check(ctx context.Context, a Attempt, token string) error {
	if m.rdb != nil {
		v, err := m.rdb.Get(ctx, m.key(a)).Result()
		switch {
		case err == nil && v == redisValue(a, token):
			return nil
		case err != nil && !errors.Is(err, redis.Nil):
			m.redisFailed(ctx, "check", a, err)
		}
	}
	if err := m.holds(ctx, a, token); err != nil {
		return err
	}
	_, err := m.current(ctx, a)
	return err
}

// holds returns a *FencedError unless the Store's lease of a's job is of
// attempt a and token.
func (m *Manager) holds(ctx context.Context, a Attempt, token string) error {
	l, err := m.store.LeaseGet(ctx, a.RunID, a.JobID)
	switch {
	case errors.Is(err, cikit.ErrNotFound):
		return &FencedError{Attempt: a, Reason: "the job has no lease"}
	case err != nil:
		return err
	case l.Attempt != a || l.Token != token:
		return &FencedError{Attempt: a, Reason: fmt.Sprintf("the job's lease is of attempt %d and another token", l.Attempt.Attempt)}
	}
	return nil
}

// Complete reports how attempt a ended and ends its lease. p's RunID,
// JobID and Attempt are taken from a. The dag transition is conditional
// on the attempt, so of two attempts at most one completes, and a stale
// one gets a *FencedError (ErrFenced). The lease ends with the first
// completion, so a repeated one is fenced too: a runner that lost the
// answer learns how the job ended from the job, not from its token,
// which is never accepted again.
func (m *Manager) Complete(ctx context.Context, a Attempt, token string, p *dag.JobCompleteParams) (*dag.TransitionResult, error) {
	if err := a.validate(); err != nil {
		return nil, err
	}
	if err := m.holds(ctx, a, token); err != nil {
		return nil, err
	}
	c := *p
	c.RunID, c.JobID, c.Attempt = a.RunID, a.JobID, a.Attempt
	res, err := m.jobs.JobComplete(ctx, &c)
	if err != nil {
		if errors.Is(err, cikit.ErrInvalidTransition) {
			return nil, &FencedError{Attempt: a, Reason: err.Error()}
		}
		return nil, err
	}
	m.end(ctx, a, token)
	return res, nil
}

// end deletes the lease of an ended attempt; a failure leaves a stale
// lease the reaper deletes.
func (m *Manager) end(ctx context.Context, a Attempt, token string) {
	if err := m.store.LeaseDelete(ctx, a, token); err != nil {
		m.log.WarnContext(ctx, "lease: deleting an ended lease failed; the reaper will", "run", a.RunID, "job", a.JobID, "attempt", a.Attempt, "err", err)
	}
	m.releaseRedis(ctx, a, token)
}

// Return gives attempt a back: its runner is shutting down without having
// run it to the end. The attempt ends as a failure of class
// cikit.FailureInfrastructure (reason "runner_returned: " + reason), so
// dag's retry policy (dag.RetryOnFailure) makes a new attempt READY again,
// or fails the job when its retries are used up. A job whose cancellation
// was requested ends CANCELLED instead. Like Complete, a stale attempt
// gets a *FencedError.
func (m *Manager) Return(ctx context.Context, a Attempt, token string, reason string) (*dag.TransitionResult, error) {
	j, err := m.current(ctx, a)
	if err != nil {
		return nil, err
	}
	p := &dag.JobCompleteParams{Outcome: cikit.JobFailed, ExitCode: -1, FailureClass: cikit.FailureInfrastructure,
		Reason: ReasonRunnerReturned + cmp.Or(reason, "the runner gave the job back")}
	if j.State == cikit.JobCancelRequested {
		p.Outcome, p.FailureClass = cikit.JobCancelled, ""
	}
	return m.Complete(ctx, a, token, p)
}
