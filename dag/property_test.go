package dag_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/dag/dagtest"
)

// TestPropertyStoreRules runs the store rules state machine of dagtest on
// the memory store: 1,000 random runs by default (see TestMain).
func TestPropertyStoreRules(t *testing.T) {
	t.Parallel()
	dagtest.Rules(t, func(t *testing.T, now func() time.Time) dag.Store {
		return dag.NewMemoryStore(dag.MemoryConfig{Now: now})
	}, dagtest.RulesConfig{Runs: 1 << 30})
}

// TestPropertyDriver runs random DAGs through the Driver with a concurrent
// executor whose outcomes are drawn up front, and checks that:
//
//   - SAFETY: at most Parallel jobs run at once, and each job executes at
//     most once;
//   - SAFETY: no job starts before its needs are satisfied;
//   - LIVENESS: Drive returns with every job terminal;
//   - the final states are the ones the outcomes imply, whatever the
//     interleaving: a job runs and ends with its outcome iff none of its
//     needs blocks it (always: whatever its needs did; on_failure: iff
//     one of them did not succeed), else it is SKIPPED.
func TestPropertyDriver(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		specs := dagtest.GenSpecs(t, 24)
		g, _ := dag.FromSpecs(specs)
		parallel := rapid.IntRange(1, 4).Draw(t, "parallel")
		outcomes := make(map[string]cikit.JobState, len(specs))
		for _, s := range specs {
			outcomes[s.ID] = rapid.SampledFrom([]cikit.JobState{cikit.JobSucceeded, cikit.JobSucceeded, cikit.JobFailed}).Draw(t, "outcome "+s.ID)
		}
		store := dag.NewMemoryStore(dag.MemoryConfig{})
		var mu sync.Mutex
		executions := map[string]int{}
		live := map[string]cikit.JobState{}
		running, maxRunning := 0, 0
		var violation error
		d, err := dag.NewDriver(dag.DriverConfig{
			Store:    store,
			Parallel: parallel,
			Executor: dag.ExecutorFunc(func(ctx context.Context, j *dag.Job) dag.Outcome {
				mu.Lock()
				executions[j.ID()]++
				mu.Unlock()
				return dag.Outcome{State: outcomes[j.ID()]}
			}),
			OnChange: func(j *dag.Job) {
				mu.Lock()
				defer mu.Unlock()
				if live[j.ID()] == cikit.JobRunning {
					running--
				}
				live[j.ID()] = j.State
				if j.State == cikit.JobRunning {
					running++
					maxRunning = max(maxRunning, running)
					i, _ := g.Index(j.ID())
					conditional := g.Node(i).When == cikit.WhenAlways || g.Node(i).When == cikit.WhenOnFailure
					for _, p := range g.Parents(i) {
						ps := live[g.Node(p).ID]
						early := !dag.Satisfied(ps, g.Node(p).AllowFailure)
						if conditional {
							early = !ps.Terminal()
						}
						if early && violation == nil {
							violation = fmt.Errorf("%s started while %s is %s", j.ID(), g.Node(p).ID, live[g.Node(p).ID])
						}
					}
				}
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		run, err := store.RunCreate(context.Background(), &dag.RunCreateParams{Jobs: specs})
		if err != nil {
			t.Fatal(err)
		}
		initial, err := store.JobList(context.Background(), run.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range initial {
			live[j.ID()] = j.State
		}
		final, err := d.Drive(context.Background(), run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if violation != nil {
			t.Fatal(violation)
		}
		if maxRunning > parallel {
			t.Fatalf("%d jobs ran at once with Parallel %d", maxRunning, parallel)
		}
		jobs, _ := store.JobList(context.Background(), run.ID)
		want := make([]cikit.JobState, g.Len())
		for _, i := range g.Order() {
			unsatisfied := false
			for _, p := range g.Parents(i) {
				unsatisfied = unsatisfied || !dag.Satisfied(want[p], g.Node(p).AllowFailure)
			}
			runs := !unsatisfied // on success
			switch specs[i].When {
			case cikit.WhenAlways:
				runs = true
			case cikit.WhenOnFailure:
				runs = unsatisfied
			}
			want[i] = cikit.JobSkipped
			if runs {
				want[i] = outcomes[specs[i].ID]
			}
		}
		for i, j := range jobs {
			if j.State != want[i] {
				t.Fatalf("job %s is %s, want %s", j.ID(), j.State, want[i])
			}
			if n := executions[j.ID()]; n > 1 || (n == 1) != (want[i] != cikit.JobSkipped) {
				t.Fatalf("job %s (%s) executed %d times", j.ID(), j.State, n)
			}
		}
		if final.State != dagtest.ReferenceRunState(g, want) {
			t.Fatalf("run is %s, want %s", final.State, dagtest.ReferenceRunState(g, want))
		}
	})
}
