package dag

import (
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

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

// PostgresConfig configures a PostgresStore.
type PostgresConfig struct {
	// Pool is the database. Required. Tables are unqualified: they live
	// in the connections' search_path.
	Pool *pgxpool.Pool
	// Redis, when set, holds the dependency counters of the fast path
	// (see the package documentation). Without it PostgreSQL decides
	// alone, with the same results. Redis holds nothing that cannot be
	// rebuilt: after it was lost or unreachable, RepairActive rebuilds
	// the counters and wakes any job whose wakeup was lost.
	Redis redis.UniversalClient
	// KeyPrefix starts every Redis key of the store. Default: "cikit:".
	KeyPrefix string
	// CounterTTL is how long an untouched counter lives in Redis; a run
	// that outlives it continues without counters. Default: 24h.
	CounterTTL time.Duration
	// Now returns the current time. Default: time.Now.
	Now func() time.Time
	// NewID returns a new, unique run ID. Default: a UUIDv7 string.
	NewID func() string
	// Expander expands the placeholders of run-time matrices
	// (cikit.JobSpec.Expand) in the writes that satisfy their needs, on
	// the locked path. Without one such a placeholder fails, saying the
	// store has none.
	Expander Expander
	// Decider decides the run-time conditions of jobs
	// (cikit.JobSpec.If) in the writes that satisfy their needs. Without
	// one such a job fails, saying the store cannot decide it.
	Decider Decider
	// MaxJobs bounds the jobs of a run, variants included: an expansion
	// past it fails its placeholder. Default: DefaultMaxJobs.
	MaxJobs int
}

// PostgresStore is a Store in PostgreSQL, the system of record of a
// production platform. Any number of schedulers may process events of the
// same run at once.
//
// Job events take a fast path when their effect is local to the job:
// queueing, starting, and a completion that satisfies the jobs needing it
// while one of them still waits. Such an event is a conditional update of
// the job's row (state and attempt as expected), batched with others by
// JobApply; the jobs that need it are then counted down in Redis, and a
// job whose count reaches zero is checked against PostgreSQL and made
// READY. Every other event (failures, cancellations, retries, the end of
// a run) locks the run's row, applies Next to all of its jobs' states and
// writes the changes in one transaction. Fast events hold a shared lock on
// the run's row, so the two paths never interleave within a run.
type PostgresStore struct {
	pool     *pgxpool.Pool
	counters *counters // nil without Redis
	now      func() time.Time
	newID    func() string
	graphs   graphCache
	x        *expansion
	// fault, when set by a test, is called between the steps of a
	// write; an error stops the write there, as a crash would.
	fault func(step string) error
}

var _ Store = (*PostgresStore)(nil)

// NewPostgresStore returns a store over cfg.Pool. Call Migrate once before
// use (the reference platform's `cikit migrate` does).
func NewPostgresStore(cfg PostgresConfig) (*PostgresStore, error) {
	if cfg.Pool == nil {
		return nil, errors.New("dag: PostgresConfig.Pool is required")
	}
	if cfg.CounterTTL < 0 {
		return nil, fmt.Errorf("dag: PostgresConfig.CounterTTL is negative (%v)", cfg.CounterTTL)
	}
	if cfg.MaxJobs < 0 {
		return nil, fmt.Errorf("dag: PostgresConfig.MaxJobs is negative (%d)", cfg.MaxJobs)
	}
	s := &PostgresStore{pool: cfg.Pool, now: cfg.Now, newID: cfg.NewID, graphs: graphCache{max: defaultGraphCache},
		x: &expansion{expander: cfg.Expander, decider: cfg.Decider, maxJobs: cmp.Or(cfg.MaxJobs, DefaultMaxJobs)}}
	if s.now == nil {
		s.now = time.Now
	}
	if s.newID == nil {
		s.newID = func() string { return uuid.Must(uuid.NewV7()).String() }
	}
	if cfg.Redis != nil {
		s.counters = &counters{rdb: cfg.Redis, prefix: cmp.Or(cfg.KeyPrefix, "cikit:"), ttl: cmp.Or(cfg.CounterTTL, 24*time.Hour)}
	}
	return s, nil
}

// Pool returns the store's database, for callers' own transactions
// around the …Tx methods.
func (s *PostgresStore) Pool() *pgxpool.Pool { return s.pool }

// Migrate applies the migrations the database does not have yet, in one
// transaction, recording them in cikit_migrations. It is safe to run
// from several processes at once: an advisory lock serialises them.
func (s *PostgresStore) Migrate(ctx context.Context) error {
	return pgmigrate.Apply(ctx, s.pool, "dag", Migrations())
}

func (s *PostgresStore) RunCreate(ctx context.Context, p *RunCreateParams) (run *Run, err error) {
	created := false
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		run, created, err = s.runCreateTx(ctx, tx, p)
		return err
	})
	if err != nil || !created {
		return run, err
	}
	// Committed: the run's graph is known without reading it back. (Not
	// in RunCreateTx, whose caller may still roll back.)
	if g, err := FromSpecs(p.Jobs); err == nil {
		if rg := newRunGraph(g, cloneSpecs(p.Jobs), p.Branch, p.Pipeline, p.SHA); !rg.expandable() {
			// (A run that may have grown as it was created is read back.)
			s.graphs.put(run.ID, rg)
		}
	}
	return run, nil
}

// RunCreateTx is RunCreate inside the caller's transaction, so that a run
// commits together with the caller's own writes (a webhook delivery's
// record, for example) or not at all.
func (s *PostgresStore) RunCreateTx(ctx context.Context, tx pgx.Tx, p *RunCreateParams) (*Run, error) {
	run, _, err := s.runCreateTx(ctx, tx, p)
	return run, err
}

// runCreateTx is RunCreateTx; created is false when the run existed.
func (s *PostgresStore) runCreateTx(ctx context.Context, tx pgx.Tx, p *RunCreateParams) (*Run, bool, error) {
	runs, created, err := s.runCreateManyTx(ctx, tx, []*RunCreateParams{p})
	if err != nil {
		return nil, false, err
	}
	return runs[0], created[0], nil
}

// RunCreateManyTx creates runs as RunCreateTx would, one after the other,
// in the caller's transaction, with a few statements for all of them
// instead of a few for each: the way to create the runs of many
// deliveries in one commit. It returns the runs in the order of ps; a
// key used before, or earlier in ps, returns that run. A param that is
// not valid fails the whole call, naming its index.
func (s *PostgresStore) RunCreateManyTx(ctx context.Context, tx pgx.Tx, ps []*RunCreateParams) ([]*Run, error) {
	runs, _, err := s.runCreateManyTx(ctx, tx, ps)
	return runs, err
}

// newRun is a run being created and what its rows are made of.
type newRun struct {
	p      *RunCreateParams
	g      *Graph
	states []cikit.JobState
	run    *Run
	jobs   []*Job // by graph index, its placeholders that arrive expanded
}

func (s *PostgresStore) runCreateManyTx(ctx context.Context, tx pgx.Tx, ps []*RunCreateParams) (runs []*Run, created []bool, err error) {
	now := s.now()
	all := make([]*newRun, len(ps))
	var keys, keyRuns []string
	for i, p := range ps {
		g, err := FromSpecs(p.Jobs)
		if err != nil {
			return nil, nil, fmt.Errorf("dag: run %d: %w", i, err)
		}
		if err := checkCreated(p.Jobs); err != nil {
			return nil, nil, fmt.Errorf("dag: run %d: %w", i, err)
		}
		if err := p.Supersede.check(); err != nil {
			return nil, nil, fmt.Errorf("dag: run %d: %w", i, err)
		}
		n := &newRun{p: p, g: g, states: Initial(g), run: &Run{ID: s.newID()}}
		if err := s.expandCreated(ctx, n, now); err != nil {
			return nil, nil, fmt.Errorf("dag: run %d: %w", i, err)
		}
		run := n.run
		run.CreatedAt, run.State, run.IdempotencyKey = now, RunStatus(n.g, n.states), p.IdempotencyKey
		run.Pipeline, run.Branch, run.SHA = p.Pipeline, p.Branch, p.SHA
		if run.State.Terminal() {
			run.FinishedAt = now
		}
		all[i] = n
		if p.IdempotencyKey != "" {
			keys, keyRuns = append(keys, p.IdempotencyKey), append(keyRuns, run.ID)
		}
	}
	// The keys first: a concurrent creation with one of them waits here
	// until the first commits, then finds its run.
	owner := map[string]string{} // key -> the run that holds it
	if len(keys) > 0 {
		rows, err := tx.Query(ctx, `INSERT INTO idempotency_keys (key, run_id, created_at)
			SELECT k, r, $3 FROM unnest($1::text[], $2::text[]) AS t(k, r) ON CONFLICT (key) DO NOTHING RETURNING key, run_id`,
			keys, keyRuns, now)
		if err := collectOwners(rows, err, owner); err != nil {
			return nil, nil, err
		}
		var taken []string
		for _, k := range keys {
			if _, ok := owner[k]; !ok {
				taken = append(taken, k)
			}
		}
		if len(taken) > 0 {
			rows, err := tx.Query(ctx, `SELECT key, run_id FROM idempotency_keys WHERE key = ANY($1)`, taken)
			if err := collectOwners(rows, err, owner); err != nil {
				return nil, nil, err
			}
		}
	}
	runs, created = make([]*Run, len(ps)), make([]bool, len(ps))
	var fresh []*newRun
	var existing []string
	for i, n := range all {
		if k := n.p.IdempotencyKey; k != "" && owner[k] != n.run.ID {
			existing = append(existing, owner[k])
			continue
		}
		runs[i], created[i] = n.run, true
		fresh = append(fresh, n)
	}
	if err := s.insertRuns(ctx, tx, fresh, now); err != nil {
		return nil, nil, err
	}
	if len(existing) > 0 {
		found := map[string]*Run{}
		for _, id := range existing {
			if _, ok := found[id]; ok {
				continue
			}
			r, err := s.runTx(ctx, tx, id)
			if err != nil {
				return nil, nil, err
			}
			found[id] = r
		}
		for i, n := range all {
			if runs[i] == nil {
				r := *found[owner[n.p.IdempotencyKey]]
				runs[i] = &r
			}
		}
	}
	for _, n := range fresh {
		if err := s.supersedeTx(ctx, tx, n.run, n.p); err != nil {
			return nil, nil, err
		}
		// The counters exist before the run commits, so no count of this
		// run's jobs can come before them.
		s.rebuildCounters(ctx, n.run.ID, n.g, n.states)
	}
	return runs, created, nil
}

// collectOwners adds the (key, run id) rows of a query on
// idempotency_keys to owner.
func collectOwners(rows pgx.Rows, err error, owner map[string]string) error {
	if err != nil {
		return interpretError(err)
	}
	pairs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) ([2]string, error) {
		var p [2]string
		err := row.Scan(&p[0], &p[1])
		return p, err
	})
	if err != nil {
		return interpretError(err)
	}
	for _, p := range pairs {
		owner[p[0]] = p[1]
	}
	return nil
}

// insertRuns inserts runs' rows, numbering them: each pipeline's counter
// grows by its runs in the statement, and they take the numbers up to it
// in the order given. The counter's row stays locked until the
// transaction ends, so concurrent creations of a pipeline's runs take
// turns there, and their numbers are distinct and grow with the order in
// which they commit. The pipelines' rows are taken in one order, so two
// creations of runs of several pipelines cannot deadlock.
const insertRuns = `WITH t AS (
		SELECT * FROM unnest($1::text[], $2::text[], $4::timestamptz[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[])
			WITH ORDINALITY AS t(id, st, fin, k, pl, br, sha, ctx, ord)
	), c AS (
		INSERT INTO pipeline_run_numbers AS c (pipeline, last)
		SELECT pl, count(*) FROM t GROUP BY pl ORDER BY pl COLLATE "C"
		ON CONFLICT (pipeline) DO UPDATE SET last = c.last + excluded.last
		RETURNING pipeline, last
	)
	INSERT INTO pipeline_runs (id, state, created_at, finished_at, idempotency_key, pipeline, branch, sha, context, number)
	SELECT t.id, t.st, $3, t.fin, nullif(t.k, ''), t.pl, t.br, t.sha, t.ctx::json,
		c.last - count(*) OVER (PARTITION BY t.pl) + row_number() OVER (PARTITION BY t.pl ORDER BY t.ord)
	FROM t JOIN c ON c.pipeline = t.pl
	RETURNING id, number`

// insertRuns writes new runs, their jobs, needs, ended attempts and
// outbox events, in one round trip; it numbers the runs (Run.Number).
func (s *PostgresStore) insertRuns(ctx context.Context, tx pgx.Tx, fresh []*newRun, now time.Time) error {
	if len(fresh) == 0 {
		return nil
	}
	var (
		runIDs, runStates, runKeys, runPipelines, runBranches, runSHAs []string
		runContexts                                                    []*string
		runFinished                                                    []*time.Time
		jRuns, jIDs, jSpecs, jStates, jReasons                         []string
		jPositions, jExit                                              []int
		jReady, jFinished                                              []*time.Time
		jAllow                                                         []bool
		dRuns, dJobs, dNeeds                                           []string
		ended                                                          []*Job
		evs                                                            []*OutboxEvent
	)
	for _, n := range fresh {
		run, p := n.run, n.p
		runIDs, runStates, runKeys = append(runIDs, run.ID), append(runStates, string(run.State)), append(runKeys, p.IdempotencyKey)
		runPipelines, runBranches, runFinished = append(runPipelines, p.Pipeline), append(runBranches, p.Branch), append(runFinished, nullTime(run.FinishedAt))
		runSHAs = append(runSHAs, p.SHA)
		rc, err := encodeContext(p.Context)
		if err != nil {
			return err
		}
		runContexts = append(runContexts, jsonText(rc))
		var initial []*Job
		jobs := n.jobs
		if jobs == nil {
			jobs = initialJobs(n.g, p.Jobs, n.states, run.ID, now)
		}
		for i, j := range jobs {
			spec := j.Spec
			data, err := json.Marshal(spec)
			if err != nil {
				return fmt.Errorf("dag: job %q: %w", spec.ID, err)
			}
			if j.State.Terminal() {
				ended = append(ended, j)
			}
			if j.State != cikit.JobPending {
				initial = append(initial, j)
			}
			jRuns, jIDs, jSpecs, jStates = append(jRuns, run.ID), append(jIDs, spec.ID), append(jSpecs, string(data)), append(jStates, string(j.State))
			jReasons, jPositions, jAllow = append(jReasons, j.Reason), append(jPositions, i), append(jAllow, j.FailureAllowed)
			jReady, jFinished = append(jReady, nullTime(j.ReadyAt)), append(jFinished, nullTime(j.FinishedAt))
			jExit = append(jExit, j.ExitCode)
			for _, pi := range n.g.Parents(i) {
				dRuns, dJobs, dNeeds = append(dRuns, run.ID), append(dJobs, spec.ID), append(dNeeds, n.g.Node(pi).ID)
			}
		}
		evs = append(evs, &OutboxEvent{ID: newEventID(), Type: EventPipelineCreated, RunID: run.ID, Pipeline: run.Pipeline, SHA: run.SHA,
			State: string(run.State), CreatedAt: now})
		evs = append(evs, events(newEventID, now, run, false, initial)...)
	}
	b := &pgx.Batch{}
	byID := make(map[string]*Run, len(fresh))
	for _, n := range fresh {
		byID[n.run.ID] = n.run
	}
	b.Queue(insertRuns, runIDs, runStates, now, runFinished, runKeys, runPipelines, runBranches, runSHAs, runContexts).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id string
			var number int64
			if err := rows.Scan(&id, &number); err != nil {
				return err
			}
			byID[id].Number = number
		}
		return rows.Err()
	})
	b.Queue(`INSERT INTO jobs (run_id, position, job_id, spec, state, reason, ready_at, finished_at, allow_failure, exit_code)
		SELECT r, pos, j, sp::jsonb, st, rs, rd, fn, af, ec
		FROM unnest($1::text[], $2::int[], $3::text[], $4::text[], $5::text[], $6::text[], $7::timestamptz[], $8::timestamptz[], $9::bool[], $10::int[])
			AS t(r, pos, j, sp, st, rs, rd, fn, af, ec)`,
		jRuns, jPositions, jIDs, jSpecs, jStates, jReasons, jReady, jFinished, jAllow, jExit)
	if len(dRuns) > 0 {
		b.Queue(`INSERT INTO job_deps (run_id, job_id, needs_job_id) SELECT * FROM unnest($1::text[], $2::text[], $3::text[])`,
			dRuns, dJobs, dNeeds)
	}
	if err := queueAttempts(b, ended); err != nil {
		return err
	}
	queueOutbox(b, evs)
	return interpretError(tx.SendBatch(ctx, b).Close())
}

func (s *PostgresStore) RunGet(ctx context.Context, runID string) (*Run, error) {
	var rc []byte
	run, err := scanRun(runID, contextRow{s.pool.QueryRow(ctx, `SELECT `+runColumns+`, context FROM pipeline_runs WHERE id = $1`, runID), &rc})
	if err != nil {
		return nil, fmt.Errorf("dag: run %q: %w", runID, err)
	}
	if run.Context, err = decodeContext(rc); err != nil {
		return nil, fmt.Errorf("dag: run %q: %w", runID, err)
	}
	return run, nil
}

// contextRow is a row of runColumns + ", context", read by scanRun: it
// scans the context into rc last.
type contextRow struct {
	pgx.Row
	rc *[]byte
}

func (r contextRow) Scan(dest ...any) error { return r.Row.Scan(append(dest, r.rc)...) }

func (s *PostgresStore) RunList(ctx context.Context, p *RunListParams) ([]*Run, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	// Only the conditions p needs, so the plan can walk an index.
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if c := p.Before; c != nil {
		where = append(where, `(created_at, id COLLATE "C") < (`+arg(c.CreatedAt)+`::timestamptz, `+arg(c.ID)+`::text)`)
	}
	if p.Pipeline != "" {
		where = append(where, "pipeline = "+arg(p.Pipeline))
	}
	if p.Branch != "" {
		where = append(where, "branch = "+arg(p.Branch))
	}
	q := `SELECT id, ` + runColumns + ` FROM pipeline_runs`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY created_at DESC, id COLLATE "C" DESC LIMIT ` + arg(p.limit())
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("dag: listing runs: %w", err)
	}
	defer rows.Close()
	out := []*Run{}
	for rows.Next() {
		var id string
		run, err := scanRun("", idRow{rows, &id})
		if err != nil {
			return nil, fmt.Errorf("dag: listing runs: %w", err)
		}
		run.ID = id
		out = append(out, run)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("dag: listing runs: %w", err)
	}
	return out, nil
}

// idRow is a row of "id, " + runColumns, read by scanRun: it scans the ID
// into id first.
type idRow struct {
	pgx.Rows
	id *string
}

func (r idRow) Scan(dest ...any) error { return r.Rows.Scan(append([]any{r.id}, dest...)...) }

func (s *PostgresStore) JobList(ctx context.Context, runID string) ([]*Job, error) {
	rg, _, jobs, err := s.jobs(ctx, s.pool, runID, false)
	if err != nil {
		return nil, err
	}
	for i, j := range jobs {
		j.Spec = rg.specs[i].Clone()
	}
	return jobs, nil
}

func (s *PostgresStore) JobGet(ctx context.Context, runID, jobID string) (*Job, error) {
	rg, i, ok, err := s.graphOf(ctx, s.pool, runID, jobID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("dag: run %q has no job %q: %w", runID, jobID, cikit.ErrNotFound)
	}
	j := &Job{RunID: runID}
	if err := scanJob(s.pool.QueryRow(ctx, `SELECT `+jobRow+` FROM jobs WHERE run_id = $1 AND job_id = $2`, runID, jobID).Scan, j); err != nil {
		return nil, fmt.Errorf("dag: run %q job %q: %w", runID, jobID, err)
	}
	j.Spec = rg.specs[i].Clone()
	return j, nil
}

func (s *PostgresStore) JobGetMany(ctx context.Context, keys []JobKey) ([]*Job, error) {
	out := make([]*Job, len(keys))
	graphs := make(map[string]*runGraph)
	runIDs, jobIDs := make([]string, 0, len(keys)), make([]string, 0, len(keys))
	for _, k := range keys {
		if _, ok := graphs[k.RunID]; !ok {
			rg, err := s.graph(ctx, s.pool, k.RunID)
			if err != nil && !errors.Is(err, cikit.ErrNotFound) {
				return nil, err
			}
			graphs[k.RunID] = rg // nil for an unknown run
		}
		runIDs, jobIDs = append(runIDs, k.RunID), append(jobIDs, k.JobID)
	}
	if len(keys) == 0 {
		return out, nil
	}
	// A lateral subquery with a LIMIT is one index probe per key: a
	// plain join may hash the whole jobs table (see nestedLoops).
	rows, err := s.pool.Query(ctx, `SELECT t.i, `+jobRow+`
		FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS t(r, jid, i)
		CROSS JOIN LATERAL (SELECT * FROM jobs WHERE run_id = t.r AND job_id = t.jid LIMIT 1) j`, runIDs, jobIDs)
	if err != nil {
		return nil, interpretError(err)
	}
	defer rows.Close()
	for rows.Next() {
		var i int
		j := &Job{}
		if err := scanJob(rows.Scan, j, &i); err != nil {
			return nil, err
		}
		k := keys[i-1]
		rg := graphs[k.RunID]
		if rg == nil {
			continue // the run was created after its graph was read
		}
		pos, ok := rg.g.Index(k.JobID)
		if !ok {
			// A variant added since the graph was cached.
			if rg, pos, ok, err = s.graphOf(ctx, s.pool, k.RunID, k.JobID); err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			graphs[k.RunID] = rg
		}
		j.RunID = k.RunID
		j.Spec = rg.specs[pos].Clone()
		out[i-1] = j
	}
	return out, interpretError(rows.Err())
}

func (s *PostgresStore) JobAttempts(ctx context.Context, runID, jobID string) ([]*Job, error) {
	rg, i, ok, err := s.graphOf(ctx, s.pool, runID, jobID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("dag: run %q has no job %q: %w", runID, jobID, cikit.ErrNotFound)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+jobRow+`
		FROM job_attempts WHERE run_id = $1 AND job_id = $2 ORDER BY attempt`, runID, jobID)
	if err != nil {
		return nil, interpretError(err)
	}
	defer rows.Close()
	var out []*Job
	for rows.Next() {
		j := &Job{RunID: runID, Spec: rg.specs[i].Clone()}
		if err := scanJob(rows.Scan, j); err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, interpretError(rows.Err())
}

func (s *PostgresStore) RunCancel(ctx context.Context, runID string) (*TransitionResult, error) {
	return s.transition(ctx, runID, nil, Event{Kind: EventCancel})
}

func (s *PostgresStore) RunRetryFailed(ctx context.Context, runID string) (*TransitionResult, error) {
	return s.transition(ctx, runID, nil, Event{Kind: EventRetryFailed})
}

// Repair settles a run as the rules would have (see Settle) and rebuilds
// its dependency counters from job_deps and the jobs' states. A scheduler
// that stopped between the steps of a fast completion leaves a job
// PENDING whose needs are all satisfied; redelivering the completion
// repairs that too, and Repair does it without the event.
func (s *PostgresStore) Repair(ctx context.Context, runID string) (*TransitionResult, error) {
	return s.transition(ctx, runID, nil, Event{Kind: EventRepair})
}

// RepairActive repairs every run that has not finished (see Repair), as
// after Redis was lost or unreachable, and returns how many jobs it made
// move.
func (s *PostgresStore) RepairActive(ctx context.Context) (int, error) {
	rows, err := s.pool.Query(ctx, `SELECT id FROM pipeline_runs WHERE state IN ('pending', 'running', 'blocked') ORDER BY created_at`)
	if err != nil {
		return 0, interpretError(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, interpretError(err)
	}
	moved := 0
	for _, id := range ids {
		res, err := s.Repair(ctx, id)
		if err != nil {
			return moved, err
		}
		moved += len(res.Changed)
	}
	return moved, nil
}

// DependencyCounters returns the dependency counters Redis holds for a
// run's jobs that need others: how many of each job's needs are not yet
// satisfied. Jobs whose counter is missing are absent. Without Redis it
// returns nil: the store keeps no counters.
func (s *PostgresStore) DependencyCounters(ctx context.Context, runID string) (map[string]int, error) {
	rg, err := s.graph(ctx, s.pool, runID)
	if err != nil {
		return nil, err
	}
	if s.counters == nil {
		return nil, nil
	}
	return s.counters.read(ctx, runID, rg.g)
}

func (s *PostgresStore) JobQueue(ctx context.Context, p *JobTransitionParams) (*TransitionResult, error) {
	return s.one(ctx, p.event(EventQueue))
}

func (s *PostgresStore) JobStart(ctx context.Context, p *JobTransitionParams) (*TransitionResult, error) {
	return s.one(ctx, p.event(EventStart))
}

func (s *PostgresStore) JobComplete(ctx context.Context, p *JobCompleteParams) (*TransitionResult, error) {
	return s.one(ctx, p.event())
}

// one applies a single job event through JobApply.
func (s *PostgresStore) one(ctx context.Context, e *JobEvent) (*TransitionResult, error) {
	res, err := s.JobApply(ctx, []*JobEvent{e})
	if err != nil {
		return nil, err
	}
	return res[0].TransitionResult, res[0].Err
}

// lockRun takes a run's exclusive lock, which the locked path holds for
// the rest of its transaction: transitions of one run take turns, and
// fast writes (which take it shared) wait. It is an advisory lock, so
// taking it writes nothing.
const lockRun = `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`

// lockRunsTx takes runs' exclusive locks (see lockRun) in the order of
// their IDs, the order every write that locks several runs uses.
func lockRunsTx(ctx context.Context, tx pgx.Tx, runIDs []string) error {
	ids := slices.Clone(runIDs)
	slices.Sort(ids)
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended(id, 0)) FROM unnest($1::text[]) AS id`, slices.Compact(ids))
	return interpretError(err)
}

// jobs reads a run's graph, row and jobs in plan order, in one round trip;
// lock takes the run's exclusive lock first. Jobs' Spec fields are the
// cached specs: callers clone them before handing them out.
func (s *PostgresStore) jobs(ctx context.Context, tx conn, runID string, lock bool) (*runGraph, *Run, []*Job, error) {
	rg, err := s.graph(ctx, tx, runID)
	if err != nil {
		return nil, nil, nil, err
	}
	rg, run, jobs, err := s.jobsOf(ctx, tx, rg, runID, lock)
	var grown *grownError
	if errors.As(err, &grown) {
		// Another store expanded a placeholder of the run since its
		// graph was cached.
		if rg, err = s.readGraph(ctx, tx, runID); err != nil {
			return nil, nil, nil, err
		}
		return s.jobsOf(ctx, tx, rg, runID, lock)
	}
	return rg, run, jobs, err
}

// grownError reports that a run has other jobs than the graph read of
// it: an expansion added them since (or, for a graph cached by a write
// that then rolled back, did not).
type grownError struct{ runID string }

func (e *grownError) Error() string {
	return fmt.Sprintf("dag: run %q has more jobs than its graph", e.runID)
}

// jobsOf is jobs on the graph rg.
func (s *PostgresStore) jobsOf(ctx context.Context, tx conn, rg *runGraph, runID string, lock bool) (*runGraph, *Run, []*Job, error) {
	b := &pgx.Batch{}
	if lock {
		b.Queue(lockRun, runID)
	}
	b.Queue(`SELECT `+runColumns+` FROM pipeline_runs WHERE id = $1`, runID)
	b.Queue(`SELECT `+jobRow+` FROM jobs WHERE run_id = $1 ORDER BY position`, runID)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	if lock {
		if _, err := br.Exec(); err != nil {
			return nil, nil, nil, interpretError(err)
		}
	}
	run, err := scanRun(runID, br.QueryRow())
	if err != nil {
		return nil, nil, nil, fmt.Errorf("dag: run %q: %w", runID, err)
	}
	rows, err := br.Query()
	if err != nil {
		return nil, nil, nil, interpretError(err)
	}
	defer rows.Close()
	jobs := make([]*Job, 0, rg.g.Len())
	for rows.Next() {
		if len(jobs) == rg.g.Len() {
			if rg.expandable() {
				return nil, nil, nil, &grownError{runID: runID}
			}
			return nil, nil, nil, fmt.Errorf("dag: run %q has more jobs than its graph", runID)
		}
		j := &Job{RunID: runID, Spec: rg.specs[len(jobs)]}
		if err := scanJob(rows.Scan, j); err != nil {
			return nil, nil, nil, fmt.Errorf("dag: run %q: %w", runID, err)
		}
		jobs = append(jobs, j)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, nil, interpretError(err)
	}
	if len(jobs) != rg.g.Len() {
		if rg.expandable() {
			return nil, nil, nil, &grownError{runID: runID}
		}
		return nil, nil, nil, fmt.Errorf("dag: run %q has %d jobs, its graph %d", runID, len(jobs), rg.g.Len())
	}
	return rg, run, jobs, br.Close()
}

// lockedEvent is one event for the locked path: a job event, or the run
// event ev when job is nil.
type lockedEvent struct {
	runID string
	job   *JobEvent
	ev    Event
	// reason is why a cancel event cancels; "run cancelled" when empty.
	reason string
	// at, when set, is the time of the write: an event the fast path
	// tried first keeps the time it was tried at.
	at time.Time
}

// transition applies one event on the locked path.
func (s *PostgresStore) transition(ctx context.Context, runID string, je *JobEvent, ev Event) (*TransitionResult, error) {
	res, errs, err := s.transitions(ctx, []lockedEvent{{runID: runID, job: je, ev: ev}}, nil)
	if err != nil {
		return nil, err
	}
	return res[0], errs[0]
}

// lockedRun is a run as the locked path holds it during a transaction.
type lockedRun struct {
	rg   *runGraph
	run  *Run
	jobs []*Job // in plan order; nil for a job not read
	read []int  // the jobs read, by graph index
	// full says that every job was read: a run event needs them all. A
	// run that only job events change reads the jobs they need (see
	// scopeOf), and asks PostgreSQL for the rest (see runProbe).
	full    bool
	initial cikit.RunState
	changed map[int]*Job // by graph index, as last changed, not yet written
	ended   []*Job
	events  []*OutboxEvent
	// satisfied are the jobs the write left satisfied (see Satisfied),
	// whose children's dependency counters count them down.
	satisfied []int
	refusal   error // the run cannot be read: every event of it is refused
	applied   bool  // some event of it was applied
	// added are the jobs expansions added, not yet inserted;
	// placeholders those expanded, whose counters are set after the
	// write; grown says that the run's count of expansions is to grow.
	added        []int
	placeholders []int
	grown        bool
}

// transitions applies events on the locked path, in order, in one
// transaction that holds the exclusive locks of their runs (taken in ID
// order): the same rules as MemoryStore, on the states read under the
// locks. It is the path of every event the fast path does not take. An
// event refused by the rules gets its error in errs and writes nothing;
// err is for the store failing, and then nothing was written.
func (s *PostgresStore) transitions(ctx context.Context, items []lockedEvent, with ApplyWith) (results []*TransitionResult, errs []error, err error) {
	ids := make([]string, 0, len(items))
	for _, it := range items {
		ids = append(ids, it.runID)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		results, errs, err = s.transitionsTx(ctx, tx, ids, items, with)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	for _, res := range results {
		if res == nil {
			continue
		}
		for _, j := range res.Changed {
			j.Spec = j.Spec.Clone()
		}
	}
	return results, errs, nil
}

// transitionsTx is transitions in tx, for the runs ids (sorted, distinct)
// of items. Changed jobs' specs are the cached ones: callers clone them.
//
// A run that only job events change is read in part: the jobs each event
// needs by the rules (see scopeOf), and, when a rule asks for a job not
// read, the jobs below the event's job (see belowScope). Its state is
// kept without reading the rest: when the jobs read leave it open, from
// them; otherwise from PostgreSQL's answer about the others (runProbe),
// after writing what changed. So an event costs what it changes, not the
// size of its run. A run event (cancel, retry of the failed jobs, repair)
// reads the whole run.
func (s *PostgresStore) transitionsTx(ctx context.Context, tx pgx.Tx, ids []string, items []lockedEvent, with ApplyWith) ([]*TransitionResult, []error, error) {
	results, errs := make([]*TransitionResult, len(items)), make([]error, len(items))
	runs, err := s.lockRunsFor(ctx, tx, ids, items)
	if err != nil {
		return nil, nil, err
	}
	var now time.Time
	for _, it := range items {
		if !it.at.IsZero() {
			now = it.at
			break
		}
	}
	if now.IsZero() {
		now = s.now()
	}
	for k, it := range items {
		r := runs[it.runID]
		if r.refusal != nil {
			errs[k] = r.refusal
			continue
		}
		w, a, refused, err := s.applyLocked(ctx, tx, r, it, now)
		if err != nil {
			return nil, nil, err
		}
		if refused != nil {
			errs[k] = refused
			continue
		}
		for _, j := range a.changed {
			i, _ := r.rg.g.Index(j.ID())
			r.changed[i] = j
			if !r.full && Satisfied(j.State, j.FailureAllowed) {
				r.satisfied = append(r.satisfied, i)
			}
		}
		if w.repairs && Satisfied(r.jobs[w.ev.Job].State, r.jobs[w.ev.Job].FailureAllowed) {
			r.satisfied = append(r.satisfied, w.ev.Job) // the count-down the first delivery may not have made
		}
		r.ended = append(r.ended, a.ended...)
		wasTerminal := r.run.State.Terminal()
		state, err := s.lockedStatus(ctx, tx, it.runID, r)
		if err != nil {
			return nil, nil, err
		}
		if state != r.run.State {
			r.run.State = state
			switch {
			case !state.Terminal():
				r.run.FinishedAt = time.Time{} // running again after a retry
			case r.run.FinishedAt.IsZero():
				r.run.FinishedAt = now
			}
		}
		run := *r.run
		r.events = append(r.events, events(newEventID, now, &run, wasTerminal, a.changed)...)
		results[k] = &TransitionResult{Changed: a.changed, Run: &run}
		r.applied = true
	}
	b := &pgx.Batch{}
	for _, id := range ids {
		r := runs[id]
		if !r.applied {
			continue
		}
		if err := r.queueWrites(b, id); err != nil {
			return nil, nil, err
		}
		if r.run.State != r.initial {
			b.Queue(`UPDATE pipeline_runs SET state = $2, finished_at = $3 WHERE id = $1`, id, r.run.State, nullTime(r.run.FinishedAt))
		}
		if err := queueAttempts(b, r.ended); err != nil {
			return nil, nil, err
		}
		queueOutbox(b, r.events)
	}
	if with != nil {
		var applied []*JobEvent
		for k, it := range items {
			if results[k] != nil && it.job != nil {
				applied = append(applied, it.job)
			}
		}
		if len(applied) > 0 {
			with(b, applied)
		}
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, nil, interpretError(err)
	}
	if err := s.step("slow:written"); err != nil {
		return nil, nil, err
	}
	var satisfied []edge
	for _, id := range ids {
		r := runs[id]
		if s.counters != nil && !r.full && len(r.placeholders) > 0 {
			s.rebuildSomeCounters(ctx, id, r)
		}
		switch {
		case !r.applied:
		case r.full:
			// Even a write that changed nothing (a redelivered
			// completion) rebuilds: the counters the first delivery
			// left undone are made right.
			s.rebuildCounters(ctx, id, r.rg.g.withJobs(r.jobs), statesOf(r.jobs))
		default:
			for _, p := range r.satisfied {
				for _, c := range r.rg.g.Children(p) {
					satisfied = append(satisfied, edge{Run: id, Child: r.rg.g.Node(c).ID, Parent: r.rg.g.Node(p).ID})
				}
			}
		}
	}
	if s.counters != nil && len(satisfied) > 0 {
		// A count that stays too high would hold a job PENDING; one too
		// low only makes a later write check PostgreSQL.
		s.counters.countDown(ctx, satisfied)
	}
	return results, errs, nil
}

// unwritten returns the jobs r changed that are not written yet, in plan
// order, and forgets them.
func (r *lockedRun) unwritten() []*Job {
	changed := make([]*Job, 0, len(r.changed))
	for _, i := range slices.Sorted(maps.Keys(r.changed)) {
		changed = append(changed, r.changed[i])
	}
	clear(r.changed)
	return changed
}

// lockRunsFor locks the runs ids of items and reads what their events
// need: every job of a run with a run event, the jobs scopeOf names for
// the others.
func (s *PostgresStore) lockRunsFor(ctx context.Context, tx pgx.Tx, ids []string, items []lockedEvent) (map[string]*lockedRun, error) {
	runs := make(map[string]*lockedRun, len(ids))
	full := make(map[string]bool)
	for _, it := range items {
		if it.job == nil {
			full[it.runID] = true
		}
	}
	for _, id := range ids {
		r, err := s.lockRunFor(ctx, tx, id, full[id], items)
		switch {
		case refusal(err):
			runs[id] = &lockedRun{refusal: err}
		case err != nil:
			return nil, err
		default:
			r.initial, r.changed = r.run.State, make(map[int]*Job)
			runs[id] = r
		}
	}
	return runs, nil
}

// lockRunFor locks run id and reads it whole when full is set, else the
// jobs scopeOf names for the events of items about it.
func (s *PostgresStore) lockRunFor(ctx context.Context, tx pgx.Tx, id string, full bool, items []lockedEvent) (*lockedRun, error) {
	if full {
		rg, run, jobs, err := s.jobs(ctx, tx, id, true)
		if err != nil {
			return nil, err
		}
		return &lockedRun{rg: rg, run: run, jobs: jobs, full: true}, nil
	}
	rg, err := s.graph(ctx, tx, id)
	if err != nil {
		return nil, err
	}
	var scope []int
	for _, it := range items {
		if it.runID == id {
			scope = append(scope, scopeOf(rg, it.job)...)
		}
	}
	r := &lockedRun{rg: rg, jobs: make([]*Job, rg.g.Len())}
	if r.run, err = s.readJobs(ctx, tx, id, r, scope, true); err != nil {
		return nil, err
	}
	if rg.expandable() {
		// Under the lock: a graph cached before another store expanded
		// a placeholder of the run is read again, and the jobs with it.
		var n int
		if err := tx.QueryRow(ctx, `SELECT expansions FROM pipeline_runs WHERE id = $1`, id).Scan(&n); err != nil {
			return nil, interpretError(err)
		}
		if n != rg.expansions {
			if rg, err = s.readGraph(ctx, tx, id); err != nil {
				return nil, err
			}
			scope = scope[:0]
			for _, it := range items {
				if it.runID == id {
					scope = append(scope, scopeOf(rg, it.job)...)
				}
			}
			r = &lockedRun{rg: rg, run: r.run, jobs: make([]*Job, rg.g.Len())}
			if _, err = s.readJobs(ctx, tx, id, r, scope, false); err != nil {
				return nil, err
			}
		}
	}
	return r, nil
}

// applyLocked works out and records item's write on r, reading the jobs
// below the event's job first when the jobs read do not suffice. refused
// is the rules' answer to an event they refuse; err is for the store
// failing.
func (s *PostgresStore) applyLocked(ctx context.Context, tx pgx.Tx, r *lockedRun, it lockedEvent, now time.Time) (w *write, a *applied, refused, err error) {
	for round := 0; ; round++ {
		w, err := newWrite(r.rg.g, r.jobs, it.runID, it.job, it.ev)
		if err == nil {
			w.reason = it.reason
			if a, err = w.apply(r.rg.g, r.jobs, now); err == nil {
				if err := s.expandLocked(ctx, tx, r, it.runID, a, now); err != nil {
					return nil, nil, nil, err
				}
				return w, a, nil, nil
			}
		}
		var ue *unreadError
		if !errors.As(err, &ue) {
			return nil, nil, err, nil
		}
		if round > 0 || r.full {
			return nil, nil, nil, fmt.Errorf("dag: run %q: the write of %s of job %q needs jobs its scope lacks", it.runID, it.job.Kind, it.job.JobID)
		}
		i, _ := r.rg.g.Index(it.job.JobID)
		if _, err := s.readJobs(ctx, tx, it.runID, r, belowScope(r.rg.g, i), false); err != nil {
			return nil, nil, nil, err
		}
	}
}

// scopeOf lists, by graph index, the jobs the write of job event je is
// expected to need: the event's job; for a completion that satisfies the
// jobs needing it, those jobs and the jobs they need; for an end that
// does not (a failure not retried, a cancellation, an expiry), everything
// below it (belowScope). An event whose job the run lacks needs nothing.
func scopeOf(rg *runGraph, je *JobEvent) []int {
	i, ok := rg.g.Index(je.JobID)
	if !ok {
		return nil
	}
	spec := rg.specs[i]
	switch je.Kind {
	case EventComplete, EventExpire:
		if je.Outcome == cikit.JobFailed && RetryOnFailure(spec, je.FailureClass, je.ExitCode, je.Attempt) {
			return []int{i} // a retry changes only the job
		}
		if je.Kind == EventComplete && Satisfied(je.Outcome, AllowedFailure(spec, je.FailureClass, je.ExitCode)) &&
			!expandsBelow(rg.g, i) && !decidesBelow(rg, i) {
			scope := []int{i}
			for _, c := range rg.g.Children(i) {
				scope = append(scope, c)
				scope = append(scope, rg.g.Parents(c)...)
			}
			return scope
		}
		return belowScope(rg.g, i)
	case EventCancelJob, EventReject:
		return belowScope(rg.g, i)
	}
	return []int{i}
}

// belowScope is job i, the jobs below it and the jobs those need: all
// that the rules read for any event about i (see nextJob and
// settleBelow).
func belowScope(g *Graph, i int) []int {
	scope := []int{i}
	for _, d := range g.descendants(i) {
		scope = append(scope, d)
		scope = append(scope, g.Parents(d)...)
	}
	return scope
}

// readJobs reads into r the jobs of scope it has not read, in one round
// trip, taking the run's exclusive lock first when lock is set; it also
// reads the run's row then, and returns it.
func (s *PostgresStore) readJobs(ctx context.Context, tx pgx.Tx, runID string, r *lockedRun, scope []int, lock bool) (*Run, error) {
	var positions []int32
	for _, i := range scope {
		if r.jobs[i] == nil && !slices.Contains(positions, int32(i)) {
			positions = append(positions, int32(i))
		}
	}
	b := &pgx.Batch{}
	if lock {
		b.Queue(lockRun, runID)
		b.Queue(`SELECT `+runColumns+` FROM pipeline_runs WHERE id = $1`, runID)
	}
	b.Queue(`SELECT position, `+jobRow+` FROM jobs WHERE run_id = $1 AND position = ANY($2)`, runID, positions)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	var run *Run
	if lock {
		if _, err := br.Exec(); err != nil {
			return nil, interpretError(err)
		}
		var err error
		if run, err = scanRun(runID, br.QueryRow()); err != nil {
			return nil, fmt.Errorf("dag: run %q: %w", runID, err)
		}
	}
	rows, err := br.Query()
	if err != nil {
		return nil, interpretError(err)
	}
	defer rows.Close()
	read := 0
	for rows.Next() {
		var pos int
		j := &Job{RunID: runID}
		if err := scanJob(rows.Scan, j, &pos); err != nil {
			return nil, fmt.Errorf("dag: run %q: %w", runID, err)
		}
		if pos < 0 || pos >= len(r.jobs) {
			return nil, fmt.Errorf("dag: run %q has a job at position %d, its graph %d jobs", runID, pos, len(r.jobs))
		}
		j.Spec = r.rg.specs[pos]
		r.jobs[pos] = j
		r.read = append(r.read, pos)
		read++
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(err)
	}
	if read != len(positions) {
		return nil, fmt.Errorf("dag: run %q: read %d of its jobs, wanted %d", runID, read, len(positions))
	}
	return run, br.Close()
}

// runProbe tells, after a write, which kinds of job states a run's jobs
// are in (see runSummary): one index probe each on jobs_run_state. A
// PENDING job is open unless the run has a manual job: then every PENDING
// job waits for a job that is open (and the first probe answers) or for
// a MANUAL one, as the rules leave no PENDING job whose needs have all
// ended.
const runProbe = `SELECT
	EXISTS (SELECT 1 FROM jobs WHERE run_id = $1 AND state IN ('ready', 'delayed', 'queued', 'running', 'cancel_requested')),
	EXISTS (SELECT 1 FROM jobs WHERE run_id = $1 AND state = 'pending'),
	EXISTS (SELECT 1 FROM jobs WHERE run_id = $1 AND state IN ('queued', 'running', 'cancel_requested', 'succeeded', 'failed', 'cancelled')),
	EXISTS (SELECT 1 FROM jobs WHERE run_id = $1 AND state = 'cancelled'),
	EXISTS (SELECT 1 FROM jobs WHERE run_id = $1 AND state = 'failed' AND NOT allow_failure),
	EXISTS (SELECT 1 FROM jobs WHERE run_id = $1 AND state = 'manual' AND NOT allow_failure)`

// lockedStatus is the state of run r after a write. A run read whole is decided by RunStatus. Otherwise, when one
// of the jobs read is open and one started, or the run is PENDING and a
// job read is open (a job that started would have made it RUNNING), the
// run is RUNNING or PENDING as they say; else the jobs changed are written
// now and PostgreSQL tells about the others (runProbe).
func (s *PostgresStore) lockedStatus(ctx context.Context, tx pgx.Tx, runID string, r *lockedRun) (cikit.RunState, error) {
	if r.full {
		return RunStatus(r.rg.g.withJobs(r.jobs), statesOf(r.jobs)), nil
	}
	var known runSummary
	for _, i := range r.read {
		j := r.jobs[i]
		known.add(j.State, j.FailureAllowed)
		known.open = known.open || j.State == cikit.JobPending && !r.rg.manual
	}
	switch {
	case known.open && known.started:
		return cikit.RunRunning, nil
	case known.open && r.run.State == cikit.RunPending:
		return cikit.RunPending, nil
	}
	b := &pgx.Batch{}
	if err := r.queueWrites(b, runID); err != nil {
		return "", err
	}
	var sum runSummary
	var pending bool
	b.Queue(runProbe, runID).QueryRow(func(row pgx.Row) error {
		return row.Scan(&sum.open, &pending, &sum.started, &sum.cancelled, &sum.failed, &sum.held)
	})
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return "", interpretError(err)
	}
	sum.open = sum.open || pending && !r.rg.manual
	return sum.state(), nil
}

func statesOf(jobs []*Job) []cikit.JobState {
	states := make([]cikit.JobState, len(jobs))
	for i, j := range jobs {
		states[i] = j.State
	}
	return states
}

// rebuildCounters sets a run's counters from states, inside the write
// that commits them. When that fails the counters are deleted instead,
// and the store decides without them; when Redis cannot be reached at all
// the write goes on without it, and RepairActive is the remedy.
func (s *PostgresStore) rebuildCounters(ctx context.Context, runID string, g *Graph, states []cikit.JobState) {
	if s.counters == nil {
		return
	}
	if err := s.counters.rebuild(ctx, runID, g, states); err != nil {
		_ = s.counters.forget(ctx, runID, g)
	}
}

// step marks a point between two steps of a write, where a test may
// inject a crash.
func (s *PostgresStore) step(name string) error {
	if s.fault == nil {
		return nil
	}
	return s.fault(name)
}

// inTx runs fn in a transaction, again when PostgreSQL aborted it for a
// deadlock or a serialization failure: the transaction had no effect, so
// running it again is safe.
func (s *PostgresStore) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	for try := 1; ; try++ {
		err := pgx.BeginFunc(ctx, s.pool, fn)
		var pgErr *pgconn.PgError
		if try < maxTxTries && errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001") {
			continue
		}
		return err
	}
}

// maxTxTries bounds how often inTx runs a transaction PostgreSQL aborted.
const maxTxTries = 5

func (s *PostgresStore) runTx(ctx context.Context, tx conn, runID string) (*Run, error) {
	return scanRun(runID, tx.QueryRow(ctx, `SELECT `+runColumns+` FROM pipeline_runs WHERE id = $1`, runID))
}

// runColumns are the columns of pipeline_runs scanRun reads.
const runColumns = `state, created_at, finished_at, idempotency_key, pipeline, branch, sha, number`

// scanRun reads a run's row: runColumns.
func scanRun(runID string, row pgx.Row) (*Run, error) {
	run := &Run{ID: runID}
	var finished *time.Time
	var key *string
	if err := row.Scan(&run.State, &run.CreatedAt, &finished, &key, &run.Pipeline, &run.Branch, &run.SHA, &run.Number); err != nil {
		return nil, interpretError(err)
	}
	run.FinishedAt = deref(finished)
	run.CreatedAt = run.CreatedAt.UTC()
	if key != nil {
		run.IdempotencyKey = *key
	}
	return run, nil
}

// invalidInput are the SQLSTATEs of input PostgreSQL refuses as such.
var invalidInput = map[string]bool{
	"22021": true, // character_not_in_repertoire: invalid UTF-8, a NUL byte in text
	"22P02": true, // invalid_text_representation
	"22P05": true, // untranslatable_character: \u0000 in jsonb
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
	case errors.As(err, &pgErr) && invalidInput[pgErr.Code]:
		// The caller's input, which no retry cures: a string PostgreSQL
		// cannot hold (a NUL byte, invalid UTF-8) or cannot read as its
		// column's type.
		return fmt.Errorf("dag: %w: %s", ErrInvalidParams, pgErr.Message)
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

// queueOutbox queues the insert of events into the outbox, in the
// transaction of the write that made them.
func queueOutbox(b *pgx.Batch, evs []*OutboxEvent) {
	if len(evs) == 0 {
		return
	}
	var ids, types, runs, pipelines, shas, jobs, states, reasons []string
	var attempts []int
	var created []time.Time
	for _, e := range evs {
		ids, types, runs, pipelines, jobs = append(ids, e.ID), append(types, e.Type), append(runs, e.RunID), append(pipelines, e.Pipeline), append(jobs, e.JobID)
		attempts, states, reasons, created = append(attempts, e.Attempt), append(states, e.State), append(reasons, e.Reason), append(created, e.CreatedAt)
		shas = append(shas, e.SHA)
	}
	b.Queue(`INSERT INTO outbox (id, type, run_id, pipeline, job_id, attempt, state, reason, created_at, sha)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int[], $7::text[], $8::text[], $9::timestamptz[], $10::text[])`,
		ids, types, runs, pipelines, jobs, attempts, states, reasons, created, shas)
}

// jobColumns are jobs' records as one array per column, for unnest.
type jobColumns struct {
	runs, ids, states, reasons, runners []string
	results                             []*string
	attempts, exitCodes                 []int
	ready, queued, started, finished    []*time.Time
	allowed                             []bool
}

func columns(js []*Job) (*jobColumns, error) {
	c := &jobColumns{}
	for _, j := range js {
		c.runs, c.ids, c.states = append(c.runs, j.RunID), append(c.ids, j.ID()), append(c.states, string(j.State))
		c.reasons, c.runners = append(c.reasons, j.Reason), append(c.runners, j.Runner)
		c.attempts, c.exitCodes = append(c.attempts, j.Attempt), append(c.exitCodes, j.ExitCode)
		c.allowed = append(c.allowed, j.FailureAllowed)
		c.ready, c.queued = append(c.ready, nullTime(j.ReadyAt)), append(c.queued, nullTime(j.QueuedAt))
		c.started, c.finished = append(c.started, nullTime(j.StartedAt)), append(c.finished, nullTime(j.FinishedAt))
		r, err := encodeResult(j.Result)
		if err != nil {
			return nil, err
		}
		c.results = append(c.results, r)
	}
	return c, nil
}

// queueAttempts queues the insert of ended attempts into job_attempts. An
// attempt already recorded is left as it is.
func queueAttempts(b *pgx.Batch, ended []*Job) error {
	if len(ended) == 0 {
		return nil
	}
	c, err := columns(ended)
	if err != nil {
		return err
	}
	b.Queue(`INSERT INTO job_attempts (run_id, job_id, attempt, state, exit_code, reason, runner, ready_at, queued_at, started_at, finished_at, result, allow_failure)
		SELECT r, j, a, st, ec, rs, rn, rd, qd, sd, fd, res::jsonb, af FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::int[], $6::text[], $7::text[],
			$8::timestamptz[], $9::timestamptz[], $10::timestamptz[], $11::timestamptz[], $12::text[], $13::bool[]) AS t(r, j, a, st, ec, rs, rn, rd, qd, sd, fd, res, af)
		ON CONFLICT DO NOTHING`,
		c.runs, c.ids, c.attempts, c.states, c.exitCodes, c.reasons, c.runners, c.ready, c.queued, c.started, c.finished, c.results, c.allowed)
	return nil
}

// queueJobUpdates queues the update of changed jobs' rows.
func queueJobUpdates(b *pgx.Batch, runID string, changed []*Job) error {
	if len(changed) == 0 {
		return nil
	}
	c, err := columns(changed)
	if err != nil {
		return err
	}
	b.Queue(`UPDATE jobs j SET state = v.state, attempt = v.attempt, exit_code = v.exit_code, reason = v.reason, runner = v.runner,
			ready_at = v.ready_at, queued_at = v.queued_at, started_at = v.started_at, finished_at = v.finished_at, result = v.result::jsonb,
			allow_failure = v.allow_failure
		FROM unnest($2::text[], $3::text[], $4::int[], $5::int[], $6::text[], $7::text[],
			$8::timestamptz[], $9::timestamptz[], $10::timestamptz[], $11::timestamptz[], $12::text[], $13::bool[])
			AS v(job_id, state, attempt, exit_code, reason, runner, ready_at, queued_at, started_at, finished_at, result, allow_failure)
		WHERE j.run_id = $1 AND j.job_id = v.job_id`,
		runID, c.ids, c.states, c.attempts, c.exitCodes, c.reasons, c.runners, c.ready, c.queued, c.started, c.finished, c.results, c.allowed)
	return nil
}

func (s *PostgresStore) OutboxPending(ctx context.Context, limit int) ([]*OutboxEvent, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, type, run_id, pipeline, sha, job_id, attempt, state, reason, created_at
		FROM outbox WHERE published_at IS NULL ORDER BY seq LIMIT $1`, limit)
	if err != nil {
		return nil, interpretError(err)
	}
	defer rows.Close()
	var out []*OutboxEvent
	for rows.Next() {
		e := &OutboxEvent{}
		if err := rows.Scan(&e.ID, &e.Type, &e.RunID, &e.Pipeline, &e.SHA, &e.JobID, &e.Attempt, &e.State, &e.Reason, &e.CreatedAt); err != nil {
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

// jobRow are the columns of a job's row (in jobs or job_attempts) that
// scanJob reads.
const jobRow = `state, attempt, exit_code, reason, runner, ready_at, queued_at, started_at, finished_at, result, allow_failure`

// scanJob scans a row of lead's columns then jobRow's into lead and j
// with scan (a row's or rows' Scan).
func scanJob(scan func(dest ...any) error, j *Job, lead ...any) error {
	var ready, queued, started, finished *time.Time
	var result []byte
	if err := scan(append(lead, &j.State, &j.Attempt, &j.ExitCode, &j.Reason, &j.Runner, &ready, &queued, &started, &finished, &result,
		&j.FailureAllowed)...); err != nil {
		return interpretError(err)
	}
	j.ReadyAt, j.QueuedAt, j.StartedAt, j.FinishedAt = deref(ready), deref(queued), deref(started), deref(finished)
	var err error
	j.Result, err = decodeResult(result)
	return err
}

// jsonText is b as a text parameter that SQL casts to jsonb: NULL for nil.
func jsonText(b []byte) *string {
	if b == nil {
		return nil
	}
	t := string(b)
	return &t
}

// encodeResult is the stored form of a job's result, a text parameter
// that SQL casts to jsonb: NULL for none.
func encodeResult(r *JobResult) (*string, error) {
	if r == nil {
		return nil, nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("dag: job result: %w: %v", ErrInvalidParams, err)
	}
	return jsonText(b), nil
}

// decodeResult reads what encodeResult wrote.
func decodeResult(b []byte) (*JobResult, error) {
	if b == nil {
		return nil, nil
	}
	r := &JobResult{}
	if err := json.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("dag: stored job result: %w", err)
	}
	return r, nil
}
