package secretstest

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/secrets"
)

// StoreFactory returns a store of t's secrets whose values kr seals and
// opens. The suite calls it more than once in a test, with other
// keyrings, as processes restarted with a new configuration: the stores
// made for one t share their secrets, as stores of one database do. The
// first call for a t returns an empty store.
type StoreFactory func(t *testing.T, kr *secrets.Keyring) secrets.Store

// SealedStore is a Store that shows its values as it keeps them, sealed.
// The suite uses it to check that a sealed value copied to another scope
// or name does not open there; both of package secrets' stores
// implement it.
type SealedStore interface {
	secrets.Store
	// GetSealed returns the sealed value of a secret.
	GetSealed(ctx context.Context, scope secrets.Scope, name string) (secrets.Sealed, error)
	// PutSealed stores a sealed value as it is, unopened.
	PutSealed(ctx context.Context, scope secrets.Scope, name string, s secrets.Sealed) error
}

// NewKey returns a random keyring key of id.
func NewKey(t testing.TB, id string) secrets.Key {
	t.Helper()
	k := secrets.Key{ID: id, Secret: make([]byte, secrets.KeyBytes)}
	rand.Read(k.Secret)
	return k
}

// NewKeyring returns a keyring of keys, the first primary.
func NewKeyring(t testing.TB, keys ...secrets.Key) *secrets.Keyring {
	t.Helper()
	kr, err := secrets.NewKeyring(keys...)
	require.NoError(t, err)
	return kr
}

// RunStoreTests runs the conformance suite of secrets.Store against the
// stores newStore makes: set, replace, list by name without values,
// delete, the limits of names and values, sealing bound to scope and
// name, key rotation with Rewrap while secrets are fetched and set, and
// concurrent use.
func RunStoreTests(t *testing.T, newStore StoreFactory) {
	t.Run("SetReplaceList", func(t *testing.T) {
		t.Parallel()
		kr := NewKeyring(t, NewKey(t, "k1"))
		s := newStore(t, kr)
		ctx := t.Context()
		require.Equal(t, "store", s.Name())
		list, err := s.List(ctx, repoScope)
		require.NoError(t, err)
		require.Empty(t, list)

		// Byte order: upper case, then _, then lower case.
		for _, n := range []string{"b_lower", "A_UPPER", "_UNDER", "Z9"} {
			require.NoError(t, s.Set(ctx, repoScope, n, "value-of-"+n))
		}
		require.NoError(t, s.Set(ctx, orgScope, "A_UPPER", "org-value"))
		list, err = s.List(ctx, repoScope)
		require.NoError(t, err)
		var names []string
		for _, i := range list {
			names = append(names, i.Name)
			require.Equal(t, repoScope, i.Scope)
			require.Equal(t, "k1", i.KeyID)
			require.False(t, i.Updated.IsZero(), "Info.Updated is set")
		}
		require.Equal(t, []string{"A_UPPER", "Z9", "_UNDER", "b_lower"}, names, "List is by name, in byte order")

		require.NoError(t, s.Set(ctx, repoScope, "A_UPPER", "replaced-value"))
		got := fetch(t, ctx, s, secrets.Request{Scopes: jobScopes, Names: []string{"A_UPPER", "Z9"}})
		require.Equal(t, map[string]found{"A_UPPER": {"replaced-value", repoScope}, "Z9": {"value-of-Z9", repoScope}}, got)
		list, err = s.List(ctx, repoScope)
		require.NoError(t, err)
		require.Len(t, list, 4, "replacing does not add a secret")
		list, err = s.List(ctx, orgScope)
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.Equal(t, "A_UPPER", list[0].Name)
	})

	t.Run("NoValuesInInfo", func(t *testing.T) {
		t.Parallel()
		s := newStore(t, NewKeyring(t, NewKey(t, "k1")))
		ctx := t.Context()
		const value = "s3cr3t-v4lue-to-find"
		require.NoError(t, s.Set(ctx, repoScope, "TOKEN", value))
		list, err := s.List(ctx, repoScope)
		require.NoError(t, err)
		require.NotContains(t, fmt.Sprintf("%+v %#v", list, list), value)
		got, err := s.Fetch(ctx, secrets.Request{Scopes: jobScopes, Names: []string{"TOKEN"}})
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.NotContains(t, fmt.Sprint(got[0]), value, "Secret.String shows no value")
		if ss, ok := s.(SealedStore); ok {
			sealed, err := ss.GetSealed(ctx, repoScope, "TOKEN")
			require.NoError(t, err)
			require.NotContains(t, string(sealed.Ciphertext), value, "values are kept sealed")
		}
	})

	t.Run("Delete", func(t *testing.T) {
		t.Parallel()
		s := newStore(t, NewKeyring(t, NewKey(t, "k1")))
		ctx := t.Context()
		require.NoError(t, s.Set(ctx, repoScope, "GONE", "soon-gone"))
		require.NoError(t, s.Set(ctx, orgScope, "GONE", "org-stays"))
		require.ErrorIs(t, s.Delete(ctx, otherRepo, "GONE"), secrets.ErrNotFound, "delete is per scope")
		require.NoError(t, s.Delete(ctx, repoScope, "GONE"))
		require.Equal(t, map[string]found{"GONE": {"org-stays", orgScope}},
			fetch(t, ctx, s, secrets.Request{Scopes: jobScopes, Names: []string{"GONE"}}))
		list, err := s.List(ctx, repoScope)
		require.NoError(t, err)
		require.Empty(t, list)
		err = s.Delete(ctx, repoScope, "GONE")
		require.ErrorIs(t, err, secrets.ErrNotFound)
		require.ErrorContains(t, err, "GONE", "the error names the secret")
		require.ErrorIs(t, s.Delete(ctx, repoScope, "NEVER_SET"), secrets.ErrNotFound)
	})

	t.Run("Limits", func(t *testing.T) {
		t.Parallel()
		s := newStore(t, NewKeyring(t, NewKey(t, "k1")))
		ctx := t.Context()
		longest := strings.Repeat("N", secrets.MaxNameBytes)
		require.NoError(t, s.Set(ctx, repoScope, longest, "value"))
		require.NoError(t, s.Set(ctx, repoScope, "SHORTEST", strings.Repeat("v", secrets.MinValueBytes)))
		largest := strings.Repeat("v", secrets.MaxValueBytes)
		require.NoError(t, s.Set(ctx, repoScope, "LARGEST", largest))
		got := fetch(t, ctx, s, secrets.Request{Scopes: jobScopes, Names: []string{"LARGEST", longest}})
		require.Equal(t, largest, got["LARGEST"].Value)
		require.Equal(t, "value", got[longest].Value)

		for name, err := range map[string]error{
			"too short":      s.Set(ctx, repoScope, "X", strings.Repeat("v", secrets.MinValueBytes-1)),
			"empty value":    s.Set(ctx, repoScope, "X", ""),
			"too large":      s.Set(ctx, repoScope, "X", largest+"v"),
			"NUL":            s.Set(ctx, repoScope, "X", "nul\x00byte"),
			"long name":      s.Set(ctx, repoScope, longest+"N", "value"),
			"empty name":     s.Set(ctx, repoScope, "", "value"),
			"digit first":    s.Set(ctx, repoScope, "1X", "value"),
			"dash":           s.Set(ctx, repoScope, "X-Y", "value"),
			"platform's":     s.Set(ctx, repoScope, "github_token", "value"),
			"bad scope":      s.Set(ctx, secrets.Scope{Kind: "team"}, "X", "value"),
			"list bad scope": func() error { _, err := s.List(ctx, secrets.RepoScope("no-owner")); return err }(),
			"del bad scope":  s.Delete(ctx, secrets.OrgScope(""), "X"),
			"del bad name":   s.Delete(ctx, repoScope, "X Y"),
		} {
			require.Error(t, err, name)
			if strings.HasPrefix(name, "too short") || name == "empty value" {
				require.ErrorIs(t, err, secrets.ErrTooShort, name)
			} else {
				require.ErrorIs(t, err, secrets.ErrInvalid, name)
			}
		}
		list, err := s.List(ctx, repoScope)
		require.NoError(t, err)
		require.Len(t, list, 3, "a refused Set stores nothing")
	})

	t.Run("SealingBindsScopeAndName", func(t *testing.T) {
		t.Parallel()
		s := newStore(t, NewKeyring(t, NewKey(t, "k1")))
		ss, ok := s.(SealedStore)
		require.True(t, ok, "%T must implement secretstest.SealedStore for the suite to look at its sealed values", s)
		ctx := t.Context()
		require.NoError(t, s.Set(ctx, repoScope, "DEPLOY_KEY", "deploy-key-value"))
		sealed, err := ss.GetSealed(ctx, repoScope, "DEPLOY_KEY")
		require.NoError(t, err)
		require.Equal(t, "k1", sealed.KeyID)
		_, err = ss.GetSealed(ctx, repoScope, "NONE")
		require.ErrorIs(t, err, secrets.ErrNotFound)

		require.NoError(t, ss.PutSealed(ctx, otherRepo, "DEPLOY_KEY", sealed))
		require.NoError(t, ss.PutSealed(ctx, repoScope, "OTHER_NAME", sealed))
		for _, c := range []struct {
			scope secrets.Scope
			name  string
		}{{otherRepo, "DEPLOY_KEY"}, {repoScope, "OTHER_NAME"}} {
			_, err := s.Fetch(ctx, secrets.Request{Scopes: []secrets.Scope{c.scope}, Names: []string{c.name}})
			require.ErrorIs(t, err, secrets.ErrOpen, "a value copied to %s/%s does not open", c.scope, c.name)
			require.ErrorContains(t, err, c.scope.String())
			require.ErrorContains(t, err, c.name)
			require.ErrorContains(t, err, `"k1"`, "the error names the key")
			require.NotContains(t, err.Error(), "deploy-key-value")
		}
		// The original still opens, and a copy put back in its own row too.
		require.NoError(t, ss.PutSealed(ctx, repoScope, "DEPLOY_KEY", sealed))
		require.Equal(t, "deploy-key-value",
			fetch(t, ctx, s, secrets.Request{Scopes: []secrets.Scope{repoScope}, Names: []string{"DEPLOY_KEY"}})["DEPLOY_KEY"].Value)

		// Another keyring's key of the same ID does not open it either.
		impostor := newStore(t, NewKeyring(t, NewKey(t, "k1")))
		_, err = impostor.Fetch(ctx, secrets.Request{Scopes: []secrets.Scope{repoScope}, Names: []string{"DEPLOY_KEY"}})
		require.ErrorIs(t, err, secrets.ErrOpen)
	})

	t.Run("RotationWithoutDowntime", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		k1, k2 := NewKey(t, "k1"), NewKey(t, "k2")
		old := newStore(t, NewKeyring(t, k1))
		const total, replaced = 250, 50
		names := make([]string, total)
		for i := range names {
			names[i] = fmt.Sprintf("S%03d", i)
			require.NoError(t, old.Set(ctx, repoScope, names[i], "old-value-"+names[i]))
		}
		// A name in the organisation too: the repository's still wins.
		require.NoError(t, old.Set(ctx, orgScope, names[0], "org-value"))

		newOnly := newStore(t, NewKeyring(t, k2))
		_, err := newOnly.Fetch(ctx, secrets.Request{Scopes: jobScopes, Names: names[:10]})
		require.ErrorIs(t, err, secrets.ErrKeyUnknown, "before Rewrap, the new key alone does not open the old values")
		require.ErrorContains(t, err, `"k1"`)

		rotated := newStore(t, NewKeyring(t, k2, k1))
		okValue := func(name, value string) bool {
			return value == "old-value-"+name || value == "new-value-"+name
		}
		stop := make(chan struct{})
		started := make(chan struct{})
		errs := make(chan error, 4)
		var fetchers, setter sync.WaitGroup
		for g := range 2 {
			fetchers.Go(func() {
				for i := 0; ; i++ {
					part := names[(i*37+g*100)%(total-secrets.MaxSecretsPerJob):][:secrets.MaxSecretsPerJob]
					got, err := rotated.Fetch(ctx, secrets.Request{Scopes: jobScopes, Names: part})
					if err != nil {
						errs <- fmt.Errorf("Fetch during the rotation: %w", err)
						return
					}
					if len(got) != len(part) {
						errs <- fmt.Errorf("Fetch during the rotation returned %d of %d secrets", len(got), len(part))
						return
					}
					for _, s := range got {
						if !okValue(s.Name, s.Value) || s.Scope != repoScope {
							errs <- fmt.Errorf("Fetch during the rotation returned a wrong value of %s from %s", s.Name, s.Scope)
							return
						}
					}
					if i == 0 && g == 0 {
						close(started)
					}
					select {
					case <-stop:
						return
					default:
					}
				}
			})
		}
		select {
		case <-started:
		case err := <-errs:
			require.NoError(t, err)
		}
		setter.Go(func() {
			for _, n := range names[:replaced] {
				if err := rotated.Set(ctx, repoScope, n, "new-value-"+n); err != nil {
					errs <- fmt.Errorf("Set during the rotation: %w", err)
					return
				}
			}
		})
		n, err := rotated.Rewrap(ctx)
		setter.Wait()
		close(stop)
		fetchers.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.NoError(t, err)
		require.GreaterOrEqual(t, n, total+1-replaced, "Rewrap rewraps what the new key did not seal")
		require.LessOrEqual(t, n, total+1)
		n, err = rotated.Rewrap(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "a second Rewrap has nothing to do")

		// The old key can go: the new one alone opens everything.
		newOnly = newStore(t, NewKeyring(t, k2))
		for part := range slices.Chunk(names, secrets.MaxSecretsPerJob) {
			got := fetch(t, ctx, newOnly, secrets.Request{Scopes: jobScopes, Names: part})
			require.Len(t, got, len(part))
			for name, f := range got {
				want := "old-value-" + name
				if name < names[replaced] {
					want = "new-value-" + name
				}
				require.Equal(t, want, f.Value, "a Set during Rewrap keeps its value")
			}
		}
		got := fetch(t, ctx, newOnly, secrets.Request{Scopes: []secrets.Scope{orgScope}, Names: names[:1]})
		require.Equal(t, "org-value", got[names[0]].Value)
		list, err := newOnly.List(ctx, repoScope)
		require.NoError(t, err)
		require.Len(t, list, total)
		for _, i := range list {
			require.Equal(t, "k2", i.KeyID)
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		t.Parallel()
		s := newStore(t, NewKeyring(t, NewKey(t, "k1")))
		ctx := t.Context()
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for g := range 8 {
			wg.Go(func() {
				scope := secrets.EnvScope("acme/api", fmt.Sprint("env", g))
				for i := range 20 {
					name := fmt.Sprintf("C%02d", i)
					value := fmt.Sprintf("value-%d-%d", g, i)
					if err := s.Set(ctx, scope, name, value); err != nil {
						errs <- err
						return
					}
					got, err := s.Fetch(ctx, secrets.Request{Scopes: []secrets.Scope{scope, repoScope}, Names: []string{name}})
					if err != nil {
						errs <- err
						return
					}
					if len(got) != 1 || got[0].Value != value {
						errs <- fmt.Errorf("Fetch after Set of %s in %s: %d secrets", name, scope, len(got))
						return
					}
					if i%2 == 1 {
						if err := s.Delete(ctx, scope, name); err != nil {
							errs <- err
							return
						}
					}
					if _, err := s.List(ctx, scope); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		for g := range 8 {
			list, err := s.List(ctx, secrets.EnvScope("acme/api", fmt.Sprint("env", g)))
			require.NoError(t, err)
			require.Len(t, list, 10)
		}
	})

	t.Run("Cancelled", func(t *testing.T) {
		t.Parallel()
		s := newStore(t, NewKeyring(t, NewKey(t, "k1")))
		require.NoError(t, s.Set(t.Context(), repoScope, "KEPT", "kept-value"))
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		require.ErrorIs(t, s.Set(ctx, repoScope, "X", "value"), context.Canceled)
		_, err := s.List(ctx, repoScope)
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorIs(t, s.Delete(ctx, repoScope, "KEPT"), context.Canceled)
		_, err = s.Rewrap(ctx)
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, "kept-value", fetch(t, t.Context(), s, secrets.Request{Scopes: jobScopes, Names: []string{"KEPT"}})["KEPT"].Value)
	})
}
