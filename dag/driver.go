package dag

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"

	"github.com/cikit/cikit"
)

// Executor runs one job. The Driver calls it from its own goroutine for
// each job it starts.
type Executor interface {
	// Execute runs job's steps and reports the outcome. When ctx is
	// cancelled (the run was cancelled) it must stop everything it
	// started and return, reporting JobCancelled unless the job had
	// already finished. It must not return while any process or goroutine
	// it started for the job is still alive.
	Execute(ctx context.Context, job *Job) Outcome
}

// ExecutorFunc adapts a function to Executor.
type ExecutorFunc func(ctx context.Context, job *Job) Outcome

// Execute calls f.
func (f ExecutorFunc) Execute(ctx context.Context, job *Job) Outcome { return f(ctx, job) }

// Outcome is how an execution ended.
type Outcome struct {
	// State is JobSucceeded, JobFailed or JobCancelled.
	State cikit.JobState
	// ExitCode of the last step that ran, -1 if none exited.
	ExitCode int
	// Reason explains a failure or cancellation to people.
	Reason string
	// FailureClass says why a failure happened, for retry policies.
	FailureClass cikit.FailureClass
}

// DriverConfig configures a Driver.
type DriverConfig struct {
	// Store holds the runs. Required.
	Store Store
	// Executor runs the jobs. Required.
	Executor Executor
	// Parallel is the most jobs run at once. Default: runtime.NumCPU().
	Parallel int
	// OnChange, if set, is called for every job state change, in order,
	// from one goroutine at a time. It must not block for long: the
	// driver waits for it.
	OnChange func(*Job)
	// Logger receives the driver's diagnostics. Default: slog.Default().
	Logger *slog.Logger
}

// Driver drives one run at a time to its end in this process: it queues
// READY jobs, starts up to Parallel of them on the Executor and feeds their
// outcomes back into the Store, whose rules decide what runs next. It is
// the scheduler loop of a local run (`cikit run`); a distributed platform
// runs the same Store transitions from many processes instead.
type Driver struct {
	cfg DriverConfig
}

// NewDriver validates cfg and returns a Driver.
func NewDriver(cfg DriverConfig) (*Driver, error) {
	if cfg.Store == nil {
		return nil, errors.New("dag: DriverConfig.Store is required")
	}
	if cfg.Executor == nil {
		return nil, errors.New("dag: DriverConfig.Executor is required")
	}
	if cfg.Parallel < 0 {
		return nil, fmt.Errorf("dag: DriverConfig.Parallel must not be negative, got %d", cfg.Parallel)
	}
	if cfg.Parallel == 0 {
		cfg.Parallel = runtime.NumCPU()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Driver{cfg: cfg}, nil
}

type execResult struct {
	job     *Job
	outcome Outcome
}

// Drive runs the run's jobs until every job is terminal and returns the
// final run. When ctx is cancelled, Drive cancels the run: jobs that have
// not started end CANCELLED, running executions are cancelled, and Drive
// returns once all of them have returned. It returns an error only when
// the store fails; it then cancels running executions and waits for them
// before returning.
func (d *Driver) Drive(ctx context.Context, runID string) (*Run, error) {
	// Store writes must land even after ctx is cancelled: the
	// cancellation itself has to be recorded.
	storeCtx := context.WithoutCancel(ctx)
	execCtx, cancelExec := context.WithCancel(ctx)
	defer cancelExec()

	jobs, err := d.cfg.Store.JobList(storeCtx, runID)
	if err != nil {
		return nil, err
	}
	var waiting []*Job // QUEUED, waiting for a free slot, in order
	queue := func(j *Job) error {
		res, err := d.cfg.Store.JobQueue(storeCtx, &JobTransitionParams{RunID: runID, JobID: j.ID(), Attempt: j.Attempt})
		if err != nil {
			return err
		}
		d.notify(res)
		waiting = append(waiting, res.Changed[0])
		return nil
	}
	for _, j := range jobs {
		if j.State == cikit.JobReady {
			if err := queue(j); err != nil {
				return nil, err
			}
		}
	}

	results := make(chan execResult)
	running := 0
	done := ctx.Done() // nil once the run is cancelled
	cancelled := false
	var failure error
	cancelRun := func() {
		cancelled, done = true, nil
		waiting = nil
		res, err := d.cfg.Store.RunCancel(storeCtx, runID)
		if err != nil {
			failure = err
			return
		}
		d.notify(res)
	}
	for {
		if !cancelled && ctx.Err() != nil {
			cancelRun()
		}
		for failure == nil && !cancelled && running < d.cfg.Parallel && len(waiting) > 0 {
			j := waiting[0]
			waiting = waiting[1:]
			res, err := d.cfg.Store.JobStart(storeCtx, &JobTransitionParams{RunID: runID, JobID: j.ID(), Attempt: j.Attempt})
			if err != nil {
				failure = err
				break
			}
			d.notify(res)
			running++
			go func(j *Job) {
				results <- execResult{job: j, outcome: d.cfg.Executor.Execute(execCtx, j)}
			}(res.Changed[0])
		}
		if failure != nil {
			cancelExec()
		}
		if running == 0 {
			break
		}
		select {
		case r := <-results:
			running--
			if failure == nil {
				failure = d.complete(storeCtx, runID, r, queue)
			}
		case <-done:
			cancelRun()
		}
	}
	if failure != nil {
		return nil, failure
	}
	return d.cfg.Store.RunGet(storeCtx, runID)
}

func (d *Driver) complete(ctx context.Context, runID string, r execResult, queue func(*Job) error) error {
	o := r.outcome
	switch o.State {
	case cikit.JobSucceeded, cikit.JobFailed, cikit.JobCancelled:
	default:
		d.cfg.Logger.Error("executor returned an invalid outcome; recording a failure",
			"run", runID, "job", r.job.ID(), "state", o.State)
		o = Outcome{State: cikit.JobFailed, ExitCode: -1,
			Reason: fmt.Sprintf("executor reported invalid outcome %q", o.State)}
	}
	res, err := d.cfg.Store.JobComplete(ctx, &JobCompleteParams{
		RunID: runID, JobID: r.job.ID(), Attempt: r.job.Attempt,
		Outcome: o.State, ExitCode: o.ExitCode, Reason: o.Reason, FailureClass: o.FailureClass,
	})
	if err != nil {
		return err
	}
	d.notify(res)
	for _, j := range res.Changed {
		if j.State == cikit.JobReady {
			if err := queue(j); err != nil {
				return err
			}
		}
	}
	return nil
}

func (d *Driver) notify(res *TransitionResult) {
	if d.cfg.OnChange == nil {
		return
	}
	for _, j := range res.Changed {
		d.cfg.OnChange(j)
	}
}
