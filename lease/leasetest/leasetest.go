// Package leasetest is the conformance suite of lease.Store: the
// behaviour every implementation shares, so that leases fence runners the
// same on the memory store and on PostgreSQL — and on a store a platform
// team writes itself.
//
//	func TestMyStore(t *testing.T) {
//		leasetest.Exercise(t.Context(), t, func(t *testing.T) lease.Store {
//			return newMyStore(t)
//		})
//	}
package leasetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/lease"
)

// Factory returns a new, empty store. Each call must return a store that
// shares nothing with the others.
type Factory func(t *testing.T) lease.Store

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func mk(run, job string, attempt int, token string, expires time.Time) *lease.Lease {
	return &lease.Lease{Attempt: lease.Attempt{RunID: run, JobID: job, Attempt: attempt}, Token: token, Runner: "runner-" + token, Expires: expires}
}

// Exercise runs the conformance suite against the stores factory makes.
func Exercise(ctx context.Context, t *testing.T, factory Factory) {
	t.Run("InsertGet", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		_, err := s.LeaseGet(ctx, "r", "j")
		require.ErrorIs(t, err, cikit.ErrNotFound)
		l := mk("r", "j", 1, "a", t0.Add(30*time.Second))
		require.NoError(t, s.LeaseInsert(ctx, l))
		got, err := s.LeaseGet(ctx, "r", "j")
		require.NoError(t, err)
		require.Equal(t, l, got)
		require.True(t, got.Expires.Equal(l.Expires))
		got.Token = "changed"
		again, _ := s.LeaseGet(ctx, "r", "j")
		require.Equal(t, "a", again.Token, "results are copies")
		_, err = s.LeaseGet(ctx, "r", "other")
		require.ErrorIs(t, err, cikit.ErrNotFound, "leases are per job")
	})

	t.Run("InsertIsConditional", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		require.NoError(t, s.LeaseInsert(ctx, mk("r", "j", 2, "a", t0)))
		for _, l := range []*lease.Lease{mk("r", "j", 2, "b", t0), mk("r", "j", 1, "c", t0)} {
			err := s.LeaseInsert(ctx, l)
			require.ErrorIs(t, err, lease.ErrNotClaimed, "attempt %d", l.Attempt.Attempt)
			require.ErrorIs(t, err, cikit.ErrConflict)
		}
		got, _ := s.LeaseGet(ctx, "r", "j")
		require.Equal(t, "a", got.Token, "a refused insert changes nothing")

		require.NoError(t, s.LeaseInsert(ctx, mk("r", "j", 3, "d", t0.Add(time.Minute))), "a later attempt replaces an ended one's lease")
		got, _ = s.LeaseGet(ctx, "r", "j")
		require.Equal(t, mk("r", "j", 3, "d", t0.Add(time.Minute)), got)
		require.ErrorIs(t, s.LeaseRenew(ctx, lease.Attempt{RunID: "r", JobID: "j", Attempt: 2}, "a", t0), lease.ErrFenced)

		require.Error(t, s.LeaseInsert(ctx, mk("r", "j", 0, "e", t0)), "attempts start at 1")
		require.Error(t, s.LeaseInsert(ctx, mk("", "j", 1, "e", t0)))
	})

	t.Run("ConcurrentInsertsOneWins", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		var won atomic.Int32
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				err := s.LeaseInsert(ctx, mk("r", "j", 1, fmt.Sprint(i), t0))
				if err == nil {
					won.Add(1)
				} else {
					require.ErrorIs(t, err, lease.ErrNotClaimed)
				}
			})
		}
		wg.Wait()
		require.EqualValues(t, 1, won.Load())
	})

	t.Run("RenewIsFenced", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		a := lease.Attempt{RunID: "r", JobID: "j", Attempt: 1}
		require.ErrorIs(t, s.LeaseRenew(ctx, a, "a", t0), lease.ErrFenced, "no lease")
		require.NoError(t, s.LeaseInsert(ctx, mk("r", "j", 1, "a", t0)))
		require.NoError(t, s.LeaseRenew(ctx, a, "a", t0.Add(time.Hour)))
		got, _ := s.LeaseGet(ctx, "r", "j")
		require.True(t, got.Expires.Equal(t0.Add(time.Hour)))

		err := s.LeaseRenew(ctx, a, "b", t0.Add(2*time.Hour))
		require.ErrorIs(t, err, lease.ErrFenced, "another token")
		require.ErrorIs(t, err, cikit.ErrConflict)
		require.ErrorIs(t, s.LeaseRenew(ctx, lease.Attempt{RunID: "r", JobID: "j", Attempt: 2}, "a", t0), lease.ErrFenced, "another attempt")
		got, _ = s.LeaseGet(ctx, "r", "j")
		require.True(t, got.Expires.Equal(t0.Add(time.Hour)), "refused renewals change nothing")
	})

	t.Run("DeleteIsConditional", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		a := lease.Attempt{RunID: "r", JobID: "j", Attempt: 1}
		require.NoError(t, s.LeaseDelete(ctx, a, "a"), "deleting nothing is not an error")
		require.NoError(t, s.LeaseInsert(ctx, mk("r", "j", 1, "a", t0)))
		require.NoError(t, s.LeaseDelete(ctx, a, "b"))
		require.NoError(t, s.LeaseDelete(ctx, lease.Attempt{RunID: "r", JobID: "j", Attempt: 2}, "a"))
		_, err := s.LeaseGet(ctx, "r", "j")
		require.NoError(t, err, "only the holder's attempt and token delete")
		require.NoError(t, s.LeaseDelete(ctx, a, "a"))
		_, err = s.LeaseGet(ctx, "r", "j")
		require.ErrorIs(t, err, cikit.ErrNotFound)
		require.NoError(t, s.LeaseDelete(ctx, a, "a"), "deleting twice is harmless")
		require.NoError(t, s.LeaseInsert(ctx, mk("r", "j", 1, "c", t0)), "a deleted lease's attempt can be leased again")
	})

	t.Run("Expired", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		_, err := s.LeaseExpired(ctx, t0, 0)
		require.Error(t, err, "limit must be positive")
		for i, d := range []int{5, 1, 3, 1, 9} {
			require.NoError(t, s.LeaseInsert(ctx, mk("r", fmt.Sprintf("j%d", i), 1, fmt.Sprint(i), t0.Add(time.Duration(d)*time.Second))))
		}
		ids := func(now time.Time, limit int) []string {
			ls, err := s.LeaseExpired(ctx, now, limit)
			require.NoError(t, err)
			var out []string
			for _, l := range ls {
				out = append(out, l.JobID)
			}
			return out
		}
		require.Empty(t, ids(t0, 10))
		require.Equal(t, []string{"j1", "j3"}, ids(t0.Add(time.Second), 10), "a lease expires at its Expires; ties by run and job")
		require.Equal(t, []string{"j1", "j3", "j2", "j0"}, ids(t0.Add(5*time.Second), 10), "oldest expiry first")
		require.Equal(t, []string{"j1", "j3", "j2"}, ids(t0.Add(time.Hour), 3))
		ls, _ := s.LeaseExpired(ctx, t0.Add(time.Second), 1)
		require.Equal(t, mk("r", "j1", 1, "1", t0.Add(time.Second)), ls[0])

		require.NoError(t, s.LeaseRenew(ctx, lease.Attempt{RunID: "r", JobID: "j1", Attempt: 1}, "1", t0.Add(time.Hour)))
		require.Equal(t, []string{"j3", "j2", "j0"}, ids(t0.Add(5*time.Second), 10), "a renewed lease is not expired")
	})

	t.Run("InsertMany", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		require.NoError(t, s.LeaseInsert(ctx, mk("r", "held", 2, "h", t0)))
		require.NoError(t, s.LeaseInsert(ctx, mk("r", "ended", 1, "e", t0)))
		errs, err := s.LeaseInsertMany(ctx, []*lease.Lease{
			mk("r", "j", 1, "a", t0),                      // new
			mk("r", "j", 1, "b", t0),                      // the same attempt again: refused
			mk("r", "held", 2, "c", t0),                   // held: refused
			mk("r", "ended", 2, "d", t0.Add(time.Minute)), // replaces an ended attempt's lease
			mk("r", "j", 0, "x", t0),                      // invalid
			mk("r", "j", 2, "f", t0.Add(time.Hour)),       // a later attempt replaces the first lease
			mk("r", "j", 1, "g", t0),                      // and an earlier one is refused after it
		})
		require.NoError(t, err)
		require.Len(t, errs, 7)
		for i, want := range []bool{true, false, false, true, false, true, false} {
			if want {
				require.NoError(t, errs[i], "lease %d", i)
			} else {
				require.Error(t, errs[i], "lease %d", i)
			}
		}
		for _, i := range []int{1, 2, 6} {
			require.ErrorIs(t, errs[i], lease.ErrNotClaimed, "lease %d", i)
			require.ErrorIs(t, errs[i], cikit.ErrConflict, "lease %d", i)
		}
		require.NotErrorIs(t, errs[4], lease.ErrNotClaimed, "an invalid attempt is an error of its own")
		for job, want := range map[string]*lease.Lease{
			"j": mk("r", "j", 2, "f", t0.Add(time.Hour)), "held": mk("r", "held", 2, "h", t0), "ended": mk("r", "ended", 2, "d", t0.Add(time.Minute)),
		} {
			got, err := s.LeaseGet(ctx, "r", job)
			require.NoError(t, err)
			require.Equal(t, want, got, job)
		}
		errs, err = s.LeaseInsertMany(ctx, nil)
		require.NoError(t, err)
		require.Empty(t, errs)
	})

	t.Run("ConcurrentInsertManyOneWins", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		var won [4]atomic.Int32
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				var ls []*lease.Lease
				for j := range won { // in another order each time
					ls = append(ls, mk("r", fmt.Sprint("j", (j+i)%len(won)), 1, fmt.Sprint(i), t0))
				}
				errs, err := s.LeaseInsertMany(ctx, ls)
				require.NoError(t, err)
				for n, err := range errs {
					if err == nil {
						won[(n+i)%len(won)].Add(1)
					} else {
						require.ErrorIs(t, err, lease.ErrNotClaimed)
					}
				}
			})
		}
		wg.Wait()
		for j := range won {
			require.EqualValues(t, 1, won[j].Load(), "job %d", j)
		}
	})

	t.Run("GetMany", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		a, b := mk("r", "a", 1, "a", t0.Add(time.Second)), mk("r", "b", 3, "b", t0)
		require.NoError(t, s.LeaseInsert(ctx, a))
		require.NoError(t, s.LeaseInsert(ctx, b))
		got, err := s.LeaseGetMany(ctx, []dag.JobKey{{RunID: "r", JobID: "b"}, {RunID: "r", JobID: "none"}, {RunID: "r", JobID: "a"},
			{RunID: "other", JobID: "a"}, {RunID: "r", JobID: "b"}})
		require.NoError(t, err)
		require.Equal(t, []*lease.Lease{b, nil, a, nil, b}, got, "in the keys' order, nil without a lease")
		got[0].Token = "changed"
		require.Equal(t, "b", got[4].Token, "results are copies")
		again, _ := s.LeaseGet(ctx, "r", "b")
		require.Equal(t, "b", again.Token, "results are copies")
		got, err = s.LeaseGetMany(ctx, nil)
		require.NoError(t, err)
		require.Empty(t, got)
	})

	t.Run("DeleteMany", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		for _, l := range []*lease.Lease{mk("r", "a", 1, "a", t0), mk("r", "b", 1, "b", t0), mk("r", "c", 2, "c", t0)} {
			require.NoError(t, s.LeaseInsert(ctx, l))
		}
		require.NoError(t, s.LeaseDeleteMany(ctx, []*lease.Lease{
			mk("r", "a", 1, "a", t0), // the holder's: deleted
			mk("r", "b", 1, "x", t0), // another token
			mk("r", "c", 1, "c", t0), // another attempt
			mk("r", "d", 1, "d", t0), // none
			mk("r", "a", 1, "a", t0), // twice
		}))
		_, err := s.LeaseGet(ctx, "r", "a")
		require.ErrorIs(t, err, cikit.ErrNotFound)
		for _, job := range []string{"b", "c"} {
			_, err := s.LeaseGet(ctx, "r", job)
			require.NoError(t, err, "only the holder's attempt and token delete")
		}
		require.NoError(t, s.LeaseDeleteMany(ctx, nil))
	})

	t.Run("ContextCancelled", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		require.ErrorIs(t, s.LeaseInsert(cctx, mk("r", "j", 1, "a", t0)), context.Canceled)
		_, err := s.LeaseGet(cctx, "r", "j")
		require.ErrorIs(t, err, context.Canceled)
		_, err = s.LeaseInsertMany(cctx, []*lease.Lease{mk("r", "j", 1, "a", t0)})
		require.ErrorIs(t, err, context.Canceled)
		_, err = s.LeaseGetMany(cctx, []dag.JobKey{{RunID: "r", JobID: "j"}})
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorIs(t, s.LeaseDeleteMany(cctx, []*lease.Lease{mk("r", "j", 1, "a", t0)}), context.Canceled)
	})
}
