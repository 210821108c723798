package secrets

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"
)

// MemoryStore is a Store in memory, for tests and single-process use. It
// behaves as PostgresStore does, down to keeping values only sealed, so
// that it can stand in for it.
type MemoryStore struct {
	kr *Keyring
	d  *memData
}

// memData is what the stores of one WithKeyring family share, as the
// PostgresStores of one database share its table.
type memData struct {
	mu sync.RWMutex
	// rows by memKey; a row is never changed in place, so that Rewrap
	// can tell whether one was replaced while it worked.
	rows map[string]*memRow
}

type memRow struct {
	scope   Scope
	name    string
	sealed  Sealed
	updated time.Time
}

func memKey(scope Scope, name string) string { return scope.String() + "\x00" + name }

// NewMemoryStore returns an empty store whose values kr seals.
func NewMemoryStore(kr *Keyring) *MemoryStore {
	return &MemoryStore{kr: kr, d: &memData{rows: map[string]*memRow{}}}
}

// WithKeyring returns a store of the same secrets whose values kr seals
// and opens, as another process with another configuration would see
// the same database: the way to test a key rotation.
func (s *MemoryStore) WithKeyring(kr *Keyring) *MemoryStore {
	return &MemoryStore{kr: kr, d: s.d}
}

// Name returns "store".
func (s *MemoryStore) Name() string { return storeName }

// Fetch implements Provider.
func (s *MemoryStore) Fetch(ctx context.Context, r Request) ([]Secret, error) {
	names, err := validRequest(r)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.kr == nil {
		return nil, errNoKeyring
	}
	var rows []*memRow
	s.d.mu.RLock()
	for _, n := range names {
		for _, sc := range r.Scopes {
			if row, ok := s.d.rows[memKey(sc, n)]; ok {
				rows = append(rows, row)
				break
			}
		}
	}
	s.d.mu.RUnlock()
	out := make([]Secret, 0, len(rows))
	for _, row := range rows {
		v, err := s.kr.Open(row.sealed, sealAAD(row.scope, row.name))
		if err != nil {
			return nil, openError(row.scope, row.name, row.sealed.KeyID, err)
		}
		out = append(out, Secret{Name: row.name, Value: string(v), Scope: row.scope})
	}
	return out, nil
}

// Set implements Store.
func (s *MemoryStore) Set(ctx context.Context, scope Scope, name, value string) error {
	if err := validSet(scope, name, value); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.kr == nil {
		return errNoKeyring
	}
	sealed, err := s.kr.Seal([]byte(value), sealAAD(scope, name))
	if err != nil {
		return err
	}
	return s.PutSealed(ctx, scope, name, sealed)
}

// List implements Store.
func (s *MemoryStore) List(ctx context.Context, scope Scope) ([]Info, error) {
	if err := scope.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	prefix := scope.String() + "\x00"
	var out []Info
	s.d.mu.RLock()
	for k, row := range s.d.rows {
		if strings.HasPrefix(k, prefix) {
			out = append(out, Info{Scope: row.scope, Name: row.name, Updated: row.updated, KeyID: row.sealed.KeyID})
		}
	}
	s.d.mu.RUnlock()
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Delete implements Store.
func (s *MemoryStore) Delete(ctx context.Context, scope Scope, name string) error {
	if err := validKey(scope, name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	k := memKey(scope, name)
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	if _, ok := s.d.rows[k]; !ok {
		return notFound(scope, name)
	}
	delete(s.d.rows, k)
	return nil
}

// Rewrap implements Store. A row replaced while it works keeps its new
// value: each row is rewrapped only if it is still the one read.
func (s *MemoryStore) Rewrap(ctx context.Context) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if s.kr == nil {
		return 0, errNoKeyring
	}
	primary := s.kr.Primary()
	var todo []*memRow
	s.d.mu.RLock()
	for _, row := range s.d.rows {
		if row.sealed.KeyID != primary {
			todo = append(todo, row)
		}
	}
	s.d.mu.RUnlock()
	slices.SortFunc(todo, func(a, b *memRow) int { return strings.Compare(memKey(a.scope, a.name), memKey(b.scope, b.name)) })
	n := 0
	for batch := range slices.Chunk(todo, rewrapBatch) {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		next := make([]*memRow, len(batch))
		for i, row := range batch {
			sealed, _, err := s.kr.Rewrap(row.sealed, sealAAD(row.scope, row.name))
			if err != nil {
				return n, openError(row.scope, row.name, row.sealed.KeyID, err)
			}
			r := *row
			r.sealed = sealed
			next[i] = &r
		}
		s.d.mu.Lock()
		for i, row := range batch {
			k := memKey(row.scope, row.name)
			if s.d.rows[k] == row {
				s.d.rows[k] = next[i]
				n++
			}
		}
		s.d.mu.Unlock()
	}
	return n, nil
}

// GetSealed returns a stored secret as it is kept: sealed. With
// PutSealed it copies secrets between stores without opening them.
func (s *MemoryStore) GetSealed(ctx context.Context, scope Scope, name string) (Sealed, error) {
	if err := validKey(scope, name); err != nil {
		return Sealed{}, err
	}
	if err := ctx.Err(); err != nil {
		return Sealed{}, err
	}
	s.d.mu.RLock()
	defer s.d.mu.RUnlock()
	row, ok := s.d.rows[memKey(scope, name)]
	if !ok {
		return Sealed{}, notFound(scope, name)
	}
	return cloneSealed(row.sealed), nil
}

// PutSealed stores a sealed value as it is, replacing the secret of the
// same scope and name. It does not open it: a value sealed for another
// scope or name, or with a key the keyring lacks, is stored, and fails
// when it is fetched.
func (s *MemoryStore) PutSealed(ctx context.Context, scope Scope, name string, sealed Sealed) error {
	if err := validKey(scope, name); err != nil {
		return err
	}
	if err := validSealed(sealed); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	row := &memRow{scope: scope, name: name, sealed: cloneSealed(sealed), updated: time.Now().UTC().Truncate(time.Microsecond)}
	s.d.mu.Lock()
	s.d.rows[memKey(scope, name)] = row
	s.d.mu.Unlock()
	return nil
}

func cloneSealed(s Sealed) Sealed {
	return Sealed{KeyID: s.KeyID, WrappedKey: slices.Clone(s.WrappedKey), Ciphertext: slices.Clone(s.Ciphertext)}
}
