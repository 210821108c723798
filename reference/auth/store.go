package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"time"
)

// Errors of a Store. Both implementations return them (wrapped), so
// callers branch with errors.Is.
var (
	// ErrNotFound: no such user, identity, token, session or binding.
	ErrNotFound = errors.New("auth: not found")
	// ErrConflict: the login, identity or token already exists.
	ErrConflict = errors.New("auth: already exists")
	// ErrInvalid: input the Store or Service refuses (a login too long,
	// an audit cursor it did not hand out); the message says which (400).
	ErrInvalid = errors.New("auth: invalid")
)

// Limits of what a Store holds and a Service accepts.
const (
	// MaxLoginBytes bounds a login ("alice", "deploy-bot").
	MaxLoginBytes = 64
	// MaxNameBytes bounds a token's name and a user's display name.
	MaxNameBytes = 128
	// MaxEmailBytes bounds a user's email address.
	MaxEmailBytes = 254
	// MaxScopeBytes bounds an org or repo path of a binding or a token's
	// scope.
	MaxScopeBytes = 255
	// MaxTokensPerUser bounds a user's live (not revoked, not expired)
	// tokens, and so the tokens a user lists.
	MaxTokensPerUser = 100
	// DefaultAuditLimit and MaxAuditLimit bound a page of the audit log.
	DefaultAuditLimit = 50
	MaxAuditLimit     = 500
)

// Digest is the SHA-256 of a secret (a token or a session id): what a
// Store keeps instead of the secret.
type Digest [sha256.Size]byte

// DigestOf returns the digest of secret.
func DigestOf(secret string) Digest { return sha256.Sum256([]byte(secret)) }

// User is a person or a service account.
type User struct {
	ID    string `json:"id"`
	Login string `json:"login"`
	Name  string `json:"name,omitempty"`
	Email string `json:"email,omitempty"`
	// Service marks a service account: it has tokens, never a session.
	Service  bool      `json:"service,omitempty"`
	Created  time.Time `json:"created"`
	Disabled bool      `json:"disabled,omitempty"`
}

// Token is an API token as a Store holds it: the digest of its secret,
// never the secret.
type Token struct {
	ID      string    `json:"id"`
	User    string    `json:"user"` // the user's ID
	Name    string    `json:"name"`
	Digest  Digest    `json:"-"`
	Created time.Time `json:"created"`
	// Expires is when the token stops working; zero: never (service
	// tokens only).
	Expires      time.Time `json:"expires,omitzero"`
	RevokedAt    time.Time `json:"revoked_at,omitzero"`
	LastUsedAt   time.Time `json:"last_used_at,omitzero"`
	LastUsedFrom string    `json:"last_used_from,omitempty"`
	// MaxRole caps what the token may do: its effective role is the
	// lower of its user's and MaxRole.
	MaxRole Role `json:"max_role"`
	// Org and Repo, when set, confine the token to that organisation (its
	// subgroups included) or repository.
	Org  string `json:"org,omitempty"`
	Repo string `json:"repo,omitempty"`
}

// Session is a web UI session as a Store holds it.
type Session struct {
	Digest   Digest
	User     string // the user's ID
	CSRF     string
	Created  time.Time
	Expires  time.Time // absolute
	LastSeen time.Time
}

// AuditQuery selects a page of the audit log, newest first.
type AuditQuery struct {
	// Actor, Action: exact matches when set. TargetPrefix: entries whose
	// Target starts with it.
	Actor, Action, TargetPrefix string
	// Before is a cursor: the ID of the last entry of the previous page.
	Before string
	// Limit: 1 to MaxAuditLimit; 0 means DefaultAuditLimit.
	Limit int
}

// BootstrapParams is what Store.AdminBootstrap creates when the platform
// has no platform-wide admin.
type BootstrapParams struct {
	User  User
	Token Token
}

// Store holds users, identities, tokens, bindings, sessions and the audit
// log. MemoryStore and PostgresStore implement it and pass one
// conformance suite (package authtest). Methods return ErrNotFound and
// ErrConflict (wrapped) as documented and are safe for concurrent use.
type Store interface {
	// UserCreate stores u; ErrConflict when its ID or login is taken.
	UserCreate(ctx context.Context, u *User) error
	// UserGet and UserByLogin return a user, ErrNotFound when there is
	// none.
	UserGet(ctx context.Context, id string) (*User, error)
	UserByLogin(ctx context.Context, login string) (*User, error)
	// UserList returns every user by login.
	UserList(ctx context.Context) ([]*User, error)
	// UserSetDisabled disables or enables a user; ErrNotFound.
	UserSetDisabled(ctx context.Context, id string, disabled bool) error

	// IdentityLink maps an OIDC issuer and subject to a user;
	// ErrConflict when the pair is mapped already.
	IdentityLink(ctx context.Context, issuer, subject, userID string) error
	// IdentityUser returns the user ID of issuer and subject;
	// ErrNotFound.
	IdentityUser(ctx context.Context, issuer, subject string) (string, error)

	// TokenCreate stores t; ErrConflict when its ID or digest exists.
	TokenCreate(ctx context.Context, t *Token) error
	// TokenGet returns a token by ID; TokenByDigest by the digest of its
	// secret. ErrNotFound.
	TokenGet(ctx context.Context, id string) (*Token, error)
	TokenByDigest(ctx context.Context, d Digest) (*Token, error)
	// TokenList returns the tokens of a user, every token for user "",
	// by creation, oldest first.
	TokenList(ctx context.Context, user string) ([]*Token, error)
	// TokenRevoke sets the token's RevokedAt unless it is revoked
	// already (the first time stays); ErrNotFound.
	TokenRevoke(ctx context.Context, id string, at time.Time) error
	// TokenTouch records a use: when and from where. ErrNotFound.
	TokenTouch(ctx context.Context, id string, at time.Time, from string) error

	// BindingGrant stores b; granting a binding that exists is not an
	// error. b.User is a login.
	BindingGrant(ctx context.Context, b Binding) error
	// BindingRevoke removes b; ErrNotFound when it is not there.
	BindingRevoke(ctx context.Context, b Binding) error
	// BindingList returns the bindings of a login, every binding for "",
	// by user, org, repo and role.
	BindingList(ctx context.Context, login string) ([]Binding, error)

	// SessionCreate stores s; ErrConflict when its digest exists.
	SessionCreate(ctx context.Context, s *Session) error
	// SessionGet returns a session by digest; ErrNotFound.
	SessionGet(ctx context.Context, d Digest) (*Session, error)
	// SessionTouch sets LastSeen; ErrNotFound.
	SessionTouch(ctx context.Context, d Digest, at time.Time) error
	// SessionDelete removes a session; deleting none is not an error.
	SessionDelete(ctx context.Context, d Digest) error

	// AuditAppend appends e, setting its ID: IDs grow with each append,
	// so that newer entries sort first.
	AuditAppend(ctx context.Context, e *Entry) error
	// AuditList returns the entries q selects, newest first.
	AuditList(ctx context.Context, q AuditQuery) ([]Entry, error)

	// AdminBootstrap creates p's user (or keeps the user of that login),
	// a platform-wide admin binding for it and p's token, all at once, if
	// and only if no user has a platform-wide admin binding. It reports
	// whether it created them; several processes may call it at once and
	// exactly one of them creates.
	AdminBootstrap(ctx context.Context, p *BootstrapParams) (bool, error)
}
