package secrets_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/internal/clocktest"
	"github.com/cikit/cikit/internal/pgtest"
	"github.com/cikit/cikit/secrets"
)

var dynRepo = secrets.RepoScope("acme/api")

// dynBundle is a test's PostgresRoles over its own schema: a role
// reader, granted SELECT on table visible (not on hidden) and CREATE in
// the schema, which the secret DB's credentials join.
type dynBundle struct {
	db     *pgtest.DB
	clock  *clocktest.Clock
	p      *secrets.PostgresRoles
	reader string
}

func newDynBundle(t testing.TB, mod func(*secrets.PostgresRolesConfig)) *dynBundle {
	t.Helper()
	ctx := t.Context()
	db := pgtest.New(t)
	var b [6]byte
	rand.Read(b[:])
	reader := "cikit_test_reader_" + hex.EncodeToString(b[:])
	ident, schema := pgx.Identifier{reader}.Sanitize(), pgx.Identifier{db.Schema}.Sanitize()
	_, err := db.Pool.Exec(ctx, `CREATE ROLE `+ident+` NOLOGIN`)
	require.NoError(t, err)
	// Registered after pgtest.New's, so run before its pool closes.
	t.Cleanup(func() { dropTestRoles(t, db.Pool, reader) })
	for _, stmt := range []string{
		`CREATE TABLE visible (v text)`,
		`INSERT INTO visible VALUES ('granted')`,
		`CREATE TABLE hidden (v text)`,
		`GRANT USAGE, CREATE ON SCHEMA ` + schema + ` TO ` + ident,
		`GRANT SELECT ON visible TO ` + ident,
	} {
		_, err := db.Pool.Exec(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	clock := clocktest.New(time.Now().Truncate(time.Second))
	cfg := secrets.PostgresRolesConfig{
		Pool: db.Pool,
		URL:  db.URL,
		Secrets: map[string]secrets.PostgresRole{
			"DB":    {InRole: reader, Scopes: []secrets.Scope{secrets.EnvScope("acme/api", "prod"), dynRepo}},
			"OTHER": {InRole: reader, Scopes: []secrets.Scope{secrets.OrgScope("other")}},
		},
		Now: clock.Now,
	}
	if mod != nil {
		mod(&cfg)
	}
	p, err := secrets.NewPostgresRoles(cfg)
	require.NoError(t, err)
	return &dynBundle{db: db, clock: clock, p: p, reader: reader}
}

// dropTestRoles drops the credentials made in reader, then reader.
func dropTestRoles(t testing.TB, pool *pgxpool.Pool, reader string) {
	ctx := context.Background()
	rows, err := pool.Query(ctx, `SELECT u.rolname FROM pg_auth_members m
		JOIN pg_roles g ON g.oid = m.roleid JOIN pg_roles u ON u.oid = m.member WHERE g.rolname = $1`, reader)
	require.NoError(t, err)
	members, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	for _, m := range members {
		ident := pgx.Identifier{m}.Sanitize()
		_, err := pool.Exec(ctx, `SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE usename = $1`, m)
		require.NoError(t, err)
		_, err = pool.Exec(ctx, `DROP OWNED BY `+ident+`; DROP ROLE `+ident)
		require.NoError(t, err)
	}
	ident := pgx.Identifier{reader}.Sanitize()
	_, err = pool.Exec(ctx, `DROP OWNED BY `+ident+`; DROP ROLE `+ident)
	require.NoError(t, err)
}

func (b *dynBundle) fetch(t *testing.T, r secrets.Request) []secrets.Secret {
	t.Helper()
	got, err := b.p.Fetch(t.Context(), r)
	require.NoError(t, err)
	return got
}

func (b *dynBundle) validUntil(t *testing.T, role string) (time.Time, bool) {
	t.Helper()
	var until *time.Time
	err := b.db.Pool.QueryRow(t.Context(), `SELECT rolvaliduntil FROM pg_roles WHERE rolname = $1`, role).Scan(&until)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, false
	}
	require.NoError(t, err)
	require.NotNil(t, until)
	return until.UTC(), true
}

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func TestPostgresRolesFetch(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b := newDynBundle(t, nil)
	got := b.fetch(t, secrets.Request{
		Scopes: []secrets.Scope{secrets.EnvScope("acme/api", "staging"), dynRepo, secrets.OrgScope("acme")},
		Names:  []string{"DB", "OTHER", "UNKNOWN", "DB"},
		TTL:    10 * time.Minute,
	})
	require.Len(t, got, 1, "OTHER is not for these scopes, UNKNOWN not served, DB given once")
	s := got[0]
	require.Equal(t, "DB", s.Name)
	require.Equal(t, dynRepo, s.Scope, "the first scope of the request the role lists")
	require.NotNil(t, s.Lease)
	require.Regexp(t, `^cikit_dyn_[0-9a-f]{32}$`, s.Lease.ID)
	require.Equal(t, "postgres-roles", s.Lease.Provider)
	require.Equal(t, b.clock.Now().Add(10*time.Minute).UTC(), s.Lease.Expires)
	require.NoError(t, secrets.ValidValue(s.Value))
	require.NotContains(t, s.Value, "postgres:postgres@", "the URL's own user is replaced")
	require.NotContains(t, s.String(), s.Value[len("postgres://"):])

	until, ok := b.validUntil(t, s.Lease.ID)
	require.True(t, ok)
	require.Equal(t, s.Lease.Expires, until)
	var stored string
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT rolpassword FROM pg_authid WHERE rolname = $1`, s.Lease.ID).Scan(&stored))
	require.True(t, strings.HasPrefix(stored, "SCRAM-SHA-256$4096:"), "the server got a verifier, not the password")

	// The credential connects and has the privileges of its InRole only.
	conn, err := pgx.Connect(ctx, s.Value)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var user, v string
	require.NoError(t, conn.QueryRow(ctx, `SELECT current_user, (SELECT v FROM visible)`).Scan(&user, &v))
	require.Equal(t, s.Lease.ID, user)
	require.Equal(t, "granted", v)
	_, err = conn.Exec(ctx, `SELECT * FROM hidden`)
	require.Equal(t, "42501", pgCode(err), "hidden is not granted to the role: %v", err)

	// Each fetch is a new credential.
	again := b.fetch(t, secrets.Request{Scopes: []secrets.Scope{dynRepo}, Names: []string{"DB"}})
	require.Len(t, again, 1)
	require.NotEqual(t, s.Lease.ID, again[0].Lease.ID)
	require.NotEqual(t, s.Value, again[0].Value)
	require.Equal(t, b.clock.Now().Add(secrets.DefaultPostgresRoleTTL).UTC(), again[0].Lease.Expires, "the default TTL")

	capped := b.fetch(t, secrets.Request{Scopes: []secrets.Scope{dynRepo}, Names: []string{"DB"}, TTL: 24 * time.Hour})
	require.Equal(t, b.clock.Now().Add(secrets.DefaultPostgresRoleMaxTTL).UTC(), capped[0].Lease.Expires, "a TTL is capped at MaxTTL")

	require.Empty(t, b.fetch(t, secrets.Request{Names: []string{"DB"}}), "no scope, no secret (a fork's pull request)")
}

func TestPostgresRolesRevoke(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b := newDynBundle(t, nil)
	s := b.fetch(t, secrets.Request{Scopes: []secrets.Scope{dynRepo}, Names: []string{"DB"}})[0]
	conn, err := pgx.Connect(ctx, s.Value)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, `CREATE TABLE made_by_job (v text)`)
	require.NoError(t, err)

	require.NoError(t, b.p.Revoke(ctx, s.Lease.ID))

	_, err = conn.Exec(ctx, `SELECT 1`)
	require.Error(t, err, "the open session is terminated")
	_, err = pgx.Connect(ctx, s.Value)
	require.Error(t, err, "the credential no longer connects")
	require.Equal(t, "28000", pgCode(err), "the role does not exist: %v", err)
	_, ok := b.validUntil(t, s.Lease.ID)
	require.False(t, ok, "the role is dropped")
	var owner string
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT tableowner FROM pg_tables WHERE schemaname = $1 AND tablename = 'made_by_job'`, b.db.Schema).Scan(&owner))
	require.Equal(t, b.reader, owner, "what the credential made is its InRole's")

	require.NoError(t, b.p.Revoke(ctx, s.Lease.ID), "revoking twice")
	_, err = b.p.Renew(ctx, s.Lease.ID, 0)
	require.ErrorIs(t, err, secrets.ErrNotFound, "renewing a revoked lease")
}

func TestPostgresRolesRenew(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b := newDynBundle(t, func(c *secrets.PostgresRolesConfig) { c.DefaultTTL, c.MaxTTL = 10*time.Minute, time.Hour })
	created := b.clock.Now()
	s := b.fetch(t, secrets.Request{Scopes: []secrets.Scope{dynRepo}, Names: []string{"DB"}})[0]
	require.Equal(t, created.Add(10*time.Minute).UTC(), s.Lease.Expires)

	b.clock.Advance(8 * time.Minute)
	exp, err := b.p.Renew(ctx, s.Lease.ID, 0)
	require.NoError(t, err)
	require.Equal(t, created.Add(18*time.Minute).UTC(), exp, "now plus the default TTL")
	until, _ := b.validUntil(t, s.Lease.ID)
	require.Equal(t, exp, until, "VALID UNTIL moved")

	exp, err = b.p.Renew(ctx, s.Lease.ID, 20*time.Minute)
	require.NoError(t, err)
	require.Equal(t, created.Add(28*time.Minute).UTC(), exp)

	b.clock.Advance(45 * time.Minute)
	exp, err = b.p.Renew(ctx, s.Lease.ID, 20*time.Minute)
	require.NoError(t, err)
	require.Equal(t, created.Add(time.Hour).UTC(), exp, "capped at creation plus MaxTTL")
	until, _ = b.validUntil(t, s.Lease.ID)
	require.Equal(t, exp, until)

	// The credential still works after its renewals.
	conn, err := pgx.Connect(ctx, s.Value)
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
}

func TestPostgresRolesRefusesOtherRoles(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b := newDynBundle(t, nil)
	for _, id := range []string{"postgres", b.reader, "cikit_dyn_", "cikit_dyn_0123456789abcdef0123456789abcdeg", `cikit_dyn_0123456789abcdef0123456789abcdef"; DROP ROLE x; --`} {
		require.ErrorIs(t, b.p.Revoke(ctx, id), secrets.ErrInvalid, id)
		_, err := b.p.Renew(ctx, id, 0)
		require.ErrorIs(t, err, secrets.ErrInvalid, id)
	}
	var n int
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_roles WHERE rolname IN ('postgres', $1)`, b.reader).Scan(&n))
	require.Equal(t, 2, n)
}

func TestPostgresRolesConfig(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	good := func() secrets.PostgresRolesConfig {
		return secrets.PostgresRolesConfig{
			Pool: db.Pool, URL: "postgres://db.internal:5432/app?sslmode=require",
			Secrets: map[string]secrets.PostgresRole{"DB": {InRole: "app", Scopes: []secrets.Scope{dynRepo}}},
		}
	}
	_, err := secrets.NewPostgresRoles(good())
	require.NoError(t, err)
	for name, mod := range map[string]func(*secrets.PostgresRolesConfig){
		"no pool":      func(c *secrets.PostgresRolesConfig) { c.Pool = nil },
		"no URL":       func(c *secrets.PostgresRolesConfig) { c.URL = "" },
		"not postgres": func(c *secrets.PostgresRolesConfig) { c.URL = "mysql://u:hunter2@h/db" },
		"no secrets":   func(c *secrets.PostgresRolesConfig) { c.Secrets = nil },
		"bad name":     func(c *secrets.PostgresRolesConfig) { c.Secrets["CI_DB"] = c.Secrets["DB"] },
		"no role": func(c *secrets.PostgresRolesConfig) {
			c.Secrets["X"] = secrets.PostgresRole{Scopes: []secrets.Scope{dynRepo}}
		},
		"no scopes": func(c *secrets.PostgresRolesConfig) { c.Secrets["X"] = secrets.PostgresRole{InRole: "app"} },
		"bad scope": func(c *secrets.PostgresRolesConfig) {
			c.Secrets["X"] = secrets.PostgresRole{InRole: "app", Scopes: []secrets.Scope{{Kind: "x"}}}
		},
		"max below ttl":  func(c *secrets.PostgresRolesConfig) { c.DefaultTTL, c.MaxTTL = time.Hour, time.Minute },
		"negative ttl":   func(c *secrets.PostgresRolesConfig) { c.DefaultTTL = -time.Minute },
		"sub-second ttl": func(c *secrets.PostgresRolesConfig) { c.DefaultTTL = time.Millisecond },
	} {
		c := good()
		mod(&c)
		_, err := secrets.NewPostgresRoles(c)
		require.ErrorIs(t, err, secrets.ErrInvalid, name)
		require.NotContains(t, err.Error(), "hunter2", name)
	}
}

// TestScramVerifierMatchesServer has the server hash a password and
// checks that ours, with the server's salt, is the same verifier.
func TestScramVerifierMatchesServer(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := pgtest.New(t)
	var rb [6]byte
	rand.Read(rb[:])
	role := "cikit_test_scram_" + hex.EncodeToString(rb[:])
	ident := pgx.Identifier{role}.Sanitize()
	_, err := db.Pool.Exec(ctx, `SET password_encryption = 'scram-sha-256'; CREATE ROLE `+ident+` PASSWORD 'correct horse battery'`)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := db.Pool.Exec(context.Background(), `DROP ROLE `+ident)
		require.NoError(t, err)
	})
	var stored string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT rolpassword FROM pg_authid WHERE rolname = $1`, role).Scan(&stored))
	// SCRAM-SHA-256$ITERATIONS:SALT$STOREDKEY:SERVERKEY
	head, _, _ := strings.Cut(stored, "$")
	require.Equal(t, "SCRAM-SHA-256", head)
	saltB64 := strings.SplitN(strings.SplitN(stored, "$", 3)[1], ":", 2)[1]
	salt, err := base64.StdEncoding.DecodeString(saltB64)
	require.NoError(t, err)
	ours, err := secrets.ScramVerifier("correct horse battery", salt)
	require.NoError(t, err)
	require.Equal(t, stored, ours)
}

// BenchmarkPostgresRoles measures a credential's life: created by Fetch,
// renewed once, revoked.
func BenchmarkPostgresRoles(b *testing.B) {
	b.ReportAllocs()
	db := newDynBundle(b, nil)
	ctx := b.Context()
	for b.Loop() {
		s, err := db.p.Fetch(ctx, secrets.Request{Scopes: []secrets.Scope{dynRepo}, Names: []string{"DB"}})
		if err != nil || len(s) != 1 {
			b.Fatal(s, err)
		}
		if _, err := db.p.Renew(ctx, s[0].Lease.ID, 0); err != nil {
			b.Fatal(err)
		}
		if err := db.p.Revoke(ctx, s[0].Lease.ID); err != nil {
			b.Fatal(err)
		}
	}
}
