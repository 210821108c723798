package dag_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/internal/pgtest"
	"github.com/cikit/cikit/internal/redistest"
)

// crashSpecs is build -> t0..t4 -> report -> publish, and cleanup (always)
// after publish: fast completions, a job with many needs, and the locked
// path for the end of the run and the always job.
func crashSpecs() []*cikit.JobSpec {
	step := []cikit.Step{{Run: "true"}}
	specs := []*cikit.JobSpec{{ID: "build", Steps: step}}
	var tests []string
	for i := range 5 {
		id := fmt.Sprintf("t%d", i)
		tests = append(tests, id)
		specs = append(specs, &cikit.JobSpec{ID: id, Needs: []string{"build"}, Steps: step, AllowFailure: i == 3})
	}
	return append(specs,
		&cikit.JobSpec{ID: "report", Needs: tests, Steps: step},
		&cikit.JobSpec{ID: "publish", Needs: []string{"report"}, Steps: step},
		&cikit.JobSpec{ID: "cleanup", Needs: []string{"publish"}, When: cikit.WhenAlways, Steps: step},
	)
}

var errCrash = errors.New("injected crash")

// drive moves a run to its end like a scheduler worker: it reads the
// jobs, applies the next event of every job that can move as one batch,
// and repeats. failing jobs fail, the others succeed. When a batch fails
// (a crash), the worker is replaced by a new store over the same
// databases, with no memory of the old one, which delivers the failed
// batch's completions again, as a message bus redelivers unacknowledged
// events.
func drive(t *testing.T, store dag.Store, restart func() dag.Store, runID string, failing map[string]bool) (crashes int) {
	ctx := context.Background()
	var redeliver []*dag.JobEvent
	for range 100 {
		jobs, err := store.JobList(ctx, runID)
		require.NoError(t, err)
		batch := redeliver
		redeliver = nil
		for _, j := range jobs {
			e := &dag.JobEvent{RunID: runID, JobID: j.ID(), Attempt: j.Attempt}
			switch j.State {
			case cikit.JobReady:
				e.Kind = dag.EventQueue
			case cikit.JobQueued:
				e.Kind, e.Runner = dag.EventStart, "r1"
			case cikit.JobRunning:
				e.Kind, e.Outcome = dag.EventComplete, cikit.JobSucceeded
				if failing[j.ID()] {
					e.Outcome, e.ExitCode, e.FailureClass = cikit.JobFailed, 1, cikit.FailureScript
				}
			default:
				continue
			}
			batch = append(batch, e)
		}
		if len(batch) == 0 {
			return crashes
		}
		results, err := store.JobApply(ctx, batch)
		if err != nil {
			require.ErrorIs(t, err, errCrash)
			crashes++
			store = restart()
			for _, e := range batch {
				if e.Kind == dag.EventComplete {
					redeliver = append(redeliver, e)
				}
			}
			continue
		}
		for i, r := range results {
			require.NoError(t, r.Err, "%v %s", batch[i].Kind, batch[i].JobID)
		}
	}
	t.Fatal("the run did not end in 100 batches")
	return crashes
}

// TestPostgresStoreCrash kills the scheduler between two steps of
// handling events — before a fast write commits, after it committed but
// before Redis counted its completions down, after counting but before
// the jobs that became ready were written, after a locked write wrote
// but before it committed — at the first or second time that step
// comes, with and without Redis. A new scheduler, redelivered the
// completions, finishes the run: the final states are those of a run
// without crashes, every job ran exactly once (one attempt, one
// job.started event), and the Redis counters equal the recount.
func TestPostgresStoreCrash(t *testing.T) {
	t.Parallel()
	for _, outcome := range []struct {
		name    string
		failing map[string]bool
	}{
		{"AllowedFailure", map[string]bool{"t3": true}},
		{"RequiredFailure", map[string]bool{"publish": true}},
	} {
		want := finalStates(t, outcome.failing)
		for _, withRedis := range []bool{false, true} {
			steps := []string{"fast:written", "slow:written"}
			if withRedis {
				steps = append(steps, "fast:committed", "fast:counted")
			}
			for _, step := range steps {
				for nth := 1; nth <= 2; nth++ {
					name := fmt.Sprintf("%s/redis=%v/%s/%d", outcome.name, withRedis, step, nth)
					t.Run(name, func(t *testing.T) {
						t.Parallel()
						crashAt(t, withRedis, step, nth, outcome.failing, want)
					})
				}
			}
		}
	}
}

// finalStates runs crashSpecs on the memory store without crashes.
func finalStates(t *testing.T, failing map[string]bool) map[string]cikit.JobState {
	store := dag.NewMemoryStore(dag.MemoryConfig{})
	run, err := store.RunCreate(t.Context(), &dag.RunCreateParams{Jobs: crashSpecs()})
	require.NoError(t, err)
	require.Zero(t, drive(t, store, nil, run.ID, failing))
	jobs, err := store.JobList(t.Context(), run.ID)
	require.NoError(t, err)
	out := make(map[string]cikit.JobState)
	for _, j := range jobs {
		out[j.ID()] = j.State
	}
	return out
}

func crashAt(t *testing.T, withRedis bool, step string, nth int, failing map[string]bool, want map[string]cikit.JobState) {
	ctx := t.Context()
	db := pgtest.New(t)
	cfg := dag.PostgresConfig{Pool: db.Pool}
	if withRedis {
		ns := redistest.New(t)
		cfg.Redis, cfg.KeyPrefix = ns.Client, ns.Prefix
	}
	newStore := func() *dag.PostgresStore {
		s, err := dag.NewPostgresStore(cfg)
		require.NoError(t, err)
		return s
	}
	first := newStore()
	require.NoError(t, first.Migrate(ctx))
	seen := 0
	dag.SetFault(first, func(s string) error {
		if s == step {
			if seen++; seen == nth {
				return errCrash
			}
		}
		return nil
	})
	run, err := first.RunCreate(ctx, &dag.RunCreateParams{Jobs: crashSpecs()})
	require.NoError(t, err)
	var last *dag.PostgresStore
	crashes := drive(t, first, func() dag.Store { last = newStore(); return last }, run.ID, failing)
	require.Equal(t, 1, crashes, "the fault fired once")

	jobs, err := last.JobList(ctx, run.ID)
	require.NoError(t, err)
	for _, j := range jobs {
		require.Equal(t, want[j.ID()], j.State, "job %s", j.ID())
		require.Equal(t, 1, j.Attempt, "job %s ran once", j.ID())
		attempts, err := last.JobAttempts(ctx, run.ID, j.ID())
		require.NoError(t, err)
		require.Len(t, attempts, 1, "job %s has one ended attempt", j.ID())
	}
	started := map[string]int{}
	for {
		evs, err := last.OutboxPending(ctx, 100)
		require.NoError(t, err)
		if len(evs) == 0 {
			break
		}
		var ids []string
		for _, e := range evs {
			if e.Type == dag.EventJobStarted {
				started[e.JobID]++
			}
			ids = append(ids, e.ID)
		}
		require.NoError(t, last.OutboxMarkPublished(ctx, ids))
	}
	for _, j := range jobs {
		n := 0
		if j.State != cikit.JobSkipped {
			n = 1
		}
		require.Equal(t, n, started[j.ID()], "job.started events of %s", j.ID())
	}
	r, err := last.RunGet(ctx, run.ID)
	require.NoError(t, err)
	require.True(t, r.State.Terminal())
	if withRedis {
		counters, err := last.DependencyCounters(ctx, run.ID)
		require.NoError(t, err)
		g, err := dag.FromSpecs(crashSpecs())
		require.NoError(t, err)
		for i, j := range jobs {
			if len(g.Parents(i)) == 0 {
				continue
			}
			unsatisfied := 0
			for _, p := range g.Parents(i) {
				if !dag.Satisfied(jobs[p].State, g.Node(p).AllowFailure) {
					unsatisfied++
				}
			}
			require.Equal(t, unsatisfied, counters[j.ID()], "counter of %s", j.ID())
		}
	}
}
