package pgtest_test

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"go.uber.org/goleak"

	"github.com/cikit/cikit/internal/testenv"

	"github.com/cikit/cikit/internal/pgtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestSchemasAreIsolated(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a, b := pgtest.New(t), pgtest.New(t)
	require.NotEqual(t, a.Schema, b.Schema)

	_, err := a.Pool.Exec(ctx, `CREATE TABLE jobs (id text PRIMARY KEY)`)
	require.NoError(t, err)
	_, err = a.Pool.Exec(ctx, `INSERT INTO jobs VALUES ('a')`)
	require.NoError(t, err)

	// b cannot see a's table, and may create its own of the same name.
	_, err = b.Pool.Exec(ctx, `SELECT * FROM jobs`)
	require.ErrorContains(t, err, `relation "jobs" does not exist`)
	_, err = b.Pool.Exec(ctx, `CREATE TABLE jobs (id text PRIMARY KEY)`)
	require.NoError(t, err)

	var n int
	require.NoError(t, b.Pool.QueryRow(ctx, `SELECT count(*) FROM jobs`).Scan(&n))
	require.Zero(t, n)
	require.NoError(t, a.Pool.QueryRow(ctx, `SELECT count(*) FROM jobs`).Scan(&n))
	require.Equal(t, 1, n)
}

func TestSchemaName(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	require.Regexp(t, `^t_[0-9a-f]{12}_testschemaname$`, db.Schema)

	var current string
	require.NoError(t, db.Pool.QueryRow(t.Context(), `SELECT current_schema()`).Scan(&current))
	require.Equal(t, db.Schema, current)

	t.Run("a Long/sub-test name, with spaces & symbols: "+strings.Repeat("x", 80), func(t *testing.T) {
		db := pgtest.New(t)
		require.LessOrEqual(t, len(db.Schema), 63)
		require.Regexp(t, `^t_[0-9a-f]{12}_testschemaname_a_long_sub_test_name_with_spaces$`, db.Schema)
	})
}

// TestURLUsesSchema connects as a child process would: with nothing but
// the URL.
func TestURLUsesSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := pgtest.New(t)
	_, err := db.Pool.Exec(ctx, `CREATE TABLE marker (v text); INSERT INTO marker VALUES ('from pool')`)
	require.NoError(t, err)

	conn, err := pgx.Connect(ctx, db.URL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var current, v string
	require.NoError(t, conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&current))
	require.Equal(t, db.Schema, current)
	require.NoError(t, conn.QueryRow(ctx, `SELECT v FROM marker`).Scan(&v))
	require.Equal(t, "from pool", v)
}

// TestCleanupDropsSchema watches a sub-test's cleanup from the parent: the
// sub-test's cleanups have run when t.Run returns.
func TestCleanupDropsSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	observer := pgtest.New(t)
	schemaExists := func(name string) bool {
		var ok bool
		require.NoError(t, observer.Pool.QueryRow(ctx,
			`SELECT EXISTS (SELECT 1 FROM information_schema.schemata WHERE schema_name = $1)`, name).Scan(&ok))
		return ok
	}

	var schema string
	t.Run("owner", func(t *testing.T) {
		db := pgtest.New(t)
		schema = db.Schema
		_, err := db.Pool.Exec(t.Context(), `CREATE TABLE jobs (id text)`)
		require.NoError(t, err)
		require.True(t, schemaExists(schema))
	})
	require.False(t, schemaExists(schema), "schema %s survived the cleanup", schema)
	require.True(t, schemaExists(observer.Schema))
}

func TestUnreachable(t *testing.T) {
	// A port that was just free: nothing listens there.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	t.Setenv("CIKIT_TEST_DATABASE_URL", "postgres://postgres@"+addr+"/postgres?sslmode=disable")

	for ci, want := range map[string]string{"": "skip", "true": "fatal"} {
		t.Run("CI="+ci, func(t *testing.T) {
			t.Setenv("CI", ci)
			v := testenv.Capture(t, func(tb testing.TB) { pgtest.New(tb) })
			require.Equal(t, want, v.Ended)
			require.Contains(t, v.Msg, "PostgreSQL")
			require.Contains(t, v.Msg, "CIKIT_TEST_DATABASE_URL")
		})
	}
}
