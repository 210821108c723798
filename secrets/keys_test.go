package secrets_test

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/internal/pgtest"
	"github.com/cikit/cikit/secrets"
	"github.com/cikit/cikit/secrets/secretstest"
)

// oidcKeyring returns a keyring of one key made of b.
func oidcKeyring(t testing.TB, id string, b byte) *secrets.Keyring {
	t.Helper()
	kr, err := secrets.NewKeyring(secrets.Key{ID: id, Secret: bytes.Repeat([]byte{b}, secrets.KeyBytes)})
	require.NoError(t, err)
	return kr
}

func newPostgresKeyStore(t *testing.T, kr *secrets.Keyring) (*secrets.PostgresKeyStore, *pgtest.DB) {
	t.Helper()
	db := pgtest.New(t)
	s := secrets.NewPostgresKeyStore(db.Pool, kr)
	require.NoError(t, s.Migrate(t.Context()))
	return s, db
}

func TestMemoryKeyStore(t *testing.T) {
	t.Parallel()
	secretstest.RunKeyStoreTests(t, func(t *testing.T) secrets.KeyStore {
		return secrets.NewMemoryKeyStore(oidcKeyring(t, "kek1", 1))
	})
}

func TestPostgresKeyStore(t *testing.T) {
	t.Parallel()
	secretstest.RunKeyStoreTests(t, func(t *testing.T) secrets.KeyStore {
		s, _ := newPostgresKeyStore(t, oidcKeyring(t, "kek1", 1))
		return s
	})
}

// TestPostgresKeyStoreSealsKeys: the table holds no private key in the
// clear, and a sealed key opens only under its own ID and keyring.
func TestPostgresKeyStoreSealsKeys(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	kr := oidcKeyring(t, "kek1", 1)
	s, db := newPostgresKeyStore(t, kr)
	priv, err := rsa.GenerateKey(rand.Reader, secrets.KeyBits)
	require.NoError(t, err)
	require.NoError(t, s.KeyAdd(ctx, secrets.SigningKey{ID: "k1", Private: priv, Created: time.Now()}, ""))

	der, err := x509.MarshalPKCS8PrivateKey(priv)
	require.NoError(t, err)
	var keyringKey string
	var wrapped, ciphertext []byte
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT keyring_key, wrapped_key, ciphertext FROM secrets_oidc_keys`).
		Scan(&keyringKey, &wrapped, &ciphertext))
	require.Equal(t, "kek1", keyringKey)
	require.False(t, bytes.Contains(ciphertext, der[len(der)-64:]), "the private key is sealed")

	other := secrets.NewPostgresKeyStore(db.Pool, oidcKeyring(t, "kek2", 2))
	_, err = other.KeyList(ctx)
	require.ErrorIs(t, err, secrets.ErrKeyUnknown, "another keyring cannot open the keys")

	_, err = db.Pool.Exec(ctx, `UPDATE secrets_oidc_keys SET id = 'k2'`)
	require.NoError(t, err)
	_, err = s.KeyList(ctx)
	require.ErrorIs(t, err, secrets.ErrOpen, "a sealed key moved to another ID does not open")
}

// TestPostgresKeyStoreRewrapsUnderANewPrimary: a server whose keyring has
// a new key first re-seals the signing keys it reads under it, so that
// the old keyring key can then be dropped at once: a keyring of the new
// key alone opens them.
func TestPostgresKeyStoreRewrapsUnderANewPrimary(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, db := newPostgresKeyStore(t, oidcKeyring(t, "kek1", 1))
	priv, err := rsa.GenerateKey(rand.Reader, secrets.KeyBits)
	require.NoError(t, err)
	require.NoError(t, s.KeyAdd(ctx, secrets.SigningKey{ID: "k1", Private: priv, Created: time.Now()}, ""))

	newOnly := secrets.NewPostgresKeyStore(db.Pool, oidcKeyring(t, "kek2", 2))
	_, err = newOnly.KeyList(ctx)
	require.ErrorIs(t, err, secrets.ErrKeyUnknown, "sealed under kek1 still")

	k2, err := secrets.NewKeyring(testKey("kek2", 2), testKey("kek1", 1))
	require.NoError(t, err)
	got, err := secrets.NewPostgresKeyStore(db.Pool, k2).KeyList(ctx)
	require.NoError(t, err)
	require.Len(t, got, 1)
	var keyringKey string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT keyring_key FROM secrets_oidc_keys`).Scan(&keyringKey))
	require.Equal(t, "kek2", keyringKey)

	got, err = newOnly.KeyList(ctx)
	require.NoError(t, err, "the old keyring key can go")
	require.Equal(t, priv.N, got[0].Private.N)
}
