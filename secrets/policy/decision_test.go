package policy_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/secrets/policy"
)

func TestAdmission(t *testing.T) {
	t.Parallel()
	d := &policy.Decision{
		Decision: cikit.DecisionRequireApproval, Reason: "held",
		SecretsScopes: []string{"repo:acme/api"}, CacheScope: "fork/pr-1",
		TokenPermissions: map[string]string{}, RunnerLabelsAllowed: []string{},
	}
	require.NoError(t, d.Validate())
	a := d.Admission("p.rego sha256:0123456789ab")
	require.Equal(t, &cikit.Admission{
		Decision: cikit.DecisionRequireApproval, Reason: "held",
		SecretsScopes: []string{"repo:acme/api"}, CacheScope: "fork/pr-1",
		TokenPermissions: map[string]string{}, RunnerLabelsAllowed: []string{},
		Policy: "p.rego sha256:0123456789ab",
	}, a)
	// Empty caps are caps: no token scope, no runner.
	require.NotNil(t, a.TokenPermissions)
	require.False(t, cikit.LabelsAllowed(a.RunnerLabelsAllowed, []string{"linux"}))
	// The admission shares nothing with the decision.
	a.SecretsScopes[0] = "org:other"
	require.Equal(t, "repo:acme/api", d.SecretsScopes[0])

	// Absent caps are no caps; absent scopes are none.
	a = (&policy.Decision{Decision: cikit.DecisionAllow}).Admission("default")
	require.Nil(t, a.TokenPermissions)
	require.Nil(t, a.RunnerLabelsAllowed)
	require.NotNil(t, a.SecretsScopes)
	require.Empty(t, a.SecretsScopes)
}

func TestDecisionValidate(t *testing.T) {
	t.Parallel()
	ok := func() policy.Decision { return policy.Decision{Decision: cikit.DecisionAllow} }
	for _, tc := range []struct {
		name string
		edit func(*policy.Decision)
		want string
	}{
		{"empty decision", func(d *policy.Decision) { d.Decision = "" }, `decision is ""`},
		{"blank reason on deny", func(d *policy.Decision) { d.Decision, d.Reason = cikit.DecisionDeny, "  " }, "reason is empty"},
		{"too many permissions", func(d *policy.Decision) {
			d.TokenPermissions = map[string]string{}
			for i := range policy.MaxDecisionListLen + 1 {
				d.TokenPermissions[string(rune('a'+i%26))+string(rune('a'+i/26))] = "read"
			}
		}, "token_permissions has 65 scopes"},
		{"cache scope with a space", func(d *policy.Decision) { d.CacheScope = "branch/a b" }, "cache_scope"},
		{"cache scope with an empty part", func(d *policy.Decision) { d.CacheScope = "branch//main" }, "cache_scope"},
	} {
		d := ok()
		tc.edit(&d)
		require.ErrorContains(t, d.Validate(), tc.want, tc.name)
	}
	d := ok()
	d.CacheScope, d.RunnerLabelsAllowed = "branch/feature/x", []string{"*", "!self-hosted", "gpu-*"}
	require.NoError(t, d.Validate())
}
