// Package secretstest holds the conformance suites of package secrets'
// stateful interfaces: each implementation's tests, the in-memory one
// included, run the suite of its interface, so that all of them keep
// one contract.
//
// # Stability
//
// Internal to cikit's tests; changes with package secrets.
package secretstest
