package dagtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

// ExpandFactory returns a new, empty store whose clock is now, which
// expands the placeholders of run-time matrices with expander (none when
// nil) and refuses runs of more than maxJobs jobs (its default when 0).
type ExpandFactory func(t *testing.T, now func() time.Time, expander dag.Expander, maxJobs int) dag.Store

// ListExpand is the JobSpec.Expand that ListExpander reads: the variants
// are named by a list given whole (List), or by the JSON list of strings
// in output Output of need Need.
type ListExpand struct {
	List   []string `json:"list,omitempty"`
	Need   string   `json:"need,omitempty"`
	Output string   `json:"output,omitempty"`
}

// Placeholder returns a job to expand with ListExpander. Its MatrixOf
// names itself, as the compiler writes a placeholder.
func Placeholder(id string, e ListExpand, needs ...string) *cikit.JobSpec {
	raw, _ := json.Marshal(e) // a ListExpand always marshals
	return &cikit.JobSpec{ID: id, Name: id, MatrixOf: id, Needs: needs, Expand: raw, Steps: []cikit.Step{{Name: "true", Run: "true"}}}
}

// ListExpander is an Expander for the suite and for property tests: a job
// whose Expand is a ListExpand becomes one variant per name, "<job>
// (<name>)", a copy of the job with MatrixOf set and Matrix {"v": name},
// and the run's SHA in its environment as SHA when the run has a
// context. A need or output that is missing, or an output that is not a
// list of strings, is an error, as a matrix that is not an object is
// compiler.ExpandJob's.
var ListExpander = dag.ExpanderFunc(func(_ context.Context, req *dag.ExpandRequest) ([]*cikit.JobSpec, error) {
	var e ListExpand
	if err := json.Unmarshal(req.Job.Expand, &e); err != nil {
		return nil, fmt.Errorf("job %s: the matrix is not a ListExpand: %v", req.Job.ID, err)
	}
	names := e.List
	if e.Need != "" {
		need, ok := req.Needs[e.Need]
		if !ok {
			return nil, fmt.Errorf("job %s: the matrix reads need %s, which the job does not need", req.Job.ID, e.Need)
		}
		raw, ok := need.Outputs[e.Output]
		if !ok {
			return nil, fmt.Errorf("job %s: need %s has no output %s", req.Job.ID, e.Need, e.Output)
		}
		if err := json.Unmarshal([]byte(raw), &names); err != nil {
			return nil, fmt.Errorf("job %s: the matrix from %s.%s is not a list of strings: %v", req.Job.ID, e.Need, e.Output, err)
		}
	}
	out := make([]*cikit.JobSpec, len(names))
	for i, n := range names {
		v := req.Job.Clone()
		v.ID, v.Name, v.MatrixOf, v.Expand, v.Matrix = req.Job.ID+" ("+n+")", req.Job.ID+" ("+n+")", req.Job.ID, nil, map[string]string{"v": n}
		if req.Run != nil {
			v.Env = map[string]string{"SHA": req.Run.SHA}
		}
		out[i] = v
	}
	return out, nil
})

// expandPipeline is setup -> m (expanded from setup's output "m") ->
// [after, always (When always)].
func expandPipeline() []*cikit.JobSpec {
	step := []cikit.Step{{Name: "true", Run: "true"}}
	return []*cikit.JobSpec{
		{ID: "setup", Name: "setup", Steps: step},
		Placeholder("m", ListExpand{Need: "setup", Output: "m"}, "setup"),
		{ID: "after", Name: "after", Needs: []string{"m"}, Steps: step},
		{ID: "always", Name: "always", Needs: []string{"m"}, When: cikit.WhenAlways, Steps: step},
	}
}

type expandBundle struct {
	store dag.Store
	run   *dag.Run
}

func setupExpand(t *testing.T, factory ExpandFactory, expander dag.Expander, maxJobs int, p *dag.RunCreateParams) *expandBundle {
	t.Helper()
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := factory(t, c.now, expander, maxJobs)
	run, err := s.RunCreate(context.Background(), p)
	require.NoError(t, err)
	b := &expandBundle{store: s, run: run}
	if d, ok := s.(Derived); ok {
		t.Cleanup(func() { b.checkCounters(t, d) })
	}
	return b
}

// checkCounters checks a Derived store's counters against a recount from
// the jobs' states, variants and placeholders included, at the end of a
// case.
func (b *expandBundle) checkCounters(t *testing.T, d Derived) {
	t.Helper()
	if t.Failed() {
		return
	}
	counters, err := d.DependencyCounters(context.Background(), b.run.ID)
	require.NoError(t, err)
	if counters == nil {
		return
	}
	jobs, err := b.store.JobList(context.Background(), b.run.ID)
	require.NoError(t, err)
	specs := make([]*cikit.JobSpec, len(jobs))
	for i, j := range jobs {
		specs[i] = j.Spec
	}
	g, err := dag.FromSpecs(specs)
	require.NoError(t, err)
	for i, j := range jobs {
		want := 0
		for _, p := range g.Parents(i) {
			if !dag.Satisfied(jobs[p].State, g.Node(p).AllowFailure) {
				want++
			}
		}
		got, ok := counters[j.ID()]
		if len(g.Parents(i)) == 0 {
			require.False(t, ok, "job %s needs nothing but has a counter", j.ID())
			continue
		}
		require.True(t, ok, "job %s has no counter", j.ID())
		require.Equal(t, want, got, "the counter of job %s", j.ID())
	}
}

// run queues and starts attempt of job.
func (b *expandBundle) run1(t *testing.T, job string, attempt int) {
	t.Helper()
	ctx := context.Background()
	p := &dag.JobTransitionParams{RunID: b.run.ID, JobID: job, Attempt: attempt}
	_, err := b.store.JobQueue(ctx, p)
	require.NoError(t, err)
	_, err = b.store.JobStart(ctx, p)
	require.NoError(t, err)
}

// finish completes attempt of a RUNNING job with outputs.
func (b *expandBundle) finish(t *testing.T, job string, attempt int, outcome cikit.JobState, outputs map[string]string) *dag.TransitionResult {
	t.Helper()
	res, err := b.store.JobComplete(context.Background(), &dag.JobCompleteParams{RunID: b.run.ID, JobID: job, Attempt: attempt,
		Outcome: outcome, Reason: string(outcome), Result: &dag.JobResult{Outputs: outputs}})
	require.NoError(t, err)
	return res
}

func (b *expandBundle) advance(t *testing.T, job string, attempt int, outcome cikit.JobState, outputs map[string]string) *dag.TransitionResult {
	t.Helper()
	b.run1(t, job, attempt)
	return b.finish(t, job, attempt, outcome, outputs)
}

func (b *expandBundle) jobs(t *testing.T) map[string]*dag.Job {
	t.Helper()
	jobs, err := b.store.JobList(context.Background(), b.run.ID)
	require.NoError(t, err)
	out := make(map[string]*dag.Job, len(jobs))
	for _, j := range jobs {
		out[j.ID()] = j
	}
	return out
}

func (b *expandBundle) state(t *testing.T) map[string]cikit.JobState {
	t.Helper()
	out := map[string]cikit.JobState{}
	for id, j := range b.jobs(t) {
		out[id] = j.State
	}
	return out
}

func (b *expandBundle) waiting(t *testing.T) []string {
	t.Helper()
	jobs, err := b.store.JobListWaiting(context.Background(), &dag.WaitingListParams{Limit: dag.MaxWaitingListLimit})
	require.NoError(t, err)
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.RunID + "/" + j.ID()
	}
	return out
}

// ExerciseExpand runs the suite of run-time matrices against the stores
// factory makes: placeholders (cikit.JobSpec.Expand) expanded in the write
// that satisfies their needs, ending as their variants do.
func ExerciseExpand(t *testing.T, factory ExpandFactory) {
	abc := map[string]string{"m": `["a","b","c"]`}
	t.Run("VariantsSucceed", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := setupExpand(t, factory, ListExpander, 0, &dag.RunCreateParams{Jobs: expandPipeline(),
			Context: &cikit.RunContext{SHA: "0123456789abcdef0123456789abcdef01234567"}})
		res := b.advance(t, "setup", 1, cikit.JobSucceeded, abc)
		require.Equal(t, map[string]cikit.JobState{"setup": cikit.JobSucceeded,
			"m (a)": cikit.JobReady, "m (b)": cikit.JobReady, "m (c)": cikit.JobReady}, changed(res),
			"the placeholder stays PENDING; its variants are READY")
		jobs, err := b.store.JobList(ctx, b.run.ID)
		require.NoError(t, err)
		var ids []string
		for _, j := range jobs {
			ids = append(ids, j.ID())
		}
		require.Equal(t, []string{"setup", "m", "after", "always", "m (a)", "m (b)", "m (c)"}, ids, "variants at the end of the plan")
		v := jobs[4]
		require.Equal(t, "m", v.Spec.MatrixOf)
		require.Equal(t, []string{"setup"}, v.Spec.Needs, "a variant needs what its placeholder needs")
		require.Nil(t, v.Spec.Expand)
		require.Equal(t, "0123456789abcdef0123456789abcdef01234567", v.Spec.Env["SHA"], "the expander read the run's context")
		require.Equal(t, 1, v.Attempt)
		require.Equal(t, cikit.JobPending, jobs[1].State)
		got, err := b.store.JobGet(ctx, b.run.ID, "m (b)")
		require.NoError(t, err)
		require.Equal(t, cikit.JobReady, got.State)
		require.Equal(t, []string{b.run.ID + "/m (a)", b.run.ID + "/m (b)", b.run.ID + "/m (c)"}, b.waiting(t),
			"the placeholder is never offered")

		b.advance(t, "m (a)", 1, cikit.JobSucceeded, map[string]string{"k": "a", "only_a": "1"})
		b.advance(t, "m (c)", 1, cikit.JobSucceeded, map[string]string{"k": "c"})
		require.Equal(t, cikit.JobPending, b.state(t)["m"], "one variant still runs")
		res = b.advance(t, "m (b)", 1, cikit.JobSucceeded, map[string]string{"k": "b"})
		require.Equal(t, map[string]cikit.JobState{"m (b)": cikit.JobSucceeded, "m": cikit.JobSucceeded,
			"after": cikit.JobReady, "always": cikit.JobReady}, changed(res), "the placeholder ends with its last variant")
		m := b.jobs(t)["m"]
		require.Equal(t, map[string]string{"k": "b", "only_a": "1"}, m.Result.Outputs, "the last variant to finish sets a key")
		require.Equal(t, []string{b.run.ID + "/after", b.run.ID + "/always"}, b.waiting(t))
		b.advance(t, "after", 1, cikit.JobSucceeded, nil)
		res = b.advance(t, "always", 1, cikit.JobSucceeded, nil)
		require.Equal(t, cikit.RunSucceeded, res.Run.State)
	})

	t.Run("VariantFails", func(t *testing.T) {
		t.Parallel()
		b := setupExpand(t, factory, ListExpander, 0, &dag.RunCreateParams{Jobs: expandPipeline()})
		b.advance(t, "setup", 1, cikit.JobSucceeded, abc)
		b.advance(t, "m (a)", 1, cikit.JobSucceeded, nil)
		b.advance(t, "m (b)", 1, cikit.JobFailed, nil)
		res := b.advance(t, "m (c)", 1, cikit.JobSucceeded, nil)
		require.Equal(t, map[string]cikit.JobState{"m (c)": cikit.JobSucceeded, "m": cikit.JobFailed,
			"after": cikit.JobSkipped, "always": cikit.JobReady}, changed(res))
		require.Contains(t, b.jobs(t)["after"].Reason, "needs m, which failed")
		res = b.advance(t, "always", 1, cikit.JobSucceeded, nil)
		require.Equal(t, cikit.RunFailed, res.Run.State)
	})

	t.Run("ExpanderFails", func(t *testing.T) {
		t.Parallel()
		b := setupExpand(t, factory, ListExpander, 0, &dag.RunCreateParams{Jobs: expandPipeline()})
		res := b.advance(t, "setup", 1, cikit.JobSucceeded, map[string]string{"m": `{"not":"a list"}`})
		require.Equal(t, map[string]cikit.JobState{"setup": cikit.JobSucceeded, "m": cikit.JobFailed,
			"after": cikit.JobSkipped, "always": cikit.JobReady}, changed(res))
		m := b.jobs(t)["m"]
		require.Contains(t, m.Reason, "the matrix from setup.m is not a list of strings", "the expander's error is the reason")
		require.Equal(t, -1, m.ExitCode)
		attempts, err := b.store.JobAttempts(context.Background(), b.run.ID, "m")
		require.NoError(t, err)
		require.Len(t, attempts, 1)
		require.Equal(t, cikit.JobFailed, attempts[0].State)
	})

	t.Run("NoExpander", func(t *testing.T) {
		t.Parallel()
		b := setupExpand(t, factory, nil, 0, &dag.RunCreateParams{Jobs: expandPipeline()})
		b.advance(t, "setup", 1, cikit.JobSucceeded, abc)
		m := b.jobs(t)["m"]
		require.Equal(t, cikit.JobFailed, m.State)
		require.Equal(t, "this store has no Expander, so the run-time matrix of job m cannot be expanded", m.Reason)
	})

	t.Run("MaxJobs", func(t *testing.T) {
		t.Parallel()
		b := setupExpand(t, factory, ListExpander, 6, &dag.RunCreateParams{Jobs: expandPipeline()})
		b.advance(t, "setup", 1, cikit.JobSucceeded, abc)
		m := b.jobs(t)["m"]
		require.Equal(t, cikit.JobFailed, m.State, "4 jobs and 3 variants are more than 6")
		require.Contains(t, m.Reason, "more than the 6 a run may have")
		require.Len(t, b.jobs(t), 4, "no variant was added")

		ok := setupExpand(t, factory, ListExpander, 7, &dag.RunCreateParams{Jobs: expandPipeline()})
		ok.advance(t, "setup", 1, cikit.JobSucceeded, abc)
		require.Len(t, ok.jobs(t), 7, "7 jobs are not more than 7")
	})

	t.Run("BadVariants", func(t *testing.T) {
		t.Parallel()
		for name, tc := range map[string]struct {
			mutate func(vs []*cikit.JobSpec) []*cikit.JobSpec
			reason string
		}{
			"none":           {func([]*cikit.JobSpec) []*cikit.JobSpec { return nil }, "expands to no job"},
			"duplicate":      {func(vs []*cikit.JobSpec) []*cikit.JobSpec { return append(vs, vs[0]) }, "two variants"},
			"clash":          {func(vs []*cikit.JobSpec) []*cikit.JobSpec { vs[0].ID = "after"; return vs }, "the ID of a job of its run"},
			"other MatrixOf": {func(vs []*cikit.JobSpec) []*cikit.JobSpec { vs[0].MatrixOf = "x"; return vs }, "says it is a variant of"},
			"expand again":   {func(vs []*cikit.JobSpec) []*cikit.JobSpec { vs[0].Expand = []byte(`{}`); return vs }, "to expand itself"},
			"other needs":    {func(vs []*cikit.JobSpec) []*cikit.JobSpec { vs[0].Needs = []string{"after"}; return vs }, "not what the job needs"},
		} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				exp := dag.ExpanderFunc(func(ctx context.Context, req *dag.ExpandRequest) ([]*cikit.JobSpec, error) {
					vs, err := ListExpander.Expand(ctx, req)
					return tc.mutate(vs), err
				})
				b := setupExpand(t, factory, exp, 0, &dag.RunCreateParams{Jobs: expandPipeline()})
				b.advance(t, "setup", 1, cikit.JobSucceeded, abc)
				m := b.jobs(t)["m"]
				require.Equal(t, cikit.JobFailed, m.State)
				require.Contains(t, m.Reason, tc.reason)
				require.Len(t, b.jobs(t), 4)
			})
		}
	})

	t.Run("ExpandsAtCreation", func(t *testing.T) {
		t.Parallel()
		jobs := []*cikit.JobSpec{Placeholder("m", ListExpand{List: []string{"x", "y"}}), {ID: "after", Needs: []string{"m"}}}
		b := setupExpand(t, factory, ListExpander, 0, &dag.RunCreateParams{Jobs: jobs})
		require.Equal(t, map[string]cikit.JobState{"m": cikit.JobPending, "after": cikit.JobPending,
			"m (x)": cikit.JobReady, "m (y)": cikit.JobReady}, b.state(t))
		b.advance(t, "m (x)", 1, cikit.JobSucceeded, nil)
		b.advance(t, "m (y)", 1, cikit.JobSucceeded, nil)
		require.Equal(t, cikit.JobReady, b.state(t)["after"])

		_, err := b.store.RunCreate(context.Background(), &dag.RunCreateParams{Jobs: append(expandPipeline(),
			&cikit.JobSpec{ID: "m (z)", MatrixOf: "m", Needs: []string{"setup"}})})
		require.ErrorIs(t, err, dag.ErrInvalidGraph, "a run is not created with variants of its placeholders")
	})

	t.Run("CancelMidway", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := setupExpand(t, factory, ListExpander, 0, &dag.RunCreateParams{Jobs: expandPipeline()})
		b.advance(t, "setup", 1, cikit.JobSucceeded, abc)
		b.advance(t, "m (a)", 1, cikit.JobSucceeded, nil)
		b.run1(t, "m (b)", 1)
		res, err := b.store.RunCancel(ctx, b.run.ID)
		require.NoError(t, err)
		require.Equal(t, map[string]cikit.JobState{"m (b)": cikit.JobCancelRequested, "m (c)": cikit.JobCancelled,
			"after": cikit.JobCancelled, "always": cikit.JobCancelled}, changed(res), "the placeholder waits for its running variant")
		require.Equal(t, cikit.RunRunning, res.Run.State)
		res = b.finish(t, "m (b)", 1, cikit.JobCancelled, nil)
		require.Equal(t, map[string]cikit.JobState{"m (b)": cikit.JobCancelled, "m": cikit.JobCancelled}, changed(res))
		require.Equal(t, cikit.RunCancelled, res.Run.State)

		// With no variant running, the placeholder ends with the cancel.
		c := setupExpand(t, factory, ListExpander, 0, &dag.RunCreateParams{Jobs: expandPipeline()})
		c.advance(t, "setup", 1, cikit.JobSucceeded, abc)
		res, err = c.store.RunCancel(ctx, c.run.ID)
		require.NoError(t, err)
		require.Equal(t, cikit.JobCancelled, changed(res)["m"])
		require.Equal(t, cikit.RunCancelled, res.Run.State)
	})

	t.Run("RetryFailedVariants", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := setupExpand(t, factory, ListExpander, 0, &dag.RunCreateParams{Jobs: expandPipeline()})
		b.advance(t, "setup", 1, cikit.JobSucceeded, abc)
		b.advance(t, "m (a)", 1, cikit.JobSucceeded, map[string]string{"k": "a"})
		b.advance(t, "m (b)", 1, cikit.JobFailed, nil)
		b.advance(t, "m (c)", 1, cikit.JobSucceeded, nil)
		b.advance(t, "always", 1, cikit.JobSucceeded, nil)
		res, err := b.store.RunRetryFailed(ctx, b.run.ID)
		require.NoError(t, err)
		require.Equal(t, map[string]cikit.JobState{"m (b)": cikit.JobReady, "m": cikit.JobPending,
			"after": cikit.JobPending, "always": cikit.JobPending}, changed(res),
			"the failed variant runs again; the placeholder waits for it; no expansion")
		jobs := b.jobs(t)
		require.Len(t, jobs, 7)
		require.Equal(t, 2, jobs["m"].Attempt)
		require.Equal(t, 2, jobs["m (b)"].Attempt)
		require.Equal(t, 1, jobs["m (a)"].Attempt, "a variant that succeeded keeps its result")
		require.Equal(t, []string{b.run.ID + "/m (b)"}, b.waiting(t))
		res = b.advance(t, "m (b)", 2, cikit.JobSucceeded, map[string]string{"k": "b"})
		require.Equal(t, map[string]cikit.JobState{"m (b)": cikit.JobSucceeded, "m": cikit.JobSucceeded,
			"after": cikit.JobReady, "always": cikit.JobReady}, changed(res))
		require.Equal(t, map[string]string{"k": "b"}, b.jobs(t)["m"].Result.Outputs)
	})

	t.Run("RetryReexpands", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		// m runs whatever setup did: setup's failure leaves it no matrix.
		jobs := expandPipeline()
		jobs[1].When = cikit.WhenAlways
		b := setupExpand(t, factory, ListExpander, 0, &dag.RunCreateParams{Jobs: jobs})
		res := b.advance(t, "setup", 1, cikit.JobFailed, nil)
		require.Equal(t, cikit.JobFailed, changed(res)["m"])
		require.Contains(t, b.jobs(t)["m"].Reason, "need setup has no output m")
		b.advance(t, "always", 1, cikit.JobSucceeded, nil)
		res, err := b.store.RunRetryFailed(ctx, b.run.ID)
		require.NoError(t, err)
		require.Equal(t, cikit.JobPending, changed(res)["m"])
		res = b.advance(t, "setup", 2, cikit.JobSucceeded, map[string]string{"m": `["a"]`})
		require.Equal(t, map[string]cikit.JobState{"setup": cikit.JobSucceeded, "m (a)": cikit.JobReady}, changed(res),
			"the new attempt of the placeholder is expanded")
		require.Equal(t, 2, b.jobs(t)["m"].Attempt)
		res = b.advance(t, "m (a)", 1, cikit.JobSucceeded, nil)
		require.Equal(t, cikit.JobSucceeded, changed(res)["m"])
	})

	t.Run("ExpandsOnceUnderConcurrentCompletions", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		for range 5 {
			step := []cikit.Step{{Name: "true", Run: "true"}}
			var calls sync.WaitGroup
			var mu sync.Mutex
			expanded := 0
			exp := dag.ExpanderFunc(func(ctx context.Context, req *dag.ExpandRequest) ([]*cikit.JobSpec, error) {
				mu.Lock()
				expanded++
				mu.Unlock()
				return ListExpander.Expand(ctx, req)
			})
			b := setupExpand(t, factory, exp, 0, &dag.RunCreateParams{Jobs: []*cikit.JobSpec{
				{ID: "a", Steps: step}, {ID: "b", Steps: step},
				Placeholder("m", ListExpand{List: []string{"x", "y"}}, "a", "b"),
			}})
			b.run1(t, "a", 1)
			b.run1(t, "b", 1)
			errs := make([]error, 2)
			for k, id := range []string{"a", "b"} {
				calls.Add(1)
				go func() {
					defer calls.Done()
					_, errs[k] = b.store.JobComplete(ctx, &dag.JobCompleteParams{RunID: b.run.ID, JobID: id, Attempt: 1, Outcome: cikit.JobSucceeded})
				}()
			}
			calls.Wait()
			require.NoError(t, errors.Join(errs...))
			st := b.state(t)
			require.Equal(t, map[string]cikit.JobState{"a": cikit.JobSucceeded, "b": cikit.JobSucceeded, "m": cikit.JobPending,
				"m (x)": cikit.JobReady, "m (y)": cikit.JobReady}, st)
			mu.Lock()
			require.Equal(t, 1, expanded, "one write expands, once")
			mu.Unlock()
			keys := b.waiting(t)
			slices.Sort(keys)
			require.Equal(t, []string{b.run.ID + "/m (x)", b.run.ID + "/m (y)"}, keys)
		}
	})
}
