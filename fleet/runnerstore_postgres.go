package fleet

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/internal/pgmigrate"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Migrations returns the package's schema migrations: numbered SQL files
// (001_name.sql …) to apply in order. PostgresRunnerStore.Migrate
// applies them.
func Migrations() fs.FS {
	sub, _ := fs.Sub(migrations, "migrations")
	return sub
}

// PostgresRunnerStore is a RunnerStore in the table runners of
// PostgreSQL, which every Server of a platform shares.
type PostgresRunnerStore struct {
	pool *pgxpool.Pool
}

var _ RunnerStore = (*PostgresRunnerStore)(nil)

// NewPostgresRunnerStore returns a store over pool, whose connections'
// search path holds runners. Call Migrate once before use.
func NewPostgresRunnerStore(pool *pgxpool.Pool) (*PostgresRunnerStore, error) {
	if pool == nil {
		return nil, errors.New("fleet: NewPostgresRunnerStore needs a pool")
	}
	return &PostgresRunnerStore{pool: pool}, nil
}

// Migrate applies the migrations the database does not have yet. It is
// safe to run from several processes at once.
func (s *PostgresRunnerStore) Migrate(ctx context.Context) error {
	return pgmigrate.Apply(ctx, s.pool, "fleet", Migrations())
}

func (s *PostgresRunnerStore) RunnerCreate(ctx context.Context, r *RunnerRecord) error {
	labels := r.Labels
	if labels == nil {
		labels = []string{}
	}
	_, err := s.pool.Exec(ctx, sqlRunnerCreate, r.ID, r.Name, labels, r.Version, r.RegisteredAt, r.LastSeen, nullTime(r.RevokedAt), r.RevokedBy, r.Reason)
	if err != nil {
		return fmt.Errorf("fleet: recording runner %s: %w", r.ID, interpretError(err))
	}
	return nil
}

func (s *PostgresRunnerStore) RunnerGet(ctx context.Context, id string) (*RunnerRecord, error) {
	r, err := scanRunner(s.pool.QueryRow(ctx, sqlRunnerGet, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, unknownRunner(id)
	}
	return r, interpretError(err)
}

func (s *PostgresRunnerStore) RunnerSeen(ctx context.Context, id string, at time.Time) error {
	tag, err := s.pool.Exec(ctx, sqlRunnerSeen, id, at)
	if err != nil {
		return interpretError(err)
	}
	if tag.RowsAffected() == 0 {
		return unknownRunner(id)
	}
	return nil
}

func (s *PostgresRunnerStore) RunnerRevoke(ctx context.Context, p *RunnerRevokeParams) (*RunnerRecord, error) {
	r, err := scanRunner(s.pool.QueryRow(ctx, sqlRunnerRevoke, p.ID, p.At, p.By, p.Reason))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, unknownRunner(p.ID)
	}
	return r, interpretError(err)
}

func (s *PostgresRunnerStore) RunnerList(ctx context.Context, p *RunnerListParams) ([]*RunnerRecord, error) {
	after := ""
	if p != nil {
		after = p.After
	}
	rows, err := s.pool.Query(ctx, sqlRunnerList, after, p.limit())
	if err != nil {
		return nil, interpretError(err)
	}
	defer rows.Close()
	var out []*RunnerRecord
	for rows.Next() {
		r, err := scanRunner(rows)
		if err != nil {
			return nil, interpretError(err)
		}
		out = append(out, r)
	}
	return out, interpretError(rows.Err())
}

func scanRunner(row pgx.Row) (*RunnerRecord, error) {
	var r RunnerRecord
	var revoked *time.Time
	if err := row.Scan(&r.ID, &r.Name, &r.Labels, &r.Version, &r.RegisteredAt, &r.LastSeen, &revoked, &r.RevokedBy, &r.Reason); err != nil {
		return nil, err
	}
	r.RegisteredAt, r.LastSeen = r.RegisteredAt.UTC(), r.LastSeen.UTC()
	if revoked != nil {
		r.RevokedAt = revoked.UTC()
	}
	return &r, nil
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// interpretError wraps the errors of PostgreSQL for the package's
// callers: a unique violation (a runner ID recorded twice) matches
// cikit.ErrConflict.
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok && pe.Code == "23505" {
		return fmt.Errorf("%w: postgres: %w", cikit.ErrConflict, err)
	}
	return fmt.Errorf("fleet: postgres: %w", err)
}
