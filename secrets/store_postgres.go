package secrets

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The SQL of PostgresStore, on the table of migrations/001_store.sql.
const (
	// sqlFetch keeps, for each name, the row of the first of the scopes
	// ($1, narrowest first) that holds it.
	sqlFetch = `SELECT DISTINCT ON (name) scope, name, key_id, wrapped_key, ciphertext
		FROM secrets_values WHERE scope = ANY($1::text[]) AND name = ANY($2::text[])
		ORDER BY name, array_position($1::text[], scope)`
	sqlSet = `INSERT INTO secrets_values (scope, name, key_id, wrapped_key, ciphertext, updated_at)
		VALUES ($1, $2, $3, $4, $5, now())
		ON CONFLICT (scope, name) DO UPDATE SET key_id = EXCLUDED.key_id, wrapped_key = EXCLUDED.wrapped_key,
			ciphertext = EXCLUDED.ciphertext, updated_at = EXCLUDED.updated_at`
	sqlList      = `SELECT name, key_id, updated_at FROM secrets_values WHERE scope = $1 ORDER BY name COLLATE "C"`
	sqlDelete    = `DELETE FROM secrets_values WHERE scope = $1 AND name = $2`
	sqlGetSealed = `SELECT key_id, wrapped_key, ciphertext FROM secrets_values WHERE scope = $1 AND name = $2`
	// sqlRewrapScan pages through the rows sealed with another key than
	// the primary ($1), in primary key order after ($2, $3).
	sqlRewrapScan = `SELECT scope, name, key_id, wrapped_key FROM secrets_values
		WHERE key_id <> $1 AND (scope, name) > ($2, $3) ORDER BY scope, name LIMIT $4`
	// sqlRewrap replaces the wrapped keys of a batch, each only if its
	// row still has the wrapped key read: a row set since keeps its new
	// value. The ciphertext is not rewritten.
	sqlRewrap = `UPDATE secrets_values v SET key_id = $5, wrapped_key = t.wk
		FROM unnest($1::text[], $2::text[], $3::bytea[], $4::bytea[]) AS t(scope, name, old, wk)
		WHERE v.scope = t.scope AND v.name = t.name AND v.wrapped_key = t.old`
)

// PostgresStore is a Store in a PostgreSQL table, secrets_values, whose
// rows hold values sealed by a Keyring: what the table holds opens only
// with the keyring's keys, and only in its own row. Call Migrate before
// first use.
type PostgresStore struct {
	pool *pgxpool.Pool
	kr   *Keyring
}

// NewPostgresStore returns a store in pool's database whose values kr
// seals and opens. Several stores, in several processes, may share one
// database.
func NewPostgresStore(pool *pgxpool.Pool, kr *Keyring) (*PostgresStore, error) {
	if pool == nil {
		return nil, errors.New("secrets: NewPostgresStore needs a pool")
	}
	if kr == nil {
		return nil, errors.New("secrets: NewPostgresStore needs a Keyring (the store's keys, from its configuration)")
	}
	return &PostgresStore{pool: pool, kr: kr}, nil
}

// Migrate creates or updates the store's table. Several processes may
// migrate at once.
func (s *PostgresStore) Migrate(ctx context.Context) error { return migrate(ctx, s.pool) }

// Name returns "store".
func (s *PostgresStore) Name() string { return storeName }

// Fetch implements Provider.
func (s *PostgresStore) Fetch(ctx context.Context, r Request) ([]Secret, error) {
	names, err := validRequest(r)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 || len(r.Scopes) == 0 {
		return nil, ctx.Err()
	}
	scopes := make([]string, len(r.Scopes))
	byString := make(map[string]Scope, len(r.Scopes))
	for i, sc := range r.Scopes {
		scopes[i] = sc.String()
		byString[scopes[i]] = sc
	}
	rows, err := s.pool.Query(ctx, sqlFetch, scopes, names)
	if err != nil {
		return nil, interpretError(err)
	}
	type found struct {
		scope  Scope
		name   string
		sealed Sealed
	}
	var fs []found
	for rows.Next() {
		var f found
		var scope string
		if err := rows.Scan(&scope, &f.name, &f.sealed.KeyID, &f.sealed.WrappedKey, &f.sealed.Ciphertext); err != nil {
			rows.Close()
			return nil, interpretError(err)
		}
		f.scope = byString[scope]
		fs = append(fs, f)
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(err)
	}
	out := make([]Secret, 0, len(fs))
	for _, f := range fs {
		v, err := s.kr.Open(f.sealed, sealAAD(f.scope, f.name))
		if err != nil {
			return nil, openError(f.scope, f.name, f.sealed.KeyID, err)
		}
		out = append(out, Secret{Name: f.name, Value: string(v), Scope: f.scope})
	}
	return out, nil
}

// Set implements Store.
func (s *PostgresStore) Set(ctx context.Context, scope Scope, name, value string) error {
	if err := validSet(scope, name, value); err != nil {
		return err
	}
	sealed, err := s.kr.Seal([]byte(value), sealAAD(scope, name))
	if err != nil {
		return err
	}
	return s.put(ctx, scope, name, sealed)
}

func (s *PostgresStore) put(ctx context.Context, scope Scope, name string, sealed Sealed) error {
	_, err := s.pool.Exec(ctx, sqlSet, scope.String(), name, sealed.KeyID, sealed.WrappedKey, sealed.Ciphertext)
	return interpretError(err)
}

// List implements Store.
func (s *PostgresStore) List(ctx context.Context, scope Scope) ([]Info, error) {
	if err := scope.Validate(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, sqlList, scope.String())
	if err != nil {
		return nil, interpretError(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Info, error) {
		i := Info{Scope: scope}
		err := row.Scan(&i.Name, &i.KeyID, &i.Updated)
		i.Updated = i.Updated.UTC()
		return i, err
	})
	return out, interpretError(err)
}

// Delete implements Store.
func (s *PostgresStore) Delete(ctx context.Context, scope Scope, name string) error {
	if err := validKey(scope, name); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, sqlDelete, scope.String(), name)
	if err != nil {
		return interpretError(err)
	}
	if tag.RowsAffected() == 0 {
		return notFound(scope, name)
	}
	return nil
}

// Rewrap implements Store. It works in batches of short statements, so
// that Fetch and Set go on meanwhile; a row set while it works keeps its
// new value. Run it once every process has the new keyring: a process
// still sealing with the old key writes rows it must rewrap again.
func (s *PostgresStore) Rewrap(ctx context.Context) (int, error) {
	primary := s.kr.Primary()
	n := 0
	var lastScope, lastName string
	for {
		rows, err := s.pool.Query(ctx, sqlRewrapScan, primary, lastScope, lastName, rewrapBatch)
		if err != nil {
			return n, interpretError(err)
		}
		var scopes, names []string
		var olds, news [][]byte
		for rows.Next() {
			var scope, name string
			var sealed Sealed
			if err := rows.Scan(&scope, &name, &sealed.KeyID, &sealed.WrappedKey); err != nil {
				rows.Close()
				return n, interpretError(err)
			}
			lastScope, lastName = scope, name
			sc, err := ParseScope(scope)
			if err != nil {
				rows.Close()
				return n, fmt.Errorf("secrets: the table secrets_values holds a row of scope %q: %w", scope, err)
			}
			// Rewrap opens the wrapped key only: the ciphertext is not read.
			re, _, err := s.kr.Rewrap(sealed, sealAAD(sc, name))
			if err != nil {
				rows.Close()
				return n, openError(sc, name, sealed.KeyID, err)
			}
			scopes, names = append(scopes, scope), append(names, name)
			olds, news = append(olds, sealed.WrappedKey), append(news, re.WrappedKey)
		}
		if err := rows.Err(); err != nil {
			return n, interpretError(err)
		}
		if len(scopes) == 0 {
			return n, nil
		}
		tag, err := s.pool.Exec(ctx, sqlRewrap, scopes, names, olds, news, primary)
		if err != nil {
			return n, interpretError(err)
		}
		n += int(tag.RowsAffected())
		if len(scopes) < rewrapBatch {
			return n, nil
		}
	}
}

// GetSealed returns a stored secret as it is kept: sealed. With
// PutSealed it copies secrets between stores without opening them.
func (s *PostgresStore) GetSealed(ctx context.Context, scope Scope, name string) (Sealed, error) {
	if err := validKey(scope, name); err != nil {
		return Sealed{}, err
	}
	var sealed Sealed
	err := s.pool.QueryRow(ctx, sqlGetSealed, scope.String(), name).Scan(&sealed.KeyID, &sealed.WrappedKey, &sealed.Ciphertext)
	if errors.Is(err, pgx.ErrNoRows) {
		return Sealed{}, notFound(scope, name)
	}
	return sealed, interpretError(err)
}

// PutSealed stores a sealed value as it is, replacing the secret of the
// same scope and name. It does not open it: a value sealed for another
// scope or name, or with a key the keyring lacks, is stored, and fails
// when it is fetched.
func (s *PostgresStore) PutSealed(ctx context.Context, scope Scope, name string, sealed Sealed) error {
	if err := validKey(scope, name); err != nil {
		return err
	}
	if err := validSealed(sealed); err != nil {
		return err
	}
	return s.put(ctx, scope, name, sealed)
}

// interpretError gives the store's errors their context; a cancelled or
// expired context stays recognisable with errors.Is.
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("secrets: the PostgreSQL store: %w", err)
}
