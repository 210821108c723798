package platform

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/secrets"
)

// platformSecrets are the parts of the runtime secrets flow.
type platformSecrets struct {
	issuer *secrets.Issuer
	store  secrets.Store
	broker *secrets.Broker
	keeper *secrets.Keeper
	// replays is purged in the background when it is PostgreSQL's.
	replays secrets.Replays
}

// buildSecrets makes the OIDC issuer, the secret store and providers, the
// keeper of dynamic leases and the broker. Without secrets.keys a
// production platform has no secrets: jobs that name some fail at the
// claim, saying so.
func (p *Platform) buildSecrets(ctx context.Context) error {
	c := p.cfg.Secrets
	var ring []secrets.Key
	for i, k := range c.Keys {
		key, err := secrets.ParseKey(k)
		if err != nil {
			return fmt.Errorf("platform: secrets.keys[%d]: %w", i, err)
		}
		ring = append(ring, key)
	}
	if len(ring) == 0 {
		if !p.cfg.Embedded() {
			p.log.Warn("platform: secrets.keys is not set: jobs get no secrets and no ID tokens, and the ones asking for them fail")
			return nil
		}
		// The embedded platform's stores are memory: a key of its own
		// seals what lives as long as it does.
		raw := make([]byte, secrets.KeyBytes)
		rand.Read(raw)
		ring = []secrets.Key{{ID: "embedded", Secret: raw}}
	}
	kr, err := secrets.NewKeyring(ring...)
	if err != nil {
		return fmt.Errorf("platform: secrets.keys: %w", err)
	}
	ps := &platformSecrets{}
	var (
		keyStore secrets.KeyStore
		leases   secrets.LeaseStore
	)
	if p.pool != nil {
		keyStore = secrets.NewPostgresKeyStore(p.pool, kr)
		ps.replays = secrets.NewPostgresReplays(p.pool, p.now)
		if leases, err = secrets.NewPostgresLeaseStore(p.pool); err != nil {
			return err
		}
		if ps.store, err = secrets.NewPostgresStore(p.pool, kr); err != nil {
			return err
		}
	} else {
		keyStore, ps.replays, leases, ps.store = secrets.NewMemoryKeyStore(kr), secrets.NewMemoryReplays(p.now), secrets.NewMemoryLeaseStore(), secrets.NewMemoryStore(kr)
	}
	ps.issuer, err = secrets.NewIssuer(ctx, secrets.IssuerConfig{URL: p.url, Keys: keyStore, TokenTTL: c.TokenTTL, Now: p.now, Logger: p.log.With("component", "oidc")})
	if err != nil {
		return fmt.Errorf("platform: the OIDC issuer at %s: %w (set public-url to the https URL jobs and clouds reach this server at)", p.url, err)
	}
	providers := []secrets.Provider{ps.store}
	if a := c.AWS; a.Region != "" {
		aws, err := secrets.NewAWS(secrets.AWSConfig{Region: a.Region, BaseEndpoint: a.Endpoint, Prefix: a.Prefix})
		if err != nil {
			return fmt.Errorf("platform: secrets.aws: %w", err)
		}
		providers = append(providers, aws)
	}
	var dynamic []secrets.Dynamic
	if pr := c.PostgresRoles; pr.AdminURL != "" {
		roles, err := p.postgresRoles(ctx, pr.AdminURL, pr.URL, pr.Roles, pr.TTL)
		if err != nil {
			return fmt.Errorf("platform: secrets.postgres-roles: %w", err)
		}
		providers, dynamic = append(providers, roles), append(dynamic, roles)
	}
	bc := secrets.BrokerConfig{Verifier: ps.issuer.Verifier(p.secretsAudience()), Replays: ps.replays, Providers: providers,
		Logger: p.log.With("component", "secrets")}
	if len(dynamic) > 0 {
		ps.keeper, err = secrets.NewKeeper(secrets.KeeperConfig{Leases: leases, Providers: dynamic, Now: p.now, Logger: p.log.With("component", "secrets")})
		if err != nil {
			return err
		}
		bc.Leases = ps.keeper
	}
	ps.broker, err = secrets.NewBroker(bc)
	if err != nil {
		return err
	}
	p.secretsParts = ps
	return nil
}

// secretsAudience is the audience of the ID tokens runners present for
// their jobs' secrets: the platform itself.
func (p *Platform) secretsAudience() string { return p.url + "/v1/secrets" }

// jobSecrets is what the runner protocol's server gives jobs.
func (p *Platform) jobSecrets() *fleet.JobSecrets {
	if p.secretsParts == nil {
		return nil
	}
	return &fleet.JobSecrets{Issuer: p.secretsParts.issuer, Broker: p.secretsParts.broker, Audience: p.secretsAudience()}
}

// secretsTasks are the background work of the secrets flow: key
// rotation, the sweep of dynamic leases their jobs stopped renewing.
func (p *Platform) secretsTasks() map[string]func(context.Context) error {
	ps := p.secretsParts
	if ps == nil {
		return nil
	}
	tasks := map[string]func(context.Context) error{"oidc-keys": ps.issuer.Run, "token-uses": p.purgeReplays}
	if len(p.cfg.Secrets.Keys) > 1 {
		tasks["secrets-rewrap"] = p.rewrapSecrets
	}
	if ps.keeper != nil {
		tasks["secret-leases"] = ps.keeper.Run
	}
	return tasks
}

// rewrapSecrets re-encrypts, once at start, the stored secrets' data keys
// that a key other than the primary of secrets.keys wraps: a key is
// rotated by putting the new one first, restarting, and dropping the old
// one once this has run (the OIDC signing keys are re-sealed as the
// issuer reads them, secrets.PostgresKeyStore).
func (p *Platform) rewrapSecrets(ctx context.Context) error {
	n, err := p.secretsParts.store.Rewrap(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		p.log.Error("platform: rewrapping the stored secrets under the primary key failed; the next start tries again", "err", err)
		return nil
	}
	p.log.Info("platform: stored secrets rewrapped under the primary key", "rewrapped", n)
	return nil
}

// purgeReplays forgets, every few minutes, the ID tokens presented that
// have expired.
func (p *Platform) purgeReplays(ctx context.Context) error {
	t := time.NewTicker(5 * time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if _, err := p.secretsParts.replays.Purge(ctx); err != nil && ctx.Err() == nil {
			p.log.Warn("platform: purging the ID tokens presented", "err", err)
		}
	}
}

// oidcHandler serves the issuer's discovery document and keys; nil
// without secrets.
func (p *Platform) oidcHandler() http.Handler {
	if p.secretsParts == nil {
		return nil
	}
	return p.secretsParts.issuer.Handler()
}

// postgresRoles makes the dynamic provider of PostgreSQL credentials.
func (p *Platform) postgresRoles(ctx context.Context, adminURL, url string, roles []string, ttl time.Duration) (*secrets.PostgresRoles, error) {
	pool, err := pgxpool.New(ctx, adminURL)
	if err != nil {
		return nil, fmt.Errorf("admin-url: %w", err)
	}
	p.onClose(pool.Close)
	m := map[string]secrets.PostgresRole{}
	for _, r := range roles {
		name, rest, ok := strings.Cut(r, "=")
		parts := strings.Split(rest, "@")
		if !ok || len(parts) < 2 || parts[0] == "" {
			return nil, fmt.Errorf("roles: %q: write NAME=ROLE@SCOPE[@SCOPE...], such as DB_URL=app_read@repo:acme/api", r)
		}
		if err := secrets.ValidName(name); err != nil {
			return nil, fmt.Errorf("roles: %q: %w", r, err)
		}
		role := secrets.PostgresRole{InRole: parts[0]}
		for _, s := range parts[1:] {
			sc, err := secrets.ParseScope(s)
			if err != nil {
				return nil, fmt.Errorf("roles: %q: %w", r, err)
			}
			role.Scopes = append(role.Scopes, sc)
		}
		m[name] = role
	}
	return secrets.NewPostgresRoles(secrets.PostgresRolesConfig{Pool: pool, URL: url, Secrets: m, DefaultTTL: ttl, Now: p.now})
}
