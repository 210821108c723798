package auth_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/reference/auth"
)

// issuer is an in-process OIDC provider: discovery, JWKS, an authorize
// endpoint that signs in user at once, and a token endpoint that checks
// PKCE and answers an RS256 ID token with the authorize request's nonce.
type issuer struct {
	srv *httptest.Server
	key *rsa.PrivateKey

	mu    sync.Mutex
	user  map[string]any // the claims of whoever signs in next
	codes map[string]grant
}

type grant struct{ nonce, challenge, client string }

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	is := &issuer{key: key, codes: map[string]grant{}}
	mux := http.NewServeMux()
	is.srv = httptest.NewServer(mux)
	t.Cleanup(is.srv.Close)
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": is.srv.URL, "authorization_endpoint": is.srv.URL + "/authorize", "token_endpoint": is.srv.URL + "/token",
			"jwks_uri": is.srv.URL + "/jwks", "id_token_signing_alg_values_supported": []string{"RS256"},
			"response_types_supported": []string{"code"}, "subject_types_supported": []string{"public"},
		})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("code_challenge_method") != "S256" || q.Get("nonce") == "" || q.Get("state") == "" {
			http.Error(w, "PKCE, nonce and state are required", http.StatusBadRequest)
			return
		}
		code := rand.Text()
		is.mu.Lock()
		is.codes[code] = grant{nonce: q.Get("nonce"), challenge: q.Get("code_challenge"), client: q.Get("client_id")}
		is.mu.Unlock()
		http.Redirect(w, r, q.Get("redirect_uri")+"?code="+code+"&state="+url.QueryEscape(q.Get("state")), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		require.NoError(t, r.ParseForm())
		is.mu.Lock()
		g, ok := is.codes[r.PostForm.Get("code")]
		delete(is.codes, r.PostForm.Get("code"))
		claims := map[string]any{}
		for k, v := range is.user {
			claims[k] = v
		}
		is.mu.Unlock()
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
			return
		}
		now := time.Now()
		claims["iss"], claims["aud"], claims["nonce"] = is.srv.URL, g.client, g.nonce
		claims["iat"], claims["exp"] = now.Unix(), now.Add(time.Hour).Unix()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "at", "token_type": "Bearer", "expires_in": 3600, "id_token": is.sign(t, claims)})
	})
	return is
}

func (is *issuer) sign(t *testing.T, claims map[string]any) string {
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: is.key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k1"))
	require.NoError(t, err)
	b, _ := json.Marshal(claims)
	jws, err := sig.Sign(b)
	require.NoError(t, err)
	s, err := jws.CompactSerialize()
	require.NoError(t, err)
	return s
}

func (is *issuer) signIn(claims map[string]any) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.user = claims
}

// site is the platform's side: the Service's sign-in routes and a
// /whoami that says who the session is (and its CSRF token).
type site struct {
	srv    *httptest.Server
	svc    *auth.Service
	store  *auth.MemoryStore
	client *http.Client // a browser: a cookie jar, redirects not followed
}

func newSite(t *testing.T, is *issuer, plain bool, mod func(*auth.OIDCConfig)) *site {
	t.Helper()
	return newSiteWith(t, plain, func(s *site, cfg *auth.Config) {
		oc := &auth.OIDCConfig{Issuer: is.srv.URL, ClientID: "cikit", ClientSecret: "s3cret", RedirectURL: s.srv.URL + "/auth/callback",
			DefaultBindings: []auth.Binding{{Role: auth.RoleRead, Org: "acme"}}}
		if mod != nil {
			mod(oc)
		}
		cfg.OIDC = oc
	})
}

// newSiteWith serves a Service whose configuration provider completes.
func newSiteWith(t *testing.T, plain bool, provider func(*site, *auth.Config)) *site {
	t.Helper()
	s := &site{store: auth.NewMemoryStore()}
	mux := http.NewServeMux()
	if plain {
		s.srv = httptest.NewServer(mux)
	} else {
		s.srv = httptest.NewTLSServer(mux)
	}
	t.Cleanup(s.srv.Close)
	cfg := auth.Config{Store: s.store, PlainHTTP: plain, Logger: discard()}
	provider(s, &cfg)
	var err error
	s.svc, err = auth.New(cfg)
	require.NoError(t, err)
	mux.Handle("/auth/", s.svc.Handler())
	mux.HandleFunc("/whoami", func(w http.ResponseWriter, r *http.Request) {
		p, err := s.svc.Authenticate(r)
		if err != nil || p == nil {
			http.Error(w, fmt.Sprint(err), http.StatusUnauthorized)
			return
		}
		fmt.Fprintf(w, "%s %s %s", p.Login, p.Kind, p.CSRF)
	})
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	s.client = s.srv.Client()
	s.client.Jar = jar
	s.client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return s
}

func (s *site) get(t *testing.T, target string) *http.Response {
	t.Helper()
	if strings.HasPrefix(target, "/") {
		target = s.srv.URL + target
	}
	resp, err := s.client.Get(target)
	require.NoError(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

func cookieOf(t *testing.T, resp *http.Response, name string) *http.Cookie {
	t.Helper()
	for _, c := range resp.Cookies() {
		if c.Name == name {
			return c
		}
	}
	require.Failf(t, "no cookie", "the answer sets no cookie %s: %v", name, resp.Header.Values("Set-Cookie"))
	return nil
}

// signIn goes through the whole flow from /auth/login?next=next and
// returns the callback's answer.
func (s *site) signIn(t *testing.T, next string) (login, callback *http.Response) {
	t.Helper()
	login = s.get(t, "/auth/login?next="+url.QueryEscape(next))
	require.Equal(t, http.StatusFound, login.StatusCode)
	authorize := s.get(t, login.Header.Get("Location"))
	require.Equal(t, http.StatusFound, authorize.StatusCode)
	return login, s.get(t, authorize.Header.Get("Location"))
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// TestOIDCSignIn goes through the real flow with a browser's cookie jar:
// login redirects to the issuer with state, nonce and PKCE; the callback
// verifies the ID token, creates the user with the default bindings and
// starts a session whose cookie is __Host-, Secure, HttpOnly and
// SameSite=Lax; logout needs the CSRF token.
func TestOIDCSignIn(t *testing.T) {
	t.Parallel()
	is := newIssuer(t)
	s := newSite(t, is, false, nil)
	is.signIn(map[string]any{"sub": "42", "email": "alice@acme.example", "email_verified": true, "preferred_username": "alice", "name": "Alice"})

	login, cb := s.signIn(t, "/runs?branch=main")
	lc := cookieOf(t, login, "__Host-cikit_login")
	require.True(t, lc.Secure && lc.HttpOnly && lc.SameSite == http.SameSiteLaxMode && lc.Path == "/", "%+v", lc)
	loc, err := url.Parse(login.Header.Get("Location"))
	require.NoError(t, err)
	require.Equal(t, "S256", loc.Query().Get("code_challenge_method"))
	require.NotEmpty(t, loc.Query().Get("nonce"))

	require.Equal(t, http.StatusSeeOther, cb.StatusCode, body(t, cb))
	require.Equal(t, "/runs?branch=main", cb.Header.Get("Location"))
	sc := cookieOf(t, cb, auth.SessionCookie)
	require.True(t, sc.Secure && sc.HttpOnly && sc.SameSite == http.SameSiteLaxMode && sc.Path == "/" && sc.Domain == "", "%+v", sc)
	require.Equal(t, int(auth.DefaultSessionTTL/time.Second), sc.MaxAge)

	who := s.get(t, "/whoami")
	require.Equal(t, http.StatusOK, who.StatusCode)
	fields := strings.Fields(body(t, who))
	require.Equal(t, []string{"alice", "session"}, fields[:2])
	csrf := fields[2]
	bs, err := s.store.BindingList(t.Context(), "alice")
	require.NoError(t, err)
	require.Equal(t, []auth.Binding{{User: "alice", Role: auth.RoleRead, Org: "acme"}}, bs, "the default bindings of a new user")

	// Signing in again maps the same issuer and subject to the same user.
	_, cb = s.signIn(t, "/")
	require.Equal(t, http.StatusSeeOther, cb.StatusCode)
	users, err := s.store.UserList(t.Context())
	require.NoError(t, err)
	require.Len(t, users, 1)

	logout := func(header string) *http.Response {
		req, err := http.NewRequestWithContext(t.Context(), "POST", s.srv.URL+"/auth/logout", nil)
		require.NoError(t, err)
		if header != "" {
			req.Header.Set(auth.CSRFHeader, header)
		}
		resp, err := s.client.Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}
	require.Equal(t, http.StatusForbidden, logout("").StatusCode, "no CSRF token")
	require.Equal(t, http.StatusForbidden, logout(csrf+"x").StatusCode, "a wrong CSRF token")
	who = s.get(t, "/whoami")
	require.Equal(t, http.StatusOK, who.StatusCode, "a refused logout ends nothing")
	csrf = strings.Fields(body(t, who))[2]
	require.Equal(t, http.StatusNoContent, logout(csrf).StatusCode)
	require.Equal(t, http.StatusUnauthorized, s.get(t, "/whoami").StatusCode, "the session is gone")
}

// TestOIDCRefusals: an open redirect, a callback that did not start
// here, a replayed code and a user the conditions do not admit are all
// refused, and none starts a session.
func TestOIDCRefusals(t *testing.T) {
	t.Parallel()
	is := newIssuer(t)
	s := newSite(t, is, false, func(c *auth.OIDCConfig) { c.AllowedDomains = []string{"acme.example"} })
	for _, next := range []string{"//evil.example/x", "https://evil.example", "/\\evil.example", "evil", "/ok\r\nSet-Cookie: x=y", "/" + strings.Repeat("a", 2000)} {
		resp := s.get(t, "/auth/login?next="+url.QueryEscape(next))
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, next)
		require.Contains(t, body(t, resp), "a path of this site")
	}
	require.Equal(t, http.StatusBadRequest, s.get(t, "/auth/callback?code=x&state=y").StatusCode, "no sign-in started")
	// A login cookie the client made up, or an enormous one.
	u, err := url.Parse(s.srv.URL)
	require.NoError(t, err)
	for _, v := range []string{"not-base64!", "e30", strings.Repeat("A", 3000)} {
		s.client.Jar.SetCookies(u, []*http.Cookie{{Name: "__Host-cikit_login", Value: v, Path: "/", Secure: true}})
		require.Equal(t, http.StatusBadRequest, s.get(t, "/auth/callback?code=x&state=y").StatusCode, v[:min(len(v), 20)])
	}

	is.signIn(map[string]any{"sub": "7", "email": "mallory@evil.example", "email_verified": true})
	_, cb := s.signIn(t, "/")
	require.Equal(t, http.StatusForbidden, cb.StatusCode)
	require.Contains(t, body(t, cb), "acme.example")
	is.signIn(map[string]any{"sub": "8", "email": "bob@acme.example", "email_verified": false})
	_, cb = s.signIn(t, "/")
	require.Equal(t, http.StatusForbidden, cb.StatusCode, "an unverified email is not admitted")

	is.signIn(map[string]any{"sub": "9", "email": "carol@acme.example", "email_verified": true})
	login := s.get(t, "/auth/login?next=/")
	authorize := s.get(t, login.Header.Get("Location"))
	callback := authorize.Header.Get("Location")
	// A state that is not the login cookie's:
	bad := strings.Replace(callback, "state=", "state=x", 1)
	require.Equal(t, http.StatusBadRequest, s.get(t, bad).StatusCode)
	// The login cookie was cleared: the real callback now fails too.
	require.Equal(t, http.StatusBadRequest, s.get(t, callback).StatusCode)
	users, err := s.store.UserList(t.Context())
	require.NoError(t, err)
	require.Empty(t, users, "nobody was admitted")
	require.Equal(t, http.StatusUnauthorized, s.get(t, "/whoami").StatusCode)
}

// TestPlainHTTPCookies: on plain http (localhost) the session cookie is
// not Secure and has no __Host- prefix, but is still HttpOnly and
// SameSite=Lax.
func TestPlainHTTPCookies(t *testing.T) {
	t.Parallel()
	is := newIssuer(t)
	s := newSite(t, is, true, nil)
	is.signIn(map[string]any{"sub": "1", "preferred_username": "dev"})
	_, cb := s.signIn(t, "/")
	require.Equal(t, http.StatusSeeOther, cb.StatusCode, body(t, cb))
	c := cookieOf(t, cb, auth.PlainSessionCookie)
	require.False(t, c.Secure)
	require.True(t, c.HttpOnly)
	require.Equal(t, http.SameSiteLaxMode, c.SameSite)
	require.Equal(t, "dev session", strings.Join(strings.Fields(body(t, s.get(t, "/whoami")))[:2], " "))
}

// TestSignInNotConfigured: without OIDC, the sign-in routes say so.
func TestSignInNotConfigured(t *testing.T) {
	t.Parallel()
	svc, err := auth.New(auth.Config{Store: auth.NewMemoryStore()})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	svc.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/auth/login", nil))
	require.Equal(t, http.StatusNotFound, rec.Code)
	require.Contains(t, rec.Body.String(), "not configured")
}
