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

// Run runs spec with the process executor.
func (p ProcessExecutor) Run(ctx context.Context, spec *cikit.JobSpec, out io.Writer, step func(int)) Result {
	r := p.Executor.RunOutput(ctx, spec, out, step)
	return Result{State: r.State, ExitCode: r.ExitCode, Reason: r.Reason, FailureClass: r.FailureClass}
}
