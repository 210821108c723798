package secrets

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cikit/cikit"
)

// TokenVerifier verifies a job's ID token; a *Verifier is one.
type TokenVerifier interface {
	Verify(ctx context.Context, raw string) (*Claims, error)
}

// LeaseHolder keeps the leases of dynamic secrets for the job attempts
// they were granted to; a *Keeper is one. An owner is a job attempt,
// Owner's string.
type LeaseHolder interface {
	Hold(ctx context.Context, owner string, leases []Lease) error
	Renew(ctx context.Context, owner string) error
	End(ctx context.Context, owner string) error
}

// Owner names a job attempt as the owner of leases: "RUN/JOB/ATTEMPT".
func Owner(runID, jobID string, attempt int) string {
	return runID + "/" + jobID + "/" + strconv.Itoa(attempt)
}

// BrokerConfig configures a Broker. Verifier, Replays and at least one
// Provider are required.
type BrokerConfig struct {
	// Verifier verifies the ID tokens runners present: it must accept
	// only the platform's own audience (Issuer.Verifier).
	Verifier TokenVerifier
	// Replays records the tokens presented, so that none is presented
	// twice.
	Replays Replays
	// Providers are asked in order, each for the names the ones before
	// it did not have: the first provider holding a name in one of the
	// job's scopes gives it.
	Providers []Provider
	// Leases keeps the leases of dynamic secrets. Without it a provider
	// that returns a leased secret fails the release (the lease is
	// revoked at once if the provider is Dynamic).
	Leases LeaseHolder
	// Scopes maps a verified identity to the scopes its job may read,
	// narrowest first. Default: ScopesFor.
	Scopes func(*Claims) []Scope
	// TTL is the lease duration asked of dynamic providers; zero: their
	// default.
	TTL time.Duration
	// Logger receives what the broker refuses and releases (names and
	// scopes, never values). Default: slog.Default().
	Logger *slog.Logger
}

// Broker releases a job's secrets to its runner in exchange for the job's
// ID token: the platform's side of the runtime secrets flow. It is safe
// for concurrent use.
type Broker struct {
	cfg BrokerConfig
	log *slog.Logger
}

// NewBroker validates cfg and returns a Broker.
func NewBroker(cfg BrokerConfig) (*Broker, error) {
	switch {
	case cfg.Verifier == nil:
		return nil, errors.New("secrets: BrokerConfig.Verifier is required")
	case cfg.Replays == nil:
		return nil, errors.New("secrets: BrokerConfig.Replays is required")
	case len(cfg.Providers) == 0:
		return nil, errors.New("secrets: BrokerConfig.Providers needs at least one provider")
	}
	if cfg.Scopes == nil {
		cfg.Scopes = ScopesFor
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Broker{cfg: cfg, log: log}, nil
}

// Want is what a runner asks a Broker for: the secrets of one job
// attempt, as the platform knows them (the names come from the job's
// stored spec, never from the runner).
type Want struct {
	RunID   string
	JobID   string
	Attempt int
	// Names are the secrets the job's spec names.
	Names []string
	// Admission is the job's stored admission (cikit.JobSpec.Admission),
	// nil when no policy decided. When set, its SecretsScopes are the
	// scopes the job may read, in their order, instead of
	// BrokerConfig.Scopes' mapping of the token: the platform's policy
	// decides, forks included. No scope at all withholds every secret,
	// as for a fork without a policy.
	Admission *cikit.Admission
}

// Grant is what a Broker released for one job attempt.
type Grant struct {
	// Values are the secrets, by name. Never log them.
	Values map[string]string
	// From is the scope each secret was found in, by name.
	From map[string]Scope
	// Scopes are the scopes the job was entitled to, narrowest first.
	Scopes []Scope
	// Leases are the leases of the dynamic secrets released.
	Leases []Lease
	// Withheld says the job is entitled to no secrets at all: a pull
	// request from a fork. Values is empty.
	Withheld bool
	// Claims are the verified claims of the ID token presented: who the
	// job is, for the ID tokens minted for it.
	Claims *Claims
}

// String shows a grant without its values.
func (g *Grant) String() string {
	names := make([]string, 0, len(g.Values))
	for n := range g.Values {
		names = append(names, n)
	}
	slices.Sort(names)
	return fmt.Sprintf("%d secrets %v of scopes %v", len(names), names, g.Scopes)
}

// MissingError reports secrets a job names that no provider holds in the
// scopes the job may read. It matches ErrNotFound.
type MissingError struct {
	Names  []string
	Scopes []Scope
	// Withheld says the job may read no scope (a pull request from a
	// fork).
	Withheld bool
}

func (e *MissingError) Error() string {
	which := "secret " + strings.Join(e.Names, ", ")
	if len(e.Names) > 1 {
		which = "secrets " + strings.Join(e.Names, ", ")
	}
	if e.Withheld {
		return which + ": pull requests from forks get no secrets"
	}
	if len(e.Scopes) == 0 {
		return which + ": the job may read no secret scope"
	}
	sc := make([]string, len(e.Scopes))
	for i, s := range e.Scopes {
		sc[i] = s.String()
	}
	return fmt.Sprintf("%s not found in the scopes the job may read (%s)", which, strings.Join(sc, ", "))
}

// Is makes a MissingError match ErrNotFound.
func (e *MissingError) Is(target error) bool { return target == ErrNotFound }

// Release verifies token, checks that it is the ID token of the attempt
// w names and was not presented before, maps it to the scopes its job
// may read, and returns exactly the secrets w names from them, recording
// the leases of dynamic ones under the attempt (Owner). Errors: wrapping
// ErrTokenInvalid, ErrReplayed or ErrForbidden for a token that must be
// refused; ErrInvalid for names that break the rules; a *MissingError
// for names not found (nothing is released then); any other error is a
// provider's or a store's failure, which may pass.
//
// A job of a pull request from a fork gets a Grant with Withheld set and
// no values, and no error: whether that fails the job is the caller's
// choice (a GitHub workflow reads such secrets as empty).
func (b *Broker) Release(ctx context.Context, token string, w Want) (*Grant, error) {
	c, err := b.cfg.Verifier.Verify(ctx, token)
	if err != nil {
		return nil, err
	}
	if c.RunID != w.RunID || c.JobID != w.JobID || c.RunAttempt != strconv.Itoa(w.Attempt) {
		return nil, fmt.Errorf("%w: the ID token is job %s/%s attempt %s's, not this job's", ErrForbidden, c.RunID, c.JobID, c.RunAttempt)
	}
	if len(w.Names) > MaxSecretsPerJob {
		return nil, fmt.Errorf("%w: the job names %d secrets; a job may name at most %d", ErrInvalid, len(w.Names), MaxSecretsPerJob)
	}
	names := slices.Clone(w.Names)
	slices.Sort(names)
	names = slices.Compact(names)
	for _, n := range names {
		if n == "*" {
			return nil, fmt.Errorf("%w: the job asks for every secret it inherits; a job must name the secrets it reads", ErrInvalid)
		}
		if err := ValidName(n); err != nil {
			return nil, err
		}
	}
	g := &Grant{Values: map[string]string{}, From: map[string]Scope{}, Claims: c}
	withheld := c.Fork
	if w.Admission != nil {
		if g.Scopes, err = admittedScopes(w.Admission.SecretsScopes); err != nil {
			return nil, err
		}
		withheld = len(g.Scopes) == 0
	} else if !withheld {
		g.Scopes = b.cfg.Scopes(c)
	}
	if withheld {
		if err := b.cfg.Replays.Use(ctx, c.ID, c.Expiry); err != nil {
			return nil, err
		}
		g.Withheld, g.Scopes = true, nil
		why := "a pull request from a fork"
		if w.Admission != nil {
			why = "the policy's admission: " + w.Admission.Reason
		}
		b.log.Info("secrets: withheld", "why", why, "run", w.RunID, "job", w.JobID, "attempt", w.Attempt, "repository", c.Repository)
		return g, nil
	}
	owner := Owner(w.RunID, w.JobID, w.Attempt)
	missing := names
	if len(g.Scopes) > 0 {
		for _, p := range b.cfg.Providers {
			if len(missing) == 0 {
				break
			}
			got, err := p.Fetch(ctx, Request{Scopes: g.Scopes, Names: missing, Identity: c, TTL: b.cfg.TTL})
			if err != nil {
				b.revoke(ctx, owner, g.Leases)
				return nil, fmt.Errorf("secrets: provider %s: %w", p.Name(), err)
			}
			for _, s := range got {
				if !slices.Contains(missing, s.Name) || g.Values[s.Name] != "" {
					continue // a provider's mistake: never more than asked
				}
				g.Values[s.Name], g.From[s.Name] = s.Value, s.Scope
				if s.Lease != nil {
					l := *s.Lease
					l.Provider = p.Name()
					g.Leases = append(g.Leases, l)
				}
			}
			missing = slices.DeleteFunc(slices.Clone(missing), func(n string) bool { _, ok := g.Values[n]; return ok })
		}
	}
	if len(missing) > 0 {
		b.revoke(ctx, owner, g.Leases)
		return nil, &MissingError{Names: missing, Scopes: g.Scopes}
	}
	// The token counts as presented once it released something: a
	// runner may present it again after a provider failed.
	if err := b.cfg.Replays.Use(ctx, c.ID, c.Expiry); err != nil {
		b.revoke(ctx, owner, g.Leases)
		return nil, err
	}
	if len(g.Leases) > 0 {
		if b.cfg.Leases == nil {
			b.revoke(ctx, owner, g.Leases)
			return nil, errors.New("secrets: a provider returned a dynamic secret, and the broker keeps no leases (BrokerConfig.Leases)")
		}
		if err := b.cfg.Leases.Hold(ctx, owner, g.Leases); err != nil {
			b.revoke(ctx, owner, g.Leases)
			return nil, fmt.Errorf("secrets: recording the leases: %w", err)
		}
	}
	b.log.Info("secrets: released", "run", w.RunID, "job", w.JobID, "attempt", w.Attempt, "grant", g.String())
	return g, nil
}

// revoke ends the leases of a release that failed: through the holder
// when there is one (held first, so that a revocation that fails now is
// retried by its sweeps rather than forgotten), else straight through
// their providers.
func (b *Broker) revoke(ctx context.Context, owner string, leases []Lease) {
	if len(leases) == 0 {
		return
	}
	ctx = context.WithoutCancel(ctx)
	if b.cfg.Leases != nil {
		if err := b.cfg.Leases.Hold(ctx, owner, leases); err == nil {
			if err := b.cfg.Leases.End(ctx, owner); err != nil {
				b.log.Error("secrets: revoking the leases of a failed release", "owner", owner, "error", err)
			}
			return
		}
	}
	for _, l := range leases {
		for _, p := range b.cfg.Providers {
			if d, ok := p.(Dynamic); ok && p.Name() == l.Provider {
				if err := d.Revoke(ctx, l.ID); err != nil {
					b.log.Error("secrets: revoking a lease of a failed release", "provider", l.Provider, "lease", l.ID, "error", err)
				}
			}
		}
	}
}

// Renew renews the leases of the job attempt's dynamic secrets that are
// due: the platform calls it on each heartbeat of the attempt.
func (b *Broker) Renew(ctx context.Context, runID, jobID string, attempt int) error {
	if b.cfg.Leases == nil {
		return nil
	}
	return b.cfg.Leases.Renew(ctx, Owner(runID, jobID, attempt))
}

// End revokes the leases of the job attempt's dynamic secrets: the
// platform calls it when the attempt ends, however it ends.
func (b *Broker) End(ctx context.Context, runID, jobID string, attempt int) error {
	if b.cfg.Leases == nil {
		return nil
	}
	return b.cfg.Leases.End(ctx, Owner(runID, jobID, attempt))
}

// admittedScopes parses the scopes of an admission. A scope that does not
// parse is the policy's mistake, refused rather than skipped.
func admittedScopes(list []string) ([]Scope, error) {
	if len(list) > MaxAdmittedScopes {
		return nil, fmt.Errorf("%w: the admission names %d secret scopes; at most %d", ErrInvalid, len(list), MaxAdmittedScopes)
	}
	out := make([]Scope, 0, len(list))
	for _, s := range list {
		sc, err := ParseScope(s)
		if err != nil {
			return nil, fmt.Errorf("%w: the admission's secret scope %q: %w", ErrInvalid, s, err)
		}
		if !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	return out, nil
}

// MaxAdmittedScopes bounds the secret scopes of an admission.
const MaxAdmittedScopes = 64

// ScopesFor is the default mapping of a verified identity to the scopes
// its job may read, narrowest first: the environment the job deploys to
// (when it names one), its repository, and the repository's owner and
// the owner's parent groups. A pull request from a fork may read none.
// Membership plays no part: what counts is the trusted repository and
// environment the platform signed into the token.
func ScopesFor(c *Claims) []Scope {
	if c == nil || c.Fork || c.Repository == "" {
		return nil
	}
	var out []Scope
	if c.Environment != "" {
		if s := EnvScope(c.Repository, c.Environment); s.Validate() == nil {
			out = append(out, s)
		}
	}
	if s := RepoScope(c.Repository); s.Validate() == nil {
		out = append(out, s)
	}
	owner := c.RepositoryOwner
	if owner == "" {
		if i := strings.LastIndexByte(c.Repository, '/'); i > 0 {
			owner = c.Repository[:i]
		}
	}
	for owner != "" {
		if s := OrgScope(owner); s.Validate() == nil {
			out = append(out, s)
		}
		i := strings.LastIndexByte(owner, '/')
		if i < 0 {
			break
		}
		owner = owner[:i]
	}
	return out
}

// IdentityOf is the identity whose token had claims c, for minting more
// tokens of the same job.
func IdentityOf(c *Claims) Identity {
	attempt, _ := strconv.Atoi(c.RunAttempt)
	return Identity{
		Repository: c.Repository, RepositoryOwner: c.RepositoryOwner, Ref: c.Ref, RefType: c.RefType, SHA: c.SHA,
		Environment: c.Environment, EventName: c.EventName, Actor: c.Actor, HeadRef: c.HeadRef, BaseRef: c.BaseRef,
		Fork: c.Fork, PullRequest: strings.HasSuffix(c.Subject, ":pull_request") || pullRequestEvent(c.EventName) && c.HeadRef != "", RunID: c.RunID, RunAttempt: attempt,
		JobID: c.JobID, RunnerEnvironment: c.RunnerEnvironment,
	}
}

// IdentityFor is the identity of a job of spec in context jc, run by a
// runner of runnerEnvironment ("self-hosted", "cikit-hosted"), for
// Issuer.Issue.
func IdentityFor(jc *cikit.JobContext, spec *cikit.JobSpec, runnerEnvironment string) Identity {
	id := Identity{RunnerEnvironment: runnerEnvironment}
	if spec != nil {
		id.JobID = spec.ID
		if e := spec.Environment; e != nil && !strings.Contains(e.Name, "$") {
			id.Environment = e.Name
		}
	}
	if jc != nil {
		rc := jc.RunContext
		id.Repository, id.Ref, id.RefType, id.SHA = rc.Repository, rc.Ref, rc.RefType, rc.SHA
		id.EventName, id.Actor, id.HeadRef, id.BaseRef, id.Fork = rc.Event, rc.Actor, rc.HeadRef, rc.BaseRef, rc.Fork
		// A pull request's subject needs the branch it merges.
		id.PullRequest = (rc.PRNumber > 0 || pullRequestEvent(rc.Event)) && rc.HeadRef != ""
		id.RunID, id.RunAttempt = jc.RunID, jc.Attempt
	}
	return id
}

// pullRequestEvent reports whether event names a pull or merge request's
// run.
func pullRequestEvent(event string) bool {
	switch event {
	case "pull_request", "pull_request_target", "merge_request_event", "external_pull_request_event":
		return true
	}
	return false
}
