// Package testenv decides what a test does when a service it needs, such
// as PostgreSQL or Redis, cannot be reached.
//
// # Policy
//
// On a developer machine a missing service skips the test with a message
// naming the service, the environment variable that points at it and the
// command that starts it (./test.sh). In CI (the CI environment variable is
// "true" or "1") the same condition fails the test: a green CI run must
// mean that every test ran, never that the database was quietly absent.
//
// Harnesses such as pgtest and redistest call [ServiceUnavailable]; tests
// rarely need this package directly. Programs the tests run, such as
// bubblewrap, follow the same policy through [ToolUnavailable].
//
// # Stability
//
// Internal to cikit; changes with its callers.
package testenv
