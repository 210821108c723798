// Package secretstest holds the conformance suites of package secrets' interfaces: every implementation runs them.
package secretstest
