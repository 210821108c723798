package dag_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

// A run of build -> [unit, e2e] -> deploy, reported while deploy runs:
// the critical path goes through e2e, the slower branch, and counts
// deploy up to now.
func ExampleReport() {
	ctx := context.Background()
	specs := []*cikit.JobSpec{
		{ID: "build"},
		{ID: "unit", Needs: []string{"build"}},
		{ID: "e2e", Needs: []string{"build"}},
		{ID: "deploy", Needs: []string{"unit", "e2e"}},
	}
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	now := start
	store := dag.NewMemoryStore(dag.MemoryConfig{
		Now:   func() time.Time { return now },
		NewID: func() string { return "run-1" },
	})
	run, err := store.RunCreate(ctx, &dag.RunCreateParams{Jobs: specs})
	if err != nil {
		panic(err)
	}
	// at applies a transition to job's first attempt at minute m.
	at := func(m int, transition func(context.Context, *dag.JobTransitionParams) (*dag.TransitionResult, error), job string) {
		now = start.Add(time.Duration(m) * time.Minute)
		if _, err := transition(ctx, &dag.JobTransitionParams{RunID: run.ID, JobID: job, Attempt: 1}); err != nil {
			panic(err)
		}
	}
	succeed := func(ctx context.Context, p *dag.JobTransitionParams) (*dag.TransitionResult, error) {
		return store.JobComplete(ctx, &dag.JobCompleteParams{RunID: p.RunID, JobID: p.JobID, Attempt: p.Attempt, Outcome: cikit.JobSucceeded})
	}
	at(0, store.JobQueue, "build")
	at(1, store.JobStart, "build")
	at(3, succeed, "build")
	at(3, store.JobQueue, "unit")
	at(3, store.JobStart, "unit")
	at(3, store.JobQueue, "e2e")
	at(4, store.JobStart, "e2e")
	at(5, succeed, "unit")
	at(12, succeed, "e2e")
	at(12, store.JobQueue, "deploy")
	at(13, store.JobStart, "deploy")

	run, err = store.RunGet(ctx, run.ID)
	if err != nil {
		panic(err)
	}
	jobs, err := store.JobList(ctx, run.ID)
	if err != nil {
		panic(err)
	}
	g, err := dag.FromSpecs(specs)
	if err != nil {
		panic(err)
	}
	r := dag.Report(g, run, jobs, start.Add(15*time.Minute))

	fmt.Printf("%s %s for %s\n", r.RunID, r.State, r.Duration)
	for _, j := range r.Jobs {
		fmt.Printf("%-6s %-9s queued %-4s ran %s\n", j.ID, j.State, j.QueueDuration, j.RunDuration)
	}
	fmt.Printf("critical path: %s (%s)\n", strings.Join(r.CriticalPath, " → "), r.CriticalPathDuration)
	counts, err := json.Marshal(r.Counts)
	if err != nil {
		panic(err)
	}
	fmt.Println("counts:", string(counts))
	// Output:
	// run-1 running for 15m0s
	// build  succeeded queued 1m0s ran 2m0s
	// unit   succeeded queued 0s   ran 2m0s
	// e2e    succeeded queued 1m0s ran 8m0s
	// deploy running   queued 1m0s ran 2m0s
	// critical path: build → e2e → deploy (12m0s)
	// counts: {"running":1,"succeeded":3}
}
