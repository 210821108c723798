package dag

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cikit/cikit"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Migrations returns the package's schema migrations: numbered SQL files
// (001_name.sql …) to apply in order. PostgresStore.Migrate applies them.
func Migrations() fs.FS {
	sub, _ := fs.Sub(migrations, "migrations")
	return sub
}

// PostgresConfig configures a PostgresStore.
type PostgresConfig struct {
	// Pool is the database. Required. Tables are unqualified: they live
	// in the connections' search_path.
	Pool *pgxpool.Pool
	// Now returns the current time. Default: time.Now.
	Now func() time.Time
	// NewID returns a new, unique run ID. Default: a UUIDv7 string.
	NewID func() string
}

// PostgresStore is a Store in PostgreSQL, the system of record of a
// production platform. Each transition locks its run's row, applies Next
// to the states it reads and writes the changes in one transaction, so
// any number of schedulers may process events of the same run. A write
// that changes several runs (a run superseding others, a job cancelling
// the jobs of its concurrency group) locks their rows in the order of
// their IDs, after the lock of the group, so writes cannot deadlock.
type PostgresStore struct {
	pool  *pgxpool.Pool
	now   func() time.Time
	newID func() string
}

var _ Store = (*PostgresStore)(nil)

// NewPostgresStore returns a store over cfg.Pool. Call Migrate once before
// use (the reference platform's `cikit migrate` does).
func NewPostgresStore(cfg PostgresConfig) (*PostgresStore, error) {
	if cfg.Pool == nil {
		return nil, errors.New("dag: PostgresConfig.Pool is required")
	}
	s := &PostgresStore{pool: cfg.Pool, now: cfg.Now, newID: cfg.NewID}
	if s.now == nil {
		s.now = time.Now
	}
	if s.newID == nil {
		s.newID = func() string { return uuid.Must(uuid.NewV7()).String() }
	}
	return s, nil
}

// Migrate applies the migrations the database does not have yet, each in
// a transaction, recording them in cikit_migrations. It is safe to run
// from several processes at once: an advisory lock serialises them.
func (s *PostgresStore) Migrate(ctx context.Context) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('cikit_migrations'))`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS cikit_migrations (
			component text NOT NULL, version int NOT NULL, applied_at timestamptz NOT NULL DEFAULT now(),
			PRIMARY KEY (component, version))`); err != nil {
			return err
		}
		files, err := fs.Glob(Migrations(), "*.sql")
		if err != nil {
			return err
		}
		slices.Sort(files)
		for _, f := range files {
			version, err := strconv.Atoi(strings.SplitN(f, "_", 2)[0])
			if err != nil {
				return fmt.Errorf("dag: migration %s is not numbered", f)
			}
			var done bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM cikit_migrations WHERE component = 'dag' AND version = $1)`, version).Scan(&done); err != nil {
				return err
			}
			if done {
				continue
			}
			sql, err := fs.ReadFile(Migrations(), f)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, string(sql)); err != nil {
				return fmt.Errorf("dag: migration %s: %w", f, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO cikit_migrations (component, version) VALUES ('dag', $1)`, version); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *PostgresStore) RunCreate(ctx context.Context, p *RunCreateParams) (run *Run, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		run, err = s.RunCreateTx(ctx, tx, p)
		return err
	})
	return run, err
}

// RunCreateTx is RunCreate inside the caller's transaction, so that a run
// commits together with the caller's own writes (a webhook delivery's
// record, for example) or not at all.
func (s *PostgresStore) RunCreateTx(ctx context.Context, tx pgx.Tx, p *RunCreateParams) (*Run, error) {
	g, err := FromSpecs(p.Jobs)
	if err != nil {
		return nil, err
	}
	if err := p.Supersede.check(); err != nil {
		return nil, err
	}
	now := s.now()
	states := Initial(g)
	run := &Run{ID: s.newID(), CreatedAt: now, State: RunStatus(g, states), IdempotencyKey: p.IdempotencyKey,
		Pipeline: p.Pipeline, Branch: p.Branch}
	if run.State.Terminal() {
		run.FinishedAt = now
	}
	if p.IdempotencyKey != "" {
		// The key first: a concurrent creation with the same key waits
		// here until the first commits, then finds its run.
		tag, err := tx.Exec(ctx, `INSERT INTO idempotency_keys (key, run_id, created_at) VALUES ($1, $2, $3) ON CONFLICT (key) DO NOTHING`,
			p.IdempotencyKey, run.ID, now)
		if err != nil {
			return nil, interpretError(err)
		}
		if tag.RowsAffected() == 0 {
			var existing string
			if err := tx.QueryRow(ctx, `SELECT run_id FROM idempotency_keys WHERE key = $1`, p.IdempotencyKey).Scan(&existing); err != nil {
				return nil, interpretError(err)
			}
			return s.runTx(ctx, tx, existing)
		}
	}
	if _, err := tx.Exec(ctx, `INSERT INTO pipeline_runs (id, state, created_at, finished_at, idempotency_key, pipeline, branch)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		run.ID, run.State, now, nullTime(run.FinishedAt), nullString(p.IdempotencyKey), p.Pipeline, p.Branch); err != nil {
		return nil, interpretError(err)
	}
	rows := make([][]any, len(p.Jobs))
	var deps [][]any
	for i, spec := range p.Jobs {
		data, err := json.Marshal(spec)
		if err != nil {
			return nil, fmt.Errorf("dag: job %q: %w", spec.ID, err)
		}
		var ready, finished time.Time
		reason := ""
		switch states[i] {
		case cikit.JobReady:
			ready = now
		case cikit.JobSkipped:
			finished, reason = now, ConsequenceReason(g, states, i)
		}
		rows[i] = []any{run.ID, i, spec.ID, data, string(states[i]), reason, nullTime(ready), nullTime(finished)}
		for _, p := range g.Parents(i) {
			deps = append(deps, []any{run.ID, spec.ID, g.Node(p).ID})
		}
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"jobs"},
		[]string{"run_id", "position", "job_id", "spec", "state", "reason", "ready_at", "finished_at"}, pgx.CopyFromRows(rows)); err != nil {
		return nil, interpretError(err)
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"job_deps"}, []string{"run_id", "job_id", "needs_job_id"}, pgx.CopyFromRows(deps)); err != nil {
		return nil, interpretError(err)
	}
	var initial []*Job
	for i, spec := range p.Jobs {
		if states[i] != cikit.JobPending {
			initial = append(initial, &Job{RunID: run.ID, Spec: spec, State: states[i], Attempt: 1, Reason: rows[i][5].(string)})
		}
	}
	evs := append([]*OutboxEvent{{ID: newEventID(), Type: EventPipelineCreated, RunID: run.ID, State: string(run.State), CreatedAt: now}},
		events(newEventID, now, run, false, initial)...)
	if err := writeOutbox(ctx, tx, evs); err != nil {
		return nil, err
	}
	if err := s.supersedeTx(ctx, tx, run, p); err != nil {
		return nil, err
	}
	return run, nil
}

func (s *PostgresStore) RunGet(ctx context.Context, runID string) (*Run, error) {
	var run *Run
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		run, err = s.runTx(ctx, tx, runID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dag: run %q: %w", runID, err)
	}
	return run, nil
}

func (s *PostgresStore) JobList(ctx context.Context, runID string) ([]*Job, error) {
	var jobs []*Job
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		jobs, err = s.jobs(ctx, tx, runID, false)
		return err
	})
	return jobs, err
}

func (s *PostgresStore) RunCancel(ctx context.Context, runID string) (*TransitionResult, error) {
	return s.transition(ctx, runID, nil, Event{Kind: EventCancel}, nil)
}

func (s *PostgresStore) RunRetryFailed(ctx context.Context, runID string) (*TransitionResult, error) {
	return s.transition(ctx, runID, nil, Event{Kind: EventRetryFailed}, nil)
}

func (s *PostgresStore) JobQueue(ctx context.Context, p *JobTransitionParams) (*TransitionResult, error) {
	return s.queue(ctx, p)
}

func (s *PostgresStore) JobStart(ctx context.Context, p *JobTransitionParams) (*TransitionResult, error) {
	return s.transition(ctx, p.RunID, p, Event{Kind: EventStart}, nil)
}

func (s *PostgresStore) JobComplete(ctx context.Context, p *JobCompleteParams) (*TransitionResult, error) {
	target := &JobTransitionParams{RunID: p.RunID, JobID: p.JobID, Attempt: p.Attempt}
	return s.transition(ctx, p.RunID, target, Event{Kind: EventComplete, Outcome: p.Outcome}, p)
}

// jobs reads a run's jobs in plan order; lock takes the run's row lock
// first, serialising transitions of one run.
func (s *PostgresStore) jobs(ctx context.Context, tx pgx.Tx, runID string, lock bool) ([]*Job, error) {
	q := `SELECT 1 FROM pipeline_runs WHERE id = $1`
	if lock {
		q += ` FOR UPDATE`
	}
	var one int
	if err := tx.QueryRow(ctx, q, runID).Scan(&one); err != nil {
		return nil, fmt.Errorf("dag: run %q: %w", runID, interpretError(err))
	}
	rows, err := tx.Query(ctx, `SELECT spec, state, attempt, exit_code, reason, ready_at, queued_at, started_at, finished_at
		FROM jobs WHERE run_id = $1 ORDER BY position`, runID)
	if err != nil {
		return nil, interpretError(err)
	}
	defer rows.Close()
	var jobs []*Job
	for rows.Next() {
		j := &Job{RunID: runID}
		var spec []byte
		var ready, queued, started, finished *time.Time
		if err := rows.Scan(&spec, &j.State, &j.Attempt, &j.ExitCode, &j.Reason, &ready, &queued, &started, &finished); err != nil {
			return nil, interpretError(err)
		}
		if err := json.Unmarshal(spec, &j.Spec); err != nil {
			return nil, fmt.Errorf("dag: run %q: a stored job spec is corrupt: %w", runID, err)
		}
		j.ReadyAt, j.QueuedAt, j.StartedAt, j.FinishedAt = deref(ready), deref(queued), deref(started), deref(finished)
		jobs = append(jobs, j)
	}
	return jobs, interpretError(rows.Err())
}

// transition applies one event in a transaction that holds the run's row
// lock: the same rules as MemoryStore, on the states read under the lock.
func (s *PostgresStore) transition(ctx context.Context, runID string, target *JobTransitionParams, ev Event, complete *JobCompleteParams) (res *TransitionResult, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		res, err = s.transitionTx(ctx, tx, runID, target, ev, complete, "")
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// transitionTx is transition in tx, which it makes hold the run's row
// lock; reason, when set, is why a cancel event cancels.
func (s *PostgresStore) transitionTx(ctx context.Context, tx pgx.Tx, runID string, target *JobTransitionParams, ev Event, complete *JobCompleteParams, reason string) (*TransitionResult, error) {
	jobs, err := s.jobs(ctx, tx, runID, true)
	if err != nil {
		return nil, err
	}
	specs := make([]*cikit.JobSpec, len(jobs))
	for i, j := range jobs {
		specs[i] = j.Spec
	}
	g, err := FromSpecs(specs)
	if err != nil {
		return nil, fmt.Errorf("dag: run %q: stored jobs do not form a graph: %w", runID, err)
	}
	w, err := newWrite(g, jobs, runID, target, ev, complete)
	if err != nil {
		return nil, err
	}
	w.reason = reason
	if w.duplicate {
		// A redelivered completion: already applied, nothing to do.
		run, err := s.runTx(ctx, tx, runID)
		if err != nil {
			return nil, err
		}
		return &TransitionResult{Run: run}, nil
	}
	now := s.now()
	changed, err := w.apply(g, jobs, target, now)
	if err != nil {
		return nil, err
	}
	res := &TransitionResult{Changed: changed}
	states := make([]cikit.JobState, len(jobs))
	for i, j := range jobs {
		states[i] = j.State
	}
	for _, j := range changed {
		if _, err := tx.Exec(ctx, `UPDATE jobs SET state = $3, exit_code = $4, reason = $5,
			ready_at = $6, queued_at = $7, started_at = $8, finished_at = $9, attempt = $10
			WHERE run_id = $1 AND job_id = $2`,
			runID, j.ID(), j.State, j.ExitCode, j.Reason,
			nullTime(j.ReadyAt), nullTime(j.QueuedAt), nullTime(j.StartedAt), nullTime(j.FinishedAt), j.Attempt); err != nil {
			return nil, interpretError(err)
		}
	}
	run, err := s.runTx(ctx, tx, runID)
	if err != nil {
		return nil, err
	}
	wasTerminal := run.State.Terminal()
	if state := RunStatus(g, states); state != run.State {
		run.State = state
		switch {
		case !state.Terminal():
			run.FinishedAt = time.Time{} // running again after a retry
		case run.FinishedAt.IsZero():
			run.FinishedAt = now
		}
		if _, err := tx.Exec(ctx, `UPDATE pipeline_runs SET state = $2, finished_at = $3 WHERE id = $1`,
			runID, run.State, nullTime(run.FinishedAt)); err != nil {
			return nil, interpretError(err)
		}
	}
	res.Run = run
	if err := writeOutbox(ctx, tx, events(newEventID, now, run, wasTerminal, res.Changed)); err != nil {
		return nil, err
	}
	return res, nil
}

func (s *PostgresStore) runTx(ctx context.Context, tx pgx.Tx, runID string) (*Run, error) {
	run := &Run{ID: runID}
	var finished *time.Time
	var key *string
	if err := tx.QueryRow(ctx, `SELECT state, created_at, finished_at, idempotency_key, pipeline, branch FROM pipeline_runs WHERE id = $1`, runID).
		Scan(&run.State, &run.CreatedAt, &finished, &key, &run.Pipeline, &run.Branch); err != nil {
		return nil, interpretError(err)
	}
	run.FinishedAt = deref(finished)
	run.CreatedAt = run.CreatedAt.UTC()
	if key != nil {
		run.IdempotencyKey = *key
	}
	return run, nil
}

// interpretError turns PostgreSQL's errors into the package's sentinels.
func interpretError(err error) error {
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pgx.ErrNoRows):
		return cikit.ErrNotFound
	case errors.As(err, &pgErr) && pgErr.Code == "23505": // unique_violation
		return fmt.Errorf("%w: %s", cikit.ErrConflict, pgErr.Message)
	}
	return err
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// writeOutbox records events in the transaction of the write that made
// them.
func writeOutbox(ctx context.Context, tx pgx.Tx, evs []*OutboxEvent) error {
	if len(evs) == 0 {
		return nil
	}
	rows := make([][]any, len(evs))
	for i, e := range evs {
		rows[i] = []any{e.ID, e.Type, e.RunID, e.JobID, e.Attempt, e.State, e.Reason, e.CreatedAt}
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"outbox"},
		[]string{"id", "type", "run_id", "job_id", "attempt", "state", "reason", "created_at"}, pgx.CopyFromRows(rows))
	return interpretError(err)
}

func (s *PostgresStore) OutboxPending(ctx context.Context, limit int) ([]*OutboxEvent, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, type, run_id, job_id, attempt, state, reason, created_at
		FROM outbox WHERE published_at IS NULL ORDER BY seq LIMIT $1`, limit)
	if err != nil {
		return nil, interpretError(err)
	}
	defer rows.Close()
	var out []*OutboxEvent
	for rows.Next() {
		e := &OutboxEvent{}
		if err := rows.Scan(&e.ID, &e.Type, &e.RunID, &e.JobID, &e.Attempt, &e.State, &e.Reason, &e.CreatedAt); err != nil {
			return nil, interpretError(err)
		}
		e.CreatedAt = e.CreatedAt.UTC()
		out = append(out, e)
	}
	return out, interpretError(rows.Err())
}

func (s *PostgresStore) OutboxMarkPublished(ctx context.Context, ids []string) error {
	_, err := s.pool.Exec(ctx, `UPDATE outbox SET published_at = $2 WHERE id = ANY($1) AND published_at IS NULL`, ids, s.now())
	return interpretError(err)
}
