package secretstest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/secrets"
)

var leaseT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func lease(provider, id string, expiresIn time.Duration) secrets.Lease {
	return secrets.Lease{Provider: provider, ID: id, Expires: leaseT0.Add(expiresIn)}
}

// RunLeaseStoreTests runs the conformance suite of secrets.LeaseStore
// against the stores newStore returns: each call must return an empty
// store sharing nothing with the others.
//
//	func TestMyLeaseStore(t *testing.T) {
//		secretstest.RunLeaseStoreTests(t, func(t *testing.T) secrets.LeaseStore {
//			return newMyLeaseStore(t)
//		})
//	}
func RunLeaseStoreTests(t *testing.T, newStore func(t *testing.T) secrets.LeaseStore) {
	t.Run("AddOwned", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		s := newStore(t)
		got, err := s.Owned(ctx, "r/j/1")
		require.NoError(t, err)
		require.Empty(t, got, "an owner without leases")

		a, b := lease("p", "b", time.Minute), lease("p", "a", 2*time.Minute)
		c := lease("q", "a", 3*time.Minute)
		require.NoError(t, s.Add(ctx, "r/j/1", []secrets.Lease{a, b}))
		require.NoError(t, s.Add(ctx, "r/j/1", []secrets.Lease{c}))
		require.NoError(t, s.Add(ctx, "r/k/1", []secrets.Lease{lease("p", "other", time.Minute)}))
		require.NoError(t, s.Add(ctx, "r/j/1", nil), "adding nothing")
		got, err = s.Owned(ctx, "r/j/1")
		require.NoError(t, err)
		requireLeases(t, []secrets.Lease{b, a, c}, got, "by provider and ID")
	})

	t.Run("AddAgainReplacesExpiry", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		s := newStore(t)
		require.NoError(t, s.Add(ctx, "r/j/1", []secrets.Lease{lease("p", "a", time.Minute)}))
		later := lease("p", "a", time.Hour)
		require.NoError(t, s.Add(ctx, "r/j/1", []secrets.Lease{later}))
		require.NoError(t, s.Add(ctx, "r/j/2", []secrets.Lease{lease("p", "x", time.Minute), lease("p", "x", time.Hour)}),
			"a lease repeated in one call: the last wins")
		got, err := s.Owned(ctx, "r/j/1")
		require.NoError(t, err)
		requireLeases(t, []secrets.Lease{later}, got, "")
		got, err = s.Owned(ctx, "r/j/2")
		require.NoError(t, err)
		requireLeases(t, []secrets.Lease{lease("p", "x", time.Hour)}, got, "")
	})

	t.Run("AddConflict", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		s := newStore(t)
		require.NoError(t, s.Add(ctx, "r/j/1", []secrets.Lease{lease("p", "a", time.Minute)}))
		err := s.Add(ctx, "r/j/2", []secrets.Lease{lease("p", "b", time.Minute), lease("p", "a", time.Hour)})
		require.ErrorIs(t, err, cikit.ErrConflict)
		require.ErrorContains(t, err, "r/j/1", "the error names the holder")
		got, err := s.Owned(ctx, "r/j/2")
		require.NoError(t, err)
		require.Empty(t, got, "a refused Add adds nothing")
		got, err = s.Owned(ctx, "r/j/1")
		require.NoError(t, err)
		requireLeases(t, []secrets.Lease{lease("p", "a", time.Minute)}, got, "the holder's lease is unchanged")
		require.NoError(t, s.Add(ctx, "r/j/2", []secrets.Lease{lease("q", "a", time.Minute)}),
			"the same ID of another provider is another lease")
	})

	t.Run("AddInvalid", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		s := newStore(t)
		for name, tc := range map[string]struct {
			owner string
			l     secrets.Lease
		}{
			"no owner":    {"", lease("p", "a", time.Minute)},
			"no ID":       {"r/j/1", lease("p", "", time.Minute)},
			"no provider": {"r/j/1", lease("", "a", time.Minute)},
			"no expiry":   {"r/j/1", secrets.Lease{Provider: "p", ID: "a"}},
		} {
			require.ErrorIs(t, s.Add(ctx, tc.owner, []secrets.Lease{tc.l}), secrets.ErrInvalid, name)
		}
		got, err := s.Owned(ctx, "r/j/1")
		require.NoError(t, err)
		require.Empty(t, got)
	})

	t.Run("Due", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		s := newStore(t)
		got, err := s.Due(ctx, leaseT0.Add(time.Hour), 10)
		require.NoError(t, err)
		require.Empty(t, got)
		require.NoError(t, s.Add(ctx, "r/j/1", []secrets.Lease{lease("p", "3", 3*time.Minute), lease("p", "1", time.Minute)}))
		require.NoError(t, s.Add(ctx, "r/k/1", []secrets.Lease{lease("p", "2", 2*time.Minute), lease("p", "4", 4*time.Minute)}))

		got, err = s.Due(ctx, leaseT0.Add(3*time.Minute), 10)
		require.NoError(t, err)
		require.Equal(t, []secrets.OwnedLease{
			{Owner: "r/j/1", Lease: lease("p", "1", time.Minute)},
			{Owner: "r/k/1", Lease: lease("p", "2", 2*time.Minute)},
		}, normalOwned(got), "expiring strictly before, the soonest first")

		got, err = s.Due(ctx, leaseT0.Add(time.Hour), 3)
		require.NoError(t, err)
		require.Len(t, got, 3, "at most limit")
		require.Equal(t, "3", got[2].Lease.ID)

		for _, limit := range []int{0, -1} {
			_, err = s.Due(ctx, leaseT0, limit)
			require.ErrorIs(t, err, secrets.ErrInvalid, "limit %d", limit)
		}
	})

	t.Run("SetExpires", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		s := newStore(t)
		require.NoError(t, s.Add(ctx, "r/j/1", []secrets.Lease{lease("p", "a", time.Minute), lease("p", "b", time.Minute)}))
		require.NoError(t, s.SetExpires(ctx, "r/j/1", "a", leaseT0.Add(time.Hour)))
		got, err := s.Owned(ctx, "r/j/1")
		require.NoError(t, err)
		requireLeases(t, []secrets.Lease{lease("p", "a", time.Hour), lease("p", "b", time.Minute)}, got, "")

		due, err := s.Due(ctx, leaseT0.Add(30*time.Minute), 10)
		require.NoError(t, err)
		require.Len(t, due, 1)
		require.Equal(t, "b", due[0].Lease.ID, "Due sees the new expiry")

		// An expiry in the past makes the lease due at once.
		require.NoError(t, s.SetExpires(ctx, "r/j/1", "a", time.Unix(0, 0)))
		due, err = s.Due(ctx, leaseT0, 10)
		require.NoError(t, err)
		require.Len(t, due, 1)
		require.Equal(t, "a", due[0].Lease.ID)

		require.ErrorIs(t, s.SetExpires(ctx, "r/j/1", "missing", leaseT0), secrets.ErrNotFound)
		require.ErrorIs(t, s.SetExpires(ctx, "r/j/2", "a", leaseT0), secrets.ErrNotFound, "another owner's lease")
	})

	t.Run("Remove", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		s := newStore(t)
		require.NoError(t, s.Add(ctx, "r/j/1", []secrets.Lease{lease("p", "a", time.Minute), lease("p", "b", time.Minute), lease("p", "c", time.Minute)}))
		require.NoError(t, s.Add(ctx, "r/k/1", []secrets.Lease{lease("p", "d", time.Minute)}))
		require.NoError(t, s.Remove(ctx, "r/j/1", "a", "c", "missing"))
		require.NoError(t, s.Remove(ctx, "r/j/1", "a"), "removing again")
		require.NoError(t, s.Remove(ctx, "r/j/1"), "removing nothing")
		require.NoError(t, s.Remove(ctx, "r/j/1", "d"), "another owner's lease is not removed")
		got, err := s.Owned(ctx, "r/j/1")
		require.NoError(t, err)
		requireLeases(t, []secrets.Lease{lease("p", "b", time.Minute)}, got, "")
		got, err = s.Owned(ctx, "r/k/1")
		require.NoError(t, err)
		require.Len(t, got, 1)
		due, err := s.Due(ctx, leaseT0.Add(time.Hour), 10)
		require.NoError(t, err)
		require.Len(t, due, 2)
	})

	t.Run("ResultsAreCopies", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		s := newStore(t)
		in := []secrets.Lease{lease("p", "a", time.Minute)}
		require.NoError(t, s.Add(ctx, "r/j/1", in))
		in[0].ID = "changed"
		got, err := s.Owned(ctx, "r/j/1")
		require.NoError(t, err)
		got[0].ID = "changed too"
		again, err := s.Owned(ctx, "r/j/1")
		require.NoError(t, err)
		requireLeases(t, []secrets.Lease{lease("p", "a", time.Minute)}, again, "")
	})

	t.Run("ConcurrentAddsOfOneLeaseOneOwner", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		s := newStore(t)
		const n = 8
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				errs[i] = s.Add(ctx, fmt.Sprintf("r/j/%d", i+1), []secrets.Lease{lease("p", "shared", time.Minute)})
			})
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			if err == nil {
				won++
				continue
			}
			require.True(t, errors.Is(err, cikit.ErrConflict), "a losing Add: %v", err)
		}
		require.Equal(t, 1, won, "one owner holds the lease")
		due, err := s.Due(ctx, leaseT0.Add(time.Hour), 10)
		require.NoError(t, err)
		require.Len(t, due, 1)
	})
}

// requireLeases compares leases by value, expiry by instant.
func requireLeases(t *testing.T, want, got []secrets.Lease, msg string) {
	t.Helper()
	require.Equal(t, normal(want), normal(got), msg)
}

func normal(ls []secrets.Lease) []secrets.Lease {
	out := make([]secrets.Lease, len(ls))
	for i, l := range ls {
		l.Expires = l.Expires.UTC()
		out[i] = l
	}
	return out
}

func normalOwned(ls []secrets.OwnedLease) []secrets.OwnedLease {
	out := make([]secrets.OwnedLease, len(ls))
	for i, l := range ls {
		l.Lease.Expires = l.Lease.Expires.UTC()
		out[i] = l
	}
	return out
}
