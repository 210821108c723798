package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// KeyBytes is the size of a Keyring key and of a data key: AES-256.
const KeyBytes = 32

// Key is a key-encryption key of a Keyring.
type Key struct {
	// ID names the key in what it seals, so that rotation knows which
	// key opens what: letters, digits, '-', '_' and '.', at most 64.
	ID string
	// Secret is the key, KeyBytes long.
	Secret []byte
}

// ParseKey reads a key as configuration gives it: "ID:BASE64", the
// base64 (standard or URL alphabet, padded or not) of KeyBytes bytes.
// `openssl rand -base64 32` makes one.
func ParseKey(s string) (Key, error) {
	id, b64, ok := strings.Cut(s, ":")
	if !ok {
		return Key{}, fmt.Errorf("%w: a key is ID:BASE64 (32 bytes, e.g. from openssl rand -base64 32)", ErrInvalid)
	}
	b64 = strings.TrimRight(b64, "=")
	var secret []byte
	var err error
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		if secret, err = enc.DecodeString(b64); err == nil {
			break
		}
	}
	if err != nil {
		return Key{}, fmt.Errorf("%w: key %q: its secret is not base64", ErrInvalid, id)
	}
	k := Key{ID: id, Secret: secret}
	return k, k.validate()
}

func (k Key) validate() error {
	if k.ID == "" || len(k.ID) > 64 || !pathPartRE.MatchString(k.ID) {
		return fmt.Errorf("%w: key ID %q: use 1 to 64 letters, digits, '-', '_' or '.'", ErrInvalid, k.ID)
	}
	if len(k.Secret) != KeyBytes {
		return fmt.Errorf("%w: key %q has %d bytes; a key has %d", ErrInvalid, k.ID, len(k.Secret), KeyBytes)
	}
	return nil
}

// Keyring seals data with envelope encryption: each sealed value has a
// fresh random data key it is encrypted with (AES-256-GCM), and the data
// key is itself encrypted with the keyring's primary key. Rotation
// without downtime: add the new key first (it becomes primary), keep the
// old ones so that what they sealed still opens, Rewrap (Store.Rewrap),
// then drop them. It is safe for concurrent use.
type Keyring struct {
	primary string
	aeads   map[string]cipher.AEAD
}

// NewKeyring returns a keyring of keys; the first is the primary, which
// seals. IDs must be distinct.
func NewKeyring(keys ...Key) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: a keyring needs at least one key", ErrInvalid)
	}
	k := &Keyring{primary: keys[0].ID, aeads: make(map[string]cipher.AEAD, len(keys))}
	for _, key := range keys {
		if err := key.validate(); err != nil {
			return nil, err
		}
		if _, dup := k.aeads[key.ID]; dup {
			return nil, fmt.Errorf("%w: key ID %q is given twice", ErrInvalid, key.ID)
		}
		a, err := newAEAD(key.Secret)
		if err != nil {
			return nil, err
		}
		k.aeads[key.ID] = a
	}
	return k, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// Primary returns the ID of the key that seals.
func (k *Keyring) Primary() string { return k.primary }

// Has reports whether the keyring holds the key id.
func (k *Keyring) Has(id string) bool { _, ok := k.aeads[id]; return ok }

// Sealed is a value a Keyring sealed. Its parts are not secret.
type Sealed struct {
	// KeyID is the key the data key is wrapped with.
	KeyID string
	// WrappedKey is the data key, encrypted with KeyID (nonce first).
	WrappedKey []byte
	// Ciphertext is the value, encrypted with the data key (nonce first).
	Ciphertext []byte
}

// ErrKeyUnknown: a sealed value's key is not in the keyring.
var ErrKeyUnknown = errors.New("secrets: the key a value is sealed with is not in the keyring")

// ErrOpen: a sealed value does not open: it or its additional data was
// altered, or it was sealed with another key of the same ID.
var ErrOpen = errors.New("secrets: a sealed value does not open")

// Seal encrypts plaintext under a fresh data key wrapped with the
// primary key. aad, authenticated but not encrypted, binds the value to
// where it is kept (such as its scope and name): Open with other aad
// fails.
func (k *Keyring) Seal(plaintext, aad []byte) (Sealed, error) {
	dk := make([]byte, KeyBytes)
	rand.Read(dk)
	defer clear(dk)
	da, err := newAEAD(dk)
	if err != nil {
		return Sealed{}, err
	}
	return Sealed{
		KeyID:      k.primary,
		WrappedKey: seal(k.aeads[k.primary], dk, wrapAAD(k.primary, aad)),
		Ciphertext: seal(da, plaintext, aad),
	}, nil
}

// Open decrypts what Seal sealed with the same aad.
func (k *Keyring) Open(s Sealed, aad []byte) ([]byte, error) {
	dk, err := k.unwrap(s, aad)
	if err != nil {
		return nil, err
	}
	defer clear(dk)
	da, err := newAEAD(dk)
	if err != nil {
		return nil, err
	}
	return open(da, s.Ciphertext, aad)
}

// Rewrap returns s with its data key wrapped with the primary key, and
// whether that changed anything. The ciphertext is kept.
func (k *Keyring) Rewrap(s Sealed, aad []byte) (Sealed, bool, error) {
	if s.KeyID == k.primary {
		return s, false, nil
	}
	dk, err := k.unwrap(s, aad)
	if err != nil {
		return s, false, err
	}
	defer clear(dk)
	s.KeyID, s.WrappedKey = k.primary, seal(k.aeads[k.primary], dk, wrapAAD(k.primary, aad))
	return s, true, nil
}

func (k *Keyring) unwrap(s Sealed, aad []byte) ([]byte, error) {
	a, ok := k.aeads[s.KeyID]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrKeyUnknown, s.KeyID)
	}
	dk, err := open(a, s.WrappedKey, wrapAAD(s.KeyID, aad))
	if err != nil || len(dk) != KeyBytes {
		return nil, ErrOpen
	}
	return dk, nil
}

// wrapAAD binds a wrapped data key to its key and to the value's aad.
func wrapAAD(keyID string, aad []byte) []byte {
	return append([]byte("cikit-dk\x00"+keyID+"\x00"), aad...)
}

func seal(a cipher.AEAD, plaintext, aad []byte) []byte {
	nonce := make([]byte, a.NonceSize(), a.NonceSize()+len(plaintext)+a.Overhead())
	rand.Read(nonce)
	return a.Seal(nonce, nonce, plaintext, aad)
}

func open(a cipher.AEAD, sealed, aad []byte) ([]byte, error) {
	if len(sealed) < a.NonceSize()+a.Overhead() {
		return nil, ErrOpen
	}
	p, err := a.Open(nil, sealed[:a.NonceSize()], sealed[a.NonceSize():], aad)
	if err != nil {
		return nil, ErrOpen
	}
	return p, nil
}
