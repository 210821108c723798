package dag_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// A run of build -> [unit, lint] -> integration where unit fails: lint
// still runs, integration is skipped, and the run fails.
func ExampleDriver() {
	jobs := []*cikit.JobSpec{
		{ID: "build"},
		{ID: "unit", Needs: []string{"build"}},
		{ID: "lint", Needs: []string{"build"}},
		{ID: "integration", Needs: []string{"unit", "lint"}},
	}
	store := dag.NewMemoryStore(dag.MemoryConfig{})
	run, err := store.RunCreate(context.Background(), &dag.RunCreateParams{Jobs: jobs})
	if err != nil {
		panic(err)
	}
	driver, err := dag.NewDriver(dag.DriverConfig{
		Store:    store,
		Parallel: 1, // one at a time, so the output order is fixed
		Executor: dag.ExecutorFunc(func(ctx context.Context, j *dag.Job) dag.Outcome {
			if j.ID() == "unit" {
				return dag.Outcome{State: cikit.JobFailed, ExitCode: 1, Reason: "2 tests failed"}
			}
			return dag.Outcome{State: cikit.JobSucceeded}
		}),
		OnChange: func(j *dag.Job) {
			if j.State.Terminal() {
				fmt.Println(strings.TrimSpace(fmt.Sprintf("%-11s %-9s %s", j.ID(), j.State, j.Reason)))
			}
		},
	})
	if err != nil {
		panic(err)
	}
	final, err := driver.Drive(context.Background(), run.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println("run:", final.State)
	// Output:
	// build       succeeded
	// unit        failed    2 tests failed
	// integration skipped   needs unit, which failed
	// lint        succeeded
	// run: failed
}
