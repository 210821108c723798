package dag

import (
	"fmt"
	"time"

	"github.com/cikit/cikit"
)

// RunReport is a run's status as an API returns it: its state and times,
// each job's, and the critical path of the durations the jobs actually
// took. Durations are nanoseconds in JSON (fields ending in _ns).
type RunReport struct {
	RunID     string         `json:"run_id"`
	State     cikit.RunState `json:"state"`
	CreatedAt time.Time      `json:"created_at"`
	// FinishedAt is zero, and absent from JSON, until the run is
	// terminal.
	FinishedAt time.Time `json:"finished_at,omitzero"`
	// Duration is the run's wall-clock time: from its creation to its
	// end, or to now while it is not finished.
	Duration time.Duration `json:"duration_ns"`
	// Jobs are the run's jobs, in the order given to Report.
	Jobs []JobReport `json:"jobs"`
	// CriticalPath lists the IDs of the chain of needs whose jobs ran
	// longest in total, first job first; empty until a job has run.
	CriticalPath []string `json:"critical_path"`
	// CriticalPathDuration is the sum of the run durations along the
	// critical path: the least time the run could have taken with
	// unlimited runners and no queueing.
	CriticalPathDuration time.Duration `json:"critical_path_ns"`
	// Counts is how many jobs are in each state; states no job is in are
	// absent.
	Counts map[cikit.JobState]int `json:"counts"`
}

// JobReport is one job of a RunReport, as its current attempt stands.
type JobReport struct {
	ID      string         `json:"id"`
	State   cikit.JobState `json:"state"`
	Attempt int            `json:"attempt"`
	// QueueDuration is how long the job waited for a runner: from when it
	// became READY to its start, or to its end if it never started, or
	// to now while it waits. Zero if it never became READY.
	QueueDuration time.Duration `json:"queue_duration_ns"`
	// RunDuration is how long the job ran: from its start to its end, or
	// to now while it runs. Zero if it never started.
	RunDuration time.Duration `json:"run_duration_ns"`
	// Reason explains a state that is not success (see Job.Reason).
	Reason string `json:"reason,omitempty"`
}

// ReportJobs is Report of run and its jobs (as JobList returns them), on
// the graph their specs make: what an API answers about a stored run. It
// fails when the specs do not form a graph.
func ReportJobs(run *Run, jobs []*Job, now time.Time) (*RunReport, error) {
	specs := make([]*cikit.JobSpec, len(jobs))
	for i, j := range jobs {
		specs[i] = j.Spec
	}
	g, err := FromSpecs(specs)
	if err != nil {
		return nil, fmt.Errorf("dag: run %q: its jobs do not form a graph: %w", run.ID, err)
	}
	return Report(g, run, jobs, now), nil
}

// Report summarises run, whose graph is g and whose jobs are jobs (as
// JobList returns them), at time now. It is a pure function of its
// arguments. The critical path weighs each job of g by its RunDuration;
// a job that has not run weighs zero, as does one g has but jobs lacks,
// and a job of jobs that g lacks is reported but on no path.
func Report(g *Graph, run *Run, jobs []*Job, now time.Time) *RunReport {
	r := &RunReport{
		RunID:        run.ID,
		State:        run.State,
		CreatedAt:    run.CreatedAt,
		FinishedAt:   run.FinishedAt,
		Duration:     elapsed(run.CreatedAt, firstSet(run.FinishedAt, now)),
		Jobs:         make([]JobReport, 0, len(jobs)),
		CriticalPath: []string{},
		Counts:       make(map[cikit.JobState]int),
	}
	ran := make([]time.Duration, g.Len())
	for _, j := range jobs {
		jr := JobReport{ID: j.ID(), State: j.State, Attempt: j.Attempt, Reason: j.Reason}
		if !j.ReadyAt.IsZero() && j.State != cikit.JobManual { // a MANUAL job waits for a person, not a runner
			jr.QueueDuration = elapsed(j.ReadyAt, firstSet(j.StartedAt, j.FinishedAt, now))
		}
		if !j.StartedAt.IsZero() {
			jr.RunDuration = elapsed(j.StartedAt, firstSet(j.FinishedAt, now))
		}
		if i, ok := g.Index(j.ID()); ok {
			ran[i] = jr.RunDuration
		}
		r.Jobs = append(r.Jobs, jr)
		r.Counts[j.State]++
	}
	path, total := g.CriticalPath(func(i int) time.Duration { return ran[i] })
	if total > 0 {
		for _, i := range path {
			r.CriticalPath = append(r.CriticalPath, g.Node(i).ID)
		}
		r.CriticalPathDuration = total
	}
	return r
}

// firstSet returns the first of ts that is not the zero time, or the zero
// time.
func firstSet(ts ...time.Time) time.Time {
	for _, t := range ts {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}

// elapsed is the time from from to to, or zero if to is earlier (a clock
// that went back, or a now before the recorded times).
func elapsed(from, to time.Time) time.Duration {
	return max(to.Sub(from), 0)
}
