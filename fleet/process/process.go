package process

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/artifacts"
	"github.com/cikit/cikit/fleet/image"
)

// Defaults for Config.
const (
	DefaultShell   = "sh"
	DefaultGrace   = 10 * time.Second
	DefaultTimeout = time.Hour
)

// Config configures an Executor.
type Config struct {
	// Source is the directory copied into every job's workspace. Required.
	Source string
	// WorkRoot is the directory workspaces are created in. Default:
	// os.TempDir(). It may lie inside Source; it is then not copied.
	WorkRoot string
	// Exclude are paths relative to Source, such as the state directory
	// of `cikit run`, that are not copied into workspaces. Each must be
	// local (filepath.IsLocal).
	Exclude []string
	// Shell runs each step as `Shell -e -c <run>`. Default: DefaultShell.
	Shell string
	// Grace is how long processes get between SIGTERM and SIGKILL.
	// Default: DefaultGrace.
	Grace time.Duration
	// Timeout bounds a job whose spec sets none. Default: DefaultTimeout.
	Timeout time.Duration
	// Env is the base environment of every step, NAME=value. Default: the
	// host's variables that AllowedEnv names (see HostEnv): nothing else
	// of the executor's environment, where its secrets are, reaches a job.
	Env []string
	// PassEnv names more host variables whose values jobs get, on top of
	// Env or its default, for an operator who wants a job to see them
	// (a proxy, a certificate bundle). Names starting with CIKIT are
	// refused.
	PassEnv []string
	// Output returns the writer that receives a job's combined stdout and
	// stderr, and the step headers. Writes come from one goroutine per
	// job. Default: output is discarded.
	Output func(spec *cikit.JobSpec) io.Writer
	// KeepWorkspaces leaves workspaces in place after their jobs, for
	// debugging. New removes the workspaces in WorkRoot that an executor
	// which died left behind, but never kept ones.
	KeepWorkspaces bool
	// Expander evaluates the run-time expressions of jobs whose Format is
	// neither "github" (whose ${{ }} the executor evaluates itself) nor
	// "gitlab" (whose variables it expands as GitLab does), in steps, and
	// decides steps' conditions. nil: their text runs as written, and
	// after a failing step only after-steps run.
	Expander Expander
	// Logger receives the executor's own diagnostics. Default:
	// slog.Default().
	Logger *slog.Logger
	// Checkout puts a job's commit into its workspace, for jobs whose
	// context has a source (Job.Context.Source). nil: such a job fails,
	// saying that the runner has no checkout.
	Checkout Checkouter
	// Sandbox, when set, runs each job in a bubblewrap sandbox of its
	// own, with limits on its resources; see Sandbox. New checks that the
	// sandbox works on this host. nil runs jobs as plain processes.
	Sandbox *Sandbox
	// Transfer sends and fetches the archives of jobs' artifacts and
	// caches, with the presigned requests of their Job.Files. Its zero
	// value is artifacts.Sender's defaults.
	Transfer artifacts.Sender
	// Images, when set, runs jobs in the container images they ask for,
	// or the runner's default image; see Images. It needs Sandbox. nil:
	// jobs run on the host, and one that names an image fails. An
	// executor with Images owns their directory until Close.
	Images *Images
}

// Expander evaluates what a pipeline format leaves to run time.
type Expander interface {
	// Expand returns s, a script, env value or working directory of a
	// step of spec, with its expressions evaluated.
	Expand(spec *cikit.JobSpec, s string) (string, error)
	// StepRuns reports whether step runs, given whether an earlier step
	// of the job failed.
	StepRuns(spec *cikit.JobSpec, step *cikit.Step, failed bool) (bool, error)
}

// Executor runs jobs as local processes. It is safe for concurrent use:
// each Run has its own workspace and processes.
type Executor struct {
	cfg Config
	// sandbox is nil when jobs run as plain processes.
	sandbox *sandboxPlan
	// unsandboxed says why, when Config.Sandbox asked for one in
	// SandboxAuto mode and it is unavailable.
	unsandboxed string
	// bash says whether bash is installed: GitHub jobs' default shell.
	bash bool
	// skip are the absolute paths inside Source a workspace copy leaves
	// out: WorkRoot and Config.Exclude.
	skip []string

	locksMu sync.Mutex
	locks   map[string]*os.File // the lock files of live workspaces

	// images is Config.Images' store; nil without.
	images *image.Store
}

// New validates cfg and returns an Executor.
func New(cfg Config) (*Executor, error) {
	if cfg.Source == "" {
		return nil, errors.New("process: Config.Source is required")
	}
	src, err := filepath.Abs(cfg.Source)
	if err != nil {
		return nil, fmt.Errorf("process: Config.Source: %w", err)
	}
	if fi, err := os.Stat(src); err != nil {
		return nil, fmt.Errorf("process: Config.Source: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("process: Config.Source %s is not a directory", src)
	}
	cfg.Source = src
	if cfg.WorkRoot == "" {
		cfg.WorkRoot = os.TempDir()
	}
	if cfg.WorkRoot, err = filepath.Abs(cfg.WorkRoot); err != nil {
		return nil, fmt.Errorf("process: Config.WorkRoot: %w", err)
	}
	if cfg.WorkRoot == cfg.Source {
		return nil, errors.New("process: Config.WorkRoot must not be Config.Source itself")
	}
	skip := []string{cfg.WorkRoot}
	for _, x := range cfg.Exclude {
		if !filepath.IsLocal(x) {
			return nil, fmt.Errorf("process: Config.Exclude: %q is not a path inside Source", x)
		}
		skip = append(skip, filepath.Join(cfg.Source, x))
	}
	if cfg.Shell == "" {
		cfg.Shell = DefaultShell
	}
	if _, err := exec.LookPath(cfg.Shell); err != nil {
		return nil, fmt.Errorf("process: shell %q: %w", cfg.Shell, err)
	}
	if cfg.Grace < 0 || cfg.Timeout < 0 {
		return nil, errors.New("process: Config.Grace and Config.Timeout must not be negative")
	}
	if cfg.Grace == 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Env, err = baseEnv(&cfg); err != nil {
		return nil, err
	}
	cfg.PassEnv = nil // in Env now
	if cfg.Output == nil {
		cfg.Output = func(*cikit.JobSpec) io.Writer { return io.Discard }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	e := &Executor{cfg: cfg, bash: hasBash(), skip: skip}
	e.sweep()
	if cfg.Sandbox != nil {
		if err := e.setUpSandbox(); err != nil {
			return nil, err
		}
	}
	if err := e.openImages(); err != nil {
		return nil, err
	}
	return e, nil
}

// setUpSandbox resolves Config.Sandbox and checks that it works, or, in
// SandboxAuto mode, settles for plain processes and says so.
func (e *Executor) setUpSandbox() error {
	s := e.cfg.Sandbox
	if err := validateSandbox(s, e.cfg.WorkRoot); err != nil {
		return fmt.Errorf("process: %w", err)
	}
	plan, err := planSandbox(s, e.cfg.WorkRoot)
	if err == nil {
		e.sandbox = plan
		err = e.checkSandbox()
	}
	if err == nil {
		if l := s.Limits; plan.cgroup == "" && (l.JobMemory > 0 || l.CPUs > 0) {
			e.cfg.Logger.Warn("the job memory and CPU limits are NOT ENFORCED: they need a cgroup v2 delegated to the runner; every job's log says so",
				"memory", l.JobMemory, "cpus", l.CPUs, "why", plan.noCgroup)
		}
		return nil
	}
	e.sandbox = nil
	if s.Mode == SandboxRequire {
		return fmt.Errorf("process: %w", err)
	}
	// One line, for the line in every job's output.
	e.unsandboxed = strings.Join(strings.Fields(err.Error()), " ")
	e.cfg.Logger.Warn("jobs will run NOT SANDBOXED, as plain processes with the executor's user, file system and network and without limits: "+
		"Config.Sandbox.Mode is auto and the sandbox is unavailable", "err", err)
	return nil
}

// checkSandbox starts a sandbox and runs a step in it, as a job would.
func (e *Executor) checkSandbox() error {
	ctx, cancel := context.WithTimeout(context.Background(), sandboxStartTimeout)
	defer cancel()
	ws, err := e.newWorkspace("sandbox-check")
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	defer e.removeWorkspace(ws)
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	out := &prefixBuffer{max: 4 << 10}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(out, pr)
	}()
	defer func() {
		_ = pw.Close()
		<-copied
		_ = pr.Close()
	}()
	s, err := e.startSandbox(ctx, &sandboxSpec{ws: ws, out: pw})
	if err != nil {
		return err
	}
	argv := []string{e.cfg.Shell, "-e", "-c", "test -w ."}
	x, err := s.run(ctx, argv, ws, append(append([]string(nil), e.cfg.Env...), sandboxEnv()...))
	s.end(e.cfg.Logger.Warn)
	switch {
	case err != nil:
		return fmt.Errorf("sandbox self-check: %w", err)
	case x.code != 0:
		_ = pw.Close()
		<-copied
		return fmt.Errorf("sandbox self-check: %q exited with code %d in the sandbox; output: %q", strings.Join(argv, " "), x.code, out.String())
	}
	return nil
}

// newWorkspace creates an empty workspace for job id, owned by the user
// the job runs as.
func (e *Executor) newWorkspace(id string) (string, error) {
	ws, err := os.MkdirTemp(e.cfg.WorkRoot, workspacePrefix+dirName(id)+"-")
	if err != nil {
		return "", err
	}
	if err := e.lockWorkspace(ws); err != nil {
		_ = os.Remove(ws)
		return "", err
	}
	if err := e.own(ws); err != nil {
		e.removeWorkspace(ws)
		return "", err
	}
	return ws, nil
}

// own gives path to the user the sandbox runs jobs as, when that is not
// the executor's.
func (e *Executor) own(path string) error {
	if e.sandbox == nil || e.sandbox.uid < 0 {
		return nil
	}
	return os.Lchown(path, e.sandbox.uid, e.sandbox.gid)
}

// Isolation says what separates the executor's jobs from each other and
// the host: "bubblewrap" when each runs in a sandbox, "process" when they
// run as plain processes (no Config.Sandbox, or SandboxAuto without one).
func (e *Executor) Isolation() string {
	if e.sandbox != nil {
		return "bubblewrap"
	}
	return "process"
}

// Result is how a job's execution ended.
type Result struct {
	// State is JobSucceeded, JobFailed or JobCancelled.
	State cikit.JobState
	// ExitCode of the last step that exited; -1 if none did.
	ExitCode int
	// Reason explains a failure or cancellation; empty on success.
	Reason string
	// FailureClass says why a failure happened: a step's exit (script),
	// the job's timeout, or the executor itself (infrastructure).
	FailureClass cikit.FailureClass
	// Steps has one entry per step that was started.
	Steps []StepResult
	// Outputs are the job's outputs (JobSpec.Outputs), evaluated when its
	// steps ended.
	Outputs map[string]string
	// Annotations are what its steps attached with workflow commands
	// (::error, ::warning, ::notice), at most cikit.MaxAnnotations.
	Annotations []cikit.Annotation
	// Commit is the commit checked out into the workspace, and
	// CheckoutDuration how long the checkout took; empty and zero for a
	// job that checked out nothing.
	Commit           string
	CheckoutDuration time.Duration
	// EnvNames are the names, never the values, of the variables of the
	// job's environment, sorted.
	EnvNames []string
	// Caches are how the job's caches were restored and saved.
	Caches []cikit.CacheReport
	// ImageRef and ImageDigest name the image the job ran in: the
	// reference asked for, such as "alpine:3.19" (Job.Image.Ref), and the
	// digest it resolved to (Job.Image.Digest); empty for a job on the
	// host.
	ImageRef    string
	ImageDigest string
}

// Job is one job for RunJob: its spec, what it knows of its run, and
// where its output goes.
type Job struct {
	// Spec is the job. Required.
	Spec *cikit.JobSpec
	// Context is the job's run context, the results of its needs and the
	// source of its commit; nil for a job that knows no run (a runner
	// given a fixed directory).
	Context *cikit.JobContext
	// Output receives the job's combined output and the step headers;
	// nil: Config.Output.
	Output io.Writer
	// OnStep, when set, is called with a step's index (into Steps, then
	// AfterSteps) as it starts.
	OnStep func(int)
	// Lease, when set, is the job's lease: its supervisor kills the job
	// when it passes without a renewal (see RunLeased).
	Lease *LeaseDeadline
	// Vars and Secrets are the GitHub vars and secrets contexts of a
	// GitHub job. The values of Secrets are masked in the output of any
	// job, with their encodings (see mask.Masker), also when a step
	// writes one in pieces; a value shorter than mask.MinValueBytes,
	// which could not be masked, fails the job before its first step
	// (FailureConfig), naming the secret.
	Vars, Secrets map[string]string
	// FetchSecrets, when set, fetches the job's secrets and ID tokens
	// first, before its image is pulled and its services start (their
	// credentials and environment may be expressions of secrets); what it
	// returns joins Secrets. Every secret the spec names must be in
	// Secrets then, or the job fails before its first step, naming the
	// missing ones.
	FetchSecrets SecretsFetcher
	// Files is where the job's artifacts and caches go and come from,
	// scoped to this attempt; nil for a runner without one, where a job
	// that declares artifacts or caches, or runs a step that uses them,
	// fails saying so.
	Files artifacts.Broker
	// Image, when set, is the image the job runs in (see Image); nil
	// runs it on the host's directories of Sandbox.ReadOnly.
	Image *Image
}

// StepResult is how one step ended.
type StepResult struct {
	Name     string
	ExitCode int // -1 if the step did not exit by itself
	Duration time.Duration
}

// Run runs spec's steps in a fresh workspace and returns when every
// process it started has ended. Cancelling ctx cancels the job (the result
// is JobCancelled); exceeding the job's timeout fails it. The output goes
// to Config.Output.
func (e *Executor) Run(ctx context.Context, spec *cikit.JobSpec) Result {
	return e.RunOutput(ctx, spec, e.cfg.Output(spec), nil)
}

// RunOutput is Run with the job's output going to out, and onStep, when
// not nil, called with a step's index (into Steps, then AfterSteps) as it
// starts. Output reaches out through a pipe, so the last bytes of a step
// may arrive after the next step's call.
func (e *Executor) RunOutput(ctx context.Context, spec *cikit.JobSpec, out io.Writer, onStep func(int)) Result {
	return e.RunJob(ctx, Job{Spec: spec, Output: out, OnStep: onStep})
}

var errTimeout = errors.New("job timed out")

// stepExit is how a step's process ended.
type stepExit struct {
	code   int            // -1 if it did not exit by itself
	signal syscall.Signal // what killed it, if a signal did
	tasks  int            // in a sandbox: the job's processes and threads after it ended
}

// jobProcs runs the processes of one job.
type jobProcs interface {
	// run runs argv in dir with env, its output going to the job's, and
	// returns how it ended. Cancelling ctx terminates it: SIGTERM to its
	// process group, SIGKILL after the grace period.
	run(ctx context.Context, argv []string, dir string, env []string) (stepExit, error)
	// end kills whatever the job's steps left running and returns when
	// it is gone; it calls warn if that takes too long.
	end(warn func(msg string, args ...any))
}

// dirName makes a job ID safe for a directory name.
func dirName(id string) string {
	b := []byte(id)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '_'
		}
	}
	if len(b) > 40 {
		b = b[:40]
	}
	return string(b)
}

// copyTree copies the regular files, directories and symlinks below src
// into dst, preserving permission bits, calls own on each copy, and skips
// skip (the work root).
func copyTree(src, dst string, skip []string, own func(string) error) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		if path == dst || slices.Contains(skip, path) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch mode := info.Mode(); {
		case mode.IsDir():
			err = os.Mkdir(target, mode.Perm()|0o700)
		case mode&fs.ModeSymlink != 0:
			var link string
			if link, err = os.Readlink(path); err == nil {
				err = os.Symlink(link, target)
			}
		case mode.IsRegular():
			err = copyFile(path, target, mode.Perm())
		default:
			return nil // sockets, devices and pipes are not part of a workspace
		}
		if err != nil {
			return err
		}
		return own(target)
	})
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// removeWorkspace removes ws, making read-only directories writable first
// if a plain removal fails (module caches and the like), then its lock
// file.
func (e *Executor) removeWorkspace(ws string) {
	defer e.unlockWorkspace(ws)
	if err := os.RemoveAll(ws); err == nil {
		return
	}
	_ = filepath.WalkDir(ws, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(path, 0o700)
		}
		return nil
	})
	if err := os.RemoveAll(ws); err != nil {
		e.cfg.Logger.Warn("could not remove workspace", "dir", ws, "err", err)
	}
}

// killWait bounds how long Run waits for killed processes to be gone.
const killWait = 5 * time.Second

// processGone reports whether process pid has ended: it does not exist or
// is a zombie.
func processGone(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) != nil
	}
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(f) > 0 && f[0] == "Z"
}
