package secretstest

import (
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/secrets"
)

var (
	rsaOnce sync.Once
	rsaKeys []*rsa.PrivateKey
)

// testKeys returns n RSA keys, made once per test binary: making them is
// what a KeyStore test spends its time on otherwise.
func testKeys(t *testing.T, n int) []*rsa.PrivateKey {
	t.Helper()
	rsaOnce.Do(func() {
		for range 6 {
			k, err := rsa.GenerateKey(rand.Reader, secrets.KeyBits)
			if err != nil {
				panic(err)
			}
			rsaKeys = append(rsaKeys, k)
		}
	})
	require.LessOrEqual(t, n, len(rsaKeys))
	return rsaKeys[:n]
}

// RunKeyStoreTests runs the KeyStore conformance suite. newStore returns
// an empty store for each subtest.
func RunKeyStoreTests(t *testing.T, newStore func(t *testing.T) secrets.KeyStore) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	key := func(id string, priv *rsa.PrivateKey, created time.Time) secrets.SigningKey {
		return secrets.SigningKey{ID: id, Private: priv, Created: created}
	}
	ids := func(t *testing.T, s secrets.KeyStore) []string {
		t.Helper()
		got, err := s.KeyList(t.Context())
		require.NoError(t, err)
		var out []string
		for _, k := range got {
			out = append(out, k.ID)
		}
		return out
	}

	t.Run("EmptyListsNone", func(t *testing.T) {
		t.Parallel()
		got, err := newStore(t).KeyList(t.Context())
		require.NoError(t, err)
		require.Empty(t, got)
	})

	t.Run("AddRetiresThePrimary", func(t *testing.T) {
		t.Parallel()
		s, ctx, pk := newStore(t), t.Context(), testKeys(t, 2)
		require.NoError(t, s.KeyAdd(ctx, key("k1", pk[0], t0), ""))
		got, err := s.KeyList(ctx)
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, "k1", got[0].ID)
		require.True(t, pk[0].Equal(got[0].Private), "the private key reads back as written")
		require.True(t, got[0].Created.Equal(t0.Truncate(time.Microsecond)), "Created %s, want %s to the microsecond", got[0].Created, t0)
		require.True(t, got[0].Retired.IsZero(), "the only key is the primary")

		t1 := t0.Add(time.Hour)
		require.NoError(t, s.KeyAdd(ctx, key("k2", pk[1], t1), "k1"))
		got, err = s.KeyList(ctx)
		require.NoError(t, err)
		require.Len(t, got, 2)
		require.Equal(t, "k2", got[0].ID, "the newest first")
		require.True(t, pk[1].Equal(got[0].Private))
		require.True(t, got[0].Retired.IsZero())
		require.Equal(t, "k1", got[1].ID)
		require.True(t, got[1].Retired.Equal(t1.Truncate(time.Microsecond)), "k1 retired at %s, want k2's creation %s", got[1].Retired, t1)
	})

	t.Run("AddIsConditionalOnTheNewest", func(t *testing.T) {
		t.Parallel()
		s, ctx, pk := newStore(t), t.Context(), testKeys(t, 3)
		err := s.KeyAdd(ctx, key("k1", pk[0], t0), "k0")
		require.ErrorIs(t, err, cikit.ErrConflict, "an empty store has no newest key k0")
		require.NoError(t, s.KeyAdd(ctx, key("k1", pk[0], t0), ""))
		require.ErrorIs(t, s.KeyAdd(ctx, key("k2", pk[1], t0.Add(time.Minute)), ""), cikit.ErrConflict,
			"the store is not empty any more")
		require.NoError(t, s.KeyAdd(ctx, key("k2", pk[1], t0.Add(time.Minute)), "k1"))
		require.ErrorIs(t, s.KeyAdd(ctx, key("k3", pk[2], t0.Add(2*time.Minute)), "k1"), cikit.ErrConflict,
			"k1 is not the newest any more")
		require.ErrorIs(t, s.KeyAdd(ctx, key("k1", pk[2], t0.Add(2*time.Minute)), "k2"), cikit.ErrConflict,
			"the ID k1 is taken")
		require.Equal(t, []string{"k2", "k1"}, ids(t, s), "a refused add changes nothing")
		got, err := s.KeyList(ctx)
		require.NoError(t, err)
		require.True(t, got[0].Retired.IsZero(), "a refused add retires nothing")
	})

	t.Run("AddRefusesInvalidKeys", func(t *testing.T) {
		t.Parallel()
		s, ctx, pk := newStore(t), t.Context(), testKeys(t, 1)
		for name, k := range map[string]secrets.SigningKey{
			"no ID":          key("", pk[0], t0),
			"spaced ID":      key("a b", pk[0], t0),
			"no private key": key("k1", nil, t0),
			"no creation":    key("k1", pk[0], time.Time{}),
			"retired":        {ID: "k1", Private: pk[0], Created: t0, Retired: t0},
		} {
			require.ErrorIs(t, s.KeyAdd(ctx, k, ""), secrets.ErrInvalid, name)
		}
		require.Empty(t, ids(t, s))
	})

	t.Run("ConcurrentAddsMakeOneKey", func(t *testing.T) {
		t.Parallel()
		s, ctx, pk := newStore(t), t.Context(), testKeys(t, 6)
		require.NoError(t, s.KeyAdd(ctx, key("k0", pk[0], t0), ""))
		const n = 5
		errs := make(chan error, n)
		for i := range n {
			go func() {
				errs <- s.KeyAdd(ctx, key(fmt.Sprintf("k%d", i+1), pk[i+1], t0.Add(time.Hour)), "k0")
			}()
		}
		var won int
		for range n {
			err := <-errs
			if err == nil {
				won++
				continue
			}
			require.ErrorIs(t, err, cikit.ErrConflict)
		}
		require.Equal(t, 1, won, "SAFETY: of the adds that all saw k0 as the newest, one wins")
		got, err := s.KeyList(ctx)
		require.NoError(t, err)
		require.Len(t, got, 2)
		require.True(t, got[0].Retired.IsZero())
		require.False(t, got[1].Retired.IsZero())
	})

	t.Run("DeleteDropsRetiredKeysOnly", func(t *testing.T) {
		t.Parallel()
		s, ctx, pk := newStore(t), t.Context(), testKeys(t, 3)
		t0 := t0.Truncate(time.Second)
		require.NoError(t, s.KeyAdd(ctx, key("k1", pk[0], t0), ""))
		require.NoError(t, s.KeyAdd(ctx, key("k2", pk[1], t0.Add(time.Hour)), "k1"))
		require.NoError(t, s.KeyAdd(ctx, key("k3", pk[2], t0.Add(2*time.Hour)), "k2"))
		n, err := s.KeyDelete(ctx, t0.Add(time.Hour))
		require.NoError(t, err)
		require.Equal(t, 0, n, "k1 retired at t0+1h, which is not before t0+1h")
		n, err = s.KeyDelete(ctx, t0.Add(time.Hour+time.Second))
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, []string{"k3", "k2"}, ids(t, s))
		n, err = s.KeyDelete(ctx, t0.Add(1000*time.Hour))
		require.NoError(t, err)
		require.Equal(t, 1, n, "the primary is never deleted")
		require.Equal(t, []string{"k3"}, ids(t, s))
	})
}
