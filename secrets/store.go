package secrets

import (
	"errors"
	"fmt"
	"slices"
)

// storeName is the built-in store's Provider.Name.
const storeName = "store"

// maxScopes bounds the scopes of one Request: ScopesFor gives at most
// three (environment, repository, organisation).
const maxScopes = 8

// rewrapBatch is how many rows Rewrap re-encrypts per round: each round
// is short, so a rotation never holds many rows or a long transaction.
const rewrapBatch = 100

// validRequest checks r's scopes and names, and returns its names
// without duplicates, in order.
func validRequest(r Request) ([]string, error) {
	if len(r.Scopes) > maxScopes {
		return nil, fmt.Errorf("%w: a request of %d scopes; the limit is %d", ErrInvalid, len(r.Scopes), maxScopes)
	}
	if len(r.Names) > MaxSecretsPerJob {
		return nil, fmt.Errorf("%w: a request of %d secrets; a job may name at most %d", ErrInvalid, len(r.Names), MaxSecretsPerJob)
	}
	for _, s := range r.Scopes {
		if err := s.Validate(); err != nil {
			return nil, err
		}
	}
	names := make([]string, 0, len(r.Names))
	for _, n := range r.Names {
		if err := ValidName(n); err != nil {
			return nil, err
		}
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names, nil
}

// sealAAD binds a stored value to its scope and name: a sealed value
// copied to another row does not open. Neither part holds a NUL byte.
func sealAAD(scope Scope, name string) []byte {
	return []byte("cikit-secret\x00" + scope.String() + "\x00" + name)
}

// openError says which stored value did not open, and under which key,
// without anything of the value.
func openError(scope Scope, name, keyID string, err error) error {
	return fmt.Errorf("secrets: the stored secret %s of %s (key %q) does not open: %w", name, scope, keyID, err)
}

func notFound(scope Scope, name string) error {
	return fmt.Errorf("%w: no secret %s in %s", ErrNotFound, name, scope)
}

var errNoKeyring = errors.New("secrets: the store has no Keyring")

// validSet checks what Store.Set is given.
func validSet(scope Scope, name, value string) error {
	if err := scope.Validate(); err != nil {
		return err
	}
	if err := ValidName(name); err != nil {
		return err
	}
	return ValidValue(value)
}

// validKey checks a scope and a name.
func validKey(scope Scope, name string) error {
	if err := scope.Validate(); err != nil {
		return err
	}
	return ValidName(name)
}

// validSealed bounds what PutSealed stores: a sealed value of at most
// MaxValueBytes, with its nonces and tags.
func validSealed(s Sealed) error {
	const overhead = 64
	switch {
	case s.KeyID == "" || len(s.KeyID) > 64:
		return fmt.Errorf("%w: a sealed value's key ID has %d bytes; it has 1 to 64", ErrInvalid, len(s.KeyID))
	case len(s.WrappedKey) > KeyBytes+overhead:
		return fmt.Errorf("%w: a wrapped data key of %d bytes; the limit is %d", ErrInvalid, len(s.WrappedKey), KeyBytes+overhead)
	case len(s.Ciphertext) > MaxValueBytes+overhead:
		return fmt.Errorf("%w: a sealed value of %d bytes; the limit is %d", ErrInvalid, len(s.Ciphertext), MaxValueBytes+overhead)
	}
	return nil
}
