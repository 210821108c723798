package config

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPolicyEnvironmentsFromTheFile(t *testing.T) {
	c := Default()
	require.NoError(t, c.DecodeYAML(strings.NewReader(`
policy:
  file: /etc/cikit/policy.rego
  protected-branches: [release/*]
  protected-tags: [v*]
  approval-expiry: 24h
  environments:
    - name: production
      repos: [acme/*]
      reviewers: [alice, role:approve]
      wait-timer: 5m
      refs: [main, v*]
auth:
  oidc:
    issuer: https://gitlab.example.com
    client-id: cikit
    default-roles: [read:acme]
`)))
	require.NoError(t, c.Validate())
	require.Equal(t, []Environment{{Name: "production", Repos: []string{"acme/*"}, Reviewers: []string{"alice", "role:approve"}, WaitTimer: 5 * time.Minute, Refs: []string{"main", "v*"}}}, c.Policy.Environments)
	require.Equal(t, 24*time.Hour, c.Policy.ApprovalExpiry)
	for _, s := range c.Settings() {
		require.NotContains(t, s.Name, "policy.environments", "environments are set in the file only")
	}
}

func TestTrustSettingsRefused(t *testing.T) {
	c := Default()
	require.NoError(t, c.DecodeYAML(strings.NewReader(`
http:
  webhook-listen: nowhere
policy:
  protected-branches: ["[oops"]
  environments:
    - name: ""
      wait-timer: 800h
      reviewers: ["two words"]
auth:
  oidc:
    issuer: ftp://example.com
    default-roles: [owner:acme]
  token-ttl: 48h
  token-max-ttl: 24h
`)))
	err := c.Validate()
	require.Error(t, err)
	for _, want := range []string{
		"http.webhook-listen: must be host:port",
		`policy.protected-branches: "[oops" is not a pattern`,
		"policy.environments[0].name: must be 1 to 255 bytes",
		"policy.environments[0].wait-timer: 800h0m0s; from 0 to 30 days",
		`policy.environments[0].reviewers: "two words" is not a login`,
		`auth.oidc.issuer: "ftp://example.com" is not an http(s) URL`,
		"auth.oidc.client-id: required with auth.oidc.issuer",
		`"owner:acme": the role must be read, trigger, approve or admin`,
		"auth.token-ttl (48h0m0s) is longer than auth.token-max-ttl (24h0m0s)",
	} {
		require.Contains(t, err.Error(), want)
	}
}

func TestParseRoleGrant(t *testing.T) {
	for in, want := range map[string][3]string{
		"admin":                  {"admin", "", ""},
		"read:acme":              {"read", "acme", ""},
		"trigger:acme/api":       {"trigger", "acme", "api"},
		"approve:acme/group/api": {"approve", "acme/group", "api"},
	} {
		role, org, repo, err := ParseRoleGrant(in)
		require.NoError(t, err, in)
		require.Equal(t, want, [3]string{role, org, repo}, in)
	}
	for _, in := range []string{"", "root", "read:", "read:acme/", "read:/api", "read:a//b", "read:a b"} {
		_, _, _, err := ParseRoleGrant(in)
		require.Error(t, err, in)
	}
}
