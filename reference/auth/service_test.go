package auth_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/reference/auth"
)

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// clock stands still until moved.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type bundle struct {
	clock *clock
	store *auth.MemoryStore
	svc   *auth.Service
	admin *auth.Principal
	root  string // the bootstrap token
}

func setup(t *testing.T, mod ...func(*auth.Config)) *bundle {
	t.Helper()
	b := &bundle{clock: &clock{t: time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)}, store: auth.NewMemoryStore()}
	cfg := auth.Config{Store: b.store, Now: b.clock.now, Logger: discard()}
	for _, m := range mod {
		m(&cfg)
	}
	var err error
	b.svc, err = auth.New(cfg)
	require.NoError(t, err)
	secret, created, err := b.svc.Bootstrap(t.Context())
	require.NoError(t, err)
	require.True(t, created)
	b.root = secret
	b.admin, err = b.svc.Authenticate(bearer(secret, "192.0.2.1"))
	require.NoError(t, err)
	return b
}

func bearer(token, addr string) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = addr + ":4711"
	r.Header.Set("Authorization", "Bearer "+token)
	return r
}

// person creates a user who is not a service account, with bindings.
func (b *bundle) person(t *testing.T, login string, bs ...auth.Binding) *auth.Principal {
	t.Helper()
	u := &auth.User{ID: "usr_" + login, Login: login, Created: b.clock.now()}
	require.NoError(t, b.store.UserCreate(t.Context(), u))
	for _, x := range bs {
		x.User = login
		require.NoError(t, b.svc.BindingGrant(t.Context(), b.admin, x))
	}
	return &auth.Principal{Kind: auth.KindSession, User: u.ID, Login: login}
}

func TestBootstrapOnceAcrossServicesOnOneDatabase(t *testing.T) {
	t.Parallel()
	store := postgresStore(t)
	same, err := auth.NewPostgresStore(auth.PoolOf(store))
	require.NoError(t, err)
	var wg sync.WaitGroup
	secrets := make([]string, 6)
	created := make([]bool, 6)
	for i := range 6 {
		wg.Go(func() {
			var s auth.Store = store
			if i%2 == 1 {
				s = same
			}
			svc, err := auth.New(auth.Config{Store: s, Logger: discard()})
			require.NoError(t, err)
			secrets[i], created[i], err = svc.Bootstrap(context.Background())
			require.NoError(t, err)
		})
	}
	wg.Wait()
	var secret string
	for i := range 6 {
		if created[i] {
			require.Empty(t, secret, "only one creates")
			secret = secrets[i]
		} else {
			require.Empty(t, secrets[i], "a later call shows no secret")
		}
	}
	require.True(t, strings.HasPrefix(secret, "cikit_svc_"), secret)
	svc, err := auth.New(auth.Config{Store: same, Logger: discard()})
	require.NoError(t, err)
	p, err := svc.Authenticate(bearer(secret, "192.0.2.1"))
	require.NoError(t, err)
	require.Equal(t, "admin", p.Login)
	require.NoError(t, svc.Authorize(t.Context(), p, auth.RoleAdmin, "", ""))
	tk, err := store.TokenGet(t.Context(), p.Token)
	require.NoError(t, err)
	require.True(t, tk.Expires.IsZero(), "the bootstrap token does not expire: rotate it once real admins exist")
	require.NotContains(t, fmt.Sprintf("%+v", tk), secret, "the store holds the digest, not the secret")
}

// TestTokensRefused: expired, revoked, tampered, unknown and malformed
// tokens, and the tokens of a disabled user, are ErrUnauthenticated with
// a reason; a token's use is recorded at most once a minute.
func TestTokensRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	alice := b.person(t, "alice", auth.Binding{Role: auth.RoleTrigger, Org: "acme"})
	short, err := b.svc.TokenCreate(ctx, alice, auth.TokenParams{Name: "short", TTL: time.Hour})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(short.Secret, "cikit_pat_"))
	require.Len(t, short.Secret, auth.TokenLen)
	revoked, err := b.svc.TokenCreate(ctx, alice, auth.TokenParams{Name: "revoked"})
	require.NoError(t, err)
	require.Equal(t, b.clock.now().Add(auth.DefaultTokenTTL), revoked.Expires, "the default lifetime")
	require.NoError(t, b.svc.TokenRevoke(ctx, alice, revoked.ID))

	p, err := b.svc.Authenticate(bearer(short.Secret, "192.0.2.9"))
	require.NoError(t, err)
	require.Equal(t, "alice", p.Login)
	tk, err := b.store.TokenGet(ctx, short.ID)
	require.NoError(t, err)
	require.Equal(t, "192.0.2.9", tk.LastUsedFrom)
	first := tk.LastUsedAt
	b.clock.add(30 * time.Second)
	_, err = b.svc.Authenticate(bearer(short.Secret, "192.0.2.10"))
	require.NoError(t, err)
	tk, _ = b.store.TokenGet(ctx, short.ID)
	require.Equal(t, first, tk.LastUsedAt, "not written again within a minute")
	b.clock.add(31 * time.Second)
	_, err = b.svc.Authenticate(bearer(short.Secret, "192.0.2.10"))
	require.NoError(t, err)
	tk, _ = b.store.TokenGet(ctx, short.ID)
	require.Equal(t, "192.0.2.10", tk.LastUsedFrom)

	tampered := []byte(short.Secret)
	tampered[20] = map[bool]byte{true: 'b', false: 'a'}[tampered[20] == 'a']
	unknown := strings.Replace(short.Secret, short.Secret[10:20], "0000000000", 1)
	for name, c := range map[string]struct{ token, reason string }{
		"revoked":   {revoked.Secret, "was revoked"},
		"tampered":  {string(tampered), "checksum does not match"},
		"unknown":   {unknown, "checksum"},
		"malformed": {"cikit_xyz_" + short.Secret[10:], "unknown kind"},
		"short":     {"abc", "not a cikit token"},
	} {
		_, err := b.svc.Authenticate(bearer(c.token, "198.51.100."+fmt.Sprint(len(name))))
		require.ErrorIs(t, err, auth.ErrUnauthenticated, name)
		require.ErrorContains(t, err, c.reason, name)
	}
	// A well-formed token with a valid checksum that no store holds.
	other := setup(t)
	_, err = b.svc.Authenticate(bearer(other.root, "198.51.100.50"))
	require.ErrorIs(t, err, auth.ErrUnauthenticated)
	require.ErrorContains(t, err, "unknown")

	b.clock.add(time.Hour)
	_, err = b.svc.Authenticate(bearer(short.Secret, "192.0.2.9"))
	require.ErrorContains(t, err, "expired")

	live, err := b.svc.TokenCreate(ctx, alice, auth.TokenParams{Name: "live"})
	require.NoError(t, err)
	require.NoError(t, b.svc.UserDisable(ctx, b.admin, "alice", true))
	_, err = b.svc.Authenticate(bearer(live.Secret, "192.0.2.9"))
	require.ErrorContains(t, err, "disabled")
	require.ErrorIs(t, b.svc.Authorize(ctx, alice, auth.RoleRead, "acme", "api"), auth.ErrForbidden, "a disabled user has nothing")

	r := httptest.NewRequest("GET", "/", nil)
	p, err = b.svc.Authenticate(r)
	require.NoError(t, err)
	require.Nil(t, p, "no credential: anonymous")
	r.Header.Add("Authorization", "Bearer "+live.Secret)
	r.Header.Add("Authorization", "Bearer "+live.Secret)
	_, err = b.svc.Authenticate(r)
	require.ErrorContains(t, err, "2 Authorization headers")
}

// TestAuthorizeScopesAndCaps: bindings on the platform, an org (and its
// GitLab subgroups) and a repo; a token's max role and scope cap them.
func TestAuthorizeScopesAndCaps(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	bob := b.person(t, "bob", auth.Binding{Role: auth.RoleApprove, Org: "acme"}, auth.Binding{Role: auth.RoleAdmin, Org: "acme", Repo: "api"})
	allow := func(p *auth.Principal, role auth.Role, org, repo string) bool {
		err := b.svc.Authorize(ctx, p, role, org, repo)
		if err != nil {
			require.ErrorIs(t, err, auth.ErrForbidden)
		}
		return err == nil
	}
	require.True(t, allow(bob, auth.RoleApprove, "acme", "web"))
	require.True(t, allow(bob, auth.RoleApprove, "acme/platform", "infra"), "an org binding covers its subgroups")
	require.False(t, allow(bob, auth.RoleRead, "acmeco", "web"), "a prefix of a name is not a subgroup")
	require.True(t, allow(bob, auth.RoleAdmin, "acme", "api"))
	require.False(t, allow(bob, auth.RoleAdmin, "acme", "web"))
	require.False(t, allow(bob, auth.RoleRead, "", ""), "nothing on the platform")
	require.True(t, allow(b.admin, auth.RoleAdmin, "globex", "x"), "a platform admin is admin everywhere")
	require.ErrorIs(t, b.svc.Authorize(ctx, nil, auth.RoleRead, "acme", "api"), auth.ErrUnauthenticated)

	capped, err := b.svc.TokenCreate(ctx, bob, auth.TokenParams{Name: "ci", MaxRole: auth.RoleTrigger, Org: "acme", Repo: "api"})
	require.NoError(t, err)
	cp, err := b.svc.Authenticate(bearer(capped.Secret, "192.0.2.1"))
	require.NoError(t, err)
	require.True(t, allow(cp, auth.RoleTrigger, "acme", "api"))
	require.False(t, allow(cp, auth.RoleApprove, "acme", "api"), "min(admin, the token's trigger)")
	require.False(t, allow(cp, auth.RoleRead, "acme", "web"), "outside the token's scope")
	// A token made with a token is no wider than it.
	child, err := b.svc.TokenCreate(ctx, cp, auth.TokenParams{Name: "child"})
	require.NoError(t, err)
	require.Equal(t, auth.RoleTrigger, child.MaxRole)
	require.Equal(t, "acme", child.Org)
	_, err = b.svc.TokenCreate(ctx, cp, auth.TokenParams{Name: "wider", Org: "globex"})
	require.ErrorIs(t, err, auth.ErrForbidden)

	// Management: only platform admins make tokens for service accounts,
	// and a person's token never outlives MaxTokenTTL or is "never".
	_, err = b.svc.ServiceAccountCreate(ctx, bob, "deploy-bot", "")
	require.ErrorIs(t, err, auth.ErrForbidden)
	_, err = b.svc.ServiceAccountCreate(ctx, b.admin, "deploy-bot", "Deploys")
	require.NoError(t, err)
	_, err = b.svc.TokenCreate(ctx, bob, auth.TokenParams{User: "deploy-bot", Name: "x"})
	require.ErrorIs(t, err, auth.ErrForbidden)
	svc, err := b.svc.TokenCreate(ctx, b.admin, auth.TokenParams{User: "deploy-bot", Name: "x", Never: true})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(svc.Secret, "cikit_svc_"))
	_, err = b.svc.TokenCreate(ctx, b.admin, auth.TokenParams{User: "bob", Name: "x"})
	require.ErrorContains(t, err, "a person makes their own tokens")
	_, err = b.svc.TokenCreate(ctx, bob, auth.TokenParams{Name: "x", Never: true})
	require.ErrorIs(t, err, auth.ErrInvalid)
	_, err = b.svc.TokenCreate(ctx, bob, auth.TokenParams{Name: "x", TTL: 2 * auth.DefaultMaxTokenTTL})
	require.ErrorIs(t, err, auth.ErrInvalid)
	_, err = b.svc.ServiceAccountCreate(ctx, b.admin, strings.Repeat("a", auth.MaxLoginBytes+1), "")
	require.ErrorIs(t, err, auth.ErrInvalid)
	_, err = b.svc.ServiceAccountCreate(ctx, b.admin, "-dash", "")
	require.ErrorIs(t, err, auth.ErrInvalid)
	require.ErrorIs(t, b.svc.BindingGrant(ctx, bob, auth.Binding{User: "bob", Role: auth.RoleAdmin}), auth.ErrForbidden, "no self-promotion")
	require.NoError(t, b.svc.BindingGrant(ctx, bob, auth.Binding{User: "deploy-bot", Role: auth.RoleRead, Org: "acme", Repo: "api"}), "an admin of acme/api grants on it")
}

// TestBruteForce: after FailureBurst failures from one address its
// requests are refused before any lookup, a good token included, until
// the bucket refills; other addresses are not affected; many addresses
// do not grow the limiter past MaxSources.
func TestBruteForce(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *auth.Config) { c.MaxSources = 50 })
	for range auth.DefaultFailureBurst {
		_, err := b.svc.Authenticate(bearer("cikit_pat_guess", "203.0.113.5"))
		require.ErrorIs(t, err, auth.ErrUnauthenticated)
	}
	_, err := b.svc.Authenticate(bearer("cikit_pat_guess", "203.0.113.5"))
	require.ErrorIs(t, err, auth.ErrRateLimited)
	var rl *auth.RateLimitedError
	require.ErrorAs(t, err, &rl)
	require.Equal(t, auth.DefaultFailureEvery, rl.RetryAfter)
	_, err = b.svc.Authenticate(bearer(b.root, "203.0.113.5"))
	require.ErrorIs(t, err, auth.ErrRateLimited, "checked before the lookup: a right guess is not confirmed")
	_, err = b.svc.Authenticate(bearer(b.root, "203.0.113.6"))
	require.NoError(t, err, "another address")
	b.clock.add(auth.DefaultFailureEvery)
	_, err = b.svc.Authenticate(bearer("cikit_pat_guess", "203.0.113.5"))
	require.ErrorIs(t, err, auth.ErrUnauthenticated, "one more try after FailureEvery, still refused")
	_, err = b.svc.Authenticate(bearer("cikit_pat_guess", "203.0.113.5"))
	require.ErrorIs(t, err, auth.ErrRateLimited)

	// IPv6 addresses count by /64.
	for i := range auth.DefaultFailureBurst {
		_, _ = b.svc.Authenticate(bearer("x", fmt.Sprintf("[2001:db8::%x]", i+1)))
	}
	_, err = b.svc.Authenticate(bearer(b.root, "[2001:db8::ffff]"))
	require.ErrorIs(t, err, auth.ErrRateLimited)
	// Thousands of addresses: the oldest are forgotten.
	for i := range 5000 {
		_, _ = b.svc.Authenticate(bearer("x", fmt.Sprintf("10.%d.%d.1", i/250, i%250)))
	}
	require.LessOrEqual(t, auth.FailureSources(b.svc), 50)
}

// TestSessions: a session ends at its absolute expiry and when idle;
// unsafe methods need its CSRF token.
func TestSessions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	carol := b.person(t, "carol")
	cookie, csrf, err := b.svc.SessionStart(t.Context(), carol.User)
	require.NoError(t, err)
	req := func(method, csrfHeader string) *http.Request {
		r := httptest.NewRequest(method, "/", nil)
		r.AddCookie(cookie)
		if csrfHeader != "" {
			r.Header.Set(auth.CSRFHeader, csrfHeader)
		}
		return r
	}
	p, err := b.svc.Authenticate(req("GET", ""))
	require.NoError(t, err)
	require.Equal(t, auth.KindSession, p.Kind)
	require.Equal(t, csrf, p.CSRF)
	_, err = b.svc.Authenticate(req("DELETE", ""))
	require.ErrorIs(t, err, auth.ErrCSRF)
	_, err = b.svc.Authenticate(req("POST", strings.ToUpper(csrf)))
	require.ErrorIs(t, err, auth.ErrCSRF)
	_, err = b.svc.Authenticate(req("POST", csrf))
	require.NoError(t, err)

	b.clock.add(auth.DefaultSessionIdle - time.Second)
	_, err = b.svc.Authenticate(req("GET", ""))
	require.NoError(t, err, "used within the idle time")
	b.clock.add(auth.DefaultSessionIdle - time.Second)
	_, err = b.svc.Authenticate(req("GET", ""))
	require.NoError(t, err, "the last use counts")
	b.clock.add(auth.DefaultSessionIdle)
	_, err = b.svc.Authenticate(req("GET", ""))
	require.ErrorContains(t, err, "idle")

	cookie, _, err = b.svc.SessionStart(t.Context(), carol.User)
	require.NoError(t, err)
	for range 13 {
		b.clock.add(time.Hour - time.Minute)
		_, err = b.svc.Authenticate(req("GET", ""))
		if err != nil {
			break
		}
	}
	require.ErrorContains(t, err, "expired", "12 hours at most, however busy")
	bad := httptest.NewRequest("GET", "/", nil)
	bad.AddCookie(&http.Cookie{Name: auth.SessionCookie, Value: strings.Repeat("A", 43)})
	_, err = b.svc.Authenticate(bad)
	require.ErrorIs(t, err, auth.ErrUnauthenticated)
}

// TestTokenLimit: a user has at most MaxTokensPerUser live tokens; a
// revoked one makes room.
func TestTokenLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dave := b.person(t, "dave")
	var last *auth.NewToken
	for i := range auth.MaxTokensPerUser {
		var err error
		last, err = b.svc.TokenCreate(t.Context(), dave, auth.TokenParams{Name: fmt.Sprint("t", i)})
		require.NoError(t, err)
	}
	_, err := b.svc.TokenCreate(t.Context(), dave, auth.TokenParams{Name: "one too many"})
	require.ErrorIs(t, err, auth.ErrInvalid)
	require.ErrorContains(t, err, "revoke some first")
	require.NoError(t, b.svc.TokenRevoke(t.Context(), dave, last.ID))
	_, err = b.svc.TokenCreate(t.Context(), dave, auth.TokenParams{Name: "room again"})
	require.NoError(t, err)
}
