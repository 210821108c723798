package secretstest

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/internal/clocktest"
	"github.com/cikit/cikit/secrets"
)

// RunReplaysTests runs the Replays conformance suite. newReplays returns
// an empty Replays reading the time from now for each subtest.
func RunReplaysTests(t *testing.T, newReplays func(t *testing.T, now func() time.Time) secrets.Replays) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	setup := func(t *testing.T) (secrets.Replays, *clocktest.Clock) {
		clock := clocktest.New(t0)
		return newReplays(t, clock.Now), clock
	}

	t.Run("SecondUseIsReplay", func(t *testing.T) {
		t.Parallel()
		r, _ := setup(t)
		ctx := t.Context()
		require.NoError(t, r.Use(ctx, "a", t0.Add(time.Minute)))
		require.ErrorIs(t, r.Use(ctx, "a", t0.Add(time.Minute)), secrets.ErrReplayed)
		require.ErrorIs(t, r.Use(ctx, "a", t0.Add(time.Hour)), secrets.ErrReplayed, "a later expiry does not make a replay new")
		require.NoError(t, r.Use(ctx, "b", t0.Add(time.Minute)), "IDs are independent")
	})

	t.Run("ExpiredRecordsAreForgotten", func(t *testing.T) {
		t.Parallel()
		r, clock := setup(t)
		ctx := t.Context()
		require.NoError(t, r.Use(ctx, "a", t0.Add(time.Minute)))
		clock.Advance(time.Minute - time.Second)
		require.ErrorIs(t, r.Use(ctx, "a", t0.Add(2*time.Minute)), secrets.ErrReplayed)
		clock.Advance(time.Second)
		require.NoError(t, r.Use(ctx, "a", t0.Add(2*time.Minute)), "the record expired at t0+1m")
		require.ErrorIs(t, r.Use(ctx, "a", t0.Add(2*time.Minute)), secrets.ErrReplayed, "the new use is recorded")
	})

	t.Run("InvalidIDs", func(t *testing.T) {
		t.Parallel()
		r, _ := setup(t)
		require.ErrorIs(t, r.Use(t.Context(), "", t0.Add(time.Minute)), secrets.ErrInvalid)
		long := make([]byte, secrets.MaxTokenIDBytes+1)
		for i := range long {
			long[i] = 'x'
		}
		require.ErrorIs(t, r.Use(t.Context(), string(long), t0.Add(time.Minute)), secrets.ErrInvalid)
	})

	t.Run("ConcurrentUsesOneWins", func(t *testing.T) {
		t.Parallel()
		r, _ := setup(t)
		const n = 8
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for range n {
			wg.Go(func() { errs <- r.Use(t.Context(), "same", t0.Add(time.Minute)) })
		}
		wg.Wait()
		close(errs)
		var won int
		for err := range errs {
			if err == nil {
				won++
				continue
			}
			require.ErrorIs(t, err, secrets.ErrReplayed)
		}
		require.Equal(t, 1, won, "SAFETY: one of the concurrent uses of a token succeeds")
	})

	t.Run("PurgeDropsExpiredOnly", func(t *testing.T) {
		t.Parallel()
		r, clock := setup(t)
		ctx := t.Context()
		require.NoError(t, r.Use(ctx, "short", t0.Add(time.Minute)))
		require.NoError(t, r.Use(ctx, "long", t0.Add(time.Hour)))
		n, err := r.Purge(ctx)
		require.NoError(t, err)
		require.Equal(t, 0, n)
		clock.Advance(2 * time.Minute)
		n, err = r.Purge(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.ErrorIs(t, r.Use(ctx, "long", t0.Add(time.Hour)), secrets.ErrReplayed, "a purge keeps what has not expired")
		require.NoError(t, r.Use(ctx, "short", t0.Add(time.Hour)))
	})
}
