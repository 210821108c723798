package lease_test

import (
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/internal/clocktest"
	"github.com/cikit/cikit/internal/pgtest"
	"github.com/cikit/cikit/internal/redistest"
	"github.com/cikit/cikit/lease"
)

const ttl = 30 * time.Second

func newClock() *clocktest.Clock { return clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) }

// stack is a combination of stores a Manager runs on.
type stack struct {
	name  string
	pg    bool
	redis bool
	// split gives the lease store a pool of its own: the Manager cannot
	// write leases in the job store's transactions.
	split bool
}

var stacks = []stack{
	{name: "Postgres+Redis", pg: true, redis: true},
	{name: "Postgres+Redis/split", pg: true, redis: true, split: true},
	{name: "Memory"},
	{name: "Memory+Redis", redis: true},
}

// bundle is one test's Manager and what it runs on.
type bundle struct {
	m     *lease.Manager
	store lease.Store
	jobs  dag.Store
	ns    *redistest.NS // nil without Redis
	clock *clocktest.Clock
	run   *dag.Run
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// setup returns a bundle with a run of specs (default: build -> deploy).
func setup(t testing.TB, st stack, specs ...*cikit.JobSpec) *bundle {
	t.Helper()
	b := &bundle{clock: newClock()}
	if st.pg {
		db := pgtest.New(t)
		js, err := dag.NewPostgresStore(dag.PostgresConfig{Pool: db.Pool, Now: b.clock.Now})
		require.NoError(t, err)
		require.NoError(t, js.Migrate(t.Context()))
		b.jobs, b.store = js, newPostgresStore(t, db)
		if st.split {
			pool, err := pgxpool.New(t.Context(), db.URL)
			require.NoError(t, err)
			t.Cleanup(pool.Close)
			b.store, err = lease.NewPostgresStore(pool)
			require.NoError(t, err)
		}
	} else {
		b.jobs, b.store = dag.NewMemoryStore(dag.MemoryConfig{Now: b.clock.Now}), lease.NewMemoryStore()
	}
	cfg := lease.Config{Store: b.store, Jobs: b.jobs, TTL: ttl, Now: b.clock.Now, Logger: quiet}
	if st.redis {
		b.ns = redistest.New(t)
		cfg.Redis, cfg.KeyPrefix = b.ns.Client, b.ns.Prefix
	}
	m, err := lease.NewManager(cfg)
	require.NoError(t, err)
	require.Equal(t, st.pg && !st.split, lease.Joint(m), "leases in the job store's transactions")
	b.m = m
	if len(specs) == 0 {
		step := []cikit.Step{{Run: "true"}}
		specs = []*cikit.JobSpec{{ID: "build", Steps: step}, {ID: "deploy", Needs: []string{"build"}, Steps: step}}
	}
	b.run, err = b.jobs.RunCreate(t.Context(), &dag.RunCreateParams{Jobs: specs})
	require.NoError(t, err)
	return b
}

func (b *bundle) attempt(job string, n int) lease.Attempt {
	return lease.Attempt{RunID: b.run.ID, JobID: job, Attempt: n}
}

func (b *bundle) queue(t testing.TB, a lease.Attempt) {
	t.Helper()
	_, err := b.jobs.JobQueue(t.Context(), &dag.JobTransitionParams{RunID: a.RunID, JobID: a.JobID, Attempt: a.Attempt})
	require.NoError(t, err)
}

func (b *bundle) claim(t testing.TB, a lease.Attempt, runner string) *lease.Lease {
	t.Helper()
	l, err := b.m.Claim(t.Context(), a, runner)
	require.NoError(t, err)
	return l
}

func (b *bundle) job(t testing.TB, id string) *dag.Job {
	t.Helper()
	j, err := b.jobs.JobGet(t.Context(), b.run.ID, id)
	require.NoError(t, err)
	return j
}

// redisValue returns the Redis hint of job, "" when there is none or no
// Redis.
func (b *bundle) redisValue(t testing.TB, job string) string {
	t.Helper()
	if b.ns == nil {
		return ""
	}
	v, err := b.ns.Client.Get(t.Context(), b.ns.Prefix+b.run.ID+"/"+job).Result()
	if err == redis.Nil {
		return ""
	}
	require.NoError(t, err)
	return v
}

// requireNoLease checks that job has no lease in the store or Redis.
func (b *bundle) requireNoLease(t testing.TB, job string) {
	t.Helper()
	_, err := b.store.LeaseGet(t.Context(), b.run.ID, job)
	require.ErrorIs(t, err, cikit.ErrNotFound)
	require.Empty(t, b.redisValue(t, job))
}

// requireFenced checks that every call of a runner with token for a is
// refused.
func (b *bundle) requireFenced(t testing.TB, a lease.Attempt, token string) {
	t.Helper()
	ctx := t.Context()
	_, err := b.m.Renew(ctx, a, token)
	require.ErrorIs(t, err, lease.ErrFenced, "Renew")
	require.ErrorIs(t, b.m.Check(ctx, a, token), lease.ErrFenced, "Check")
	_, err = b.m.Complete(ctx, a, token, &dag.JobCompleteParams{Outcome: cikit.JobSucceeded})
	require.ErrorIs(t, err, lease.ErrFenced, "Complete")
	_, err = b.m.Return(ctx, a, token, "bye")
	require.ErrorIs(t, err, lease.ErrFenced, "Return")
}

func forStacks(t *testing.T, f func(t *testing.T, st stack)) {
	for _, st := range stacks {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			f(t, st)
		})
	}
}

func TestManagerLifecycle(t *testing.T) {
	t.Parallel()
	forStacks(t, func(t *testing.T, st stack) {
		ctx := t.Context()
		b := setup(t, st)
		a := b.attempt("build", 1)
		b.queue(t, a)
		l := b.claim(t, a, "runner-1")
		require.Equal(t, a, l.Attempt)
		require.Len(t, l.Token, 32)
		require.Equal(t, "runner-1", l.Runner)
		require.True(t, l.Expires.Equal(b.clock.Now().Add(ttl)))
		j := b.job(t, "build")
		require.Equal(t, cikit.JobRunning, j.State)
		require.Equal(t, "runner-1", j.Runner)
		stored, err := b.store.LeaseGet(ctx, b.run.ID, "build")
		require.NoError(t, err)
		require.Equal(t, l, stored)
		if st.redis {
			require.Equal(t, "1:"+l.Token, b.redisValue(t, "build"))
		}

		b.clock.Advance(10 * time.Second)
		r, err := b.m.Renew(ctx, a, l.Token)
		require.NoError(t, err)
		require.Equal(t, &lease.Renewal{Expires: b.clock.Now().Add(ttl)}, r)
		stored, _ = b.store.LeaseGet(ctx, b.run.ID, "build")
		require.True(t, stored.Expires.Equal(r.Expires))
		require.NoError(t, b.m.Check(ctx, a, l.Token))

		res, err := b.m.Complete(ctx, a, l.Token, &dag.JobCompleteParams{Outcome: cikit.JobSucceeded})
		require.NoError(t, err)
		require.Equal(t, cikit.JobSucceeded, res.Changed[0].State)
		require.Equal(t, cikit.JobReady, b.job(t, "deploy").State)
		b.requireNoLease(t, "build")

		b.requireFenced(t, a, l.Token) // a repeated completion too: the lease ended
		require.Equal(t, cikit.JobSucceeded, b.job(t, "build").State)
	})
}

func TestManagerClaimRefused(t *testing.T) {
	t.Parallel()
	forStacks(t, func(t *testing.T, st stack) {
		ctx := t.Context()
		b := setup(t, st)
		build := b.attempt("build", 1)
		_, err := b.m.Claim(ctx, build, "r1")
		require.ErrorIs(t, err, lease.ErrNotClaimed, "a READY job is not claimable")
		require.ErrorIs(t, err, cikit.ErrConflict)
		require.ErrorIs(t, err, cikit.ErrInvalidTransition, "the cause is wrapped")
		b.requireNoLease(t, "build")
		require.Equal(t, cikit.JobReady, b.job(t, "build").State)

		_, err = b.m.Claim(ctx, b.attempt("deploy", 1), "r1")
		require.ErrorIs(t, err, lease.ErrNotClaimed, "a PENDING job is not claimable")
		b.requireNoLease(t, "deploy")

		_, err = b.m.Claim(ctx, b.attempt("nope", 1), "r1")
		require.ErrorIs(t, err, cikit.ErrNotFound)
		b.requireNoLease(t, "nope")
		_, err = b.m.Claim(ctx, lease.Attempt{RunID: b.run.ID, JobID: "build"}, "r1")
		require.ErrorContains(t, err, "attempt numbers start at 1")

		b.queue(t, build)
		_, err = b.m.Claim(ctx, b.attempt("build", 2), "r1")
		require.ErrorIs(t, err, lease.ErrNotClaimed, "the job is QUEUED at attempt 1")
		b.requireNoLease(t, "build")

		l := b.claim(t, build, "r1")
		_, err = b.m.Claim(ctx, build, "r2")
		require.ErrorIs(t, err, lease.ErrNotClaimed, "a held attempt")
		stored, err := b.store.LeaseGet(ctx, b.run.ID, "build")
		require.NoError(t, err)
		require.Equal(t, l.Token, stored.Token, "a refused claim leaves the holder's lease alone")
		if st.redis {
			require.Equal(t, "1:"+l.Token, b.redisValue(t, "build"))
		}
		require.Equal(t, "r1", b.job(t, "build").Runner)
	})
}

func TestManagerConcurrentClaims(t *testing.T) {
	t.Parallel()
	forStacks(t, func(t *testing.T, st stack) {
		b := setup(t, st)
		a := b.attempt("build", 1)
		b.queue(t, a)
		var mu sync.Mutex
		var won []*lease.Lease
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				l, err := b.m.Claim(t.Context(), a, "r")
				if err != nil {
					require.ErrorIs(t, err, lease.ErrNotClaimed)
					return
				}
				mu.Lock()
				won = append(won, l)
				mu.Unlock()
			})
		}
		wg.Wait()
		require.Len(t, won, 1)
		stored, err := b.store.LeaseGet(t.Context(), b.run.ID, "build")
		require.NoError(t, err)
		require.Equal(t, won[0].Token, stored.Token)
	})
}

func TestManagerNonHolder(t *testing.T) {
	t.Parallel()
	forStacks(t, func(t *testing.T, st stack) {
		ctx := t.Context()
		b := setup(t, st)
		a := b.attempt("build", 1)
		b.queue(t, a)
		l := b.claim(t, a, "r1")
		b.requireFenced(t, a, "not-the-token")
		b.requireFenced(t, b.attempt("build", 2), l.Token)
		b.requireFenced(t, b.attempt("deploy", 1), l.Token)
		stored, err := b.store.LeaseGet(ctx, b.run.ID, "build")
		require.NoError(t, err)
		require.Equal(t, l, stored, "a non-holder changes nothing")
		if st.redis {
			require.Equal(t, "1:"+l.Token, b.redisValue(t, "build"), "a non-holder cannot release the hint")
		}
		require.Equal(t, cikit.JobRunning, b.job(t, "build").State)
		require.NoError(t, b.m.Check(ctx, a, l.Token))
	})
}

func TestManagerReturn(t *testing.T) {
	t.Parallel()
	forStacks(t, func(t *testing.T, st stack) {
		ctx := t.Context()
		b := setup(t, st)
		a := b.attempt("build", 1)
		b.queue(t, a)
		l := b.claim(t, a, "r1")
		res, err := b.m.Return(ctx, a, l.Token, "shutting down")
		require.NoError(t, err)
		j := res.Changed[0]
		require.Equal(t, cikit.JobReady, j.State, "an infrastructure failure is retried")
		require.Equal(t, 2, j.Attempt)
		ended, err := b.jobs.JobAttempts(ctx, b.run.ID, "build")
		require.NoError(t, err)
		require.Equal(t, "runner_returned: shutting down", ended[0].Reason)
		b.requireNoLease(t, "build")
		b.requireFenced(t, a, l.Token)

		a2 := b.attempt("build", 2)
		b.queue(t, a2)
		l2 := b.claim(t, a2, "r2")
		b.requireFenced(t, a, l.Token)
		_, err = b.m.Complete(ctx, a2, l2.Token, &dag.JobCompleteParams{Outcome: cikit.JobSucceeded})
		require.NoError(t, err)
	})
}

func TestManagerCancelRequested(t *testing.T) {
	t.Parallel()
	forStacks(t, func(t *testing.T, st stack) {
		ctx := t.Context()
		b := setup(t, st)
		a := b.attempt("build", 1)
		b.queue(t, a)
		l := b.claim(t, a, "r1")
		_, err := b.jobs.RunCancel(ctx, b.run.ID)
		require.NoError(t, err)
		require.Equal(t, cikit.JobCancelRequested, b.job(t, "build").State)
		r, err := b.m.Renew(ctx, a, l.Token)
		require.NoError(t, err)
		require.True(t, r.CancelRequested)
		require.NoError(t, b.m.Check(ctx, a, l.Token))
		res, err := b.m.Return(ctx, a, l.Token, "stopping")
		require.NoError(t, err)
		require.Equal(t, cikit.JobCancelled, res.Changed[0].State, "a job being cancelled that is given back is cancelled")
		b.requireNoLease(t, "build")
	})
}

// TestManagerRedisDown runs a Manager whose Redis cannot be reached: it
// works on the store alone.
func TestManagerRedisDown(t *testing.T) {
	t.Parallel()
	for _, pg := range []bool{false, true} {
		b := setup(t, stack{pg: pg})
		rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond, DialerRetries: 1})
		t.Cleanup(func() { _ = rdb.Close() })
		m, err := lease.NewManager(lease.Config{Store: b.store, Jobs: b.jobs, Redis: rdb, Now: b.clock.Now, Logger: quiet})
		require.NoError(t, err)
		ctx := t.Context()
		a := b.attempt("build", 1)
		b.queue(t, a)
		l, err := m.Claim(ctx, a, "r1")
		require.NoError(t, err)
		_, err = m.Claim(ctx, a, "r2")
		require.ErrorIs(t, err, lease.ErrNotClaimed)
		_, err = m.Renew(ctx, a, l.Token)
		require.NoError(t, err)
		require.NoError(t, m.Check(ctx, a, l.Token))
		require.ErrorIs(t, m.Check(ctx, a, "other"), lease.ErrFenced)
		_, err = m.Complete(ctx, a, l.Token, &dag.JobCompleteParams{Outcome: cikit.JobSucceeded})
		require.NoError(t, err)
		b.requireNoLease(t, "build")
	}
}

func TestNewManagerValidates(t *testing.T) {
	t.Parallel()
	s, js := lease.NewMemoryStore(), dag.NewMemoryStore(dag.MemoryConfig{})
	for _, c := range []struct {
		cfg  lease.Config
		want string
	}{
		{lease.Config{Jobs: js}, "Store is required"},
		{lease.Config{Store: s}, "Jobs is required"},
		{lease.Config{Store: s, Jobs: js, TTL: -time.Second}, "TTL must not be negative"},
		{lease.Config{Store: s, Jobs: js, TTL: time.Microsecond}, "at least 1ms"},
	} {
		_, err := lease.NewManager(c.cfg)
		require.ErrorContains(t, err, c.want)
	}
	m, err := lease.NewManager(lease.Config{Store: s, Jobs: js})
	require.NoError(t, err)
	require.Equal(t, lease.DefaultTTL, m.TTL())
	_, err = lease.NewReaper(lease.ReaperConfig{})
	require.ErrorContains(t, err, "Manager is required")
	_, err = lease.NewReaper(lease.ReaperConfig{Manager: m, BatchSize: -1})
	require.ErrorContains(t, err, "BatchSize must not be negative")
	_, err = lease.NewReaper(lease.ReaperConfig{Manager: m, Grace: lease.MinReaperGrace(m.TTL())})
	require.ErrorContains(t, err, "Grace must be longer than 2.03s (the supervisor's kill margin")
	r, err := lease.NewReaper(lease.ReaperConfig{Manager: m, Grace: lease.MinReaperGrace(m.TTL()) + time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, lease.MinReaperGrace(m.TTL())+time.Millisecond, r.Grace())
	r, err = lease.NewReaper(lease.ReaperConfig{Manager: m})
	require.NoError(t, err)
	require.Equal(t, lease.DefaultReaperGrace, r.Grace())
	// A TTL long enough for the clock drift allowance to matter gets a
	// default grace above the minimum.
	long, err := lease.NewManager(lease.Config{Store: s, Jobs: js, TTL: time.Hour})
	require.NoError(t, err)
	r, err = lease.NewReaper(lease.ReaperConfig{Manager: long})
	require.NoError(t, err)
	require.Greater(t, r.Grace(), lease.MinReaperGrace(time.Hour))
	require.Greater(t, lease.MinReaperGrace(time.Hour), lease.DefaultReaperGrace)
}

func TestFencedError(t *testing.T) {
	t.Parallel()
	err := error(&lease.FencedError{Attempt: lease.Attempt{RunID: "r", JobID: "j", Attempt: 2}, Reason: "the job is succeeded at attempt 2"})
	require.ErrorIs(t, err, lease.ErrFenced)
	require.ErrorIs(t, err, cikit.ErrConflict)
	require.NotErrorIs(t, err, lease.ErrNotClaimed)
	require.Equal(t, `lease of job "j" attempt 2 of run "r" is fenced: the job is succeeded at attempt 2`, err.Error())
	require.ErrorIs(t, lease.ErrNotClaimed, cikit.ErrConflict)
	require.True(t, strings.HasPrefix(lease.ErrFenced.Error(), "lease fenced"))
}
