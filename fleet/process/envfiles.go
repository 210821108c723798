package process

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/cikit/cikit/fleet/runtime"
)

// maxSummaryLogBytes bounds how much of a step's GITHUB_STEP_SUMMARY the
// log shows.
const maxSummaryLogBytes = 64 << 10

// stepFiles are the environment files of one step of a GitHub job, fresh
// for each step, in the job's temp directory.
type stepFiles struct {
	env, path, output, summary string
}

// newStepFiles creates the next step's files, empty, writable by the
// job's user.
func (j *jobRun) newStepFiles() (*stepFiles, error) {
	j.nstep++
	dir := filepath.Join(j.temp, "_step"+strconv.Itoa(j.nstep))
	if err := errors.Join(os.Mkdir(dir, 0o755), j.e.own(dir)); err != nil {
		return nil, err
	}
	f := &stepFiles{
		env: filepath.Join(dir, "env"), path: filepath.Join(dir, "path"),
		output: filepath.Join(dir, "output"), summary: filepath.Join(dir, "step_summary"),
	}
	for _, p := range []string{f.env, f.path, f.output, f.summary} {
		if err := errors.Join(os.WriteFile(p, nil, 0o644), j.e.own(p)); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// env returns the variables that point at the files.
func (f *stepFiles) vars() map[string]string {
	return map[string]string{"GITHUB_ENV": f.env, "GITHUB_PATH": f.path, "GITHUB_OUTPUT": f.output, "GITHUB_STEP_SUMMARY": f.summary}
}

// applyFiles reads what the step wrote to its files and applies it with
// GitHub's semantics: GITHUB_ENV's variables are the later steps', as are
// GITHUB_PATH's directories in front of PATH; GITHUB_OUTPUT's values are
// the step's outputs (over those ::set-output set, into *outputs); the
// summary is shown in the log. A malformed or too large file is an error
// naming it.
func (j *jobRun) applyFiles(f *stepFiles, step string, outputs *map[string]string) error {
	out := j.cmds.StepOutputs()
	if out == nil {
		out = map[string]string{}
	}
	var errs []error
	if kvs, err := readEnvFile(f.env, runtime.ParseEnvFile); err != nil {
		errs = append(errs, fmt.Errorf("GITHUB_ENV: %w", err))
	} else {
		for _, kv := range kvs {
			j.fileEnv[kv.Name] = kv.Value
		}
	}
	if dirs, err := readEnvFile(f.path, runtime.ParsePathFile); err != nil {
		errs = append(errs, fmt.Errorf("GITHUB_PATH: %w", err))
	} else {
		j.paths = append(j.paths, dirs...)
	}
	if kvs, err := readEnvFile(f.output, runtime.ParseEnvFile); err != nil {
		errs = append(errs, fmt.Errorf("GITHUB_OUTPUT: %w", err))
	} else {
		for _, kv := range kvs {
			out[kv.Name] = kv.Value
		}
	}
	*outputs = out
	if err := j.showSummary(f.summary, step); err != nil {
		errs = append(errs, fmt.Errorf("GITHUB_STEP_SUMMARY: %w", err))
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
