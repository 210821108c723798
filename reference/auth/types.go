package auth

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Role is what a principal may do on an organisation or a repository.
// Each role includes the ones below it: admin may approve, approve may
// trigger, trigger may read.
type Role int

// The roles, weakest first.
const (
	// RoleNone grants nothing.
	RoleNone Role = iota
	// RoleRead reads runs, jobs, logs and artifacts.
	RoleRead
	// RoleTrigger starts runs by hand, retries and cancels them, and
	// starts manual jobs.
	RoleTrigger
	// RoleApprove approves and rejects gated jobs (deployments).
	RoleApprove
	// RoleAdmin manages secrets, the policy, runners, tokens, roles,
	// and reads the audit log.
	RoleAdmin
)

var roleNames = [...]string{"none", "read", "trigger", "approve", "admin"}

func (r Role) String() string {
	if r < RoleNone || r > RoleAdmin {
		return fmt.Sprintf("Role(%d)", int(r))
	}
	return roleNames[r]
}

// ParseRole parses a role's name.
func ParseRole(s string) (Role, error) {
	for i, n := range roleNames {
		if n == s && i > 0 {
			return Role(i), nil
		}
	}
	return RoleNone, fmt.Errorf("auth: unknown role %q: want read, trigger, approve or admin", s)
}

// MarshalText writes the role's name.
func (r Role) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText parses a role's name.
func (r *Role) UnmarshalText(b []byte) error {
	v, err := ParseRole(string(b))
	*r = v
	return err
}

// PrincipalKind says how a principal proved who it is.
type PrincipalKind string

// The kinds of principal.
const (
	// KindToken: an API token (personal or service) in an
	// Authorization: Bearer header.
	KindToken PrincipalKind = "token"
	// KindSession: a web UI session cookie; a request that changes
	// something must also carry the session's CSRF token.
	KindSession PrincipalKind = "session"
)

// Principal is who made a request.
type Principal struct {
	Kind PrincipalKind `json:"kind"`
	// User is the user's ID; Login their name ("alice"), which gates'
	// reviewers and the audit log name. A service token's user is the
	// service account it was made for.
	User  string `json:"user"`
	Login string `json:"login"`
	// Token is the ID of the token a KindToken principal presented.
	Token string `json:"token,omitempty"`
	// Service says the user is a service account (no sign-in).
	Service bool `json:"service,omitempty"`
	// MaxRole, Org and Repo are a token's cap (KindToken only): the
	// principal has at most MaxRole, and nothing outside Org (its
	// subgroups included) or Org/Repo when they are set.
	MaxRole Role   `json:"max_role,omitempty"`
	Org     string `json:"org,omitempty"`
	Repo    string `json:"repo,omitempty"`
	// CSRF is a session's CSRF token (KindSession only), which requests
	// that change something send as X-CSRF-Token.
	CSRF string `json:"-"`
}

// String names the principal for logs and the audit log: its login, and
// the token it used.
func (p *Principal) String() string {
	if p == nil {
		return "anonymous"
	}
	if p.Token != "" {
		return p.Login + " (token " + p.Token + ")"
	}
	return p.Login
}

// Binding grants a user a role on an organisation, a repository of it
// or, with both empty, the whole platform.
type Binding struct {
	User string `json:"user"` // the user's login
	Role Role   `json:"role"`
	Org  string `json:"org,omitempty"`  // "acme"; GitLab groups keep their path ("acme/platform")
	Repo string `json:"repo,omitempty"` // "api"; empty: every repository of Org
}

// Entry is one record of the audit log: who did what, when, from where,
// and how it ended.
type Entry struct {
	ID     string    `json:"id"`
	Time   time.Time `json:"time"`
	Actor  string    `json:"actor"`  // Principal.String(), or "system"
	Action string    `json:"action"` // "job.approve", "secret.set", "token.create" …
	// Target is what the action was on: "run/R/job/J", "secret/NAME",
	// "token/ID", "repo/acme/api".
	Target string `json:"target"`
	// Detail is a sentence or a comment ("looks good"); never a secret.
	Detail string `json:"detail,omitempty"`
	Remote string `json:"remote,omitempty"` // the client's address
	// Outcome is "ok", "denied" or "failed".
	Outcome string `json:"outcome"`
}

// Errors of authentication and authorization. Each refusal wraps one.
var (
	// ErrUnauthenticated: no credential, or one that is malformed,
	// unknown, expired, revoked or tampered with (401).
	ErrUnauthenticated = errors.New("auth: not authenticated")
	// ErrForbidden: the principal lacks the role (403).
	ErrForbidden = errors.New("auth: forbidden")
	// ErrRateLimited: too many failed attempts from the client (429).
	ErrRateLimited = errors.New("auth: too many failed attempts")
	// ErrCSRF: a session request that changes something came without
	// the session's CSRF token (403).
	ErrCSRF = errors.New("auth: missing or wrong CSRF token")
)

type principalKey struct{}

// NewContext returns ctx carrying p, as the authentication middleware
// passes the request's principal to its handlers.
func NewContext(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the principal ctx carries, nil for none.
func FromContext(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}
