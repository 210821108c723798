package dag

import (
	"context"

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
