package dag

import (
	"context"
	"fmt"
)

// Decider decides the run-time condition of a job (cikit.JobSpec.If) once
// the jobs it needs are done. A store calls it in the write that would
// make the job arrive (READY, MANUAL or DELAYED), before expanding it if
// it is a placeholder; the reference platform and `cikit run` pass
// compiler.DecideJob.
type Decider interface {
	// Decide reports whether req.Job runs. false skips the job (and the
	// jobs that need it react as to any skipped job); an error fails it
	// with class cikit.FailureConfig, never retried, its message the
	// job's reason.
	Decide(ctx context.Context, req *ExpandRequest) (bool, error)
}

// DeciderFunc adapts a function to Decider.
type DeciderFunc func(ctx context.Context, req *ExpandRequest) (bool, error)

// Decide calls f.
func (f DeciderFunc) Decide(ctx context.Context, req *ExpandRequest) (bool, error) {
	return f(ctx, req)
}

// decide asks the Decider whether job i of r, whose condition is set,
// runs. refused is why the condition cannot be decided, which fails the
// job; err is the store failing or ctx ending.
func (x *expansion) decide(ctx context.Context, r *expandRun, i int) (run bool, refused, err error) {
	spec := r.specs[i]
	if x.decider == nil {
		return false, fmt.Errorf("this store has no Decider, so the condition of job %s (%s) cannot be decided at run time", spec.ID, spec.If.Expr), nil
	}
	req, err := r.request(i)
	if err != nil {
		return false, nil, err
	}
	run, err = x.decider.Decide(ctx, req)
	if cerr := ctx.Err(); cerr != nil {
		return false, nil, cerr // not the condition's fault
	}
	if err != nil {
		return false, fmt.Errorf("the condition of job %s (%s): %w", spec.ID, spec.If.Expr, err), nil
	}
	return run, nil, nil
}
