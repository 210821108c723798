package process

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet/runtime"
)

// runComposite runs the local composite action in dir that step uses,
// depth levels deep in composite actions: its steps in turn, as the job's
// are (if:, shell:, env, working-directory, nested local actions), in
// contexts of their own (inputs from the step's with: and the action's
// defaults, steps of their own), and returns how it ended and its outputs.
// A failing step of the action fails it, unless the step may fail.
func (j *jobRun) runComposite(ctx context.Context, step cikit.Step, name, dir string, depth int) (stepExit, error, cikit.FailureClass, map[string]string) {
	if depth > runtime.MaxActionDepth {
		return stepExit{code: -1}, fmt.Errorf("uses %s: composite actions nest deeper than %d levels", step.Uses, runtime.MaxActionDepth), cikit.FailureConfig, nil
	}
	if err := inWorkspace(j.ws, dir); err != nil {
		return stepExit{code: -1}, fmt.Errorf("uses %s: %w", step.Uses, err), cikit.FailureConfig, nil
	}
	a, err := runtime.LoadAction(dir)
	if err != nil {
		return stepExit{code: -1}, fmt.Errorf("uses %s: %w", step.Uses, err), cikit.FailureConfig, nil
	}
	inputs, warnings, err := a.InputsContext(step.With, j.gh.Expand)
	if err != nil {
		return stepExit{code: -1}, fmt.Errorf("uses %s: %w", step.Uses, err), cikit.FailureConfig, nil
	}
	for _, w := range warnings {
		fmt.Fprintf(j.pw, "--- warning: %s: %s\n", step.Uses, w)
	}
	outer, outerEval, outerPath := j.gh, j.eval, j.actionPath
	c := outer.Composite(a.Dir, inputs)
	j.gh, j.eval, j.actionPath = c, ghEval{c}, a.Dir
	defer func() { j.gh, j.eval, j.actionPath = outer, outerEval, outerPath }()

	x := stepExit{code: 0}
	var failure error
	class := cikit.FailureScript
	jobFailed := j.res.State != cikit.JobSucceeded
	for i, inner := range a.Steps {
		innerName := inner.Name
		if innerName == "" {
			innerName = fmt.Sprintf("step %d", i+1)
		}
		innerName = name + " / " + innerName
		runs, err := c.StepRuns(&inner, exprStatus(jobFailed || failure != nil))
		if err == nil && runs {
			err = j.expandStep(&inner)
		}
		if err != nil {
			return stepExit{code: -1}, fmt.Errorf("%s: %w", innerName, err), cikit.FailureConfig, nil
		}
		if !runs {
			c.SetStep(inner.ID, runtime.Skipped, runtime.Skipped, nil)
			continue
		}
		ix, ierr, iclass, outputs := j.execStep(ctx, inner, innerName, false, depth)
		if ctx.Err() != nil {
			return ix, ierr, iclass, nil
		}
		reason := j.e.stepReason(innerName, ix, ierr)
		outcome, conclusion := runtime.Success, runtime.Success
		if reason != "" {
			outcome, conclusion = runtime.Failure, runtime.Failure
			if inner.ContinueOnError {
				conclusion = runtime.Success
				fmt.Fprintf(j.pw, "--- %s; continuing (continue on error)\n", reason)
			} else if failure == nil {
				// The using step's failure: its log line says it.
				x, failure, class = ix, errors.New(reason), iclass
			}
		}
		c.SetStep(inner.ID, outcome, conclusion, outputs)
	}
	if failure != nil {
		if x.code == 0 {
			x.code = -1
		}
		return x, failure, class, nil
	}
	outputs, err := a.EvalOutputs(c)
	if err != nil {
		return stepExit{code: -1}, err, cikit.FailureConfig, nil
	}
	return x, nil, "", outputs
}

// inWorkspace checks that the action in dir, and its metadata file, are
// in the workspace ws once symbolic links are followed: the runner reads
// them with its own rights, and a job's step could have left a link to
// a file of the runner's.
func inWorkspace(ws, dir string) error {
	root, err := filepath.EvalSymlinks(ws)
	if err != nil {
		return err
	}
	for _, p := range []string{dir, filepath.Join(dir, "action.yml"), filepath.Join(dir, "action.yaml")} {
		real, err := filepath.EvalSymlinks(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if !within(real, root) {
			return fmt.Errorf("%s leads out of the workspace", p)
		}
	}
	return nil
}
