package cikit

import (
	"maps"
	"slices"
	"time"
)

// JobSpec is one compiled job: everything a runner needs to execute it,
// resolved at compile time so that it can be stored with the job and
// replayed later exactly as it was.
type JobSpec struct {
	// ID identifies the job within its run. It is the key of the job in
	// the pipeline file ("build"), unique within the plan.
	ID string `json:"id"`
	// Name is the display name; it defaults to ID.
	Name string `json:"name"`
	// Stage is the stage the job belongs to, when the pipeline has stages.
	Stage string `json:"stage,omitempty"`
	// Needs lists the IDs of the jobs that must be satisfied before this
	// one may run: the explicit needs plus those implied by stage order.
	Needs []string `json:"needs,omitempty"`
	// Image is the container image the job asks for. Executors that do
	// not run containers record it and run on the host.
	Image string `json:"image,omitempty"`
	// Env is the job's environment: the pipeline's env overlaid by the
	// job's own. Step env overlays it at execution time.
	Env map[string]string `json:"env,omitempty"`
	// Steps run in order in one workspace; the first failing step fails
	// the job.
	Steps []Step `json:"steps"`
	// AllowFailure lets the jobs that need this one run even when it
	// fails, and keeps its failure out of the run's status.
	AllowFailure bool `json:"allow_failure,omitempty"`
	// Timeout bounds the job's execution; zero means the executor's
	// default.
	Timeout time.Duration `json:"timeout,omitempty"`
}

// Step is one command of a job.
type Step struct {
	// Name is the display name; it defaults to the command's first line.
	Name string `json:"name"`
	// Run is the shell script of the step, run with `sh -e -c`.
	Run string `json:"run"`
	// Env overlays the job's environment for this step.
	Env map[string]string `json:"env,omitempty"`
}

// DisplayName returns the job's name, or its ID when it has none.
func (j *JobSpec) DisplayName() string {
	if j.Name != "" {
		return j.Name
	}
	return j.ID
}

// Clone returns a deep copy of j.
func (j *JobSpec) Clone() *JobSpec {
	c := *j
	c.Needs = slices.Clone(j.Needs)
	c.Env = maps.Clone(j.Env)
	c.Steps = slices.Clone(j.Steps)
	for i := range c.Steps {
		c.Steps[i].Env = maps.Clone(j.Steps[i].Env)
	}
	return &c
}
