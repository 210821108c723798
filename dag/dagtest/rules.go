package dagtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

// whens weighs the conditions GenSpecs draws: mostly on success.
var whens = []cikit.When{"", "", "", "", "", "", "", "", cikit.WhenAlways, cikit.WhenOnFailure}

// ruleWhens are those of Rules' pipelines, which also hold manual and
// delayed jobs: the state machine plays the ones waiting for a person and
// releases the delayed ones.
var ruleWhens = append(slices.Clone(whens), cikit.WhenManual, cikit.WhenDelayed)

// GenSpecs draws a random acyclic pipeline, some jobs of When always or
// on_failure: jobs are ranked, a job needs
// only jobs of lower rank, and ranks are shuffled into file order so needs
// point both forwards and backwards in the file.
func GenSpecs(t *rapid.T, maxJobs int) []*cikit.JobSpec {
	return genSpecs(t, maxJobs, whens, false)
}

// GenGatedSpecs is GenSpecs with manual and delayed jobs too, and about
// one job in seven held by an approval gate (some with a wait timer, some
// expiring after a minute) and one in twenty denied by the policy.
func GenGatedSpecs(t *rapid.T, maxJobs int) []*cikit.JobSpec {
	return genSpecs(t, maxJobs, ruleWhens, true)
}

// genSpecs is GenSpecs drawing Whens from whens and, with trust, gates
// (some with a wait timer or an expiry) and jobs the policy denied.
func genSpecs(t *rapid.T, maxJobs int, whens []cikit.When, trust bool) []*cikit.JobSpec {
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
			When:         rapid.SampledFrom(whens).Draw(t, fmt.Sprintf("when%d", rank)),
			Steps:        []cikit.Step{{Run: "true"}},
		}
		if specs[order[rank]].When == cikit.WhenDelayed {
			specs[order[rank]].StartIn = time.Hour
		}
		if !trust {
			continue
		}
		switch rapid.IntRange(0, 19).Draw(t, fmt.Sprintf("trust%d", rank)) {
		case 0, 1, 2:
			specs[order[rank]].Gate = &cikit.Gate{Reasons: []string{"deployment to production"},
				WaitTimer: rapid.SampledFrom([]time.Duration{0, 30 * time.Minute}).Draw(t, fmt.Sprintf("wait%d", rank)),
				Expires:   rapid.SampledFrom([]time.Duration{0, time.Minute}).Draw(t, fmt.Sprintf("expires%d", rank))}
		case 3:
			specs[order[rank]].Admission = &cikit.Admission{Decision: cikit.DecisionDeny, Reason: "fork pull request"}
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
// directly or transitively FAILED without allow_failure. A job the policy
// denied ended before what it needs did, so their failures do not reach
// below it.
func requiredFailedAncestor(g *dag.Graph, states []cikit.JobState) []bool {
	out := make([]bool, g.Len())
	for _, i := range g.Order() {
		for _, p := range g.Parents(i) {
			if out[p] && !g.Node(p).Denied || states[p] == cikit.JobFailed && !g.Node(p).AllowFailure {
				out[i] = true
			}
		}
	}
	return out
}

// waitsForPerson reports whether job i waits for a person: it is MANUAL,
// or PENDING and some job it needs, directly or transitively, is MANUAL.
// With blocking, only manual jobs without allow_failure count.
func waitsForPerson(g *dag.Graph, states []cikit.JobState, i int, blocking bool) bool {
	switch states[i] {
	case cikit.JobManual:
		return !blocking || !g.Node(i).AllowFailure
	case cikit.JobPending:
		return slices.ContainsFunc(g.Parents(i), func(p int) bool { return waitsForPerson(g, states, p, blocking) })
	}
	return false
}

// ReferenceRunState is the run status rule written out independently of
// dag.RunStatus.
func ReferenceRunState(g *dag.Graph, states []cikit.JobState) cikit.RunState {
	// What will move on its own: not terminal, and not waiting for a
	// person.
	moving := func(i int) bool { return !states[i].Terminal() && !waitsForPerson(g, states, i, false) }
	if slices.ContainsFunc(seq(len(states)), moving) {
		if slices.ContainsFunc(states, func(s cikit.JobState) bool {
			return s != cikit.JobPending && s != cikit.JobReady && s != cikit.JobSkipped && s != cikit.JobManual && s != cikit.JobDelayed
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
	for i := range states {
		if states[i] == cikit.JobManual && waitsForPerson(g, states, i, true) {
			return cikit.RunBlocked
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
		satisfied, blocked, allTerminal := true, false, true
		for _, p := range g.Parents(i) {
			ok := dag.Satisfied(states[p], g.Node(p).AllowFailure)
			satisfied = satisfied && ok
			blocked = blocked || states[p].Terminal() && !ok
			allTerminal = allTerminal && states[p].Terminal()
		}
		started := j.State == cikit.JobReady || j.State.Active() || j.State == cikit.JobSucceeded || j.State == cikit.JobFailed ||
			j.State == cikit.JobManual || j.State == cikit.JobDelayed
		// SAFETY: only manual and gated jobs wait for a person, only
		// delayed ones and approved gates with a delay for a time.
		n := g.Node(i)
		if j.State == cikit.JobManual && n.When != cikit.WhenManual && !n.Gated ||
			j.State == cikit.JobDelayed && (n.Gated && !n.DelayedAfterApproval || !n.Gated && n.When != cikit.WhenDelayed) {
			t.Fatalf("%q job %s (gated %v) is %s: %v", n.When, j.ID(), n.Gated, j.State, states)
		}
		// SAFETY: a job the policy denied never leaves FAILED: it is
		// never retried, and nothing of it runs.
		if n.Denied {
			if j.State != cikit.JobFailed || j.Attempt != 1 {
				t.Fatalf("denied job %s is %s on attempt %d", j.ID(), j.State, j.Attempt)
			}
			continue
		}
		switch w := g.Node(i).When; {
		case w == cikit.WhenAlways || w == cikit.WhenOnFailure:
			// LIVENESS: it waits only while a need is running; SAFETY: it
			// starts only once all have ended, and on_failure only after
			// a need did not succeed.
			if j.State == cikit.JobPending && allTerminal {
				t.Fatalf("%s job %s is PENDING but its needs have all ended: %v", w, j.ID(), states)
			}
			if started && (!allTerminal || w == cikit.WhenOnFailure && satisfied) {
				t.Fatalf("%s job %s is %s with needs ended=%v satisfied=%v: %v", w, j.ID(), j.State, allTerminal, satisfied, states)
			}
		case j.State == cikit.JobPending:
			// LIVENESS of the rule: a pending job is waiting for something.
			if satisfied || blocked {
				t.Fatalf("job %s is PENDING with needs satisfied=%v blocked=%v: %v", j.ID(), satisfied, blocked, states)
			}
		case started:
			// SAFETY: nothing leaves PENDING before its needs are satisfied.
			if !satisfied {
				t.Fatalf("job %s is %s but its needs are not all satisfied: %v", j.ID(), j.State, states)
			}
		}
	}
	if want := ReferenceRunState(g, states); run.State != want || dag.RunStatus(g, states) != want {
		t.Fatalf("run state %s, RunStatus %s, want %s for %v", run.State, dag.RunStatus(g, states), want, states)
	}
	if run.State.Terminal() == run.FinishedAt.IsZero() {
		t.Fatalf("run %s has FinishedAt %v", run.State, run.FinishedAt)
	}
}

// checkGates asserts SAFETY of approval gates: a gated job gets past
// MANUAL only by an approval (approved, which it forgets whenever the job
// waits again, PENDING or MANUAL).
func checkGates(t *rapid.T, g *dag.Graph, jobs []*dag.Job, approved map[string]bool) {
	for i, j := range jobs {
		if !g.Node(i).Gated || g.Node(i).Denied {
			continue
		}
		switch j.State {
		case cikit.JobPending, cikit.JobManual:
			approved[j.ID()] = false
		case cikit.JobReady, cikit.JobDelayed, cikit.JobQueued, cikit.JobRunning, cikit.JobCancelRequested, cikit.JobSucceeded:
			if !approved[j.ID()] {
				t.Fatalf("gated job %s is %s on attempt %d without an approval", j.ID(), j.State, j.Attempt)
			}
		}
	}
}

// RulesConfig configures Rules.
type RulesConfig struct {
	// Runs is how many cases to generate at most, so a slow store can
	// run fewer than rapid's -rapid.checks.
	Runs int
	// Flush, when set, loses the store's derived state at once, as a
	// Redis FLUSHALL would; the rules do it at random moments.
	Flush func(ctx context.Context) error
}

// Derived is implemented by stores that keep derived state beside the
// truth: dependency counters that say, for each job that needs others,
// how many of its needs are not yet satisfied. Rules checks them against
// a recount after every step and repairs them at random.
type Derived interface {
	// DependencyCounters returns the counters present for a run's jobs;
	// lost ones are absent. A nil map says the store keeps none (it was
	// configured without them).
	DependencyCounters(ctx context.Context, runID string) (map[string]int, error)
	// Repair rebuilds the run's derived state from the truth, and makes
	// any job whose wakeup was lost move on (see dag.Settle).
	Repair(ctx context.Context, runID string) (*dag.TransitionResult, error)
}

// Rules is a rapid state-machine test of a Store against the rules of
// package dag. Each generated case creates a run of a random DAG in one
// store made by factory and drives it with random events — queue, start,
// complete with a random outcome, batches of these applied at once by
// JobApply, duplicate, stale and illegal completions, retries of failed
// jobs once a run fails, (in some runs) a cancel and an expiry of every
// active job and waiting gate, approvals and rejections of gated and
// manual jobs (runs with waiting jobs have gates and jobs the policy
// denied), and for a Derived store losing its derived state
// (cfg.Flush) and repairing it — checking the safety invariants after
// every step and the end state once no event applies:
//
//   - SAFETY: no job leaves PENDING before all its needs succeeded or
//     failed with allow_failure;
//   - SAFETY: no transition out of a terminal state but a retry's new
//     attempt; attempts only grow; refused events change nothing; a
//     duplicate completion changes nothing;
//   - SAFETY: the run state is a function of the job states;
//   - SAFETY: only manual and gated jobs wait MANUAL, and a gated job
//     leaves it for READY or DELAYED only by an approval; a denied job
//     is FAILED from the start, on its first attempt, to the end;
//   - LIVENESS: every job ends terminal;
//   - SKIPPED iff a required ancestor failed (when nothing was cancelled;
//     with a cancel of the run or of a job, SKIPPED still implies it, and
//     it implies SKIPPED or CANCELLED); with always and on_failure jobs,
//     every skip has its cause: an on_success job skips only after a need
//     did not succeed, an on_failure job only after all did, an always
//     job never;
//   - for a Derived store: every counter present equals the recount of
//     the job's needs not satisfied, none is missing unless lost since
//     the last repair, and a repair finds no job to move (no wakeup was
//     lost).
func Rules(t *testing.T, factory Factory, cfg RulesConfig) {
	store := factory(t, time.Now)
	derived, _ := store.(Derived)
	runs := 0
	rapid.Check(t, func(t *rapid.T) {
		if runs++; runs > cfg.Runs {
			return
		}
		ctx := context.Background()
		// Half the runs have manual and delayed jobs; the others keep
		// exercising a PostgreSQL store's fast path, which a run with a
		// manual job does not take for its completions.
		gen := whens
		if rapid.Bool().Draw(t, "waiting") {
			gen = ruleWhens
		}
		specs := genSpecs(t, 24, gen, len(gen) > len(whens))
		g, err := dag.FromSpecs(specs)
		if err != nil {
			t.Fatalf("generator made an invalid graph: %v", err)
		}
		run, err := store.RunCreate(ctx, &dag.RunCreateParams{Jobs: specs})
		if err != nil {
			t.Fatal(err)
		}
		flushed := false
		mayCancel := rapid.Bool().Draw(t, "mayCancel")
		mayExpire := rapid.Bool().Draw(t, "mayExpire")
		expired := false
		retries := 0
		cancelled := false
		// approved holds the gated jobs approved since they last waited.
		approved := map[string]bool{}
		jobs, _ := store.JobList(ctx, run.ID)
		checkInvariants(t, g, run, jobs)
		checkGates(t, g, jobs, approved)
		checkCounters(t, derived, g, run, jobs, flushed)
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
			completeAs := func(j *dag.Job, outcome cikit.JobState, attempt int, class cikit.FailureClass) func() (*dag.TransitionResult, error) {
				return func() (*dag.TransitionResult, error) {
					if outcome == cikit.JobCancelled && attempt == j.Attempt {
						cancelled = true
					}
					return store.JobComplete(ctx, &dag.JobCompleteParams{RunID: run.ID, JobID: j.ID(), Attempt: attempt, Outcome: outcome, FailureClass: class})
				}
			}
			complete := func(j *dag.Job, outcome cikit.JobState, attempt int) func() (*dag.TransitionResult, error) {
				return completeAs(j, outcome, attempt, cikit.FailureScript)
			}
			for _, j := range jobs {
				switch j.State {
				case cikit.JobReady:
					actions = append(actions, action{"queue " + j.ID(), func() (*dag.TransitionResult, error) { return store.JobQueue(ctx, tp(j, j.Attempt)) }, true})
				case cikit.JobQueued:
					actions = append(actions, action{"start " + j.ID(), func() (*dag.TransitionResult, error) { return store.JobStart(ctx, tp(j, j.Attempt)) }, true})
				case cikit.JobRunning, cikit.JobCancelRequested:
					for _, o := range []cikit.JobState{cikit.JobSucceeded, cikit.JobFailed, cikit.JobSucceeded, cikit.JobFailed, cikit.JobCancelled} {
						actions = append(actions, action{"complete " + j.ID() + " " + string(o), complete(j, o, j.Attempt), true})
					}
					if j.State == cikit.JobRunning {
						// A lost runner: retried on its own, a few times.
						actions = append(actions, action{"complete " + j.ID() + " infrastructure failure", completeAs(j, cikit.JobFailed, j.Attempt, cikit.FailureInfrastructure), true})
					}
					actions = append(actions, action{"stale complete " + j.ID(), complete(j, cikit.JobSucceeded, j.Attempt+1), false})
				case cikit.JobPending:
					actions = append(actions, action{"illegal start " + j.ID(), func() (*dag.TransitionResult, error) { return store.JobStart(ctx, tp(j, j.Attempt)) }, false},
						action{"illegal reject " + j.ID(), func() (*dag.TransitionResult, error) { return reject(ctx, store, j) }, false})
				case cikit.JobManual:
					actions = append(actions, action{"play " + j.ID(), func() (*dag.TransitionResult, error) {
						approved[j.ID()] = true
						return play(ctx, store, j)
					}, true},
						action{"reject " + j.ID(), func() (*dag.TransitionResult, error) { return reject(ctx, store, j) }, true},
						action{"illegal queue " + j.ID(), func() (*dag.TransitionResult, error) { return store.JobQueue(ctx, tp(j, j.Attempt)) }, false})
				case cikit.JobDelayed:
					actions = append(actions, action{"release", func() (*dag.TransitionResult, error) { return releaseAll(ctx, store, run.ID) }, true},
						action{"illegal queue " + j.ID(), func() (*dag.TransitionResult, error) { return store.JobQueue(ctx, tp(j, j.Attempt)) }, false})
				}
			}
			if retries < 2 && run.State.Terminal() && run.State != cikit.RunSucceeded {
				actions = append(actions, action{"retry failed", func() (*dag.TransitionResult, error) {
					retries++
					return store.RunRetryFailed(ctx, run.ID)
				}, true})
			}
			if mayCancel && !cancelled && !run.State.Terminal() {
				actions = append(actions, action{"cancel", func() (*dag.TransitionResult, error) {
					cancelled = true
					return store.RunCancel(ctx, run.ID)
				}, true})
			}
			if mayExpire && !expired && !run.State.Terminal() {
				actions = append(actions, action{"expire", func() (*dag.TransitionResult, error) {
					expired = true
					return expireAll(ctx, store, run.ID)
				}, true})
			}
			var progress bool
			for _, a := range actions {
				progress = progress || a.ok
			}
			if !progress {
				break
			}
			if batch := batchEvents(t, g, step, run.ID, jobs); len(batch) > 1 {
				actions = append(actions, action{fmt.Sprintf("batch of %d", len(batch)), func() (*dag.TransitionResult, error) {
					for _, e := range batch {
						approved[e.JobID] = approved[e.JobID] || e.Kind == dag.EventPlay
					}
					return applyBatch(ctx, store, run.ID, batch)
				}, true})
			}
			if derived != nil {
				actions = append(actions, action{"repair", func() (*dag.TransitionResult, error) {
					flushed = false
					return derived.Repair(ctx, run.ID)
				}, true})
				if cfg.Flush != nil {
					actions = append(actions, action{"flush", func() (*dag.TransitionResult, error) {
						flushed = true
						if err := cfg.Flush(ctx); err != nil {
							return nil, err
						}
						r, err := store.RunGet(ctx, run.ID)
						return &dag.TransitionResult{Run: r}, err
					}, true})
				}
			}
			// Noise (duplicates of finished completions, illegal
			// moves) only alongside real progress, so runs end.
			for _, j := range jobs {
				if j.State == cikit.JobSucceeded || j.State == cikit.JobFailed {
					actions = append(actions, action{"duplicate complete " + j.ID(), complete(j, j.State, j.Attempt), true})
					other := cikit.JobFailed
					if j.State == cikit.JobFailed {
						other = cikit.JobSucceeded
					}
					actions = append(actions, action{"conflicting complete " + j.ID(), complete(j, other, j.Attempt), false})
				}
			}
			a := rapid.SampledFrom(actions).Draw(t, fmt.Sprintf("action%d", step))
			before := statesOf(jobs)
			attempts := make([]int, len(jobs))
			for i, j := range jobs {
				attempts[i] = j.Attempt
			}
			res, err := a.do()
			jobs, _ = store.JobList(ctx, run.ID)
			after := statesOf(jobs)
			for i, j := range jobs {
				// SAFETY: attempts only grow: by a retry of a finished
				// job, or by one step when a failure is retried on its
				// own, the job READY again.
				retried := a.name == "retry failed" && before[i].Terminal() ||
					before[i] == cikit.JobRunning && after[i] == cikit.JobReady && j.Attempt == attempts[i]+1
				if j.Attempt < attempts[i] || j.Attempt > attempts[i] && !retried {
					t.Fatalf("%s: job %s went from attempt %d (%s) to %d", a.name, j.ID(), attempts[i], before[i], j.Attempt)
				}
			}
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
			if a.name == "repair" && len(res.Changed) > 0 {
				t.Fatalf("repair moved %s (%s): a wakeup was lost", res.Changed[0].ID(), res.Changed[0].State)
			}
			changed := map[string]bool{}
			for _, c := range res.Changed {
				changed[c.ID()] = true
				if c.State != after[must(g.Index(c.ID()))] {
					t.Fatalf("%s: result says %s is %s, store says %s", a.name, c.ID(), c.State, after[must(g.Index(c.ID()))])
				}
			}
			for i := range before {
				if before[i] != after[i] {
					// SAFETY: a terminal state is left only by a retry,
					// as a new attempt.
					if before[i].Terminal() && (a.name != "retry failed" || jobs[i].Attempt == attempts[i]) {
						t.Fatalf("%s: job %s left terminal state %s for %s", a.name, specs[i].ID, before[i], after[i])
					}
					if !changed[specs[i].ID] {
						t.Fatalf("%s: job %s changed but is not in the result", a.name, specs[i].ID)
					}
				}
			}
			checkInvariants(t, g, run, jobs)
			checkGates(t, g, jobs, approved)
			checkCounters(t, derived, g, run, jobs, flushed)
		}
		states := statesOf(jobs)
		failedAbove := requiredFailedAncestor(g, states)
		conditional := slices.ContainsFunc(specs, func(s *cikit.JobSpec) bool { return s.When != "" })
		for i, s := range states {
			if !s.Terminal() {
				t.Fatalf("no event applies but job %s is %s", specs[i].ID, s)
			}
			if g.Node(i).Denied {
				continue // FAILED whatever its needs did (checkInvariants)
			}
			skipped := s == cikit.JobSkipped
			switch {
			case conditional:
				// With always and on_failure jobs a skip has more causes;
				// each must be one: an on_success job skips only after a
				// need did not succeed, an on_failure one only after all
				// did, an always one never.
				unsatisfied := false
				for _, p := range g.Parents(i) {
					unsatisfied = unsatisfied || !dag.Satisfied(states[p], g.Node(p).AllowFailure)
				}
				w := specs[i].When
				onSuccess := w == "" || w == cikit.WhenManual || w == cikit.WhenDelayed
				if skipped && (w == cikit.WhenAlways || w == cikit.WhenOnFailure && unsatisfied || onSuccess && !unsatisfied) {
					t.Fatalf("%q job %s SKIPPED with needs unsatisfied=%v: %v", w, specs[i].ID, unsatisfied, states)
				}
			case skipped && !failedAbove[i]:
				t.Fatalf("job %s SKIPPED without a failed required ancestor: %v", specs[i].ID, states)
			case !skipped && failedAbove[i] && !(cancelled && s == cikit.JobCancelled):
				t.Fatalf("job %s is %s but a required ancestor failed: %v", specs[i].ID, s, states)
			}
		}
		if !run.State.Terminal() {
			t.Fatalf("all jobs terminal but run is %s", run.State)
		}
		checkAttempts(t, store, jobs)
	})
}

// checkAttempts checks the attempt history of a finished run's jobs: one
// record per ended attempt, numbered 1, 2, … up to the current one, each
// terminal, the last as the job is now. With one job row per job, this
// is "at most one active attempt per job".
func checkAttempts(t *rapid.T, store dag.Store, jobs []*dag.Job) {
	for _, j := range jobs {
		attempts, err := store.JobAttempts(context.Background(), j.RunID, j.ID())
		if err != nil {
			t.Fatalf("JobAttempts %s: %v", j.ID(), err)
		}
		if len(attempts) != j.Attempt {
			t.Fatalf("job %s is on attempt %d but %d attempts ended", j.ID(), j.Attempt, len(attempts))
		}
		for k, a := range attempts {
			if a.Attempt != k+1 || !a.State.Terminal() {
				t.Fatalf("job %s: ended attempt %d is #%d, %s", j.ID(), k+1, a.Attempt, a.State)
			}
		}
		if last := attempts[len(attempts)-1]; last.State != j.State {
			t.Fatalf("job %s is %s but its last attempt ended %s", j.ID(), j.State, last.State)
		}
	}
}

// batchEvents draws a batch of events that are all legal now: for a
// random subset of the jobs that can move, the next event, and sometimes
// the one after it too (a job queued and started in one batch).
func batchEvents(t *rapid.T, g *dag.Graph, step int, runID string, jobs []*dag.Job) []*dag.JobEvent {
	var batch []*dag.JobEvent
	for _, j := range jobs {
		var kinds []dag.EventKind
		switch j.State {
		case cikit.JobReady:
			kinds = []dag.EventKind{dag.EventQueue, dag.EventStart, dag.EventComplete}
		case cikit.JobQueued:
			kinds = []dag.EventKind{dag.EventStart, dag.EventComplete}
		case cikit.JobRunning:
			kinds = []dag.EventKind{dag.EventComplete}
		case cikit.JobManual:
			kinds = []dag.EventKind{dag.EventPlay, dag.EventQueue, dag.EventStart, dag.EventComplete}
			switch i := must(g.Index(j.ID())); {
			case rapid.Bool().Draw(t, fmt.Sprintf("batch%d-%s-reject", step, j.ID())):
				kinds = []dag.EventKind{dag.EventReject}
			case g.Node(i).DelayedAfterApproval:
				kinds = kinds[:1] // DELAYED once approved
			}
		default:
			continue
		}
		n := rapid.IntRange(0, len(kinds)).Draw(t, fmt.Sprintf("batch%d-%s", step, j.ID()))
		for _, k := range kinds[:n] {
			e := &dag.JobEvent{Kind: k, RunID: runID, JobID: j.ID(), Attempt: j.Attempt, Runner: "runner-" + j.ID()}
			if k == dag.EventReject {
				e.Reason = "rejected by bob: no"
			}
			if k == dag.EventComplete {
				e.Outcome = rapid.SampledFrom([]cikit.JobState{cikit.JobSucceeded, cikit.JobSucceeded, cikit.JobFailed}).
					Draw(t, fmt.Sprintf("batch%d-%s-outcome", step, j.ID()))
				e.FailureClass = cikit.FailureScript
			}
			batch = append(batch, e)
		}
	}
	return batch
}

// applyBatch applies a batch with JobApply and merges the results into
// one: every event must apply, and a job changed twice is reported as it
// ended.
func applyBatch(ctx context.Context, store dag.Store, runID string, batch []*dag.JobEvent) (*dag.TransitionResult, error) {
	results, err := store.JobApply(ctx, batch)
	if err != nil {
		return nil, err
	}
	if len(results) != len(batch) {
		return nil, fmt.Errorf("JobApply answered %d of %d events", len(results), len(batch))
	}
	last := map[string]*dag.Job{}
	var order []string
	for i, r := range results {
		if r.Err != nil {
			return nil, fmt.Errorf("event %d (%v %s): %w", i, batch[i].Kind, batch[i].JobID, r.Err)
		}
		for _, c := range r.Changed {
			if _, ok := last[c.ID()]; !ok {
				order = append(order, c.ID())
			}
			last[c.ID()] = c
		}
	}
	merged := &dag.TransitionResult{}
	for _, id := range order {
		merged.Changed = append(merged.Changed, last[id])
	}
	merged.Run, err = store.RunGet(ctx, runID)
	return merged, err
}

// checkCounters checks a Derived store's counters against a recount from
// the jobs' states: each present counter equals the number of the job's
// needs not satisfied, and none is missing unless lost since the last
// repair.
func checkCounters(t *rapid.T, d Derived, g *dag.Graph, run *dag.Run, jobs []*dag.Job, flushed bool) {
	if d == nil {
		return
	}
	counters, err := d.DependencyCounters(context.Background(), run.ID)
	if err != nil {
		t.Fatalf("DependencyCounters: %v", err)
	}
	if counters == nil {
		return
	}
	for i, j := range jobs {
		parents := g.Parents(i)
		if len(parents) == 0 {
			if _, ok := counters[j.ID()]; ok {
				t.Fatalf("job %s needs nothing but has a counter", j.ID())
			}
			continue
		}
		want := 0
		for _, p := range parents {
			if !dag.Satisfied(jobs[p].State, g.Node(p).AllowFailure) {
				want++
			}
		}
		got, ok := counters[j.ID()]
		switch {
		case !ok && !flushed:
			t.Fatalf("job %s has no counter, and none was lost", j.ID())
		case ok && got != want:
			t.Fatalf("job %s: counter %d, recount from its needs %d: %v", j.ID(), got, want, statesOf(jobs))
		}
	}
}

func must(i int, ok bool) int {
	if !ok {
		panic("missing")
	}
	return i
}

// play starts a MANUAL job through JobApply, as the API does.
func play(ctx context.Context, store dag.Store, j *dag.Job) (*dag.TransitionResult, error) {
	res, err := store.JobApply(ctx, []*dag.JobEvent{{Kind: dag.EventPlay, RunID: j.RunID, JobID: j.ID(), Attempt: j.Attempt}})
	if err != nil {
		return nil, err
	}
	return res[0].TransitionResult, res[0].Err
}

// reject rejects a MANUAL job through JobApply, as the API does.
func reject(ctx context.Context, store dag.Store, j *dag.Job) (*dag.TransitionResult, error) {
	res, err := store.JobApply(ctx, []*dag.JobEvent{{Kind: dag.EventReject, RunID: j.RunID, JobID: j.ID(), Attempt: j.Attempt,
		Reason: "rejected by alice: not today"}})
	if err != nil {
		return nil, err
	}
	return res[0].TransitionResult, res[0].Err
}

// releaseAll releases every DELAYED job of the store's runs at once (their
// StartIn is an hour), and returns what changed in run runID as one result.
func releaseAll(ctx context.Context, store dag.Store, runID string) (*dag.TransitionResult, error) {
	results, err := store.JobsRelease(ctx, time.Now().Add(2*time.Hour))
	if err != nil {
		return nil, err
	}
	merged := &dag.TransitionResult{}
	for _, r := range results {
		if r.Run.ID == runID {
			merged.Changed, merged.Run = append(merged.Changed, r.Changed...), r.Run
		}
	}
	if merged.Run == nil {
		merged.Run, err = store.RunGet(ctx, runID)
	}
	return merged, err
}
