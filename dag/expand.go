package dag

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/cikit/cikit"
)

// Expander expands a job whose matrix only the run can compute
// (cikit.JobSpec.Expand) into its variants, once the jobs it needs are
// done. A store calls it in the write that would make the job READY; the
// reference platform and `cikit run` pass compiler.ExpandJob.
type Expander interface {
	// Expand returns the variants of req.Job: jobs with IDs of their own,
	// MatrixOf req.Job.ID and no Expand. Expansion is a function of the
	// request alone, so an error (a matrix that is not an object, that
	// expands to no job or to too many) fails the job with class
	// cikit.FailureConfig, never retried; its message is the job's
	// reason.
	Expand(ctx context.Context, req *ExpandRequest) ([]*cikit.JobSpec, error)
}

// ExpandRequest is what an Expander is given: the job, its run's context
// and how the jobs it needs ended.
type ExpandRequest struct {
	Run   *cikit.RunContext
	Job   *cikit.JobSpec
	Needs map[string]cikit.NeedResult
}

// ExpanderFunc adapts a function to Expander.
type ExpanderFunc func(ctx context.Context, req *ExpandRequest) ([]*cikit.JobSpec, error)

// Expand calls f.
func (f ExpanderFunc) Expand(ctx context.Context, req *ExpandRequest) ([]*cikit.JobSpec, error) {
	return f(ctx, req)
}

// DefaultMaxJobs is the most jobs a run may have once its placeholders
// are expanded, when a store's MaxJobs says nothing: the compiler's
// default bound of a pipeline's jobs (compiler.DefaultMaxJobs).
const DefaultMaxJobs = 1000

// expansion is how a store expands the placeholders of run-time matrices
// (Node.Expand), and decides the run-time conditions of jobs
// (cikit.JobSpec.If), in the writes that make them arrive.
type expansion struct {
	expander Expander // nil: every expansion fails, saying so
	decider  Decider  // nil: every run-time condition fails, saying so
	maxJobs  int
}

// expandRun is a write's run as an expansion sees and grows it.
type expandRun struct {
	runID string
	g     *Graph
	specs []*cikit.JobSpec // by graph index
	jobs  []*Job           // by graph index; nil for a job not read
	// context returns the run's context; it is called at most once per
	// expansion, which keeps it in ctx.
	context func() (*cikit.RunContext, error)
	ctx     *cikit.RunContext
	// added are the indexes of the jobs the expansions added.
	added []int
}

// arrives reports whether a job entering s left PENDING for what its
// needs being satisfied makes it (see Arrival).
func arrives(s cikit.JobState) bool {
	return s == cikit.JobReady || s == cikit.JobManual || s == cikit.JobDelayed
}

// expand decides, in the write a, the run-time condition (JobSpec.If) of
// every job that a made arrive from PENDING or from an ended attempt (a
// retry), before expanding it if it is a placeholder: a false condition
// skips the job, one the Decider cannot decide (or a store without one)
// fails it, each with the consequences of any skip or failure. Then it
// expands every placeholder that a made arrive:
// the placeholder stays PENDING (it is never dispatched) and its
// variants join the run at its end, settled by the rules (READY, their
// needs being the placeholder's); or, when the expansion fails, the
// placeholder fails with the consequences of any failure. What it
// changes is added to a, in order; r grows by the variants. The jobs the
// rules read for that must be in r: the placeholder's needs and, for a
// failure, what is below it. Only the store failing (and ctx ending) is
// an error.
func (x *expansion) expand(ctx context.Context, r *expandRun, a *applied, now time.Time) error {
	decided := make(map[int]bool)
	for {
		k, i, cond := -1, 0, false
		for n, j := range a.changed {
			if !arrives(j.State) {
				continue
			}
			c, _ := r.g.Index(j.ID())
			if r.specs[c].If != nil && !decided[c] && (a.from[n] == cikit.JobPending || a.from[n].Terminal()) {
				k, i, cond = n, c, true
				break
			}
			if r.g.Node(c).Expand && !r.g.Expanded(c) {
				k, i = n, c
				break
			}
		}
		if k < 0 {
			return nil
		}
		if cond {
			run, refused, err := x.decide(ctx, r, i)
			if err != nil {
				return err
			}
			if run {
				decided[i] = true
				continue
			}
			j := x.pend(a, r.jobs[i], k)
			je := &JobEvent{Kind: eventConditionFalse, RunID: r.runID, JobID: j.ID(), Attempt: j.Attempt, Outcome: cikit.JobSkipped,
				ExitCode: -1, Reason: fmt.Sprintf("its condition is false: %s", r.specs[i].If.Expr)}
			if refused != nil {
				je.Kind, je.Outcome, je.Reason, je.FailureClass = eventExpandFailed, cikit.JobFailed, refused.Error(), cikit.FailureConfig
			}
			w := &write{ev: Event{Kind: je.Kind, Job: i}, job: je}
			da, err := w.apply(r.g, r.jobs, now)
			if err != nil {
				return fmt.Errorf("dag: run %q: ending job %q on its condition: %w", r.runID, j.ID(), err)
			}
			a.merge(da)
			continue
		}
		ph := x.pend(a, r.jobs[i], k)
		variants, refused, err := x.variants(ctx, r, i)
		if err != nil {
			return err
		}
		if refused != nil {
			w := &write{ev: Event{Kind: eventExpandFailed, Job: i}, job: &JobEvent{Kind: eventExpandFailed, RunID: r.runID,
				JobID: ph.ID(), Attempt: ph.Attempt, Outcome: cikit.JobFailed, ExitCode: -1, Reason: refused.Error(),
				FailureClass: cikit.FailureConfig}}
			fa, err := w.apply(r.g, r.jobs, now)
			if err != nil {
				return fmt.Errorf("dag: run %q: failing job %q whose expansion failed: %w", r.runID, ph.ID(), err)
			}
			a.merge(fa)
			continue
		}
		specs := append(slices.Clone(r.specs), variants...)
		g, err := FromSpecs(specs)
		if err != nil { // variants checks them: a bug, not the run's
			return fmt.Errorf("dag: run %q: the variants of job %q do not fit its graph: %w", r.runID, ph.ID(), err)
		}
		var added []int
		for _, v := range variants {
			added = append(added, len(r.jobs))
			r.jobs = append(r.jobs, &Job{RunID: r.runID, Spec: v, State: cikit.JobPending, Attempt: 1, FailureAllowed: v.AllowFailure})
		}
		r.g, r.specs, r.added = g, specs, append(r.added, added...)
		w := &write{settles: added}
		va, err := w.apply(g, r.jobs, now)
		if err != nil {
			return fmt.Errorf("dag: run %q: settling the variants of job %q: %w", r.runID, ph.ID(), err)
		}
		a.merge(va)
	}
}

// pend takes back the arrival of job j, a.changed[k]: j is PENDING again,
// to be expanded or ended on its condition in the same write. An arrival
// from PENDING leaves a; one from an ended attempt (a retry) stays, as
// the new attempt waiting.
func (x *expansion) pend(a *applied, j *Job, k int) *Job {
	if j.State == cikit.JobManual {
		j.Reason = "" // a gate's: it waits for nobody yet
	}
	j.State, j.ReadyAt = cikit.JobPending, time.Time{}
	if a.from[k] == cikit.JobPending {
		a.changed, a.from = slices.Delete(a.changed, k, k+1), slices.Delete(a.from, k, k+1)
	} else {
		a.changed[k] = j.clone()
	}
	return j
}

// merge appends what b changed to a.
func (a *applied) merge(b *applied) {
	a.changed, a.from, a.ended = append(a.changed, b.changed...), append(a.from, b.from...), append(a.ended, b.ended...)
}

// request is what job i of r is expanded or decided on: its spec, its
// run's context and how its needs ended. An error is the store's: a need
// not read, or the run's context unreadable.
func (r *expandRun) request(i int) (*ExpandRequest, error) {
	spec := r.specs[i]
	req := &ExpandRequest{Job: spec.Clone(), Needs: make(map[string]cikit.NeedResult, len(r.g.Parents(i)))}
	for _, p := range r.g.Parents(i) {
		j := r.jobs[p]
		if j == nil {
			return nil, fmt.Errorf("dag: run %q: job %q needs job %q, which was not read", r.runID, spec.ID, r.specs[p].ID)
		}
		nr := cikit.NeedResult{Result: j.State}
		if j.Result != nil {
			nr.Outputs = maps.Clone(j.Result.Outputs)
		}
		req.Needs[j.ID()] = nr
	}
	if r.ctx == nil {
		c, err := r.context()
		if err != nil {
			return nil, err
		}
		r.ctx = c
	}
	req.Run = r.ctx
	return req, nil
}

// variants asks the Expander for the variants of placeholder i of r and
// checks them. refused is why the placeholder cannot be expanded, which
// fails it; err is the store failing or ctx ending.
func (x *expansion) variants(ctx context.Context, r *expandRun, i int) (variants []*cikit.JobSpec, refused, err error) {
	spec := r.specs[i]
	if x.expander == nil {
		return nil, fmt.Errorf("this store has no Expander, so the run-time matrix of job %s cannot be expanded", spec.ID), nil
	}
	req, err := r.request(i)
	if err != nil {
		return nil, nil, err
	}
	out, err := x.expander.Expand(ctx, req)
	if cerr := ctx.Err(); cerr != nil {
		return nil, nil, cerr // not the matrix's fault
	}
	if err != nil {
		return nil, err, nil
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the matrix of job %s expands to no job", spec.ID), nil
	}
	if n := len(r.specs) + len(out); n > x.maxJobs {
		return nil, fmt.Errorf("the matrix of job %s expands to %d jobs, which would make its run %d jobs, more than the %d a run may have",
			spec.ID, len(out), n, x.maxJobs), nil
	}
	seen := make(map[string]bool, len(out))
	variants = make([]*cikit.JobSpec, len(out))
	for n, v := range out {
		switch {
		case v == nil:
			return nil, fmt.Errorf("variant %d of job %s is missing", n, spec.ID), nil
		case v.ID == "":
			return nil, fmt.Errorf("variant %d of job %s has no ID", n, spec.ID), nil
		case seen[v.ID]:
			return nil, fmt.Errorf("job %s has two variants %q", spec.ID, v.ID), nil
		case v.MatrixOf != spec.ID:
			return nil, fmt.Errorf("variant %q of job %s says it is a variant of %q", v.ID, spec.ID, v.MatrixOf), nil
		case v.Expand != nil:
			return nil, fmt.Errorf("variant %q of job %s has a matrix to expand itself", v.ID, spec.ID), nil
		}
		if _, dup := r.g.Index(v.ID); dup {
			return nil, fmt.Errorf("variant %q of job %s has the ID of a job of its run", v.ID, spec.ID), nil
		}
		seen[v.ID] = true
		c := v.Clone()
		if len(c.Needs) == 0 {
			c.Needs = slices.Clone(spec.Needs)
		} else if !sameSet(c.Needs, spec.Needs) {
			return nil, fmt.Errorf("variant %q of job %s needs %v, not what the job needs (%v)", v.ID, spec.ID, c.Needs, spec.Needs), nil
		}
		variants[n] = c
	}
	return variants, nil, nil
}

// sameSet reports whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(slices.Compact(x), slices.Compact(y))
}

// checkCreated refuses the jobs of a new run that claim to be variants of
// one of its placeholders: only its store adds those, expanding it.
func checkCreated(specs []*cikit.JobSpec) error {
	expand := make(map[string]bool)
	for _, s := range specs {
		if s.Expand != nil {
			expand[s.ID] = true
		}
	}
	for _, s := range specs {
		if s.Expand == nil && s.MatrixOf != "" && expand[s.MatrixOf] {
			return fmt.Errorf("%w: job %q is a variant of %q, whose variants its store adds when it expands it", ErrInvalidGraph, s.ID, s.MatrixOf)
		}
		if err := checkTrust(s); err != nil {
			return fmt.Errorf("dag: job %q: %w: %v", s.ID, ErrInvalidParams, err)
		}
	}
	return nil
}

// checkTrust refuses a gate or an admission beyond the bounds of
// cikit.MaxGateReasons, MaxGateReviewers and MaxGateTextBytes, or with a
// negative duration.
func checkTrust(s *cikit.JobSpec) error {
	text := func(what, v string) error {
		if len(v) > cikit.MaxGateTextBytes {
			return fmt.Errorf("%s has %d bytes, more than the %d allowed", what, len(v), cikit.MaxGateTextBytes)
		}
		return nil
	}
	if a := s.Admission; a != nil {
		if err := text("the admission's reason", a.Reason); err != nil {
			return err
		}
	}
	g := s.Gate
	if g == nil {
		return nil
	}
	switch {
	case len(g.Reasons) > cikit.MaxGateReasons:
		return fmt.Errorf("the gate has %d reasons, more than the %d allowed", len(g.Reasons), cikit.MaxGateReasons)
	case len(g.Reviewers) > cikit.MaxGateReviewers:
		return fmt.Errorf("the gate has %d reviewers, more than the %d allowed", len(g.Reviewers), cikit.MaxGateReviewers)
	case g.WaitTimer < 0 || g.Expires < 0:
		return fmt.Errorf("the gate's wait timer (%s) and expiry (%s) must not be negative", g.WaitTimer, g.Expires)
	}
	for _, r := range g.Reasons {
		if err := text("a reason of the gate", r); err != nil {
			return err
		}
	}
	for _, r := range g.Reviewers {
		if err := text("a reviewer of the gate", r); err != nil {
			return err
		}
	}
	return nil
}

// variantsResult is the result of expanded placeholder i as its variants
// end: their outputs merged, a key taking the value of the last variant
// to finish that set it (variants that finished at once in plan order),
// as a GitHub matrix job's outputs are; nil when none set any.
func variantsResult(g *Graph, v *view, i int) *JobResult {
	var ended []*Job
	for _, p := range g.Variants(i) {
		if v.state(p).Terminal() && v.jobs[p] != nil {
			ended = append(ended, v.jobs[p])
		}
	}
	slices.SortStableFunc(ended, func(a, b *Job) int { return a.FinishedAt.Compare(b.FinishedAt) })
	out := map[string]string{}
	for _, j := range ended {
		if j.Result != nil {
			maps.Copy(out, j.Result.Outputs)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return &JobResult{Outputs: out}
}
