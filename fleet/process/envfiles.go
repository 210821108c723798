package process

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cikit/cikit/fleet/runtime"
)

// maxSummaryLogBytes bounds how much of a step's GITHUB_STEP_SUMMARY the
// log shows.
const maxSummaryLogBytes = 64 << 10

// newStepFiles creates the next step's environment files, empty and
// writable by the job's user, in the job's temp directory.
func (j *jobRun) newStepFiles() (runtime.Files, error) {
	j.nstep++
	dir := filepath.Join(j.temp, "_runner_file_commands")
	if j.nstep == 1 {
		if err := errors.Join(os.Mkdir(dir, 0o755), j.e.own(dir)); err != nil {
			return runtime.Files{}, err
		}
	}
	f := runtime.GitHubFiles(dir, j.nstep)
	for _, p := range []string{f.Env, f.Path, f.Output, f.StepSummary, f.State} {
		if err := errors.Join(os.WriteFile(p, nil, 0o644), j.e.own(p)); err != nil {
			return runtime.Files{}, err
		}
	}
	return f, nil
}

// applyFiles reads what the step wrote to its files and applies it with
// GitHub's semantics: GITHUB_ENV's variables are the later steps', as are
// GITHUB_PATH's directories in front of PATH; GITHUB_OUTPUT's values are
// the step's outputs (over those ::set-output set, into *outputs); the
// summary is shown in the log. A malformed or too large file is an error
// naming it.
func (j *jobRun) applyFiles(f runtime.Files, step string, outputs *map[string]string) error {
	out := j.cmds.StepOutputs()
	if out == nil {
		out = map[string]string{}
	}
	var errs []error
	if kvs, err := readEnvFile(f.Env, runtime.ParseEnvFile); err != nil {
		errs = append(errs, fmt.Errorf("GITHUB_ENV: %w", err))
	} else if err := j.gh.AddEnv(kvs); err != nil {
		errs = append(errs, fmt.Errorf("GITHUB_ENV: %w", err))
	}
	if dirs, err := readEnvFile(f.Path, runtime.ParsePathFile); err != nil {
		errs = append(errs, fmt.Errorf("GITHUB_PATH: %w", err))
	} else {
		j.paths = append(j.paths, dirs...)
	}
	if kvs, err := readEnvFile(f.Output, runtime.ParseEnvFile); err != nil {
		errs = append(errs, fmt.Errorf("GITHUB_OUTPUT: %w", err))
	} else {
		for _, kv := range kvs {
			out[kv.Name] = kv.Value
		}
	}
	*outputs = out
	if err := j.showSummary(f.StepSummary, step); err != nil {
		errs = append(errs, fmt.Errorf("GITHUB_STEP_SUMMARY: %w", err))
	}
	if fi, err := os.Stat(f.State); err == nil && fi.Size() > 0 {
		fmt.Fprintf(j.pw, "--- warning: step %q wrote to GITHUB_STATE, which only the post steps of JavaScript actions read; they do not run here\n", step)
	}
	return errors.Join(errs...)
}

// readEnvFile opens path and parses it with parse, at most
// runtime.DefaultEnvFileBytes.
func readEnvFile[T any](path string, parse func(io.Reader, int64) ([]T, error)) ([]T, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // the step removed it: nothing written
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parse(f, runtime.DefaultEnvFileBytes)
}

// showSummary writes what the step wrote to GITHUB_STEP_SUMMARY to the
// log, at most maxSummaryLogBytes of it.
func (j *jobRun) showSummary(path, step string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return err
	}
	fmt.Fprintf(j.pw, "--- summary of step %q (GITHUB_STEP_SUMMARY, %d bytes; the run page does not show summaries yet):\n", step, fi.Size())
	b, err := io.ReadAll(io.LimitReader(f, maxSummaryLogBytes))
	if err != nil {
		return err
	}
	j.pw.Write(b)
	if len(b) > 0 && b[len(b)-1] != '\n' {
		io.WriteString(j.pw, "\n")
	}
	if fi.Size() > maxSummaryLogBytes {
		fmt.Fprintf(j.pw, "--- (the summary's first %d bytes only)\n", maxSummaryLogBytes)
	}
	return nil
}
