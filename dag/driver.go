package dag

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"time"

	"github.com/cikit/cikit"
)

// Executor runs one job. The Driver calls it from its own goroutine for
// each job it starts.
type Executor interface {
	// Execute runs job's steps and reports the outcome. When ctx is
	// cancelled (the run was cancelled, or the job was by a newer job of
	// its concurrency group) it must stop everything it started and
	// return, reporting JobCancelled unless the job had already finished. It must not return while any process or goroutine
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
	// Result, when set, is what the execution reported beyond its
	// outcome (see JobCompleteParams.Result): the job's outputs, which
	// the store records and the expansion of a run-time matrix that
	// reads them needs.
	Result *JobResult
}

// DriverConfig configures a Driver.
type DriverConfig struct {
	// Store holds the runs. Required.
	Store Store
	// Executor runs the jobs. Required.
	Executor Executor
	// Parallel is the most jobs run at once. Default: runtime.NumCPU().
	Parallel int
	// OnChange, if set, is called for every state change of a job of
	// the run, in order, from one goroutine at a time. It must not block
	// for long: the driver waits for it.
	OnChange func(*Job)
	// GroupRetry is how often a job waiting for its concurrency group
	// (see GroupKey) asks for its turn again while no job of the run
	// ends, for a group held by another run. Default: one second.
	GroupRetry time.Duration
	// Logger receives the driver's diagnostics. Default: slog.Default().
	Logger *slog.Logger
	// Play names the manual and gated jobs the driver starts (approves)
	// once they wait MANUAL, as a person would (EventPlay); the others
	// are left waiting, and the run ends without them unless they block
	// it (see RunStatus). An approved gate with a wait timer waits
	// DELAYED, as a delayed job does. `cikit run --job` fills it. Drive
	// refuses a run that has no manual or gated job of a name Play gives.
	Play []string
	// Now is the clock the driver releases delayed jobs by
	// (Store.JobsRelease): a DELAYED job of the run is released once Now
	// reaches its ReadyAt, and Drive waits for it. Default: time.Now.
	Now func() time.Time
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
	if cfg.GroupRetry < 0 {
		return nil, fmt.Errorf("dag: DriverConfig.GroupRetry must not be negative, got %s", cfg.GroupRetry)
	}
	if cfg.GroupRetry == 0 {
		cfg.GroupRetry = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Driver{cfg: cfg}, nil
}

type execResult struct {
	job     *Job
	outcome Outcome
}

// Drive runs the run's jobs until every job is terminal, or waits for a
// person (a MANUAL job not in Play, and what needs it), and returns the
// final run. It waits for the run's DELAYED jobs to be due and releases
// them. When ctx is cancelled, Drive cancels the run: jobs that have
// not started end CANCELLED, running executions are cancelled, and Drive
// returns once all of them have returned. It returns an error only when
// the store fails; it then cancels running executions and waits for them
// before returning.
//
// A job whose concurrency group is busy waits READY and asks for its
// turn again whenever a job of the run ends, and every GroupRetry. A
// job of the run that a newer job of its group cancels leaves the queue,
// or has its execution cancelled if it runs.
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
	var waiting []*Job                           // QUEUED, waiting for a free slot, in order
	var blocked []*Job                           // READY, waiting for their concurrency groups, in order
	var toPlay []*Job                            // MANUAL, in Play, to start
	delayed := make(map[string]*Job)             // DELAYED, by job ID
	stops := make(map[string]context.CancelFunc) // of the running executions, by job ID
	plays := make(map[string]bool, len(d.cfg.Play))
	for _, id := range d.cfg.Play {
		plays[id] = true
	}
	// track reports changes to OnChange and applies the cancellations a
	// newer job of a concurrency group made to the jobs the driver holds.
	track := func(changed []*Job) {
		for _, j := range changed {
			if j.RunID != runID {
				continue
			}
			d.notify(j)
			delete(delayed, j.ID())
			switch j.State {
			case cikit.JobManual:
				if plays[j.ID()] {
					toPlay = append(toPlay, j)
				}
			case cikit.JobDelayed:
				delayed[j.ID()] = j
			case cikit.JobCancelled:
				gone := func(w *Job) bool { return w.ID() == j.ID() }
				waiting, blocked = slices.DeleteFunc(waiting, gone), slices.DeleteFunc(blocked, gone)
			case cikit.JobCancelRequested:
				if stop, ok := stops[j.ID()]; ok {
					stop()
				}
			}
		}
	}
	queue := func(j *Job) error {
		res, err := d.cfg.Store.JobQueue(storeCtx, &JobTransitionParams{RunID: runID, JobID: j.ID(), Attempt: j.Attempt})
		var busy *GroupBusyError
		if errors.As(err, &busy) {
			track(busy.Cancelled)
			blocked = append(blocked, j)
			return nil
		}
		if err != nil {
			return err
		}
		waiting = append(waiting, res.Changed[0])
		track(res.Changed)
		return nil
	}
	// unblock asks for the turns of the jobs waiting for their groups.
	unblock := func() error {
		retry := blocked
		blocked = nil
		for _, j := range retry {
			err := queue(j)
			if errors.Is(err, cikit.ErrInvalidTransition) {
				continue // no longer READY: another writer cancelled it
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	// play starts the manual jobs in toPlay, and queues them.
	play := func() error {
		for len(toPlay) > 0 {
			j := toPlay[0]
			toPlay = toPlay[1:]
			res, err := d.cfg.Store.JobApply(storeCtx, []*JobEvent{{Kind: EventPlay, RunID: runID, JobID: j.ID(), Attempt: j.Attempt}})
			if err != nil {
				return err
			}
			if errors.Is(res[0].Err, cikit.ErrInvalidTransition) {
				continue // no longer MANUAL: another writer cancelled it
			}
			if res[0].Err != nil {
				return res[0].Err
			}
			track(res[0].Changed)
			if res[0].Changed[0].State != cikit.JobReady {
				continue // an approved gate's wait timer: DELAYED, tracked
			}
			if err := queue(res[0].Changed[0]); err != nil {
				return err
			}
		}
		return nil
	}
	// release releases the run's delayed jobs that are due, and queues
	// them. JobsRelease releases those of every run of the store: the
	// run's are read back, so a job another driver released is queued
	// here all the same.
	release := func() error {
		now := d.cfg.Now()
		if _, err := d.cfg.Store.JobsRelease(storeCtx, now); err != nil {
			return err
		}
		for _, j := range sortedJobs(delayed) {
			if j.ReadyAt.After(now) {
				continue
			}
			cur, err := d.cfg.Store.JobGet(storeCtx, runID, j.ID())
			if err != nil {
				return err
			}
			if cur.State == cikit.JobDelayed && cur.Attempt == j.Attempt {
				continue
			}
			delete(delayed, j.ID())
			if cur.State == cikit.JobReady {
				d.notify(cur)
				if err := queue(cur); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, id := range d.cfg.Play {
		if !slices.ContainsFunc(jobs, func(j *Job) bool { return j.ID() == id && (j.Spec.When == cikit.WhenManual || j.Spec.Gate != nil) }) {
			return nil, fmt.Errorf("dag: DriverConfig.Play names %q, which is not a manual or gated job of run %s", id, runID)
		}
	}
	for _, j := range jobs {
		switch j.State {
		case cikit.JobReady:
			if err := queue(j); err != nil {
				return nil, err
			}
		case cikit.JobManual:
			if plays[j.ID()] {
				toPlay = append(toPlay, j)
			}
		case cikit.JobDelayed:
			delayed[j.ID()] = j
		}
	}

	results := make(chan execResult)
	running := 0
	done := ctx.Done() // nil once the run is cancelled
	cancelled := false
	var failure error
	cancelRun := func() {
		cancelled, done = true, nil
		waiting, blocked = nil, nil
		res, err := d.cfg.Store.RunCancel(storeCtx, runID)
		if err != nil {
			failure = err
			return
		}
		track(res.Changed)
	}
	for {
		if !cancelled && ctx.Err() != nil {
			cancelRun()
		}
		if failure == nil && !cancelled {
			failure = play()
		}
		for failure == nil && !cancelled && running < d.cfg.Parallel && len(waiting) > 0 {
			j := waiting[0]
			waiting = waiting[1:]
			res, err := d.cfg.Store.JobStart(storeCtx, &JobTransitionParams{RunID: runID, JobID: j.ID(), Attempt: j.Attempt})
			if errors.Is(err, cikit.ErrInvalidTransition) {
				// No longer QUEUED: another writer cancelled it (a newer
				// job of its concurrency group in another run).
				d.cfg.Logger.Info("job cancelled before it started", "run", runID, "job", j.ID(), "error", err)
				continue
			}
			if err != nil {
				failure = err
				break
			}
			track(res.Changed)
			running++
			jobCtx, stop := context.WithCancel(execCtx)
			stops[j.ID()] = stop
			go func(j *Job) {
				results <- execResult{job: j, outcome: d.cfg.Executor.Execute(jobCtx, j)}
			}(res.Changed[0])
		}
		if failure != nil {
			cancelExec()
		}
		waitForGroups := len(blocked) > 0 && !cancelled && failure == nil
		waitForDelay := len(delayed) > 0 && !cancelled && failure == nil
		if running == 0 && !waitForGroups && !waitForDelay {
			break
		}
		var retry, due <-chan time.Time
		if waitForGroups {
			retry = time.After(d.cfg.GroupRetry)
		}
		if waitForDelay {
			next := slices.MinFunc(sortedJobs(delayed), func(a, b *Job) int { return a.ReadyAt.Compare(b.ReadyAt) })
			due = time.After(next.ReadyAt.Sub(d.cfg.Now()))
		}
		select {
		case r := <-results:
			running--
			stops[r.job.ID()]()
			delete(stops, r.job.ID())
			if failure == nil {
				failure = d.complete(storeCtx, runID, r, queue, track)
			}
			if failure == nil && !cancelled {
				failure = unblock()
			}
		case <-retry:
			failure = unblock()
		case <-due:
			failure = release()
		case <-done:
			cancelRun()
		}
	}
	if failure != nil {
		return nil, failure
	}
	return d.cfg.Store.RunGet(storeCtx, runID)
}

func (d *Driver) complete(ctx context.Context, runID string, r execResult, queue func(*Job) error, track func([]*Job)) error {
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
		Outcome: o.State, ExitCode: o.ExitCode, Reason: o.Reason, FailureClass: o.FailureClass, Result: o.Result,
	})
	if err != nil {
		return err
	}
	track(res.Changed)
	for _, j := range res.Changed {
		if j.State == cikit.JobReady {
			if err := queue(j); err != nil {
				return err
			}
		}
	}
	return nil
}

func (d *Driver) notify(j *Job) {
	if d.cfg.OnChange != nil {
		d.cfg.OnChange(j)
	}
}

// sortedJobs lists the jobs of m in the order of their IDs.
func sortedJobs(m map[string]*Job) []*Job {
	out := make([]*Job, 0, len(m))
	for _, id := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[id])
	}
	return out
}
