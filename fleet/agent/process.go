package agent

import (
	"context"

	"github.com/cikit/cikit/fleet/process"
)

// ProcessExecutor runs jobs as local processes with package process.
type ProcessExecutor struct {
	Executor *process.Executor
}

// Run runs job with the process executor (process.Executor.RunJob), whose
// job supervisor kills the job when job.Lease passes without a renewal.
func (p ProcessExecutor) Run(ctx context.Context, job process.Job) Result {
	r := p.Executor.RunJob(ctx, job)
	return Result{State: r.State, ExitCode: r.ExitCode, Reason: r.Reason, FailureClass: r.FailureClass,
		Outputs: r.Outputs, Annotations: r.Annotations, Commit: r.Commit, CheckoutDuration: r.CheckoutDuration, EnvNames: r.EnvNames, Caches: r.Caches,
		ImageRef: r.ImageRef, ImageDigest: r.ImageDigest}
}
