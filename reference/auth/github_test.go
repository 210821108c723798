package auth_test

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/reference/auth"
)

// fakeGitHub serves GitHub's OAuth endpoints (checking PKCE and the
// client secret) and GET /user for the token it handed out.
func fakeGitHub(t *testing.T, user string) *httptest.Server {
	t.Helper()
	var mu sync.Mutex
	challenges := map[string]string{}
	const access = "gho_access"
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	mux.HandleFunc("GET /login/oauth/authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("code_challenge_method") != "S256" || q.Get("client_id") != "gh-app" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		code := rand.Text()
		mu.Lock()
		challenges[code] = q.Get("code_challenge")
		mu.Unlock()
		http.Redirect(w, r, q.Get("redirect_uri")+"?code="+code+"&state="+url.QueryEscape(q.Get("state")), http.StatusFound)
	})
	mux.HandleFunc("POST /login/oauth/access_token", func(w http.ResponseWriter, r *http.Request) {
		require.NoError(t, r.ParseForm())
		id, secret, _ := r.BasicAuth()
		if id == "" {
			id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
		}
		mu.Lock()
		challenge, ok := challenges[r.PostForm.Get("code")]
		delete(challenges, r.PostForm.Get("code"))
		mu.Unlock()
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		w.Header().Set("Content-Type", "application/json")
		if !ok || id != "gh-app" || secret != "gh-secret" || base64.RawURLEncoding.EncodeToString(sum[:]) != challenge {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"bad_verification_code"}`))
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"access_token": access, "token_type": "bearer"})
	})
	mux.HandleFunc("GET /user", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+access {
			http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(user))
	})
	return srv
}

// TestGitHubSignIn: sign-in with a GitHub OAuth app reads the user from
// GET /user, creates it at the first sign-in with the default bindings,
// and knows it by GitHub's user ID at the next.
func TestGitHubSignIn(t *testing.T) {
	t.Parallel()
	gh := fakeGitHub(t, `{"id": 583231, "login": "octocat", "name": "The Octocat", "email": null}`)
	s := newSiteWith(t, false, func(s *site, cfg *auth.Config) {
		cfg.GitHub = &auth.GitHubConfig{ClientID: "gh-app", ClientSecret: "gh-secret", RedirectURL: s.srv.URL + "/auth/callback",
			BaseURL: gh.URL, APIURL: gh.URL, DefaultBindings: []auth.Binding{{Role: auth.RoleRead, Org: "octo-org"}}}
	})
	_, cb := s.signIn(t, "/runs")
	require.Equal(t, http.StatusSeeOther, cb.StatusCode, body(t, cb))
	require.Equal(t, "/runs", cb.Header.Get("Location"))
	require.Equal(t, []string{"octocat", "session"}, strings.Fields(body(t, s.get(t, "/whoami")))[:2])
	id, err := s.store.IdentityUser(t.Context(), gh.URL, "583231")
	require.NoError(t, err)
	u, err := s.store.UserGet(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, "The Octocat", u.Name)
	bs, err := s.store.BindingList(t.Context(), "octocat")
	require.NoError(t, err)
	require.Equal(t, []auth.Binding{{User: "octocat", Role: auth.RoleRead, Org: "octo-org"}}, bs)
}

// TestGitHubRefusals: a /user answer without an id, and a configuration
// naming both providers, are refused.
func TestGitHubRefusals(t *testing.T) {
	t.Parallel()
	gh := fakeGitHub(t, `{"login": "ghost"}`)
	s := newSiteWith(t, false, func(s *site, cfg *auth.Config) {
		cfg.GitHub = &auth.GitHubConfig{ClientID: "gh-app", ClientSecret: "gh-secret", RedirectURL: s.srv.URL + "/auth/callback", BaseURL: gh.URL, APIURL: gh.URL}
	})
	_, cb := s.signIn(t, "/")
	require.Equal(t, http.StatusBadGateway, cb.StatusCode)
	require.Contains(t, body(t, cb), "no id and login")
	require.Equal(t, http.StatusUnauthorized, s.get(t, "/whoami").StatusCode)

	_, err := auth.New(auth.Config{Store: auth.NewMemoryStore(), GitHub: &auth.GitHubConfig{ClientID: "a", RedirectURL: "https://ci/auth/callback"},
		OIDC: &auth.OIDCConfig{Issuer: "https://issuer", ClientID: "b", RedirectURL: "https://ci/auth/callback"}})
	require.ErrorContains(t, err, "give one")
}
