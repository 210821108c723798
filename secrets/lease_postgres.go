package secrets

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cikit/cikit"
)

// The SQL of PostgresLeaseStore.
const (
	// A lease of another owner is not updated, so not returned: Add
	// then rolls back.
	sqlLeaseAdd = `INSERT INTO secrets_leases (owner, provider, lease_id, expires_at)
		SELECT $1, * FROM unnest($2::text[], $3::text[], $4::timestamptz[])
		ON CONFLICT (provider, lease_id) DO UPDATE SET expires_at = EXCLUDED.expires_at
			WHERE secrets_leases.owner = EXCLUDED.owner
		RETURNING provider, lease_id`
	sqlLeaseHolder = `SELECT owner FROM secrets_leases WHERE provider = $1 AND lease_id = $2`
	sqlLeaseOwned  = `SELECT provider, lease_id, expires_at FROM secrets_leases
		WHERE owner = $1 ORDER BY provider, lease_id`
	sqlLeaseDue = `SELECT owner, provider, lease_id, expires_at FROM secrets_leases
		WHERE expires_at < $1 ORDER BY expires_at, provider, lease_id LIMIT $2`
	sqlLeaseSetExpires = `UPDATE secrets_leases SET expires_at = $3 WHERE owner = $1 AND lease_id = $2`
	sqlLeaseRemove     = `DELETE FROM secrets_leases WHERE owner = $1 AND lease_id = ANY($2::text[])`
)

// PostgresLeaseStore is a LeaseStore in the table secrets_leases of
// PostgreSQL, which outlives the process: a platform process that starts
// again, or another one, revokes what a dead one granted.
type PostgresLeaseStore struct {
	pool *pgxpool.Pool
}

var _ LeaseStore = (*PostgresLeaseStore)(nil)

// NewPostgresLeaseStore returns a store over pool, whose connections'
// search path holds secrets_leases. Call Migrate once before use.
func NewPostgresLeaseStore(pool *pgxpool.Pool) (*PostgresLeaseStore, error) {
	if pool == nil {
		return nil, errors.New("secrets: NewPostgresLeaseStore needs a pool")
	}
	return &PostgresLeaseStore{pool: pool}, nil
}

// Migrate applies the package's migrations the database does not have
// yet. It is safe to run from several processes at once.
func (s *PostgresLeaseStore) Migrate(ctx context.Context) error { return migrate(ctx, s.pool) }

// Add implements LeaseStore.
func (s *PostgresLeaseStore) Add(ctx context.Context, owner string, leases []Lease) error {
	leases, err := validLeases(owner, leases)
	if err != nil || len(leases) == 0 {
		return err
	}
	providers, ids, expires := make([]string, len(leases)), make([]string, len(leases)), make([]time.Time, len(leases))
	for i, l := range leases {
		providers[i], ids[i], expires[i] = l.Provider, l.ID, l.Expires
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, sqlLeaseAdd, owner, providers, ids, expires)
		if err != nil {
			return err
		}
		written := make(map[[2]string]bool, len(leases))
		for rows.Next() {
			var k [2]string
			if err := rows.Scan(&k[0], &k[1]); err != nil {
				rows.Close()
				return err
			}
			written[k] = true
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for _, l := range leases {
			if written[[2]string{l.Provider, l.ID}] {
				continue
			}
			var holder string
			if err := tx.QueryRow(ctx, sqlLeaseHolder, l.Provider, l.ID).Scan(&holder); err != nil {
				return err
			}
			return leaseConflict(l, holder)
		}
		return nil
	})
	return leaseDBError(err)
}

// Owned implements LeaseStore.
func (s *PostgresLeaseStore) Owned(ctx context.Context, owner string) ([]Lease, error) {
	rows, err := s.pool.Query(ctx, sqlLeaseOwned, owner)
	if err != nil {
		return nil, leaseDBError(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Lease, error) {
		var l Lease
		err := r.Scan(&l.Provider, &l.ID, &l.Expires)
		l.Expires = l.Expires.UTC()
		return l, err
	})
	if out == nil {
		out = []Lease{}
	}
	return out, leaseDBError(err)
}

// Due implements LeaseStore.
func (s *PostgresLeaseStore) Due(ctx context.Context, before time.Time, limit int) ([]OwnedLease, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("%w: Due needs a positive limit, not %d", ErrInvalid, limit)
	}
	rows, err := s.pool.Query(ctx, sqlLeaseDue, before, limit)
	if err != nil {
		return nil, leaseDBError(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (OwnedLease, error) {
		var ol OwnedLease
		err := r.Scan(&ol.Owner, &ol.Lease.Provider, &ol.Lease.ID, &ol.Lease.Expires)
		ol.Lease.Expires = ol.Lease.Expires.UTC()
		return ol, err
	})
	if out == nil {
		out = []OwnedLease{}
	}
	return out, leaseDBError(err)
}

// SetExpires implements LeaseStore.
func (s *PostgresLeaseStore) SetExpires(ctx context.Context, owner, id string, expires time.Time) error {
	tag, err := s.pool.Exec(ctx, sqlLeaseSetExpires, owner, id, leaseTime(expires))
	if err != nil {
		return leaseDBError(err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("secrets: %s holds no lease %q: %w", owner, id, ErrNotFound)
	}
	return nil
}

// Remove implements LeaseStore.
func (s *PostgresLeaseStore) Remove(ctx context.Context, owner string, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := s.pool.Exec(ctx, sqlLeaseRemove, owner, ids)
	return leaseDBError(err)
}

// leaseDBError gives a database error of the lease store its context;
// errors of this package pass as they are.
func leaseDBError(err error) error {
	if err == nil || errors.Is(err, ErrInvalid) || errors.Is(err, ErrNotFound) || errors.Is(err, cikit.ErrConflict) {
		return err
	}
	return fmt.Errorf("secrets: lease store: postgres: %w", err)
}
