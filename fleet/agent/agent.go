package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet/process"
)

// Defaults of Config.
const (
	DefaultWait          = 50 * time.Second
	DefaultChunkInterval = time.Second
	DefaultChunkBytes    = 64 << 10
	DefaultShutdownGrace = 30 * time.Second
)

// Executor runs one job's steps. Run returns when the job has ended and no
// process of it is left; cancelling ctx cancels the job. The agent fills
// job with what the server handed out: the Spec; the Context (the run's
// context, the results and outputs of the jobs it needs, the source to
// fetch its commit from, as the claim carried it); Output, which
// receives the job's output; OnStep, to call as each step starts, with
// its index; Lease; and Files, the attempt's artifacts and caches over
// the runner protocol (its errors match ErrNoArtifacts when the server
// serves none, and ErrStale when the attempt is no longer current).
//
// job.Lease is the end of the job's lease, renewed by the agent with each
// heartbeat the server confirmed. The executor must see to it that the
// job's processes are gone by then even if the agent's own process is
// stopped or frozen, by a process of its own that is not the agent's
// (process.Executor.RunLeased does, with the job's supervisor): the
// server gives the job to another runner once the lease has ended, and
// at most one attempt of a job may execute at any moment.
type Executor interface {
	Run(ctx context.Context, job process.Job) Result
}

// ExecutorFunc is an Executor as a function.
type ExecutorFunc func(ctx context.Context, job process.Job) Result

// Run calls f.
func (f ExecutorFunc) Run(ctx context.Context, job process.Job) Result { return f(ctx, job) }

// Result is how a job's execution ended, and what it reported: the agent
// sends it all with the job's completion.
type Result struct {
	State        cikit.JobState // JobSucceeded, JobFailed or JobCancelled
	ExitCode     int
	Reason       string
	FailureClass cikit.FailureClass
	// Outputs are the job's outputs (JobSpec.Outputs), at most
	// cikit.MaxOutputValueBytes each and cikit.MaxOutputsBytes together:
	// the server refuses a report past them, and the agent then reports
	// the job failed, saying why.
	Outputs map[string]string
	// Annotations are what its steps attached, at most
	// cikit.MaxAnnotations.
	Annotations []cikit.Annotation
	// Commit is the commit checked out, CheckoutDuration how long that
	// took; empty and zero when the job checked out nothing.
	Commit           string
	CheckoutDuration time.Duration
	// EnvNames are the names, never the values, of the variables of the
	// job's environment.
	EnvNames []string
	// Caches are how the job's caches were restored and saved.
	Caches []cikit.CacheReport
	// ImageRef is the image the job ran in as it was asked for, such as
	// "alpine:3.19", and ImageDigest the digest it resolved to, an OCI
	// digest "sha256:<64 hex>" (the server refuses another form); empty
	// for a job that ran on the host.
	ImageRef    string
	ImageDigest string
}

// Config configures an Agent. Server, Executor and either
// RegistrationToken or RunnerToken are required.
type Config struct {
	// Server is the platform's base URL, such as https://ci.example.com.
	Server string
	// RegistrationToken registers the agent as a new runner when it
	// starts; RunnerToken, when set, is used instead.
	RegistrationToken string
	RunnerToken       string
	// Name and Labels describe the runner at registration.
	Name   string
	Labels []string
	// Executor runs the jobs.
	Executor Executor
	// HTTPClient makes the calls. Default: a client without timeout
	// (claims are long polls; each call has its own deadline).
	HTTPClient *http.Client
	// Wait is how long a claim waits for a job. Default: DefaultWait.
	Wait time.Duration
	// ChunkInterval and ChunkBytes decide when output is sent: every
	// interval, or as soon as that many bytes wait.
	ChunkInterval time.Duration
	ChunkBytes    int
	// ShutdownGrace is how long Run lets the current job finish once its
	// context ends; then the job is cancelled and returned to the
	// server. Default: DefaultShutdownGrace.
	ShutdownGrace time.Duration
	// Version is sent at registration.
	Version string
	// MaxJobs, when positive, is how many jobs the agent takes before Run
	// returns: 1 makes a single-use (ephemeral) runner. A job counts once
	// claimed, however it ends. Default: no limit.
	MaxJobs int
	// Logger receives the agent's diagnostics. Default: slog.Default().
	Logger *slog.Logger
}

// ErrRunnerRevoked is what Run returns once the platform revoked the
// runner: it takes no job any more, and must not register again on its
// own.
var ErrRunnerRevoked = errors.New("agent: the runner was revoked")

// The codes of the platform's 401 answers about the runner itself.
const (
	codeRunnerRevoked = "runner_revoked"
	codeRunnerUnknown = "runner_unknown"
)

// Agent is a runner: it registers, claims jobs by long poll, runs each
// with its Executor while heartbeating and streaming its output, and
// reports the result. It fences itself: when the server says the attempt
// is stale, or heartbeats fail for as long as a lease lasts, it kills the
// job and sends nothing more about it. It never starts a job whose first
// heartbeat fails.
type Agent struct {
	cfg      Config
	c        *client
	log      *slog.Logger
	runnerID string
	token    string
}

// New validates cfg and returns an Agent.
func New(cfg Config) (*Agent, error) {
	if cfg.Executor == nil {
		return nil, errors.New("agent: Config.Executor is required")
	}
	if cfg.RegistrationToken == "" && cfg.RunnerToken == "" {
		return nil, errors.New("agent: Config needs a RegistrationToken or a RunnerToken")
	}
	base, err := url.Parse(cfg.Server)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("agent: Config.Server %q is not an http or https URL", cfg.Server)
	}
	cfg.Wait = cmp.Or(cfg.Wait, DefaultWait)
	cfg.ChunkInterval = cmp.Or(cfg.ChunkInterval, DefaultChunkInterval)
	cfg.ChunkBytes = cmp.Or(cfg.ChunkBytes, DefaultChunkBytes)
	cfg.ShutdownGrace = cmp.Or(cfg.ShutdownGrace, DefaultShutdownGrace)
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Agent{cfg: cfg, c: &client{base: base, http: cfg.HTTPClient}, log: cfg.Logger, token: cfg.RunnerToken}, nil
}

// Register registers the agent as a new runner with its
// RegistrationToken, unless it has a runner token already (Config's, or
// one an earlier Register got). Run registers by itself; calling Register
// first tells a runner that cannot register from one waiting for work.
// It must not be called while Run runs.
func (a *Agent) Register(ctx context.Context) error {
	if a.token != "" {
		return nil
	}
	reg, err := a.c.register(ctx, a.cfg.RegistrationToken, a.cfg.Name, a.cfg.Labels, a.cfg.Version)
	if err != nil {
		return fmt.Errorf("agent: registering: %w", err)
	}
	a.runnerID, a.token = reg.RunnerID, reg.RunnerToken
	a.log.Info("agent: registered", "runner", reg.RunnerID, "labels", reg.Labels)
	return nil
}

// Run registers if needed, then claims and runs jobs one at a time until
// ctx ends, or until it has taken Config.MaxJobs jobs. A job running when
// ctx ends gets ShutdownGrace to finish; after that it is cancelled and
// given back to the server, to run elsewhere. Run returns nil after a
// clean shutdown or its last job, the error that made registering fail,
// or ErrRunnerRevoked. A runner the platform no longer knows (its record
// is gone) registers again when it has a RegistrationToken.
func (a *Agent) Run(ctx context.Context) error {
	if err := a.Register(ctx); err != nil {
		return err
	}
	backoff := 100 * time.Millisecond
	for taken := 0; ctx.Err() == nil && (a.cfg.MaxJobs <= 0 || taken < a.cfg.MaxJobs); {
		j, err := a.c.claim(ctx, a.token, a.cfg.Wait)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			if ae, ok := errors.AsType[*apiError](err); ok && ae.Status == http.StatusUnauthorized {
				switch {
				case ae.Code == codeRunnerRevoked:
					return fmt.Errorf("%w: %s", ErrRunnerRevoked, ae.Msg)
				case ae.Code == codeRunnerUnknown && a.cfg.RegistrationToken != "":
					// The platform lost the runner's record (its store
					// was replaced, or the embedded platform restarted):
					// a new registration, under a new runner ID.
					a.log.Warn("agent: the platform does not know this runner; registering again", "runner", a.runnerID)
					a.token = ""
					if err := a.Register(ctx); err != nil {
						return err
					}
					continue
				}
			}
			a.log.Warn("agent: claiming failed; retrying", "error", err, "in", backoff)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 10*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		if j != nil {
			taken++
			a.runJob(ctx, j)
		}
	}
	return nil
}

// runJob runs one claimed job to its report. ctx is the agent's: when it
// ends, the job gets ShutdownGrace before it is cancelled and returned.
func (a *Agent) runJob(ctx context.Context, j *job) {
	log := a.log.With("run", j.RunID, "job", j.JobID, "attempt", j.Attempt)
	// Calls about the job outlive the agent's context: a shutting-down
	// agent still reports or returns its job.
	bg := context.WithoutCancel(ctx)
	interval, err := time.ParseDuration(j.HeartbeatInterval)
	if err != nil || interval <= 0 {
		interval = 10 * time.Second
	}
	first, leaseEnd, err := a.c.heartbeat(bg, j)
	if err != nil {
		// The lease could not be renewed once: the job is not started,
		// and its lease expires for the reaper to try again.
		log.Warn("agent: first heartbeat failed; not starting the job", "error", err)
		return
	}

	jobCtx, cancelJob := context.WithCancelCause(bg)
	defer cancelJob(nil)
	var (
		mu       sync.Mutex
		fenced   bool
		returned bool
	)
	fence := func(why string) {
		mu.Lock()
		defer mu.Unlock()
		if !fenced {
			fenced = true
			log.Warn("agent: fenced; killing the job and sending nothing more", "why", why)
			cancelJob(errFenced)
		}
	}
	isFenced := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return fenced
	}

	// The job's supervisor holds the lease's end from before the first
	// step, and every renewal after.
	deadline := process.NewLeaseDeadline(leaseEnd)

	stream := newLogStream(bg, a.c, j, a.cfg.ChunkInterval, a.cfg.ChunkBytes, log, func() { fence("a log chunk was refused as stale") })

	// Heartbeats: they renew the lease, carry cancel requests, and
	// fence the job when refused or when none succeeded for as long as
	// a lease lasts.
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		if first.CancelRequested {
			cancelJob(errCancelRequested)
		}
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-jobCtx.Done():
				return
			case <-t.C:
			}
			hctx, cancel := context.WithTimeout(jobCtx, interval)
			h, end, err := a.c.heartbeat(hctx, j)
			cancel()
			switch {
			case err == nil:
				leaseEnd = end
				deadline.Renew(end)
				if h.CancelRequested {
					cancelJob(errCancelRequested)
				}
			case errors.Is(err, ErrStale):
				fence("a heartbeat was refused as stale")
				return
			case !time.Now().Before(leaseEnd):
				fence("no heartbeat succeeded for a lease duration")
				return
			default:
				log.Warn("agent: heartbeat failed", "error", err)
			}
		}
	}()

	// Shutdown: the job gets a grace period, then is cancelled and given
	// back.
	shutdownDone := make(chan struct{})
	go func() {
		defer close(shutdownDone)
		select {
		case <-jobCtx.Done():
			return
		case <-ctx.Done():
		}
		select {
		case <-jobCtx.Done():
		case <-time.After(a.cfg.ShutdownGrace):
			mu.Lock()
			returned = true
			mu.Unlock()
			cancelJob(errShutdown)
		}
	}()

	deadlineCtx, cancelDeadline := context.WithDeadline(jobCtx, j.Deadline)
	files := &jobFiles{c: a.c, j: j, onStale: func() { fence("an artifact or cache call was refused as stale") }}
	res := a.cfg.Executor.Run(deadlineCtx, process.Job{Spec: j.Spec, Context: j.Context, Output: stream, OnStep: stream.setStep, Lease: deadline,
		Files: files, FetchSecrets: a.fetchSecrets(j)})
	cancelDeadline()
	cause := context.Cause(jobCtx)
	cancelJob(nil)
	<-hbDone
	<-shutdownDone
	totals := stream.close(bg)
	defer stream.remove()
	if isFenced() {
		return
	}
	err = a.c.finishLog(bg, j, totals)
	var ae *apiError
	if errors.As(err, &ae) && ae.Status == http.StatusNotFound && totals.TotalBytes > 0 {
		// The server lost the live log (it restarted): the spool has it
		// all, from the start.
		stream.resend(bg)
		err = a.c.finishLog(bg, j, totals)
	}
	if err != nil {
		if errors.Is(err, ErrStale) {
			fence("the log's finish was refused as stale")
			return
		}
		log.Warn("agent: finishing the log failed", "error", err)
	}
	mu.Lock()
	giveBack := returned
	mu.Unlock()
	if giveBack {
		if err := a.c.giveBack(bg, j); err != nil {
			log.Warn("agent: returning the job failed; its lease will expire", "error", err)
		}
		return
	}
	comp := &completion{Result: res.State, ExitCode: res.ExitCode, FailureClass: res.FailureClass, Reason: res.Reason, Log: totals,
		Outputs: res.Outputs, Annotations: res.Annotations, Commit: res.Commit, CheckoutDurationMS: res.CheckoutDuration.Milliseconds(),
		EnvNames: res.EnvNames, Caches: res.Caches, ImageRef: res.ImageRef, ImageDigest: res.ImageDigest}
	if errors.Is(cause, errCancelRequested) {
		comp.Result, comp.FailureClass, comp.Reason = cikit.JobCancelled, "", "cancelled on request"
	}
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := a.c.complete(bg, j, comp)
		if err == nil || errors.Is(err, ErrStale) {
			if err != nil {
				log.Warn("agent: completion refused as stale", "error", err)
			}
			return
		}
		if errors.As(err, &ae) && (ae.Status == http.StatusBadRequest || ae.Status == http.StatusRequestEntityTooLarge) && comp.reports() {
			// The server refused the job's report (an output past its
			// limit, say): the job fails, saying why, rather than end
			// as a lost runner retried with the same report.
			log.Warn("agent: the server refused the job's report; reporting the job failed", "error", err)
			*comp = completion{Result: cikit.JobFailed, ExitCode: comp.ExitCode, FailureClass: cikit.FailureScript, Log: totals,
				Reason: "the server refused the job's report: " + ae.Msg}
			continue
		}
		if errors.As(err, &ae) && !ae.transient() || attempt == 10 {
			log.Error("agent: completion failed", "error", err)
			return
		}
		time.Sleep(backoff)
		backoff = min(backoff*2, 5*time.Second)
	}
}

var (
	errFenced          = errors.New("the attempt is no longer current")
	errCancelRequested = errors.New("cancel requested")
	errShutdown        = errors.New("the runner is shutting down")
)
