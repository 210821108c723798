package dag_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/dag/dagtest"
	"github.com/cikit/cikit/internal/pgtest"
	"github.com/cikit/cikit/internal/redistest"
)

// TestStoresAgree drives the same random runs through the memory store,
// the PostgreSQL store alone and the PostgreSQL store with Redis
// counters, in lockstep, and requires the same answer from all three to
// every event and the same jobs after it: the fast path, the locked path
// and the counters yield one schedule.
func TestStoresAgree(t *testing.T) {
	t.Parallel()
	runs := 200
	if testing.Short() {
		runs = 5
	}
	ns := redistest.New(t)
	agreeRuns(t, runs, []agreeStore{
		{"memory", dag.NewMemoryStore(dag.MemoryConfig{})},
		{"postgres", newPostgresStore(t, nil, nil)},
		{"postgres+redis", newPostgresStore(t, nil, ns)},
	}, func(t *rapid.T) []*cikit.JobSpec { return dagtest.GenSpecs(t, 12) })
}

// TestStoresAgreeExpand is TestStoresAgree for runs with a placeholder of
// a run-time matrix (dagtest.ListExpander), which expands into 0 to 4
// variants (none is an expansion that fails), the placeholder being of
// any kind the generator draws: the stores expand, run, cancel and retry
// the variants and end the placeholder alike.
func TestStoresAgreeExpand(t *testing.T) {
	t.Parallel()
	runs := 100
	if testing.Short() {
		runs = 5
	}
	ns := redistest.New(t)
	agreeRuns(t, runs, []agreeStore{
		{"memory", dag.NewMemoryStore(dag.MemoryConfig{Expander: dagtest.ListExpander})},
		{"postgres", newExpandingPostgresStore(t, nil)},
		{"postgres+redis", newExpandingPostgresStore(t, ns)},
	}, func(t *rapid.T) []*cikit.JobSpec {
		specs := dagtest.GenSpecs(t, 10)
		p := rapid.IntRange(0, len(specs)-1).Draw(t, "placeholder")
		var names []string
		for k := range rapid.IntRange(0, 4).Draw(t, "variants") {
			names = append(names, fmt.Sprint("v", k))
		}
		ph := dagtest.Placeholder(specs[p].ID, dagtest.ListExpand{List: names}, specs[p].Needs...)
		ph.When, ph.AllowFailure, ph.StartIn = specs[p].When, specs[p].AllowFailure, specs[p].StartIn
		specs[p] = ph
		return specs
	})
}

// TestStoresAgreeGates is TestStoresAgree for runs with manual, delayed
// and gated jobs and jobs the policy denied: the stores approve, reject,
// release and expire them alike.
func TestStoresAgreeGates(t *testing.T) {
	t.Parallel()
	runs := 100
	if testing.Short() {
		runs = 5
	}
	ns := redistest.New(t)
	agreeRuns(t, runs, []agreeStore{
		{"memory", dag.NewMemoryStore(dag.MemoryConfig{})},
		{"postgres", newPostgresStore(t, nil, nil)},
		{"postgres+redis", newPostgresStore(t, nil, ns)},
	}, func(t *rapid.T) []*cikit.JobSpec { return dagtest.GenGatedSpecs(t, 10) })
}

// newExpandingPostgresStore is newPostgresStore with dagtest.ListExpander.
func newExpandingPostgresStore(t *testing.T, ns *redistest.NS) *dag.PostgresStore {
	t.Helper()
	db := pgtest.New(t)
	cfg := dag.PostgresConfig{Pool: db.Pool, Expander: dagtest.ListExpander}
	if ns != nil {
		cfg.Redis, cfg.KeyPrefix = ns.Client, ns.Prefix
	}
	s, err := dag.NewPostgresStore(cfg)
	require.NoError(t, err)
	require.NoError(t, s.Migrate(t.Context()))
	return s
}

// agreeStore is a store of an agreement test.
type agreeStore struct {
	name  string
	store dag.Store
}

// agreeRuns drives runs random runs of specs gen draws through stores in
// lockstep (see TestStoresAgree).
func agreeRuns(t *testing.T, runs int, stores []agreeStore, gen func(t *rapid.T) []*cikit.JobSpec) {
	n := 0
	rapid.Check(t, func(t *rapid.T) {
		if n++; n > runs {
			return
		}
		ctx := context.Background()
		specs := gen(t)
		ids := make([]string, len(stores))
		for i, s := range stores {
			run, err := s.store.RunCreate(ctx, &dag.RunCreateParams{Jobs: specs})
			if err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			ids[i] = run.ID
		}
		retried := false
		for step := 0; step < 200; step++ {
			jobs, err := stores[0].store.JobList(ctx, ids[0])
			if err != nil {
				t.Fatal(err)
			}
			run, err := stores[0].store.RunGet(ctx, ids[0])
			if err != nil {
				t.Fatal(err)
			}
			checkPlaceholders(t, jobs)
			batch := agreeEvents(t, step, jobs)
			if len(batch) == 0 {
				if !retried && run.State == cikit.RunFailed {
					retried = true
					agreeOn(t, "retry failed", stores, ids, func(s dag.Store, id string) (string, error) {
						res, err := s.RunRetryFailed(ctx, id)
						return describe(res), err
					})
					continue
				}
				return
			}
			if waits(jobs) && rapid.IntRange(0, 10).Draw(t, fmt.Sprintf("release%d", step)) == 0 {
				// Every store's clock is the machine's: an hour and a
				// half, and two, from now covers each wait.
				now := time.Now().Add(2 * time.Hour)
				agreeOn(t, "release and expire", stores, ids, func(s dag.Store, id string) (string, error) {
					released, err := s.JobsRelease(ctx, now)
					if err != nil {
						return "", err
					}
					expired, err := s.JobsExpire(ctx, &dag.ExpireParams{Now: now, GateTimeout: 90 * time.Minute})
					return describeOf(id, append(released, expired...)), err
				})
				continue
			}
			if rapid.IntRange(0, 20).Draw(t, fmt.Sprintf("cancel%d", step)) == 0 {
				agreeOn(t, "cancel", stores, ids, func(s dag.Store, id string) (string, error) {
					res, err := s.RunCancel(ctx, id)
					return describe(res), err
				})
				continue
			}
			agreeOn(t, describeBatch(batch), stores, ids, func(s dag.Store, id string) (string, error) {
				evs := make([]*dag.JobEvent, len(batch))
				for i, e := range batch {
					c := *e
					c.RunID = id
					evs[i] = &c
				}
				results, err := s.JobApply(ctx, evs)
				if err != nil {
					return "", err
				}
				// Which event of a batch tells a job became READY is
				// the store's choice; what each event did to its own
				// job, and what the batch did in all, are not.
				var own []string
				all := map[string]string{}
				for _, r := range results {
					switch {
					case r.Err != nil:
						own = append(own, "refused: "+errorKind(r.Err))
						continue
					case len(r.Changed) == 0:
						own = append(own, "no change")
					default:
						own = append(own, describeJob(r.Changed[0]))
					}
					for _, j := range r.Changed {
						all[j.ID()] = describeJob(j)
					}
				}
				keys := slices.Sorted(maps.Keys(all))
				var merged []string
				for _, k := range keys {
					merged = append(merged, all[k])
				}
				return fmt.Sprint(own, merged), nil
			})
		}
		t.Fatal("the run did not end in 200 steps")
	})
}

// checkPlaceholders checks the placeholders of run-time matrices among
// a run's jobs:
//
//   - SAFETY: a placeholder is never READY, QUEUED, RUNNING, MANUAL or
//     DELAYED: it is never dispatched;
//   - SAFETY: an expanded placeholder is terminal iff all its variants
//     are, and then SUCCEEDED iff they are all satisfied.
func checkPlaceholders(t *rapid.T, jobs []*dag.Job) {
	specs := make([]*cikit.JobSpec, len(jobs))
	for i, j := range jobs {
		specs[i] = j.Spec
	}
	g, err := dag.FromSpecs(specs)
	if err != nil {
		t.Fatalf("the run's jobs do not form a graph: %v", err)
	}
	for i, j := range jobs {
		if !g.Node(i).Expand {
			continue
		}
		switch j.State {
		case cikit.JobReady, cikit.JobQueued, cikit.JobRunning, cikit.JobManual, cikit.JobDelayed, cikit.JobCancelRequested:
			t.Fatalf("placeholder %s is %s", j.ID(), j.State)
		}
		if !g.Expanded(i) {
			continue
		}
		ended, satisfied := true, true
		for _, v := range g.Variants(i) {
			ended = ended && jobs[v].State.Terminal()
			satisfied = satisfied && dag.Satisfied(jobs[v].State, jobs[v].Spec.AllowFailure)
		}
		switch {
		case ended != j.State.Terminal():
			t.Fatalf("placeholder %s is %s, its variants ended: %v", j.ID(), j.State, ended)
		case ended && satisfied != (j.State == cikit.JobSucceeded):
			t.Fatalf("placeholder %s is %s, its variants satisfied: %v", j.ID(), j.State, satisfied)
		}
	}
}

// agreeEvents draws a batch: for some jobs that can move, their next
// event, with a random outcome and failure class for completions.
func agreeEvents(t *rapid.T, step int, jobs []*dag.Job) []*dag.JobEvent {
	var batch []*dag.JobEvent
	for _, j := range jobs {
		e := &dag.JobEvent{JobID: j.ID(), Attempt: j.Attempt, Runner: "r"}
		switch j.State {
		case cikit.JobReady:
			e.Kind = dag.EventQueue
		case cikit.JobQueued:
			e.Kind = dag.EventStart
		case cikit.JobRunning, cikit.JobCancelRequested:
			e.Kind = dag.EventComplete
			e.Outcome = rapid.SampledFrom([]cikit.JobState{cikit.JobSucceeded, cikit.JobSucceeded, cikit.JobFailed, cikit.JobCancelled}).
				Draw(t, fmt.Sprintf("outcome%d-%s", step, j.ID()))
			e.FailureClass = rapid.SampledFrom([]cikit.FailureClass{cikit.FailureScript, cikit.FailureInfrastructure}).
				Draw(t, fmt.Sprintf("class%d-%s", step, j.ID()))
			e.ExitCode = 1
		case cikit.JobManual:
			e.Kind = dag.EventPlay
			if rapid.IntRange(0, 3).Draw(t, fmt.Sprintf("reject%d-%s", step, j.ID())) == 0 {
				e.Kind, e.Reason = dag.EventReject, "rejected by alice: not today"
			}
		case cikit.JobSucceeded, cikit.JobFailed:
			// A redelivered completion, now and then.
			if rapid.IntRange(0, 5).Draw(t, fmt.Sprintf("dup%d-%s", step, j.ID())) == 0 {
				e.Kind, e.Outcome = dag.EventComplete, j.State
				batch = append(batch, e)
			}
			continue
		default:
			continue
		}
		if rapid.Bool().Draw(t, fmt.Sprintf("take%d-%s", step, j.ID())) {
			batch = append(batch, e)
		}
	}
	return batch
}

// agreeOn applies do to every store's run and requires the same answer
// and the same jobs afterwards.
func agreeOn(t *rapid.T, what string, stores []agreeStore, ids []string, do func(dag.Store, string) (string, error)) {
	var first, firstJobs string
	for i, s := range stores {
		got, err := do(s.store, ids[i])
		if err != nil {
			got = "error: " + errorKind(err)
		}
		jobs, err := s.store.JobList(context.Background(), ids[i])
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		run, err := s.store.RunGet(context.Background(), ids[i])
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		var list []string
		for _, j := range jobs {
			list = append(list, describeJob(j))
		}
		state := fmt.Sprint(run.State, list)
		if i == 0 {
			first, firstJobs = got, state
			continue
		}
		if got != first {
			t.Fatalf("%s: %s answered\n%s\nbut %s\n%s", what, s.name, got, stores[0].name, first)
		}
		if state != firstJobs {
			t.Fatalf("%s: afterwards %s has\n%s\nbut %s\n%s", what, s.name, state, stores[0].name, firstJobs)
		}
	}
}

// waits reports whether a job of jobs waits for a time or a person.
func waits(jobs []*dag.Job) bool {
	return slices.ContainsFunc(jobs, func(j *dag.Job) bool { return j.State == cikit.JobDelayed || j.State == cikit.JobManual })
}

// describeOf describes the results of a sweep about run id.
func describeOf(id string, results []*dag.TransitionResult) string {
	var out []string
	for _, r := range results {
		if r.Run.ID == id {
			out = append(out, describe(r))
		}
	}
	return fmt.Sprint(out)
}

func describeBatch(batch []*dag.JobEvent) string {
	var out []string
	for _, e := range batch {
		d := fmt.Sprintf("%v %s#%d", e.Kind, e.JobID, e.Attempt)
		if e.Kind == dag.EventComplete {
			d += fmt.Sprintf(" %s (%s)", e.Outcome, e.FailureClass)
		}
		out = append(out, d)
	}
	return fmt.Sprint("batch ", out)
}

func describe(res *dag.TransitionResult) string {
	if res == nil {
		return "<nil>"
	}
	var out []string
	for _, j := range res.Changed {
		out = append(out, describeJob(j))
	}
	return fmt.Sprint(res.Run.State, out)
}

func describeJob(j *dag.Job) string {
	return fmt.Sprintf("%s:%s#%d(exit %d, %q, runner %q)", j.ID(), j.State, j.Attempt, j.ExitCode, j.Reason, j.Runner)
}

func errorKind(err error) string {
	switch {
	case errors.Is(err, cikit.ErrInvalidTransition):
		return "invalid transition"
	case errors.Is(err, cikit.ErrNotFound):
		return "not found"
	}
	return err.Error()
}
