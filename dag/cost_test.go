package dag_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/dag/dagtest"
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

// redisCounter is a go-redis hook that counts the commands a client
// sends, each command of a pipeline one.
type redisCounter struct {
	mu       sync.Mutex
	commands int
}

func (c *redisCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *redisCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count(1)
		return next(ctx, cmd)
	}
}

func (c *redisCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.count(len(cmds))
		return next(ctx, cmds)
	}
}

func (c *redisCounter) count(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.commands += n
}

func (c *redisCounter) reset() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.commands
	c.commands = 0
	return n
}

// countedStore returns a migrated PostgreSQL store whose statements c
// counts, with Redis counters, whose commands rc counts, when rc is set.
func countedStore(t testing.TB, c *rowCounter, rc *redisCounter) *dag.PostgresStore {
	t.Helper()
	db := pgtest.New(t)
	cfg, err := pgxpool.ParseConfig(db.URL)
	require.NoError(t, err)
	cfg.ConnConfig.Tracer = c
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	pc := dag.PostgresConfig{Pool: pool, Expander: dagtest.ListExpander, MaxJobs: 2000}
	if rc != nil {
		ns := redistest.New(t)
		ns.Client.AddHook(rc)
		pc.Redis, pc.KeyPrefix = ns.Client, ns.Prefix
	}
	s, err := dag.NewPostgresStore(pc)
	require.NoError(t, err)
	require.NoError(t, s.Migrate(t.Context()))
	return s
}

// cost is what one state change cost PostgreSQL and Redis.
type cost struct {
	Statements    int
	Rows          int64
	RedisCommands int
}

// worldSpecs is pairSpecs(n), n at least 12, and four jobs more: report, of When always,
// needs a-4, deploy is in a concurrency group, and fan is the placeholder
// of a run-time matrix of 3 variants that needs setup. Job a-5 has a
// timeout of a minute.
func worldSpecs(n int) []*cikit.JobSpec {
	specs := pairSpecs(n)
	specs[5].Timeout = time.Minute
	return append(specs,
		&cikit.JobSpec{ID: "report", Needs: []string{"a-4"}, When: cikit.WhenAlways, Steps: []cikit.Step{{Run: "true"}}},
		&cikit.JobSpec{ID: "deploy", Concurrency: &cikit.Concurrency{Group: "prod"}, Steps: []cikit.Step{{Run: "true"}}},
		&cikit.JobSpec{ID: "setup", Steps: []cikit.Step{{Run: "true"}}},
		dagtest.Placeholder("fan", dagtest.ListExpand{List: []string{"x", "y", "z"}}, "setup"))
}

// stateChangeCosts runs state changes on runs of about n jobs (see
// worldSpecs) and returns what each cost. They are those of a scheduler's
// hot path, which a busy platform makes many times per run: a completion
// and the queueing of the job it made READY, a queueing another server
// made first, and a runner's claim (start) of a job of a cancelled run;
// and those of the locked path: a failure, a failure retried, a
// completion an always job waits for, a concurrency group's job queued,
// started and completed, a job expired, the completion that expands a
// placeholder into 3 variants and that of the variant that ends it, and
// the completion that ends a run.
func stateChangeCosts(t *testing.T, redis bool, n int) map[string]cost {
	ctx := t.Context()
	c := &rowCounter{}
	var rc *redisCounter
	if redis {
		rc = &redisCounter{}
	}
	s := countedStore(t, c, rc)
	apply := func(evs ...*dag.JobEvent) []*dag.JobEventResult {
		t.Helper()
		res, err := s.JobApply(ctx, evs)
		require.NoError(t, err)
		return res
	}
	run, err := s.RunCreate(ctx, &dag.RunCreateParams{Jobs: worldSpecs(n)})
	require.NoError(t, err)
	cancelled, err := s.RunCreate(ctx, &dag.RunCreateParams{Jobs: pairSpecs(n)})
	require.NoError(t, err)
	ending, err := s.RunCreate(ctx, &dag.RunCreateParams{Jobs: pairSpecs(n)})
	require.NoError(t, err)
	ev := func(kind dag.EventKind, runID, jobID string) *dag.JobEvent {
		return &dag.JobEvent{Kind: kind, RunID: runID, JobID: jobID, Attempt: 1, Runner: "r", Outcome: cikit.JobSucceeded}
	}
	// Jobs a-0 … a-5 of the run are running, and one of the other run
	// waits for a runner when that run is cancelled.
	for i := range 6 {
		id := fmt.Sprintf("a-%d", i)
		apply(ev(dag.EventQueue, run.ID, id))
		apply(ev(dag.EventStart, run.ID, id))
	}
	apply(ev(dag.EventQueue, run.ID, "setup"))
	apply(ev(dag.EventStart, run.ID, "setup"))
	apply(ev(dag.EventQueue, cancelled.ID, "a-0"))
	_, err = s.RunCancel(ctx, cancelled.ID)
	require.NoError(t, err)
	// Every job of the ending run but b-0 has succeeded, and b-0 runs.
	var as, bs []string
	for i := range n / 2 {
		as = append(as, fmt.Sprintf("a-%d", i))
		if i > 0 {
			bs = append(bs, fmt.Sprintf("b-%d", i))
		}
	}
	for _, ids := range [][]string{as, bs} {
		for _, kind := range []dag.EventKind{dag.EventQueue, dag.EventStart, dag.EventComplete} {
			for lo := 0; lo < len(ids); lo += 500 {
				var evs []*dag.JobEvent
				for _, id := range ids[lo:min(lo+500, len(ids))] {
					evs = append(evs, ev(kind, ending.ID, id))
				}
				for _, r := range apply(evs...) {
					require.NoError(t, r.Err)
				}
			}
		}
	}
	apply(ev(dag.EventQueue, ending.ID, "b-0"))
	apply(ev(dag.EventStart, ending.ID, "b-0"))

	out := map[string]cost{}
	measure := func(name string, f func()) {
		t.Helper()
		c.reset()
		if rc != nil {
			rc.reset()
		}
		f()
		st, rows := c.reset()
		cst := cost{Statements: st, Rows: rows}
		if rc != nil {
			cst.RedisCommands = rc.reset()
		}
		out[name] = cst
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
	changed := func(res *dag.JobEventResult) map[string]cikit.JobState {
		t.Helper()
		require.NoError(t, res.Err)
		m := map[string]cikit.JobState{}
		for _, j := range res.Changed {
			m[j.ID()] = j.State
		}
		return m
	}
	measure("fail a job, skipping the job that needs it", func() {
		e := ev(dag.EventComplete, run.ID, "a-2")
		e.Outcome, e.FailureClass = cikit.JobFailed, cikit.FailureScript
		require.Equal(t, map[string]cikit.JobState{"a-2": cikit.JobFailed, "b-2": cikit.JobSkipped}, changed(apply(e)[0]))
	})
	measure("retry a job that failed for the infrastructure", func() {
		e := ev(dag.EventComplete, run.ID, "a-3")
		e.Outcome, e.FailureClass = cikit.JobFailed, cikit.FailureInfrastructure
		require.Equal(t, map[string]cikit.JobState{"a-3": cikit.JobReady}, changed(apply(e)[0]))
	})
	measure("complete a job an always job needs", func() {
		require.Equal(t, map[string]cikit.JobState{"a-4": cikit.JobSucceeded, "b-4": cikit.JobReady, "report": cikit.JobReady},
			changed(apply(ev(dag.EventComplete, run.ID, "a-4"))[0]))
	})
	measure("queue, start and complete a job of a concurrency group", func() {
		for _, kind := range []dag.EventKind{dag.EventQueue, dag.EventStart, dag.EventComplete} {
			require.Contains(t, changed(apply(ev(kind, run.ID, "deploy"))[0]), "deploy")
		}
	})
	measure("expire a job past its timeout", func() {
		res, err := s.JobsExpire(ctx, &dag.ExpireParams{Now: time.Now().Add(time.Hour)})
		require.NoError(t, err)
		require.Len(t, res, 1, "a-5 is the one job past its timeout")
		require.Equal(t, "a-5", res[0].Changed[0].ID())
	})
	measure("complete the job a placeholder needs, expanding it into 3 variants", func() {
		require.Equal(t, map[string]cikit.JobState{"setup": cikit.JobSucceeded, "fan (x)": cikit.JobReady, "fan (y)": cikit.JobReady,
			"fan (z)": cikit.JobReady}, changed(apply(ev(dag.EventComplete, run.ID, "setup"))[0]))
	})
	for _, kind := range []dag.EventKind{dag.EventQueue, dag.EventStart} {
		for _, r := range apply(ev(kind, run.ID, "fan (x)"), ev(kind, run.ID, "fan (y)"), ev(kind, run.ID, "fan (z)")) {
			require.NoError(t, r.Err)
		}
	}
	apply(ev(dag.EventComplete, run.ID, "fan (x)"), ev(dag.EventComplete, run.ID, "fan (y)"))
	measure("complete the last variant, ending its placeholder", func() {
		require.Equal(t, map[string]cikit.JobState{"fan (z)": cikit.JobSucceeded, "fan": cikit.JobSucceeded},
			changed(apply(ev(dag.EventComplete, run.ID, "fan (z)"))[0]))
	})
	measure("the completion that ends a run", func() {
		res := apply(ev(dag.EventComplete, ending.ID, "b-0"))
		require.NoError(t, res[0].Err)
		require.Equal(t, cikit.RunSucceeded, res[0].Run.State)
	})
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
			small, large := stateChangeCosts(t, redis, 12), stateChangeCosts(t, redis, 1000)
			require.Len(t, large, 11)
			require.Equal(t, small, large, "costs in runs of about 12 jobs, then of 1,000")
		})
	}
}

// BenchmarkJobComplete measures one job completion and the queueing of
// the job it makes READY (what a runner's completion costs the platform's
// store) in runs of 10, 1,000 and 10,000 jobs, on PostgreSQL with Redis
// counters; and, on the locked path, one failure, which skips the job
// that needs the failed one. Runs are created, and their first jobs
// started, outside the timer. The target is a flat line: the cost of a
// completion does not depend on the size of its run.
func BenchmarkJobComplete(b *testing.B) {
	for _, c := range []struct {
		n       int
		outcome cikit.JobState
	}{{10, cikit.JobSucceeded}, {1000, cikit.JobSucceeded}, {10000, cikit.JobSucceeded},
		{10, cikit.JobFailed}, {1000, cikit.JobFailed}, {10000, cikit.JobFailed}} {
		n := c.n
		name := fmt.Sprintf("jobs=%d", n)
		if c.outcome == cikit.JobFailed {
			name = fmt.Sprintf("failure/jobs=%d", n)
		}
		b.Run(name, func(b *testing.B) {
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
				res, err := s.JobComplete(ctx, &dag.JobCompleteParams{RunID: runID, JobID: fmt.Sprintf("a-%d", next), Attempt: 1,
					Outcome: c.outcome, FailureClass: cikit.FailureScript})
				if err != nil {
					b.Fatal(err)
				}
				if len(res.Changed) != 2 {
					b.Fatalf("completion changed %d jobs, want 2", len(res.Changed))
				}
				if c.outcome == cikit.JobSucceeded {
					if _, err := s.JobQueue(ctx, &dag.JobTransitionParams{RunID: runID, JobID: res.Changed[1].ID(), Attempt: 1}); err != nil {
						b.Fatal(err)
					}
				}
				next++
			}
		})
	}
}
