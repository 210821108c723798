package platform

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/cikit/cikit/internal/httpguard"
	"github.com/cikit/cikit/reference/auth"
	"github.com/cikit/cikit/reference/config"
)

// buildAuth makes the platform's auth.Service, on PostgreSQL when the
// platform has it (memory otherwise), with the configured sign-in, and
// bootstraps its first admin: the admin token's secret is kept for the
// banner and AdminToken.
func (p *Platform) buildAuth(ctx context.Context) (*auth.Service, error) {
	var store auth.Store = auth.NewMemoryStore()
	if p.pool != nil {
		ps, err := auth.NewPostgresStore(p.pool)
		if err != nil {
			return nil, fmt.Errorf("platform: %w", err)
		}
		store = ps
	}
	a := p.cfg.Auth
	cfg := auth.Config{Store: store, PlainHTTP: plainLocalhost(p.url), Now: p.now, Logger: p.log.With("component", "auth"),
		TokenTTL: a.TokenTTL, MaxTokenTTL: a.TokenMaxTTL, SessionTTL: a.SessionTTL, SessionIdle: a.SessionIdle}
	if o := a.OIDC; o.Issuer != "" {
		bindings, err := defaultBindings(o.DefaultRoles)
		if err != nil {
			return nil, err
		}
		cfg.OIDC = &auth.OIDCConfig{Issuer: o.Issuer, ClientID: o.ClientID, ClientSecret: o.ClientSecret, RedirectURL: p.url + "/auth/callback",
			Scopes: o.Scopes, AllowedDomains: o.AllowedDomains, DefaultBindings: bindings}
	}
	if proxies := p.cfg.HTTP.TrustedProxies; len(proxies) > 0 {
		// Behind a proxy the connection's address is the proxy's: the
		// failure limit counts the client the proxy names instead.
		prefixes, err := httpguard.ParseProxies(proxies)
		if err != nil {
			return nil, fmt.Errorf("platform: http.trusted-proxies: %w", err)
		}
		l, err := httpguard.NewLimiter(httpguard.LimiterConfig{Rate: 1, Burst: 1, TrustedProxies: prefixes, Now: p.now})
		if err != nil {
			return nil, fmt.Errorf("platform: %w", err)
		}
		cfg.ClientAddr = func(r *http.Request) string { return l.Source(r).String() }
	}
	svc, err := auth.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("platform: %w", err)
	}
	secret, created, err := svc.Bootstrap(ctx)
	if err != nil {
		return nil, fmt.Errorf("platform: bootstrapping the first admin: %w", err)
	}
	if created {
		p.adminToken = secret
	}
	return svc, nil
}

// defaultBindings parses auth.oidc.default-roles.
func defaultBindings(grants []string) ([]auth.Binding, error) {
	var out []auth.Binding
	for _, g := range grants {
		name, org, repo, err := config.ParseRoleGrant(g)
		if err != nil {
			return nil, fmt.Errorf("platform: auth.oidc.default-roles: %w", err)
		}
		role, err := auth.ParseRole(name)
		if err != nil {
			return nil, fmt.Errorf("platform: auth.oidc.default-roles: %w", err)
		}
		out = append(out, auth.Binding{Role: role, Org: org, Repo: repo})
	}
	return out, nil
}

// AdminToken returns the secret of the admin token the platform made at
// its start, "" when it made none (an admin existed already). `cikit
// serve` prints it; it is shown nowhere else.
func (p *Platform) AdminToken() string { return p.adminToken }

// plainLocalhost says whether the platform is served over plain http on
// a loopback address, where a Secure cookie would never be sent back.
func plainLocalhost(u string) bool {
	parsed, err := url.Parse(u)
	if err != nil || parsed.Scheme != "http" {
		return false
	}
	host := parsed.Hostname()
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
