package secrets

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cikit/cikit"
)

const (
	queryKeys = `SELECT id, keyring_key, wrapped_key, ciphertext, created_at, retired_at
		FROM secrets_oidc_keys ORDER BY seq DESC`
	// Adders take turns, so that the newest key each reads is still the
	// newest when it inserts; readers are not blocked.
	lockKeys    = `LOCK TABLE secrets_oidc_keys IN SHARE ROW EXCLUSIVE MODE`
	queryNewest = `SELECT id FROM secrets_oidc_keys ORDER BY seq DESC LIMIT 1`
	retireKeys  = `UPDATE secrets_oidc_keys SET retired_at = $1 WHERE retired_at IS NULL`
	insertKey   = `INSERT INTO secrets_oidc_keys (id, keyring_key, wrapped_key, ciphertext, created_at)
		VALUES ($1, $2, $3, $4, $5)`
	deleteKeys = `DELETE FROM secrets_oidc_keys WHERE retired_at IS NOT NULL AND retired_at < $1`
)

// PostgresKeyStore is a KeyStore in PostgreSQL's secrets_oidc_keys
// table, shared by the server processes of one platform. KeyList re-seals
// a key sealed with a keyring key other than the primary under the
// primary, so that a rotated-out keyring key can be dropped once every
// server runs with the new one first.
type PostgresKeyStore struct {
	pool *pgxpool.Pool
	kr   *Keyring
}

var _ KeyStore = (*PostgresKeyStore)(nil)

// NewPostgresKeyStore returns a key store over pool whose keys kr seals.
// Call Migrate before its first use.
func NewPostgresKeyStore(pool *pgxpool.Pool, kr *Keyring) *PostgresKeyStore {
	return &PostgresKeyStore{pool: pool, kr: kr}
}

// Migrate applies the package's migrations the database does not have
// yet.
func (s *PostgresKeyStore) Migrate(ctx context.Context) error { return migrate(ctx, s.pool) }

// KeyList implements KeyStore.
func (s *PostgresKeyStore) KeyList(ctx context.Context) ([]SigningKey, error) {
	rows, err := s.pool.Query(ctx, queryKeys)
	if err != nil {
		return nil, fmt.Errorf("secrets: list signing keys: %w", err)
	}
	type row struct {
		id      string
		sealed  Sealed
		created time.Time
		retired *time.Time
	}
	var got []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.sealed.KeyID, &r.sealed.WrappedKey, &r.sealed.Ciphertext, &r.created, &r.retired); err != nil {
			rows.Close()
			return nil, fmt.Errorf("secrets: list signing keys: %w", err)
		}
		got = append(got, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("secrets: list signing keys: %w", err)
	}
	out := make([]SigningKey, 0, len(got))
	for _, r := range got {
		priv, err := openKey(s.kr, r.id, r.sealed)
		if err != nil {
			return nil, err
		}
		if err := s.rewrap(ctx, r.id, r.sealed); err != nil {
			return nil, err
		}
		k := SigningKey{ID: r.id, Private: priv, Created: storeTime(r.created)}
		if r.retired != nil {
			k.Retired = storeTime(*r.retired)
		}
		out = append(out, k)
	}
	return out, nil
}

// rewrap re-seals, under the keyring's primary key, a signing key sealed
// with another one, so that the old keyring key can be dropped from the
// configuration as soon as every server runs with the new one first. The
// update is conditional on the row being as read: a concurrent rewrap of
// another server wins, with the same result.
func (s *PostgresKeyStore) rewrap(ctx context.Context, id string, sealed Sealed) error {
	re, changed, err := s.kr.Rewrap(sealed, keyAAD(id))
	if err != nil || !changed {
		return err
	}
	_, err = s.pool.Exec(ctx, `UPDATE secrets_oidc_keys SET keyring_key = $2, wrapped_key = $3
		WHERE id = $1 AND keyring_key = $4 AND wrapped_key = $5`, id, re.KeyID, re.WrappedKey, sealed.KeyID, sealed.WrappedKey)
	if err != nil {
		return fmt.Errorf("secrets: rewrap signing key %q: %w", id, err)
	}
	return nil
}

// KeyAdd implements KeyStore.
func (s *PostgresKeyStore) KeyAdd(ctx context.Context, key SigningKey, ifNewest string) error {
	if err := validNewKey(key); err != nil {
		return err
	}
	sealed, err := sealKey(s.kr, key)
	if err != nil {
		return err
	}
	created := storeTime(key.Created)
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, lockKeys); err != nil {
			return err
		}
		var newest string
		if err := tx.QueryRow(ctx, queryNewest).Scan(&newest); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if newest != ifNewest {
			return newestConflict(newest, ifNewest)
		}
		if _, err := tx.Exec(ctx, retireKeys, created); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, insertKey, key.ID, sealed.KeyID, sealed.WrappedKey, sealed.Ciphertext, created)
		return err
	})
	return interpretKeyError(key.ID, err)
}

// KeyDelete implements KeyStore.
func (s *PostgresKeyStore) KeyDelete(ctx context.Context, retiredBefore time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, deleteKeys, retiredBefore)
	if err != nil {
		return 0, fmt.Errorf("secrets: delete signing keys: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

func interpretKeyError(id string, err error) error {
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, cikit.ErrConflict):
		return err
	case errors.As(err, &pgErr) && pgErr.Code == "23505":
		return fmt.Errorf("%w: a signing key of ID %q exists", cikit.ErrConflict, id)
	}
	return fmt.Errorf("secrets: add signing key %q: %w", id, err)
}
