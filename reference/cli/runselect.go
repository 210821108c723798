package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/cikit/cikit"
)

// selection is the part of a plan that one `cikit run` runs.
type selection struct {
	// jobs are the jobs that run, in the plan's order; a job whose needs
	// were left out is a clone without them.
	jobs []*cikit.JobSpec
	// play are the manual jobs named with -job, which start once their
	// needs are satisfied.
	play []string
	// notes say what the selection left out that a job would otherwise
	// have seen (-only dropping needs).
	notes []string
}

// selectJobs picks the jobs of a run: the matrix variants -matrix leaves,
// then, when names are given, the jobs they name (a matrix job's name
// names all its variants) and, unless only, every job they need, directly
// or not. A name or a matrix value that selects nothing is an error: it
// would otherwise be ignored.
func selectJobs(jobs []*cikit.JobSpec, names []string, only bool, picks *matrixPicks) (*selection, error) {
	kept, err := pickVariants(jobs, picks)
	if err != nil {
		return nil, err
	}
	byID := map[string]*cikit.JobSpec{}
	for _, j := range kept {
		byID[j.ID] = j
	}
	chosen := map[string]bool{}
	named := map[string]bool{}
	if len(names) == 0 {
		for _, j := range kept {
			chosen[j.ID] = true
		}
	}
	for _, name := range names {
		ids := jobsNamed(kept, name)
		if len(ids) == 0 {
			if len(jobsNamed(jobs, name)) > 0 {
				return nil, fmt.Errorf("-job %s: -matrix leaves no variant of it", name)
			}
			return nil, fmt.Errorf("-job %s: the pipeline has no job %s for this event (its jobs: %s)", name, name, jobList(jobs))
		}
		for _, id := range ids {
			named[id] = true
			chosen[id] = true
		}
	}
	if !only {
		for stack := slices.Collect(maps.Keys(chosen)); len(stack) > 0; {
			id := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, n := range byID[id].Needs {
				if _, ok := byID[n]; ok && !chosen[n] {
					chosen[n] = true
					stack = append(stack, n)
				}
			}
		}
	}
	sel := &selection{}
	for _, j := range kept {
		if !chosen[j.ID] {
			continue
		}
		if named[j.ID] && j.When == cikit.WhenManual {
			sel.play = append(sel.play, j.ID)
		}
		var dropped []string
		needs := make([]string, 0, len(j.Needs))
		for _, n := range j.Needs {
			switch {
			case chosen[n]:
				needs = append(needs, n)
			case byID[n] != nil:
				dropped = append(dropped, n)
			}
		}
		if len(needs) != len(j.Needs) {
			j = j.Clone()
			j.Needs = needs
		}
		if len(dropped) > 0 {
			sel.notes = append(sel.notes, fmt.Sprintf("-only: %s runs without the jobs it needs (%s): their results and outputs are empty", j.ID, strings.Join(dropped, ", ")))
		}
		sel.jobs = append(sel.jobs, j)
	}
	return sel, nil
}

// jobsNamed are the IDs of the jobs a -job name names: the job of that
// ID, or every variant of the matrix job of that name.
func jobsNamed(jobs []*cikit.JobSpec, name string) []string {
	var ids []string
	for _, j := range jobs {
		if j.ID == name || j.MatrixOf == name {
			ids = append(ids, j.ID)
		}
	}
	return ids
}

// jobList names the jobs of a plan as -job takes them, a matrix job once.
func jobList(jobs []*cikit.JobSpec) string {
	var names []string
	for _, j := range jobs {
		n := j.ID
		if j.MatrixOf != "" {
			n = j.MatrixOf
		}
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// pickVariants drops the matrix variants -matrix does not pick: a job
// whose matrix has a picked key runs only in the variants whose value of
// it is one of the picked values. Jobs without the key are kept. A key no
// job's matrix has, and a value no variant has, are errors. The needs of
// the jobs kept on the dropped variants are dropped with them.
func pickVariants(jobs []*cikit.JobSpec, picks *matrixPicks) ([]*cikit.JobSpec, error) {
	if picks == nil || len(picks.keys) == 0 {
		return jobs, nil
	}
	for _, k := range picks.keys {
		var seen []string
		for _, j := range jobs {
			if v, ok := j.Matrix[k]; ok && !slices.Contains(seen, v) {
				seen = append(seen, v)
			}
		}
		if len(seen) == 0 {
			return nil, fmt.Errorf("-matrix %s:%s: no job has a matrix key %s (matrix keys: %s)", k, picks.values[k][0], k, matrixKeys(jobs))
		}
		for _, v := range picks.values[k] {
			if !slices.Contains(seen, v) {
				return nil, fmt.Errorf("-matrix %s:%s: no variant has %s %s (its values: %s)", k, v, k, v, strings.Join(seen, ", "))
			}
		}
	}
	var kept []*cikit.JobSpec
	dropped := map[string]bool{}
	for _, j := range jobs {
		keep := true
		for _, k := range picks.keys {
			if v, ok := j.Matrix[k]; ok && !slices.Contains(picks.values[k], v) {
				keep = false
			}
		}
		if keep {
			kept = append(kept, j)
		} else {
			dropped[j.ID] = true
		}
	}
	for i, j := range kept {
		if slices.ContainsFunc(j.Needs, func(n string) bool { return dropped[n] }) {
			c := j.Clone()
			c.Needs = slices.DeleteFunc(c.Needs, func(n string) bool { return dropped[n] })
			kept[i] = c
		}
	}
	return kept, nil
}

func matrixKeys(jobs []*cikit.JobSpec) string {
	var keys []string
	for _, j := range jobs {
		for k := range j.Matrix {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	if len(keys) == 0 {
		return "none"
	}
	slices.Sort(keys)
	return strings.Join(keys, ", ")
}

// printList writes the -list table: each job that would run, its stage,
// its needs and how it starts when that is not on its needs' success.
func printList(w io.Writer, sel *selection) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tSTAGE\tNEEDS\tNOTE")
	for _, j := range sel.jobs {
		stage, needs := "-", "-"
		if j.Stage != "" {
			stage = j.Stage
		}
		if len(j.Needs) > 0 {
			needs = strings.Join(j.Needs, ", ")
		}
		var note []string
		switch j.When {
		case cikit.WhenManual:
			if slices.Contains(sel.play, j.ID) {
				note = append(note, "manual (started by -job)")
			} else {
				note = append(note, "manual")
			}
		case cikit.WhenDelayed:
			note = append(note, "delayed "+j.StartIn.String())
		case cikit.WhenAlways:
			note = append(note, "always")
		case cikit.WhenOnFailure:
			note = append(note, "on failure")
		case cikit.WhenNever:
			note = append(note, "never: its condition is false for this event")
		}
		if j.AllowFailure {
			note = append(note, "allowed to fail")
		}
		if j.If != nil {
			note = append(note, "if: "+j.If.Expr)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", j.ID, stage, needs, strings.Join(note, "; "))
	}
	return tw.Flush()
}
