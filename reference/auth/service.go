package auth

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// Defaults of Config.
const (
	DefaultTokenTTL     = 90 * 24 * time.Hour
	DefaultMaxTokenTTL  = 366 * 24 * time.Hour
	DefaultSessionTTL   = 12 * time.Hour
	DefaultSessionIdle  = time.Hour
	DefaultFailureBurst = 20
	DefaultFailureEvery = 3 * time.Second
	DefaultMaxSources   = 10000
	// DefaultBootstrapLogin is the service account Bootstrap creates.
	DefaultBootstrapLogin = "admin"
)

// touchEvery is how often a token's last use or a session's last sight
// is written: at most once a minute, not on every request.
const touchEvery = time.Minute

// maxAuthorizationBytes bounds the Authorization header read; a token is
// TokenLen bytes.
const maxAuthorizationBytes = 512

// Config configures a Service. Store is required; the zero value of
// everything else is a sensible default.
type Config struct {
	// Store holds users, tokens, bindings, sessions and the audit log.
	Store Store
	// TokenTTL is a token's lifetime when its creator names none;
	// MaxTokenTTL the longest one may ask for. Service tokens may ask
	// for none ("never"); personal tokens always expire.
	TokenTTL, MaxTokenTTL time.Duration
	// SessionTTL is a web session's absolute lifetime, SessionIdle how
	// long it lives unused.
	SessionTTL, SessionIdle time.Duration
	// FailureBurst failed authentications are let through from one
	// client address, then one every FailureEvery; MaxSources bounds the
	// addresses remembered.
	FailureBurst int
	FailureEvery time.Duration
	MaxSources   int
	// ClientAddr names a request's client for the failure limit and the
	// audit log. Default: RemoteAddr.
	ClientAddr func(*http.Request) string
	// OIDC configures sign-in to the web UI with an OIDC issuer, GitHub
	// with GitHub's OAuth (which is not OIDC); without either Handler's
	// sign-in routes answer 404.
	OIDC   *OIDCConfig
	GitHub *GitHubConfig
	// PlainHTTP says the platform is served over plain http on
	// localhost: the session cookie is then not Secure (and has no
	// __Host- prefix), still HttpOnly and SameSite=Lax.
	PlainHTTP bool
	// BootstrapLogin is the service account Bootstrap creates. Default:
	// DefaultBootstrapLogin.
	BootstrapLogin string
	// Now is the clock. Default: time.Now.
	Now func() time.Time
	// Logger receives failures to record a token's use. Default:
	// slog.Default().
	Logger *slog.Logger
}

// Service authenticates requests, authorizes principals, keeps the audit
// log and manages users, tokens and bindings; it is what the API and the
// platform use. It is safe for concurrent use.
type Service struct {
	cfg   Config
	store Store
	now   func() time.Time
	log   *slog.Logger
	fails *failures
	addr  func(*http.Request) string
	// provider is the sign-in's identity provider, nil without
	// Config.OIDC or Config.GitHub.
	provider provider
}

// New validates cfg and returns a Service.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("auth: Config.Store is required (NewMemoryStore or NewPostgresStore)")
	}
	cfg.TokenTTL = cmp.Or(cfg.TokenTTL, DefaultTokenTTL)
	cfg.MaxTokenTTL = cmp.Or(cfg.MaxTokenTTL, DefaultMaxTokenTTL)
	cfg.SessionTTL = cmp.Or(cfg.SessionTTL, DefaultSessionTTL)
	cfg.SessionIdle = cmp.Or(cfg.SessionIdle, DefaultSessionIdle)
	cfg.FailureBurst = cmp.Or(cfg.FailureBurst, DefaultFailureBurst)
	cfg.FailureEvery = cmp.Or(cfg.FailureEvery, DefaultFailureEvery)
	cfg.MaxSources = cmp.Or(cfg.MaxSources, DefaultMaxSources)
	cfg.BootstrapLogin = cmp.Or(cfg.BootstrapLogin, DefaultBootstrapLogin)
	switch {
	case cfg.TokenTTL < 0 || cfg.MaxTokenTTL < 0 || cfg.SessionTTL < 0 || cfg.SessionIdle < 0 || cfg.FailureEvery < 0:
		return nil, errors.New("auth: Config's durations must not be negative")
	case cfg.TokenTTL > cfg.MaxTokenTTL:
		return nil, fmt.Errorf("auth: Config.TokenTTL (%s) must not be longer than MaxTokenTTL (%s)", cfg.TokenTTL, cfg.MaxTokenTTL)
	case cfg.SessionIdle > cfg.SessionTTL:
		return nil, fmt.Errorf("auth: Config.SessionIdle (%s) must not be longer than SessionTTL (%s)", cfg.SessionIdle, cfg.SessionTTL)
	case cfg.FailureBurst < 0 || cfg.MaxSources < 0:
		return nil, errors.New("auth: Config.FailureBurst and MaxSources must not be negative")
	}
	if err := validLogin(cfg.BootstrapLogin); err != nil {
		return nil, fmt.Errorf("auth: Config.BootstrapLogin: %w", err)
	}
	s := &Service{
		cfg: cfg, store: cfg.Store, now: cfg.Now, log: cmp.Or(cfg.Logger, slog.Default()),
		fails: newFailures(cfg.FailureBurst, cfg.FailureEvery, cfg.MaxSources), addr: cfg.ClientAddr,
	}
	if cfg.Now == nil {
		s.now = time.Now
	}
	if cfg.ClientAddr == nil {
		s.addr = RemoteAddr
	}
	switch {
	case cfg.OIDC != nil && cfg.GitHub != nil:
		return nil, errors.New("auth: Config.OIDC and Config.GitHub are two ways to sign in: give one")
	case cfg.OIDC != nil:
		f, err := newOIDCFlow(cfg.OIDC)
		if err != nil {
			return nil, err
		}
		s.provider = f
	case cfg.GitHub != nil:
		f, err := newGitHubFlow(cfg.GitHub)
		if err != nil {
			return nil, err
		}
		s.provider = f
	}
	return s, nil
}

// ClientAddr returns the client address of r as the Service counts it.
func (s *Service) ClientAddr(r *http.Request) string { return s.addr(r) }

func newID(prefix string) string {
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// validLogin checks a login: 1 to MaxLoginBytes of letters, digits, '.',
// '_' and '-', starting with a letter or digit.
func validLogin(s string) error {
	if s == "" || len(s) > MaxLoginBytes {
		return fmt.Errorf("%w: a login has 1 to %d characters, not %d", ErrInvalid, MaxLoginBytes, len(s))
	}
	for i, c := range s {
		alnum := '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !alnum && (i == 0 || (c != '.' && c != '_' && c != '-')) {
			return fmt.Errorf("%w: the login %q has %q: a login is letters, digits, '.', '_' and '-', starting with a letter or digit", ErrInvalid, s, c)
		}
	}
	return nil
}

// validPath checks an org or repo path of a binding or a token's scope.
func validPath(what, s string) error {
	if len(s) > MaxScopeBytes {
		return fmt.Errorf("%w: the %s has %d bytes; at most %d", ErrInvalid, what, len(s), MaxScopeBytes)
	}
	for _, part := range strings.Split(s, "/") {
		if s != "" && (part == "" || part == "." || part == ".." || strings.ContainsAny(part, " \t\r\n\x00:")) {
			return fmt.Errorf("%w: the %s %q is not a path of names separated by '/'", ErrInvalid, what, s)
		}
	}
	return nil
}

func validScope(org, repo string) error {
	if err := validPath("org", org); err != nil {
		return err
	}
	if err := validPath("repo", repo); err != nil {
		return err
	}
	if org == "" && repo != "" {
		return fmt.Errorf("%w: a repo %q needs its org", ErrInvalid, repo)
	}
	if strings.Contains(repo, "/") {
		return fmt.Errorf("%w: the repo %q is one name; its groups belong to the org", ErrInvalid, repo)
	}
	return nil
}

// Authenticate returns who made r: the user of its Authorization: Bearer
// token or, without one, of its session cookie. It returns nil, nil for
// a request with neither (anonymous). A credential that is malformed,
// tampered with, unknown, expired or revoked, or whose user is disabled,
// is an ErrUnauthenticated that says why; each counts as a failure of
// the client's address, and an address that failed too often gets a
// *RateLimitedError (ErrRateLimited) before its credential is looked at.
// A session request with an unsafe method (not GET, HEAD or OPTIONS)
// without the session's X-CSRF-Token is ErrCSRF.
func (s *Service) Authenticate(r *http.Request) (*Principal, error) {
	authz := r.Header.Values("Authorization")
	cookie := s.sessionCookie(r)
	if len(authz) == 0 && cookie == "" {
		return nil, nil
	}
	addr, now := s.addr(r), s.now()
	if err := s.fails.check(addr, now); err != nil {
		return nil, err
	}
	var p *Principal
	var err error
	if len(authz) > 0 {
		p, err = s.bearer(r.Context(), authz, addr, now)
	} else {
		p, err = s.session(r, cookie, now)
	}
	if errors.Is(err, ErrUnauthenticated) {
		s.fails.fail(addr, now)
	}
	return p, err
}

func (s *Service) bearer(ctx context.Context, authz []string, addr string, now time.Time) (*Principal, error) {
	if len(authz) > 1 {
		return nil, fmt.Errorf("%w: the request has %d Authorization headers; send one", ErrUnauthenticated, len(authz))
	}
	if len(authz[0]) > maxAuthorizationBytes {
		return nil, fmt.Errorf("%w: the Authorization header has over %d bytes", ErrUnauthenticated, maxAuthorizationBytes)
	}
	scheme, text, _ := strings.Cut(authz[0], " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return nil, fmt.Errorf("%w: send Authorization: Bearer <token>", ErrUnauthenticated)
	}
	text = strings.TrimSpace(text)
	if err := checkTokenText(text); err != nil {
		return nil, err
	}
	d := DigestOf(text)
	t, err := s.store.TokenByDigest(ctx, d)
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w: the token is unknown", ErrUnauthenticated)
	}
	if err != nil {
		return nil, err
	}
	switch {
	case subtle.ConstantTimeCompare(t.Digest[:], d[:]) != 1:
		return nil, fmt.Errorf("%w: the token is unknown", ErrUnauthenticated)
	case !t.RevokedAt.IsZero():
		return nil, fmt.Errorf("%w: token %s was revoked at %s", ErrUnauthenticated, t.ID, t.RevokedAt.UTC().Format(time.RFC3339))
	case !t.Expires.IsZero() && !now.Before(t.Expires):
		return nil, fmt.Errorf("%w: token %s expired at %s", ErrUnauthenticated, t.ID, t.Expires.UTC().Format(time.RFC3339))
	}
	u, err := s.activeUser(ctx, t.User)
	if err != nil {
		return nil, err
	}
	if now.Sub(t.LastUsedAt) >= touchEvery {
		if err := s.store.TokenTouch(ctx, t.ID, now, addr); err != nil && ctx.Err() == nil {
			s.log.LogAttrs(ctx, slog.LevelWarn, "auth: recording a token's use failed", slog.String("token", t.ID), slog.String("error", err.Error()))
		}
	}
	return &Principal{Kind: KindToken, User: u.ID, Login: u.Login, Token: t.ID, Service: u.Service,
		MaxRole: t.MaxRole, Org: t.Org, Repo: t.Repo}, nil
}

// activeUser returns the user of id unless it is disabled or gone.
func (s *Service) activeUser(ctx context.Context, id string) (*User, error) {
	u, err := s.store.UserGet(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w: the credential's user no longer exists", ErrUnauthenticated)
	}
	if err != nil {
		return nil, err
	}
	if u.Disabled {
		return nil, fmt.Errorf("%w: user %s is disabled", ErrUnauthenticated, u.Login)
	}
	return u, nil
}

// Grants are what a principal may do, read once for a request: its
// bindings, under its token's cap.
type Grants struct {
	bindings  []Binding
	max       Role
	org, repo string
}

// Role returns the principal's role on org/repo; org "" asks for the
// platform-wide role, repo "" for the role on the whole org.
func (g *Grants) Role(org, repo string) Role {
	if g == nil || !covers(g.org, g.repo, org, repo) {
		return RoleNone
	}
	best := RoleNone
	for _, b := range g.bindings {
		if covers(b.Org, b.Repo, org, repo) {
			best = max(best, b.Role)
		}
	}
	return min(best, g.max)
}

// Bindings returns the principal's bindings (not capped by its token).
func (g *Grants) Bindings() []Binding {
	if g == nil {
		return nil
	}
	return append([]Binding(nil), g.bindings...)
}

// covers says whether a binding (or a token's scope) on bOrg/bRepo
// reaches org/repo: a platform-wide one everything, an org one its
// repositories and subgroups ("acme" covers "acme/platform"), a repo one
// only itself.
func covers(bOrg, bRepo, org, repo string) bool {
	if bOrg == "" {
		return true
	}
	if org != bOrg && !strings.HasPrefix(org, bOrg+"/") {
		return false
	}
	return bRepo == "" || (org == bOrg && repo == bRepo)
}

// Grants reads what p may do. A nil p is ErrUnauthenticated; a disabled
// user has no grants.
func (s *Service) Grants(ctx context.Context, p *Principal) (*Grants, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: sign in or send Authorization: Bearer <token>", ErrUnauthenticated)
	}
	u, err := s.store.UserGet(ctx, p.User)
	if errors.Is(err, ErrNotFound) {
		return &Grants{}, nil
	}
	if err != nil {
		return nil, err
	}
	if u.Disabled {
		return &Grants{}, nil
	}
	bs, err := s.store.BindingList(ctx, u.Login)
	if err != nil {
		return nil, err
	}
	g := &Grants{bindings: bs, max: RoleAdmin}
	if p.Kind == KindToken {
		g.max, g.org, g.repo = p.MaxRole, p.Org, p.Repo
	}
	return g, nil
}

// Authorize returns nil when p has role on org/repo (org "": on the
// platform), else a wrapped ErrForbidden that says what is missing;
// ErrUnauthenticated for a nil p.
func (s *Service) Authorize(ctx context.Context, p *Principal, role Role, org, repo string) error {
	g, err := s.Grants(ctx, p)
	if err != nil {
		return err
	}
	if has := g.Role(org, repo); has < role {
		return fmt.Errorf("%w: %s needs role %s on %s and has %s", ErrForbidden, p.Login, role, where(org, repo), has)
	}
	return nil
}

func where(org, repo string) string {
	switch {
	case org == "":
		return "the platform"
	case repo == "":
		return "org " + org
	}
	return "repo " + org + "/" + repo
}

// Audit appends e to the audit log, with the current time when e has
// none. Its Detail is cut to 1 KiB.
func (s *Service) Audit(ctx context.Context, e Entry) error {
	if e.Time.IsZero() {
		e.Time = s.now()
	}
	e.Time = e.Time.UTC()
	if len(e.Detail) > 1024 {
		e.Detail = strings.ToValidUTF8(e.Detail[:1024], "")
	}
	e.Outcome = cmp.Or(e.Outcome, "ok")
	return s.store.AuditAppend(ctx, &e)
}

// AuditList returns a page of the audit log, newest first; the ID of its
// last entry is the cursor (AuditQuery.Before) of the next page.
func (s *Service) AuditList(ctx context.Context, q AuditQuery) ([]Entry, error) {
	return s.store.AuditList(ctx, q)
}

// Bootstrap makes sure the platform has an admin. When no user has a
// platform-wide admin binding, it creates the service account
// Config.BootstrapLogin with one and a service token that never expires,
// and returns the token's secret: the only time anyone sees it, so the
// platform prints it. Later calls, and calls of other Services on the
// same store, return created false.
func (s *Service) Bootstrap(ctx context.Context) (secret string, created bool, err error) {
	now := s.now().UTC()
	secret = newTokenText(KindService)
	p := &BootstrapParams{
		User:  User{ID: newID("usr_"), Login: s.cfg.BootstrapLogin, Name: "bootstrap admin", Service: true, Created: now},
		Token: Token{ID: newID("tok_"), Name: "bootstrap", Digest: DigestOf(secret), Created: now, MaxRole: RoleAdmin},
	}
	created, err = s.store.AdminBootstrap(ctx, p)
	if err != nil || !created {
		return "", false, err
	}
	return secret, true, nil
}
