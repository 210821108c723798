// Package redistest gives each test its own key prefix on the shared test
// Redis, so tests run in parallel against a real server without touching
// each other's keys.
//
// # Use
//
//	func TestCounters(t *testing.T) {
//		t.Parallel()
//		ns := redistest.New(t)
//		key := ns.Key("tenant", "acme") // "cikit-test:<random>:tenant:acme"
//		require.NoError(t, ns.Client.Incr(t.Context(), key).Err())
//	}
//
// Code under test must take its key prefix as configuration and be given
// [NS.Prefix], or be handed keys built with [NS.Key].
//
// # Guarantees
//
//   - Every call to [New] returns a new prefix "cikit-test:<random>:".
//   - When the test ends every key under the prefix is deleted, and only
//     those, and the client is closed. Other tests' keys are untouched, so
//     tests never FLUSHDB.
//   - The server comes from CIKIT_TEST_REDIS_URL, or [DefaultURL]. When it
//     cannot be reached the test is skipped, or failed in CI (see testenv).
//
// # Stability
//
// Internal to cikit; changes with its callers.
package redistest
