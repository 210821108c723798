package dag_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/internal/pgtest"
	"github.com/cikit/cikit/internal/redistest"
)

// pairSpecs is a run of n jobs: n/2 jobs a-i that need nothing, each
// needed by one job b-i. Completing a-i makes exactly b-i READY, however
// large the run.
func pairSpecs(n int) []*cikit.JobSpec {
	step := []cikit.Step{{Run: "true"}}
	specs := make([]*cikit.JobSpec, 0, n)
	for i := range n / 2 {
		specs = append(specs, &cikit.JobSpec{ID: fmt.Sprintf("a-%d", i), Steps: step})
	}
	for i := range n / 2 {
		specs = append(specs, &cikit.JobSpec{ID: fmt.Sprintf("b-%d", i), Needs: []string{fmt.Sprintf("a-%d", i)}, Steps: step})
	}
	return specs
}

// rowCounter is a pgx tracer that counts the statements a pool runs and
// the rows they touch: rows a SELECT returns and rows an INSERT, UPDATE
// or DELETE writes, as PostgreSQL's command tags say.
type rowCounter struct {
	mu         sync.Mutex
	statements int
	rows       int64
}

func (c *rowCounter) add(tag interface{ RowsAffected() int64 }) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.statements++
	c.rows += tag.RowsAffected()
}

func (c *rowCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (c *rowCounter) TraceQueryEnd(_ context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	c.add(d.CommandTag)
}

func (c *rowCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (c *rowCounter) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	c.add(d.CommandTag)
}

func (c *rowCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// reset returns the counts so far and starts again from zero.
func (c *rowCounter) reset() (statements int, rows int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	statements, rows = c.statements, c.rows
	c.statements, c.rows = 0, 0
	return statements, rows
}

// countedStore returns a migrated PostgreSQL store whose statements c
// counts, with Redis counters when redis is set.
func countedStore(t testing.TB, c *rowCounter, redis bool) *dag.PostgresStore {
	t.Helper()
	db := pgtest.New(t)
	cfg, err := pgxpool.ParseConfig(db.URL)
	require.NoError(t, err)
	cfg.ConnConfig.Tracer = c
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	pc := dag.PostgresConfig{Pool: pool}
	if redis {
		ns := redistest.New(t)
		pc.Redis, pc.KeyPrefix = ns.Client, ns.Prefix
	}
	s, err := dag.NewPostgresStore(pc)
	require.NoError(t, err)
	require.NoError(t, s.Migrate(t.Context()))
	return s
}

// cost is what one state change cost PostgreSQL.
type cost struct {
	Statements int
	Rows       int64
}

// stateChangeCosts runs the state changes of a scheduler's hot path on a
// run of n jobs (see pairSpecs) and returns what each cost. Each change
// is one a busy platform makes many times per run: a completion and the
// queueing of the job it made READY, a queueing another server made
// first, and a runner's claim (start) of a job of a cancelled run.
func stateChangeCosts(t *testing.T, redis bool, n int) map[string]cost {
	ctx := t.Context()
	c := &rowCounter{}
	s := countedStore(t, c, redis)
	apply := func(evs ...*dag.JobEvent) []*dag.JobEventResult {
		t.Helper()
		res, err := s.JobApply(ctx, evs)
		require.NoError(t, err)
		return res
	}
	run, err := s.RunCreate(ctx, &dag.RunCreateParams{Jobs: pairSpecs(n)})
	require.NoError(t, err)
	cancelled, err := s.RunCreate(ctx, &dag.RunCreateParams{Jobs: pairSpecs(n)})
	require.NoError(t, err)
	ev := func(kind dag.EventKind, runID, jobID string) *dag.JobEvent {
		return &dag.JobEvent{Kind: kind, RunID: runID, JobID: jobID, Attempt: 1, Runner: "r", Outcome: cikit.JobSucceeded}
	}
	// Two jobs of the run are running, and one of the other run waits
	// for a runner when the run is cancelled.
	for _, id := range []string{"a-0", "a-1"} {
		apply(ev(dag.EventQueue, run.ID, id))
		apply(ev(dag.EventStart, run.ID, id))
	}
	apply(ev(dag.EventQueue, cancelled.ID, "a-0"))
	_, err = s.RunCancel(ctx, cancelled.ID)
	require.NoError(t, err)

	out := map[string]cost{}
	measure := func(name string, f func()) {
		t.Helper()
		c.reset()
		f()
		st, rows := c.reset()
		out[name] = cost{st, rows}
	}
	// The first completion warms the pool's connections and prepared
	// statements; the second is measured.
	for k, id := range []string{"a-0", "a-1"} {
		measure("complete and queue what it made ready", func() {
			res := apply(ev(dag.EventComplete, run.ID, id))
			require.NoError(t, res[0].Err)
			require.Len(t, res[0].Changed, 2, "the completion makes its child ready")
			child := res[0].Changed[1]
			require.Equal(t, cikit.JobReady, child.State)
			res = apply(ev(dag.EventQueue, run.ID, child.ID()))
			require.NoError(t, res[0].Err)
		})
		if k == 0 {
			continue
		}
		measure("queue a job another server queued first", func() {
			res := apply(ev(dag.EventQueue, run.ID, "b-1"))
			require.ErrorIs(t, res[0].Err, cikit.ErrInvalidTransition)
		})
		measure("claim a job of a cancelled run", func() {
			res := apply(ev(dag.EventStart, cancelled.ID, "a-0"))
			require.ErrorIs(t, res[0].Err, cikit.ErrInvalidTransition)
		})
	}
	return out
}

// TestStateChangeCostIsIndependentOfRunSize checks that the state changes
// of the hot path cost PostgreSQL the same statements and rows in a run of
// 10 jobs and in a run of 1,000: each reads and writes what it changes,
// never the whole run. (A refused event used to read every job of its run
// under the run's exclusive lock, so a cancelled 10,000-job run cost
// 10,000 rows per stale claim of its jobs.)
func TestStateChangeCostIsIndependentOfRunSize(t *testing.T) {
	t.Parallel()
	for _, redis := range []bool{false, true} {
		t.Run(fmt.Sprintf("redis=%v", redis), func(t *testing.T) {
			t.Parallel()
			small, large := stateChangeCosts(t, redis, 10), stateChangeCosts(t, redis, 1000)
			require.Equal(t, small, large, "costs in a run of 10 jobs, then of 1,000")
		})
	}
}

// BenchmarkJobComplete measures one job completion and the queueing of
// the job it makes READY (what a runner's completion costs the platform's
// store) in runs of 10, 1,000 and 10,000 jobs, on PostgreSQL with Redis
// counters. Runs are created, and their first jobs started, outside the
// timer. The target is a flat line: the cost of a completion does not
// depend on the size of its run.
func BenchmarkJobComplete(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			ctx := context.Background()
			s := newPostgresStore(b, nil, redistest.New(b))
			var runID string
			next := n / 2 // jobs a-0 … a-(n/2-1) of the current run are running
			prepare := func() {
				run, err := s.RunCreate(ctx, &dag.RunCreateParams{Jobs: pairSpecs(n)})
				if err != nil {
					b.Fatal(err)
				}
				runID, next = run.ID, 0
				for _, kind := range []dag.EventKind{dag.EventQueue, dag.EventStart} {
					for lo := 0; lo < n/2; lo += 500 {
						var evs []*dag.JobEvent
						for i := lo; i < min(lo+500, n/2); i++ {
							evs = append(evs, &dag.JobEvent{Kind: kind, RunID: runID, JobID: fmt.Sprintf("a-%d", i), Attempt: 1, Runner: "r"})
						}
						res, err := s.JobApply(ctx, evs)
						if err != nil {
							b.Fatal(err)
						}
						for _, r := range res {
							if r.Err != nil {
								b.Fatal(r.Err)
							}
						}
					}
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if next == n/2 {
					b.StopTimer()
					prepare()
					b.StartTimer()
				}
				res, err := s.JobComplete(ctx, &dag.JobCompleteParams{RunID: runID, JobID: fmt.Sprintf("a-%d", next), Attempt: 1, Outcome: cikit.JobSucceeded})
				if err != nil {
					b.Fatal(err)
				}
				if len(res.Changed) != 2 {
					b.Fatalf("completion changed %d jobs, want 2", len(res.Changed))
				}
				if _, err := s.JobQueue(ctx, &dag.JobTransitionParams{RunID: runID, JobID: res.Changed[1].ID(), Attempt: 1}); err != nil {
					b.Fatal(err)
				}
				next++
			}
		})
	}
}
