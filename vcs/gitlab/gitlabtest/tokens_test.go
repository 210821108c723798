package gitlabtest_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/vcs/gitlab/gitlabtest"
)

// TestDeployTokens: deploy tokens are created, validated, listed without
// their secret and deleted as GitLab does.
func TestDeployTokens(t *testing.T) {
	t.Parallel()
	b := setup(t, gitlabtest.Config{})
	_, err := b.srv.CreateProject("group/api", "main")
	require.NoError(t, err)
	future := b.clock.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	past := b.clock.Now().Add(-time.Second).UTC().Format(time.RFC3339)

	for _, body := range []string{
		`{"scopes":["read_repository"]}`, // no name
		`{"name":"x"}`,                   // no scopes
		`{"name":"x","scopes":["api"]}`,  // not a deploy token scope
		`{"name":"x","scopes":["read_repository"],"expires_at":"tomorrow"}`,
		`{"name":"x","scopes":["read_repository"],"expires_at":"` + past + `"}`,
		`{"name":`,
	} {
		r := b.do(t, "POST", "projects/group%2Fapi/deploy_tokens", strings.NewReader(body), "Content-Type", "application/json")
		require.Equal(t, http.StatusBadRequest, r.code, "%s: %s", body, r.body)
	}
	names, err := b.srv.DeployTokens("group/api")
	require.NoError(t, err)
	require.Empty(t, names)

	r := b.do(t, "POST", "projects/group%2Fapi/deploy_tokens",
		strings.NewReader(`{"name":"ci","scopes":["read_repository"],"expires_at":"`+future+`"}`), "Content-Type", "application/json")
	require.Equal(t, http.StatusCreated, r.code, r.body)
	var tok struct {
		ID        int      `json:"id"`
		Username  string   `json:"username"`
		Token     string   `json:"token"`
		ExpiresAt string   `json:"expires_at"`
		Scopes    []string `json:"scopes"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.body), &tok))
	require.Equal(t, "gitlab+deploy-token-"+strconv.Itoa(tok.ID), tok.Username)
	require.True(t, strings.HasPrefix(tok.Token, "gldt-"))
	require.Equal(t, future, tok.ExpiresAt)
	require.Equal(t, []string{"read_repository"}, tok.Scopes)

	r = b.get(t, "projects/group%2Fapi/deploy_tokens")
	require.Equal(t, http.StatusOK, r.code)
	require.NotContains(t, r.body, tok.Token, "a list never shows the token")
	require.Contains(t, r.body, `"name":"ci"`)

	// A deploy token is no API token.
	req, err := http.NewRequest("GET", b.ts.URL+"/api/v4/projects/group%2Fapi", nil)
	require.NoError(t, err)
	req.Header.Set("PRIVATE-TOKEN", tok.Token)
	resp, err := b.ts.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	b.clock.Advance(time.Hour)
	names, err = b.srv.DeployTokens("group/api")
	require.NoError(t, err)
	require.Empty(t, names, "expired")

	r = b.do(t, "DELETE", "projects/group%2Fapi/deploy_tokens/"+strconv.Itoa(tok.ID), nil)
	require.Equal(t, http.StatusNoContent, r.code)
	r = b.do(t, "DELETE", "projects/group%2Fapi/deploy_tokens/"+strconv.Itoa(tok.ID), nil)
	require.Equal(t, http.StatusNotFound, r.code)
	require.Equal(t, 1, b.srv.GitStats().DeployTokensDeleted)
}
