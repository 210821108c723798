package logs

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

// Migrations returns the package's schema migrations, numbered SQL files
// applied in order by PostgresSegmentStore.Migrate.
func Migrations() fs.FS {
	sub, _ := fs.Sub(migrations, "migrations")
	return sub
}

// PostgresSegmentStore is a SegmentStore in PostgreSQL's log_segments
// table.
type PostgresSegmentStore struct {
	pool *pgxpool.Pool
}

var _ SegmentStore = (*PostgresSegmentStore)(nil)

// NewPostgresSegmentStore returns a store over pool.
func NewPostgresSegmentStore(pool *pgxpool.Pool) (*PostgresSegmentStore, error) {
	if pool == nil {
		return nil, errors.New("logs: NewPostgresSegmentStore needs a pool")
	}
	return &PostgresSegmentStore{pool: pool}, nil
}

// Migrate applies the migrations the database does not have yet.
func (s *PostgresSegmentStore) Migrate(ctx context.Context) error {
	return pgmigrate.Apply(ctx, s.pool, "logs", Migrations())
}

const (
	segmentColumns = `run_id, job_id, attempt, step, start_offset, bytes, sha256, blob_key, complete, created_at`
	querySegments  = `SELECT ` + segmentColumns + ` FROM log_segments WHERE run_id = $1 AND job_id = $2 AND attempt = $3 ORDER BY step`
	lockLog        = `SELECT pg_advisory_xact_lock(hashtext('log_segments'), hashtext($1))`
	deleteSegments = `DELETE FROM log_segments WHERE run_id = $1 AND job_id = $2 AND attempt = $3`
)

// SegmentsPut implements SegmentStore.
func (s *PostgresSegmentStore) SegmentsPut(ctx context.Context, key Key, segs []Segment) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return s.SegmentsPutTx(ctx, tx, key, segs) })
}

// SegmentsPutTx is SegmentsPut in the caller's transaction.
func (s *PostgresSegmentStore) SegmentsPutTx(ctx context.Context, tx pgx.Tx, key Key, segs []Segment) error {
	if err := checkSegments(key, segs); err != nil {
		return fmt.Errorf("logs: %w", err)
	}
	// Two puts of one log serialize here, so the second sees the first's
	// rows and compares instead of failing on the primary key.
	if _, err := tx.Exec(ctx, lockLog, key.String()); err != nil {
		return interpretError(err)
	}
	old, err := listSegments(ctx, tx, key)
	if err != nil {
		return err
	}
	if len(old) > 0 {
		if sameSegments(old, normalized(segs)) {
			return nil
		}
		return fmt.Errorf("logs: log %s has other segments: %w", key, cikit.ErrConflict)
	}
	rows := make([][]any, len(segs))
	for i, g := range segs {
		rows[i] = []any{key.RunID, key.JobID, key.Attempt, g.Step, g.Offset, g.Bytes, g.SHA256, g.BlobKey, g.Complete, g.CreatedAt}
	}
	_, err = tx.CopyFrom(ctx, pgx.Identifier{"log_segments"},
		[]string{"run_id", "job_id", "attempt", "step", "start_offset", "bytes", "sha256", "blob_key", "complete", "created_at"},
		pgx.CopyFromRows(rows))
	return interpretError(err)
}

// normalized is segs as they come back from the table.
func normalized(segs []Segment) []Segment {
	out := make([]Segment, len(segs))
	for i, g := range segs {
		g.CreatedAt = g.CreatedAt.UTC().Truncate(time.Microsecond)
		out[i] = g
	}
	return out
}

// SegmentsList implements SegmentStore.
func (s *PostgresSegmentStore) SegmentsList(ctx context.Context, key Key) ([]Segment, error) {
	return listSegments(ctx, s.pool, key)
}

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func listSegments(ctx context.Context, q querier, key Key) ([]Segment, error) {
	rows, err := q.Query(ctx, querySegments, key.RunID, key.JobID, key.Attempt)
	if err != nil {
		return nil, interpretError(err)
	}
	segs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Segment, error) {
		var g Segment
		err := row.Scan(&g.Key.RunID, &g.Key.JobID, &g.Key.Attempt, &g.Step, &g.Offset, &g.Bytes, &g.SHA256, &g.BlobKey, &g.Complete, &g.CreatedAt)
		g.CreatedAt = g.CreatedAt.UTC()
		return g, err
	})
	return segs, interpretError(err)
}

// SegmentsDelete implements SegmentStore.
func (s *PostgresSegmentStore) SegmentsDelete(ctx context.Context, key Key) error {
	_, err := s.pool.Exec(ctx, deleteSegments, key.RunID, key.JobID, key.Attempt)
	return interpretError(err)
}

// interpretError turns PostgreSQL's errors into the package's.
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == "23505" { // unique_violation
		return fmt.Errorf("logs: %w: %s", cikit.ErrConflict, pgErr.Message)
	}
	return fmt.Errorf("logs: %w", err)
}
