package auth

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MemoryStore is a Store in memory, for the embedded platform and tests.
// Its zero value is not usable; call NewMemoryStore.
type MemoryStore struct {
	mu         sync.Mutex
	users      map[string]*User  // by ID
	logins     map[string]string // login -> ID
	identities map[[2]string]string
	tokens     map[string]*Token // by ID
	digests    map[Digest]string // -> token ID
	tokenOrder []string
	bindings   map[Binding]struct{}
	sessions   map[Digest]*Session
	audit      []Entry // oldest first
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{
		users: map[string]*User{}, logins: map[string]string{}, identities: map[[2]string]string{},
		tokens: map[string]*Token{}, digests: map[Digest]string{}, bindings: map[Binding]struct{}{},
		sessions: map[Digest]*Session{},
	}
}

func clonePtr[T any](v *T) *T {
	c := *v
	return &c
}

func (m *MemoryStore) UserCreate(_ context.Context, u *User) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.userCreate(u)
}

func (m *MemoryStore) userCreate(u *User) error {
	if _, ok := m.users[u.ID]; ok {
		return fmt.Errorf("user ID %q: %w", u.ID, ErrConflict)
	}
	if _, ok := m.logins[u.Login]; ok {
		return fmt.Errorf("login %q: %w", u.Login, ErrConflict)
	}
	m.users[u.ID] = clonePtr(u)
	m.logins[u.Login] = u.ID
	return nil
}

func (m *MemoryStore) UserGet(_ context.Context, id string) (*User, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	u, ok := m.users[id]
	if !ok {
		return nil, fmt.Errorf("user %q: %w", id, ErrNotFound)
	}
	return clonePtr(u), nil
}

func (m *MemoryStore) UserByLogin(_ context.Context, login string) (*User, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id, ok := m.logins[login]
	if !ok {
		return nil, fmt.Errorf("user %q: %w", login, ErrNotFound)
	}
	return clonePtr(m.users[id]), nil
}

func (m *MemoryStore) UserList(context.Context) ([]*User, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*User, 0, len(m.users))
	for _, u := range m.users {
		out = append(out, clonePtr(u))
	}
	slices.SortFunc(out, func(a, b *User) int { return strings.Compare(a.Login, b.Login) })
	return out, nil
}

func (m *MemoryStore) UserSetDisabled(_ context.Context, id string, disabled bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	u, ok := m.users[id]
	if !ok {
		return fmt.Errorf("user %q: %w", id, ErrNotFound)
	}
	u.Disabled = disabled
	return nil
}

func (m *MemoryStore) IdentityLink(_ context.Context, issuer, subject, userID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{issuer, subject}
	if _, ok := m.identities[k]; ok {
		return fmt.Errorf("identity %s of %s: %w", subject, issuer, ErrConflict)
	}
	m.identities[k] = userID
	return nil
}

func (m *MemoryStore) IdentityUser(_ context.Context, issuer, subject string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id, ok := m.identities[[2]string{issuer, subject}]
	if !ok {
		return "", fmt.Errorf("identity %s of %s: %w", subject, issuer, ErrNotFound)
	}
	return id, nil
}

func (m *MemoryStore) TokenCreate(_ context.Context, t *Token) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tokenCreate(t)
}

func (m *MemoryStore) tokenCreate(t *Token) error {
	if _, ok := m.tokens[t.ID]; ok {
		return fmt.Errorf("token %q: %w", t.ID, ErrConflict)
	}
	if _, ok := m.digests[t.Digest]; ok {
		return fmt.Errorf("token digest: %w", ErrConflict)
	}
	if _, ok := m.users[t.User]; !ok {
		return fmt.Errorf("token %q: %w: it names a user that does not exist", t.ID, ErrNotFound)
	}
	m.tokens[t.ID] = clonePtr(t)
	m.digests[t.Digest] = t.ID
	m.tokenOrder = append(m.tokenOrder, t.ID)
	return nil
}

func (m *MemoryStore) TokenGet(_ context.Context, id string) (*Token, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tokens[id]
	if !ok {
		return nil, fmt.Errorf("token %q: %w", id, ErrNotFound)
	}
	return clonePtr(t), nil
}

func (m *MemoryStore) TokenByDigest(_ context.Context, d Digest) (*Token, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id, ok := m.digests[d]
	if !ok {
		return nil, fmt.Errorf("token: %w", ErrNotFound)
	}
	return clonePtr(m.tokens[id]), nil
}

func (m *MemoryStore) TokenList(_ context.Context, user string) ([]*Token, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*Token
	for _, id := range m.tokenOrder {
		if t := m.tokens[id]; user == "" || t.User == user {
			out = append(out, clonePtr(t))
		}
	}
	return out, nil
}

func (m *MemoryStore) TokenRevoke(_ context.Context, id string, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tokens[id]
	if !ok {
		return fmt.Errorf("token %q: %w", id, ErrNotFound)
	}
	if t.RevokedAt.IsZero() {
		t.RevokedAt = at
	}
	return nil
}

func (m *MemoryStore) TokenTouch(_ context.Context, id string, at time.Time, from string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tokens[id]
	if !ok {
		return fmt.Errorf("token %q: %w", id, ErrNotFound)
	}
	t.LastUsedAt, t.LastUsedFrom = at, from
	return nil
}

func (m *MemoryStore) BindingGrant(_ context.Context, b Binding) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.bindings[b] = struct{}{}
	return nil
}

func (m *MemoryStore) BindingRevoke(_ context.Context, b Binding) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.bindings[b]; !ok {
		return fmt.Errorf("binding %s of %s on %q/%q: %w", b.Role, b.User, b.Org, b.Repo, ErrNotFound)
	}
	delete(m.bindings, b)
	return nil
}

func (m *MemoryStore) BindingList(_ context.Context, login string) ([]Binding, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Binding
	for b := range m.bindings {
		if login == "" || b.User == login {
			out = append(out, b)
		}
	}
	slices.SortFunc(out, compareBindings)
	return out, nil
}

func compareBindings(a, b Binding) int {
	return cmp.Or(strings.Compare(a.User, b.User), strings.Compare(a.Org, b.Org), strings.Compare(a.Repo, b.Repo), cmp.Compare(a.Role, b.Role))
}

func (m *MemoryStore) SessionCreate(_ context.Context, s *Session) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.sessions[s.Digest]; ok {
		return fmt.Errorf("session: %w", ErrConflict)
	}
	if _, ok := m.users[s.User]; !ok {
		return fmt.Errorf("session: %w: it names a user that does not exist", ErrNotFound)
	}
	m.sessions[s.Digest] = clonePtr(s)
	return nil
}

func (m *MemoryStore) SessionGet(_ context.Context, d Digest) (*Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[d]
	if !ok {
		return nil, fmt.Errorf("session: %w", ErrNotFound)
	}
	return clonePtr(s), nil
}

func (m *MemoryStore) SessionTouch(_ context.Context, d Digest, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[d]
	if !ok {
		return fmt.Errorf("session: %w", ErrNotFound)
	}
	s.LastSeen = at
	return nil
}

func (m *MemoryStore) SessionDelete(_ context.Context, d Digest) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.sessions, d)
	return nil
}

func (m *MemoryStore) AuditAppend(_ context.Context, e *Entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	e.ID = strconv.Itoa(len(m.audit) + 1)
	m.audit = append(m.audit, *e)
	return nil
}

func (m *MemoryStore) AuditList(_ context.Context, q AuditQuery) ([]Entry, error) {
	limit, before, err := q.normalize()
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []Entry{}
	for i := len(m.audit) - 1; i >= 0 && len(out) < limit; i-- {
		e := m.audit[i]
		if int64(i+1) >= before || !q.matches(e) {
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

func (m *MemoryStore) AdminBootstrap(_ context.Context, p *BootstrapParams) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for b := range m.bindings {
		if b.Role == RoleAdmin && b.Org == "" {
			return false, nil
		}
	}
	userID := p.User.ID
	if id, ok := m.logins[p.User.Login]; ok {
		userID = id
	} else if err := m.userCreate(&p.User); err != nil {
		return false, err
	}
	t := p.Token
	t.User = userID
	if err := m.tokenCreate(&t); err != nil {
		return false, err
	}
	m.bindings[Binding{User: p.User.Login, Role: RoleAdmin}] = struct{}{}
	return true, nil
}

// normalize checks q and returns its limit and its cursor as a number
// (math.MaxInt64 for none).
func (q AuditQuery) normalize() (int, int64, error) {
	limit := cmp.Or(q.Limit, DefaultAuditLimit)
	if limit < 1 || limit > MaxAuditLimit {
		return 0, 0, fmt.Errorf("%w: the audit limit %d is not from 1 to %d", ErrInvalid, q.Limit, MaxAuditLimit)
	}
	before := int64(1<<63 - 1)
	if q.Before != "" {
		n, err := strconv.ParseInt(q.Before, 10, 64)
		if err != nil || n < 1 {
			return 0, 0, fmt.Errorf("%w: the audit cursor %q is not one this log handed out", ErrInvalid, q.Before)
		}
		before = n
	}
	return limit, before, nil
}

func (q AuditQuery) matches(e Entry) bool {
	return (q.Actor == "" || e.Actor == q.Actor) && (q.Action == "" || e.Action == q.Action) && strings.HasPrefix(e.Target, q.TargetPrefix)
}
