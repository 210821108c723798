package lease

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/internal/pgmigrate"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Migrations returns the package's schema migrations: numbered SQL files
// (001_name.sql …) to apply in order. PostgresStore.Migrate applies them.
func Migrations() fs.FS {
	sub, _ := fs.Sub(migrations, "migrations")
	return sub
}

// PostgresStore is a Store in the table job_leases of PostgreSQL, usually
// the database of the dag.PostgresStore it leases jobs of.
type PostgresStore struct {
	pool *pgxpool.Pool
}

var _ Store = (*PostgresStore)(nil)

// NewPostgresStore returns a store over pool, whose connections' search
// path holds job_leases. Call Migrate once before use.
func NewPostgresStore(pool *pgxpool.Pool) (*PostgresStore, error) {
	if pool == nil {
		return nil, errors.New("lease: NewPostgresStore needs a pool")
	}
	return &PostgresStore{pool: pool}, nil
}

// Migrate applies the migrations the database does not have yet. It is
// safe to run from several processes at once.
func (s *PostgresStore) Migrate(ctx context.Context) error {
	return pgmigrate.Apply(ctx, s.pool, "lease", Migrations())
}

func (s *PostgresStore) LeaseInsert(ctx context.Context, l *Lease) error {
	if err := l.Attempt.validate(); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, sqlInsert, l.RunID, l.JobID, l.Attempt.Attempt, l.Token, l.Runner, l.Expires)
	if err != nil {
		return interpretError(err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("lease: %s: the job has a lease of this attempt or a later one: %w", l.Attempt, ErrNotClaimed)
	}
	return nil
}

func (s *PostgresStore) LeaseRenew(ctx context.Context, a Attempt, token string, expires time.Time) error {
	tag, err := s.pool.Exec(ctx, sqlRenew, a.RunID, a.JobID, a.Attempt, token, expires)
	if err != nil {
		return interpretError(err)
	}
	if tag.RowsAffected() == 0 {
		return &FencedError{Attempt: a, Reason: "the store holds no lease of this attempt and token"}
	}
	return nil
}

func (s *PostgresStore) LeaseGet(ctx context.Context, runID, jobID string) (*Lease, error) {
	l := &Lease{Attempt: Attempt{RunID: runID, JobID: jobID}}
	err := s.pool.QueryRow(ctx, sqlGet, runID, jobID).Scan(&l.Attempt.Attempt, &l.Token, &l.Runner, &l.Expires)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("lease: job %q of run %q has no lease: %w", jobID, runID, cikit.ErrNotFound)
		}
		return nil, interpretError(err)
	}
	l.Expires = l.Expires.UTC()
	return l, nil
}

func (s *PostgresStore) LeaseDelete(ctx context.Context, a Attempt, token string) error {
	_, err := s.pool.Exec(ctx, sqlDelete, a.RunID, a.JobID, a.Attempt, token)
	return interpretError(err)
}

func (s *PostgresStore) LeaseExpired(ctx context.Context, now time.Time, limit int) ([]*Lease, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("lease: LeaseExpired needs a positive limit, got %d", limit)
	}
	rows, err := s.pool.Query(ctx, sqlExpired, now, limit)
	if err != nil {
		return nil, interpretError(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Lease, error) {
		l := &Lease{}
		err := row.Scan(&l.RunID, &l.JobID, &l.Attempt.Attempt, &l.Token, &l.Runner, &l.Expires)
		l.Expires = l.Expires.UTC()
		return l, err
	})
	return out, interpretError(err)
}

// interpretError wraps PostgreSQL's errors with the package's name; the
// conditions callers branch on are decided by the queries themselves.
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("lease: postgres: %w", err)
}
