// Package policy is an example of a platform team replacing cikit's
// default policy (package secrets/policy) with its own: policy.rego,
// its Rego tests in policy_test.rego, and a Go example that loads it.
// See README.md.
package policy
