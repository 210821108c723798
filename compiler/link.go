package compiler

import (
	"errors"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

// draft is what a front end hands to link: the jobs of a file, with the
// positions link needs to report on their needs.
type draft struct {
	name        string    // the pipeline's display name
	triggers    []Trigger // what starts the pipeline
	concurrency *cikit.Concurrency
	stages      []string // declared stages, in order
	env         map[string]string
	jobs        []*jobDecl // in file order, IDs unique
	graph       *dag.Graph // set by link when the needs are sound
}

// jobDecl is one job of a draft. Its spec is complete except for Needs,
// which link computes.
type jobDecl struct {
	spec *cikit.JobSpec
	key  *yaml.Node // the job's key in the file
	// hasNeeds records that the job says what it needs, even nothing:
	// then stage order implies nothing for it.
	hasNeeds bool
	needs    []needRef // explicit needs, as written, without duplicates
	// stage is the index of the job's stage in draft.stages, or -1 when
	// the pipeline has no stages or the job's stage is not one of them.
	stage int
	// group is the job's key as written when the job is one variant of a
	// matrix (or parallel) job; "" otherwise. A need of the group is a
	// need of every variant.
	group string
}

// needRef is one explicit need and where it is written.
type needRef struct {
	id   string
	node *yaml.Node
}

// link computes every job's effective needs, reports needs that name no
// job and dependency cycles, and builds the graph.
//
// A job without a needs key waits for every job of the nearest earlier
// stage that has jobs: the stage barrier of stage-based CI systems. Being
// transitive through the graph, one barrier per stage is enough. A job
// with a needs key gets exactly what it names, which is how a job opts out
// of the barrier ("needs: []" starts at once).
func (c *checker) link(d *draft) {
	index := make(map[string]int, len(d.jobs))
	ids := make([]string, len(d.jobs))
	groups := map[string][]int{} // matrix job key -> its variants
	var names []string           // what a need may name, for hints
	for i, j := range d.jobs {
		index[j.spec.ID] = i
		ids[i] = j.spec.ID
		if j.group != "" {
			if len(groups[j.group]) == 0 {
				names = append(names, j.group)
			}
			groups[j.group] = append(groups[j.group], i)
		} else {
			names = append(names, j.spec.ID)
		}
	}
	byStage := make([][]int, len(d.stages))
	for i, j := range d.jobs {
		if j.stage >= 0 && j.stage < len(d.stages) {
			byStage[j.stage] = append(byStage[j.stage], i)
		}
	}

	unknown := false
	for _, j := range d.jobs {
		var needs []int
		if j.hasNeeds {
			for _, r := range j.needs {
				i, ok := index[r.id]
				variants := groups[r.id]
				switch {
				case r.id == j.spec.ID || j.group != "" && r.id == j.group:
					c.at(r.node, RuleCycle, "job %q needs itself", r.id)
				case ok:
					needs = append(needs, i)
				case len(variants) > 0:
					needs = append(needs, variants...)
				default:
					unknown = true
					c.unknownNeed(j.spec.ID, r, names)
				}
			}
		} else {
			for s := j.stage - 1; s >= 0; s-- {
				if len(byStage[s]) > 0 {
					needs = byStage[s]
					break
				}
			}
		}
		if len(needs) == 0 {
			continue
		}
		c.chargePlan(len(needs), j.key)
		needs = slices.Clone(needs)
		slices.Sort(needs)
		needs = slices.Compact(needs)
		j.spec.Needs = make([]string, len(needs))
		for k, i := range needs {
			j.spec.Needs[k] = ids[i]
		}
	}
	if unknown {
		// The graph cannot be built, and a cycle found without the
		// unknown needs could be an artefact of the missing edges.
		return
	}

	specs := make([]*cikit.JobSpec, len(d.jobs))
	for i, j := range d.jobs {
		specs[i] = j.spec
	}
	g, err := dag.FromSpecs(specs)
	var ce *dag.CycleError
	switch {
	case errors.As(err, &ce):
		c.cycle(d, index, ce.Cycle)
	case err == nil:
		d.graph = g
	}
	// Any other error comes from a job that is already reported (an empty
	// ID); without diagnostics, CompileBytes notices the missing graph.
}

func (c *checker) unknownNeed(job string, r needRef, ids []string) {
	hint := c.suggest(r.id, ids)
	if hint == job {
		hint = ""
	}
	if hint != "" {
		c.at(r.node, RuleNeeds, "job %q needs unknown job %q%s", job, r.id, didYouMean(hint))
		return
	}
	c.at(r.node, RuleNeeds, "job %q needs unknown job %q (jobs: %s)", job, r.id, list(ids))
}

// cycle reports a dependency cycle, given in need order with its first
// member repeated at the end, at the first explicit need along it. Stage
// order alone cannot close a cycle (it only points back), so some edge of
// the cycle is always written in the file.
func (c *checker) cycle(d *draft, index map[string]int, cycle []string) {
	pos := d.jobs[index[cycle[0]]].key
outer:
	for k := 0; k+1 < len(cycle); k++ {
		j := d.jobs[index[cycle[k]]]
		if !j.hasNeeds {
			continue
		}
		next := d.jobs[index[cycle[k+1]]]
		for _, r := range j.needs {
			if r.id == cycle[k+1] || next.group != "" && r.id == next.group {
				pos = r.node
				break outer
			}
		}
	}
	c.at(pos, RuleCycle, "%s", (&dag.CycleError{Cycle: cycle}).Error())
}
