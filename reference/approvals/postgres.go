package approvals

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/internal/pgmigrate"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Migrations returns the package's schema migrations, numbered SQL files
// applied in order by PostgresStore.Migrate.
func Migrations() fs.FS {
	sub, _ := fs.Sub(migrations, "migrations")
	return sub
}

// PostgresStore is a Store in PostgreSQL's job_approvals table.
type PostgresStore struct {
	pool *pgxpool.Pool
}

var _ Store = (*PostgresStore)(nil)

// NewPostgresStore returns a store over pool.
func NewPostgresStore(pool *pgxpool.Pool) (*PostgresStore, error) {
	if pool == nil {
		return nil, errors.New("approvals: NewPostgresStore needs a pool")
	}
	return &PostgresStore{pool: pool}, nil
}

// Migrate applies the migrations the database does not have yet.
func (s *PostgresStore) Migrate(ctx context.Context) error {
	return pgmigrate.Apply(ctx, s.pool, "approvals", Migrations())
}

const (
	insertApproval = `INSERT INTO job_approvals (run_id, job_id, attempt, login, decision, comment, decided_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)`
	listApprovals = `SELECT run_id, job_id, attempt, login, decision, comment, decided_at FROM job_approvals
WHERE run_id = $1 ORDER BY decided_at, job_id, attempt`
)

// Record implements Store.
func (s *PostgresStore) Record(ctx context.Context, a Approval) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return s.RecordTx(ctx, tx, a) })
}

// RecordTx is Record in the caller's transaction.
func (s *PostgresStore) RecordTx(ctx context.Context, tx pgx.Tx, a Approval) error {
	if err := a.Validate(); err != nil {
		return err
	}
	a = a.normalized()
	_, err := tx.Exec(ctx, insertApproval, a.RunID, a.JobID, a.Attempt, a.Login, string(a.Decision), a.Comment, a.Time)
	if err != nil {
		return interpretError(err, a)
	}
	return nil
}

// List implements Store.
func (s *PostgresStore) List(ctx context.Context, runID string) ([]Approval, error) {
	rows, err := s.pool.Query(ctx, listApprovals, runID)
	if err != nil {
		return nil, interpretError(err, Approval{RunID: runID})
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Approval, error) {
		var a Approval
		var d string
		err := row.Scan(&a.RunID, &a.JobID, &a.Attempt, &a.Login, &d, &a.Comment, &a.Time)
		a.Decision, a.Time = Decision(d), a.Time.UTC()
		return a, err
	})
	if err != nil {
		return nil, interpretError(err, Approval{RunID: runID})
	}
	if out == nil {
		out = []Approval{}
	}
	return out, nil
}

// interpretError turns PostgreSQL's errors into the package's.
func interpretError(err error, a Approval) error {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == "23505" {
		return fmt.Errorf("approvals: attempt %d of job %q of run %q is decided already: %w", a.Attempt, a.JobID, a.RunID, cikit.ErrConflict)
	}
	return fmt.Errorf("approvals: %w", err)
}
