package secrets

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cikit/cikit"
)

// SigningKey is one of the OIDC issuer's signing keys.
type SigningKey struct {
	// ID is the key's ID, the kid of the tokens it signs and of its entry
	// in the JWKS: at most 128 printable ASCII characters.
	ID string
	// Private is the RSA key. A KeyStore keeps it sealed with its
	// Keyring, with the additional data "oidc-key:"+ID, so that a sealed
	// key moved to another ID does not open.
	Private *rsa.PrivateKey
	// Created is when the key was made.
	Created time.Time
	// Retired is when a newer key replaced it as the primary, zero while
	// it is the primary. A retired key signs nothing, but verifies the
	// tokens it signed until they expire.
	Retired time.Time
}

// KeyStore keeps the issuer's signing keys. Several server processes
// share one: they all sign with its primary key (the newest) and publish
// all of its keys. MemoryKeyStore and PostgresKeyStore implement it;
// secretstest.RunKeyStoreTests is the suite they pass.
//
// Times are kept to the microsecond, in UTC.
type KeyStore interface {
	// KeyList returns the keys, the newest (the primary) first. An empty
	// store returns none and no error. A key the store's Keyring cannot
	// open is an error (wrapping ErrKeyUnknown or ErrOpen), not left out.
	KeyList(ctx context.Context) ([]SigningKey, error)
	// KeyAdd adds key, whose Retired must be zero, as the new primary,
	// and retires the previous primary at key.Created, in one step. It
	// does so only if the newest key of the store has the ID ifNewest (""
	// for an empty store); if not, because another process added a key
	// meanwhile, it changes nothing and returns an error wrapping
	// cikit.ErrConflict. So two processes rotating at once make one new
	// key, not two. A key whose ID is taken is a conflict too.
	KeyAdd(ctx context.Context, key SigningKey, ifNewest string) error
	// KeyDelete deletes the retired keys retired before retiredBefore and
	// returns how many it deleted. It never deletes the primary.
	KeyDelete(ctx context.Context, retiredBefore time.Time) (int, error)
}

// storeTime is how a KeyStore keeps a time: PostgreSQL's precision, UTC.
func storeTime(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Microsecond)
}

func validKeyID(id string) error {
	if id == "" || len(id) > 128 || !printable(id) {
		return fmt.Errorf("%w: signing key ID %q: use 1 to 128 printable ASCII characters", ErrInvalid, id)
	}
	return nil
}

// printable reports whether s is printable ASCII without spaces.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

func validNewKey(k SigningKey) error {
	if err := validKeyID(k.ID); err != nil {
		return err
	}
	switch {
	case k.Private == nil:
		return fmt.Errorf("%w: signing key %q has no private key", ErrInvalid, k.ID)
	case k.Created.IsZero():
		return fmt.Errorf("%w: signing key %q has no creation time", ErrInvalid, k.ID)
	case !k.Retired.IsZero():
		return fmt.Errorf("%w: signing key %q is added retired; a new key is the primary", ErrInvalid, k.ID)
	}
	return nil
}

func keyAAD(id string) []byte { return []byte("oidc-key:" + id) }

func sealKey(kr *Keyring, k SigningKey) (Sealed, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k.Private)
	if err != nil {
		return Sealed{}, fmt.Errorf("%w: signing key %q: %v", ErrInvalid, k.ID, err)
	}
	defer clear(der)
	return kr.Seal(der, keyAAD(k.ID))
}

func openKey(kr *Keyring, id string, s Sealed) (*rsa.PrivateKey, error) {
	der, err := kr.Open(s, keyAAD(id))
	if err != nil {
		return nil, fmt.Errorf("signing key %q: %w", id, err)
	}
	defer clear(der)
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("signing key %q: %w: %v", id, ErrOpen, err)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("signing key %q: %w: a %T, not an RSA key", id, ErrOpen, k)
	}
	return rk, nil
}

// MemoryKeyStore is a KeyStore in memory, for tests and a single
// process. Its keys are sealed as PostgresKeyStore's are.
type MemoryKeyStore struct {
	kr   *Keyring
	mu   sync.Mutex
	keys []sealedKey // oldest first
}

type sealedKey struct {
	id               string
	sealed           Sealed
	created, retired time.Time
}

var _ KeyStore = (*MemoryKeyStore)(nil)

// NewMemoryKeyStore returns an empty key store whose keys kr seals.
func NewMemoryKeyStore(kr *Keyring) *MemoryKeyStore {
	return &MemoryKeyStore{kr: kr}
}

// KeyList implements KeyStore.
func (m *MemoryKeyStore) KeyList(ctx context.Context) ([]SigningKey, error) {
	m.mu.Lock()
	keys := slices.Clone(m.keys)
	m.mu.Unlock()
	out := make([]SigningKey, 0, len(keys))
	for _, k := range slices.Backward(keys) {
		priv, err := openKey(m.kr, k.id, k.sealed)
		if err != nil {
			return nil, err
		}
		out = append(out, SigningKey{ID: k.id, Private: priv, Created: k.created, Retired: k.retired})
	}
	return out, nil
}

// KeyAdd implements KeyStore.
func (m *MemoryKeyStore) KeyAdd(ctx context.Context, key SigningKey, ifNewest string) error {
	if err := validNewKey(key); err != nil {
		return err
	}
	sealed, err := sealKey(m.kr, key)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	newest := ""
	if len(m.keys) > 0 {
		newest = m.keys[len(m.keys)-1].id
	}
	if newest != ifNewest {
		return newestConflict(newest, ifNewest)
	}
	if slices.ContainsFunc(m.keys, func(k sealedKey) bool { return k.id == key.ID }) {
		return fmt.Errorf("%w: a signing key of ID %q exists", cikit.ErrConflict, key.ID)
	}
	created := storeTime(key.Created)
	for i := range m.keys {
		if m.keys[i].retired.IsZero() {
			m.keys[i].retired = created
		}
	}
	m.keys = append(m.keys, sealedKey{id: key.ID, sealed: sealed, created: created})
	return nil
}

func newestConflict(newest, ifNewest string) error {
	if newest == "" {
		newest = "none"
	}
	if ifNewest == "" {
		ifNewest = "none"
	}
	return fmt.Errorf("%w: the newest signing key is %s, not %s: another process rotated the keys", cikit.ErrConflict, newest, ifNewest)
}

// KeyDelete implements KeyStore.
func (m *MemoryKeyStore) KeyDelete(ctx context.Context, retiredBefore time.Time) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(m.keys)
	m.keys = slices.DeleteFunc(m.keys, func(k sealedKey) bool {
		return !k.retired.IsZero() && k.retired.Before(retiredBefore)
	})
	return n - len(m.keys), nil
}
