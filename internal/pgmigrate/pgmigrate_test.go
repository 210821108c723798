package pgmigrate_test

import (
	"sync"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/internal/pgmigrate"
	"github.com/cikit/cikit/internal/pgtest"
)

func TestApply(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := t.Context()
	fsys := fstest.MapFS{
		"002_more.sql":  {Data: []byte(`INSERT INTO things VALUES (2)`)},
		"001_first.sql": {Data: []byte(`CREATE TABLE things (n int); INSERT INTO things VALUES (1)`)},
		"README.md":     {Data: []byte("not a migration")},
	}
	var wg sync.WaitGroup
	for range 4 { // at once, as several processes starting
		wg.Go(func() { require.NoError(t, pgmigrate.Apply(ctx, db.Pool, "test", fsys)) })
	}
	wg.Wait()
	var n, sum int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*), sum(n) FROM things`).Scan(&n, &sum))
	require.Equal(t, 2, n, "each migration applied once, in order")
	require.Equal(t, 3, sum)

	fsys["003_bad.sql"] = &fstest.MapFile{Data: []byte(`INSERT INTO nowhere VALUES (3)`)}
	fsys["004_after.sql"] = &fstest.MapFile{Data: []byte(`INSERT INTO things VALUES (4)`)}
	err := pgmigrate.Apply(ctx, db.Pool, "test", fsys)
	require.ErrorContains(t, err, "test: migration 003_bad.sql")
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM things`).Scan(&n))
	require.Equal(t, 2, n, "a failed migration leaves the database as it was")

	require.NoError(t, pgmigrate.Apply(ctx, db.Pool, "other", fstest.MapFS{"001_x.sql": {Data: []byte(`CREATE TABLE other_things (n int)`)}}),
		"components are numbered on their own")
}

func TestApplyRefusesBadNames(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	err := pgmigrate.Apply(t.Context(), db.Pool, "test", fstest.MapFS{"first.sql": {}})
	require.ErrorContains(t, err, "not numbered")
	err = pgmigrate.Apply(t.Context(), db.Pool, "test", fstest.MapFS{"001_a.sql": {}, "001_b.sql": {}})
	require.ErrorContains(t, err, "have one number")
}
