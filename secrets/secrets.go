package secrets

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/cikit/cikit/secrets/mask"
)

// Limits on secrets.
const (
	// MaxNameBytes bounds a secret's name.
	MaxNameBytes = 128
	// MaxValueBytes bounds a secret's value (GitHub allows 48 KiB): the
	// longest value the masker takes.
	MaxValueBytes = mask.MaxValueBytes
	// MinValueBytes is the shortest value a secret, or a value a job
	// masks, may have: a shorter one would mask ordinary words of the log
	// and is refused (ErrTooShort) rather than left unmasked.
	MinValueBytes = mask.MinValueBytes
	// MaxSecretsPerJob bounds how many secrets one job may name.
	MaxSecretsPerJob = 100
)

// Errors of the package. Test with errors.Is.
var (
	// ErrNotFound: no such secret in the scope.
	ErrNotFound = errors.New("secrets: not found")
	// ErrInvalid: a name, scope or value breaks the rules of this package.
	ErrInvalid = errors.New("secrets: invalid")
	// ErrTooShort: a value is shorter than MinValueBytes (the masker's
	// error, mask.ErrTooShort).
	ErrTooShort = mask.ErrTooShort
	// ErrTokenInvalid: an ID token is forged, expired, not yet valid, for
	// another audience or issuer, or malformed.
	ErrTokenInvalid = errors.New("secrets: invalid ID token")
	// ErrReplayed: an ID token was presented before.
	ErrReplayed = errors.New("secrets: ID token replayed")
	// ErrForbidden: the identity may not read what it asked for.
	ErrForbidden = errors.New("secrets: forbidden")
)

var nameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ValidName reports whether name can name a secret: an environment
// variable's name (letters, digits and _, not starting with a digit) of
// at most MaxNameBytes, not starting with GITHUB_, CI_ or CIKIT_.
func ValidName(name string) error {
	switch {
	case len(name) > MaxNameBytes:
		return fmt.Errorf("%w: secret name of %d bytes; the limit is %d", ErrInvalid, len(name), MaxNameBytes)
	case !nameRE.MatchString(name):
		return fmt.Errorf("%w: secret name %q: use letters, digits and _, not starting with a digit", ErrInvalid, name)
	}
	for _, p := range []string{"GITHUB_", "CI_", "CIKIT_"} {
		if strings.HasPrefix(strings.ToUpper(name), p) {
			return fmt.Errorf("%w: secret name %q: names starting with %s are the platform's", ErrInvalid, name, p)
		}
	}
	return nil
}

// ValidValue reports whether value can be a secret's value: between
// MinValueBytes and MaxValueBytes, with no NUL byte.
func ValidValue(value string) error {
	switch {
	case len(value) < MinValueBytes:
		return fmt.Errorf("%w: a secret of %d bytes could not be masked in logs; use at least %d", ErrTooShort, len(value), MinValueBytes)
	case len(value) > MaxValueBytes:
		return fmt.Errorf("%w: a secret value of %d bytes; the limit is %d", ErrInvalid, len(value), MaxValueBytes)
	case strings.IndexByte(value, 0) >= 0:
		return fmt.Errorf("%w: a secret value holds a NUL byte, which no environment variable can", ErrInvalid)
	}
	return nil
}

// ScopeKind is what a Scope is the scope of.
type ScopeKind string

// Scope kinds, from the widest to the narrowest.
const (
	ScopeOrg  ScopeKind = "org"
	ScopeRepo ScopeKind = "repo"
	ScopeEnv  ScopeKind = "env"
)

// Scope is where a secret belongs: an organisation, a repository, or a
// deployment environment of a repository. Its string form is
// "org:acme", "repo:acme/api" or "env:acme/api:prod" (ParseScope). Names
// are made of letters, digits, '.', '_' and '-', in parts separated by
// '/' (GitLab groups, GitLab environments such as "review/feature").
type Scope struct {
	Kind ScopeKind
	// Org is the organisation of an org scope: the repository owner
	// ("acme"), or a GitLab group path ("acme/platform").
	Org string
	// Repo is the repository of a repo or env scope: "acme/api".
	Repo string
	// Env is the environment of an env scope: "prod".
	Env string
}

// OrgScope returns the scope of organisation org.
func OrgScope(org string) Scope { return Scope{Kind: ScopeOrg, Org: org} }

// RepoScope returns the scope of repository repo ("acme/api").
func RepoScope(repo string) Scope { return Scope{Kind: ScopeRepo, Repo: repo} }

// EnvScope returns the scope of environment env of repository repo.
func EnvScope(repo, env string) Scope { return Scope{Kind: ScopeEnv, Repo: repo, Env: env} }

func scopeErr(s string, why string) error {
	return fmt.Errorf("%w: scope %q: %s", ErrInvalid, s, why)
}

func validPathPart(p string, slashes bool) bool {
	if p == "" || len(p) > 255 || !pathRE(slashes).MatchString(p) {
		return false
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

var (
	pathSlashRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$`)
	pathPartRE  = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)
)

func pathRE(slashes bool) *regexp.Regexp {
	if slashes {
		return pathSlashRE
	}
	return pathPartRE
}

// String returns the scope's string form.
func (s Scope) String() string {
	switch s.Kind {
	case ScopeOrg:
		return "org:" + s.Org
	case ScopeRepo:
		return "repo:" + s.Repo
	case ScopeEnv:
		return "env:" + s.Repo + ":" + s.Env
	}
	return "invalid:" + string(s.Kind)
}

// Validate reports whether s is a well-formed scope.
func (s Scope) Validate() error {
	str := s.String()
	switch s.Kind {
	case ScopeOrg:
		if !validPathPart(s.Org, true) || s.Repo != "" || s.Env != "" {
			return scopeErr(str, "an organisation scope is org:NAME")
		}
	case ScopeRepo:
		if !validPathPart(s.Repo, true) || !strings.Contains(s.Repo, "/") || s.Org != "" || s.Env != "" {
			return scopeErr(str, "a repository scope is repo:OWNER/NAME")
		}
	case ScopeEnv:
		if !validPathPart(s.Repo, true) || !strings.Contains(s.Repo, "/") || !validPathPart(s.Env, true) || s.Org != "" {
			return scopeErr(str, "an environment scope is env:OWNER/NAME:ENVIRONMENT")
		}
	default:
		return scopeErr(str, "the kind is org, repo or env")
	}
	return nil
}

// ParseScope reads a scope's string form: "org:acme", "repo:acme/api",
// "env:acme/api:prod".
func ParseScope(s string) (Scope, error) {
	kind, rest, ok := strings.Cut(s, ":")
	if !ok {
		return Scope{}, scopeErr(s, "write org:NAME, repo:OWNER/NAME or env:OWNER/NAME:ENVIRONMENT")
	}
	var sc Scope
	switch ScopeKind(kind) {
	case ScopeOrg:
		sc = OrgScope(rest)
	case ScopeRepo:
		sc = RepoScope(rest)
	case ScopeEnv:
		repo, env, _ := strings.Cut(rest, ":")
		sc = EnvScope(repo, env)
	default:
		return Scope{}, scopeErr(s, "the kind is org, repo or env")
	}
	return sc, sc.Validate()
}

// Secret is one secret a provider returned.
type Secret struct {
	Name  string
	Value string
	// Scope is the scope it was found in.
	Scope Scope
	// Lease is the lease of a dynamic secret, nil for a static one.
	Lease *Lease
}

// String never shows the value.
func (s Secret) String() string { return s.Scope.String() + "/" + s.Name }

// Lease is the lease of a dynamic secret: the credential stops working
// at Expires unless renewed, and is revoked when its job ends.
type Lease struct {
	// ID identifies the lease to its provider; it is not a secret.
	ID string
	// Provider names the provider that granted it (Provider.Name).
	Provider string
	// Expires is when the credential stops working unless renewed.
	Expires time.Time
}

// Request asks a provider for secrets.
type Request struct {
	// Scopes are where to look, narrowest first: the first scope that
	// holds a name gives its value.
	Scopes []Scope
	// Names are the secrets wanted; a provider returns those it has and
	// leaves out the others (the Broker reports them missing).
	Names []string
	// Identity is the verified identity of the job the secrets are for;
	// providers that mint credentials per job use it. Nil outside a job.
	Identity *Claims
	// TTL is how long a dynamic secret's lease should last; zero means
	// the provider's default.
	TTL time.Duration
}

// Provider gives secrets by name and scope. Implementations are safe for
// concurrent use.
type Provider interface {
	// Name names the provider in leases, logs and errors ("store",
	// "aws", "postgres-roles").
	Name() string
	// Fetch returns the secrets of r it holds, at most one per name (from
	// the first scope of r.Scopes holding it). A name it does not hold is
	// left out, not an error; an error means the provider failed.
	Fetch(ctx context.Context, r Request) ([]Secret, error)
}

// Dynamic is a Provider whose secrets are leased credentials.
type Dynamic interface {
	Provider
	// Renew extends a lease by ttl (zero: the provider's default) and
	// returns its new expiry. ErrNotFound: the lease is gone.
	Renew(ctx context.Context, leaseID string, ttl time.Duration) (time.Time, error)
	// Revoke ends a lease: the credential stops working now. Revoking a
	// lease that is gone is not an error.
	Revoke(ctx context.Context, leaseID string) error
}

// Info describes a stored secret, without its value.
type Info struct {
	Scope   Scope
	Name    string
	Updated time.Time
	// KeyID is the Keyring key its data key is wrapped with.
	KeyID string
}

// Store is the built-in secret store: a Provider whose secrets are set,
// listed and deleted through the platform's API. Values are encrypted at
// rest with a Keyring. MemoryStore and PostgresStore implement it.
type Store interface {
	Provider
	// Set stores a secret, replacing one of the same scope and name.
	// The name must pass ValidName, the value ValidValue.
	Set(ctx context.Context, scope Scope, name, value string) error
	// List returns the secrets of scope, by name, without values.
	List(ctx context.Context, scope Scope) ([]Info, error)
	// Delete removes a secret; ErrNotFound if there is none.
	Delete(ctx context.Context, scope Scope, name string) error
	// Rewrap re-encrypts, under the Keyring's primary key, the data keys
	// wrapped with another key, so that the old key can be dropped from
	// the configuration. It returns how many it rewrapped.
	Rewrap(ctx context.Context) (int, error)
}
