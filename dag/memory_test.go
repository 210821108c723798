package dag_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/dag/dagtest"
)

// pipeline is build -> [unit, lint(allow_failure)] -> integration.
func pipeline() []*cikit.JobSpec {
	step := []cikit.Step{{Run: "true"}}
	return []*cikit.JobSpec{
		{ID: "build", Steps: step},
		{ID: "unit", Needs: []string{"build"}, Steps: step},
		{ID: "lint", Needs: []string{"build"}, AllowFailure: true, Steps: step},
		{ID: "integration", Needs: []string{"unit", "lint"}, Steps: step},
	}
}

// TestMemoryStore runs the Store conformance suite on the memory store.
func TestMemoryStore(t *testing.T) {
	t.Parallel()
	dagtest.Exercise(t, func(t *testing.T, now func() time.Time) dag.Store {
		return dag.NewMemoryStore(dag.MemoryConfig{Now: now})
	})
}

// TestMemoryStoreExpand runs the suite of run-time matrices on the memory
// store.
func TestMemoryStoreExpand(t *testing.T) {
	t.Parallel()
	dagtest.ExerciseExpand(t, func(t *testing.T, now func() time.Time, expander dag.Expander, maxJobs int) dag.Store {
		return dag.NewMemoryStore(dag.MemoryConfig{Now: now, Expander: expander, MaxJobs: maxJobs})
	})
}

// TestMemoryStoreDecide runs the suite of run-time conditions on the
// memory store.
func TestMemoryStoreDecide(t *testing.T) {
	t.Parallel()
	dagtest.ExerciseDecide(t, func(t *testing.T, now func() time.Time, expander dag.Expander, decider dag.Decider) dag.Store {
		return dag.NewMemoryStore(dag.MemoryConfig{Now: now, Expander: expander, Decider: decider})
	})
}

func TestMemoryStoreConfig(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dag.NewMemoryStore(dag.MemoryConfig{NewID: func() string { return "run-1" }})
	run, err := s.RunCreate(ctx, &dag.RunCreateParams{Jobs: pipeline()})
	require.NoError(t, err)
	require.Equal(t, "run-1", run.ID)
	_, err = s.RunCreate(ctx, &dag.RunCreateParams{Jobs: pipeline()})
	require.ErrorIs(t, err, cikit.ErrConflict, "an ID generator that repeats itself is caught")

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.JobList(cctx, run.ID)
	require.ErrorIs(t, err, context.Canceled)
}
