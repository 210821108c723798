// Package auth authenticates the reference platform's callers and says
// what they may do: users (people and service accounts), their OIDC
// identities, API tokens, role bindings, web sessions and the audit log.
//
// # Roles
//
// A Role is read < trigger < approve < admin, each including the ones
// below. A Binding grants a user a role on the platform (Org ""), on an
// org (which covers its GitLab subgroups: "acme" covers "acme/platform")
// or on one repository. Service.Authorize(ctx, p, role, org, repo) says
// whether a principal has a role somewhere; Service.Grants reads all of
// it once, for filtering lists. A disabled user has no role.
//
// # Tokens
//
// A token is "cikit_pat_" (a person's) or "cikit_svc_" (a service
// account's), 43 base62 characters of 32 random bytes and a 6-character
// CRC-32 of what precedes it, so that a mistyped or altered token is
// refused without a lookup. Its secret is shown once, at creation; the
// Store keeps its SHA-256. Tokens expire (Config.TokenTTL, at most
// MaxTokenTTL); only a service account's may be made to never expire,
// as the bootstrap admin's is. A token may be capped: a MaxRole and an
// org or repo scope. Its last use is recorded at most once a minute.
//
// # Authenticate
//
// Service.Authenticate reads a request's bearer token or, without one,
// its session cookie (anonymous: nil, nil). Failures are counted per
// client address in a token bucket (FailureBurst, then one every
// FailureEvery) that is checked before any lookup, so guessing is slow
// even for a right guess; it remembers at most MaxSources addresses. A
// session request with an unsafe method needs the session's CSRF token
// in X-CSRF-Token.
//
// # Sign-in
//
// Service.Handler serves GET /auth/login, GET /auth/callback and POST
// /auth/logout: the OpenID Connect authorization code flow with state,
// nonce and PKCE against Config.OIDC's issuer, or with state and PKCE
// against a GitHub OAuth app (Config.GitHub; GitHub's OAuth is not OIDC,
// so the user is read from its API); a first sign-in creates the user. The session cookie is HttpOnly, SameSite=Lax, Path /, and
// Secure with the __Host- prefix unless Config.PlainHTTP; it ends after
// SessionTTL, or SessionIdle unused.
//
// # Stores
//
// MemoryStore and PostgresStore implement Store and pass one conformance
// suite (package authtest). Bootstrap is safe with several servers on
// one database: exactly one creates the first admin.
//
// # Stability
//
// Part of the reference platform; the names in types.go are what other
// packages code against.
package auth
