package secrets_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/secrets"
)

// TestBrokerFollowsTheJobsAdmission: the scopes a policy admitted replace
// the token's default mapping, in their order; none withholds every
// secret; a scope that does not parse is refused, not skipped.
func TestBrokerFollowsTheJobsAdmission(t *testing.T) {
	t.Parallel()
	b := newBroker(t, nil)
	ctx := t.Context()
	release := func(id secrets.Identity, adm *cikit.Admission, names ...string) (*secrets.Grant, error) {
		w := want(id, names...)
		w.Admission = adm
		return b.broker.Release(ctx, b.token(t, id, brokerAudience), w)
	}

	// The policy narrows a push to the repository's scope: the org's
	// secret is no longer reachable.
	id := pushIdentity()
	g, err := release(id, &cikit.Admission{Decision: cikit.DecisionAllow, SecretsScopes: []string{"repo:acme/api"}}, "DEPLOY_TOKEN")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"DEPLOY_TOKEN": "deploy-token-of-api"}, g.Values)
	_, err = release(withRun(id, "2"), &cikit.Admission{Decision: cikit.DecisionAllow, SecretsScopes: []string{"repo:acme/api"}}, "ORG_TOKEN")
	var missing *secrets.MissingError
	require.ErrorAs(t, err, &missing)
	require.Equal(t, []string{"ORG_TOKEN"}, missing.Names)

	// The order is the admission's: the environment's value wins only
	// when the policy puts it first.
	g, err = release(withRun(id, "3"), &cikit.Admission{Decision: cikit.DecisionAllow, SecretsScopes: []string{"repo:acme/api", "env:acme/api:prod"}}, "DEPLOY_TOKEN")
	require.NoError(t, err)
	require.Equal(t, "deploy-token-of-api", g.Values["DEPLOY_TOKEN"])

	// No scope: withheld, as a fork without a policy, even for a push.
	g, err = release(withRun(id, "4"), &cikit.Admission{Decision: cikit.DecisionAllow, SecretsScopes: []string{}, Reason: "fork pull request"}, "DEPLOY_TOKEN")
	require.NoError(t, err)
	require.True(t, g.Withheld)
	require.Empty(t, g.Values)
	require.Empty(t, g.Scopes)

	// A platform's own policy may give a fork a scope the default
	// mapping never would.
	fork := withRun(id, "5")
	fork.Fork, fork.PullRequest, fork.HeadRef, fork.Ref = true, true, "feature", "refs/pull/7/merge"
	g, err = release(fork, &cikit.Admission{Decision: cikit.DecisionAllow, SecretsScopes: []string{"org:acme"}}, "ORG_TOKEN")
	require.NoError(t, err)
	require.False(t, g.Withheld)
	require.Equal(t, map[string]string{"ORG_TOKEN": "org-token-of-acme"}, g.Values)

	// A scope that does not parse is the policy's mistake.
	_, err = release(withRun(id, "6"), &cikit.Admission{Decision: cikit.DecisionAllow, SecretsScopes: []string{"planet:earth"}}, "DEPLOY_TOKEN")
	require.ErrorIs(t, err, secrets.ErrInvalid)
	require.Contains(t, err.Error(), `"planet:earth"`)
}
