package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cikit/cikit/internal/testenv"
)

// DefaultURL is the server used when CIKIT_TEST_DATABASE_URL is unset. The
// password matters only where the server asks for one: ./test.sh sets it
// when it installs PostgreSQL, local trust authentication ignores it.
const DefaultURL = "postgres://postgres:postgres@127.0.0.1:5432/postgres?sslmode=disable"

// connectTimeout bounds each connection attempt, so an unreachable server
// skips or fails the test in seconds rather than at the test timeout.
const connectTimeout = 5 * time.Second

// maxIdentifierLen is PostgreSQL's NAMEDATALEN-1; longer names are
// silently truncated, which would break the name we later DROP.
const maxIdentifierLen = 63

// DB is one test's schema on the test server.
type DB struct {
	// Pool's connections have Schema as their search_path.
	Pool *pgxpool.Pool
	// Schema is the name of the test's schema. It needs no quoting.
	Schema string
	// URL connects to the same server with Schema as the search_path, for
	// a child process or a component that builds its own pool.
	URL string
}

// New creates a fresh schema for t and a pool that uses it. The schema is
// dropped and the pool closed when t ends.
func New(t testing.TB) *DB {
	t.Helper()
	baseURL := os.Getenv(testenv.DatabaseURLVar)
	if baseURL == "" {
		baseURL = DefaultURL
	}
	schema := schemaName(t.Name())
	schemaURL, err := withSearchPath(baseURL, schema)
	if err != nil {
		t.Fatalf("pgtest: %s: %v", testenv.DatabaseURLVar, err)
	}
	cfg, err := pgxpool.ParseConfig(baseURL)
	if err != nil {
		t.Fatalf("pgtest: %s: %v", testenv.DatabaseURLVar, err)
	}
	setDefaultTimeout(&cfg.ConnConfig.Config)
	// A search_path naming a schema that does not exist yet is valid, so
	// the pool can create the schema it then uses.
	cfg.ConnConfig.RuntimeParams["search_path"] = schema

	ctx, cancel := context.WithTimeout(context.Background(), 2*connectTimeout)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("pgtest: create pool: %v", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		testenv.ServiceUnavailable(t, testenv.PostgreSQL, err)
	}
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		pool.Close()
		t.Fatalf("pgtest: create schema %s: %v", schema, err)
	}
	// Cleanups run last-registered first: the pool is closed, then the
	// schema dropped.
	t.Cleanup(func() { dropSchema(t, baseURL, schema) })
	t.Cleanup(pool.Close)
	return &DB{Pool: pool, Schema: schema, URL: schemaURL}
}

func connect(ctx context.Context, connString string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(connString)
	if err != nil {
		return nil, err
	}
	setDefaultTimeout(&cfg.Config)
	return pgx.ConnectConfig(ctx, cfg)
}

// setDefaultTimeout applies connectTimeout unless the URL chose one with
// connect_timeout.
func setDefaultTimeout(cfg *pgconn.Config) {
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = connectTimeout
	}
}

// dropSchema runs as a cleanup, when t.Context() is already canceled, and
// on a connection of its own because the test's pool is closed by then.
func dropSchema(t testing.TB, connString, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*connectTimeout)
	defer cancel()
	conn, err := connect(ctx, connString)
	if err != nil {
		t.Errorf("pgtest: drop schema %s: %v", schema, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		t.Errorf("pgtest: drop schema %s: %v", schema, err)
	}
}

// schemaName returns "t_", 12 random hex digits, "_" and testName reduced
// to lowercase letters, digits and single underscores, cut to 63 bytes.
// The random part keeps names unique across parallel tests, repeated calls
// in one test and concurrent runs of the same test against one server; the
// name part only helps a person find a leftover schema.
func schemaName(testName string) string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error
	name := "t_" + hex.EncodeToString(b[:]) + "_" + sanitize(testName)
	name = strings.TrimRight(name[:min(len(name), maxIdentifierLen)], "_")
	return name
}

func sanitize(s string) string {
	var sb strings.Builder
	underscore := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			sb.WriteRune(r)
			underscore = false
			continue
		}
		if !underscore {
			sb.WriteByte('_')
			underscore = true
		}
	}
	return strings.Trim(sb.String(), "_")
}

// withSearchPath adds "-c search_path=schema" to the URL's options
// parameter, which the server applies at connection start, so any
// libpq-compatible client given the URL lands in the schema.
func withSearchPath(connURL, schema string) (string, error) {
	u, err := url.Parse(connURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		// The value is not echoed: it may hold a password.
		return "", errors.New("not a postgres:// URL")
	}
	q := u.Query()
	opts := strings.TrimSpace(q.Get("options") + " -c search_path=" + schema)
	q.Set("options", opts)
	// Encode writes spaces as "+", which libpq does not decode in URIs.
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	return u.String(), nil
}
