package secrets

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Defaults of PostgresRolesConfig.
const (
	DefaultPostgresRoleTTL    = 30 * time.Minute
	DefaultPostgresRoleMaxTTL = 2 * time.Hour
)

// PostgresRoleName is the name of the PostgresRoles provider.
const PostgresRoleName = "postgres-roles"

// PostgresRolePrefix starts the name of every role PostgresRoles makes;
// it renews and revokes no other.
const PostgresRolePrefix = "cikit_dyn_"

// PostgresRole is what a secret of PostgresRoles gives.
type PostgresRole struct {
	// InRole is the role whose privileges the credential gets: each
	// credential is a new role that is a member of it.
	InRole string
	// Scopes may read the secret: a Fetch for scopes none of which is
	// listed leaves it out.
	Scopes []Scope
}

// PostgresRolesConfig configures PostgresRoles.
type PostgresRolesConfig struct {
	// Pool connects to the server the credentials are for, as a role
	// allowed to create and drop roles: CREATEROLE, with the ADMIN
	// option on each InRole (PostgreSQL 16 and later), or a superuser.
	// The server is PostgreSQL 14 or later.
	Pool *pgxpool.Pool
	// URL is where the job connects with its credential: a
	// postgres:// URL with the host, port, database and parameters the
	// job should use ("postgres://db.internal:5432/app?sslmode=require").
	// A secret's value is this URL with the credential's user and
	// password in place of any the URL holds.
	URL string
	// Secrets maps a secret's name to the role its credentials join.
	Secrets map[string]PostgresRole
	// DefaultTTL is a lease's TTL when the Request names none; default
	// DefaultPostgresRoleTTL.
	DefaultTTL time.Duration
	// MaxTTL bounds a credential's life from its creation, renewals
	// included; default DefaultPostgresRoleMaxTTL. A job running longer
	// loses its credential.
	MaxTTL time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// PostgresRoles is a Dynamic provider of PostgreSQL credentials: each
// Fetch of a secret creates a new login role, cikit_dyn_<random>, with
// a random password, VALID UNTIL its lease's expiry, member of the
// secret's InRole. The secret's value is a connection URL (see
// PostgresRolesConfig.URL) holding the role and its password; the
// lease's ID is the role's name.
//
// Renew moves the role's VALID UNTIL, never past MaxTTL from its
// creation. Revoke makes the role NOLOGIN, terminates its sessions,
// gives what it owns in the pool's database to its InRole, and drops
// it. Objects it owns in other databases make the DROP fail: Revoke
// then returns the error (the role can no longer log in), and is
// retried by the Keeper.
//
// VALID UNTIL is checked by PostgreSQL's password authentication only:
// a server trusting connections (trust, peer, cert) lets a role log in
// after its expiry, until it is revoked.
//
// The password is sent to the server as a SCRAM-SHA-256 verifier, never
// in clear, so a server logging statements does not log it; it is in no
// log or error of this package.
type PostgresRoles struct {
	cfg PostgresRolesConfig
	url *url.URL
}

var _ Dynamic = (*PostgresRoles)(nil)

// NewPostgresRoles returns a provider configured by cfg.
func NewPostgresRoles(cfg PostgresRolesConfig) (*PostgresRoles, error) {
	if cfg.Pool == nil {
		return nil, fmt.Errorf("%w: PostgresRolesConfig.Pool is nil: give a pool allowed to create roles", ErrInvalid)
	}
	if cfg.DefaultTTL == 0 {
		cfg.DefaultTTL = DefaultPostgresRoleTTL
	}
	if cfg.MaxTTL == 0 {
		cfg.MaxTTL = DefaultPostgresRoleMaxTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	switch {
	case cfg.DefaultTTL < time.Second:
		return nil, fmt.Errorf("%w: PostgresRolesConfig.DefaultTTL (%v) must be at least a second", ErrInvalid, cfg.DefaultTTL)
	case cfg.MaxTTL < cfg.DefaultTTL:
		return nil, fmt.Errorf("%w: PostgresRolesConfig.MaxTTL (%v) must be at least DefaultTTL (%v)", ErrInvalid, cfg.MaxTTL, cfg.DefaultTTL)
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
		// The URL is not echoed: it may hold a password.
		return nil, fmt.Errorf("%w: PostgresRolesConfig.URL must be a postgres://HOST[:PORT]/DATABASE URL", ErrInvalid)
	}
	if len(cfg.Secrets) == 0 {
		return nil, fmt.Errorf("%w: PostgresRolesConfig.Secrets is empty: name at least one secret and its role", ErrInvalid)
	}
	secrets := make(map[string]PostgresRole, len(cfg.Secrets))
	for name, r := range cfg.Secrets {
		if err := ValidName(name); err != nil {
			return nil, err
		}
		if r.InRole == "" {
			return nil, fmt.Errorf("%w: secret %s: PostgresRole.InRole is empty: name the role whose privileges its credentials get", ErrInvalid, name)
		}
		if len(r.Scopes) == 0 {
			return nil, fmt.Errorf("%w: secret %s: PostgresRole.Scopes is empty: no job could read it", ErrInvalid, name)
		}
		for _, s := range r.Scopes {
			if err := s.Validate(); err != nil {
				return nil, fmt.Errorf("secret %s: %w", name, err)
			}
		}
		r.Scopes = slices.Clone(r.Scopes)
		secrets[name] = r
	}
	cfg.Secrets = secrets
	return &PostgresRoles{cfg: cfg, url: u}, nil
}

// Name returns "postgres-roles".
func (p *PostgresRoles) Name() string { return PostgresRoleName }

// Fetch creates a credential for each name of r it serves to one of
// r.Scopes; the secret's Scope is the first of r.Scopes its PostgresRole
// lists. If creating one fails, those created before are dropped.
func (p *PostgresRoles) Fetch(ctx context.Context, r Request) ([]Secret, error) {
	ttl := p.cfg.DefaultTTL
	if r.TTL > 0 {
		ttl = r.TTL
	}
	ttl = min(ttl, p.cfg.MaxTTL)
	var out []Secret
	seen := make(map[string]bool, len(r.Names))
	for _, name := range r.Names {
		role, ok := p.cfg.Secrets[name]
		if !ok || seen[name] {
			continue
		}
		seen[name] = true
		i := slices.IndexFunc(r.Scopes, func(s Scope) bool { return slices.Contains(role.Scopes, s) })
		if i < 0 {
			continue
		}
		s, err := p.create(ctx, name, role, r.Identity, ttl)
		if err != nil {
			// Best effort, also when ctx is canceled: what is left
			// expires at its VALID UNTIL.
			undo, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			for _, made := range out {
				_ = p.Revoke(undo, made.Lease.ID)
			}
			cancel()
			return nil, err
		}
		s.Scope = r.Scopes[i]
		out = append(out, s)
	}
	return out, nil
}

func (p *PostgresRoles) create(ctx context.Context, name string, role PostgresRole, id *Claims, ttl time.Duration) (Secret, error) {
	var rb [16]byte
	rand.Read(rb[:])
	roleName := PostgresRolePrefix + hex.EncodeToString(rb[:])
	var pb [32]byte
	rand.Read(pb[:])
	password := base64.RawURLEncoding.EncodeToString(pb[:])
	verifier, err := scramVerifier(password, nil)
	if err != nil {
		return Secret{}, err
	}

	now := p.cfg.Now()
	expires := pgRoleTime(now.Add(ttl))
	maxUntil := pgRoleTime(now.Add(p.cfg.MaxTTL))
	comment := fmt.Sprintf("cikit dynamic secret %s; max valid until %s", name, maxUntil.Format(time.RFC3339))
	if id != nil {
		comment += fmt.Sprintf("; job %s/%s/%s of %s", id.RunID, id.JobID, id.RunAttempt, id.Repository)
	}
	ident := pgx.Identifier{roleName}.Sanitize()
	// Utility statements take no parameters: the values are literals,
	// quoted by pgRoleLiteral.
	err = pgx.BeginFunc(ctx, p.cfg.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "CREATE ROLE "+ident+" LOGIN PASSWORD "+pgRoleLiteral(verifier)+
			" VALID UNTIL "+pgRoleLiteral(expires.Format(time.RFC3339))+" IN ROLE "+pgx.Identifier{role.InRole}.Sanitize()); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "COMMENT ON ROLE "+ident+" IS "+pgRoleLiteral(comment))
		return err
	})
	if err != nil {
		return Secret{}, fmt.Errorf("secrets: postgres-roles: secret %s: create a role in %s: %w", name, role.InRole, pgRoleError(err))
	}
	u := *p.url
	u.User = url.UserPassword(roleName, password)
	return Secret{
		Name:  name,
		Value: u.String(),
		Lease: &Lease{ID: roleName, Provider: PostgresRoleName, Expires: expires},
	}, nil
}

var pgRoleNameRE = regexp.MustCompile(`^` + PostgresRolePrefix + `[0-9a-f]{32}$`)

func validRoleLease(leaseID string) error {
	if !pgRoleNameRE.MatchString(leaseID) {
		return fmt.Errorf("%w: lease %q is not a role of postgres-roles (%s followed by 32 hex digits)", ErrInvalid, leaseID, PostgresRolePrefix)
	}
	return nil
}

var pgMaxUntilRE = regexp.MustCompile(`max valid until (\S+?);`)

// Renew moves the role's VALID UNTIL to now+ttl (zero ttl: DefaultTTL),
// capped at its creation plus MaxTTL. ErrNotFound: the role is gone.
func (p *PostgresRoles) Renew(ctx context.Context, leaseID string, ttl time.Duration) (time.Time, error) {
	if err := validRoleLease(leaseID); err != nil {
		return time.Time{}, err
	}
	if ttl <= 0 {
		ttl = p.cfg.DefaultTTL
	}
	var comment *string
	err := p.cfg.Pool.QueryRow(ctx, `SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = $1`, leaseID).Scan(&comment)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, fmt.Errorf("secrets: postgres-roles: lease %s: the role is gone: %w", leaseID, ErrNotFound)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("secrets: postgres-roles: renew lease %s: %w", leaseID, pgRoleError(err))
	}
	var maxUntil time.Time
	if comment != nil {
		if m := pgMaxUntilRE.FindStringSubmatch(*comment + ";"); m != nil {
			maxUntil, _ = time.Parse(time.RFC3339, m[1])
		}
	}
	if maxUntil.IsZero() {
		return time.Time{}, fmt.Errorf("secrets: postgres-roles: renew lease %s: the role's comment lost its \"max valid until\": it is not renewed", leaseID)
	}
	expires := pgRoleTime(p.cfg.Now().Add(ttl))
	if expires.After(maxUntil) {
		expires = maxUntil
	}
	_, err = p.cfg.Pool.Exec(ctx, "ALTER ROLE "+pgx.Identifier{leaseID}.Sanitize()+" VALID UNTIL "+pgRoleLiteral(expires.Format(time.RFC3339)))
	if pgRoleGone(err) {
		return time.Time{}, fmt.Errorf("secrets: postgres-roles: lease %s: the role is gone: %w", leaseID, ErrNotFound)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("secrets: postgres-roles: renew lease %s: %w", leaseID, pgRoleError(err))
	}
	return expires, nil
}

// Revoke ends the role's sessions and drops it; a role that is gone is
// not an error.
func (p *PostgresRoles) Revoke(ctx context.Context, leaseID string) error {
	if err := validRoleLease(leaseID); err != nil {
		return err
	}
	ident := pgx.Identifier{leaseID}.Sanitize()
	fail := func(step string, err error) error {
		if pgRoleGone(err) {
			return nil
		}
		return fmt.Errorf("secrets: postgres-roles: revoke lease %s: %s: %w", leaseID, step, pgRoleError(err))
	}
	var heir string
	err := p.cfg.Pool.QueryRow(ctx, `SELECT coalesce(
			(SELECT g.rolname FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
				WHERE m.member = r.oid ORDER BY g.rolname LIMIT 1),
			current_user)
		FROM pg_roles r WHERE r.rolname = $1`, leaseID).Scan(&heir)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fail("find the role", err)
	}
	// First no new session, then none left: the credential stops
	// working before its objects are dealt with.
	if _, err := p.cfg.Pool.Exec(ctx, "ALTER ROLE "+ident+" NOLOGIN"); err != nil {
		return fail("refuse its logins", err)
	}
	// pg_terminate_backend waits up to 5 s for each session to end.
	if _, err := p.cfg.Pool.Exec(ctx, `SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE usename = $1`, leaseID); err != nil {
		return fail("terminate its sessions", err)
	}
	err = pgx.BeginFunc(ctx, p.cfg.Pool, func(tx pgx.Tx) error {
		for _, stmt := range []string{
			"REASSIGN OWNED BY " + ident + " TO " + pgx.Identifier{heir}.Sanitize(),
			"DROP OWNED BY " + ident,
			"DROP ROLE IF EXISTS " + ident,
		} {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fail("drop the role", err)
	}
	return nil
}

// pgRoleTime is t as VALID UNTIL keeps it here: to the second, UTC.
func pgRoleTime(t time.Time) time.Time { return t.Truncate(time.Second).UTC() }

// pgRoleLiteral quotes s as an SQL string literal (standard conforming
// strings: only the quote is special).
func pgRoleLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// pgRoleGone reports whether err says the role does not exist (any
// more): a concurrent Revoke dropped it.
func pgRoleGone(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42704" // undefined_object
}

// pgRoleError keeps a server error's message and hint; the statements of
// this file hold no password, so the error cannot either.
func pgRoleError(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Hint != "" {
		return fmt.Errorf("%w (%s)", err, pe.Hint)
	}
	return err
}

// scramIterations is PostgreSQL's default scram_iterations.
const scramIterations = 4096

// scramVerifier returns password's SCRAM-SHA-256 verifier as PostgreSQL
// stores it (RFC 5802, RFC 7677), so that CREATE ROLE need not send the
// password itself. A nil salt is a random one.
func scramVerifier(password string, salt []byte) (string, error) {
	if salt == nil {
		salt = make([]byte, 16)
		rand.Read(salt)
	}
	salted, err := pbkdf2.Key(sha256.New, password, salt, scramIterations, sha256.Size)
	if err != nil {
		return "", err
	}
	mac := func(key []byte, msg string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(msg))
		return h.Sum(nil)
	}
	clientKey := mac(salted, "Client Key")
	storedKey := sha256.Sum256(clientKey)
	serverKey := mac(salted, "Server Key")
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", scramIterations, b64(salt), b64(storedKey[:]), b64(serverKey)), nil
}
