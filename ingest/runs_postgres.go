package ingest

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/internal/groupcommit"
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
	pool  *pgxpool.Pool
	dag   *dag.PostgresStore
	now   func() time.Time
	batch *groupcommit.Batcher[*CreateRunsParams, createResult]
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
	s := &PostgresRunStore{pool: pool, dag: runs, now: now}
	// One transaction at a time: two measured no faster on two cores, and
	// concurrent batches may wait on each other's rows.
	s.batch = groupcommit.New(MaxBatch, 1, func(ctx context.Context, ps []*CreateRunsParams) []createResult {
		return batchOrEach(ctx, ps, s.createBatch, s.createOne)
	})
	return s, nil
}

// Migrate applies the migrations the database does not have yet.
func (s *PostgresRunStore) Migrate(ctx context.Context) error {
	return pgmigrate.Apply(ctx, s.pool, "ingest", Migrations())
}

const deliveryColumns = `provider, hook_id, delivery_id, coalesce(semantic_key, ''), run_ids, dropped, coalesce(raw_digest, ''), created_at`

func scanDelivery(row pgx.Row) (*Delivery, error) {
	d := &Delivery{}
	if err := row.Scan(&d.Provider, &d.HookID, &d.DeliveryID, &d.SemanticKey, &d.RunIDs, &d.Dropped, &d.RawDigest, &d.CreatedAt); err != nil {
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

// CreateRuns joins the calls made at the same time into one transaction
// (group commit): the first caller writes its own and every call that
// arrives meanwhile, up to MaxBatch, and the others wait for it. One
// commit then serves many deliveries, which is what lets a consumer with
// many partitions in flight create runs faster than one commit at a time.
// When a batch fails, its calls are written again one by one, so that one
// bad delivery fails alone.
func (s *PostgresRunStore) CreateRuns(ctx context.Context, p *CreateRunsParams) (*Delivery, bool, error) {
	r, err := s.batch.Do(ctx, p)
	if err != nil {
		return nil, false, err
	}
	return r.d, r.created.created, r.err
}

// createBatch is CreateRuns of several deliveries in one transaction.
func (s *PostgresRunStore) createBatch(ctx context.Context, ps []*CreateRunsParams) ([]created, error) {
	var res []created
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		res, err = s.createMany(ctx, tx, ps)
		return err
	})
	return res, err
}

// createOne is CreateRuns alone in its transaction.
func (s *PostgresRunStore) createOne(ctx context.Context, p *CreateRunsParams) (*Delivery, bool, error) {
	res, err := s.createBatch(ctx, []*CreateRunsParams{p})
	if err != nil {
		return nil, false, err
	}
	return res[0].d, res[0].created, nil
}

// created is the answer to one CreateRuns or Ingest.
type created struct {
	d       *Delivery
	created bool
}

// MaxBatch is the most deliveries PostgresRunStore writes in one
// transaction.
const MaxBatch = 128

// createResult is the answer to one CreateRuns of a group commit.
type createResult struct {
	created
	err error
}

// batchOrEach writes ps with many, in one transaction; when that fails,
// each alone with one, so that a bad delivery fails alone. A lone
// delivery is written with one.
func batchOrEach(ctx context.Context, ps []*CreateRunsParams,
	many func(context.Context, []*CreateRunsParams) ([]created, error),
	one func(context.Context, *CreateRunsParams) (*Delivery, bool, error)) []createResult {
	out := make([]createResult, len(ps))
	if len(ps) > 1 {
		if res, err := many(ctx, ps); err == nil {
			for i := range out {
				out[i].created = res[i]
			}
			return out
		}
	}
	for i, p := range ps {
		out[i].d, out[i].created.created, out[i].err = one(ctx, p)
	}
	return out
}

// createMany records deliveries and creates their runs in tx, in a few
// statements for all of them.
func (s *PostgresRunStore) createMany(ctx context.Context, tx pgx.Tx, ps []*CreateRunsParams) ([]created, error) {
	now := s.now()
	out := make([]created, len(ps))
	var provs, hooks, ids, reasons []string
	var sems, digests []*string
	for _, p := range ps {
		ev := p.Event
		provs, hooks, ids = append(provs, string(ev.Provider)), append(hooks, ev.HookID), append(ids, ev.DeliveryID)
		sems, reasons = append(sems, nullString(SemanticKey(ev))), append(reasons, p.Reason)
		digests = append(digests, nullString(ev.RawDigest()))
	}
	// The records first: a concurrent delivery with either key waits
	// here for this transaction, then finds the record.
	rows, err := tx.Query(ctx, `INSERT INTO webhook_deliveries (provider, hook_id, delivery_id, semantic_key, dropped, raw_digest, created_at)
		SELECT p, h, d, sk, r, rd, $7 FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[]) AS t(p, h, d, sk, r, rd)
		ON CONFLICT DO NOTHING RETURNING provider, hook_id, delivery_id`, provs, hooks, ids, sems, reasons, digests, now)
	if err != nil {
		return nil, err
	}
	inserted := map[[3]string]bool{}
	for rows.Next() {
		var k [3]string
		if err := rows.Scan(&k[0], &k[1], &k[2]); err != nil {
			rows.Close()
			return nil, err
		}
		inserted[k] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// Ordering: the newest event time of every sequence the batch
	// touches, locked in one order by every writer.
	var fresh []int
	var orderKeys []string
	for i, p := range ps {
		k := deliveryKey(p.Event)
		if !inserted[k] {
			continue
		}
		delete(inserted, k) // a delivery twice in the batch: the first
		fresh = append(fresh, i)
		d := &Delivery{Provider: p.Event.Provider, HookID: p.Event.HookID, DeliveryID: p.Event.DeliveryID,
			SemanticKey: SemanticKey(p.Event), Dropped: p.Reason, RawDigest: p.Event.RawDigest(), CreatedAt: now.UTC()}
		out[i] = created{d: d, created: true}
		if !p.Event.EventTime.IsZero() {
			orderKeys = append(orderKeys, OrderKey(p.Event))
		}
	}
	newest := map[string]time.Time{}
	if len(orderKeys) > 0 {
		slices.Sort(orderKeys)
		orderKeys = slices.Compact(orderKeys)
		rows, err := tx.Query(ctx, `SELECT ref, event_time FROM ref_states WHERE ref = ANY($1) ORDER BY ref FOR UPDATE`, orderKeys)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var ref string
			var t time.Time
			if err := rows.Scan(&ref, &t); err != nil {
				rows.Close()
				return nil, err
			}
			newest[ref] = t
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	changedRefs := map[string]string{} // ref -> sha of its newest event
	var runs []*dag.RunCreateParams
	var runOf []int // index in ps of each of runs
	b := &pgx.Batch{}
	for _, i := range fresh {
		ev, d := ps[i].Event, out[i].d
		if !ev.EventTime.IsZero() {
			ref := OrderKey(ev)
			if t, ok := newest[ref]; ok && ev.EventTime.Before(t) {
				d.Dropped = outOfOrder(ev, t)
				continue
			}
			newest[ref], changedRefs[ref] = ev.EventTime, ev.SHA
		}
		if ev.Kind == KindPullRequest {
			b.Queue(`INSERT INTO pull_request_heads (repo, branch, sha, number, seen_at) VALUES ($1, $2, $3, $4, $5)
				ON CONFLICT (repo, branch, sha) DO UPDATE SET number = excluded.number, seen_at = excluded.seen_at`,
				ev.Org+"/"+ev.Repo, ev.RefName, ev.SHA, ev.PRNumber, now)
		}
		for k, rp := range ps[i].Runs {
			c := *rp
			c.IdempotencyKey = runKey(ev, k)
			runs, runOf = append(runs, &c), append(runOf, i)
		}
	}
	if len(changedRefs) > 0 {
		refs := slices.Sorted(maps.Keys(changedRefs))
		times, shas := make([]time.Time, len(refs)), make([]string, len(refs))
		for k, ref := range refs {
			times[k], shas[k] = newest[ref], changedRefs[ref]
		}
		b.Queue(`INSERT INTO ref_states (ref, event_time, sha) SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::text[])
			ON CONFLICT (ref) DO UPDATE SET event_time = excluded.event_time, sha = excluded.sha`, refs, times, shas)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	if len(runs) > 0 {
		made, err := s.dag.RunCreateManyTx(ctx, tx, runs)
		if err != nil {
			return nil, fmt.Errorf("ingest: create runs: %w", err)
		}
		for k, r := range made {
			d := out[runOf[k]].d
			d.RunIDs, d.Dropped = append(d.RunIDs, r.ID), ""
		}
	}
	b = &pgx.Batch{}
	for _, i := range fresh {
		ev, d := ps[i].Event, out[i].d
		if len(d.RunIDs) > 0 || d.Dropped != ps[i].Reason {
			b.Queue(`UPDATE webhook_deliveries SET run_ids = coalesce($4::text[], '{}'), dropped = $5 WHERE (provider, hook_id, delivery_id) = ($1, $2, $3)`,
				ev.Provider, ev.HookID, ev.DeliveryID, d.RunIDs, d.Dropped)
		}
	}
	// What the others found: records of earlier deliveries, or of this
	// batch's (written above, so visible here).
	var lookups []int
	for i, p := range ps {
		if out[i].d == nil {
			lookups = append(lookups, i)
			b.Queue(seenQuery, p.Event.Provider, p.Event.HookID, p.Event.DeliveryID, nullString(SemanticKey(p.Event)))
		}
	}
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	for range b.Len() - len(lookups) {
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
	}
	for _, i := range lookups {
		d, err := scanDelivery(br.QueryRow())
		if err != nil {
			return nil, fmt.Errorf("ingest: delivery %s: its record: %w", ps[i].Event.DeliveryID, err)
		}
		out[i] = created{d: d}
	}
	return out, br.Close()
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
