package secrets_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/internal/pgtest"
	"github.com/cikit/cikit/secrets"
	"github.com/cikit/cikit/secrets/secretstest"
)

// perTest keeps one value per test, for factories whose stores of one
// test share their secrets.
type perTest[V any] struct {
	mu sync.Mutex
	m  map[*testing.T]V
}

func (p *perTest[V]) get(t *testing.T, make func() V) (V, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if v, ok := p.m[t]; ok {
		return v, true
	}
	if p.m == nil {
		p.m = map[*testing.T]V{}
	}
	v := make()
	p.m[t] = v
	t.Cleanup(func() { p.mu.Lock(); delete(p.m, t); p.mu.Unlock() })
	return v, false
}

func memoryStores() secretstest.StoreFactory {
	var first perTest[*secrets.MemoryStore]
	return func(t *testing.T, kr *secrets.Keyring) secrets.Store {
		s, existed := first.get(t, func() *secrets.MemoryStore { return secrets.NewMemoryStore(kr) })
		if existed {
			return s.WithKeyring(kr)
		}
		return s
	}
}

func postgresStores() secretstest.StoreFactory {
	var dbs perTest[*pgtest.DB]
	return func(t *testing.T, kr *secrets.Keyring) secrets.Store {
		db, _ := dbs.get(t, func() *pgtest.DB { return pgtest.New(t) })
		s, err := secrets.NewPostgresStore(db.Pool, kr)
		require.NoError(t, err)
		require.NoError(t, s.Migrate(t.Context()))
		return s
	}
}

// seeded makes providers of stores holding seed.
func seeded(stores secretstest.StoreFactory) secretstest.ProviderFactory {
	return func(t *testing.T, seed map[secrets.Scope]map[string]string) secrets.Provider {
		s := stores(t, secretstest.NewKeyring(t, secretstest.NewKey(t, "k1")))
		for scope, values := range seed {
			for name, value := range values {
				require.NoError(t, s.Set(t.Context(), scope, name, value))
			}
		}
		return s
	}
}

func TestMemoryStore(t *testing.T) {
	t.Parallel()
	secretstest.RunStoreTests(t, memoryStores())
}

func TestMemoryStoreProvider(t *testing.T) {
	t.Parallel()
	secretstest.RunProviderTests(t, seeded(memoryStores()))
}

func TestPostgresStore(t *testing.T) {
	t.Parallel()
	secretstest.RunStoreTests(t, postgresStores())
}

func TestPostgresStoreProvider(t *testing.T) {
	t.Parallel()
	secretstest.RunProviderTests(t, seeded(postgresStores()))
}

func TestNewPostgresStoreRefusesNil(t *testing.T) {
	t.Parallel()
	_, err := secrets.NewPostgresStore(nil, secretstest.NewKeyring(t, secretstest.NewKey(t, "k1")))
	require.ErrorContains(t, err, "pool")
	db := pgtest.New(t)
	_, err = secrets.NewPostgresStore(db.Pool, nil)
	require.ErrorContains(t, err, "Keyring")
}

func TestMemoryStoreWithoutKeyring(t *testing.T) {
	t.Parallel()
	s := secrets.NewMemoryStore(nil)
	require.ErrorContains(t, s.Set(t.Context(), secrets.RepoScope("acme/api"), "X", "value"), "no Keyring")
}
