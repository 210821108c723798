package dagtest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

// exerciseRunNumbers is the part of Exercise about Run.Number: 1, 2, 3 …
// per pipeline in creation order.
func exerciseRunNumbers(t *testing.T, factory Factory) {
	create := func(t *testing.T, s dag.Store, pipeline, key string) *dag.Run {
		t.Helper()
		run, err := s.RunCreate(context.Background(), &dag.RunCreateParams{Jobs: pipeline1(), Pipeline: pipeline, Branch: "main",
			IdempotencyKey: key, Supersede: dag.SupersedeNever})
		require.NoError(t, err)
		return run
	}
	t.Run("PerPipeline", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		s := factory(t, (&clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}).now)
		var got []string
		for _, p := range []string{"acme/api:ci", "acme/web:ci", "acme/api:ci", "acme/api:ci", "acme/web:ci", ""} {
			r := create(t, s, p, "")
			got = append(got, fmt.Sprintf("%s#%d", p, r.Number))
			stored, err := s.RunGet(ctx, r.ID)
			require.NoError(t, err)
			require.Equal(t, r.Number, stored.Number, "RunGet has the number RunCreate gave")
		}
		require.Equal(t, []string{"acme/api:ci#1", "acme/web:ci#1", "acme/api:ci#2", "acme/api:ci#3", "acme/web:ci#2", "#1"}, got,
			"each pipeline counts its own runs")
		listed, err := s.RunList(ctx, &dag.RunListParams{Pipeline: "acme/api:ci"})
		require.NoError(t, err)
		var numbers []int64
		for _, r := range listed {
			numbers = append(numbers, r.Number)
		}
		require.Equal(t, []int64{3, 2, 1}, numbers, "RunList has the numbers, newest first")
	})

	t.Run("Idempotent", func(t *testing.T) {
		t.Parallel()
		s := factory(t, (&clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}).now)
		first := create(t, s, "acme/api:ci", "delivery-1")
		again := create(t, s, "acme/api:ci", "delivery-1")
		require.Equal(t, first.ID, again.ID)
		require.Equal(t, int64(1), again.Number, "a repeated creation keeps its run's number")
		require.Equal(t, int64(2), create(t, s, "acme/api:ci", "delivery-2").Number, "and takes none")
	})

	t.Run("Concurrent", func(t *testing.T) {
		t.Parallel()
		s := factory(t, (&clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}).now)
		const n = 8
		numbers := make([]int64, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				run, err := s.RunCreate(context.Background(), &dag.RunCreateParams{Jobs: pipeline1(), Pipeline: "acme/api:ci",
					Branch: fmt.Sprintf("b%d", i), Supersede: dag.SupersedeNever})
				errs[i] = err
				if err == nil {
					numbers[i] = run.Number
				}
			})
		}
		wg.Wait()
		seen := map[int64]bool{}
		for i := range n {
			require.NoError(t, errs[i])
			require.Positive(t, numbers[i])
			require.False(t, seen[numbers[i]], "run numbers are distinct: %v", numbers)
			seen[numbers[i]] = true
		}
		next := create(t, s, "acme/api:ci", "")
		for _, m := range numbers {
			require.Greater(t, next.Number, m, "a later run has a greater number")
		}
	})
}

// pipeline1 is a run of one job.
func pipeline1() []*cikit.JobSpec {
	return []*cikit.JobSpec{{ID: "build", Name: "build", Steps: []cikit.Step{{Name: "true", Run: "true"}}}}
}
