package api

import (
	"slices"
	"strings"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

// RunSummary is a run as the list of runs shows it. Times are RFC 3339 in
// UTC, durations integer nanoseconds.
type RunSummary struct {
	ID string `json:"id"`
	// Number is the run's number among its pipeline's runs: 1, 2, 3 …
	// in creation order (dag.Run.Number).
	Number   int64          `json:"number"`
	Pipeline string         `json:"pipeline"`
	Branch   string         `json:"branch"`
	SHA      string         `json:"sha"`
	State    cikit.RunState `json:"state"`
	// CreatedAt is when the run was created.
	CreatedAt time.Time `json:"created_at"`
	// FinishedAt is when the run ended; absent until it has.
	FinishedAt time.Time `json:"finished_at,omitzero"`
	// Duration is the run's wall-clock time: from its creation to its
	// end, or to now while it is not finished.
	Duration time.Duration `json:"duration_ns"`
}

// RunList is the answer of GET /api/v1/runs.
type RunList struct {
	// Runs are newest first.
	Runs []RunSummary `json:"runs"`
	// Next is the cursor of the next page, for ?before=; absent on the
	// last page.
	Next string `json:"next,omitempty"`
}

// RunDetail is a run with its jobs: the answer of GET /api/v1/runs/{run}
// and of cancelling and retrying it.
type RunDetail struct {
	RunSummary
	// CriticalPath lists the IDs of the chain of needs whose jobs ran
	// longest in total, first job first; empty until a job has run.
	CriticalPath []string `json:"critical_path"`
	// CriticalPathDuration is the sum of the run durations along the
	// critical path.
	CriticalPathDuration time.Duration `json:"critical_path_ns"`
	// Counts is how many jobs are in each state; states no job is in are
	// absent.
	Counts map[cikit.JobState]int `json:"counts"`
	// Jobs are the run's jobs in plan order.
	Jobs []JobDetail `json:"jobs"`
	// Policy is what the platform's policy decided for each job that it
	// decided for (its admission), in plan order; absent when no policy
	// ran for the run.
	Policy []JobPolicy `json:"policy,omitempty"`
	// Held says, while jobs of the run wait for approval, which and for
	// whom and why: "deploy waits for approval by alice, bob: deployment
	// to production"; absent otherwise.
	Held string `json:"held,omitempty"`
	// Context is what the run knows of the event that started it
	// (provider, repository, event, ref, commit, pull request, actor,
	// inputs), without the event's payload; absent for a run created
	// without one.
	Context *cikit.RunContext `json:"context,omitempty"`
}

// JobDetail is one job of a run as its current attempt stands.
type JobDetail struct {
	ID     string   `json:"id"`
	Name   string   `json:"name"`
	Stage  string   `json:"stage"`
	Needs  []string `json:"needs"`
	RunsOn []string `json:"runs_on"`
	// AllowFailure is whether the job's failure lets the jobs that need
	// it run: its spec's, and once the attempt failed, whether that
	// failure was allowed (dag.Job.FailureAllowed).
	AllowFailure bool `json:"allow_failure"`
	// State is the current attempt's.
	State   cikit.JobState `json:"state"`
	Attempt int            `json:"attempt"`
	// QueueDuration is how long the attempt waited for a runner: from
	// READY to its start, or its end if it never started, or now.
	QueueDuration time.Duration `json:"queue_duration_ns"`
	// RunDuration is how long the attempt ran: from its start to its
	// end, or now.
	RunDuration time.Duration `json:"run_duration_ns"`
	// Reason explains a state that is not success.
	Reason string `json:"reason,omitempty"`
	// Runner is who runs or ran the attempt.
	Runner string `json:"runner,omitempty"`
	// ExitCode is the exit code of the attempt's last step, or -1 if
	// none ran to an exit; present once the job has finished after it
	// started, or failed.
	ExitCode   *int      `json:"exit_code,omitempty"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
	// WaitingOn lists, for a PENDING job, the needs it still waits for
	// (a manual job among them until a person starts it); empty
	// otherwise.
	WaitingOn []string `json:"waiting_on"`
	// WaitingFor says in words what a MANUAL or DELAYED job waits for:
	// "a person to start it" (POST .../start), "approval by alice, bob:
	// deployment to production" for a gated job (POST .../approve), or
	// "delayed until" its DelayedUntil; absent otherwise.
	WaitingFor string `json:"waiting_for,omitempty"`
	// Gate is the job's approval gate; absent for a job without one.
	Gate *GateView `json:"gate,omitempty"`
	// Admission is what the platform's policy decided for the job when
	// its run was created; absent where no policy ran.
	Admission *cikit.Admission `json:"admission,omitempty"`
	// Approvals are the decisions people took on the job's gate, of
	// every attempt, oldest first; absent when there are none.
	Approvals []ApprovalView `json:"approvals,omitempty"`
	// DelayedUntil is when a DELAYED job becomes READY on its own;
	// absent for other states.
	DelayedUntil time.Time `json:"delayed_until,omitzero"`
	// Cache lists the caches of the job's spec.
	Cache []JobCache `json:"cache"`
	// CacheResults say how the attempt restored and saved its caches
	// (key, hit, matched_key, restored_in_ms, size …); absent until it
	// has ended, or when it has none.
	CacheResults []cikit.CacheReport `json:"cache_results,omitempty"`
	// Artifacts are the artifacts the job's attempts uploaded, with
	// their download routes; absent when none.
	Artifacts []Artifact `json:"artifacts,omitempty"`
	// Critical says that the job is on the run's critical path.
	Critical bool `json:"critical"`
	// Commit is the commit the attempt checked out, and
	// CheckoutDuration how long that took; absent when it checked out
	// nothing or has not ended.
	Commit           string        `json:"commit,omitempty"`
	CheckoutDuration time.Duration `json:"checkout_duration_ns,omitempty"`
	// ImageRef is the image the attempt ran in as the job asked for it,
	// such as "alpine:3.19", and ImageDigest the digest ("sha256:…")
	// it ran on; absent for a job on its runner's host or one that has
	// not ended.
	ImageRef    string `json:"image,omitempty"`
	ImageDigest string `json:"image_digest,omitempty"`
	// Annotations are the messages the attempt's steps attached
	// (::error, ::warning, ::notice), in the order they were written;
	// absent when there are none.
	Annotations []cikit.Annotation `json:"annotations,omitempty"`
	// Outputs are the attempt's job outputs, which the jobs needing it
	// read; absent until it has ended with some.
	Outputs map[string]string `json:"outputs,omitempty"`
	// EnvNames are the names, never the values, of the variables of the
	// attempt's environment; absent until it has ended with them.
	EnvNames []string `json:"env_names,omitempty"`
}

// GateView is a job's approval gate (cikit.Gate).
type GateView struct {
	// Reasons say why the job is held.
	Reasons []string `json:"reasons"`
	// Reviewers are who may approve: logins, or "role:approve" for
	// anyone with the approve role; empty means the latter.
	Reviewers []string `json:"reviewers"`
	// WaitTimer delays the job after its approval.
	WaitTimer time.Duration `json:"wait_timer_ns"`
	// Expires is how long the gate waits for a decision before the job
	// fails as unapproved; zero is the platform's default.
	Expires time.Duration `json:"expires_ns"`
	// ExpiresAt is when a job waiting for approval fails unapproved: its
	// Expires after it began waiting; absent for a job not waiting, a
	// gate of the platform's default, or a store that does not say
	// since when the job waits.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// ApprovalView is one decision on a job's gate (approvals.Approval).
type ApprovalView struct {
	Attempt int `json:"attempt"`
	// Login is who decided.
	Login string `json:"login"`
	// Decision is "approve" or "reject".
	Decision string `json:"decision"`
	Comment  string `json:"comment,omitempty"`
	// At is when they decided.
	At time.Time `json:"at"`
}

// JobPolicy is what the platform's policy decided for one job.
type JobPolicy struct {
	Job      string         `json:"job"`
	Decision cikit.Decision `json:"decision"`
	Reason   string         `json:"reason,omitempty"`
}

// JobCache is one cache of a job's spec.
type JobCache struct {
	Key   string   `json:"key"`
	Paths []string `json:"paths"`
}

// JobHistory is the answer of GET /api/v1/runs/{run}/jobs/{job}: the job
// and its ended earlier attempts.
type JobHistory struct {
	JobDetail
	// Attempts are the attempts of the job that ended before the current
	// one, oldest first (Store.JobAttempts); the current attempt is the
	// JobDetail even once it has ended.
	Attempts []JobAttempt `json:"attempts"`
}

// JobAttempt is one ended attempt of a job.
type JobAttempt struct {
	Attempt int            `json:"attempt"`
	State   cikit.JobState `json:"state"`
	Runner  string         `json:"runner"`
	Reason  string         `json:"reason"`
	// StartedAt is absent for an attempt that ended before it started.
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at"`
	ExitCode   int       `json:"exit_code"`
}

// WaitReason is the answer of GET /api/v1/runs/{run}/jobs/{job}/why: why
// the job is not running yet (fleet.WaitReason).
type WaitReason struct {
	RunID   string         `json:"run_id"`
	JobID   string         `json:"job_id"`
	State   cikit.JobState `json:"state"`
	Code    string         `json:"code"`
	Message string         `json:"message"`
	// Pool is the pool the job counts towards, "" if none.
	Pool string `json:"pool"`
	// ETA estimates how long until a runner is ready for the job; null
	// when unknown.
	ETA *time.Duration `json:"eta_ns"`
}

// summary is run's RunSummary at now.
func summary(run *dag.Run, now time.Time) RunSummary {
	end := run.FinishedAt
	if end.IsZero() {
		end = now
	}
	return RunSummary{
		ID: run.ID, Number: run.Number, Pipeline: run.Pipeline, Branch: run.Branch, SHA: run.SHA, State: run.State,
		CreatedAt: run.CreatedAt.UTC(), FinishedAt: utc(run.FinishedAt), Duration: max(end.Sub(run.CreatedAt), 0),
	}
}

// utc is t in UTC, and the zero time for the zero time.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

// detail is the RunDetail of run, whose jobs are jobs (as JobList returns
// them), at now.
func detail(run *dag.Run, jobs []*dag.Job, now time.Time) (*RunDetail, error) {
	rep, err := dag.ReportJobs(run, jobs, now)
	if err != nil {
		return nil, err
	}
	d := &RunDetail{
		RunSummary:           summary(run, now),
		CriticalPath:         rep.CriticalPath,
		CriticalPathDuration: rep.CriticalPathDuration,
		Counts:               rep.Counts,
		Jobs:                 make([]JobDetail, len(jobs)),
	}
	if run.Context != nil {
		c := *run.Context
		c.Payload = nil
		d.Context = &c
	}
	d.Duration = rep.Duration
	byID := make(map[string]*dag.Job, len(jobs))
	for _, j := range jobs {
		byID[j.ID()] = j
	}
	var held []string
	for i, j := range jobs {
		d.Jobs[i] = jobDetail(j, &rep.Jobs[i], byID, slices.Contains(rep.CriticalPath, j.ID()))
		if ad := j.Spec.Admission; ad != nil {
			d.Policy = append(d.Policy, JobPolicy{Job: j.ID(), Decision: ad.Decision, Reason: ad.Reason})
		}
		if waitsForApproval(j) {
			held = append(held, j.ID()+" waits for "+d.Jobs[i].WaitingFor)
		}
	}
	d.Held = strings.Join(held, "; ")
	return d, nil
}

// jobDetail is j's JobDetail; r is its JobReport, run the jobs of its run
// by ID.
func jobDetail(j *dag.Job, r *dag.JobReport, run map[string]*dag.Job, critical bool) JobDetail {
	s := j.Spec
	d := JobDetail{
		ID: j.ID(), Name: s.Name, Stage: s.Stage, Needs: nonNil(s.Needs), RunsOn: nonNil(s.RunsOn), AllowFailure: j.FailureAllowed,
		State: j.State, Attempt: j.Attempt, QueueDuration: r.QueueDuration, RunDuration: r.RunDuration,
		Reason: j.Reason, Runner: j.Runner, StartedAt: utc(j.StartedAt), FinishedAt: utc(j.FinishedAt),
		WaitingOn: waitingOn(j, run), Cache: make([]JobCache, len(s.Caches)), Critical: critical,
	}
	if res := j.Result; res != nil {
		d.Commit, d.CheckoutDuration, d.Outputs = res.Commit, res.CheckoutDuration, res.Outputs
		d.Annotations, d.EnvNames, d.CacheResults = res.Annotations, res.EnvNames, res.Caches
		d.ImageRef, d.ImageDigest = res.ImageRef, res.ImageDigest
	}
	if d.Name == "" {
		d.Name = j.ID()
	}
	if g := s.Gate; g != nil {
		d.Gate = &GateView{Reasons: nonNil(g.Reasons), Reviewers: nonNil(g.Reviewers), WaitTimer: g.WaitTimer, Expires: g.Expires}
		if waitsForApproval(j) && g.Expires > 0 && !j.ReadyAt.IsZero() {
			// A job waiting MANUAL is ready, but for the gate, since ReadyAt.
			d.Gate.ExpiresAt = utc(j.ReadyAt.Add(g.Expires))
		}
	}
	if ad := s.Admission; ad != nil {
		c := *ad
		c.SecretsScopes = nonNil(c.SecretsScopes)
		d.Admission = &c
	}
	switch {
	case waitsForApproval(j):
		d.WaitingFor = strings.TrimPrefix(dag.GateWaiting(s.Gate), "waiting for ")
	case j.State == cikit.JobManual:
		d.WaitingFor = "a person to start it"
	case j.State == cikit.JobDelayed:
		d.DelayedUntil = utc(j.ReadyAt)
		d.WaitingFor = "delayed until " + d.DelayedUntil.Format(time.RFC3339)
	}
	if j.State.Terminal() && (!j.StartedAt.IsZero() || j.State == cikit.JobFailed) {
		code := j.ExitCode
		d.ExitCode = &code
	}
	for i, c := range s.Caches {
		d.Cache[i] = JobCache{Key: c.Key, Paths: nonNil(c.Paths)}
	}
	return d
}

// waitingOn lists the needs of a PENDING job j that do not satisfy it yet
// (dag.Satisfied). A job that runs whatever its needs' outcome (when
// always or on_failure) no longer waits for a need that has ended.
func waitingOn(j *dag.Job, run map[string]*dag.Job) []string {
	out := []string{}
	if j.State != cikit.JobPending {
		return out
	}
	anyOutcome := j.Spec.When == cikit.WhenAlways || j.Spec.When == cikit.WhenOnFailure
	for _, id := range j.Spec.Needs {
		n, ok := run[id]
		if !ok || dag.Satisfied(n.State, n.FailureAllowed) || anyOutcome && n.State.Terminal() {
			continue
		}
		out = append(out, id)
	}
	return out
}

// attempts are the JobAttempts of ended attempts as Store.JobAttempts
// returns them, without the current attempt.
func attempts(ended []*dag.Job, current int) []JobAttempt {
	out := []JobAttempt{}
	for _, a := range ended {
		if a.Attempt >= current {
			continue
		}
		out = append(out, JobAttempt{Attempt: a.Attempt, State: a.State, Runner: a.Runner, Reason: a.Reason,
			StartedAt: utc(a.StartedAt), FinishedAt: utc(a.FinishedAt), ExitCode: a.ExitCode})
	}
	return out
}

// nonNil is s, or an empty slice for nil, so that JSON has [] not null.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
