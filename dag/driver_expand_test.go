package dag_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/dag/dagtest"
)

// TestDriverExpands drives a run whose matrix setup's outputs give: the
// Driver needs nothing of its own for it. The variants run (the
// placeholder never does) with the outputs setup reported through its
// Outcome, and the job after the placeholder sees their outputs merged.
func TestDriverExpands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dag.NewMemoryStore(dag.MemoryConfig{Expander: dagtest.ListExpander})
	run, err := s.RunCreate(ctx, &dag.RunCreateParams{Jobs: []*cikit.JobSpec{
		{ID: "setup"},
		dagtest.Placeholder("m", dagtest.ListExpand{Need: "setup", Output: "m"}, "setup"),
		{ID: "after", Needs: []string{"m"}},
	}})
	require.NoError(t, err)
	var mu sync.Mutex
	var ran []string
	var seen map[string]string
	d, err := dag.NewDriver(dag.DriverConfig{Store: s, Parallel: 2, Executor: dag.ExecutorFunc(func(ctx context.Context, j *dag.Job) dag.Outcome {
		mu.Lock()
		defer mu.Unlock()
		ran = append(ran, j.ID())
		o := dag.Outcome{State: cikit.JobSucceeded}
		switch {
		case j.ID() == "setup":
			o.Result = &dag.JobResult{Outputs: map[string]string{"m": `["a","b"]`}}
		case j.Spec.MatrixOf == "m":
			o.Result = &dag.JobResult{Outputs: map[string]string{"from_" + j.Spec.Matrix["v"]: "1"}}
		case j.ID() == "after":
			m, err := s.JobGet(ctx, j.RunID, "m")
			if err != nil {
				return dag.Outcome{State: cikit.JobFailed, ExitCode: -1, Reason: err.Error()}
			}
			seen = m.Result.Outputs
		}
		return o
	})})
	require.NoError(t, err)
	final, err := d.Drive(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, cikit.RunSucceeded, final.State)
	require.ElementsMatch(t, []string{"setup", "m (a)", "m (b)", "after"}, ran, "every job but the placeholder ran, once")
	require.Equal(t, map[string]string{"from_a": "1", "from_b": "1"}, seen)
}
