package dagtest

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

// DecideFactory returns a new, empty store whose clock is now, which
// expands placeholders with expander and decides the run-time conditions
// of jobs with decider (none when nil).
type DecideFactory func(t *testing.T, now func() time.Time, expander dag.Expander, decider dag.Decider) dag.Store

// OutputDecider is a Decider for the suite: a condition
// "<need>.<output>==<value>" is true when that output of that need holds
// value (a need missing is an error); "error" is an error; anything else
// is an error too.
var OutputDecider = dag.DeciderFunc(func(_ context.Context, req *dag.ExpandRequest) (bool, error) {
	expr := req.Job.If.Expr
	ref, value, ok := strings.Cut(expr, "==")
	if !ok {
		return false, errors.New("the condition is not <need>.<output>==<value>")
	}
	need, output, ok := strings.Cut(ref, ".")
	if !ok {
		return false, errors.New("the condition does not name a need's output")
	}
	n, ok := req.Needs[need]
	if !ok {
		return false, errors.New("the condition reads need " + need + ", which the job does not need")
	}
	return n.Outputs[output] == value, nil
})

// decidePipeline is setup -> ship (its condition cond) -> [after,
// always (When always)].
func decidePipeline(cond string) []*cikit.JobSpec {
	step := []cikit.Step{{Name: "true", Run: "true"}}
	return []*cikit.JobSpec{
		{ID: "setup", Name: "setup", Steps: step},
		{ID: "ship", Name: "ship", Needs: []string{"setup"}, If: &cikit.Condition{Lang: cikit.LangGitHub, Expr: cond}, Steps: step},
		{ID: "after", Name: "after", Needs: []string{"ship"}, Steps: step},
		{ID: "always", Name: "always", Needs: []string{"ship"}, When: cikit.WhenAlways, Steps: step},
	}
}

func setupDecide(t *testing.T, factory DecideFactory, expander dag.Expander, decider dag.Decider, jobs []*cikit.JobSpec) *expandBundle {
	t.Helper()
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := factory(t, c.now, expander, decider)
	run, err := s.RunCreate(context.Background(), &dag.RunCreateParams{Jobs: jobs})
	require.NoError(t, err)
	b := &expandBundle{store: s, run: run}
	if d, ok := s.(Derived); ok {
		t.Cleanup(func() { b.checkCounters(t, d) })
	}
	return b
}

// ExerciseDecide runs the suite of run-time conditions against the stores
// factory makes: a job's cikit.JobSpec.If decided by the store's Decider
// in the write that makes the job arrive.
func ExerciseDecide(t *testing.T, factory DecideFactory) {
	yes, no := map[string]string{"deploy": "yes"}, map[string]string{"deploy": "no"}

	t.Run("TrueRuns", func(t *testing.T) {
		t.Parallel()
		b := setupDecide(t, factory, nil, OutputDecider, decidePipeline("setup.deploy==yes"))
		res := b.advance(t, "setup", 1, cikit.JobSucceeded, yes)
		require.Equal(t, map[string]cikit.JobState{"setup": cikit.JobSucceeded, "ship": cikit.JobReady}, changed(res))
		res = b.advance(t, "ship", 1, cikit.JobSucceeded, nil)
		require.Equal(t, map[string]cikit.JobState{"ship": cikit.JobSucceeded, "after": cikit.JobReady, "always": cikit.JobReady}, changed(res))
		b.advance(t, "after", 1, cikit.JobSucceeded, nil)
		res = b.advance(t, "always", 1, cikit.JobSucceeded, nil)
		require.Equal(t, cikit.RunSucceeded, res.Run.State)
	})

	t.Run("FalseSkips", func(t *testing.T) {
		t.Parallel()
		b := setupDecide(t, factory, nil, OutputDecider, decidePipeline("setup.deploy==yes"))
		res := b.advance(t, "setup", 1, cikit.JobSucceeded, no)
		require.Equal(t, map[string]cikit.JobState{"setup": cikit.JobSucceeded, "ship": cikit.JobSkipped,
			"after": cikit.JobSkipped, "always": cikit.JobReady}, changed(res))
		jobs := b.jobs(t)
		require.Equal(t, "its condition is false: setup.deploy==yes", jobs["ship"].Reason)
		require.Contains(t, jobs["after"].Reason, "ship")
		require.Equal(t, []string{b.run.ID + "/always"}, b.waiting(t), "the skipped job is not dispatched")
		res = b.advance(t, "always", 1, cikit.JobSucceeded, nil)
		require.Equal(t, cikit.RunSucceeded, res.Run.State, "a skipped job does not fail its run")
	})

	t.Run("ErrorFailsConfig", func(t *testing.T) {
		t.Parallel()
		b := setupDecide(t, factory, nil, OutputDecider, decidePipeline("nothing"))
		res := b.advance(t, "setup", 1, cikit.JobSucceeded, yes)
		require.Equal(t, map[string]cikit.JobState{"setup": cikit.JobSucceeded, "ship": cikit.JobFailed,
			"after": cikit.JobSkipped, "always": cikit.JobReady}, changed(res))
		ship := b.jobs(t)["ship"]
		require.Equal(t, "the condition of job ship (nothing): the condition is not <need>.<output>==<value>", ship.Reason)
		require.Equal(t, -1, ship.ExitCode)
		res = b.advance(t, "always", 1, cikit.JobSucceeded, nil)
		require.Equal(t, cikit.RunFailed, res.Run.State)

		// A retry decides the condition again: it does not run the job.
		res, err := b.store.RunRetryFailed(context.Background(), b.run.ID)
		require.NoError(t, err)
		ship = b.jobs(t)["ship"]
		require.Equal(t, cikit.JobFailed, ship.State, "changes %v", changed(res))
		require.Equal(t, 2, ship.Attempt)
		require.Contains(t, ship.Reason, "the condition of job ship")
		require.NotContains(t, b.waiting(t), b.run.ID+"/ship")
	})

	t.Run("NoDecider", func(t *testing.T) {
		t.Parallel()
		b := setupDecide(t, factory, nil, nil, decidePipeline("setup.deploy==yes"))
		b.advance(t, "setup", 1, cikit.JobSucceeded, yes)
		ship := b.jobs(t)["ship"]
		require.Equal(t, cikit.JobFailed, ship.State)
		require.Equal(t, "this store has no Decider, so the condition of job ship (setup.deploy==yes) cannot be decided at run time", ship.Reason)
	})

	t.Run("AtCreation", func(t *testing.T) {
		t.Parallel()
		var asked atomic.Int32
		d := dag.DeciderFunc(func(_ context.Context, req *dag.ExpandRequest) (bool, error) {
			asked.Add(1)
			require.Empty(t, req.Needs)
			return false, nil
		})
		step := []cikit.Step{{Name: "true", Run: "true"}}
		b := setupDecide(t, factory, nil, d, []*cikit.JobSpec{
			{ID: "first", Name: "first", If: &cikit.Condition{Lang: cikit.LangGitHub, Expr: "never"}, Steps: step},
			{ID: "next", Name: "next", Needs: []string{"first"}, Steps: step},
			{ID: "other", Name: "other", Steps: step},
		})
		require.Equal(t, int32(1), asked.Load())
		require.Equal(t, map[string]cikit.JobState{"first": cikit.JobSkipped, "next": cikit.JobSkipped, "other": cikit.JobReady}, b.state(t))
		require.Equal(t, "its condition is false: never", b.jobs(t)["first"].Reason)
	})

	t.Run("PlaceholderFalseNotExpanded", func(t *testing.T) {
		t.Parallel()
		var expanded atomic.Int32
		exp := dag.ExpanderFunc(func(ctx context.Context, req *dag.ExpandRequest) ([]*cikit.JobSpec, error) {
			expanded.Add(1)
			return ListExpander.Expand(ctx, req)
		})
		jobs := expandPipeline()
		jobs[1].If = &cikit.Condition{Lang: cikit.LangGitHub, Expr: "setup.deploy==yes"}
		b := setupDecide(t, factory, exp, OutputDecider, jobs)
		res := b.advance(t, "setup", 1, cikit.JobSucceeded, map[string]string{"deploy": "no", "m": `["a","b"]`})
		require.Equal(t, map[string]cikit.JobState{"setup": cikit.JobSucceeded, "m": cikit.JobSkipped,
			"after": cikit.JobSkipped, "always": cikit.JobReady}, changed(res))
		require.Zero(t, expanded.Load(), "a placeholder whose condition is false is not expanded")
		require.Len(t, b.jobs(t), 4, "no variants")
		require.Equal(t, "its condition is false: setup.deploy==yes", b.jobs(t)["m"].Reason)
	})

	t.Run("PlaceholderTrueExpanded", func(t *testing.T) {
		t.Parallel()
		jobs := expandPipeline()
		jobs[1].If = &cikit.Condition{Lang: cikit.LangGitHub, Expr: "setup.deploy==yes"}
		b := setupDecide(t, factory, ListExpander, OutputDecider, jobs)
		b.advance(t, "setup", 1, cikit.JobSucceeded, map[string]string{"deploy": "yes", "m": `["a","b"]`})
		st := b.state(t)
		require.Equal(t, cikit.JobPending, st["m"])
		require.Equal(t, cikit.JobReady, st["m (a)"])
		require.Equal(t, cikit.JobReady, st["m (b)"])
	})
}
