package cli

import (
	"fmt"
	"strings"

	"github.com/cikit/cikit"
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
