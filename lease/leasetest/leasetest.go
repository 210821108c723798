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

	t.Run("ContextCancelled", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		require.ErrorIs(t, s.LeaseInsert(cctx, mk("r", "j", 1, "a", t0)), context.Canceled)
		_, err := s.LeaseGet(cctx, "r", "j")
		require.ErrorIs(t, err, context.Canceled)
	})
}
