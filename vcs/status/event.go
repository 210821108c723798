package status

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/vcs"
)

// JobContext is the status context of a job of the runs of a pipeline
// file, such as "cikit/.github/workflows/ci.yml: build".
func JobContext(file, jobID string) string { return PipelineContext(file) + ": " + jobID }

// Check is a status to post on a commit of a repository.
type Check struct {
	Repo, SHA string
	Status    vcs.Status
}

// FromEvent returns the status an event of a run (a dag outbox event, or
// the same fields of a pipeline event from Kafka) means for the commit
// the run builds: pipeline events set the pipeline's context, job events
// the job's. It returns false for a run that names no repository file
// ("org/repo:file") or commit, and for events that change no status.
// target, when not nil, gives the status's link to the run (jobID "") or
// job on the platform.
func FromEvent(ev *dag.OutboxEvent, target func(runID, jobID string) string) (Check, bool) {
	repo, file, ok := strings.Cut(ev.Pipeline, ":")
	if !ok || repo == "" || file == "" || ev.SHA == "" {
		return Check{}, false
	}
	c := Check{Repo: repo, SHA: ev.SHA}
	st := &c.Status
	switch ev.Type {
	case dag.EventPipelineCreated:
		st.Context, st.State, st.Description = PipelineContext(file), vcs.StatePending, "the pipeline is starting"
	case dag.EventPipelineCompleted:
		st.Context = PipelineContext(file)
		switch cikit.RunState(ev.State) {
		case cikit.RunSucceeded:
			st.State, st.Description = vcs.StateSuccess, "the pipeline succeeded"
		case cikit.RunFailed:
			st.State, st.Description = vcs.StateFailure, "the pipeline failed"
		case cikit.RunCancelled:
			st.State, st.Description = vcs.StateCancelled, "the pipeline was cancelled"
		default:
			return Check{}, false
		}
	default:
		if ev.JobID == "" {
			return Check{}, false
		}
		st.Context = JobContext(file, ev.JobID)
		switch cikit.JobState(ev.State) {
		case cikit.JobPending, cikit.JobReady:
			st.State, st.Description = vcs.StatePending, "waiting"
		case cikit.JobManual:
			// The dag says whom a gated job waits for ("waiting for
			// approval by alice: deployment to production").
			st.State, st.Description = vcs.StatePending, describe("", cmp.Or(ev.Reason, "manual: waiting for a person to start it"))
		case cikit.JobQueued:
			st.State, st.Description = vcs.StatePending, "queued for a runner"
		case cikit.JobRunning:
			st.State, st.Description = vcs.StateRunning, "running"
			if ev.Attempt > 1 {
				st.Description = fmt.Sprintf("running (attempt %d)", ev.Attempt)
			}
		case cikit.JobCancelRequested:
			st.State, st.Description = vcs.StateRunning, "cancelling"
		case cikit.JobSucceeded:
			st.State, st.Description = vcs.StateSuccess, "succeeded"
		case cikit.JobFailed:
			what := "failed"
			if policyReason(ev.Reason) {
				what = "" // the reason says it all: "rejected by alice: …"
			}
			st.State, st.Description = vcs.StateFailure, describe(what, ev.Reason)
		case cikit.JobSkipped:
			st.State, st.Description = vcs.StateSkipped, describe("skipped", ev.Reason)
		case cikit.JobCancelled:
			st.State, st.Description = vcs.StateCancelled, describe("cancelled", ev.Reason)
		default:
			return Check{}, false
		}
	}
	if target != nil {
		st.TargetURL = target(ev.RunID, ev.JobID)
	}
	return c, true
}

// policyReasons start the reasons of the failures of class
// cikit.FailurePolicy, which the outbox event does not carry: a job the
// policy denied, a reviewer rejected or nobody approved in time.
var policyReasons = []string{"denied by policy", "rejected by ", "approval expired"}

func policyReason(reason string) bool {
	return slices.ContainsFunc(policyReasons, func(p string) bool { return strings.HasPrefix(reason, p) })
}

// describe is what happened and why (or only why, for what ""), cut to
// what a forge keeps.
func describe(what, why string) string {
	if why == "" {
		return what
	}
	d := why
	if what != "" {
		d = what + ": " + why
	}
	if len(d) > 140 {
		cut := 137
		for cut > 0 && !utf8.RuneStart(d[cut]) {
			cut--
		}
		d = d[:cut] + "..."
	}
	return d
}

// ReportEvent reports the status ev means (FromEvent), if any, and says
// whether it did. Events come out of order (several relays, redeliveries):
// one older than the latest reported for its check, by creation time and
// then ID, is ignored (ReportOrdered).
func (r *Reporter) ReportEvent(ev *dag.OutboxEvent, target func(runID, jobID string) string) bool {
	c, ok := FromEvent(ev, target)
	if !ok {
		return false
	}
	return r.ReportOrdered(c.Repo, c.SHA, c.Status, EventOrder(ev)) == nil
}

// EventOrder is the order of ev's status among its check's for
// ReportOrdered: its creation time, then its ID. A caller that adjusts
// FromEvent's status before reporting it orders it so.
func EventOrder(ev *dag.OutboxEvent) string {
	return ev.CreatedAt.UTC().Format("2006-01-02T15:04:05.000000000") + " " + ev.ID
}
