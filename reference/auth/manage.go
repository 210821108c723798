package auth

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// TokenParams asks for a token.
type TokenParams struct {
	// User is the login the token is for: the caller's own when empty; a
	// platform admin may name a service account.
	User string `json:"user,omitempty"`
	// Name says what the token is for (1 to MaxNameBytes bytes).
	Name string `json:"name"`
	// TTL is its lifetime: Config.TokenTTL when 0, at most
	// Config.MaxTokenTTL. Never makes a service token that does not
	// expire; a personal token always does.
	TTL   time.Duration `json:"ttl,omitempty"`
	Never bool          `json:"never,omitempty"`
	// MaxRole caps the token (RoleNone: no cap beyond the caller's own).
	// Org and Repo confine it to an org or a repository.
	MaxRole Role   `json:"max_role,omitempty"`
	Org     string `json:"org,omitempty"`
	Repo    string `json:"repo,omitempty"`
}

// NewToken is a token just made: Secret is shown this once and never
// stored.
type NewToken struct {
	Token
	Secret string `json:"secret"`
}

// platformAdmin returns nil when p is a platform admin.
func (s *Service) platformAdmin(ctx context.Context, p *Principal) error {
	return s.Authorize(ctx, p, RoleAdmin, "", "")
}

// TokenCreate makes a token for p, or for a service account when p is a
// platform admin. A token made with a token is capped by it: it has no
// higher role and no wider scope.
func (s *Service) TokenCreate(ctx context.Context, p *Principal, tp TokenParams) (*NewToken, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: sign in to make a token", ErrUnauthenticated)
	}
	switch {
	case tp.Name == "" || len(tp.Name) > MaxNameBytes:
		return nil, fmt.Errorf("%w: a token's name has 1 to %d bytes, not %d", ErrInvalid, MaxNameBytes, len(tp.Name))
	case tp.TTL < 0 || tp.TTL > s.cfg.MaxTokenTTL:
		return nil, fmt.Errorf("%w: a token's ttl is from 1s to %s, not %s", ErrInvalid, s.cfg.MaxTokenTTL, tp.TTL)
	case tp.MaxRole < RoleNone || tp.MaxRole > RoleAdmin:
		return nil, fmt.Errorf("%w: unknown role %d", ErrInvalid, int(tp.MaxRole))
	}
	if err := validScope(tp.Org, tp.Repo); err != nil {
		return nil, err
	}
	user := p.User
	if tp.User != "" && tp.User != p.Login {
		if err := s.platformAdmin(ctx, p); err != nil {
			return nil, fmt.Errorf("%w: only a platform admin makes tokens for others", err)
		}
		u, err := s.store.UserByLogin(ctx, tp.User)
		if err != nil {
			return nil, err
		}
		if !u.Service {
			return nil, fmt.Errorf("%w: %s is a person, not a service account: a person makes their own tokens", ErrForbidden, u.Login)
		}
		user = u.ID
	}
	u, err := s.store.UserGet(ctx, user)
	if err != nil {
		return nil, err
	}
	if u.Disabled {
		return nil, fmt.Errorf("%w: user %s is disabled", ErrForbidden, u.Login)
	}
	kind := KindPersonal
	if u.Service {
		kind = KindService
	}
	maxRole := tp.MaxRole
	if maxRole == RoleNone {
		maxRole = RoleAdmin
	}
	org, repo := tp.Org, tp.Repo
	if p.Kind == KindToken && user == p.User {
		maxRole = min(maxRole, p.MaxRole)
		if org == "" {
			org, repo = p.Org, p.Repo
		}
		if !covers(p.Org, p.Repo, org, repo) {
			return nil, fmt.Errorf("%w: a token confined to %s cannot make one for %s", ErrForbidden, where(p.Org, p.Repo), where(org, repo))
		}
	}
	now := s.now().UTC()
	t := Token{ID: newID("tok_"), User: u.ID, Name: tp.Name, Created: now, MaxRole: maxRole, Org: org, Repo: repo}
	switch {
	case tp.Never && kind != KindService:
		return nil, fmt.Errorf("%w: only a service account's token may never expire", ErrInvalid)
	case !tp.Never:
		ttl := tp.TTL
		if ttl == 0 {
			ttl = s.cfg.TokenTTL
		}
		t.Expires = now.Add(ttl)
	}
	existing, err := s.store.TokenList(ctx, u.ID)
	if err != nil {
		return nil, err
	}
	live := 0
	for _, x := range existing {
		if x.RevokedAt.IsZero() && (x.Expires.IsZero() || now.Before(x.Expires)) {
			live++
		}
	}
	if live >= MaxTokensPerUser {
		return nil, fmt.Errorf("%w: %s has %d live tokens, the most a user may have; revoke some first", ErrInvalid, u.Login, live)
	}
	secret := newTokenText(kind)
	t.Digest = DigestOf(secret)
	if err := s.store.TokenCreate(ctx, &t); err != nil {
		return nil, err
	}
	return &NewToken{Token: t, Secret: secret}, nil
}

// TokenList lists p's tokens, or every token when all is set (platform
// admins only).
func (s *Service) TokenList(ctx context.Context, p *Principal, all bool) ([]*Token, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: sign in to list tokens", ErrUnauthenticated)
	}
	user := p.User
	if all {
		if err := s.platformAdmin(ctx, p); err != nil {
			return nil, err
		}
		user = ""
	}
	ts, err := s.store.TokenList(ctx, user)
	if ts == nil && err == nil {
		ts = []*Token{}
	}
	return ts, err
}

// TokenRevoke revokes one of p's tokens, or any token for a platform
// admin. Another's token is ErrNotFound to anyone else, as if it did not
// exist.
func (s *Service) TokenRevoke(ctx context.Context, p *Principal, id string) error {
	if p == nil {
		return fmt.Errorf("%w: sign in to revoke a token", ErrUnauthenticated)
	}
	t, err := s.store.TokenGet(ctx, id)
	if err != nil {
		return err
	}
	if t.User != p.User {
		if err := s.platformAdmin(ctx, p); err != nil {
			if errors.Is(err, ErrForbidden) {
				return fmt.Errorf("token %q: %w", id, ErrNotFound)
			}
			return err
		}
	}
	return s.store.TokenRevoke(ctx, id, s.now().UTC())
}

// ServiceAccountCreate creates a service account (platform admins only).
func (s *Service) ServiceAccountCreate(ctx context.Context, p *Principal, login, name string) (*User, error) {
	if err := s.platformAdmin(ctx, p); err != nil {
		return nil, err
	}
	if err := validLogin(login); err != nil {
		return nil, err
	}
	if len(name) > MaxNameBytes {
		return nil, fmt.Errorf("%w: a name has at most %d bytes", ErrInvalid, MaxNameBytes)
	}
	u := &User{ID: newID("usr_"), Login: login, Name: name, Service: true, Created: s.now().UTC()}
	if err := s.store.UserCreate(ctx, u); err != nil {
		return nil, err
	}
	return u, nil
}

// checkBinding validates b and that p is an admin where b applies (an
// org admin grants on its org, a platform admin anywhere).
func (s *Service) checkBinding(ctx context.Context, p *Principal, b Binding) error {
	if b.Role <= RoleNone || b.Role > RoleAdmin {
		return fmt.Errorf("%w: a binding's role is read, trigger, approve or admin", ErrInvalid)
	}
	if err := validLogin(b.User); err != nil {
		return err
	}
	if err := validScope(b.Org, b.Repo); err != nil {
		return err
	}
	return s.Authorize(ctx, p, RoleAdmin, b.Org, b.Repo)
}

// BindingGrant grants b; p must be an admin where b applies. The user
// must exist.
func (s *Service) BindingGrant(ctx context.Context, p *Principal, b Binding) error {
	if err := s.checkBinding(ctx, p, b); err != nil {
		return err
	}
	if _, err := s.store.UserByLogin(ctx, b.User); err != nil {
		return err
	}
	return s.store.BindingGrant(ctx, b)
}

// BindingRevoke revokes b; p must be an admin where b applies.
func (s *Service) BindingRevoke(ctx context.Context, p *Principal, b Binding) error {
	if err := s.checkBinding(ctx, p, b); err != nil {
		return err
	}
	return s.store.BindingRevoke(ctx, b)
}

// BindingList lists every binding to a platform admin, and to anyone
// else their own.
func (s *Service) BindingList(ctx context.Context, p *Principal) ([]Binding, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: sign in to list roles", ErrUnauthenticated)
	}
	login := p.Login
	if s.platformAdmin(ctx, p) == nil {
		login = ""
	}
	bs, err := s.store.BindingList(ctx, login)
	if bs == nil && err == nil {
		bs = []Binding{}
	}
	return bs, err
}

// UserList lists the users (platform admins only).
func (s *Service) UserList(ctx context.Context, p *Principal) ([]*User, error) {
	if err := s.platformAdmin(ctx, p); err != nil {
		return nil, err
	}
	return s.store.UserList(ctx)
}

// UserDisable disables (or, with disabled false, enables) a user
// (platform admins only). A disabled user's tokens and sessions stop
// working at once, and it has no role.
func (s *Service) UserDisable(ctx context.Context, p *Principal, login string, disabled bool) error {
	if err := s.platformAdmin(ctx, p); err != nil {
		return err
	}
	u, err := s.store.UserByLogin(ctx, login)
	if err != nil {
		return err
	}
	return s.store.UserSetDisabled(ctx, u.ID, disabled)
}
