package secretstest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/secrets"
)

// ProviderFactory returns a new provider holding exactly the secrets of
// seed, by scope and name, and nothing else.
type ProviderFactory func(t *testing.T, seed map[secrets.Scope]map[string]string) secrets.Provider

// Scopes of the suites: an environment of a repository of an
// organisation, narrowest first, as secrets.ScopesFor gives them, and a
// neighbour of each that a request never names.
var (
	envScope   = secrets.EnvScope("acme/api", "prod")
	repoScope  = secrets.RepoScope("acme/api")
	orgScope   = secrets.OrgScope("acme")
	otherEnv   = secrets.EnvScope("acme/api", "staging")
	otherRepo  = secrets.RepoScope("acme/web")
	otherOrg   = secrets.OrgScope("umbrella")
	jobScopes  = []secrets.Scope{envScope, repoScope, orgScope}
	someValues = []string{
		"hunter22", "pa ss\nword\twith \"quotes\" and = signs", "ünïcødé-välüe-🔑", "$HOME ${PATH} `id`",
		strings.Repeat("x", 4), strings.Repeat("long", 1000),
	}
)

// found is what a Fetch returned, by name.
type found struct {
	Value string
	Scope secrets.Scope
}

func fetch(t *testing.T, ctx context.Context, p secrets.Provider, r secrets.Request) map[string]found {
	t.Helper()
	got, err := p.Fetch(ctx, r)
	require.NoError(t, err)
	return byName(t, got)
}

func byName(t *testing.T, got []secrets.Secret) map[string]found {
	t.Helper()
	out := map[string]found{}
	for _, s := range got {
		_, dup := out[s.Name]
		require.False(t, dup, "Fetch returned %s twice", s.Name)
		require.Nil(t, s.Lease, "a static secret has no lease")
		out[s.Name] = found{s.Value, s.Scope}
	}
	return out
}

// RunProviderTests runs the conformance suite of secrets.Provider
// against the providers newProvider makes: scope precedence as the
// request orders its scopes, names it lacks left out, requests of many
// names, concurrent fetches, invalid requests refused with
// secrets.ErrInvalid, and a cancelled context.
func RunProviderTests(t *testing.T, newProvider ProviderFactory) {
	t.Run("Precedence", func(t *testing.T) {
		t.Parallel()
		p := newProvider(t, map[secrets.Scope]map[string]string{
			envScope:  {"SHARED": "env-value", "ENV_ONLY": "env-only"},
			repoScope: {"SHARED": "repo-value", "REPO_ONLY": "repo-only", "REPO_ORG": "repo-over-org"},
			orgScope:  {"SHARED": "org-value", "ORG_ONLY": "org-only", "REPO_ORG": "org-under-repo"},
			otherEnv:  {"SHARED": "staging", "STAGING_ONLY": "staging-only"},
			otherRepo: {"SHARED": "web-value", "WEB_ONLY": "web-only"},
			otherOrg:  {"SHARED": "umbrella", "UMBRELLA_ONLY": "umbrella-only"},
		})
		ctx := t.Context()
		names := []string{"SHARED", "ENV_ONLY", "REPO_ONLY", "ORG_ONLY", "REPO_ORG", "STAGING_ONLY", "WEB_ONLY", "UMBRELLA_ONLY", "MISSING"}
		require.Equal(t, map[string]found{
			"SHARED":    {"env-value", envScope},
			"ENV_ONLY":  {"env-only", envScope},
			"REPO_ONLY": {"repo-only", repoScope},
			"ORG_ONLY":  {"org-only", orgScope},
			"REPO_ORG":  {"repo-over-org", repoScope},
		}, fetch(t, ctx, p, secrets.Request{Scopes: jobScopes, Names: names}),
			"the narrowest scope holding a name gives it; other scopes give nothing")
		require.Equal(t, map[string]found{
			"SHARED":    {"repo-value", repoScope},
			"REPO_ONLY": {"repo-only", repoScope},
			"ORG_ONLY":  {"org-only", orgScope},
			"REPO_ORG":  {"repo-over-org", repoScope},
		}, fetch(t, ctx, p, secrets.Request{Scopes: []secrets.Scope{repoScope, orgScope}, Names: names}))
		require.Equal(t, map[string]found{
			"SHARED":    {"org-value", orgScope},
			"REPO_ONLY": {"repo-only", repoScope},
			"ORG_ONLY":  {"org-only", orgScope},
			"REPO_ORG":  {"org-under-repo", orgScope},
		}, fetch(t, ctx, p, secrets.Request{Scopes: []secrets.Scope{orgScope, repoScope}, Names: names}),
			"precedence is the order of r.Scopes, not of scope kinds")
		require.Equal(t, map[string]found{"SHARED": {"env-value", envScope}},
			fetch(t, ctx, p, secrets.Request{Scopes: jobScopes, Names: []string{"SHARED", "SHARED"}}),
			"a name asked twice is given once")
		require.Empty(t, fetch(t, ctx, p, secrets.Request{Names: names}), "no scope, no secret")
		require.Empty(t, fetch(t, ctx, p, secrets.Request{Scopes: jobScopes}), "no name, no secret")
	})

	t.Run("MissingLeftOut", func(t *testing.T) {
		t.Parallel()
		p := newProvider(t, map[secrets.Scope]map[string]string{repoScope: {"THERE": "is-there"}})
		ctx := t.Context()
		require.Empty(t, fetch(t, ctx, p, secrets.Request{Scopes: jobScopes, Names: []string{"NOT_THERE", "NOR_THIS"}}))
		require.Equal(t, map[string]found{"THERE": {"is-there", repoScope}},
			fetch(t, ctx, p, secrets.Request{Scopes: jobScopes, Names: []string{"NOT_THERE", "THERE"}}))
		require.Empty(t, fetch(t, ctx, p, secrets.Request{Scopes: jobScopes, Names: []string{"there"}}), "names are case-sensitive")
		require.Empty(t, fetch(t, ctx, p, secrets.Request{Scopes: []secrets.Scope{otherRepo}, Names: []string{"THERE"}}))
	})

	t.Run("ManyNames", func(t *testing.T) {
		t.Parallel()
		seed, want := manySecrets()
		p := newProvider(t, seed)
		names := make([]string, 0, len(want))
		for n := range want {
			names = append(names, n)
		}
		require.Len(t, names, secrets.MaxSecretsPerJob)
		got := fetch(t, t.Context(), p, secrets.Request{Scopes: jobScopes, Names: names})
		require.Equal(t, want, got)
	})

	t.Run("ConcurrentFetch", func(t *testing.T) {
		t.Parallel()
		seed, want := manySecrets()
		p := newProvider(t, seed)
		names := make([]string, 0, len(want))
		for n := range want {
			names = append(names, n)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for g := range 8 {
			wg.Go(func() {
				for i := range 5 {
					// Each goroutine asks for a window of the names.
					part := names[(g*7+i)%50:][:50]
					got, err := p.Fetch(t.Context(), secrets.Request{Scopes: jobScopes, Names: part})
					if err != nil {
						errs <- err
						return
					}
					if len(got) != len(part) {
						errs <- fmt.Errorf("Fetch of %d names returned %d secrets", len(part), len(got))
						return
					}
					for _, s := range got {
						if w := want[s.Name]; w.Value != s.Value || w.Scope != s.Scope {
							errs <- fmt.Errorf("Fetch returned %s from %s; want it from %s", s.Name, s.Scope, w.Scope)
							return
						}
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	})

	t.Run("InvalidRequest", func(t *testing.T) {
		t.Parallel()
		p := newProvider(t, map[secrets.Scope]map[string]string{repoScope: {"OK": "okay-value"}})
		tooMany := make([]string, secrets.MaxSecretsPerJob+1)
		for i := range tooMany {
			tooMany[i] = fmt.Sprintf("S%03d", i)
		}
		for name, r := range map[string]secrets.Request{
			"bad scope kind":     {Scopes: []secrets.Scope{{Kind: "team", Org: "acme"}}, Names: []string{"OK"}},
			"repo without owner": {Scopes: []secrets.Scope{secrets.RepoScope("api")}, Names: []string{"OK"}},
			"dot-dot in a scope": {Scopes: []secrets.Scope{secrets.RepoScope("acme/..")}, Names: []string{"OK"}},
			"empty scope":        {Scopes: []secrets.Scope{{}}, Names: []string{"OK"}},
			"name with a dash":   {Scopes: jobScopes, Names: []string{"OK", "BAD-NAME"}},
			"platform's name":    {Scopes: jobScopes, Names: []string{"CIKIT_TOKEN"}},
			"empty name":         {Scopes: jobScopes, Names: []string{""}},
			"name of 129 bytes":  {Scopes: jobScopes, Names: []string{strings.Repeat("N", secrets.MaxNameBytes+1)}},
			"too many names":     {Scopes: jobScopes, Names: tooMany},
			"too many scopes":    {Scopes: tooManyScopes(), Names: []string{"OK"}},
		} {
			_, err := p.Fetch(t.Context(), r)
			require.ErrorIs(t, err, secrets.ErrInvalid, name)
		}
	})

	t.Run("Cancelled", func(t *testing.T) {
		t.Parallel()
		p := newProvider(t, map[secrets.Scope]map[string]string{repoScope: {"OK": "okay-value"}})
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := p.Fetch(ctx, secrets.Request{Scopes: jobScopes, Names: []string{"OK"}})
		require.ErrorIs(t, err, context.Canceled)
	})
}

func tooManyScopes() []secrets.Scope {
	var out []secrets.Scope
	for i := range 9 {
		out = append(out, secrets.EnvScope("acme/api", fmt.Sprint("env", i)))
	}
	return out
}

// manySecrets returns secrets.MaxSecretsPerJob names spread over the
// scopes of a job, some of them in several, and what a job gets.
func manySecrets() (map[secrets.Scope]map[string]string, map[string]found) {
	seed := map[secrets.Scope]map[string]string{envScope: {}, repoScope: {}, orgScope: {}, otherRepo: {}}
	want := map[string]found{}
	for i := range secrets.MaxSecretsPerJob {
		name := fmt.Sprintf("SECRET_%03d", i)
		value := fmt.Sprintf("%s-%d", someValues[i%len(someValues)], i)
		// Every name is in the organisation; one in two in the
		// repository too, one in three in the environment too.
		seed[orgScope][name] = value + "-org"
		want[name] = found{value + "-org", orgScope}
		seed[otherRepo][name] = value + "-web"
		if i%2 == 0 {
			seed[repoScope][name] = value + "-repo"
			want[name] = found{value + "-repo", repoScope}
		}
		if i%3 == 0 {
			seed[envScope][name] = value + "-env"
			want[name] = found{value + "-env", envScope}
		}
	}
	return seed, want
}
