// Package archtest holds no API: it exists only for its test, which
// enforces the module's import boundaries with go list.
//
// # Rules
//
//   - No package outside reference/... and examples/... depends, directly
//     or transitively, on a package under reference/. Library packages must
//     be usable without the platform and its frameworks.
//   - The root package github.com/cikit/cikit depends on no other package
//     of the module: it is the vocabulary every other package shares.
//   - No package under artifacts/ depends on one under logs/: logs
//     stores finished logs in artifacts' blob stores, not the reverse.
//
// The rules are checked by [Violations], a pure function over the output
// of go list, so its own tests can show it rejecting a bad graph.
package archtest
