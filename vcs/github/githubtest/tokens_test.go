package githubtest_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/vcs/github/githubtest"
)

// TestNarrowedToken: an installation token asked for with repositories
// and permissions sees only those repositories and may only what it was
// granted; what the installation does not have is refused with 422, as
// GitHub does.
func TestNarrowedToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, b.srv.CreateRepo("acme/web", "main"))
	require.NoError(t, b.srv.CreateRepo("acme/outside", "main"))
	id, err := b.srv.Install(7, "acme/api", "acme/web")
	require.NoError(t, err)
	now := b.clock.Now()
	signed := b.jwt(t, appKey(), jwt.SigningMethodRS256, jwt.MapClaims{"iss": "7", "iat": now.Unix(), "exp": now.Add(time.Minute).Unix()})
	mint := func(body string) (*http.Response, map[string]any) {
		resp, text := b.do(t, "POST", "/app/installations/"+jsonNumber(float64(id))+"/access_tokens", signed, "", body)
		return resp, decode(t, text)
	}

	resp, tok := mint(`{"repositories":["api"],"permissions":{"contents":"read"}}`)
	require.Equal(t, http.StatusCreated, resp.StatusCode, tok)
	require.Equal(t, map[string]any{"contents": "read", "metadata": "read"}, tok["permissions"])
	repos := tok["repositories"].([]any)
	require.Len(t, repos, 1)
	require.Equal(t, "acme/api", repos[0].(map[string]any)["full_name"])
	require.Equal(t, b.ts.URL+"/acme/api.git", repos[0].(map[string]any)["clone_url"])
	token := tok["token"].(string)

	for _, c := range []struct {
		method, path string
		code         int
	}{
		{"GET", "/repos/acme/api", http.StatusOK},
		{"GET", "/repos/acme/api/contents/a.txt?ref=" + b.sha, http.StatusOK},
		{"GET", "/repos/acme/web", http.StatusNotFound}, // the installation's, not the token's
		{"GET", "/repos/acme/api/pulls", http.StatusForbidden},
		{"POST", "/repos/acme/api/statuses/" + b.sha, http.StatusForbidden},
		{"POST", "/repos/acme/api/check-runs", http.StatusForbidden},
	} {
		resp, body := b.do(t, c.method, c.path, token, "", `{"state":"success","context":"x","name":"x","head_sha":"`+b.sha+`"}`)
		require.Equal(t, c.code, resp.StatusCode, "%s %s: %s", c.method, c.path, body)
	}

	// By id, and several at once.
	resp, tok = mint(`{"repository_ids":[` + jsonNumber(repoID(t, b, "acme/web")) + `],"repositories":["api"]}`)
	require.Equal(t, http.StatusCreated, resp.StatusCode, tok)
	require.Len(t, tok["repositories"], 2)

	for _, body := range []string{
		`{"repositories":["outside"]}`,              // not the installation's
		`{"repositories":["api","missing"]}`,        // one does not exist
		`{"permissions":{"administration":"read"}}`, // not granted
		`{"permissions":{"contents":"write"}}`,      // more than granted
		`{"permissions":{"contents":"admin"}}`,      // no such level
	} {
		resp, answer := mint(body)
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "%s: %v", body, answer)
	}
	resp, _ = mint(`{"repositories":`)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)

	// Revoking ends a token; only an installation token can be revoked.
	resp, _ = b.do(t, "DELETE", "/installation/token", token, "", "")
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	resp, _ = b.do(t, "GET", "/repos/acme/api", token, "", "")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp, _ = b.do(t, "DELETE", "/installation/token", pat, "", "")
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Equal(t, 1, b.srv.Stats().TokensRevoked)

	// What each token issued was narrowed to, and which was revoked.
	issued := b.srv.IssuedTokens()
	require.Len(t, issued, 2, "refused asks issue nothing")
	require.Equal(t, githubtest.IssuedToken{Installation: id, Repositories: []string{"acme/api"},
		Permissions: map[string]string{"contents": "read", "metadata": "read"}, Revoked: true}, issued[0])
	require.Equal(t, githubtest.IssuedToken{Installation: id, Repositories: []string{"acme/api", "acme/web"}}, issued[1])
}

func repoID(t *testing.T, b *bundle, repo string) float64 {
	t.Helper()
	resp, body := b.do(t, "GET", "/repos/"+repo, pat, "", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return decode(t, body)["id"].(float64)
}
