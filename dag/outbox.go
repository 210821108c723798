package dag

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
)

// checkOutboxLimit refuses a limit no claim can honour.
func checkOutboxLimit(limit int) error {
	if limit < 1 {
		return fmt.Errorf("dag: OutboxPublish limit must be positive, got %d", limit)
	}
	return nil
}

// OutboxPublish claims the events in one transaction: it locks their rows
// with FOR UPDATE SKIP LOCKED, so concurrent callers pass over them, calls
// publish while holding them and marks them published in the same
// transaction. A caller that dies before the commit leaves the rows
// unpublished and unlocked: they are handed out again.
func (s *PostgresStore) OutboxPublish(ctx context.Context, limit int, publish func(ctx context.Context, evs []*OutboxEvent) error) (int, error) {
	if err := checkOutboxLimit(limit); err != nil {
		return 0, err
	}
	var n int
	var publishErr error
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT id, type, run_id, pipeline, sha, job_id, attempt, state, reason, created_at
			FROM outbox WHERE published_at IS NULL ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED`, limit)
		if err != nil {
			return err
		}
		evs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*OutboxEvent, error) {
			e := &OutboxEvent{}
			err := row.Scan(&e.ID, &e.Type, &e.RunID, &e.Pipeline, &e.SHA, &e.JobID, &e.Attempt, &e.State, &e.Reason, &e.CreatedAt)
			e.CreatedAt = e.CreatedAt.UTC()
			return e, err
		})
		if err != nil || len(evs) == 0 {
			return err
		}
		if publishErr = publish(ctx, evs); publishErr != nil {
			return publishErr
		}
		ids := make([]string, len(evs))
		for i, e := range evs {
			ids[i] = e.ID
		}
		if _, err := tx.Exec(ctx, `UPDATE outbox SET published_at = $2 WHERE id = ANY($1)`, ids, s.now()); err != nil {
			return err
		}
		n = len(evs)
		return nil
	})
	if publishErr != nil {
		return 0, publishErr
	}
	if err != nil {
		return 0, interpretError(err)
	}
	return n, nil
}

// OutboxPublish claims the events under the store's lock and publishes
// them without it, so concurrent callers claim other events meanwhile.
func (s *MemoryStore) OutboxPublish(ctx context.Context, limit int, publish func(ctx context.Context, evs []*OutboxEvent) error) (int, error) {
	if err := checkOutboxLimit(limit); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	evs, ids := s.outboxClaim(limit)
	if len(evs) == 0 {
		return 0, nil
	}
	published := false
	// The claim is released however publish ends, a panic included.
	defer func() { s.outboxRelease(ids, published) }()
	if err := publish(ctx, evs); err != nil {
		return 0, err
	}
	published = true
	return len(evs), nil
}

// outboxClaim claims up to limit unclaimed events, oldest first, and
// returns copies of them and their IDs.
func (s *MemoryStore) outboxClaim(limit int) ([]*OutboxEvent, map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.claimed == nil {
		s.claimed = make(map[string]bool)
	}
	var evs []*OutboxEvent
	ids := make(map[string]bool)
	for _, e := range s.outbox {
		if len(evs) == limit {
			break
		}
		if s.claimed[e.ID] {
			continue
		}
		s.claimed[e.ID], ids[e.ID] = true, true
		c := *e
		evs = append(evs, &c)
	}
	return evs, ids
}

// outboxRelease ends the claim of the events ids, removing them from the
// outbox when they were published.
func (s *MemoryStore) outboxRelease(ids map[string]bool, published bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range ids {
		delete(s.claimed, id)
	}
	if published {
		s.outbox = slices.DeleteFunc(s.outbox, func(e *OutboxEvent) bool { return ids[e.ID] })
	}
}
