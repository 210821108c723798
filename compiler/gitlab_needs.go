package compiler

import (
	"maps"
	"slices"
	"strconv"
	"strings"
)

// finish expands parallel jobs into their copies and turns needs and
// dependencies into what link checks: the jobs of the pipeline, in file
// order, each copy of a parallel job after the other.
func (g *glFront) finish(jobs []*glJob) []*jobDecl {
	byName := make(map[string]*glJob, len(jobs))
	var names []string // jobs a need may name, for hints
	for _, j := range jobs {
		byName[j.name] = j
		names = append(names, j.name)
	}
	var decls []*jobDecl
	ids := map[string]*glJob{}
	for _, j := range jobs {
		if !j.in {
			continue
		}
		j.decls = g.expand(j)
		g.chargeJobs(len(decls), j.decls, j.key, j.name)
		for _, d := range j.decls {
			if other, dup := ids[d.spec.ID]; dup {
				if other != j {
					g.at(j.key, RuleJobID, "job %q is also the name of a copy of parallel job %q; rename one of them", d.spec.ID, other.name)
				}
				continue
			}
			ids[d.spec.ID] = j
			decls = append(decls, d)
		}
	}
	for _, j := range jobs {
		if j.in {
			g.jobNeeds(j, jobs, byName, names)
		}
	}
	return decls
}

// expand returns the jobDecls of a job: one, or one per copy of a
// parallel job, named as GitLab names them ("test 1/3", "test: [a, b]").
func (g *glFront) expand(j *glJob) []*jobDecl {
	base := &jobDecl{spec: j.spec, key: j.key, stage: j.stage, hasNeeds: j.needsSet}
	switch {
	case j.parallel > 0:
		out := make([]*jobDecl, 0, j.parallel)
		total := strconv.Itoa(j.parallel)
		for i := 1; i <= j.parallel; i++ {
			index := strconv.Itoa(i)
			out = append(out, g.copyOf(base, j, j.name+" "+index+"/"+total, nil,
				map[string]string{"CI_NODE_INDEX": index, "CI_NODE_TOTAL": total}))
		}
		return out
	case j.matrix != nil:
		size := 0
		for _, m := range j.matrix {
			n := 1
			for _, vals := range m.values {
				n *= len(vals)
				if n > g.opts.maxMatrixJobs() {
					break
				}
			}
			size += n
			if size > g.opts.maxMatrixJobs() {
				break
			}
		}
		switch limit := min(maxParallel, g.opts.maxMatrixJobs()); {
		case size > limit:
			g.gat(j.parallelNode, RuleMatrix, "parallel:matrix of job %q makes more than %d jobs, the limit", j.name, limit)
			return []*jobDecl{base}
		case size == 0:
			return []*jobDecl{base}
		}
		out := make([]*jobDecl, 0, size)
		total := strconv.Itoa(size)
		for _, m := range j.matrix {
			for _, combo := range combinations(m) {
				vals := make([]string, len(m.names))
				matrix := make(map[string]string, len(m.names))
				for i, n := range m.names {
					vals[i] = combo[i]
					matrix[n] = combo[i]
				}
				env := maps.Clone(matrix)
				env["CI_NODE_INDEX"], env["CI_NODE_TOTAL"] = strconv.Itoa(len(out)+1), total
				out = append(out, g.copyOf(base, j, j.name+": ["+strings.Join(vals, ", ")+"]", matrix, env))
			}
		}
		return out
	}
	return []*jobDecl{base}
}

// combinations returns the cartesian product of a matrix entry, the last
// variable varying fastest.
func combinations(m glMatrixEntry) [][]string {
	out := [][]string{nil}
	for _, vals := range m.values {
		next := make([][]string, 0, len(out)*len(vals))
		for _, prefix := range out {
			for _, v := range vals {
				next = append(next, append(slices.Clip(prefix), v))
			}
		}
		out = next
	}
	return out
}

// copyOf returns one copy of a parallel job: its own ID and name, the
// matrix values it runs with, and env overlaid on the job's.
func (g *glFront) copyOf(base *jobDecl, j *glJob, id string, matrix, env map[string]string) *jobDecl {
	spec := base.spec.Clone()
	g.chargeRead(spec, j.commands, j.key)
	spec.ID, spec.Name, spec.MatrixOf, spec.Matrix = id, id, j.name, matrix
	g.chargePlan(len(env), j.key)
	if spec.Env == nil {
		spec.Env = make(map[string]string, len(env))
	}
	maps.Copy(spec.Env, env)
	d := *base
	d.spec, d.group = spec, j.name
	return &d
}

// glNeed is one entry of needs, read.
type glNeed struct {
	name      string
	at        *glv
	artifacts bool
	optional  bool
	variants  []map[string]string // needs:parallel:matrix: the copies meant
	elsewhere bool                // in another pipeline or project
}

// jobNeeds turns the job's needs and dependencies into needRefs and
// NoArtifactsFrom for all its copies.
func (g *glFront) jobNeeds(j *glJob, jobs []*glJob, byName map[string]*glJob, names []string) {
	var refs []needRef
	var noArtifacts, needIDs []string
	for _, item := range j.needs {
		n, ok := g.need(item)
		if !ok || n.elsewhere {
			// Artifacts of another pipeline are fetched by the runner;
			// they do not order the jobs of this one.
			continue
		}
		targets, ok := g.targets(j, n.name, n.at, byName, names, "needs", n.optional)
		if !ok {
			continue
		}
		if n.variants != nil {
			targets = selectVariants(byName[n.name], n.variants)
			if len(targets) == 0 {
				g.gat(n.at, RuleNeeds, "needs:parallel:matrix of %q selects none of its copies", n.name)
				continue
			}
			for _, id := range targets {
				refs = append(refs, needRef{id: id, node: n.at.n})
			}
		} else {
			refs = append(refs, needRef{id: n.name, node: n.at.n})
		}
		needIDs = append(needIDs, targets...)
		if !n.artifacts {
			noArtifacts = append(noArtifacts, targets...)
		}
	}
	if j.depsSet || !j.needsSet {
		var depIDs []string
		for _, item := range j.deps {
			name, ok := g.text(item)
			if !ok {
				g.gat(item, RuleType, "entries of dependencies must be job names, got %s", item.what())
				continue
			}
			targets, ok := g.targets(j, name, item, byName, names, "dependencies", false)
			if !ok {
				continue
			}
			if j.needsSet && !slices.ContainsFunc(targets, func(id string) bool { return slices.Contains(needIDs, id) }) {
				g.gat(item, RuleNeeds, "dependency %q must also be in needs", name)
			}
			depIDs = append(depIDs, targets...)
		}
		if !j.needsSet && j.stage >= 0 {
			// A job without needs waits for the stage before its own, and
			// gets the artifacts of every job of the earlier stages, or of
			// those its dependencies name: it needs them all.
			needIDs = g.earlier(j, jobs, j.depsSet, depIDs)
			for _, id := range needIDs {
				refs = append(refs, needRef{id: id, node: j.key})
			}
		}
		if j.depsSet {
			for _, id := range needIDs {
				if !slices.Contains(depIDs, id) {
					noArtifacts = append(noArtifacts, id)
				}
			}
		}
	}
	slices.Sort(noArtifacts)
	noArtifacts = slices.Compact(noArtifacts)
	for _, d := range j.decls {
		d.hasNeeds, d.needs = true, refs
		if len(noArtifacts) > 0 {
			d.spec.NoArtifactsFrom = noArtifacts
		}
	}
}

// need reads one entry of needs.
func (g *glFront) need(item *glv) (glNeed, bool) {
	n := glNeed{at: item, artifacts: true}
	if s, ok := g.text(item); ok {
		n.name = s
		return n, true
	}
	if item.kind != glMap {
		g.gat(item, RuleType, "entries of needs must be job names or mappings with \"job\", got %s", item.what())
		return n, false
	}
	for _, k := range item.keys {
		switch k.name {
		case "job":
			n.name, _ = g.str(k.val, "job")
			n.at = k.val
		case "artifacts":
			if b, ok := g.boolean(k.val, "artifacts"); ok {
				n.artifacts = b
			}
		case "optional":
			n.optional, _ = g.boolean(k.val, "optional")
		case "pipeline", "project", "ref":
			n.elsewhere = true
			g.str(k.val, k.name)
		case "parallel":
			for _, m := range k.val.keysOrNil() {
				if m.name != "matrix" {
					g.unknownGLKey(m, "in needs:parallel", []string{"matrix"})
					continue
				}
				for _, entry := range g.matrix(m.val) {
					for _, combo := range combinations(entry) {
						sel := make(map[string]string, len(entry.names))
						for i, name := range entry.names {
							sel[name] = combo[i]
						}
						n.variants = append(n.variants, sel)
					}
				}
			}
		default:
			g.unknownGLKey(k, "in a need", []string{"artifacts", "job", "optional", "parallel", "pipeline", "project", "ref"})
		}
	}
	if n.name == "" {
		g.gat(item, RuleNeeds, `a need needs a "job"`)
		return n, false
	}
	return n, true
}

// targets returns the IDs a need or dependency named name means: the
// job, or all copies of a parallel job. ok is false when it means none,
// reported unless optional.
func (g *glFront) targets(j *glJob, name string, at *glv, byName map[string]*glJob, names []string, key string, optional bool) ([]string, bool) {
	t := byName[name]
	verb := "needs"
	if key == "dependencies" {
		verb = "depends on"
	}
	switch {
	case t == nil && optional:
		return nil, false
	case t == nil:
		hint := g.suggest(name, names)
		if hint == j.name {
			hint = ""
		}
		if g.incomplete {
			return nil, false
		}
		msg := "job " + strconv.Quote(j.name) + " " + verb + " unknown job " + strconv.Quote(name) + didYouMean(hint)
		if hint == "" {
			msg += " (jobs: " + list(names) + ")"
		}
		if len(g.offline) > 0 {
			msg += "; it may come from an include the compiler cannot read (line " + strconv.Itoa(g.offline[0].n.Line) + "): it reads only local files"
		}
		g.gat(at, RuleNeeds, "%s", msg)
		return nil, false
	case !t.in && optional:
		return nil, false
	case !t.in:
		g.gat(at, RuleNeeds, "job %q %s %q, which is not in the pipeline for this event: its rules or only/except leave it out", j.name, verb, name)
		return nil, false
	case t.stage > j.stage && j.stage >= 0:
		g.gat(at, RuleNeeds, "job %q (stage %s) %s %q of the later stage %s", j.name, g.stages[j.stage], verb, name, g.stages[t.stage])
		return nil, false
	}
	ids := make([]string, len(t.decls))
	for i, d := range t.decls {
		ids[i] = d.spec.ID
	}
	return ids, true
}

// selectVariants returns the copies of parallel:matrix job t whose values
// are one of the combinations in sel.
func selectVariants(t *glJob, sel []map[string]string) []string {
	var out []string
	for _, d := range t.decls {
		for _, s := range sel {
			if len(s) == len(d.spec.Matrix) && maps.Equal(s, d.spec.Matrix) {
				out = append(out, d.spec.ID)
				break
			}
		}
	}
	return out
}

// earlier returns the jobs a job without needs waits for, in file order:
// every job of the nearest earlier stage that has jobs (the stage
// barrier), and the jobs of all earlier stages it gets artifacts from:
// those that upload artifacts, or those its dependencies name.
func (g *glFront) earlier(j *glJob, jobs []*glJob, depsSet bool, deps []string) []string {
	barrier := -1
	for _, t := range jobs {
		if t.in && t.stage < j.stage && t.stage > barrier {
			barrier = t.stage
		}
	}
	var ids []string
	for _, t := range jobs {
		if !t.in || t.stage < 0 || t.stage >= j.stage {
			continue
		}
		for _, d := range t.decls {
			artifacts := d.spec.Artifacts != nil
			if depsSet {
				artifacts = slices.Contains(deps, d.spec.ID)
			}
			if t.stage == barrier || artifacts {
				ids = append(ids, d.spec.ID)
			}
		}
	}
	return ids
}
