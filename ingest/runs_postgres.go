package ingest

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/internal/pgmigrate"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Migrations returns the package's schema migrations, numbered SQL files
// applied in order by PostgresRunStore.Migrate.
func Migrations() fs.FS {
	sub, _ := fs.Sub(migrations, "migrations")
	return sub
}

// PostgresRunStore is a RunStore in PostgreSQL: the delivery's record is
// written in the transaction that creates its runs in a dag.PostgresStore
// (RunCreateTx), so either both exist or neither does.
type PostgresRunStore struct {
	pool *pgxpool.Pool
	dag  *dag.PostgresStore
	now  func() time.Time
}

var _ RunStore = (*PostgresRunStore)(nil)

// NewPostgresRunStore returns a store over pool creating runs in runs,
// whose tables must be in the same database. now is its clock (time.Now
// when nil).
func NewPostgresRunStore(pool *pgxpool.Pool, runs *dag.PostgresStore, now func() time.Time) (*PostgresRunStore, error) {
	if pool == nil || runs == nil {
		return nil, errors.New("ingest: NewPostgresRunStore needs a pool and a dag store")
	}
	if now == nil {
		now = time.Now
	}
	return &PostgresRunStore{pool: pool, dag: runs, now: now}, nil
}

// Migrate applies the migrations the database does not have yet.
func (s *PostgresRunStore) Migrate(ctx context.Context) error {
	return pgmigrate.Apply(ctx, s.pool, "ingest", Migrations())
}

const deliveryColumns = `provider, hook_id, delivery_id, coalesce(semantic_key, ''), run_ids, dropped, created_at`

func scanDelivery(row pgx.Row) (*Delivery, error) {
	d := &Delivery{}
	if err := row.Scan(&d.Provider, &d.HookID, &d.DeliveryID, &d.SemanticKey, &d.RunIDs, &d.Dropped, &d.CreatedAt); err != nil {
		return nil, err
	}
	d.CreatedAt = d.CreatedAt.UTC()
	return d, nil
}

// seenQuery finds a delivery by its key or its semantic key.
const seenQuery = `SELECT ` + deliveryColumns + ` FROM webhook_deliveries
	WHERE (provider, hook_id, delivery_id) = ($1, $2, $3) OR semantic_key = $4 LIMIT 1`

func (s *PostgresRunStore) Seen(ctx context.Context, ev *Event) (*Delivery, error) {
	d, err := scanDelivery(s.pool.QueryRow(ctx, seenQuery, ev.Provider, ev.HookID, ev.DeliveryID, nullString(SemanticKey(ev))))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return d, err
}

func (s *PostgresRunStore) CreateRuns(ctx context.Context, p *CreateRunsParams) (d *Delivery, created bool, err error) {
	ev := p.Event
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		d, created = nil, false
		now := s.now()
		sem := SemanticKey(ev)
		// The record first: a concurrent delivery with either key waits
		// here for this transaction, then finds the record.
		tag, err := tx.Exec(ctx, `INSERT INTO webhook_deliveries (provider, hook_id, delivery_id, semantic_key, dropped, created_at)
			VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`,
			ev.Provider, ev.HookID, ev.DeliveryID, nullString(sem), p.Reason, now)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			d, err = scanDelivery(tx.QueryRow(ctx, seenQuery, ev.Provider, ev.HookID, ev.DeliveryID, nullString(sem)))
			return err
		}
		d = &Delivery{Provider: ev.Provider, HookID: ev.HookID, DeliveryID: ev.DeliveryID, SemanticKey: sem, Dropped: p.Reason, CreatedAt: now.UTC()}
		created = true
		order := OrderKey(ev)
		if !ev.EventTime.IsZero() {
			var newest time.Time
			err := tx.QueryRow(ctx, `SELECT event_time FROM ref_states WHERE ref = $1 FOR UPDATE`, order).Scan(&newest)
			switch {
			case err == nil && ev.EventTime.Before(newest):
				d.Dropped = outOfOrder(ev, newest)
				_, err = tx.Exec(ctx, `UPDATE webhook_deliveries SET dropped = $4 WHERE (provider, hook_id, delivery_id) = ($1, $2, $3)`,
					ev.Provider, ev.HookID, ev.DeliveryID, d.Dropped)
				return err
			case err != nil && !errors.Is(err, pgx.ErrNoRows):
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO ref_states (ref, event_time, sha) VALUES ($1, $2, $3)
				ON CONFLICT (ref) DO UPDATE SET event_time = excluded.event_time, sha = excluded.sha`, order, ev.EventTime, ev.SHA); err != nil {
				return err
			}
		}
		if ev.Kind == KindPullRequest {
			if _, err := tx.Exec(ctx, `INSERT INTO pull_request_heads (repo, branch, sha, number, seen_at) VALUES ($1, $2, $3, $4, $5)
				ON CONFLICT (repo, branch, sha) DO UPDATE SET number = excluded.number, seen_at = excluded.seen_at`,
				ev.Org+"/"+ev.Repo, ev.RefName, ev.SHA, ev.PRNumber, now); err != nil {
				return err
			}
		}
		for i, rp := range p.Runs {
			c := *rp
			c.IdempotencyKey = runKey(ev, i)
			run, err := s.dag.RunCreateTx(ctx, tx, &c)
			if err != nil {
				return fmt.Errorf("ingest: delivery %s: run %d: %w", ev.DeliveryID, i, err)
			}
			d.RunIDs = append(d.RunIDs, run.ID)
		}
		if len(d.RunIDs) == 0 {
			return nil
		}
		d.Dropped = ""
		_, err = tx.Exec(ctx, `UPDATE webhook_deliveries SET run_ids = $4, dropped = '' WHERE (provider, hook_id, delivery_id) = ($1, $2, $3)`,
			ev.Provider, ev.HookID, ev.DeliveryID, d.RunIDs)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return d, created, nil
}

func (s *PostgresRunStore) PullRequestHead(ctx context.Context, org, repo, branch, sha string) (int, bool, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT number FROM pull_request_heads WHERE (repo, branch, sha) = ($1, $2, $3)`,
		org+"/"+repo, branch, sha).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return n, err == nil, err
}

func (s *PostgresRunStore) PruneDeliveries(ctx context.Context, before time.Time) (int, error) {
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM webhook_deliveries WHERE created_at < $1`, before)
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
		_, err = tx.Exec(ctx, `DELETE FROM pull_request_heads WHERE seen_at < $1`, before)
		return err
	})
	return int(n), err
}

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
