// Package policy decides, for each job of each run the platform creates,
// what the job may have: policy as code, in Rego, evaluated by an
// embedded OPA (github.com/open-policy-agent/opa). It is a package of
// its own so that only the programs that decide pay for OPA; nothing
// else of package secrets imports it.
//
// # Input and output
//
// The policy is asked about one job at a time. Its input document is
// an [Input] as JSON: the event ("push", "tag", "pull_request",
// "dispatch", "schedule"), the repository, the ref and whether the
// platform protects it, the pull request's number, whether it comes
// from a fork, its author's association and whether they are a
// first-time contributor, the changed files, and the job: its
// environment, the secrets, token permissions and runner labels it asks
// for, and the secret scopes and cache scope it would have without a
// policy.
//
// The policy answers with the value of data.cikit.policy.decision, a
// [Decision]: "allow", "require_approval" or "deny" with a reason, and
// bounds on what a job that runs may have — the secret scopes it reads,
// the cache scope it writes, a cap on its token's permissions, and the
// runner labels a runner taking it may have. [Decision.Admission] turns
// it into the [cikit.Admission] stored with the job and enforced where
// the job's world is made. An answer that is not a valid Decision, an
// undefined decision, a failing or slow evaluation: each is an error
// from [Engine.Eval], and the caller must not run the job (fail closed).
//
// # The default policy
//
// Without a policy file the engine uses [DefaultSource] (default.rego):
//
//   - A job is allowed, with its default secret scopes and cache scope,
//     no token cap, and any runner.
//   - A job of a fork's pull request gets no secrets, the cache scope
//     "fork/pr-N" (which nothing trusted restores from), a read-only
//     token (contents and metadata read, every other scope, id-token
//     included, none) and any runner but a self-hosted one
//     ({"*", "!self-hosted"}). If its author is a first-time
//     contributor — first_time_contributor, or an author_association
//     other than OWNER, MEMBER, COLLABORATOR or CONTRIBUTOR, which
//     includes a GitLab merge request, for which the forge says none —
//     it requires a maintainer's approval.
//   - A job deploying to production (an environment named "production"
//     or "prod" in any case, or below one: "production/eu") runs only
//     on a protected branch or tag; from any other ref it is denied.
//
// A denied or held fork job keeps the fork's restrictions in its
// decision. The rules' Rego tests are in default_test.rego.
//
// # Replacing it
//
// A platform team replaces the default with a file of its own
// ([Config.Path]): a Rego v1 module of package cikit.policy defining
// decision. The engine compiles it with [NewCompiler], which refuses the
// builtins whose answer is not a function of their arguments (network,
// clock, randomness, OPA's runtime), so that a decision depends on its
// input alone; a file larger than [MaxPolicyBytes] is refused. Run the
// policy's own Rego tests with OPA's tester and NewCompiler, as this
// package's tests do. The repository's examples/policy is a complete
// replacement with its tests.
//
// # Reloading
//
// A policy is compiled and prepared once per load. [New] fails on a
// file that does not load, with a [*LoadError] listing every problem at
// its position ("policy.rego:12:5: rego_parse_error: …"), so a platform
// refuses to start on it. [Engine.Reload] loads the file again and
// [Engine.Watch] does so whenever it changes; a load that fails returns
// (or logs) the same error and leaves the policy in force. The new
// policy replaces the old atomically: every evaluation sees one of them
// whole, and [Engine.Name], which names the policy in force by its
// file's digest, tells which decided.
package policy
