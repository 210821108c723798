package platform_test

import (
	"encoding/base64"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/stretchr/testify/require"
)

// idTokenWorkflow's job requests an ID token for a cloud the way GitHub's
// toolkit does, and prints it.
const idTokenWorkflow = `on: push
permissions:
  id-token: write
jobs:
  cloud:
    runs-on: ubuntu-latest
    steps:
      - run: |
          curl -sSf -H "Authorization: bearer $ACTIONS_ID_TOKEN_REQUEST_TOKEN" "$ACTIONS_ID_TOKEN_REQUEST_URL&audience=sts.amazonaws.com" |
            sed 's/.*"value":"\([^"]*\)".*/token=\1/'
`

// idTokenGitLab's job gets an ID token in CLOUD_TOKEN, masked in its log:
// it prints the token's claims, the middle part.
const idTokenGitLab = `deploy:
  environment: prod
  id_tokens:
    CLOUD_TOKEN:
      aud: https://vault.example.com
  script:
    - printf 'claims=%s\n' "$(printf %s "$CLOUD_TOKEN" | cut -d. -f2)"
    - echo "whole=$CLOUD_TOKEN"
`

// TestIDTokensEndToEnd: the platform is an OIDC issuer a stock client
// (go-oidc, as a cloud) trusts by its URL: a GitHub job with id-token:
// write requests a token for sts.amazonaws.com through
// ACTIONS_ID_TOKEN_REQUEST_URL, and it verifies against the platform's
// discovery document and keys, with the claims clouds match on. A GitLab
// job's id_tokens token is in its variable, masked in its log, with the
// environment's subject.
func TestIDTokensEndToEnd(t *testing.T) {
	w := newWorld(t, map[string]string{".github/workflows/cloud.yml": idTokenWorkflow, ".gitlab-ci.yml": idTokenGitLab})
	w.cfg.Runners.Network = true // the step reaches the server
	s := serve(t, w.cfg)
	base := s.p.URL()
	code, body := deliver(t, base, "delivery-id-tokens", pushBody(w.sha))
	require.Equal(t, 202, code, body)
	states, run := w.waitFileStatuses(t, 120*time.Second, ".github/workflows/cloud.yml", "cloud")
	_, log := jobWorldJob(t, base, run, "cloud")
	require.Equal(t, map[string]string{"cloud": "success"}, states, log)
	m := regexp.MustCompile(`token=([A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)`).FindStringSubmatch(log)
	require.NotNil(t, m, "the step printed its token: %s", log)

	ctx := t.Context()
	provider, err := oidc.NewProvider(ctx, base)
	require.NoError(t, err, "discovery at the platform's URL")
	tok, err := provider.Verifier(&oidc.Config{ClientID: "sts.amazonaws.com"}).Verify(ctx, m[1])
	require.NoError(t, err)
	var claims map[string]any
	require.NoError(t, tok.Claims(&claims))
	require.Equal(t, "repo:"+repoName+":ref:refs/heads/main", claims["sub"])
	require.Equal(t, repoName, claims["repository"])
	require.Equal(t, "acme", claims["repository_owner"])
	require.Equal(t, "refs/heads/main", claims["ref"])
	require.Equal(t, w.sha, claims["sha"])
	require.Equal(t, "push", claims["event_name"])
	require.Equal(t, "cloud", claims["job_id"])
	require.NotEmpty(t, claims["run_id"])
	require.NotEmpty(t, claims["jti"])
	require.InDelta(t, 10*time.Minute.Seconds(), claims["exp"].(float64)-claims["iat"].(float64), 1, "a short expiry")
	_, err = provider.Verifier(&oidc.Config{ClientID: "another-cloud"}).Verify(ctx, m[1])
	require.Error(t, err, "a token for one audience is refused by another")

	gl, glRun := w.waitFileStatuses(t, 120*time.Second, ".gitlab-ci.yml", "deploy")
	_, glog := jobWorldJob(t, base, glRun, "deploy")
	require.Equal(t, map[string]string{"deploy": "success"}, gl, glog)
	require.Contains(t, glog, "whole=***\n", "the token is masked")
	cm := regexp.MustCompile(`claims=([A-Za-z0-9_-]+)`).FindStringSubmatch(glog)
	require.NotNil(t, cm, glog)
	payload, err := base64.RawURLEncoding.DecodeString(cm[1])
	require.NoError(t, err)
	var gc map[string]any
	require.NoError(t, json.Unmarshal(payload, &gc))
	require.Equal(t, "repo:"+repoName+":environment:prod", gc["sub"])
	require.Equal(t, "prod", gc["environment"])
	require.Contains(t, strings.Join(toStrings(gc["aud"]), " "), "https://vault.example.com")
}

func toStrings(v any) []string {
	switch a := v.(type) {
	case string:
		return []string{a}
	case []any:
		out := make([]string, len(a))
		for i, x := range a {
			out[i], _ = x.(string)
		}
		return out
	}
	return nil
}
