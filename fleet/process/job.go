package process

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/compiler/expr"
	"github.com/cikit/cikit/fleet/runtime"
	"github.com/cikit/cikit/secrets/mask"
)

// RunJob runs job's steps in a fresh workspace, in the world of its run:
// its commit checked out, its context in its environment and
// expressions, the results and outputs of its needs. It returns when every
// process it started has ended. Cancelling ctx cancels the job (the result
// is JobCancelled); exceeding the job's timeout fails it. Run, RunOutput
// and RunLeased are RunJob with a nil Context.
//
// The workspace is a checkout of the job's commit when the job's context
// has a source (Job.Context.Source) and the job asks for one
// (JobSpec.Checkout, or a GitHub step using actions/checkout), through
// Config.Checkout, and otherwise a copy of Config.Source, the runner's
// fixed directory; the log says which.
func (e *Executor) RunJob(ctx context.Context, job Job) Result {
	if job.Output == nil {
		job.Output = e.cfg.Output(job.Spec)
	}
	j := &jobRun{e: e, job: job, spec: job.Spec, github: job.Spec.Format == formatGitHub}
	res := j.run(ctx)
	if j.masker != nil {
		// A reason may quote what a step wrote.
		res.Reason = j.masker.String(res.Reason)
	}
	return res
}

const (
	formatGitHub = "github"
	formatGitLab = "gitlab"
)

// jobRun is one job being run.
type jobRun struct {
	e      *Executor
	job    Job
	spec   *cikit.JobSpec
	github bool // a GitHub workflow's job: GitHub's run-time semantics

	// root is the directory the job owns (and its sandbox sees): ws, the
	// workspace its steps run in, and temp, its RUNNER_TEMP, where the
	// environment files and script files of its steps are.
	root, ws, temp string
	out            *jobOutput
	// masker masks the job's secrets, and what its steps mask, in its
	// output, whatever the job's format.
	masker *mask.Masker
	// cmds is a GitHub job's workflow-command writer, which its output
	// goes through (and masks it with masker); nil for other jobs.
	cmds    *runtime.CommandWriter
	pw      *os.File // out's pipe, where steps and headers write
	procs   jobProcs
	timeout time.Duration
	// shared is the object directory of the runner's git cache that the
	// job's sandbox shows read-only and the checkout before its first
	// step borrows from (ObjectCache); "" when the checkout copies.
	shared string

	// eval evaluates the job's run-time expressions; nil when the job has
	// none.
	eval evaluator
	// base is the executor's environment and the predefined variables;
	// jobEnv the job's env, expanded (see stepEnv for the layers).
	base   map[string]string
	jobEnv map[string]string
	// gh holds a GitHub job's expression contexts, or those of the
	// composite action whose steps run; nil for other jobs.
	gh *runtime.GitHub
	// actionPath is the directory of the composite action whose steps
	// run; "" for the job's own steps.
	actionPath string
	// overrides rank above the job's env: a GitLab manual trigger's
	// variables.
	overrides map[string]string
	params    runtime.Params
	paths     []string        // what steps wrote to GITHUB_PATH, in order
	names     map[string]bool // the names of every step's variables
	nstep     int             // the steps started, for their files' names
	// caches are the job's caches and those of its actions/cache steps,
	// restored, to be saved at its end.
	caches []*cacheRun
	// idTokens are the job's ID tokens by variable, idRequest where its
	// steps request more (FetchedSecrets).
	idTokens  map[string]string
	idRequest *IDTokenRequest
	// image is the image the job runs in, resolved; nil for none.
	image *imagePlan
	// img is the image Config.Images prepared for the job; nil when the
	// job runs on the host or in the Job.Image its caller gave.
	img *jobImage
	// services are the job's services, net the network namespace it
	// shares with them (nil with the host's network, or none).
	services []*jobService
	net      *netns
	// early is a GitHub job's expression contexts before its
	// environment is set up (earlyGitHub).
	early *runtime.GitHub

	res Result
}

// evaluator evaluates a job's run-time expressions and step conditions.
type evaluator interface {
	// Expand returns s with its expressions evaluated.
	Expand(s string) (string, error)
	// StepRuns reports whether step runs, given whether the job has
	// failed so far.
	StepRuns(step *cikit.Step, failed bool) (bool, error)
}

// ghEval is a GitHub job's evaluator.
type ghEval struct{ g *runtime.GitHub }

func (x ghEval) Expand(s string) (string, error) { return x.g.Expand(s) }
func (x ghEval) StepRuns(step *cikit.Step, failed bool) (bool, error) {
	return x.g.StepRuns(step, exprStatus(failed))
}

// exprStatus is how a job stands for its steps' status functions.
func exprStatus(failed bool) expr.Status { return expr.Status{Failed: failed} }

// expanderEval is a Config.Expander for one job.
type expanderEval struct {
	x    Expander
	spec *cikit.JobSpec
}

func (x expanderEval) Expand(s string) (string, error) { return x.x.Expand(x.spec, s) }
func (x expanderEval) StepRuns(step *cikit.Step, failed bool) (bool, error) {
	return x.x.StepRuns(x.spec, step, failed)
}

// fail returns the result of a job that failed before or between its
// steps, with class, and says why in its log once it has one.
func (j *jobRun) fail(class cikit.FailureClass, format string, args ...any) Result {
	r := j.res
	r.State, r.ExitCode, r.Reason, r.FailureClass = cikit.JobFailed, -1, fmt.Sprintf(format, args...), class
	if j.pw != nil {
		fmt.Fprintf(j.pw, "--- %s\n", r.Reason)
	}
	return r
}

func (j *jobRun) run(ctx context.Context) Result {
	e, spec := j.e, j.spec
	j.res = Result{State: cikit.JobSucceeded, ExitCode: -1}
	j.timeout = spec.Timeout
	if j.timeout <= 0 {
		j.timeout = e.cfg.Timeout
	}
	jobCtx, cancel := context.WithTimeoutCause(ctx, j.timeout, errTimeout)
	defer cancel()

	root, err := e.newWorkspace(spec.ID)
	if err != nil {
		return j.fail(cikit.FailureInfrastructure, "workspace: %v", err)
	}
	if e.cfg.KeepWorkspaces {
		defer e.unlockWorkspace(root)
	} else {
		defer e.removeWorkspace(root)
	}
	j.root, j.ws, j.temp = root, filepath.Join(root, "workspace"), filepath.Join(root, "temp")
	for _, dir := range []string{j.ws, j.temp} {
		if err := errors.Join(os.Mkdir(dir, 0o755), e.own(dir)); err != nil {
			return j.fail(cikit.FailureInfrastructure, "workspace: %v", err)
		}
	}

	// All steps write into one pipe whose reader copies to the job's
	// output. Children get the pipe's file itself, so Wait returns when a
	// step's shell exits even if a background process it started still
	// holds the pipe; the copy ends once those are killed at job end.
	// The output of every job goes through one MaskWriter of the job's
	// masker, flushed at the end of each step and of the job.
	maskClass, maskErr := j.registerSecrets()
	var dst io.Writer
	var flush func()
	if j.github {
		// GitHub's workflow commands in the output: masks, annotations,
		// groups, outputs.
		j.cmds = runtime.NewCommandWriter(j.job.Output, runtime.CommandOptions{Masker: j.masker})
		dst, flush = j.cmds, func() { _ = j.cmds.Flush() }
	} else {
		mw := j.masker.Writer(j.job.Output)
		dst, flush = mw, func() { _ = mw.Flush() }
	}
	if j.out, err = newJobOutput(dst, flush); err != nil {
		return j.fail(cikit.FailureInfrastructure, "output pipe: %v", err)
	}
	j.pw = j.out.pw
	defer func() {
		if !j.out.close(2 * time.Second) {
			// A process that left its group still holds the pipe.
			e.cfg.Logger.Warn("a process of the job outlived it and keeps its output open", "job", spec.ID)
		}
	}()
	if maskErr != nil {
		return j.fail(maskClass, "%v", maskErr)
	}

	if e.sandbox != nil {
		io.WriteString(j.pw, e.sandbox.limits.header(e.sandbox.cgroup != ""))
	}
	if e.unsandboxed != "" {
		fmt.Fprintf(j.pw, "--- warning: this job is NOT SANDBOXED (%s); it runs as plain processes with the runner's user, file system and network\n", e.unsandboxed)
	}
	for _, w := range spec.Warnings {
		fmt.Fprintf(j.pw, "--- warning: %s\n", w)
	}
	if j.job.Files == nil && UsesFiles(spec) {
		return j.fail(cikit.FailureInfrastructure, "%v", errNoFiles)
	}
	// Secrets first: the image's registry credentials and the services'
	// environment may be expressions of them.
	if res, ok := j.fetchSecrets(jobCtx); !ok {
		return res
	}
	defer j.closeImage()
	if res, ok := j.resolveImage(jobCtx); !ok {
		return res
	}
	// After the job's sandbox and its services' have ended.
	defer func() { j.net.close() }()
	defer j.stopServices()
	if res, ok := j.prepareServices(jobCtx); !ok {
		return res
	}
	if img := j.job.Image; img != nil {
		j.res.ImageRef, j.res.ImageDigest = img.Ref, img.Digest
		if e.sandbox == nil {
			return j.fail(cikit.FailureInfrastructure, "%v", errImageUnsandboxed)
		}
		if j.image, err = planImage(img); err != nil {
			return j.fail(cikit.FailureInfrastructure, "%v", err)
		}
		fmt.Fprintf(j.pw, "--- image: %s\n", imageName(img))
		for _, w := range j.image.warnings {
			fmt.Fprintf(j.pw, "--- warning: %s\n", w)
		}
	}
	defer j.removeFilesDir()
	// The sandbox starts while the workspace is filled: it needs nothing
	// of it but the directory, and the objects a checkout borrows from
	// the runner's cache are where ObjectDir said.
	co := j.checkoutOpts()
	if co != nil {
		var ce *checkoutError
		if j.shared, ce = j.shareObjects(jobCtx, *co); ce != nil {
			return j.checkoutFailed(jobCtx, ce)
		}
	}
	var ro []string
	if j.shared != "" {
		ro = []string{j.shared}
	}
	type started struct {
		procs jobProcs
		err   error
	}
	procsc := make(chan started, 1)
	go func() {
		err := j.startServices(jobCtx)
		var procs jobProcs
		if err == nil {
			procs, err = e.startProcs(jobCtx, &sandboxSpec{ws: root, ro: ro, im: j.image, out: j.pw, net: j.net, hosts: j.serviceHosts()}, j.job.Lease)
		}
		procsc <- started{procs, err}
	}()
	ce := j.prepareWorkspace(jobCtx, co)
	s := <-procsc
	if ce != nil {
		if s.procs != nil {
			s.procs.end(e.cfg.Logger.Warn)
		}
		return j.checkoutFailed(jobCtx, ce)
	}
	if j.procs, err = s.procs, s.err; err != nil {
		res := j.fail(cikit.FailureInfrastructure, "sandbox: %v", err)
		if jobCtx.Err() != nil && context.Cause(jobCtx) == errTimeout {
			res.Reason, res.FailureClass = fmt.Sprintf("timed out after %s while the sandbox started", j.timeout), cikit.FailureTimeout
		} else if jobCtx.Err() != nil {
			res.State, res.Reason, res.FailureClass = cikit.JobCancelled, "cancelled while the sandbox started", ""
		}
		return res
	}
	// Whatever the steps left running dies with the job, before RunJob
	// returns.
	defer j.procs.end(e.cfg.Logger.Warn)

	if err := j.setUpEnv(); err != nil {
		return j.fail(cikit.FailureConfig, "%v", err)
	}
	if ce := j.downloadNeeds(jobCtx); ce != nil {
		return j.prepareFailed(jobCtx, "while the artifacts of its needs were downloaded", ce)
	}
	j.restoreCaches(jobCtx)
	if err := j.awaitServices(jobCtx); err != nil {
		var se *serviceError
		switch {
		case errors.As(err, &se):
			// What the job runs failed, as a step would.
			return j.fail(cikit.FailureScript, "%v", err)
		case jobCtx.Err() != nil && context.Cause(jobCtx) == errTimeout:
			return j.fail(cikit.FailureTimeout, "timed out after %s while its services started", j.timeout)
		case jobCtx.Err() != nil:
			r := j.fail("", "cancelled while its services started")
			r.State = cikit.JobCancelled
			return r
		}
		return j.fail(cikit.FailureInfrastructure, "services: %v", err)
	}
	res := j.runSteps(jobCtx)
	j.stopServices()
	return j.finish(ctx, res)
}

// registerSecrets makes the job's masker and registers the values its
// output must not show: its secrets and its checkout token. A value that
// cannot be masked (too short) fails the job, rather than show in its
// log: a secret as a configuration failure naming the secret, the
// checkout token, which the platform made, as an infrastructure one.
func (j *jobRun) registerSecrets() (cikit.FailureClass, error) {
	j.masker = mask.New()
	for _, name := range slices.Sorted(maps.Keys(j.job.Secrets)) {
		if err := j.masker.Add(j.job.Secrets[name]); err != nil {
			return cikit.FailureConfig, fmt.Errorf("secret %s cannot be masked in the job's output: %w", name, err)
		}
	}
	if jc := j.job.Context; jc != nil && jc.Source != nil && jc.Source.Token != "" {
		// It never reaches the job; should git print it, it is masked.
		if err := j.masker.Add(jc.Source.Token); err != nil {
			return cikit.FailureInfrastructure, fmt.Errorf("the checkout token cannot be masked in the job's output: %w", err)
		}
	}
	return "", nil
}

// finish keeps the files of a job whose steps ended as res says: it
// saves its caches and uploads its artifacts, as their policy and when
// ask, with a time budget of the job's timeout of its own (the steps may
// have used up theirs). A cancelled job keeps nothing.
func (j *jobRun) finish(ctx context.Context, res Result) Result {
	if j.job.Files != nil && res.State != cikit.JobCancelled && ctx.Err() == nil {
		fctx, cancel := context.WithTimeout(ctx, j.timeout)
		defer cancel()
		j.saveCaches(fctx, res.State)
		j.uploadArtifacts(fctx, &res)
	}
	res.Caches = j.cacheReports()
	return res
}

// prepareFailed returns the result of a job whose preparation before its
// first step failed (what says at what).
func (j *jobRun) prepareFailed(ctx context.Context, what string, ce *checkoutError) Result {
	if ctx.Err() != nil {
		if context.Cause(ctx) == errTimeout {
			return j.fail(cikit.FailureTimeout, "timed out after %s %s", j.timeout, what)
		}
		r := j.fail("", "cancelled %s", what)
		r.State = cikit.JobCancelled
		return r
	}
	return j.fail(ce.class, "%v", ce.err)
}

// checkoutOpts returns the checkout before the job's first step, nil
// when there is none.
func (j *jobRun) checkoutOpts() *cikit.Checkout {
	jc, co := j.job.Context, j.spec.Checkout
	if jc == nil || jc.Source == nil || co == nil || co.Strategy == "none" {
		return nil
	}
	return co
}

// prepareWorkspace fills the workspace before the first step: the job's
// commit (co, from checkoutOpts), or a copy of the runner's fixed
// directory.
func (j *jobRun) prepareWorkspace(ctx context.Context, co *cikit.Checkout) *checkoutError {
	if co != nil {
		return j.checkout(ctx, *co, nil)
	}
	e, jc := j.e, j.job.Context
	switch {
	case jc == nil || jc.Source == nil:
		fmt.Fprintf(j.pw, "--- workspace: a copy of the runner's fixed directory %s (the job has no commit to check out)\n", e.cfg.Source)
		if err := copyTree(e.cfg.Source, j.ws, e.skip, e.own); err != nil {
			return &checkoutError{cikit.FailureInfrastructure, fmt.Errorf("copying %s: %w", e.cfg.Source, err)}
		}
		return nil
	case j.spec.Checkout == nil && j.github:
		return nil // a GitHub job checks out in a step
	case j.spec.Checkout == nil:
		fmt.Fprintf(j.pw, "--- checkout: none (the job asks for no checkout): the workspace starts empty\n")
	default:
		fmt.Fprintf(j.pw, "--- checkout: none (strategy none): the workspace starts empty\n")
	}
	return nil
}

// checkoutFailed returns the result of a job whose checkout failed.
func (j *jobRun) checkoutFailed(ctx context.Context, ce *checkoutError) Result {
	return j.prepareFailed(ctx, "during the checkout", ce)
}

// setUpEnv builds the job's environment and expression evaluator.
func (j *jobRun) setUpEnv() error {
	e, spec := j.e, j.spec
	j.names = map[string]bool{}
	j.base = map[string]string{}
	for _, kv := range e.cfg.Env {
		k, v, _ := strings.Cut(kv, "=")
		j.base[k] = v
	}
	j.params = runtime.Params{Spec: spec, Context: j.job.Context, Workspace: j.ws, Temp: j.temp, Vars: j.job.Vars, Secrets: j.job.Secrets}
	maps.Copy(j.base, runtime.Env(j.params))
	j.base["CIKIT"] = "true"
	maps.Copy(j.base, j.secretEnv())
	j.overrides = runtime.Overrides(j.params)
	if j.github {
		p := filepath.Join(j.temp, runtime.EventFile)
		if err := errors.Join(os.WriteFile(p, runtime.EventJSON(j.job.Context), 0o644), e.own(p)); err != nil {
			return fmt.Errorf("event payload: %w", err)
		}
	}
	if e.sandbox != nil {
		for _, kv := range sandboxEnv() {
			k, v, _ := strings.Cut(kv, "=")
			j.base[k] = v
		}
	}
	if im := j.image; im != nil {
		// Over the executor's and the sandbox's variables, under the
		// predefined ones and the job's.
		predefined := runtime.Env(j.params)
		maps.Copy(j.base, im.userEnv())
		for _, kv := range im.env {
			if k, v, ok := strings.Cut(kv, "="); ok {
				if _, ok := predefined[k]; !ok {
					j.base[k] = v
				}
			}
		}
	}
	if j.github {
		gh, err := runtime.NewGitHub(j.params)
		if err != nil {
			return err
		}
		j.gh, j.eval, j.jobEnv = gh, ghEval{gh}, gh.JobEnv()
		return nil
	}
	if spec.Format == formatGitLab {
		// GitLab expands the references to the run's variables when the
		// job starts.
		j.jobEnv = runtime.GitLabEnv(spec.Env, j.base, j.overrides)
		return nil
	}
	if e.cfg.Expander != nil {
		j.eval = expanderEval{e.cfg.Expander, spec}
	}
	j.jobEnv = spec.Env
	if j.eval != nil && len(spec.Env) > 0 {
		j.jobEnv = make(map[string]string, len(spec.Env))
		for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
			x, err := j.eval.Expand(spec.Env[k])
			if err != nil {
				return fmt.Errorf("env %s: %v", k, err)
			}
			j.jobEnv[k] = x
		}
	}
	return nil
}

// stepEnv returns the environment of a step: the base (the executor's
// and the predefined variables), vars (the job's env, GITHUB_ENV's
// variables and the step's env, see expandStep), a manual trigger's
// GitLab variables, PATH with GITHUB_PATH's directories in front, and
// extra.
func (j *jobRun) stepEnv(vars map[string]string, extra map[string]string) []string {
	env := maps.Clone(j.base)
	maps.Copy(env, vars)
	maps.Copy(env, j.overrides)
	if len(j.paths) > 0 {
		env["PATH"] = runtime.PrependPath(env["PATH"], j.paths, string(os.PathListSeparator))
	}
	maps.Copy(env, extra)
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		j.names[k] = true
		out = append(out, k+"="+env[k])
	}
	return out
}

// runSteps runs the job's steps and after-steps and returns its result.
func (j *jobRun) runSteps(ctx context.Context) Result {
	spec := j.spec
	steps := append(append([]cikit.Step(nil), spec.Steps...), spec.AfterSteps...)
	for i, step := range steps {
		after := i >= len(spec.Steps)
		name := step.Name
		if name == "" {
			name = fmt.Sprintf("step %d", i+1)
		}
		runs, err := j.stepRuns(&step, after)
		if err != nil {
			return j.fail(cikit.FailureConfig, "step %q: %v", name, err)
		}
		if !runs {
			if j.gh != nil {
				j.gh.SetStep(step.ID, runtime.Skipped, runtime.Skipped, nil)
			}
			continue
		}
		if err := j.expandStep(&step); err != nil {
			return j.fail(cikit.FailureConfig, "step %q: %v", name, err)
		}
		if j.job.OnStep != nil {
			j.job.OnStep(i)
		}
		if stop := j.runStep(ctx, step, name, after); stop {
			if !after && ctx.Err() != nil && spec.Format == formatGitLab && len(spec.AfterSteps) > 0 {
				j.afterStopped(ctx, len(spec.Steps))
			}
			break
		}
	}
	j.res.EnvNames = slices.Sorted(maps.Keys(j.names))
	if j.gh != nil && len(spec.Outputs) > 0 && j.res.State != cikit.JobCancelled {
		out, err := j.gh.JobOutputs()
		switch {
		case err != nil && j.res.State == cikit.JobSucceeded:
			j.res.State, j.res.Reason, j.res.FailureClass = cikit.JobFailed, fmt.Sprintf("job outputs: %v", err), cikit.FailureConfig
			fmt.Fprintf(j.pw, "--- %s\n", j.res.Reason)
		case err != nil:
			fmt.Fprintf(j.pw, "--- job outputs: %v\n", err)
		default:
			// As on GitHub, an output holding a secret is not passed on:
			// outputs are stored with the job and shown by the API.
			for _, k := range slices.Sorted(maps.Keys(out)) {
				if j.masker.String(out[k]) != out[k] {
					fmt.Fprintf(j.pw, "--- warning: job output %s holds a secret: it is not passed on\n", k)
					delete(out, k)
				}
			}
			j.res.Outputs = out
		}
	}
	if j.cmds != nil {
		j.endStep()
		var dropped int
		j.res.Annotations, dropped = j.cmds.Annotations()
		if dropped > 0 {
			fmt.Fprintf(j.pw, "--- warning: the job's steps attached %d annotations more than the %d kept\n", dropped, cikit.MaxAnnotations)
		}
	}
	return j.res
}

// stoppedAfterStepsTimeout bounds the after-steps of a GitLab job that
// was cancelled or timed out, as GitLab Runner bounds its after_script.
const stoppedAfterStepsTimeout = 5 * time.Minute

// afterStopped runs the after-steps (from index first of the job's steps
// and after-steps) of a GitLab job its context stopped, cancelled or
// timed out, as GitLab runs after_script then: with CI_JOB_STATUS
// canceled or failed, bounded by stoppedAfterStepsTimeout. They change
// nothing of the job's result but its steps.
func (j *jobRun) afterStopped(ctx context.Context, first int) {
	res := j.res
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stoppedAfterStepsTimeout)
	defer cancel()
	for i, step := range j.spec.AfterSteps {
		name := step.Name
		if name == "" {
			name = fmt.Sprintf("step %d", first+i+1)
		}
		if j.job.OnStep != nil {
			j.job.OnStep(first + i)
		}
		if stop := j.runStep(actx, step, name, true); stop {
			break
		}
	}
	res.Steps = j.res.Steps
	j.res = res
}

// runStep runs one step and records how it ended; it reports whether
// nothing more of the job runs (cancelled, timed out, its processes
// gone).
func (j *jobRun) runStep(ctx context.Context, step cikit.Step, name string, after bool) bool {
	e := j.e
	started := time.Now()
	x, err, class, outputs := j.execStep(ctx, step, name, after, 0)
	if errors.Is(err, errStepFiles) {
		return j.stopInfra(name, err)
	}
	code := x.code
	j.res.Steps = append(j.res.Steps, StepResult{Name: name, ExitCode: code, Duration: time.Since(started)})
	var reason string
	switch {
	case ctx.Err() != nil && context.Cause(ctx) == errTimeout:
		j.res.State, j.res.ExitCode, j.res.FailureClass = cikit.JobFailed, code, cikit.FailureTimeout
		j.res.Reason = fmt.Sprintf("timed out after %s in step %q", j.timeout, name)
	case ctx.Err() != nil:
		j.res.State, j.res.ExitCode = cikit.JobCancelled, code
		j.res.Reason = fmt.Sprintf("cancelled in step %q", name)
	default:
		reason = e.stepReason(name, x, err)
	}
	if errors.Is(err, errLeaseExpired) {
		// The job's processes are gone: nothing more runs.
		j.res.State, j.res.ExitCode, j.res.FailureClass = cikit.JobFailed, code, cikit.FailureInfrastructure
		j.res.Reason = fmt.Sprintf("step %q: %v", name, err)
		fmt.Fprintf(j.pw, "--- %s\n", j.res.Reason)
		return true
	}
	if ctx.Err() != nil {
		fmt.Fprintf(j.pw, "--- %s\n", j.res.Reason)
		return true // cancelled or timed out: nothing more runs
	}
	if j.gh != nil {
		outcome, conclusion := runtime.Success, runtime.Success
		if reason != "" {
			outcome, conclusion = runtime.Failure, runtime.Failure
			if step.ContinueOnError {
				conclusion = runtime.Success
			}
		}
		j.gh.SetStep(step.ID, outcome, conclusion, outputs)
	}
	switch {
	case reason == "":
		if !after {
			j.res.ExitCode = code
		}
	case step.ContinueOnError:
		fmt.Fprintf(j.pw, "--- %s; continuing (continue on error)\n", reason)
	case after:
		// An after-step's failure is reported but changes nothing: the
		// job's outcome is its steps'.
		fmt.Fprintf(j.pw, "--- %s (after-step; the job's outcome stands)\n", reason)
	default:
		j.res.State, j.res.ExitCode, j.res.Reason, j.res.FailureClass = cikit.JobFailed, code, reason, class
		fmt.Fprintf(j.pw, "--- %s\n", reason)
	}
	return false
}

// execStep executes a step that runs (its expressions evaluated): its
// script, actions/checkout, a built-in action that keeps or fetches files
// (builtinAction), or a local composite action (depth deep in composite
// actions); any other action fails it. It returns how the step
// ended, the failure class should it fail, and its outputs (a GitHub
// job's). An error wrapping errStepFiles is the runner's failure to give
// it its files.
func (j *jobRun) execStep(ctx context.Context, step cikit.Step, name string, after bool, depth int) (stepExit, error, cikit.FailureClass, map[string]string) {
	if j.cmds != nil {
		j.cmds.BeginStep(name)
	}
	if step.Uses != "" && name != step.Uses {
		fmt.Fprintf(j.pw, "--- %s (%s)\n", name, step.Uses)
	} else {
		fmt.Fprintf(j.pw, "--- %s\n", name)
	}
	if step.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, step.Timeout, errStepTimeout)
		defer cancel()
	}
	if step.Uses != "" && isCheckoutAction(step.Uses) {
		x, err, class := j.checkoutStep(ctx, step)
		return x, stepTimedOut(ctx, step, err), class, nil
	}
	if action := builtinAction(step.Uses); action != "" {
		outputs, class, err := j.runBuiltin(ctx, step, name, action)
		x := stepExit{code: 0}
		if err != nil {
			x.code = -1
		}
		return x, stepTimedOut(ctx, step, err), class, outputs
	}
	if step.Uses != "" {
		dir, local, err := runtime.LocalAction(j.ws, step.Uses)
		switch {
		case err != nil:
			return stepExit{code: -1}, err, cikit.FailureConfig, nil
		case local && j.gh != nil:
			x, err, class, outputs := j.runComposite(ctx, step, name, dir, depth+1)
			return x, stepTimedOut(ctx, step, err), class, outputs
		}
		return stepExit{code: -1}, fmt.Errorf("uses %s: this runner runs only actions/checkout, actions/cache, actions/upload-artifact, actions/download-artifact and local composite actions (uses: ./path) today; other JavaScript, Docker and remote actions are not run yet", step.Uses), cikit.FailureConfig, nil
	}
	var extra map[string]string
	if after && j.spec.Format == formatGitLab {
		extra = map[string]string{"CI_JOB_STATUS": gitlabStatus(j.res.State)}
	}
	var files runtime.Files
	if j.github {
		var err error
		if files, err = j.newStepFiles(); err != nil {
			return stepExit{code: -1}, fmt.Errorf("%w: %v", errStepFiles, err), cikit.FailureInfrastructure, nil
		}
		extra = files.Vars()
		if p := j.actionPath; p != "" {
			extra["GITHUB_ACTION_PATH"] = p
		}
	}
	sj, _ := j.procs.(*sandboxJob)
	oomBefore := sj.oomKills()
	x, err := j.runCommand(ctx, step, extra)
	if err == nil && x.code != 0 && sj.oomKills() > oomBefore {
		err = errOOM
	}
	var outputs map[string]string
	if j.github {
		j.endStep()
		if ferr := j.applyFiles(files, name, &outputs); ferr != nil && err == nil && x.code == 0 {
			err = ferr
		}
	}
	return x, err, cikit.FailureScript, outputs
}

// errStepTimeout is the cause of the end of a step's context when its
// timeout passed.
var errStepTimeout = errors.New("step timed out")

// stepTimedOut returns err, or the step's timeout when that ended it.
func stepTimedOut(ctx context.Context, step cikit.Step, err error) error {
	if context.Cause(ctx) == errStepTimeout {
		return fmt.Errorf("timed out after %s", step.Timeout)
	}
	return err
}

// errStepFiles marks a step whose environment files could not be made.
var errStepFiles = errors.New("the step's environment files")

// stepReason says why a step failed; "" when it did not.
func (e *Executor) stepReason(name string, x stepExit, err error) string {
	var reason string
	switch {
	case errors.Is(err, errOOM):
		return fmt.Sprintf("step %q exited with code %d; the job reached its memory limit of %s (Sandbox.Limits.JobMemory, cgroup memory.max)", name, x.code, bytesString(e.sandbox.limits.JobMemory))
	case err != nil:
		return fmt.Sprintf("step %q: %v", name, err)
	case x.signal != 0:
		reason = fmt.Sprintf("step %q was killed by signal %d (%v)", name, int(x.signal), x.signal)
	case x.code != 0:
		reason = fmt.Sprintf("step %q exited with code %d", name, x.code)
	}
	if reason != "" && e.sandbox != nil {
		if cause := e.sandbox.limits.cause(x); cause != "" {
			reason += "; " + cause
		}
	}
	return reason
}

// errOOM marks a step that failed when the job reached its memory limit.
var errOOM = errors.New("the job reached its memory limit")

// gitlabStatus is CI_JOB_STATUS for a job's after-steps.
func gitlabStatus(s cikit.JobState) string {
	switch s {
	case cikit.JobSucceeded:
		return "success"
	case cikit.JobCancelled:
		return "canceled"
	}
	return "failed"
}

// checkoutStep runs actions/checkout: the job's checkout with the step's
// inputs.
func (j *jobRun) checkoutStep(ctx context.Context, step cikit.Step) (stepExit, error, cikit.FailureClass) {
	jc := j.job.Context
	if jc == nil || jc.Source == nil {
		fmt.Fprintf(j.pw, "--- the workspace is the runner's fixed directory %s: nothing to check out\n", j.e.cfg.Source)
		return stepExit{code: 0}, nil, ""
	}
	opts, ignored, err := checkoutInputs(step.With, jc.Repository)
	if err != nil {
		return stepExit{code: -1}, err, cikit.FailureConfig
	}
	for _, k := range slices.Sorted(slices.Values(ignored)) {
		why := "this runner does not honour it"
		switch k {
		case "token", "ssh-key", "ssh-known-hosts", "ssh-strict", "persist-credentials":
			why = "the runner checks out with the job's own read-only credential, which never reaches the job's steps"
		}
		fmt.Fprintf(j.pw, "--- warning: actions/checkout input %q is not used: %s\n", k, why)
	}
	if ce := j.checkout(ctx, opts, j.procs); ce != nil {
		return stepExit{code: -1}, ce.err, ce.class
	}
	return stepExit{code: 0}, nil, ""
}

// stepRuns decides whether a step runs: by the job's evaluator when it
// has one, else every step until one fails and every after-step.
func (j *jobRun) stepRuns(step *cikit.Step, after bool) (bool, error) {
	failed := j.res.State != cikit.JobSucceeded
	if j.eval == nil || after {
		return after || !failed, nil
	}
	return j.eval.StepRuns(step, failed)
}

// expandStep evaluates the expressions of a step's env, script, shell,
// working directory and inputs, and sets its env to the variables of
// the job's and the step's (for a GitHub job, over GITHUB_ENV's).
func (j *jobRun) expandStep(step *cikit.Step) error {
	env := maps.Clone(j.jobEnv)
	if env == nil {
		env = map[string]string{}
	}
	x := j.eval
	switch {
	case j.gh != nil:
		var err error
		if env, err = j.gh.StepEnv(step); err != nil {
			return err
		}
	case x != nil:
		for _, k := range slices.Sorted(maps.Keys(step.Env)) {
			v, err := x.Expand(step.Env[k])
			if err != nil {
				return fmt.Errorf("env %s: %w", k, err)
			}
			env[k] = v
		}
	default:
		maps.Copy(env, step.Env)
	}
	step.Env = env
	if x == nil {
		return nil
	}
	var err error
	if step.Run, err = x.Expand(step.Run); err != nil {
		return err
	}
	if step.Shell, err = x.Expand(step.Shell); err != nil {
		return fmt.Errorf("shell: %w", err)
	}
	if step.WorkingDirectory, err = x.Expand(step.WorkingDirectory); err != nil {
		return fmt.Errorf("working-directory: %w", err)
	}
	if len(step.With) > 0 {
		with := make(map[string]string, len(step.With))
		for _, k := range slices.Sorted(maps.Keys(step.With)) {
			if with[k], err = x.Expand(step.With[k]); err != nil {
				return fmt.Errorf("with %s: %w", k, err)
			}
		}
		step.With = with
	}
	return nil
}

// runCommand runs a step's script with procs, in ctx, which ends with
// errStepTimeout at the step's timeout (see execStep).
func (j *jobRun) runCommand(ctx context.Context, step cikit.Step, extra map[string]string) (stepExit, error) {
	if err := ctx.Err(); err != nil {
		return stepExit{code: -1}, nil
	}
	dir, err := j.workingDirectory(step.WorkingDirectory)
	if err != nil {
		return stepExit{code: -1}, err
	}
	argv, inMemory, err := j.shellCommand(step)
	if err != nil {
		return stepExit{code: -1}, err
	}
	if inMemory {
		extra = maps.Clone(extra)
		if extra == nil {
			extra = map[string]string{}
		}
		extra[scriptVar] = step.Run
	}
	x, err := j.procs.run(ctx, argv, dir, j.stepEnv(step.Env, extra))
	if context.Cause(ctx) == errStepTimeout {
		return stepExit{code: -1}, stepTimedOut(ctx, step, err)
	}
	return x, err
}

// workingDirectory resolves a step's working directory: an absolute one
// as it is, a relative one under the workspace, which it must not leave.
// One in the workspace must exist.
func (j *jobRun) workingDirectory(wd string) (string, error) {
	dir := j.ws
	switch {
	case wd == "" && j.image != nil && j.image.img.WorkingDir != "" && !j.github && j.spec.Format != formatGitLab:
		// A native job in an image starts where the image says.
		return j.image.img.WorkingDir, nil
	case wd == "":
		return dir, nil
	case filepath.IsAbs(wd):
		dir = filepath.Clean(wd)
	default:
		var err error
		if dir, err = inside(j.ws, wd); err != nil {
			return "", fmt.Errorf("working directory %w", err)
		}
	}
	if j.e.sandbox == nil || within(dir, j.ws) {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return "", fmt.Errorf("working directory %q does not exist", wd)
		}
	}
	return dir, nil
}

// shellCommand returns the command line that runs a step's script.
//
// A GitHub job's step runs as on GitHub: from a file, by default with
// `bash -e {0}` where bash is installed (else `sh -e {0}`); `bash` is
// `bash --noprofile --norc -eo pipefail {0}`, `sh` is `sh -e {0}`, and a
// shell holding {0} gets the file's path there.
//
// Other jobs' steps run with the executor's shell and -e -c by default;
// for a named shell with the flags GitHub uses (bash gets pipefail); a
// shell with {0} runs the script from a file, as GitHub's custom shells
// do.
//
// In an image, the default shell is the image's sh, GitHub's default is
// its bash if its PATH has one, and a GitLab job's command line follows
// the image's entrypoint.
//
// inMemory says the script is to be written to memory by the command
// itself (scriptInMemory), which takes it from the environment variable
// scriptVar.
func (j *jobRun) shellCommand(step cikit.Step) (argv []string, inMemory bool, err error) {
	if argv, inMemory, err = j.shellArgv(step); err != nil {
		return nil, false, err
	}
	if j.image != nil && j.spec.Format == formatGitLab {
		argv = append(slices.Clone(j.image.img.Entrypoint), argv...)
	}
	return argv, inMemory, nil
}

// shellArgv is shellCommand without an image's entrypoint.
func (j *jobRun) shellArgv(step cikit.Step) (argv []string, inMemory bool, err error) {
	shell := strings.TrimSpace(step.Shell)
	bash, defaultShell := j.e.bash, j.e.cfg.Shell
	if j.image != nil {
		bash, defaultShell = j.image.bash, "sh"
	}
	if j.github {
		switch shell {
		case "":
			if bash {
				shell = "bash -e {0}"
			} else {
				shell = "sh -e {0}"
			}
		case "bash":
			shell = "bash --noprofile --norc -eo pipefail {0}"
		case "sh":
			shell = "sh -e {0}"
		case "python":
			shell = "python {0}"
		}
	}
	switch {
	case shell == "":
		return []string{defaultShell, "-e", "-c", step.Run}, false, nil
	case shell == "sh":
		return []string{"sh", "-e", "-c", step.Run}, false, nil
	case shell == "bash":
		return []string{"bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step.Run}, false, nil
	case strings.Contains(shell, "{0}") && j.scriptInMemory(step.Run):
		// The script holds a secret: the step's own sh writes it to the
		// sandbox's /dev/shm, in memory, and runs it from there; it
		// comes in the environment, never through the runner's disk.
		var cmd strings.Builder
		cmd.WriteString(memScriptStart + ` && unset ` + scriptVar)
		if j.e.sandbox == nil {
			// On the host, the file is removed when the script ends,
			// cancelled or not; a sandbox's /dev/shm ends with it.
			cmd.WriteString(` && trap 'rm -f "$f"' EXIT && trap 'exit 143' TERM && trap 'exit 130' INT &&`)
		} else {
			cmd.WriteString(` && exec`)
		}
		for _, w := range strings.Fields(shell) {
			cmd.WriteByte(' ')
			for i, part := range strings.Split(w, "{0}") {
				if i > 0 {
					cmd.WriteString(`"$f"`)
				}
				if part != "" {
					cmd.WriteString(shellQuote(part))
				}
			}
		}
		return []string{"sh", "-c", cmd.String()}, true, nil
	case strings.Contains(shell, "{0}"):
		f, err := os.CreateTemp(j.temp, ".cikit-step-*")
		if err != nil {
			return nil, false, err
		}
		_, werr := f.WriteString(step.Run)
		if err := errors.Join(werr, f.Close(), j.e.own(f.Name())); err != nil {
			return nil, false, err
		}
		return strings.Fields(strings.ReplaceAll(shell, "{0}", f.Name())), false, nil
	default:
		return append(strings.Fields(shell), "-c", step.Run), false, nil
	}
}

// scriptVar carries a step's script that must not touch the runner's
// disk (scriptInMemory) to the sh that writes it to memory, the command
// memScriptStart starts.
const (
	scriptVar      = "CIKIT_STEP_SCRIPT"
	memScriptStart = `f=$(mktemp /dev/shm/cikit-step.XXXXXX) && printf '%s' "${` + scriptVar + `?the step's script did not arrive}" > "$f"`
)

// maxScriptVarBytes bounds a script passed in scriptVar: the kernel takes
// an environment string of at most 128 KiB.
const maxScriptVarBytes = 120 << 10

// scriptInMemory reports whether a step's script, run from a file, is
// written to memory rather than to the job's directory on the runner's
// disk: when it holds a secret (its value or an encoding, as its
// expressions expanded one), the script fits in an environment variable,
// and /dev/shm is memory — a sandbox's own tmpfs (with an sh in the
// job's image), or, without a sandbox, the host's when it is a tmpfs.
// Otherwise the file is in the job's directory, as every other script.
func (j *jobRun) scriptInMemory(script string) bool {
	if len(script) > maxScriptVarBytes || j.masker == nil || j.masker.String(script) == script {
		return false
	}
	if j.e.sandbox == nil {
		return hostShmIsTmpfs()
	}
	return j.image == nil || j.image.lookPath("sh")
}

// hostShmIsTmpfs reports whether the host's /dev/shm is a tmpfs: memory.
var hostShmIsTmpfs = sync.OnceValue(func() bool {
	var st syscall.Statfs_t
	const tmpfsMagic = 0x01021994
	return syscall.Statfs("/dev/shm", &st) == nil && st.Type == tmpfsMagic
})

// shellQuote quotes s for sh, in single quotes.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// imageName is how the job's log names img.
func imageName(img *Image) string {
	switch {
	case img.Ref == "":
		return cmp.Or(img.Digest, "(unnamed)")
	case img.Digest == "" || strings.HasSuffix(img.Ref, "@"+img.Digest):
		return img.Ref
	}
	return img.Ref + " (" + img.Digest + ")"
}

// hasBash reports whether bash is installed, for GitHub's default shell.
func hasBash() bool {
	_, err := exec.LookPath("bash")
	return err == nil
}

// stopInfra ends a job whose step could not be started for a reason of
// the runner's; it reports that nothing more runs.
func (j *jobRun) stopInfra(name string, err error) bool {
	r := j.fail(cikit.FailureInfrastructure, "step %q: %v", name, err)
	j.res = r
	return true
}

// endStep waits until the job's output has passed everything the step's
// processes wrote, so that the workflow commands in it are the step's.
func (j *jobRun) endStep() {
	if !j.out.step(killWait) {
		j.e.cfg.Logger.Warn("the job's output did not keep up: a step's workflow commands may count as the next step's", "job", j.spec.ID)
	}
}
