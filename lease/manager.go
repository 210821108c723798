package lease

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
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
	// Store holds the authoritative lease records. Required. A
	// PostgresStore over the pool of a dag.PostgresStore Jobs is written
	// in the job store's transactions: a claim's lease commits with the
	// job's start and a completion's deletion with the job's end, neither
	// reads the job or the lease first, and a refused claim leaves
	// nothing to undo (see the package documentation).
	Store Store
	// Jobs is the dag store whose jobs are leased: claims start them,
	// completions complete them. Required.
	Jobs dag.Store
	// Redis, when set, holds a copy of every lease as a hint: claims of a
	// held job are refused without touching the Store, and Check and
	// Complete accept a matching token without reading it (a completion
	// still needs the job to be RUNNING at the attempt; on joint stores,
	// see Store, it reads neither). Redis is never
	// trusted to refuse less: a lost, flushed or unreachable Redis slows
	// the Manager down (it falls back to the Store, logging) and never
	// lets a stale attempt through Renew or Complete.
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
	joint    *joint // when Store and Jobs share a PostgreSQL pool
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
		joint:    jointStores(cfg.Jobs, cfg.Store),
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

// Remaining returns how long a lease that ends at expires has left by
// the Manager's clock: what a server tells the runner, so that the
// runner counts on its own monotonic clock and never compares its clock
// with the server's. Measured after the lease was written, it is never
// more than what the lease has left from the moment the runner sent its
// request.
func (m *Manager) Remaining(expires time.Time) time.Duration {
	return max(expires.Sub(m.now()), 0)
}

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

// What acquireRedis did with a lease's hint.
const (
	redisSkipped = iota // no Redis, or it failed: the store decides alone
	redisSet
	redisHeld // another lease holds the job
)

// acquireRedis sets the Redis hints of ls in one pipeline, unless they are
// held, and says what it did with each.
func (m *Manager) acquireRedis(ctx context.Context, ls []*Lease) []int {
	out := make([]int, len(ls))
	if m.rdb == nil || len(ls) == 0 {
		return out
	}
	cmds := make([]*redis.Cmd, len(ls))
	if len(ls) == 1 {
		l := ls[0]
		cmds[0] = acquire.Run(ctx, m.rdb, []string{m.key(l.Attempt)}, redisValue(l.Attempt, l.Token), l.Attempt.Attempt, m.ttl.Milliseconds())
	} else {
		// Eval, not EvalSha: a pipeline cannot fall back on a missing
		// script.
		pipe := m.rdb.Pipeline()
		for n, l := range ls {
			cmds[n] = acquire.Eval(ctx, pipe, []string{m.key(l.Attempt)}, redisValue(l.Attempt, l.Token), l.Attempt.Attempt, m.ttl.Milliseconds())
		}
		_, _ = pipe.Exec(ctx) // each command's error is its own
	}
	for n, c := range cmds {
		v, err := c.Int()
		switch {
		case err != nil:
			m.redisFailed(ctx, "acquire", ls[n].Attempt, err)
		case v == 0:
			out[n] = redisHeld
		default:
			out[n] = redisSet
		}
	}
	return out
}

// releaseRedisMany deletes the Redis hints of ls that still hold them, in
// one pipeline.
func (m *Manager) releaseRedisMany(ctx context.Context, ls []*Lease) {
	if m.rdb == nil || len(ls) == 0 {
		return
	}
	if len(ls) == 1 {
		m.releaseRedis(ctx, ls[0].Attempt, ls[0].Token)
		return
	}
	pipe := m.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(ls))
	for n, l := range ls {
		cmds[n] = release.Eval(ctx, pipe, []string{m.key(l.Attempt)}, redisValue(l.Attempt, l.Token))
	}
	_, _ = pipe.Exec(ctx)
	for n, c := range cmds {
		if err := c.Err(); err != nil {
			m.redisFailed(ctx, "release", ls[n].Attempt, err)
		}
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
	r := m.ClaimMany(ctx, []ClaimRequest{{Attempt: a, Runner: runner}})[0]
	return r.Lease, r.Err
}

// ClaimRequest is one claim of ClaimMany: attempt Attempt for Runner.
type ClaimRequest struct {
	Attempt
	Runner string
}

// ClaimResult answers one ClaimRequest: the lease, or why there is none.
type ClaimResult struct {
	Lease *Lease
	Err   error
}

// ClaimMany makes the claims of reqs at once, each exactly as Claim
// would, and answers each in the same place of the result: a refused or
// failed claim is its own result's Err and leaves the others alone. Of
// several claims of one attempt in reqs, as of concurrent ones, at most
// one succeeds. It reads the jobs once, writes the Redis hints in one
// pipeline, the leases in one Store call and the starts in one
// dag.Store.JobApply, so a batch costs about what one claim does; on
// joint stores (see Config.Store) the Redis pipeline and one transaction.
func (m *Manager) ClaimMany(ctx context.Context, reqs []ClaimRequest) []ClaimResult {
	out := make([]ClaimResult, len(reqs))
	todo := make([]int, 0, len(reqs))
	keys := make([]dag.JobKey, 0, len(reqs))
	for i, r := range reqs {
		if err := r.validate(); err != nil {
			out[i].Err = err
			continue
		}
		todo = append(todo, i)
		keys = append(keys, dag.JobKey{RunID: r.RunID, JobID: r.JobID})
	}
	if len(todo) == 0 {
		return out
	}
	if m.joint != nil {
		m.claimJoint(ctx, reqs, todo, out)
		return out
	}
	// The jobs are read while the Redis hints are set: a hint is set
	// unless one of this attempt or a later one holds the job, so a
	// claim of a later attempt cannot displace the holder's, and a hint
	// set for a claim the job then refuses is released below. The
	// Store's lease, which may replace an earlier attempt's leftover, is
	// only written once the job is known QUEUED at the attempt.
	claims := make([]*Lease, len(todo))
	for n, i := range todo {
		claims[n] = &Lease{Attempt: reqs[i].Attempt, Token: m.newToken(), Runner: reqs[i].Runner, Expires: m.expiry()}
	}
	var (
		jobs    []*dag.Job
		jobsErr error
		wg      sync.WaitGroup
	)
	wg.Go(func() { jobs, jobsErr = m.jobs.JobGetMany(ctx, keys) })
	inRedis := m.acquireRedis(ctx, claims)
	wg.Wait()
	if jobsErr != nil {
		var set []*Lease
		for n, i := range todo {
			out[i].Err = jobsErr
			if inRedis[n] == redisSet {
				set = append(set, claims[n])
			}
		}
		m.releaseRedisMany(ctx, set)
		return out
	}
	// The job's verdict on each claim. A claim the job refuses gives
	// back the hint it set: first, in the rare batch where a claim the
	// job accepts is of the same job (a claim of a later attempt than the
	// job's took the hint before it, or replaced its hint after it), so
	// that the accepted one sets its hint again.
	refusals := make([]error, len(todo))
	var undoRedis []*Lease
	refusedKeys := map[[2]string]bool{}
	for n, i := range todo {
		a, j := reqs[i].Attempt, jobs[n]
		switch {
		case j == nil:
			refusals[n] = fmt.Errorf("lease: cannot claim %s: the run or job does not exist: %w", a, cikit.ErrNotFound)
		case j.Attempt != a.Attempt || j.State != cikit.JobQueued:
			refusals[n] = fmt.Errorf("lease: cannot claim %s: %w: %w", a, ErrNotClaimed, &cikit.TransitionError{Job: a.JobID, Attempt: a.Attempt,
				From: j.State, To: cikit.JobRunning, Reason: fmt.Sprintf("the job is %s at attempt %d", j.State, j.Attempt)})
		default:
			continue
		}
		if inRedis[n] == redisSet {
			undoRedis = append(undoRedis, claims[n])
			refusedKeys[[2]string{a.RunID, a.JobID}] = true
		}
	}
	var again []int
	for n, i := range todo {
		if a := reqs[i].Attempt; refusals[n] == nil && refusedKeys[[2]string{a.RunID, a.JobID}] {
			again = append(again, n)
		}
	}
	if len(again) > 0 {
		m.releaseRedisMany(ctx, undoRedis)
		undoRedis = nil
		retry := make([]*Lease, len(again))
		for x, n := range again {
			retry[x] = claims[n]
		}
		for x, v := range m.acquireRedis(ctx, retry) {
			inRedis[again[x]] = v
		}
	}
	idx := make([]int, 0, len(todo)) // indexes into todo of the claims going on
	seen := make(map[[2]string]bool, len(todo))
	for n, i := range todo {
		a := reqs[i].Attempt
		k := [2]string{a.RunID, a.JobID}
		switch {
		case refusals[n] != nil:
			out[i].Err = refusals[n]
			continue
		case seen[k]:
			out[i].Err = fmt.Errorf("lease: %s is claimed by another request of the same batch: %w", a, ErrNotClaimed)
		case inRedis[n] == redisHeld:
			out[i].Err = fmt.Errorf("lease: %s is held by another runner: %w", a, ErrNotClaimed)
		default:
			seen[k] = true
			idx = append(idx, n)
			continue
		}
		if inRedis[n] == redisSet {
			undoRedis = append(undoRedis, claims[n])
		}
	}
	// undo removes what refused claims did. Only a refusal proves that a
	// write did not happen: after a failed one, the lease stays, to
	// expire and be reaped like any other (the reaper fails the attempt
	// if it did start).
	var undoRows []*Lease
	undo := func(n int, cause error, row bool) error {
		refusal := refused(cause) || errors.Is(cause, cikit.ErrNotFound)
		if !refusal {
			return cause
		}
		if row {
			undoRows = append(undoRows, claims[n])
		}
		if inRedis[n] == redisSet {
			undoRedis = append(undoRedis, claims[n])
		}
		if errors.Is(cause, cikit.ErrNotFound) || errors.Is(cause, ErrNotClaimed) {
			return cause
		}
		return fmt.Errorf("lease: cannot claim %s: %w: %w", claims[n].Attempt, ErrNotClaimed, cause)
	}
	ins := make([]*Lease, len(idx))
	for x, n := range idx {
		ins[x] = claims[n]
	}
	if len(ins) > 0 {
		errs, err := m.store.LeaseInsertMany(ctx, ins)
		var starts []*dag.JobEvent
		var startN []int
		for x, n := range idx {
			i := todo[n]
			switch {
			case err != nil:
				out[i].Err = err
			case errs[x] != nil:
				out[i].Err = undo(n, errs[x], false)
			default:
				l := claims[n]
				starts = append(starts, &dag.JobEvent{Kind: dag.EventStart, RunID: l.RunID, JobID: l.JobID, Attempt: l.Attempt.Attempt, Runner: l.Runner})
				startN = append(startN, n)
			}
		}
		if len(starts) > 0 {
			res, err := m.jobs.JobApply(ctx, starts)
			for x, n := range startN {
				i := todo[n]
				switch {
				case err != nil:
					out[i].Err = err
				case res[x].Err != nil:
					out[i].Err = undo(n, res[x].Err, true)
				default:
					out[i].Lease = claims[n]
				}
			}
		}
	}
	if len(undoRows) > 0 {
		if err := m.store.LeaseDeleteMany(ctx, undoRows); err != nil {
			m.log.WarnContext(ctx, "lease: undoing refused claims failed; the leases will be reaped", "leases", len(undoRows), "err", err)
		}
	}
	m.releaseRedisMany(ctx, undoRedis)
	return out
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
// hint it could not delete (at most the TTL); Renew never does, and
// Complete then finds the attempt no longer RUNNING.
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
		return holdsLease(nil, a, token)
	case err != nil:
		return err
	}
	return holdsLease(l, a, token)
}

// holdsLease returns a *FencedError unless l, the Store's lease of a's
// job (nil for none), is of attempt a and token.
func holdsLease(l *Lease, a Attempt, token string) error {
	switch {
	case l == nil:
		return &FencedError{Attempt: a, Reason: "the job has no lease"}
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
// answer learns how the job ended from the job, not from its token.
// (Only while Redis keeps a hint the first completion failed to delete is
// a repetition that reports the same result answered as applied; it
// changes nothing.)
func (m *Manager) Complete(ctx context.Context, a Attempt, token string, p *dag.JobCompleteParams) (*dag.TransitionResult, error) {
	r := m.CompleteMany(ctx, []CompleteRequest{{Attempt: a, Token: token, Params: p}})[0]
	return r.Result, r.Err
}

// CompleteRequest is one completion of CompleteMany: attempt Attempt,
// whose lease Token holds, ended as Params say (their RunID, JobID and
// Attempt are taken from Attempt).
type CompleteRequest struct {
	Attempt
	Token  string
	Params *dag.JobCompleteParams
}

// CompleteResult answers one CompleteRequest: what the completion
// changed, or why it was refused.
type CompleteResult struct {
	Result *dag.TransitionResult
	Err    error
}

// CompleteMany makes the completions of reqs at once, each exactly as
// Complete would, and answers each in the same place of the result: a
// fenced or failed completion is its own result's Err and leaves the
// others alone. Of several completions of one attempt in reqs, the first
// its token holds completes it and the later ones are fenced, as they
// would be one after the other. It reads the leases once, completes the
// jobs in one dag.Store.JobApply, and deletes the leases in one Store
// call and one Redis pipeline; on joint stores (see Config.Store) one
// transaction, with the Redis pipeline beside it.
func (m *Manager) CompleteMany(ctx context.Context, reqs []CompleteRequest) []CompleteResult {
	out := make([]CompleteResult, len(reqs))
	todo := make([]int, 0, len(reqs))
	keys := make([]dag.JobKey, 0, len(reqs))
	for i, r := range reqs {
		if err := r.validate(); err != nil {
			out[i].Err = err
			continue
		}
		if r.Params == nil {
			out[i].Err = fmt.Errorf("lease: the completion of %s has no Params", r.Attempt)
			continue
		}
		todo = append(todo, i)
		keys = append(keys, dag.JobKey{RunID: r.RunID, JobID: r.JobID})
	}
	if len(todo) == 0 {
		return out
	}
	if m.joint != nil {
		// Every lease is taken to be held, and the transaction checks:
		// it rolls back when one is not, and the leases are read.
		held := make([]*Lease, len(todo))
		for n, i := range todo {
			held[n] = &Lease{Attempt: reqs[i].Attempt, Token: reqs[i].Token}
		}
		if m.completeHeld(ctx, reqs, todo, held, out, true) {
			return out
		}
	}
	held, err := m.heldMany(ctx, reqs, todo, keys)
	if err != nil {
		for _, i := range todo {
			out[i].Err = err
		}
		return out
	}
	m.completeHeld(ctx, reqs, todo, held, out, false)
	return out
}

// completeHeld completes those of reqs[todo] whose tokens hold their
// jobs' leases, held (nil where a job has none), and fills out. With
// verify (joint stores only), held was taken from the requests themselves
// and the transaction verifies it: when a lease was not there, the transaction
// rolls back and completeHeld returns false with out as it was, for the
// caller to read the leases and call again.
func (m *Manager) completeHeld(ctx context.Context, reqs []CompleteRequest, todo []int, held []*Lease, out []CompleteResult, verify bool) bool {
	var evs []*dag.JobEvent
	var idx []int
	seen := make(map[[2]string]bool, len(todo))
	for n, i := range todo {
		a, token := reqs[i].Attempt, reqs[i].Token
		k := [2]string{a.RunID, a.JobID}
		if err := holdsLease(held[n], a, token); err != nil {
			out[i].Err = err
			continue
		}
		if seen[k] {
			out[i].Err = &FencedError{Attempt: a, Reason: "an earlier completion of the same batch ended the lease"}
			continue
		}
		seen[k] = true
		c := *reqs[i].Params
		c.RunID, c.JobID, c.Attempt = a.RunID, a.JobID, a.Attempt
		evs = append(evs, &dag.JobEvent{Kind: dag.EventComplete, RunID: c.RunID, JobID: c.JobID, Attempt: c.Attempt,
			Outcome: c.Outcome, ExitCode: c.ExitCode, Reason: c.Reason, FailureClass: c.FailureClass, Result: c.Result})
		idx = append(idx, i)
	}
	if len(evs) == 0 {
		return true
	}
	var res []*dag.JobEventResult
	var err error
	if m.joint != nil {
		ls := make([]*Lease, len(idx))
		for x, i := range idx {
			ls[x] = &Lease{Attempt: reqs[i].Attempt, Token: reqs[i].Token}
		}
		res, err = m.completeJoint(ctx, evs, ls, verify)
		if verify && notHeld(err) {
			for _, i := range todo {
				out[i].Err = nil
			}
			return false
		}
	} else {
		res, err = m.jobs.JobApply(ctx, evs)
	}
	var ended []*Lease
	for x, i := range idx {
		switch {
		case err != nil:
			out[i].Err = err
		case errors.Is(res[x].Err, cikit.ErrInvalidTransition):
			out[i].Err = &FencedError{Attempt: reqs[i].Attempt, Reason: res[x].Err.Error()}
		case res[x].Err != nil:
			out[i].Err = res[x].Err
		default:
			out[i].Result = res[x].TransitionResult
			ended = append(ended, &Lease{Attempt: reqs[i].Attempt, Token: reqs[i].Token})
		}
	}
	if m.joint == nil {
		m.endMany(ctx, ended)
	}
	return true
}

// heldMany returns the leases of the jobs of reqs[todo] (keys): the
// request's own where its Redis hint matches, which authenticates the
// token, and the Store's for the others (nil where a job has none).
// Whether the attempt may still complete is the job store's to decide:
// its transitions are conditional on the attempt.
func (m *Manager) heldMany(ctx context.Context, reqs []CompleteRequest, todo []int, keys []dag.JobKey) ([]*Lease, error) {
	held := make([]*Lease, len(todo))
	ask := make([]int, 0, len(todo)) // indexes into todo left to the Store
	if m.rdb != nil {
		pipe := m.rdb.Pipeline()
		cmds := make([]*redis.StringCmd, len(todo))
		for n, i := range todo {
			cmds[n] = pipe.Get(ctx, m.key(reqs[i].Attempt))
		}
		_, _ = pipe.Exec(ctx) // each command's error is its own
		for n, i := range todo {
			v, err := cmds[n].Result()
			switch {
			case err == nil && v == redisValue(reqs[i].Attempt, reqs[i].Token):
				held[n] = &Lease{Attempt: reqs[i].Attempt, Token: reqs[i].Token}
				continue
			case err != nil && !errors.Is(err, redis.Nil):
				m.redisFailed(ctx, "check", reqs[i].Attempt, err)
			}
			ask = append(ask, n)
		}
	} else {
		for n := range todo {
			ask = append(ask, n)
		}
	}
	if len(ask) == 0 {
		return held, nil
	}
	askKeys := make([]dag.JobKey, len(ask))
	for k, n := range ask {
		askKeys[k] = keys[n]
	}
	got, err := m.store.LeaseGetMany(ctx, askKeys)
	if err != nil {
		return nil, err
	}
	for k, n := range ask {
		held[n] = got[k]
	}
	return held, nil
}

// endMany deletes the leases of ended attempts; a failure leaves stale
// leases the reaper deletes.
func (m *Manager) endMany(ctx context.Context, ls []*Lease) {
	if len(ls) == 0 {
		return
	}
	// Both only delete, so they need no order: at once, to answer
	// sooner.
	var wg sync.WaitGroup
	if m.rdb != nil {
		wg.Go(func() { m.releaseRedisMany(ctx, ls) })
	}
	if err := m.store.LeaseDeleteMany(ctx, ls); err != nil {
		m.log.WarnContext(ctx, "lease: deleting ended leases failed; the reaper will", "leases", len(ls), "err", err)
	}
	wg.Wait()
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
