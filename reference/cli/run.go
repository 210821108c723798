package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/compiler"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/fleet/process"
)

// runSynopsis is the usage text of `cikit run`.
const runSynopsis = `run [flags]

Runs the pipeline of a directory on this machine: every job in a fresh copy of
the directory, its steps as local processes, jobs in parallel where their
needs allow. Ctrl-C cancels the run.

The run is for an event, push unless -event names another (workflow_dispatch
with -input): the pipeline's triggers, rules and conditions see it, with the
payload of -event-path, and the commit, ref and repository of the directory's
git work tree. -job runs the jobs named and the jobs they need (-only: without
them); -matrix picks matrix variants; -list prints the jobs that would run.

A manual job (GitLab's when: manual) runs only when named with -job; otherwise
it is reported as not run, and fails the run only if it blocks it (a manual job
without allow_failure). A delayed job (when: delayed) waits its start_in, unless
-no-delay.`

// runOptions are the flags of `cikit run` that decide what runs.
type runOptions struct {
	dir, file string
	format    compiler.Format
	event     string
	// eventSet says -event was given; payload and raw are -event-path's.
	eventSet bool
	payload  map[string]any
	raw      json.RawMessage
	inputs   *pairs
	// vars and secrets hold the files' values with the flags' over them.
	vars, secrets map[string]string
	jobs          []string
	only          bool
	matrix        *matrixPicks
	noDelay       bool
}

func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runWith(ctx, args, stdout, stderr, nil)
}

// runWith is `cikit run` with jobs run by what newRunner makes (nil: a
// process.Executor).
func runWith(ctx context.Context, args []string, stdout, stderr io.Writer, newRunner func(process.Config) (jobRunner, error)) int {
	fs := newFlags("run", runSynopsis, stderr)
	dir := fs.String("dir", ".", "the directory whose pipeline runs; each job works in a copy of it")
	file := fs.String("file", "", "the pipeline file, relative to -dir (default: .cikit.yml, .gitlab-ci.yml or the one GitHub workflow)")
	format := fs.String("format", "", "the format of the pipeline file, github, gitlab or native, for a file whose name does not tell\n(default: from its name)")
	parallel := fs.Int("parallel", runtime.NumCPU(), "the most jobs run at once")
	grace := fs.Duration("grace", process.DefaultGrace, "how long a cancelled step gets between SIGTERM and SIGKILL")
	keep := fs.Bool("keep-workspaces", false, "keep job workspaces after the run, for debugging")
	report := fs.String("report", "", "write the run's result as JSON to this file")
	passEnv := fs.String("pass-env", "", "comma-separated names of more variables of this environment that jobs get, besides\nPATH, HOME, USER, LOGNAME, TMPDIR, LANG, LANGUAGE, LC_* and TZ (nothing else of it reaches them)")
	var jobs jobNames
	fs.Var(&jobs, "job", "run this job and the jobs it needs, directly or not (repeatable); a matrix job's name runs\nits variants; a manual job named so starts once its needs are satisfied")
	only := fs.Bool("only", false, "with -job: run the named jobs alone, without the jobs they need")
	var picks matrixPicks
	fs.Var(&picks, "matrix", "KEY:VALUE: run only the matrix variants whose KEY is VALUE (repeatable; a key given\nseveral times runs the variants of each value)")
	list := fs.Bool("list", false, "print the jobs that would run, with their stages and needs, and run nothing")
	event := fs.String("event", "", "the event the run is for: push (the default; workflow_dispatch with -input), pull_request,\nworkflow_dispatch, schedule, merge_request_event, web …; triggers, rules and conditions see it")
	eventPath := fs.String("event-path", "", fmt.Sprintf("a JSON file holding the event's payload (at most %d KiB), GitHub's github.event", cikit.MaxPayloadBytes>>10))
	inputs := newPairs("input", inputName, false)
	fs.Var(inputs, "input", "NAME=VALUE: an input of a manual run (workflow_dispatch), checked against the inputs\nthe pipeline declares (repeatable)")
	vars := newPairs("var", varName, false)
	fs.Var(vars, "var", "NAME=VALUE: a variable (repeatable): GitLab's pipeline variables, GitHub's vars context,\nin native pipelines the vars context and every job's environment")
	varFile := fs.String("var-file", "", "a file of NAME=VALUE lines, variables as -var gives them (-var wins)")
	secrets := newPairs("secret", varName, true)
	fs.Var(secrets, "secret", "NAME=VALUE: a secret (repeatable): GitHub's secrets context, a GitLab variable, the\nenvironment of native jobs that name it in secrets; cikit never prints it")
	secretFile := fs.String("secret-file", "", "a file of NAME=VALUE lines, secrets as -secret gives them (-secret wins)")
	noDelay := fs.Bool("no-delay", false, "start delayed jobs as soon as their needs are satisfied, ignoring start_in")
	imgs := addImageFlags(fs, true)
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "cikit run: unexpected arguments %q; use -dir and -file\n", fs.Args())
		return ExitInvalid
	}
	if *parallel < 1 {
		fmt.Fprintf(stderr, "cikit run: -parallel must be at least 1, got %d\n", *parallel)
		return ExitInvalid
	}
	if secrets.err != nil {
		fmt.Fprintf(stderr, "cikit run: %v\n", secrets.err)
		return ExitInvalid
	}
	images, err := imgs.images()
	if err != nil {
		fmt.Fprintf(stderr, "cikit run: %v\n", err)
		return ExitInvalid
	}
	opts := &runOptions{dir: *dir, file: *file, event: *event, eventSet: *event != "", inputs: inputs,
		jobs: jobs, only: *only, matrix: &picks, noDelay: *noDelay}
	if err := opts.load(*format, *eventPath, vars, *varFile, secrets, *secretFile); err != nil {
		fmt.Fprintf(stderr, "cikit run: %v\n", err)
		return ExitInvalid
	}
	lp, err := planRun(ctx, opts, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "cikit run: %v\n", err)
		return ExitInvalid
	}
	if lp == nil {
		return ExitInvalid // the findings are printed
	}
	for _, n := range lp.notes {
		fmt.Fprintf(stderr, "cikit run: %s\n", n)
	}
	if *list {
		if err := printList(stdout, lp.selection); err != nil {
			fmt.Fprintf(stderr, "cikit run: %v\n", err)
			return ExitFailed
		}
		return ExitOK
	}
	return lp.run(ctx, runConfig{parallel: *parallel, grace: *grace, keep: *keep, report: *report, passEnv: splitList(*passEnv), images: images, newRunner: newRunner}, stdout, stderr)
}

// load checks the flags and reads the files they name.
func (o *runOptions) load(format, eventPath string, vars *pairs, varFile string, secrets *pairs, secretFile string) error {
	switch compiler.Format(format) {
	case "", compiler.FormatGitHub, compiler.FormatGitLab, compiler.FormatNative:
		o.format = compiler.Format(format)
	default:
		return fmt.Errorf("-format %q: the formats are github, gitlab and native", format)
	}
	if o.only && len(o.jobs) == 0 {
		return errors.New("-only runs the jobs -job names without their needs, and no -job is given")
	}
	switch {
	case o.event == "" && len(o.inputs.keys) > 0:
		o.event = "workflow_dispatch"
	case o.event == "":
		o.event = "push"
	case len(o.event) > maxEventNameBytes || !eventName.MatchString(o.event):
		return fmt.Errorf("-event %q: an event name is lowercase letters, digits and _, at most %d of them (push, pull_request, workflow_dispatch …)", o.event, maxEventNameBytes)
	}
	if eventPath != "" {
		payload, raw, err := readPayload(eventPath)
		if err != nil {
			return fmt.Errorf("-event-path: %w", err)
		}
		o.payload, o.raw = payload, raw
	}
	var fileVars, fileSecrets map[string]string
	var err error
	if varFile != "" {
		if fileVars, err = readValuesFile(varFile, varName); err != nil {
			return fmt.Errorf("-var-file: %w", err)
		}
	}
	if secretFile != "" {
		if fileSecrets, err = readValuesFile(secretFile, varName); err != nil {
			return fmt.Errorf("-secret-file: %w", err)
		}
	}
	o.vars, o.secrets = mergeValues(fileVars, vars), mergeValues(fileSecrets, secrets)
	return nil
}

// localPlan is what one `cikit run` runs: the compiled plan, the jobs
// selected from it with the values of the flags applied, and the run's
// context.
type localPlan struct {
	// dir is the directory each job works in a copy of.
	dir  string
	plan *compiler.Plan
	*selection
	event *localEvent
	rc    cikit.RunContext
	// vars and secrets are a GitHub workflow's vars and secrets contexts.
	vars, secrets map[string]string
}

// planRun compiles the pipeline for the event of opts, checks the inputs
// against those it declares, selects the jobs to run and gives them the
// variables and secrets. It returns nil and no error when the pipeline
// has errors, which it prints to stderr with its warnings.
func planRun(ctx context.Context, o *runOptions, stderr io.Writer) (*localPlan, error) {
	if o.file == "" {
		f, err := findPipeline(o.dir)
		if err != nil {
			return nil, err
		}
		o.file = f
	}
	abs, err := filepath.Abs(o.dir)
	if err != nil {
		return nil, err
	}
	ev := &localEvent{name: o.event, payload: o.payload, raw: o.raw, git: readGit(ctx, abs), vars: o.vars, secrets: o.secrets}
	inputs := o.inputs
	if isManualEvent(o.event) {
		inputs = withPayloadInputs(inputs, o.payload)
	}
	compile := func() (*compiler.Plan, []compiler.Diagnostic, error) {
		return compiler.Compile(ctx, compiler.DirSource(o.dir), filepath.ToSlash(o.file), compiler.Options{Format: o.format, Event: ev.compilerEvent(o.formatOf())})
	}
	plan, diags, err := compile()
	if err != nil {
		return nil, err
	}
	if !compiler.HasErrors(diags) {
		ev.inputs, err = checkInputs(plan, o.event, inputs)
		if err != nil {
			return nil, err
		}
		if ev.inputs.Values != nil {
			// Compile again with the typed inputs, which the conditions
			// of the pipeline compare with.
			if plan, diags, err = compile(); err != nil {
				return nil, err
			}
		}
	}
	for _, d := range diags {
		d.File = filepath.Join(o.dir, d.File)
		fmt.Fprintln(stderr, d)
	}
	if compiler.HasErrors(diags) {
		fmt.Fprintf(stderr, "cikit run: %s is invalid (%d finding(s)); nothing ran\n", filepath.Join(o.dir, o.file), len(diags))
		return nil, nil
	}
	cev := ev.compilerEvent(plan.Format)
	if ok, why := plan.Triggered(cev); !ok {
		return nil, fmt.Errorf("%s does not run for this event: %s; choose the event with -event", filepath.Join(o.dir, o.file), why)
	}
	if ev.inputs.Values != nil {
		if ev.raw, err = payloadWithInputs(ev.payload, ev.inputs.Values); err != nil {
			return nil, err
		}
	}
	sel, err := selectJobs(plan.Jobs, o.jobs, o.only, o.matrix)
	if err != nil {
		return nil, err
	}
	if len(sel.jobs) == 0 {
		return nil, fmt.Errorf("%s has no job to run for this event (%s)", filepath.Join(o.dir, o.file), o.event)
	}
	if o.noDelay {
		sel.jobs = withoutDelays(sel.jobs)
	}
	lp := &localPlan{dir: o.dir, plan: plan, selection: sel, event: ev, rc: ev.runContext()}
	lp.notes = append(lp.notes, lp.applyValues()...)
	lp.secrets = o.secrets
	if plan.Format == compiler.FormatGitHub {
		lp.vars = o.vars
	}
	return lp, nil
}

// formatOf is the format the file is compiled as, for the event's
// variables: -format, else the file's name's.
func (o *runOptions) formatOf() compiler.Format {
	if o.format != "" {
		return o.format
	}
	f, _ := compiler.Detect(filepath.ToSlash(o.file))
	return f
}

// withPayloadInputs are the -input values over the inputs of the
// -event-path payload of a manual run ({"inputs": {…}}, GitHub's
// workflow_dispatch payload).
func withPayloadInputs(given *pairs, payload map[string]any) *pairs {
	in, ok := payload["inputs"].(map[string]any)
	if !ok || len(in) == 0 {
		return given
	}
	out := newPairs(given.flag, given.name, false)
	for _, k := range slices.Sorted(maps.Keys(in)) {
		if _, set := given.values[k]; set {
			continue
		}
		var v string
		switch x := in[k].(type) {
		case string:
			v = x
		default:
			b, _ := json.Marshal(x)
			v = string(b)
		}
		out.keys = append(out.keys, k)
		out.values[k] = v
	}
	for _, k := range given.keys {
		out.keys = append(out.keys, k)
		out.values[k] = given.values[k]
	}
	return out
}

// payloadWithInputs is the payload of a manual run with its inputs, as
// GitHub's workflow_dispatch payload has them. With them it may not be
// larger than cikit.MaxPayloadBytes either.
func payloadWithInputs(payload map[string]any, inputs map[string]string) (json.RawMessage, error) {
	p := maps.Clone(payload)
	if p == nil {
		p = map[string]any{}
	}
	p["inputs"] = inputs
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("the event's payload with its inputs: %w", err)
	}
	if len(b) > cikit.MaxPayloadBytes {
		return nil, fmt.Errorf("the event's payload with its inputs is %d bytes, more than the %d an event payload may have", len(b), cikit.MaxPayloadBytes)
	}
	return b, nil
}

// applyValues gives the selected jobs the variables and inputs that reach
// their environment: in GitLab pipelines the -var values are variables of
// every job, over the file's (as a pipeline's variables are in GitLab); in
// native pipelines the -var values and the inputs are in every job's
// environment. Secrets never go into a spec: the executor gives them to
// the job (process.Job.Secrets), a GitLab job all of them (as masked
// CI/CD variables), a native job those it names, a GitHub job through
// its secrets context. It returns notes on secrets given that no job
// reads, and secrets a job names that are not given, which fail it.
func (lp *localPlan) applyValues() []string {
	var notes []string
	env := map[string]string{}
	switch lp.plan.Format {
	case compiler.FormatGitLab:
		maps.Copy(env, lp.event.vars)
	case compiler.FormatNative:
		maps.Copy(env, lp.event.inputs.Values)
		maps.Copy(env, lp.event.vars)
	}
	if lp.plan.Format != compiler.FormatGitLab {
		read := map[string]bool{}
		for _, j := range lp.jobs {
			for _, s := range j.Secrets {
				read[strings.ToUpper(s)] = true
				if _, ok := lookupFold(lp.event.secrets, s, lp.plan.Format == compiler.FormatGitHub); !ok && s != "*" {
					notes = append(notes, fmt.Sprintf("warning: job %s reads the secret %s, which is not given (-secret %s=… or -secret-file): it fails before its first step", j.ID, s, s))
				}
			}
		}
		for _, s := range slices.Sorted(maps.Keys(lp.event.secrets)) {
			if !read[strings.ToUpper(s)] {
				notes = append(notes, fmt.Sprintf("warning: -secret %s: no job of this run names it in secrets, so none gets it", s))
			}
		}
	}
	if len(env) == 0 {
		return notes
	}
	for i, j := range lp.jobs {
		c := j.Clone()
		if c.Env == nil {
			c.Env = map[string]string{}
		}
		maps.Copy(c.Env, env)
		lp.jobs[i] = c
	}
	return notes
}

// lookupFold looks name up in m, ignoring case when fold is set (GitHub's
// secret names are case-insensitive).
func lookupFold(m map[string]string, name string, fold bool) (string, bool) {
	if v, ok := m[name]; ok {
		return v, true
	}
	if fold {
		for k, v := range m {
			if strings.EqualFold(k, name) {
				return v, true
			}
		}
	}
	return "", false
}

// runConfig are the flags of `cikit run` that decide how jobs run.
type runConfig struct {
	parallel int
	grace    time.Duration
	keep     bool
	report   string
	passEnv  []string
	// images say how jobs run in their images (see inImages).
	images *process.Images
	// newRunner makes what runs each job; nil: a process.Executor.
	newRunner func(process.Config) (jobRunner, error)
}

// jobRunner runs one job: a process.Executor.
type jobRunner interface {
	RunJob(ctx context.Context, job process.Job) process.Result
}

func newExecutor(cfg process.Config) (jobRunner, error) { return process.New(cfg) }

// closeRunner closes r, when it holds something to release (a
// process.Executor's image directory).
func closeRunner(r jobRunner, logger *slog.Logger) {
	if c, ok := r.(io.Closer); ok {
		if err := c.Close(); err != nil {
			logger.Warn("releasing the image directory", "err", err)
		}
	}
}

// inImages runs the jobs of a local run that get an image (their own,
// -image-for's or -default-image's), and those that get none when
// -host-jobs is false, which it fails. The other jobs run on this
// machine as they always have, as plain processes, by the run's first
// executor. The executor of images is made when a job first needs it:
// it runs each job in the bubblewrap sandbox, which images need, with
// the host's network, as a container engine's default network has it.
// Without a working bubblewrap, the jobs it would run fail saying so,
// and the others run.
type inImages struct {
	cfg       *process.Images
	base      process.Config
	newRunner func(process.Config) (jobRunner, error)
	logger    *slog.Logger

	once sync.Once
	exec jobRunner
	err  error
}

// runner returns what runs the job of spec: host, or the executor of
// images, made on first use.
func (im *inImages) runner(spec *cikit.JobSpec, host jobRunner) (jobRunner, error) {
	ref := ""
	if im.cfg != nil {
		ref = imageOf(im.cfg, spec)
	}
	if im.cfg == nil || ref == "" && im.cfg.Host {
		return host, nil
	}
	im.once.Do(func() {
		pc := im.base
		pc.Sandbox = &process.Sandbox{Network: true}
		pc.Images = im.cfg
		im.exec, im.err = im.newRunner(pc)
		if errors.Is(im.err, process.ErrSandboxUnavailable) {
			im.err = fmt.Errorf("running jobs in images needs the bubblewrap sandbox, and it is unavailable here: %w", im.err)
		}
		if im.err != nil {
			im.logger.Warn("jobs in images fail: their executor did not start", "err", im.err)
		}
	})
	if im.err != nil {
		if ref == "" {
			return nil, fmt.Errorf("this job gets no image, -host-jobs is false, and %v", im.err)
		}
		return nil, fmt.Errorf("this job runs in the image %s: %v", ref, im.err)
	}
	return im.exec, nil
}

// close releases the executor of images, if it was made.
func (im *inImages) close() {
	if im.exec != nil {
		closeRunner(im.exec, im.logger)
	}
}

// run runs the selected jobs and prints their output and the run's
// result; it returns the exit code.
func (lp *localPlan) run(ctx context.Context, cfg runConfig, stdout, stderr io.Writer) int {
	graph, err := dag.FromSpecs(lp.jobs)
	if err != nil {
		fmt.Fprintf(stderr, "cikit run: %v\n", err)
		return ExitInvalid
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	con := &console{w: stdout}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	r := &localRun{con: con, width: prefixWidth(lp.jobs)}
	newRunner := cfg.newRunner
	if newRunner == nil {
		newRunner = newExecutor
	}
	pc := process.Config{
		Source:         lp.dir,
		Exclude:        []string{stateDir},
		Grace:          cfg.grace,
		KeepWorkspaces: cfg.keep,
		PassEnv:        cfg.passEnv,
		Output:         r.output,
		Logger:         logger,
	}
	exec, err := newRunner(pc)
	if err != nil {
		fmt.Fprintf(stderr, "cikit run: %v\n", err)
		return ExitInvalid
	}
	defer closeRunner(exec, logger)
	images := &inImages{cfg: cfg.images, base: pc, newRunner: newRunner, logger: logger}
	defer images.close()
	var files *localFiles
	if usesFiles(lp.jobs) {
		if files, err = openLocalFiles(lp.dir, lp.repo()); err != nil {
			fmt.Fprintf(stderr, "cikit run: artifacts and caches: %v\n", err)
			return ExitInvalid
		}
		defer func() {
			if err := files.close(); err != nil {
				fmt.Fprintf(stderr, "cikit run: saving the caches: %v\n", err)
			}
		}()
	}
	store := dag.NewMemoryStore(dag.MemoryConfig{Expander: dag.ExpanderFunc(compiler.ExpandJob), Decider: dag.DeciderFunc(compiler.DecideJob)})
	var runID string
	driver, err := dag.NewDriver(dag.DriverConfig{
		Store:    store,
		Parallel: cfg.parallel,
		Logger:   logger,
		OnChange: r.onChange,
		Play:     lp.play,
		Executor: dag.ExecutorFunc(func(ctx context.Context, j *dag.Job) dag.Outcome {
			jc, err := lp.jobContext(ctx, store, runID, j)
			if err != nil {
				return dag.Outcome{State: cikit.JobFailed, ExitCode: -1, Reason: err.Error(), FailureClass: cikit.FailureInfrastructure}
			}
			job := process.Job{Spec: j.Spec, Context: jc, Vars: lp.vars, Secrets: lp.secrets}
			if files != nil {
				job.Files = files.broker(&lp.rc, runID, j.Spec, jc.Attempt)
			}
			runner, err := images.runner(j.Spec, exec)
			if err != nil {
				r.flush(j.ID())
				return dag.Outcome{State: cikit.JobFailed, ExitCode: -1, Reason: err.Error(), FailureClass: cikit.FailureInfrastructure}
			}
			res := runner.RunJob(ctx, job)
			r.flush(j.ID())
			// The store keeps the result, as the platform's does: the
			// jobs that need this one read its outputs there, and an
			// expanded matrix's placeholder merges its variants'.
			return dag.Outcome{State: res.State, ExitCode: res.ExitCode, Reason: res.Reason, FailureClass: res.FailureClass,
				Result: &dag.JobResult{Outputs: res.Outputs, Annotations: res.Annotations, Commit: res.Commit,
					CheckoutDuration: res.CheckoutDuration, EnvNames: res.EnvNames, Caches: res.Caches,
					ImageRef: res.ImageRef, ImageDigest: res.ImageDigest}}
		}),
	})
	if err != nil {
		fmt.Fprintf(stderr, "cikit run: %v\n", err)
		return ExitInvalid
	}
	run, err := store.RunCreate(ctx, &dag.RunCreateParams{Jobs: lp.jobs})
	if err != nil {
		fmt.Fprintf(stderr, "cikit run: %v\n", err)
		return ExitInvalid
	}
	runID = run.ID
	finished := make(chan struct{})
	var announced sync.WaitGroup
	announced.Go(func() {
		select {
		case <-ctx.Done():
			con.printf("cikit: interrupted; cancelling the run (running steps get SIGTERM, then SIGKILL after %s)\n", cfg.grace)
		case <-finished:
		}
	})
	started := time.Now()
	final, err := driver.Drive(ctx, run.ID)
	close(finished)
	announced.Wait()
	if err != nil {
		fmt.Fprintf(stderr, "cikit run: %v\n", err)
		return ExitFailed
	}
	jobs, err := store.JobList(context.WithoutCancel(ctx), run.ID)
	if err != nil {
		fmt.Fprintf(stderr, "cikit run: %v\n", err)
		return ExitFailed
	}
	if len(jobs) != graph.Len() {
		// Run-time matrices grew the run: its graph is its jobs'.
		specs := make([]*cikit.JobSpec, len(jobs))
		for i, j := range jobs {
			specs[i] = j.Spec
		}
		if graph, err = dag.FromSpecs(specs); err != nil {
			fmt.Fprintf(stderr, "cikit run: %v\n", err)
			return ExitFailed
		}
	}
	res := summarize(graph, final, jobs, time.Since(started))
	res.print(stdout)
	if cfg.report != "" {
		if err := res.write(cfg.report); err != nil {
			fmt.Fprintf(stderr, "cikit run: -report: %v\n", err)
			return ExitFailed
		}
	}
	switch final.State {
	case cikit.RunSucceeded:
		return ExitOK
	case cikit.RunCancelled:
		return ExitInterrupted
	case cikit.RunBlocked:
		fmt.Fprintf(stderr, "cikit run: the run is blocked: %s\n", blockedBy(jobs))
	}
	return ExitFailed
}

// jobContext is the JobContext of a job of a local run: the run's
// context, the run's ID and the job's attempt, and how the jobs it needs
// ended, with the outputs of those that ran, as the store holds them. It
// has no Source: the workspace is a copy of the directory.
func (lp *localPlan) jobContext(ctx context.Context, store dag.Store, runID string, j *dag.Job) (*cikit.JobContext, error) {
	jc := &cikit.JobContext{RunContext: lp.rc, RunID: runID, Attempt: max(j.Attempt, 1)}
	jc.Inputs, jc.InputTypes = maps.Clone(lp.rc.Inputs), maps.Clone(lp.rc.InputTypes)
	if len(j.Spec.Needs) == 0 {
		return jc, nil
	}
	jobs, err := store.JobList(context.WithoutCancel(ctx), runID)
	if err != nil {
		return nil, fmt.Errorf("reading the results of the jobs %s needs: %w", j.ID(), err)
	}
	jc.Needs = make(map[string]cikit.NeedResult, len(j.Spec.Needs))
	for _, n := range jobs {
		if slices.Contains(j.Spec.Needs, n.ID()) {
			nr := cikit.NeedResult{Result: n.State}
			if n.Result != nil {
				nr.Outputs = n.Result.Outputs
			}
			jc.Needs[n.ID()] = nr
		}
	}
	return jc, nil
}

// localRun renders one run's live output.
type localRun struct {
	con   *console
	width int

	mu      sync.Mutex
	writers map[string]*prefixWriter
}

func prefixWidth(jobs []*cikit.JobSpec) int {
	w := 0
	for _, j := range jobs {
		w = max(w, len(j.ID))
	}
	return w + 2
}

func (r *localRun) prefix(id string) string {
	return fmt.Sprintf("%-*s ", r.width, "["+id+"]")
}

func (r *localRun) output(spec *cikit.JobSpec) io.Writer {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.writers == nil {
		r.writers = map[string]*prefixWriter{}
	}
	w := r.con.prefixed(r.prefix(spec.ID))
	r.writers[spec.ID] = w
	return w
}

func (r *localRun) flush(id string) {
	r.mu.Lock()
	w := r.writers[id]
	r.mu.Unlock()
	if w != nil {
		w.Flush()
	}
}

func (r *localRun) onChange(j *dag.Job) {
	p := r.prefix(j.ID())
	switch j.State {
	case cikit.JobRunning:
		r.con.printf("%s▶ started\n", p)
	case cikit.JobCancelRequested:
		r.con.printf("%s■ stopping\n", p)
	case cikit.JobSucceeded:
		r.con.printf("%s✔ succeeded in %s\n", p, round(j.Duration()))
	case cikit.JobFailed:
		allowed := ""
		if j.FailureAllowed {
			allowed = " (allowed to fail)"
		}
		r.con.printf("%s✘ failed%s in %s: %s\n", p, allowed, round(j.Duration()), j.Reason)
	case cikit.JobSkipped:
		r.con.printf("%s○ skipped: %s\n", p, j.Reason)
	case cikit.JobCancelled:
		r.con.printf("%s■ cancelled: %s\n", p, j.Reason)
	case cikit.JobManual:
		r.con.printf("%s⏸ manual: waiting for a person (start with -job %s)\n", p, j.ID())
	case cikit.JobDelayed:
		r.con.printf("%s⏲ delayed until %s\n", p, j.ReadyAt.Format(time.TimeOnly))
	}
}

func round(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}

// result is the outcome of a local run, printed as a table and written
// as JSON by -report.
type result struct {
	State        cikit.RunState `json:"state"`
	Duration     time.Duration  `json:"duration_ns"`
	Jobs         []jobResult    `json:"jobs"`
	CriticalPath []string       `json:"critical_path"`
	// CriticalLength is the sum of the durations along the critical path:
	// the least time the run could take with unlimited parallelism.
	CriticalLength time.Duration `json:"critical_path_ns"`
}

type jobResult struct {
	ID           string         `json:"id"`
	Name         string         `json:"name"`
	State        cikit.JobState `json:"state"`
	AllowFailure bool           `json:"allow_failure,omitempty"`
	ExitCode     int            `json:"exit_code"`
	Reason       string         `json:"reason,omitempty"`
	StartedAt    *time.Time     `json:"started_at,omitempty"`
	FinishedAt   *time.Time     `json:"finished_at,omitempty"`
	Duration     time.Duration  `json:"duration_ns"`
	// WaitsFor names, for a job left PENDING, the manual job it needs
	// (directly or not) that did not run.
	WaitsFor string `json:"waits_for,omitempty"`
	// Outputs are the job's outputs, when it ran and had some.
	Outputs map[string]string `json:"outputs,omitempty"`
	// Caches say how the job restored and saved its caches.
	Caches []cikit.CacheReport `json:"caches,omitempty"`
}

func summarize(g *dag.Graph, run *dag.Run, jobs []*dag.Job, elapsed time.Duration) *result {
	res := &result{State: run.State, Duration: elapsed}
	for _, j := range jobs {
		jr := jobResult{ID: j.ID(), Name: j.Spec.DisplayName(), State: j.State, AllowFailure: j.FailureAllowed,
			ExitCode: j.ExitCode, Reason: j.Reason, Duration: j.Duration()}
		if j.Result != nil {
			jr.Outputs, jr.Caches = j.Result.Outputs, j.Result.Caches
		}
		if !j.StartedAt.IsZero() {
			jr.StartedAt = &j.StartedAt
		}
		if !j.FinishedAt.IsZero() && !j.StartedAt.IsZero() {
			jr.FinishedAt = &j.FinishedAt
		}
		res.Jobs = append(res.Jobs, jr)
	}
	for _, i := range g.Order() {
		for _, p := range g.Parents(i) {
			if jobs[i].State != cikit.JobPending || res.Jobs[i].WaitsFor != "" {
				break
			}
			switch {
			case jobs[p].State == cikit.JobManual:
				res.Jobs[i].WaitsFor = g.Node(p).ID
			case res.Jobs[p].WaitsFor != "":
				res.Jobs[i].WaitsFor = res.Jobs[p].WaitsFor
			}
		}
	}
	path, total := g.CriticalPath(func(i int) time.Duration { return jobs[i].Duration() })
	for _, i := range path {
		res.CriticalPath = append(res.CriticalPath, g.Node(i).ID)
	}
	res.CriticalLength = total
	return res
}

func (res *result) print(w io.Writer) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tSTATE\tDURATION\tNOTE")
	for _, j := range res.Jobs {
		dur := "-"
		if j.StartedAt != nil && j.FinishedAt != nil {
			dur = round(j.Duration).String()
		}
		note := j.Reason
		switch {
		case j.State == cikit.JobFailed && j.AllowFailure:
			note = "allowed to fail: " + note
		case j.State == cikit.JobManual:
			note = fmt.Sprintf("manual: not run (start with -job %s)", j.ID)
		case j.State == cikit.JobPending && j.WaitsFor != "":
			note = fmt.Sprintf("not run: needs %s, a manual job that did not run", j.WaitsFor)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", j.ID, strings.ToUpper(string(j.State)), dur, note)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\ncritical path: %s (%s)\n", strings.Join(res.CriticalPath, " → "), round(res.CriticalLength))
	fmt.Fprintf(w, "run %s in %s\n", res.State, round(res.Duration))
}

func (res *result) write(path string) error {
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
