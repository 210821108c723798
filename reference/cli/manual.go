package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/compiler"
	"github.com/cikit/cikit/dag"
)

// jobNames is the value of a repeatable flag naming jobs.
type jobNames []string

func (n *jobNames) String() string { return strings.Join(*n, ",") }

func (n *jobNames) Set(v string) error {
	if v == "" {
		return fmt.Errorf("a job name is required")
	}
	*n = append(*n, v)
	return nil
}

// checkManual refuses -job names that are not manual jobs of the plan,
// with the manual jobs it has: a name that is not one would be ignored.
func checkManual(plan *compiler.Plan, play []string) error {
	var manual []string
	for _, j := range plan.Jobs {
		if j.When == cikit.WhenManual {
			manual = append(manual, j.ID)
		}
	}
	for _, name := range play {
		if slices.Contains(manual, name) {
			continue
		}
		have := "it has none"
		if len(manual) > 0 {
			have = "its manual jobs are " + strings.Join(manual, ", ")
		}
		i := slices.IndexFunc(plan.Jobs, func(j *cikit.JobSpec) bool { return j.ID == name })
		if i >= 0 {
			return fmt.Errorf("-job %s: %s is not a manual job, it runs anyway (%s)", name, name, have)
		}
		return fmt.Errorf("-job %s: the pipeline has no job %s (%s)", name, name, have)
	}
	return nil
}

// withoutDelays is jobs with the start_in of delayed jobs cleared.
func withoutDelays(jobs []*cikit.JobSpec) []*cikit.JobSpec {
	out := make([]*cikit.JobSpec, len(jobs))
	for i, j := range jobs {
		out[i] = j
		if j.When == cikit.WhenDelayed {
			out[i] = j.Clone()
			out[i].StartIn = 0
		}
	}
	return out
}

// blockedBy says which manual jobs hold a blocked run.
func blockedBy(jobs []*dag.Job) string {
	var names []string
	for _, j := range jobs {
		if j.State == cikit.JobManual && !j.Spec.AllowFailure {
			names = append(names, j.ID())
		}
	}
	flags := make([]string, len(names))
	for i, n := range names {
		flags[i] = "-job " + n
	}
	return fmt.Sprintf("the manual job(s) %s must run and were not started (start with %s)", strings.Join(names, ", "), strings.Join(flags, " "))
}
