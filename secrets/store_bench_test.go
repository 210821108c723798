package secrets_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/internal/pgtest"
	"github.com/cikit/cikit/internal/smtest"
	"github.com/cikit/cikit/secrets"
	"github.com/cikit/cikit/secrets/secretstest"
)

// benchRequest is a job's request: 20 names in its three scopes, each
// held by one of them.
func benchRequest() (secrets.Request, map[secrets.Scope]map[string]string) {
	scopes := []secrets.Scope{secrets.EnvScope("acme/api", "prod"), secrets.RepoScope("acme/api"), secrets.OrgScope("acme")}
	seed := map[secrets.Scope]map[string]string{}
	r := secrets.Request{Scopes: scopes}
	for i := range 20 {
		name := fmt.Sprintf("SECRET_%02d", i)
		sc := scopes[i%3]
		if seed[sc] == nil {
			seed[sc] = map[string]string{}
		}
		seed[sc][name] = fmt.Sprintf("value-%02d-of-a-typical-length-0123456789", i)
		r.Names = append(r.Names, name)
	}
	return r, seed
}

func benchFetch(b *testing.B, p secrets.Provider, r secrets.Request) {
	b.ReportAllocs()
	for b.Loop() {
		got, err := p.Fetch(b.Context(), r)
		if err != nil || len(got) != len(r.Names) {
			b.Fatalf("Fetch = %d secrets, %v", len(got), err)
		}
	}
}

func seedStore(b *testing.B, s secrets.Store, seed map[secrets.Scope]map[string]string) {
	for sc, values := range seed {
		for n, v := range values {
			require.NoError(b, s.Set(b.Context(), sc, n, v))
		}
	}
}

func BenchmarkFetch(b *testing.B) {
	r, seed := benchRequest()
	kr := secretstest.NewKeyring(b, secretstest.NewKey(b, "k1"))
	b.Run("memory", func(b *testing.B) {
		s := secrets.NewMemoryStore(kr)
		seedStore(b, s, seed)
		benchFetch(b, s, r)
	})
	b.Run("postgres", func(b *testing.B) {
		db := pgtest.New(b)
		s, err := secrets.NewPostgresStore(db.Pool, kr)
		require.NoError(b, err)
		require.NoError(b, s.Migrate(b.Context()))
		seedStore(b, s, seed)
		benchFetch(b, s, r)
	})
	b.Run("aws-local", func(b *testing.B) {
		srv := smtest.New(b)
		a, err := secrets.NewAWS(secrets.AWSConfig{Client: srv.Client()})
		require.NoError(b, err)
		for sc, values := range seed {
			for n, v := range values {
				srv.Put(a.SecretID(sc, n), v)
			}
		}
		benchFetch(b, a, r)
	})
}
