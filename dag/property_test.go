package dag_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"pgregory.net/rapid"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

// genSpecs draws a random acyclic pipeline: jobs are ranked, a job needs
// only jobs of lower rank, and ranks are shuffled into file order so needs
// point both forwards and backwards in the file.
func genSpecs(t *rapid.T, maxJobs int) []*cikit.JobSpec {
	n := rapid.IntRange(1, maxJobs).Draw(t, "jobs")
	order := rapid.Permutation(seq(n)).Draw(t, "order") // order[rank] = file position
	specs := make([]*cikit.JobSpec, n)
	for rank := range n {
		var needs []string
		if rank > 0 {
			parents := rapid.SliceOfNDistinct(rapid.IntRange(0, rank-1), 0, 3, rapid.ID[int]).Draw(t, fmt.Sprintf("needs%d", rank))
			for _, p := range parents {
				needs = append(needs, fmt.Sprintf("j%d", order[p]))
			}
		}
		specs[order[rank]] = &cikit.JobSpec{
			ID:           fmt.Sprintf("j%d", order[rank]),
			Needs:        needs,
			AllowFailure: rapid.Float64Range(0, 1).Draw(t, fmt.Sprintf("allow%d", rank)) < 0.25,
			Steps:        []cikit.Step{{Run: "true"}},
		}
	}
	return specs
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// requiredFailedAncestor reports, for every job, whether some job it needs
// directly or transitively FAILED without allow_failure.
func requiredFailedAncestor(g *dag.Graph, states []cikit.JobState) []bool {
	out := make([]bool, g.Len())
	for _, i := range g.Order() {
		for _, p := range g.Parents(i) {
			if out[p] || states[p] == cikit.JobFailed && !g.Node(p).AllowFailure {
				out[i] = true
			}
		}
	}
	return out
}

// referenceRunState is the run status rule written out independently of
// dag.RunStatus.
func referenceRunState(g *dag.Graph, states []cikit.JobState) cikit.RunState {
	if slices.ContainsFunc(states, func(s cikit.JobState) bool { return !s.Terminal() }) {
		if slices.ContainsFunc(states, func(s cikit.JobState) bool {
			return s != cikit.JobPending && s != cikit.JobReady && s != cikit.JobSkipped
		}) {
			return cikit.RunRunning
		}
		return cikit.RunPending
	}
	if slices.Contains(states, cikit.JobCancelled) {
		return cikit.RunCancelled
	}
	for i, s := range states {
		if s == cikit.JobFailed && !g.Node(i).AllowFailure {
			return cikit.RunFailed
		}
	}
	return cikit.RunSucceeded
}

func statesOf(jobs []*dag.Job) []cikit.JobState {
	s := make([]cikit.JobState, len(jobs))
	for i, j := range jobs {
		s[i] = j.State
	}
	return s
}

// checkInvariants asserts the safety properties of one snapshot.
func checkInvariants(t *rapid.T, g *dag.Graph, run *dag.Run, jobs []*dag.Job) {
	states := statesOf(jobs)
	for i, j := range jobs {
		satisfied := true
		blocked := false
		for _, p := range g.Parents(i) {
			satisfied = satisfied && dag.Satisfied(states[p], g.Node(p).AllowFailure)
			blocked = blocked || states[p].Terminal() && !dag.Satisfied(states[p], g.Node(p).AllowFailure)
		}
		switch j.State {
		case cikit.JobPending:
			// LIVENESS of the rule: a pending job is waiting for something.
			if satisfied || blocked {
				t.Fatalf("job %s is PENDING with needs satisfied=%v blocked=%v: %v", j.ID(), satisfied, blocked, states)
			}
		case cikit.JobReady, cikit.JobQueued, cikit.JobRunning, cikit.JobSucceeded, cikit.JobFailed:
			// SAFETY: nothing leaves PENDING before its needs are satisfied.
			if !satisfied {
				t.Fatalf("job %s is %s but its needs are not all satisfied: %v", j.ID(), j.State, states)
			}
		}
		if j.Attempt != 1 {
			t.Fatalf("job %s has attempt %d, want 1", j.ID(), j.Attempt)
		}
	}
	if want := referenceRunState(g, states); run.State != want || dag.RunStatus(g, states) != want {
		t.Fatalf("run state %s, RunStatus %s, want %s for %v", run.State, dag.RunStatus(g, states), want, states)
	}
	if run.State.Terminal() == run.FinishedAt.IsZero() {
		t.Fatalf("run %s has FinishedAt %v", run.State, run.FinishedAt)
	}
}

// TestPropertyStoreRules drives a MemoryStore with random events — queue,
// start, complete with a random outcome, duplicate, stale and illegal
// completions, and (in some runs) a cancel — over random DAGs, checking the
// safety invariants after every step and the end state once no event
// applies:
//
//   - SAFETY: no job leaves PENDING before all its needs succeeded or
//     failed with allow_failure;
//   - SAFETY: no transition out of a terminal state; refused events change
//     nothing; a duplicate completion changes nothing;
//   - SAFETY: the run state is a function of the job states;
//   - LIVENESS: every job ends terminal;
//   - SKIPPED iff a required ancestor failed (when nothing was cancelled;
//     with a cancel of the run or of a job, SKIPPED still implies it, and
//     it implies SKIPPED or CANCELLED).
func TestPropertyStoreRules(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		ctx := context.Background()
		specs := genSpecs(t, 24)
		g, err := dag.FromSpecs(specs)
		if err != nil {
			t.Fatalf("generator made an invalid graph: %v", err)
		}
		store := dag.NewMemoryStore(dag.MemoryConfig{})
		run, err := store.RunCreate(ctx, &dag.RunCreateParams{Jobs: specs})
		if err != nil {
			t.Fatal(err)
		}
		mayCancel := rapid.Bool().Draw(t, "mayCancel")
		cancelled := false
		jobs, _ := store.JobList(ctx, run.ID)
		checkInvariants(t, g, run, jobs)
		for step := 0; ; step++ {
			type action struct {
				name string
				do   func() (*dag.TransitionResult, error)
				ok   bool // whether the store must accept it
			}
			var actions []action
			tp := func(j *dag.Job, attempt int) *dag.JobTransitionParams {
				return &dag.JobTransitionParams{RunID: run.ID, JobID: j.ID(), Attempt: attempt}
			}
			complete := func(j *dag.Job, outcome cikit.JobState, attempt int) func() (*dag.TransitionResult, error) {
				return func() (*dag.TransitionResult, error) {
					if outcome == cikit.JobCancelled && attempt == 1 {
						cancelled = true
					}
					return store.JobComplete(ctx, &dag.JobCompleteParams{RunID: run.ID, JobID: j.ID(), Attempt: attempt, Outcome: outcome})
				}
			}
			for _, j := range jobs {
				switch j.State {
				case cikit.JobReady:
					actions = append(actions, action{"queue " + j.ID(), func() (*dag.TransitionResult, error) { return store.JobQueue(ctx, tp(j, 1)) }, true})
				case cikit.JobQueued:
					actions = append(actions, action{"start " + j.ID(), func() (*dag.TransitionResult, error) { return store.JobStart(ctx, tp(j, 1)) }, true})
				case cikit.JobRunning:
					for _, o := range []cikit.JobState{cikit.JobSucceeded, cikit.JobFailed, cikit.JobSucceeded, cikit.JobFailed, cikit.JobCancelled} {
						actions = append(actions, action{"complete " + j.ID() + " " + string(o), complete(j, o, 1), true})
					}
					actions = append(actions, action{"stale complete " + j.ID(), complete(j, cikit.JobSucceeded, 2), false})
				case cikit.JobPending:
					actions = append(actions, action{"illegal start " + j.ID(), func() (*dag.TransitionResult, error) { return store.JobStart(ctx, tp(j, 1)) }, false})
				}
			}
			if mayCancel && !cancelled && !run.State.Terminal() {
				actions = append(actions, action{"cancel", func() (*dag.TransitionResult, error) {
					cancelled = true
					return store.RunCancel(ctx, run.ID)
				}, true})
			}
			var progress bool
			for _, a := range actions {
				progress = progress || a.ok
			}
			if !progress {
				break
			}
			// Noise (duplicates of finished completions, illegal
			// moves) only alongside real progress, so runs end.
			for _, j := range jobs {
				if j.State == cikit.JobSucceeded || j.State == cikit.JobFailed {
					actions = append(actions, action{"duplicate complete " + j.ID(), complete(j, j.State, 1), true})
					other := cikit.JobFailed
					if j.State == cikit.JobFailed {
						other = cikit.JobSucceeded
					}
					actions = append(actions, action{"conflicting complete " + j.ID(), complete(j, other, 1), false})
				}
			}
			a := rapid.SampledFrom(actions).Draw(t, fmt.Sprintf("action%d", step))
			before := statesOf(jobs)
			res, err := a.do()
			jobs, _ = store.JobList(ctx, run.ID)
			after := statesOf(jobs)
			if !a.ok {
				if !errors.Is(err, cikit.ErrInvalidTransition) {
					t.Fatalf("%s: want ErrInvalidTransition, got %v", a.name, err)
				}
				if !slices.Equal(before, after) {
					t.Fatalf("%s was refused but changed states %v -> %v", a.name, before, after)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", a.name, err)
			}
			run = res.Run
			changed := map[string]bool{}
			for _, c := range res.Changed {
				changed[c.ID()] = true
				if c.State != after[must(g.Index(c.ID()))] {
					t.Fatalf("%s: result says %s is %s, store says %s", a.name, c.ID(), c.State, after[must(g.Index(c.ID()))])
				}
			}
			for i := range before {
				if before[i] != after[i] {
					if before[i].Terminal() {
						t.Fatalf("%s: job %s left terminal state %s for %s", a.name, specs[i].ID, before[i], after[i])
					}
					if !changed[specs[i].ID] {
						t.Fatalf("%s: job %s changed but is not in the result", a.name, specs[i].ID)
					}
				}
			}
			checkInvariants(t, g, run, jobs)
		}
		states := statesOf(jobs)
		failedAbove := requiredFailedAncestor(g, states)
		for i, s := range states {
			if !s.Terminal() {
				t.Fatalf("no event applies but job %s is %s", specs[i].ID, s)
			}
			skipped := s == cikit.JobSkipped
			switch {
			case skipped && !failedAbove[i]:
				t.Fatalf("job %s SKIPPED without a failed required ancestor: %v", specs[i].ID, states)
			case !skipped && failedAbove[i] && !(cancelled && s == cikit.JobCancelled):
				t.Fatalf("job %s is %s but a required ancestor failed: %v", specs[i].ID, s, states)
			}
		}
		if !run.State.Terminal() {
			t.Fatalf("all jobs terminal but run is %s", run.State)
		}
	})
}

func must(i int, ok bool) int {
	if !ok {
		panic("missing")
	}
	return i
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
//     needs blocks it, else it is SKIPPED.
func TestPropertyDriver(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		specs := genSpecs(t, 24)
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
					for _, p := range g.Parents(i) {
						if !dag.Satisfied(live[g.Node(p).ID], g.Node(p).AllowFailure) && violation == nil {
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
		for _, s := range specs {
			if len(s.Needs) == 0 {
				live[s.ID] = cikit.JobReady
			}
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
			want[i] = outcomes[specs[i].ID]
			for _, p := range g.Parents(i) {
				if !dag.Satisfied(want[p], g.Node(p).AllowFailure) {
					want[i] = cikit.JobSkipped
				}
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
		if final.State != referenceRunState(g, want) {
			t.Fatalf("run is %s, want %s", final.State, referenceRunState(g, want))
		}
	})
}
