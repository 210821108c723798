package dag_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/dag/dagtest"
	"github.com/cikit/cikit/internal/pgtest"
	"github.com/cikit/cikit/internal/redistest"
)

// newPostgresStore returns a migrated store in a schema of its own, with
// dependency counters in a Redis namespace of its own when ns is not nil.
func newPostgresStore(t testing.TB, now func() time.Time, ns *redistest.NS) *dag.PostgresStore {
	t.Helper()
	return newPostgresStoreWith(t, dag.PostgresConfig{Now: now}, ns)
}

// newPostgresStoreWith is newPostgresStore with the rest of cfg (its
// Pool and Redis are the test's).
func newPostgresStoreWith(t testing.TB, cfg dag.PostgresConfig, ns *redistest.NS) *dag.PostgresStore {
	t.Helper()
	db := pgtest.New(t)
	cfg.Pool = db.Pool
	if ns != nil {
		cfg.Redis, cfg.KeyPrefix = ns.Client, ns.Prefix
	}
	s, err := dag.NewPostgresStore(cfg)
	require.NoError(t, err)
	require.NoError(t, s.Migrate(t.Context()))
	return s
}

// redisIf is a Redis namespace of the test's when with is set, else nil.
func redisIf(t testing.TB, with bool) *redistest.NS {
	if !with {
		return nil
	}
	return redistest.New(t)
}

// TestPostgresStore runs the Store conformance suite on PostgreSQL, each
// store in a schema of its own: alone, and with Redis counters.
func TestPostgresStore(t *testing.T) {
	t.Parallel()
	t.Run("PostgreSQL", func(t *testing.T) {
		t.Parallel()
		dagtest.Exercise(t, func(t *testing.T, now func() time.Time) dag.Store {
			s := newPostgresStore(t, now, nil)
			require.NoError(t, s.Migrate(t.Context()), "migrating twice is a no-op")
			return s
		})
	})
	t.Run("Redis", func(t *testing.T) {
		t.Parallel()
		dagtest.Exercise(t, func(t *testing.T, now func() time.Time) dag.Store {
			return newPostgresStore(t, now, redistest.New(t))
		})
	})
}

// TestPostgresStoreExpand runs the suite of run-time matrices on
// PostgreSQL, alone and with Redis counters (which the suite checks
// against a recount at the end of each case).
func TestPostgresStoreExpand(t *testing.T) {
	t.Parallel()
	for _, withRedis := range []bool{false, true} {
		t.Run(map[bool]string{false: "PostgreSQL", true: "Redis"}[withRedis], func(t *testing.T) {
			t.Parallel()
			dagtest.ExerciseExpand(t, func(t *testing.T, now func() time.Time, expander dag.Expander, maxJobs int) dag.Store {
				return newPostgresStoreWith(t, dag.PostgresConfig{Now: now, Expander: expander, MaxJobs: maxJobs}, redisIf(t, withRedis))
			})
		})
	}
}

// TestPostgresStoreDecide runs the suite of run-time conditions on
// PostgreSQL, alone and with Redis counters.
func TestPostgresStoreDecide(t *testing.T) {
	t.Parallel()
	for _, withRedis := range []bool{false, true} {
		t.Run(map[bool]string{false: "PostgreSQL", true: "Redis"}[withRedis], func(t *testing.T) {
			t.Parallel()
			dagtest.ExerciseDecide(t, func(t *testing.T, now func() time.Time, expander dag.Expander, decider dag.Decider) dag.Store {
				return newPostgresStoreWith(t, dag.PostgresConfig{Now: now, Expander: expander, Decider: decider}, redisIf(t, withRedis))
			})
		})
	}
}

func TestNewPostgresStoreValidates(t *testing.T) {
	t.Parallel()
	_, err := dag.NewPostgresStore(dag.PostgresConfig{})
	require.ErrorContains(t, err, "Pool is required")
	db := pgtest.New(t)
	_, err = dag.NewPostgresStore(dag.PostgresConfig{Pool: db.Pool, CounterTTL: -time.Second})
	require.ErrorContains(t, err, "CounterTTL is negative")
}

// TestPostgresStoreRules runs the rules state machine on PostgreSQL, with
// fewer runs than on the memory store: each costs real round trips. With
// Redis, the rules also lose the counters at random (a FLUSHALL of the
// store's namespace) and repair them, checking the counters against a
// recount after every step.
func TestPostgresStoreRules(t *testing.T) {
	t.Parallel()
	runs := 100
	if testing.Short() {
		runs = 5
	}
	t.Run("PostgreSQL", func(t *testing.T) {
		t.Parallel()
		dagtest.Rules(t, func(t *testing.T, now func() time.Time) dag.Store {
			return newPostgresStore(t, now, nil)
		}, dagtest.RulesConfig{Runs: runs})
	})
	t.Run("Redis", func(t *testing.T) {
		t.Parallel()
		var ns *redistest.NS
		dagtest.Rules(t, func(t *testing.T, now func() time.Time) dag.Store {
			ns = redistest.New(t)
			return newPostgresStore(t, now, ns)
		}, dagtest.RulesConfig{Runs: runs, Flush: func(ctx context.Context) error { return ns.Flush(ctx) }})
	})
}

func TestPostgresStoreRunCreateManyTx(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newPostgresStore(t, nil, nil)
	db := s.Pool()
	before, err := s.RunCreate(ctx, &dag.RunCreateParams{Jobs: pipeline(), IdempotencyKey: "old"})
	require.NoError(t, err)
	var runs []*dag.Run
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		runs, err = s.RunCreateManyTx(ctx, tx, []*dag.RunCreateParams{
			{Jobs: pipeline(), IdempotencyKey: "a", Pipeline: "acme/api:.cikit.yml", Branch: "main"},
			{Jobs: pipeline()},
			{Jobs: pipeline(), IdempotencyKey: "a"},
			{Jobs: pipeline(), IdempotencyKey: "old"},
		})
		return err
	})
	require.NoError(t, err)
	require.Len(t, runs, 4)
	require.Equal(t, runs[0].ID, runs[2].ID, "a key repeated in the batch returns the batch's run")
	require.Equal(t, before.ID, runs[3].ID, "a key used before returns that run")
	require.NotEqual(t, runs[0].ID, runs[1].ID)
	require.Equal(t, []int64{1, 2, 1, 1}, []int64{runs[0].Number, runs[1].Number, runs[2].Number, runs[3].Number},
		"each pipeline's runs are numbered, the runs created before counted")
	for _, r := range runs[:2] {
		got, err := s.RunGet(ctx, r.ID)
		require.NoError(t, err)
		require.Equal(t, r.Pipeline, got.Pipeline)
		require.Equal(t, r.Number, got.Number)
		jobs, err := s.JobList(ctx, r.ID)
		require.NoError(t, err)
		require.Len(t, jobs, 4)
		require.Equal(t, cikit.JobReady, jobs[0].State)
		require.Equal(t, cikit.JobPending, jobs[3].State)
	}
	res := advanceAll(t, s, runs[1].ID)
	require.Equal(t, cikit.RunSucceeded, res.State, "the needs were written: the run goes to its end")

	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		runs, err = s.RunCreateManyTx(ctx, tx, []*dag.RunCreateParams{
			{Jobs: pipeline(), Pipeline: "acme/api:.cikit.yml", Branch: "a", Supersede: dag.SupersedeNever},
			{Jobs: pipeline(), Pipeline: "acme/web:.cikit.yml", Branch: "a", Supersede: dag.SupersedeNever},
			{Jobs: pipeline(), Pipeline: "acme/api:.cikit.yml", Branch: "b", Supersede: dag.SupersedeNever},
		})
		return err
	})
	require.NoError(t, err)
	require.Equal(t, []int64{2, 1, 3}, []int64{runs[0].Number, runs[1].Number, runs[2].Number}, "a batch's runs of a pipeline are numbered in its order")

	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		_, err := s.RunCreateManyTx(ctx, tx, []*dag.RunCreateParams{{Jobs: pipeline(), IdempotencyKey: "b"},
			{Jobs: []*cikit.JobSpec{{ID: "a", Needs: []string{"nope"}}}}})
		return err
	})
	require.ErrorContains(t, err, "dag: run 1:")
	var n int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys WHERE key = 'b'`).Scan(&n))
	require.Zero(t, n, "nothing of a failed call is written")
}

// advanceAll drives every job of a run to success, in plan order, and
// returns the run.
func advanceAll(t *testing.T, s dag.Store, runID string) *dag.Run {
	t.Helper()
	ctx := t.Context()
	for range 10 {
		jobs, err := s.JobList(ctx, runID)
		require.NoError(t, err)
		for _, j := range jobs {
			if j.State != cikit.JobReady {
				continue
			}
			p := &dag.JobTransitionParams{RunID: runID, JobID: j.ID(), Attempt: j.Attempt}
			_, err := s.JobQueue(ctx, p)
			require.NoError(t, err)
			_, err = s.JobStart(ctx, p)
			require.NoError(t, err)
			_, err = s.JobComplete(ctx, &dag.JobCompleteParams{RunID: runID, JobID: j.ID(), Attempt: j.Attempt, Outcome: cikit.JobSucceeded})
			require.NoError(t, err)
		}
	}
	run, err := s.RunGet(ctx, runID)
	require.NoError(t, err)
	return run
}

// TestPostgresStoreRefusesInvalidText: IDs PostgreSQL's text cannot hold
// (a NUL byte, invalid UTF-8) are the caller's mistake, matching
// ErrInvalidParams, not a failure of the store to retry. (Before, they
// came back as PostgreSQL's raw error, which callers answered 503.)
func TestPostgresStoreRefusesInvalidText(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newPostgresStore(t, nil, nil)
	run, err := s.RunCreate(ctx, &dag.RunCreateParams{Pipeline: "p", Jobs: []*cikit.JobSpec{{ID: "build"}}})
	require.NoError(t, err)
	for _, id := range []string{"\x00", "run\xff"} {
		_, err := s.RunGet(ctx, id)
		require.ErrorIs(t, err, dag.ErrInvalidParams, "RunGet %q", id)
		_, err = s.JobList(ctx, id)
		require.ErrorIs(t, err, dag.ErrInvalidParams, "JobList %q", id)
		_, err = s.RunCancel(ctx, id)
		require.ErrorIs(t, err, dag.ErrInvalidParams, "RunCancel %q", id)
		_, err = s.JobGet(ctx, id, "build")
		require.ErrorIs(t, err, dag.ErrInvalidParams, "JobGet %q", id)
		// A job is looked up in its run's graph, which has none such.
		_, err = s.JobAttempts(ctx, run.ID, id)
		require.ErrorIs(t, err, cikit.ErrNotFound, "JobAttempts %q", id)
	}
}
