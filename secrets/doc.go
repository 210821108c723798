// Package secrets gives jobs their secrets at execution time, and keeps
// them out of everything else.
//
// A job's secrets are fetched by its runner, before the job's first step,
// in exchange for the job's OpenID Connect ID token:
//
//   - An [Issuer] makes the platform an OIDC issuer: it signs ID tokens for
//     jobs with rotating keys, and serves the discovery document and the
//     JWKS clouds verify them with ([Issuer.Handler]). A job asks it for a
//     token for an audience (GitHub's ACTIONS_ID_TOKEN_REQUEST_URL, GitLab's
//     id_tokens); its [Claims] are the ones clouds expect.
//   - A [Verifier] checks such a token: signature, issuer, audience,
//     expiry, within a clock skew. The platform verifies the token its
//     runners present with one, and refuses a replayed one ([Replays]).
//   - A [Broker] maps the verified identity to the [Scope]s the job may
//     read ([ScopesFor]: its environment, its repository, its
//     organisation; none for a pull request from a fork), asks its
//     [Provider]s for exactly the names the job's spec lists, and records
//     the [Lease]s of dynamic secrets, which it renews while the job runs
//     and revokes when it ends.
//   - Providers: the built-in encrypted [Store] (AES-GCM envelope
//     encryption under a [Keyring], in PostgreSQL or memory), AWS Secrets
//     Manager, and dynamic PostgreSQL roles.
//   - Package [github.com/cikit/cikit/secrets/mask]'s Masker replaces
//     every secret value, and its common encodings, with "***" in a job's
//     output before a chunk of it leaves the runner, also when a value is
//     split across writes.
//
// Secret values are never in events, job specs, outbox rows, Kafka
// records or compiled plans: they travel from a provider to the runner in
// one response, and from the runner into the environment of the job's
// step processes.
package secrets
