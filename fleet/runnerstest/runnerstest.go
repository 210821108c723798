// Package runnerstest is the conformance suite of fleet.RunnerStore: the
// behaviour every implementation shares, so that a runner is revoked the
// same in memory and on PostgreSQL, and on a store a platform team
// writes itself.
//
//	func TestMyStore(t *testing.T) {
//		runnerstest.Exercise(t.Context(), t, func(t *testing.T) fleet.RunnerStore {
//			return newMyStore(t)
//		})
//	}
package runnerstest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet"
)

// Factory returns a new, empty store. Each call must return a store that
// shares nothing with the others.
type Factory func(t *testing.T) fleet.RunnerStore

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func record(id string) *fleet.RunnerRecord {
	return &fleet.RunnerRecord{ID: id, Name: "runner " + id, Labels: []string{"linux", "x64"}, Version: "1.2.3", RegisteredAt: t0, LastSeen: t0}
}

// Exercise runs the conformance suite against the stores factory makes.
func Exercise(ctx context.Context, t *testing.T, factory Factory) {
	t.Run("CreateGet", func(t *testing.T) {
		s := factory(t)
		require.NoError(t, s.RunnerCreate(ctx, record("r_1")))
		got, err := s.RunnerGet(ctx, "r_1")
		require.NoError(t, err)
		require.Equal(t, record("r_1"), got)
		require.False(t, got.Revoked())
		noLabels := record("r_2")
		noLabels.Labels = nil
		require.NoError(t, s.RunnerCreate(ctx, noLabels))
		got, err = s.RunnerGet(ctx, "r_2")
		require.NoError(t, err)
		require.Empty(t, got.Labels)

		require.ErrorIs(t, s.RunnerCreate(ctx, record("r_1")), cikit.ErrConflict)
		_, err = s.RunnerGet(ctx, "r_missing")
		require.ErrorIs(t, err, cikit.ErrNotFound)
	})
	t.Run("RecordsAreCopies", func(t *testing.T) {
		s := factory(t)
		r := record("r_1")
		require.NoError(t, s.RunnerCreate(ctx, r))
		r.Labels[0] = "changed"
		got, err := s.RunnerGet(ctx, "r_1")
		require.NoError(t, err)
		got.Labels[1] = "changed"
		again, err := s.RunnerGet(ctx, "r_1")
		require.NoError(t, err)
		require.Equal(t, []string{"linux", "x64"}, again.Labels)
	})
	t.Run("Seen", func(t *testing.T) {
		s := factory(t)
		require.NoError(t, s.RunnerCreate(ctx, record("r_1")))
		require.NoError(t, s.RunnerSeen(ctx, "r_1", t0.Add(time.Minute)))
		require.NoError(t, s.RunnerSeen(ctx, "r_1", t0.Add(time.Second)), "an earlier time is no error")
		got, err := s.RunnerGet(ctx, "r_1")
		require.NoError(t, err)
		require.Equal(t, t0.Add(time.Minute), got.LastSeen, "and does not move LastSeen back")
		require.ErrorIs(t, s.RunnerSeen(ctx, "r_missing", t0), cikit.ErrNotFound)
	})
	t.Run("Revoke", func(t *testing.T) {
		s := factory(t)
		require.NoError(t, s.RunnerCreate(ctx, record("r_1")))
		at := t0.Add(time.Hour)
		got, err := s.RunnerRevoke(ctx, &fleet.RunnerRevokeParams{ID: "r_1", By: "alice", Reason: "leaked token", At: at})
		require.NoError(t, err)
		require.True(t, got.Revoked())
		require.Equal(t, at, got.RevokedAt)
		require.Equal(t, "alice", got.RevokedBy)
		require.Equal(t, "leaked token", got.Reason)
		stored, err := s.RunnerGet(ctx, "r_1")
		require.NoError(t, err)
		require.Equal(t, got, stored)

		again, err := s.RunnerRevoke(ctx, &fleet.RunnerRevokeParams{ID: "r_1", By: "bob", Reason: "again", At: at.Add(time.Hour)})
		require.NoError(t, err)
		require.Equal(t, got, again, "the first revocation is kept")
		require.NoError(t, s.RunnerSeen(ctx, "r_1", at.Add(time.Minute)), "a revoked runner's record still takes LastSeen")

		_, err = s.RunnerRevoke(ctx, &fleet.RunnerRevokeParams{ID: "r_missing", By: "alice", At: at})
		require.ErrorIs(t, err, cikit.ErrNotFound)
	})
	t.Run("ConcurrentRevokes", func(t *testing.T) {
		s := factory(t)
		require.NoError(t, s.RunnerCreate(ctx, record("r_1")))
		var wg sync.WaitGroup
		got := make([]*fleet.RunnerRecord, 8)
		for i := range got {
			wg.Go(func() {
				r, err := s.RunnerRevoke(ctx, &fleet.RunnerRevokeParams{ID: "r_1", By: fmt.Sprint("user-", i), Reason: "race", At: t0.Add(time.Duration(i) * time.Second)})
				if err == nil {
					got[i] = r
				}
			})
		}
		wg.Wait()
		for _, r := range got {
			require.NotNil(t, r)
			require.Equal(t, got[0], r, "every revocation answers the one that won")
		}
	})
	t.Run("List", func(t *testing.T) {
		s := factory(t)
		empty, err := s.RunnerList(ctx, nil)
		require.NoError(t, err)
		require.Empty(t, empty)
		for _, id := range []string{"r_c", "r_a", "r_d", "r_b"} {
			require.NoError(t, s.RunnerCreate(ctx, record(id)))
		}
		_, err = s.RunnerRevoke(ctx, &fleet.RunnerRevokeParams{ID: "r_b", By: "alice", At: t0})
		require.NoError(t, err)
		ids := func(rs []*fleet.RunnerRecord) []string {
			out := []string{}
			for _, r := range rs {
				out = append(out, r.ID)
			}
			return out
		}
		all, err := s.RunnerList(ctx, nil)
		require.NoError(t, err)
		require.Equal(t, []string{"r_a", "r_b", "r_c", "r_d"}, ids(all), "revoked ones included, by ID")
		require.True(t, all[1].Revoked())
		page, err := s.RunnerList(ctx, &fleet.RunnerListParams{Limit: 2})
		require.NoError(t, err)
		require.Equal(t, []string{"r_a", "r_b"}, ids(page))
		page, err = s.RunnerList(ctx, &fleet.RunnerListParams{After: "r_b", Limit: 2})
		require.NoError(t, err)
		require.Equal(t, []string{"r_c", "r_d"}, ids(page))
		page, err = s.RunnerList(ctx, &fleet.RunnerListParams{After: "r_d"})
		require.NoError(t, err)
		require.Empty(t, page)
	})
	t.Run("ListIsBounded", func(t *testing.T) {
		s := factory(t)
		for i := range fleet.MaxRunnerList + 1 {
			require.NoError(t, s.RunnerCreate(ctx, record(fmt.Sprintf("r_%05d", i))))
		}
		all, err := s.RunnerList(ctx, &fleet.RunnerListParams{Limit: fleet.MaxRunnerList + 50})
		require.NoError(t, err)
		require.Len(t, all, fleet.MaxRunnerList)
		rest, err := s.RunnerList(ctx, &fleet.RunnerListParams{After: all[len(all)-1].ID})
		require.NoError(t, err)
		require.Len(t, rest, 1)
	})
}
