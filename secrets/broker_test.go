package secrets_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/secrets"
)

// brokerAudience is the audience of the tokens the broker takes.
const brokerAudience = "https://ci.example.com/v1/secrets"

type brokerBundle struct {
	oidc   *oidcBundle
	store  *secrets.MemoryStore
	broker *secrets.Broker
}

// newBroker returns a broker over a memory store holding DEPLOY_TOKEN in
// repo:acme/api and PROD_KEY in env:acme/api:prod, an org-wide ORG_TOKEN,
// and another repository's DEPLOY_TOKEN; and the extra providers after
// the store.
func newBroker(t *testing.T, leases secrets.LeaseHolder, extra ...secrets.Provider) *brokerBundle {
	t.Helper()
	o := newOIDC(t, secrets.IssuerConfig{})
	st := secrets.NewMemoryStore(oidcKeyring(t, "store", 3))
	ctx := context.Background()
	for _, s := range []struct {
		scope       secrets.Scope
		name, value string
	}{
		{secrets.RepoScope("acme/api"), "DEPLOY_TOKEN", "deploy-token-of-api"},
		{secrets.EnvScope("acme/api", "prod"), "PROD_KEY", "prod-key-of-api"},
		{secrets.EnvScope("acme/api", "prod"), "DEPLOY_TOKEN", "deploy-token-of-prod"},
		{secrets.OrgScope("acme"), "ORG_TOKEN", "org-token-of-acme"},
		{secrets.RepoScope("evil/fork"), "DEPLOY_TOKEN", "deploy-token-of-evil"},
	} {
		require.NoError(t, st.Set(ctx, s.scope, s.name, s.value))
	}
	b, err := secrets.NewBroker(secrets.BrokerConfig{Verifier: o.iss.Verifier(brokerAudience), Replays: secrets.NewMemoryReplays(o.clock.Now),
		Providers: append([]secrets.Provider{st}, extra...), Leases: leases, Logger: quietLog})
	require.NoError(t, err)
	return &brokerBundle{oidc: o, store: st, broker: b}
}

func (b *brokerBundle) token(t *testing.T, id secrets.Identity, aud string) string {
	t.Helper()
	tok, err := b.oidc.iss.Issue(context.Background(), id, aud)
	require.NoError(t, err)
	return tok
}

func want(id secrets.Identity, names ...string) secrets.Want {
	return secrets.Want{RunID: id.RunID, JobID: id.JobID, Attempt: id.RunAttempt, Names: names}
}

func TestBrokerReleasesExactlyTheNamedSecretsOfTheJobsScopes(t *testing.T) {
	t.Parallel()
	b := newBroker(t, nil)
	ctx := t.Context()

	id := pushIdentity()
	g, err := b.broker.Release(ctx, b.token(t, id, brokerAudience), want(id, "DEPLOY_TOKEN", "ORG_TOKEN"))
	require.NoError(t, err)
	require.Equal(t, map[string]string{"DEPLOY_TOKEN": "deploy-token-of-api", "ORG_TOKEN": "org-token-of-acme"}, g.Values, "never more than named")
	require.Equal(t, []secrets.Scope{secrets.RepoScope("acme/api"), secrets.OrgScope("acme")}, g.Scopes)
	require.NotContains(t, g.String(), "deploy-token", "a grant's string shows no value")

	// The environment's scope comes first, and only for a job of it.
	prod := id
	prod.Environment, prod.RunID = "prod", "1235"
	g, err = b.broker.Release(ctx, b.token(t, prod, brokerAudience), want(prod, "DEPLOY_TOKEN", "PROD_KEY"))
	require.NoError(t, err)
	require.Equal(t, map[string]string{"DEPLOY_TOKEN": "deploy-token-of-prod", "PROD_KEY": "prod-key-of-api"}, g.Values)
	require.Equal(t, secrets.EnvScope("acme/api", "prod"), g.From["PROD_KEY"])
	_, err = b.broker.Release(ctx, b.token(t, withRun(id, "1236"), brokerAudience), want(withRun(id, "1236"), "PROD_KEY"))
	var missing *secrets.MissingError
	require.ErrorAs(t, err, &missing, "a job of no environment reads no environment's secrets")
	require.ErrorIs(t, err, secrets.ErrNotFound)
	require.Equal(t, []string{"PROD_KEY"}, missing.Names)
	require.Contains(t, err.Error(), "secret PROD_KEY not found in the scopes the job may read (repo:acme/api, org:acme)")

	// Another repository asking for the same names gets nothing of
	// acme's, and no value of a secret found when another is missing.
	other := withRun(id, "1237")
	other.Repository = "other/app"
	_, err = b.broker.Release(ctx, b.token(t, other, brokerAudience), want(other, "DEPLOY_TOKEN", "ORG_TOKEN"))
	require.ErrorAs(t, err, &missing)
	require.Equal(t, []string{"DEPLOY_TOKEN", "ORG_TOKEN"}, missing.Names)
	require.Contains(t, err.Error(), "(repo:other/app, org:other)")

	// A pull request from a fork gets nothing at all.
	fork := withRun(id, "1238")
	fork.Fork, fork.PullRequest, fork.HeadRef, fork.Ref = true, true, "feature", "refs/pull/7/merge"
	g, err = b.broker.Release(ctx, b.token(t, fork, brokerAudience), want(fork, "DEPLOY_TOKEN"))
	require.NoError(t, err)
	require.True(t, g.Withheld)
	require.Empty(t, g.Values)
}

func withRun(id secrets.Identity, run string) secrets.Identity {
	id.RunID = run
	return id
}

func TestBrokerRefusesBadTokens(t *testing.T) {
	t.Parallel()
	b := newBroker(t, nil)
	ctx := t.Context()
	id := pushIdentity()

	tok := b.token(t, id, brokerAudience)
	_, err := b.broker.Release(ctx, tok, want(id, "DEPLOY_TOKEN"))
	require.NoError(t, err)
	_, err = b.broker.Release(ctx, tok, want(id, "DEPLOY_TOKEN"))
	require.ErrorIs(t, err, secrets.ErrReplayed, "a token releases once")

	id2 := withRun(id, "2000")
	_, err = b.broker.Release(ctx, b.token(t, id2, "sts.amazonaws.com"), want(id2, "DEPLOY_TOKEN"))
	require.ErrorIs(t, err, secrets.ErrTokenInvalid, "a token for a cloud is no token for secrets")

	// The token of one job does not fetch another's secrets.
	_, err = b.broker.Release(ctx, b.token(t, id2, brokerAudience), want(withRun(id, "2001"), "DEPLOY_TOKEN"))
	require.ErrorIs(t, err, secrets.ErrForbidden)

	// Forged: signed by another issuer's key.
	forger := newOIDC(t, secrets.IssuerConfig{})
	forged, err := forger.iss.Issue(ctx, withRun(id, "2002"), brokerAudience)
	require.NoError(t, err)
	_, err = b.broker.Release(ctx, forged, want(withRun(id, "2002"), "DEPLOY_TOKEN"))
	require.ErrorIs(t, err, secrets.ErrTokenInvalid)

	// Expired.
	id3 := withRun(id, "2003")
	late := b.token(t, id3, brokerAudience)
	b.oidc.clock.Advance(b.oidc.iss.TokenTTL() + 2*time.Minute)
	_, err = b.broker.Release(ctx, late, want(id3, "DEPLOY_TOKEN"))
	require.ErrorIs(t, err, secrets.ErrTokenInvalid)

	// Names a job may not ask for.
	id4 := withRun(id, "2004")
	_, err = b.broker.Release(ctx, b.token(t, id4, brokerAudience), want(id4, "*"))
	require.ErrorIs(t, err, secrets.ErrInvalid)
	many := make([]string, secrets.MaxSecretsPerJob+1)
	for i := range many {
		many[i] = "S" + strings.Repeat("X", i)
	}
	id5 := withRun(id, "2005")
	_, err = b.broker.Release(ctx, b.token(t, id5, brokerAudience), want(id5, many...))
	require.ErrorIs(t, err, secrets.ErrInvalid)
}

// TestBrokerLeasesDynamicSecrets: a dynamic secret's lease is held for
// its attempt, renewed and revoked through the broker; and a release
// that fails revokes what it had leased.
func TestBrokerLeasesDynamicSecrets(t *testing.T) {
	t.Parallel()
	dyn := newDynBundle(t, nil)
	keeper, err := secrets.NewKeeper(secrets.KeeperConfig{Leases: secrets.NewMemoryLeaseStore(), Providers: []secrets.Dynamic{dyn.p}, Now: dyn.clock.Now, Logger: quietLog})
	require.NoError(t, err)
	b := newBroker(t, keeper, dyn.p)
	ctx := t.Context()
	id := pushIdentity()

	g, err := b.broker.Release(ctx, b.token(t, id, brokerAudience), want(id, "DEPLOY_TOKEN", "DB"))
	require.NoError(t, err)
	require.Len(t, g.Leases, 1)
	role := g.Leases[0].ID
	require.True(t, strings.HasPrefix(g.Values["DB"], "postgres"), "the dynamic secret is a connection URL")
	_, live := dyn.validUntil(t, role)
	require.True(t, live, "the credential exists while its job runs")
	require.NoError(t, b.broker.Renew(ctx, id.RunID, id.JobID, id.RunAttempt))
	require.NoError(t, b.broker.End(ctx, id.RunID, id.JobID, id.RunAttempt))
	_, live = dyn.validUntil(t, role)
	require.False(t, live, "the credential is dropped when its job ends")

	// DB is leased, then MISSING is not found: nothing stays leased.
	id2 := withRun(id, "3000")
	_, err = b.broker.Release(ctx, b.token(t, id2, brokerAudience), want(id2, "DB", "MISSING"))
	require.ErrorIs(t, err, secrets.ErrNotFound)
	var n int
	require.NoError(t, dyn.db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid WHERE g.rolname = $1`, dyn.reader).Scan(&n))
	require.Zero(t, n, "a failed release leaves no credential behind")
}

func TestScopesFor(t *testing.T) {
	t.Parallel()
	c := &secrets.Claims{Repository: "acme/platform/api", Environment: "review/feature-1"}
	require.Equal(t, []secrets.Scope{secrets.EnvScope("acme/platform/api", "review/feature-1"), secrets.RepoScope("acme/platform/api"),
		secrets.OrgScope("acme/platform"), secrets.OrgScope("acme")}, secrets.ScopesFor(c), "GitLab subgroups inherit their parents' secrets")
	require.Nil(t, secrets.ScopesFor(&secrets.Claims{Repository: "acme/api", Fork: true}))
	require.Nil(t, secrets.ScopesFor(nil))
}

func TestIdentityFor(t *testing.T) {
	t.Parallel()
	jc := &cikit.JobContext{RunID: "r1", Attempt: 2, RunContext: cikit.RunContext{Repository: "acme/api", Ref: "refs/pull/7/merge", SHA: "abc",
		Event: "pull_request", HeadRef: "feature", BaseRef: "main", PRNumber: 7, Fork: true, Actor: "mallory"}}
	spec := &cikit.JobSpec{ID: "deploy", Environment: &cikit.Environment{Name: "prod"}}
	id := secrets.IdentityFor(jc, spec, "self-hosted")
	require.Equal(t, secrets.Identity{Repository: "acme/api", Ref: "refs/pull/7/merge", SHA: "abc", Environment: "prod", EventName: "pull_request",
		Actor: "mallory", HeadRef: "feature", BaseRef: "main", Fork: true, PullRequest: true, RunID: "r1", RunAttempt: 2, JobID: "deploy",
		RunnerEnvironment: "self-hosted"}, id)
	// An environment the runner would still have to expand is none.
	spec.Environment.Name = "review/$CI_COMMIT_REF_SLUG"
	require.Empty(t, secrets.IdentityFor(jc, spec, "").Environment)
}
