package lease_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/lease"
)

// four returns the specs of four independent jobs a, b, c, d and a job
// "after" that needs a.
func four() []*cikit.JobSpec {
	step := []cikit.Step{{Run: "true"}}
	return []*cikit.JobSpec{{ID: "a", Steps: step}, {ID: "b", Steps: step}, {ID: "c", Steps: step}, {ID: "d", Steps: step},
		{ID: "after", Needs: []string{"a"}, Steps: step}}
}

func TestManagerClaimMany(t *testing.T) {
	t.Parallel()
	forStacks(t, func(t *testing.T, st stack) {
		ctx := t.Context()
		b := setup(t, st, four()...)
		for _, j := range []string{"a", "b", "c"} {
			b.queue(t, b.attempt(j, 1))
		}
		res := b.m.ClaimMany(ctx, []lease.ClaimRequest{
			{Attempt: b.attempt("a", 1), Runner: "r0"},    // claimable
			{Attempt: b.attempt("b", 2), Runner: "r1"},    // QUEUED at attempt 1
			{Attempt: b.attempt("d", 1), Runner: "r2"},    // READY
			{Attempt: b.attempt("nope", 1), Runner: "r3"}, // unknown
			{Attempt: b.attempt("c", 1), Runner: "r4"},    // claimable
			{Attempt: b.attempt("a", 1), Runner: "r5"},    // the same attempt again
			{Attempt: b.attempt("a", 0), Runner: "r6"},    // invalid
		})
		require.Len(t, res, 7)
		for _, i := range []int{0, 4} {
			require.NoError(t, res[i].Err, "claim %d", i)
			l := res[i].Lease
			require.Equal(t, fmt.Sprint("r", i), l.Runner)
			require.True(t, l.Expires.Equal(b.clock.Now().Add(ttl)))
			stored, err := b.store.LeaseGet(ctx, b.run.ID, l.JobID)
			require.NoError(t, err)
			require.Equal(t, l, stored)
			if st.redis {
				require.Equal(t, "1:"+l.Token, b.redisValue(t, l.JobID))
			}
			j := b.job(t, l.JobID)
			require.Equal(t, cikit.JobRunning, j.State)
			require.Equal(t, l.Runner, j.Runner)
		}
		require.NotEqual(t, res[0].Lease.Token, res[4].Lease.Token)
		for _, i := range []int{1, 2, 5} {
			require.Nil(t, res[i].Lease, "claim %d", i)
			require.ErrorIs(t, res[i].Err, lease.ErrNotClaimed, "claim %d", i)
		}
		require.ErrorIs(t, res[1].Err, cikit.ErrInvalidTransition, "the cause is wrapped")
		require.ErrorIs(t, res[3].Err, cikit.ErrNotFound)
		require.ErrorContains(t, res[6].Err, "attempt numbers start at 1")
		b.requireNoLease(t, "b")
		b.requireNoLease(t, "d")
		b.requireNoLease(t, "nope")
		require.Equal(t, cikit.JobQueued, b.job(t, "b").State)
		require.Equal(t, cikit.JobReady, b.job(t, "d").State)
		require.Equal(t, "r0", b.job(t, "a").Runner, "the first claim of an attempt in a batch wins")

		require.Empty(t, b.m.ClaimMany(ctx, nil))
		again := b.m.ClaimMany(ctx, []lease.ClaimRequest{{Attempt: b.attempt("a", 1), Runner: "r7"}, {Attempt: b.attempt("b", 1), Runner: "r8"}})
		require.ErrorIs(t, again[0].Err, lease.ErrNotClaimed, "a held attempt")
		require.NoError(t, again[1].Err)
		stored, err := b.store.LeaseGet(ctx, b.run.ID, "a")
		require.NoError(t, err)
		require.Equal(t, res[0].Lease, stored, "a refused claim leaves the holder's lease alone")
	})
}

// startRacer is a dag.Store whose JobApply first runs race: what another
// process did between a claim's read of the jobs and its starts.
type startRacer struct {
	dag.Store
	race func()
}

func (s *startRacer) JobApply(ctx context.Context, evs []*dag.JobEvent) ([]*dag.JobEventResult, error) {
	s.race()
	return s.Store.JobApply(ctx, evs)
}

// TestManagerClaimManyUndo checks that claims refused after their leases
// were written leave nothing behind: refused by the Store (a later
// attempt holds the job) and by the dag (the job was cancelled after the
// claim read it).
// TestManagerClaimManyLaterAttempt: a claim of a later attempt than the
// job's, before or after the right one in the batch, sets the job's Redis
// hint before the job refuses it; the claim of the right attempt succeeds
// and its hint is the one Redis keeps.
func TestManagerClaimManyLaterAttempt(t *testing.T) {
	t.Parallel()
	forStacks(t, func(t *testing.T, st stack) {
		ctx := t.Context()
		b := setup(t, st, four()...)
		b.queue(t, b.attempt("b", 1))
		b.queue(t, b.attempt("c", 1))
		res := b.m.ClaimMany(ctx, []lease.ClaimRequest{
			{Attempt: b.attempt("b", 2), Runner: "r0"}, // the job is at attempt 1
			{Attempt: b.attempt("b", 1), Runner: "r1"},
			{Attempt: b.attempt("c", 1), Runner: "r2"},
			{Attempt: b.attempt("c", 2), Runner: "r3"}, // after the right one, this time
		})
		require.ErrorIs(t, res[0].Err, lease.ErrNotClaimed)
		require.ErrorIs(t, res[3].Err, lease.ErrNotClaimed)
		for _, x := range []struct {
			job string
			res lease.ClaimResult
		}{{"b", res[1]}, {"c", res[2]}} {
			require.NoError(t, x.res.Err)
			require.Equal(t, cikit.JobRunning, b.job(t, x.job).State)
			if st.redis {
				require.Equal(t, "1:"+x.res.Lease.Token, b.redisValue(t, x.job), "the hint of %s is the claim's", x.job)
			}
		}
	})
}

func TestManagerClaimManyUndo(t *testing.T) {
	t.Parallel()
	forStacks(t, func(t *testing.T, st stack) {
		ctx := t.Context()
		b := setup(t, st, four()...)
		for _, j := range []string{"a", "b", "c"} {
			b.queue(t, b.attempt(j, 1))
		}
		later := &lease.Lease{Attempt: b.attempt("c", 2), Token: "later", Runner: "x", Expires: b.clock.Now().Add(ttl)}
		require.NoError(t, b.store.LeaseInsert(ctx, later))
		race := &startRacer{Store: b.jobs, race: func() {
			_, err := b.jobs.RunCancel(ctx, b.run.ID)
			require.NoError(t, err)
		}}
		cfg := lease.Config{Store: b.store, Jobs: race, TTL: ttl, Now: b.clock.Now, Logger: quiet}
		if st.redis {
			cfg.Redis, cfg.KeyPrefix = b.ns.Client, b.ns.Prefix
		}
		m, err := lease.NewManager(cfg)
		require.NoError(t, err)
		res := m.ClaimMany(ctx, []lease.ClaimRequest{{Attempt: b.attempt("b", 1), Runner: "r"}, {Attempt: b.attempt("c", 1), Runner: "r"}})
		for i, r := range res {
			require.ErrorIs(t, r.Err, lease.ErrNotClaimed, "claim %d", i)
			require.Nil(t, r.Lease)
		}
		require.ErrorIs(t, res[0].Err, cikit.ErrInvalidTransition, "refused by the dag")
		b.requireNoLease(t, "b")
		require.Equal(t, cikit.JobCancelled, b.job(t, "b").State)
		stored, err := b.store.LeaseGet(ctx, b.run.ID, "c")
		require.NoError(t, err)
		require.Equal(t, later, stored, "refused by the store: the holder's lease stays")
		require.Empty(t, b.redisValue(t, "c"), "and the hint the claim set is gone")
	})
}

func TestManagerCompleteMany(t *testing.T) {
	t.Parallel()
	forStacks(t, func(t *testing.T, st stack) {
		ctx := t.Context()
		b := setup(t, st, four()...)
		var reqs []lease.ClaimRequest
		for _, j := range []string{"a", "b", "c", "d"} {
			b.queue(t, b.attempt(j, 1))
			reqs = append(reqs, lease.ClaimRequest{Attempt: b.attempt(j, 1), Runner: "r-" + j})
		}
		ls := map[string]*lease.Lease{}
		for _, r := range b.m.ClaimMany(ctx, reqs) {
			require.NoError(t, r.Err)
			ls[r.Lease.JobID] = r.Lease
		}
		_, err := b.m.Complete(ctx, b.attempt("d", 1), ls["d"].Token, &dag.JobCompleteParams{Outcome: cikit.JobSucceeded})
		require.NoError(t, err)
		ok := &dag.JobCompleteParams{Outcome: cikit.JobSucceeded}
		failed := &dag.JobCompleteParams{Outcome: cikit.JobFailed, ExitCode: 2, FailureClass: cikit.FailureScript, Reason: "exit 2"}
		res := b.m.CompleteMany(ctx, []lease.CompleteRequest{
			{Attempt: b.attempt("a", 1), Token: ls["a"].Token, Params: ok},     // valid
			{Attempt: b.attempt("b", 1), Token: "not-the-token", Params: ok},   // another token
			{Attempt: b.attempt("a", 1), Token: ls["a"].Token, Params: ok},     // repeated in the batch
			{Attempt: b.attempt("c", 1), Token: ls["c"].Token, Params: failed}, // valid
			{Attempt: b.attempt("d", 1), Token: ls["d"].Token, Params: ok},     // completed before: stale
			{Attempt: b.attempt("b", 2), Token: ls["b"].Token, Params: ok},     // another attempt
			{Attempt: b.attempt("b", 0), Token: ls["b"].Token, Params: ok},     // invalid
		})
		require.Len(t, res, 7)
		require.NoError(t, res[0].Err)
		require.Equal(t, []cikit.JobState{cikit.JobSucceeded, cikit.JobReady}, states(res[0].Result), "a, then after")
		require.NoError(t, res[3].Err)
		require.Equal(t, cikit.JobFailed, res[3].Result.Changed[0].State)
		for _, i := range []int{1, 2, 4, 5} {
			require.ErrorIs(t, res[i].Err, lease.ErrFenced, "completion %d", i)
			require.Nil(t, res[i].Result)
		}
		require.ErrorContains(t, res[6].Err, "attempt numbers start at 1")
		b.requireNoLease(t, "a")
		b.requireNoLease(t, "c")
		require.Equal(t, cikit.JobSucceeded, b.job(t, "a").State)
		require.Equal(t, cikit.JobFailed, b.job(t, "c").State)
		require.Equal(t, cikit.JobRunning, b.job(t, "b").State, "fenced completions change nothing")
		stored, err := b.store.LeaseGet(ctx, b.run.ID, "b")
		require.NoError(t, err)
		require.Equal(t, ls["b"], stored)
		if st.redis {
			require.Equal(t, "1:"+ls["b"].Token, b.redisValue(t, "b"))
		}
		b.requireFenced(t, b.attempt("a", 1), ls["a"].Token)
		require.Empty(t, b.m.CompleteMany(ctx, nil))
	})
}

func states(res *dag.TransitionResult) []cikit.JobState {
	var out []cikit.JobState
	for _, j := range res.Changed {
		out = append(out, j.State)
	}
	return out
}

// TestManagerConcurrentClaimMany races batches that overlap: each attempt
// is won by exactly one claim.
func TestManagerConcurrentClaimMany(t *testing.T) {
	t.Parallel()
	forStacks(t, func(t *testing.T, st stack) {
		specs := four()[:4]
		b := setup(t, st, specs...)
		for _, s := range specs {
			b.queue(t, b.attempt(s.ID, 1))
		}
		var mu sync.Mutex
		won := map[string][]*lease.Lease{}
		var wg sync.WaitGroup
		for g := range 6 {
			wg.Go(func() {
				var reqs []lease.ClaimRequest
				for i := range specs {
					reqs = append(reqs, lease.ClaimRequest{Attempt: b.attempt(specs[(i+g)%len(specs)].ID, 1), Runner: fmt.Sprint("r", g)})
				}
				for _, r := range b.m.ClaimMany(t.Context(), reqs) {
					if r.Err != nil {
						require.ErrorIs(t, r.Err, lease.ErrNotClaimed)
						continue
					}
					mu.Lock()
					won[r.Lease.JobID] = append(won[r.Lease.JobID], r.Lease)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		for _, s := range specs {
			require.Len(t, won[s.ID], 1, s.ID)
			stored, err := b.store.LeaseGet(t.Context(), b.run.ID, s.ID)
			require.NoError(t, err)
			require.Equal(t, won[s.ID][0].Token, stored.Token)
			require.Equal(t, won[s.ID][0].Runner, b.job(t, s.ID).Runner)
		}
	})
}

// TestManagerManyRedisDown runs the batched calls with a Redis that cannot
// be reached: the pipelines fail and the store decides alone.
func TestManagerManyRedisDown(t *testing.T) {
	t.Parallel()
	for _, pg := range []bool{false, true} {
		b := setup(t, stack{pg: pg}, four()...)
		rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond, DialerRetries: 1})
		t.Cleanup(func() { _ = rdb.Close() })
		m, err := lease.NewManager(lease.Config{Store: b.store, Jobs: b.jobs, Redis: rdb, Now: b.clock.Now, Logger: quiet})
		require.NoError(t, err)
		ctx := t.Context()
		var reqs []lease.ClaimRequest
		for _, j := range []string{"a", "b"} {
			b.queue(t, b.attempt(j, 1))
			reqs = append(reqs, lease.ClaimRequest{Attempt: b.attempt(j, 1), Runner: "r"})
		}
		reqs = append(reqs, reqs[0])
		res := m.ClaimMany(ctx, reqs)
		require.NoError(t, res[0].Err)
		require.NoError(t, res[1].Err)
		require.ErrorIs(t, res[2].Err, lease.ErrNotClaimed)
		again := m.ClaimMany(ctx, reqs[:2])
		require.ErrorIs(t, again[0].Err, lease.ErrNotClaimed, "the store refuses held attempts alone")
		require.ErrorIs(t, again[1].Err, lease.ErrNotClaimed)
		done := &dag.JobCompleteParams{Outcome: cikit.JobSucceeded}
		for _, r := range m.CompleteMany(ctx, []lease.CompleteRequest{
			{Attempt: res[0].Lease.Attempt, Token: res[0].Lease.Token, Params: done},
			{Attempt: res[1].Lease.Attempt, Token: res[1].Lease.Token, Params: done},
		}) {
			require.NoError(t, r.Err)
		}
		b.requireNoLease(t, "a")
		b.requireNoLease(t, "b")
	}
}
