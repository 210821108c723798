// Package pgtest gives each test its own PostgreSQL schema on the shared
// test server, so tests run in parallel against a real database without
// seeing each other's tables.
//
// # Use
//
//	func TestStore(t *testing.T) {
//		t.Parallel()
//		db := pgtest.New(t)
//		// db.Pool's connections use db.Schema as their search_path:
//		// unqualified tables are created in, and read from, that schema.
//		_, err := db.Pool.Exec(t.Context(), `CREATE TABLE jobs (id text PRIMARY KEY)`)
//		require.NoError(t, err)
//		// A spawned binary given db.URL sees the same tables.
//	}
//
// # Guarantees
//
//   - Every call to [New] creates a new schema whose name starts with "t_",
//     continues with random hex and ends with the test's name, and is at most
//     63 bytes (PostgreSQL's identifier limit).
//   - When the test ends the pool is closed and the schema is dropped with
//     everything in it.
//   - The server comes from CIKIT_TEST_DATABASE_URL, or [DefaultURL]. When it
//     cannot be reached the test is skipped, or failed in CI (see testenv).
//
// Code under test must not qualify table names with a schema, or must take
// the schema as configuration; migrations must not SET search_path.
//
// # Stability
//
// Internal to cikit; changes with its callers.
package pgtest
