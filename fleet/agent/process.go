package agent

import (
	"context"
	"io"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet/process"
)

// ProcessExecutor runs jobs as local processes with package process.
type ProcessExecutor struct {
	Executor *process.Executor
}

// Run runs spec with the process executor, whose job supervisor kills
// the job when lease passes without a renewal.
func (p ProcessExecutor) Run(ctx context.Context, spec *cikit.JobSpec, out io.Writer, step func(int), lease *process.LeaseDeadline) Result {
	r := p.Executor.RunLeased(ctx, spec, out, step, lease)
	return Result{State: r.State, ExitCode: r.ExitCode, Reason: r.Reason, FailureClass: r.FailureClass}
}
