package auth

import (
	"cmp"
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// DefaultOIDCTimeout bounds each call to the OIDC provider.
const DefaultOIDCTimeout = 10 * time.Second

// The sign-in state cookie: short-lived, bounded.
const (
	loginCookie       = "__Host-cikit_login"
	plainLoginCookie  = "cikit_login"
	loginCookieMaxAge = 10 * 60
	maxLoginCookieLen = 2048
	maxNextLen        = 1024
)

// OIDCConfig configures sign-in to the web UI with an OpenID Connect
// issuer (GitLab, Google, Keycloak, Dex …).
type OIDCConfig struct {
	// Issuer is the issuer's URL, whose /.well-known/openid-configuration
	// is read at the first sign-in. ClientID and ClientSecret are the
	// platform's registration with it; RedirectURL is the platform's
	// /auth/callback as registered. All required.
	Issuer, ClientID, ClientSecret, RedirectURL string
	// Scopes asked for. Default: openid, email, profile.
	Scopes []string
	// AllowedDomains, when set, admit only users whose verified email is
	// in one of them. Claim and ClaimValue, when set, admit only users
	// whose ID token has that claim equal to (or, for a list, holding)
	// the value (GitLab: "groups_direct", "acme"). Without either, every
	// user of the issuer may sign in, with no role but DefaultBindings.
	AllowedDomains    []string
	Claim, ClaimValue string
	// DefaultBindings are granted to a user at their first sign-in; their
	// User is ignored.
	DefaultBindings []Binding
	// HTTPClient calls the issuer. Default: http.DefaultClient, with
	// Timeout.
	HTTPClient *http.Client
	// Timeout bounds each call to the issuer. Default: DefaultOIDCTimeout.
	Timeout time.Duration
}

// provider is where sign-in sends the browser and learns who signed in:
// an OIDC issuer, or GitHub.
type provider interface {
	// ctx bounds a call to the provider and gives it its client.
	ctx(parent context.Context) (context.Context, context.CancelFunc)
	// authURL is where login redirects the browser.
	authURL(ctx context.Context, st *loginState) (string, error)
	// identify exchanges the callback's code and says who signed in; an
	// error wrapping ErrForbidden for one it does not admit.
	identify(ctx context.Context, code string, st *loginState) (*identity, error)
	// defaults are the bindings of a user's first sign-in.
	defaults() []Binding
}

// identity is who signed in: the provider's name for them and what it
// says of them.
type identity struct {
	issuer, subject string
	claims          idClaims
}

type oidcFlow struct {
	cfg OIDCConfig

	mu       sync.Mutex
	provider *oidc.Provider
}

func newOIDCFlow(cfg *OIDCConfig) (*oidcFlow, error) {
	c := *cfg
	if c.Issuer == "" || c.ClientID == "" || c.RedirectURL == "" {
		return nil, errors.New("auth: OIDCConfig needs Issuer, ClientID and RedirectURL")
	}
	if _, err := url.Parse(c.RedirectURL); err != nil {
		return nil, fmt.Errorf("auth: OIDCConfig.RedirectURL: %w", err)
	}
	if (c.Claim == "") != (c.ClaimValue == "") {
		return nil, errors.New("auth: OIDCConfig.Claim and ClaimValue go together")
	}
	for _, b := range c.DefaultBindings {
		if b.Role <= RoleNone || b.Role > RoleAdmin || validScope(b.Org, b.Repo) != nil {
			return nil, fmt.Errorf("auth: OIDCConfig.DefaultBindings: %s on %s is not a valid binding", b.Role, where(b.Org, b.Repo))
		}
	}
	if len(c.Scopes) == 0 {
		c.Scopes = []string{oidc.ScopeOpenID, "email", "profile"}
	}
	c.Timeout = cmp.Or(c.Timeout, DefaultOIDCTimeout)
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: c.Timeout}
	}
	return &oidcFlow{cfg: c}, nil
}

// ctx bounds a call to the issuer and gives it the flow's client.
func (f *oidcFlow) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(parent, f.cfg.Timeout)
	return oidc.ClientContext(ctx, f.cfg.HTTPClient), cancel
}

// discover reads the issuer's configuration once; a failure is tried
// again at the next sign-in.
func (f *oidcFlow) defaults() []Binding { return f.cfg.DefaultBindings }

func (f *oidcFlow) authURL(ctx context.Context, st *loginState) (string, error) {
	_, oc, err := f.discover(ctx)
	if err != nil {
		return "", err
	}
	return oc.AuthCodeURL(st.State, oidc.Nonce(st.Nonce), oauth2.S256ChallengeOption(st.Verifier)), nil
}

// identify exchanges the code, verifies the ID token and its nonce, and
// applies the configured conditions.
func (f *oidcFlow) identify(ctx context.Context, code string, st *loginState) (*identity, error) {
	provider, oc, err := f.discover(ctx)
	if err != nil {
		return nil, err
	}
	tok, err := oc.Exchange(ctx, code, oauth2.VerifierOption(st.Verifier))
	if err != nil {
		return nil, fmt.Errorf("exchanging the authorization code failed: %w", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, errors.New("the issuer answered without an ID token")
	}
	idt, err := provider.Verifier(&oidc.Config{ClientID: f.cfg.ClientID}).Verify(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("%w: the ID token does not verify: %v", ErrForbidden, err)
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(st.Nonce)) != 1 {
		return nil, fmt.Errorf("%w: the ID token's nonce is not this sign-in's", ErrForbidden)
	}
	var claims idClaims
	var all map[string]any
	if err := idt.Claims(&claims); err != nil || idt.Claims(&all) != nil {
		return nil, fmt.Errorf("%w: the ID token's claims do not parse", ErrForbidden)
	}
	if err := f.admits(claims, all); err != nil {
		return nil, err
	}
	return &identity{issuer: idt.Issuer, subject: idt.Subject, claims: claims}, nil
}

func (f *oidcFlow) discover(ctx context.Context) (*oidc.Provider, *oauth2.Config, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.provider == nil {
		p, err := oidc.NewProvider(ctx, f.cfg.Issuer)
		if err != nil {
			return nil, nil, fmt.Errorf("reading the OIDC issuer's configuration: %w", err)
		}
		f.provider = p
	}
	oc := &oauth2.Config{ClientID: f.cfg.ClientID, ClientSecret: f.cfg.ClientSecret, RedirectURL: f.cfg.RedirectURL,
		Endpoint: f.provider.Endpoint(), Scopes: f.cfg.Scopes}
	return f.provider, oc, nil
}

// Handler serves sign-in to the web UI: GET /auth/login?next=/path,
// GET /auth/callback and POST /auth/logout. Without Config.OIDC, login
// and callback answer 404; logout works for any session.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /auth/login", s.login)
	mux.HandleFunc("GET /auth/callback", s.callback)
	mux.HandleFunc("POST /auth/logout", s.logout)
	return mux
}

func authError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// localPath says whether next is a path of this site: "/runs/1", not
// "//evil.example", "/\evil.example" or "https://evil.example".
func localPath(next string) bool {
	if next == "" || len(next) > maxNextLen || next[0] != '/' || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n\t\x00") {
		return false
	}
	u, err := url.Parse(next)
	return err == nil && u.Scheme == "" && u.Host == "" && u.User == nil
}

func (s *Service) loginCookieName() string {
	if s.cfg.PlainHTTP {
		return plainLoginCookie
	}
	return loginCookie
}

// loginState is what the login cookie carries between /auth/login and
// /auth/callback.
type loginState struct {
	State, Nonce, Verifier, Next string
}

func (s *Service) login(w http.ResponseWriter, r *http.Request) {
	if s.provider == nil {
		authError(w, http.StatusNotFound, "sign-in is not configured: the platform has no OIDC issuer")
		return
	}
	next := r.URL.Query().Get("next")
	if next == "" {
		next = "/"
	}
	if !localPath(next) {
		authError(w, http.StatusBadRequest, "next must be a path of this site, such as /runs")
		return
	}
	ctx, cancel := s.provider.ctx(r.Context())
	defer cancel()
	st := &loginState{State: randomText(), Nonce: randomText(), Verifier: oauth2.GenerateVerifier(), Next: next}
	to, err := s.provider.authURL(ctx, st)
	if err != nil {
		authError(w, http.StatusBadGateway, err.Error())
		return
	}
	b, _ := json.Marshal(st)
	http.SetCookie(w, s.cookie(s.loginCookieName(), base64.RawURLEncoding.EncodeToString(b), loginCookieMaxAge))
	http.Redirect(w, r, to, http.StatusFound)
}

// readLoginState reads and clears the login cookie.
func (s *Service) readLoginState(w http.ResponseWriter, r *http.Request) (*loginState, bool) {
	c, err := r.Cookie(s.loginCookieName())
	http.SetCookie(w, s.cookie(s.loginCookieName(), "", -1))
	if err != nil || len(c.Value) > maxLoginCookieLen {
		return nil, false
	}
	b, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil {
		return nil, false
	}
	var st loginState
	if json.Unmarshal(b, &st) != nil || st.State == "" || st.Nonce == "" || st.Verifier == "" || !localPath(st.Next) {
		return nil, false
	}
	return &st, true
}

// idClaims are the ID token's claims sign-in reads.
type idClaims struct {
	Email         string `json:"email"`
	EmailVerified *bool  `json:"email_verified"`
	Name          string `json:"name"`
	Username      string `json:"preferred_username"`
	Nickname      string `json:"nickname"`
}

func (s *Service) callback(w http.ResponseWriter, r *http.Request) {
	if s.provider == nil {
		authError(w, http.StatusNotFound, "sign-in is not configured: the platform has no OIDC issuer")
		return
	}
	st, ok := s.readLoginState(w, r)
	q := r.URL.Query()
	if !ok || subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(st.State)) != 1 {
		authError(w, http.StatusBadRequest, "the sign-in expired or did not start here; start again at /auth/login")
		return
	}
	if e := q.Get("error"); e != "" {
		authError(w, http.StatusForbidden, "the issuer refused the sign-in: "+strings.ToValidUTF8(e[:min(len(e), 100)], ""))
		return
	}
	code := q.Get("code")
	if code == "" || len(code) > 2048 {
		authError(w, http.StatusBadRequest, "the callback has no authorization code")
		return
	}
	ctx, cancel := s.provider.ctx(r.Context())
	defer cancel()
	id, err := s.provider.identify(ctx, code, st)
	if err != nil {
		status := http.StatusBadGateway
		if errors.Is(err, ErrForbidden) {
			status = http.StatusForbidden
		}
		authError(w, status, err.Error())
		return
	}
	u, err := s.signInUser(r.Context(), id.issuer, id.subject, id.claims)
	if err != nil {
		status := http.StatusServiceUnavailable
		if errors.Is(err, ErrForbidden) {
			status = http.StatusForbidden
		}
		authError(w, status, "signing in failed: "+err.Error())
		return
	}
	c, _, err := s.SessionStart(r.Context(), u.ID)
	if err != nil {
		authError(w, http.StatusForbidden, err.Error())
		return
	}
	http.SetCookie(w, c)
	_ = s.Audit(r.Context(), Entry{Actor: u.Login, Action: "session.start", Target: "user/" + u.Login, Remote: s.addr(r), Outcome: "ok"})
	http.Redirect(w, r, st.Next, http.StatusSeeOther)
}

// admits applies the configured conditions to the ID token's claims.
func (f *oidcFlow) admits(c idClaims, all map[string]any) error {
	if len(f.cfg.AllowedDomains) > 0 {
		_, domain, _ := strings.Cut(c.Email, "@")
		if c.EmailVerified == nil || !*c.EmailVerified || !slices.Contains(f.cfg.AllowedDomains, strings.ToLower(domain)) {
			return fmt.Errorf("%w: sign-in is open to verified email addresses of %s", ErrForbidden, strings.Join(f.cfg.AllowedDomains, ", "))
		}
	}
	if f.cfg.Claim != "" {
		ok := false
		switch v := all[f.cfg.Claim].(type) {
		case string:
			ok = v == f.cfg.ClaimValue
		case []any:
			ok = slices.Contains(v, any(f.cfg.ClaimValue))
		}
		if !ok {
			return fmt.Errorf("%w: sign-in needs the claim %s to hold %q", ErrForbidden, f.cfg.Claim, f.cfg.ClaimValue)
		}
	}
	return nil
}

// signInUser returns the user of issuer and subject, creating it (with
// the default bindings) at its first sign-in.
func (s *Service) signInUser(ctx context.Context, issuer, subject string, c idClaims) (*User, error) {
	id, err := s.store.IdentityUser(ctx, issuer, subject)
	if err == nil {
		return s.store.UserGet(ctx, id)
	}
	if !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	base := loginFrom(c)
	name := c.Name
	if len(name) > MaxNameBytes {
		name = strings.ToValidUTF8(name[:MaxNameBytes], "")
	}
	email := c.Email
	if len(email) > MaxEmailBytes {
		email = ""
	}
	for i := range 5 {
		login := base
		if i > 0 {
			login = base[:min(len(base), MaxLoginBytes-5)] + "-" + randomText()[:4]
		}
		u := &User{ID: newID("usr_"), Login: login, Name: name, Email: email, Created: s.now().UTC()}
		if err := s.store.UserCreate(ctx, u); errors.Is(err, ErrConflict) {
			continue
		} else if err != nil {
			return nil, err
		}
		if err := s.store.IdentityLink(ctx, issuer, subject, u.ID); err != nil {
			return nil, err
		}
		for _, b := range s.provider.defaults() {
			b.User = u.Login
			if err := s.store.BindingGrant(ctx, b); err != nil {
				return nil, err
			}
		}
		return u, nil
	}
	return nil, fmt.Errorf("no free login for %q", base)
}

// loginFrom makes a login of the claims: the preferred username, the
// nickname or the email's local part, with other characters as '-'.
func loginFrom(c idClaims) string {
	raw := cmp.Or(c.Username, c.Nickname, strings.Split(c.Email, "@")[0], "user")
	b := []byte(raw)
	for i, ch := range b {
		alnum := '0' <= ch && ch <= '9' || 'a' <= ch && ch <= 'z' || 'A' <= ch && ch <= 'Z'
		if !alnum && (i == 0 || (ch != '.' && ch != '_' && ch != '-')) {
			b[i] = 'u'
		}
	}
	return string(b[:min(len(b), MaxLoginBytes)])
}

// logout ends the request's session. It needs the session's CSRF token.
func (s *Service) logout(w http.ResponseWriter, r *http.Request) {
	if s.sessionCookie(r) == "" {
		authError(w, http.StatusUnauthorized, "there is no session to end")
		return
	}
	p, err := s.Authenticate(r)
	switch {
	case errors.Is(err, ErrCSRF):
		authError(w, http.StatusForbidden, err.Error())
		return
	case errors.Is(err, ErrRateLimited):
		authError(w, http.StatusTooManyRequests, err.Error())
		return
	case err != nil || p == nil || p.Kind != KindSession:
		c, _ := s.SessionEnd(r)
		if c != nil {
			http.SetCookie(w, c)
		}
		authError(w, http.StatusUnauthorized, "the session had ended already")
		return
	}
	c, err := s.SessionEnd(r)
	if err != nil {
		authError(w, http.StatusServiceUnavailable, "ending the session failed; try again")
		return
	}
	http.SetCookie(w, c)
	_ = s.Audit(r.Context(), Entry{Actor: p.String(), Action: "session.end", Target: "user/" + p.Login, Remote: s.addr(r), Outcome: "ok"})
	w.WriteHeader(http.StatusNoContent)
}
