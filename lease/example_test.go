package lease_test

import (
	"context"
	"fmt"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/lease"
)

// Example runs a job under a lease on the memory stores: the first runner
// goes quiet and is reaped, the job's second attempt completes, and the
// first runner's late completion is fenced.
func Example() {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	jobs := dag.NewMemoryStore(dag.MemoryConfig{Now: clock, NewID: func() string { return "run-1" }})
	m, err := lease.NewManager(lease.Config{Store: lease.NewMemoryStore(), Jobs: jobs, Now: clock})
	if err != nil {
		panic(err)
	}
	reaper, err := lease.NewReaper(lease.ReaperConfig{Manager: m})
	if err != nil {
		panic(err)
	}
	run, _ := jobs.RunCreate(ctx, &dag.RunCreateParams{Jobs: []*cikit.JobSpec{{ID: "build", Steps: []cikit.Step{{Run: "make"}}}}})

	claim := func(n int, runner string) *lease.Lease {
		a := lease.Attempt{RunID: run.ID, JobID: "build", Attempt: n}
		if _, err := jobs.JobQueue(ctx, &dag.JobTransitionParams{RunID: run.ID, JobID: "build", Attempt: n}); err != nil {
			panic(err)
		}
		l, err := m.Claim(ctx, a, runner)
		if err != nil {
			panic(err)
		}
		return l
	}

	first := claim(1, "runner-a")
	_, err = m.Claim(ctx, first.Attempt, "runner-b")
	fmt.Println("second claim:", err != nil)

	now = now.Add(lease.DefaultTTL + reaper.Grace()) // runner-a goes quiet
	rep, _ := reaper.Reap(ctx)
	fmt.Println("reaped, retried:", rep.Retried)

	second := claim(2, "runner-b")
	if _, err := m.Renew(ctx, second.Attempt, second.Token); err != nil {
		panic(err)
	}
	res, _ := m.Complete(ctx, second.Attempt, second.Token, &dag.JobCompleteParams{Outcome: cikit.JobSucceeded})
	fmt.Println("attempt 2:", res.Changed[0].State)

	_, err = m.Complete(ctx, first.Attempt, first.Token, &dag.JobCompleteParams{Outcome: cikit.JobSucceeded})
	fmt.Println("late completion:", err)
	// Output:
	// second claim: true
	// reaped, retried: 1
	// attempt 2: succeeded
	// late completion: lease of job "build" attempt 1 of run "run-1" is fenced: the job has no lease
}
