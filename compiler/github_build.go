package compiler

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/compiler/expr"
)

// ghCall is what a called workflow is compiled with: the call that
// expands it.
type ghCall struct {
	caller *ghJob
	// variant is the caller's matrix variant, nil without matrix.
	variant *ghVariant
	// inputs are the values of the callee's inputs: those the caller
	// passes, and the defaults of the others; Unknown for those the run
	// computes.
	inputs map[string]any
	// binding rewrites the callee's expressions for the caller's run.
	binding *ghBinding
	// parent is the call the caller's own workflow is compiled for, nil
	// when the caller is a job of the top workflow; path is what the IDs
	// of the callee's jobs get in front in the plan: the caller's path
	// and ID, "caller/" ("outer/caller (1)/" when nested).
	parent *ghCall
	path   string
}

// pathOf is the ID in the plan of the job of the workflow compiled for
// call (nil at the top) whose ID there is id.
func (call *ghCall) pathOf(id string) string {
	if call == nil {
		return id
	}
	return call.path + id
}

// build turns one job of wf into the jobs of the plan: one, one per matrix
// variant, or, for a job that calls a local reusable workflow, the jobs of
// that workflow. call is the call wf is compiled for, nil at the top.
func (g *ghCompiler) build(wf *ghWorkflow, j *ghJob, call *ghCall) []*jobDecl {
	if j.matrix == nil {
		return g.buildVariant(wf, j, nil, j.id, call)
	}
	vs, known, ok := g.variants(j.matrix, j, j.matrix.key, call)
	switch {
	case !ok:
		// Reported; a placeholder keeps the jobs that need it from being
		// reported as well.
		return []*jobDecl{{spec: &cikit.JobSpec{ID: j.id, Name: j.id}, key: j.key, stage: -1}}
	case !known:
		return g.placeholder(wf, j, call)
	}
	out := make([]*jobDecl, 0, len(vs))
	seen := make(map[string]int, len(vs))
	// The variants are built one after the other and keep nothing of the
	// evaluation environment: they share one, whose matrix is set for
	// each.
	shared := (&ghEval{g: g, wf: wf, job: j, variant: &vs[0], call: call}).environment()
	for i := range vs {
		shared.Contexts["matrix"] = vs[i].values
		id := variantID(j.id, vs[i])
		// Different values can render the same ("1" and 1): keep IDs
		// unique.
		if n := seen[id]; n > 0 {
			seen[id] = n + 1
			id = fmt.Sprintf("%s #%d", id, n+1)
		} else {
			seen[id] = 1
		}
		first := len(out)
		out = g.buildVariantEnv(wf, j, &vs[i], id, call, shared, out)
		for _, d := range out[first:] {
			d.group = j.id
			if d.spec.MatrixOf == "" {
				d.spec.MatrixOf = j.id
				d.spec.Matrix = vs[i].strings
				d.spec.MatrixJSON = matrixJSON(vs[i].values)
				if !j.uses.set() {
					// The jobs of a called workflow have a strategy of
					// their own, as on GitHub: not the caller's.
					d.spec.Strategy = &cikit.Strategy{Index: i, Total: len(vs), FailFast: !j.noFailFast, MaxParallel: j.maxParallel}
				}
				g.c.chargePlan(len(d.spec.Matrix), j.key)
			}
		}
	}
	if e := g.c.expand; e != nil && e.job == call.pathOf(j.id) {
		e.record(out)
	}
	return out
}

// buildVariant builds job j for one variant v (nil without matrix), with
// the given ID.
func (g *ghCompiler) buildVariant(wf *ghWorkflow, j *ghJob, v *ghVariant, id string, call *ghCall) []*jobDecl {
	return g.buildVariantEnv(wf, j, v, id, call, nil, nil)
}

// buildVariantEnv is buildVariant with the evaluation environment of the
// variant, when it is made already, appending to out.
func (g *ghCompiler) buildVariantEnv(wf *ghWorkflow, j *ghJob, v *ghVariant, id string, call *ghCall, shared *expr.GitHubEnv, out []*jobDecl) []*jobDecl {
	x := &ghEval{g: g, wf: wf, job: j, variant: v, call: call, env: shared}
	name := id
	if j.name.set() && j.name.s != "" {
		name = x.renderName(j.name)
	} else if v != nil {
		// GitHub names an unnamed variant by its values too.
		name = variantName(j.id, *v)
	}
	when, cond := x.jobCondition(j.cond)
	if j.uses.set() {
		return append(out, g.buildCall(wf, j, x, id, name, when, cond)...)
	}
	if j.mergedEnv == nil {
		// Variants share what does not vary: env and steps are the same
		// for all of them.
		j.mergedEnv = mergeEnv(g.containerEnv(j), wf.env, j.env)
		if j.mergedEnv == nil {
			j.mergedEnv = map[string]string{}
		}
	}
	env := j.mergedEnv
	if len(env) == 0 {
		env = nil
	}
	spec := &cikit.JobSpec{
		ID:           id,
		Name:         name,
		Env:          env,
		Steps:        j.steps,
		AllowFailure: j.allowFailure,
		When:         when,
		If:           cond,
		Outputs:      j.outputs,
		Permissions:  j.permissions,
	}
	if spec.Permissions == nil {
		spec.Permissions = wf.permissions
	}
	spec.Warnings = g.jobWarnings(wf, j)
	if j.coeExpr.set() {
		if b, known := x.bool(j.coeExpr); known {
			spec.AllowFailure = b
		}
	}
	for _, l := range j.runsOn {
		spec.RunsOn = append(spec.RunsOn, x.render(l))
	}
	if j.container != nil {
		spec.Image = x.render(j.container.image)
		ct := j.container
		spec.ImageOptions = imageOptions(cikit.ImageOptions{User: ct.opts.user, Env: ct.env, Credentials: ct.creds, Options: ct.opts.rest})
	}
	spec.Services = g.jobServices(j, x)
	if j.timeout.set() {
		if !hasExpr(j.timeout.s) {
			spec.Timeout = minutesDuration(j.timeout.s)
		} else {
			spec.Timeout = x.minutes(j.timeout)
		}
	}
	if j.concurrency != nil {
		spec.Concurrency = x.concurrency(j.concurrency, j.concNode, j.concCancel)
	}
	if e := j.environment; e != nil {
		spec.Environment = &cikit.Environment{Name: x.render(e.name)}
		if e.url.set() {
			spec.Environment.URL = x.render(e.url)
		}
	}
	if len(wf.env) > 0 {
		g.c.chargePlan(len(wf.env), j.key)
	}
	if b := g.outputsBinding(wf, j); b != nil {
		b.apply(spec)
		spec.Secrets = secretsOf(spec)
	} else {
		// What is read of secrets is the same in every variant.
		if j.secretNames == nil {
			j.secretNames = secretsOf(spec)
			if j.secretNames == nil {
				j.secretNames = []string{}
			}
		}
		if len(j.secretNames) > 0 {
			spec.Secrets = j.secretNames
		}
	}
	return append(out, &jobDecl{spec: spec, key: j.key, hasNeeds: j.hasNeeds, needs: j.needs, stage: -1})
}

// outputsBinding is the rewriting of the outputs of the local reusable
// workflows job j needs, which are expanded in place: nil when it needs
// none. A caller with a matrix has several expansions, and its outputs
// are left as written.
func (g *ghCompiler) outputsBinding(wf *ghWorkflow, j *ghJob) *ghBinding {
	var b *ghBinding
	for _, n := range j.needs {
		callee := wf.jobIndex[strings.ToLower(n.id)]
		if callee == nil || !callee.uses.set() || callee.matrix != nil {
			continue
		}
		local, _ := parseCallRef(callee.uses.s)
		ce := g.parsed[local]
		if local == "" || ce == nil || ce.wf.call == nil {
			continue
		}
		inner := &ghBinding{prefix: callee.id + "/"}
		outs := map[string]expr.Node{}
		for _, o := range ce.wf.call.outputs {
			if tm, ok := g.templates[o.node]; ok && tm.ok && tm.single() {
				outs[strings.ToLower(o.name)] = inner.transform(tm.segs[0].x)
			}
		}
		if b == nil {
			b = &ghBinding{outputs: map[string]map[string]expr.Node{}}
		}
		b.outputs[strings.ToLower(callee.id)] = outs
	}
	return b
}

// jobServices renders the services of a job for a variant. Services
// whose images hold no expression are the same in every variant, and
// shared.
func (g *ghCompiler) jobServices(j *ghJob, x *ghEval) []cikit.Service {
	if j.staticServices != nil {
		return j.staticServices
	}
	var out []cikit.Service
	static := true
	for _, s := range j.services {
		static = static && !hasExpr(s.image.s)
		image := x.render(s.image)
		if image == "" {
			// GitHub starts no service whose image is empty, which makes
			// services conditional.
			continue
		}
		svc := cikit.Service{Name: s.name, Image: image, Env: s.env, Ports: s.ports, Options: s.options,
			ImageOptions: imageOptions(cikit.ImageOptions{User: s.opts.user, Credentials: s.creds, Options: s.opts.rest}),
			Health:       s.opts.health}
		if s.command != "" {
			svc.Command = strings.Fields(s.command)
		}
		out = append(out, svc)
	}
	if static && out != nil {
		j.staticServices = out
	}
	return out
}

// containerEnv is the env of a job's container, which its steps see
// under the job's own env.
func (g *ghCompiler) containerEnv(j *ghJob) map[string]string {
	if j.container == nil {
		return nil
	}
	return j.container.env
}

// minutesDuration converts a number of minutes, as written, to a
// duration; 0 when it is not a positive number.
func minutesDuration(s string) time.Duration {
	f, err := strconv.ParseFloat(strings.ReplaceAll(strings.TrimSpace(s), "_", ""), 64)
	if err != nil || !(f > 0) || f > 1e6 {
		return 0
	}
	return time.Duration(f * float64(time.Minute))
}

// buildCall builds a job that calls a reusable workflow. A workflow of
// another repository stays one job, with Uses set and one step that names
// the workflow and its inputs. A local one is read and expanded in place:
// its jobs become jobs of the plan, with IDs "caller/job".
func (g *ghCompiler) buildCall(wf *ghWorkflow, j *ghJob, x *ghEval, id, name string, when cikit.When, cond *cikit.Condition) []*jobDecl {
	c := g.c
	ref := j.uses.s
	local, msg := parseCallRef(ref)
	if msg != "" {
		c.at(j.uses.node, RuleCall, "invalid reusable workflow %q in job %q: %s", ref, j.id, msg)
		return []*jobDecl{{spec: &cikit.JobSpec{ID: id, Name: name}, key: j.key, stage: -1}}
	}
	perms := j.permissions
	if perms == nil {
		perms = wf.permissions
	}
	if local == "" {
		with := make(map[string]string, len(j.with))
		for _, w := range j.with {
			with[w.name] = x.render(w.value)
		}
		if len(with) == 0 {
			with = nil
		}
		spec := &cikit.JobSpec{
			ID:          id,
			Name:        name,
			Uses:        ref,
			Steps:       []cikit.Step{{Name: ref, Uses: ref, With: with}},
			When:        when,
			If:          cond,
			Permissions: perms,
			Warnings:    g.jobWarnings(wf, j),
		}
		if j.concurrency != nil {
			spec.Concurrency = x.concurrency(j.concurrency, j.concNode, j.concCancel)
		}
		// The secrets the called workflow may read: those passed, or all
		// of them with "secrets: inherit".
		if j.inherit {
			spec.Secrets = []string{"*"}
		} else {
			env := make(map[string]string, len(j.secrets))
			for _, sec := range j.secrets {
				env[sec.name] = sec.value.s
			}
			spec.Secrets = secretsOf(&cikit.JobSpec{Env: env})
		}
		return []*jobDecl{{spec: spec, key: j.key, hasNeeds: j.hasNeeds, needs: j.needs, stage: -1}}
	}
	callee, call := g.callee(local, j, x, id)
	if callee == nil {
		return []*jobDecl{{spec: &cikit.JobSpec{ID: id, Name: name}, key: j.key, stage: -1}}
	}
	var inner []*jobDecl
	linked := false
	g.stack = append(g.stack, local)
	g.within(local, callee.data, func() {
		for _, cj := range callee.wf.jobs {
			inner = append(inner, g.build(callee.wf, cj, call)...)
		}
		// Needs and cycles inside the called workflow are its own
		// business, reported in its file.
		d := &draft{jobs: inner}
		c.link(d)
		linked = d.graph != nil
	})
	g.stack = g.stack[:len(g.stack)-1]
	// What the caller asks for and is not honoured holds for every job it
	// calls.
	callerWarnings := g.jobWarnings(wf, j)
	out := make([]*jobDecl, 0, len(inner))
	for _, d := range inner {
		s := d.spec
		if len(callerWarnings) > 0 {
			s.Warnings = append(slices.Clone(callerWarnings), s.Warnings...)
		}
		internal := s.Needs
		call.binding.apply(s)
		s.Secrets = secretsOf(s)
		s.ID = id + "/" + s.ID
		s.Name = name + " / " + s.DisplayName()
		if s.MatrixOf != "" {
			s.MatrixOf = id + "/" + s.MatrixOf
		}
		s.Needs = nil
		if s.Permissions == nil {
			s.Permissions = perms
		}
		// The caller's condition decides for the whole called workflow.
		// It is put on the jobs that start it: they need what the caller
		// needs, which is what its condition may look at, and the other
		// jobs follow them.
		if len(internal) == 0 {
			s.When, s.If = combineConditions(when, cond, s.When, s.If)
		}
		needs := slices.Clone(j.needs)
		if linked {
			for _, n := range internal {
				needs = append(needs, needRef{id: id + "/" + n, node: j.key})
			}
		}
		out = append(out, &jobDecl{spec: s, key: j.key, hasNeeds: true, needs: needs, stage: -1, group: j.id})
	}
	return out
}

// combineConditions puts the condition of a call (outer) on a job of the
// called workflow (inner). A call that never runs makes the job never run;
// otherwise both conditions must hold, and the job reacts to the outcome
// of its needs (the caller's) as the caller says.
func combineConditions(outerWhen cikit.When, outer *cikit.Condition, innerWhen cikit.When, inner *cikit.Condition) (cikit.When, *cikit.Condition) {
	switch {
	case outerWhen == cikit.WhenNever || innerWhen == cikit.WhenNever:
		return cikit.WhenNever, nil
	case outer == nil:
		if outerWhen == "" || outerWhen == cikit.WhenOnSuccess {
			return innerWhen, inner
		}
		return outerWhen, inner
	case inner == nil:
		return outerWhen, outer
	}
	return outerWhen, &cikit.Condition{Lang: cikit.LangGitHub, Expr: "(" + outer.Expr + ") && (" + inner.Expr + ")"}
}

// parseCallRef checks a reusable workflow reference. local is the path of
// a workflow of this repository ("./.github/workflows/x.yml" gives
// ".github/workflows/x.yml"), "" for one of another repository; msg says
// what is wrong, or is "".
func parseCallRef(ref string) (local, msg string) {
	if hasExpr(ref) {
		return "", `GitHub does not evaluate expressions in "uses"`
	}
	ext := func(p string) bool { e := path.Ext(p); return e == ".yml" || e == ".yaml" }
	if rest, ok := strings.CutPrefix(ref, "./"); ok {
		switch {
		case strings.Contains(rest, "@"):
			return "", "a workflow of this repository takes no @ref: it is read at the same commit"
		case !strings.HasPrefix(rest, ".github/workflows/") || strings.Contains(strings.TrimPrefix(rest, ".github/workflows/"), "/"):
			return "", `a workflow of this repository is a file directly in .github/workflows, as in "./.github/workflows/build.yml"`
		case !ext(rest):
			return "", "a workflow file ends in .yml or .yaml"
		case !fsValid(rest):
			return "", "the path must stay inside the repository"
		}
		return rest, ""
	}
	name, version, hasVersion := strings.Cut(ref, "@")
	parts := strings.Split(name, "/")
	switch {
	case len(parts) < 3 || parts[0] == "" || parts[1] == "" || strings.HasPrefix(ref, "."):
		return "", `a reusable workflow is "./.github/workflows/file.yml" or "owner/repo/.github/workflows/file.yml@ref"`
	case !hasVersion || version == "":
		return "", `name a version: "owner/repo/.github/workflows/file.yml@ref" (a tag, branch or commit SHA)`
	case !ext(name):
		return "", "a workflow file ends in .yml or .yaml"
	}
	return "", ""
}

// fsValid reports whether p is a clean relative path without "..".
func fsValid(p string) bool {
	return p != "" && path.Clean(p) == p && !strings.HasPrefix(p, "../") && p != ".." && !strings.HasPrefix(p, "/")
}

// ghCallee is a called workflow, read once per compilation.
type ghCallee struct {
	wf   *ghWorkflow
	data []byte
}

// callee reads the local workflow at p for the call in job j, and checks
// the call against it: inputs, secrets, nesting. It returns the callee
// (nil when it cannot be expanded; then the reason is reported) and the
// values of its inputs.
func (g *ghCompiler) callee(p string, j *ghJob, x *ghEval, id string) (*ghCallee, *ghCall) {
	c := g.c
	if k := slices.Index(g.stack, p); k >= 0 {
		chain := append(slices.Clone(g.stack[k:]), p)
		c.at(j.uses.node, RuleCall, "reusable workflow %q calls itself: %s", p, strings.Join(chain, " -> "))
		return nil, nil
	}
	if len(g.stack) >= ghMaxCallDepth {
		c.at(j.uses.node, RuleCall, "calling %q nests reusable workflows more than %d levels deep (%s), more than GitHub allows", p, ghMaxCallDepth, strings.Join(append(slices.Clone(g.stack), p), " -> "))
		return nil, nil
	}
	if !g.calledFiles[p] {
		g.calledFiles[p] = true
		if len(g.calledFiles) == ghMaxCalledWorkflows+1 {
			c.at(j.uses.node, RuleCall, "the workflow calls more than %d distinct reusable workflows, more than GitHub allows", ghMaxCalledWorkflows)
			return nil, nil
		}
	}
	ce, ok := g.parsed[p]
	if !ok {
		ce = g.parse(p, j.uses.node)
		if g.parsed == nil {
			g.parsed = map[string]*ghCallee{}
		}
		g.parsed[p] = ce
	}
	if ce == nil {
		return nil, nil
	}
	if ce.wf.call == nil {
		c.at(j.uses.node, RuleCall, "workflow %q is not reusable: its \"on\" has no workflow_call", p)
		return nil, nil
	}
	return ce, g.bindCall(ce.wf.call, j, x, p, id)
}

// parse reads a called workflow; nil when it cannot be read (reported).
func (g *ghCompiler) parse(p string, at *yaml.Node) *ghCallee {
	c := g.c
	data, ok := c.readFile(p, at)
	if !ok {
		return nil
	}
	ce := &ghCallee{data: data}
	g.within(p, data, func() {
		root, ok := c.parseYAML(data)
		if !ok {
			return
		}
		ce.wf = g.workflow(root, p, true)
	})
	if ce.wf == nil {
		return nil
	}
	return ce
}

// within runs f with findings and positions in file, whose content is
// data.
func (g *ghCompiler) within(file string, data []byte, f func()) {
	c := g.c
	prev := c.data
	c.data = data
	defer func() { c.data = prev }()
	c.within(file, f)
}

// bindCall checks what job j passes to the reusable workflow spec
// declares, and returns the call the workflow is compiled for: the values
// of its inputs (those passed, evaluated where they can be, and the
// defaults of the others) and how its expressions read in the caller's
// run. id is the ID of the caller's variant.
func (g *ghCompiler) bindCall(spec *ghCallSpec, j *ghJob, x *ghEval, p, id string) *ghCall {
	c := g.c
	call := &ghCall{caller: j, variant: x.variant, inputs: map[string]any{}, parent: x.call, path: x.call.pathOf(id) + "/"}
	b := &ghBinding{prefix: id + "/", inputs: map[string]expr.Node{}}
	call.binding = b
	var declared []string
	for _, in := range spec.inputs {
		declared = append(declared, in.Name)
	}
	passed := map[string]bool{}
	for _, w := range j.with {
		passed[strings.ToLower(w.name)] = true
		in := spec.input(w.name)
		if in == nil {
			if len(declared) == 0 {
				c.at(w.key, RuleCall, "input %q is not declared by reusable workflow %q, which takes no inputs", w.name, p)
			} else {
				c.at(w.key, RuleCall, "input %q is not declared by reusable workflow %q%s (inputs: %s)", w.name, p, didYouMean(c.suggest(w.name, declared)), list(declared))
			}
			continue
		}
		if !hasExpr(w.value.s) {
			switch {
			case in.Type == "boolean" && w.typ != "!!bool":
				c.at(w.value.node, RuleCall, "input %q of %q is a boolean, and %s is not: write true or false", w.name, p, ghDescribe(w.value.node))
				continue
			case in.Type == "number" && w.typ != "!!int" && w.typ != "!!float":
				c.at(w.value.node, RuleCall, "input %q of %q is a number, and %s is not", w.name, p, ghDescribe(w.value.node))
				continue
			}
		}
		if v, known := x.value(w.value); known {
			v = typedInput(in.Type, v)
			call.inputs[in.Name] = v
			b.inputs[strings.ToLower(in.Name)] = literalOf(v)
			continue
		}
		call.inputs[in.Name] = expr.Unknown
		if n := x.callerExpr(w.value); n != nil {
			b.inputs[strings.ToLower(in.Name)] = n
		}
	}
	for _, in := range spec.inputs {
		if passed[strings.ToLower(in.Name)] {
			continue
		}
		if in.Required {
			c.at(j.uses.node, RuleCall, "reusable workflow %q requires input %q, and job %q does not pass it", p, in.Name, j.id)
			continue
		}
		var def any
		switch {
		case in.hasDef && hasExpr(in.def):
			// A default computed from the caller's github context: the
			// same in the caller's run.
			call.inputs[in.Name] = expr.Unknown
			if tm := g.parseTemplate(in.def, in.defaultNode, false); tm.ok && tm.single() {
				b.inputs[strings.ToLower(in.Name)] = tm.segs[0].x
			}
			continue
		case in.hasDef:
			def = typedInput(in.Type, in.def)
		case in.Type == "boolean":
			def = false // GitHub's defaults of inputs without one
		case in.Type == "number":
			def = 0.0
		default:
			def = ""
		}
		call.inputs[in.Name] = def
		b.inputs[strings.ToLower(in.Name)] = literalOf(def)
	}
	if j.inherit {
		return call
	}
	// Without inherit the called workflow sees only the secrets passed
	// to it (and GITHUB_TOKEN); any other reads as empty.
	b.secrets = map[string]expr.Node{}
	var secrets []string
	for _, s := range spec.secrets {
		secrets = append(secrets, s.name)
	}
	given := map[string]bool{}
	for _, s := range j.secrets {
		given[strings.ToLower(s.name)] = true
		if spec.secret(s.name) == nil {
			if len(secrets) == 0 {
				c.at(s.key, RuleCall, "secret %q is not declared by reusable workflow %q, which takes no secrets", s.name, p)
			} else {
				c.at(s.key, RuleCall, "secret %q is not declared by reusable workflow %q%s (secrets: %s)", s.name, p, didYouMean(c.suggest(s.name, secrets)), list(secrets))
			}
			continue
		}
		if n := x.callerExpr(s.value); n != nil {
			b.secrets[strings.ToLower(s.name)] = n
		}
	}
	for _, s := range spec.secrets {
		if s.required && !given[strings.ToLower(s.name)] {
			c.at(j.uses.node, RuleCall, "reusable workflow %q requires secret %q, and job %q does not pass it (or \"secrets: inherit\")", p, s.name, j.id)
		}
	}
	return call
}

// callerExpr is the expression that stands, in the run of the top
// workflow, for a value written in the caller: its expression rewritten
// by the caller's own call, if it is called; a template with text around
// its expressions becomes a format(). nil when it does not parse
// (reported).
func (x *ghEval) callerExpr(t ghText) expr.Node {
	tm := x.g.parseTemplate(t.s, t.node, false)
	if !tm.ok {
		return nil
	}
	rewrite := func(n expr.Node) expr.Node {
		if x.call != nil {
			return x.call.binding.transform(n)
		}
		return n
	}
	if tm.single() {
		return rewrite(tm.segs[0].x)
	}
	var pattern strings.Builder
	var args []expr.Node
	for _, seg := range tm.segs {
		if seg.x == nil {
			pattern.WriteString(strings.NewReplacer("{", "{{", "}", "}}").Replace(seg.text))
			continue
		}
		fmt.Fprintf(&pattern, "{%d}", len(args))
		args = append(args, rewrite(seg.x))
	}
	return &expr.Call{Name: "format", Args: append([]expr.Node{&expr.Literal{Value: pattern.String()}}, args...)}
}

// typedInput converts an input value to the type the input declares, as
// GitHub does when it passes it.
func typedInput(typ string, v any) any {
	s, isString := v.(string)
	if !isString {
		return v
	}
	switch typ {
	case "boolean":
		return strings.EqualFold(strings.TrimSpace(s), "true")
	case "number":
		if f, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
			return f
		}
	}
	return v
}

// matrixJSON returns the JSON of the values of a variant, for
// JobSpec.MatrixJSON, when one of them is not a string: the matrix
// context at run time keeps numbers, booleans, objects and arrays such
// (matrix.config.os, !matrix.experimental), where JobSpec.Matrix has
// their text only. nil when every value is a string.
func matrixJSON(values map[string]any) map[string]json.RawMessage {
	typed := false
	for _, v := range values {
		if _, ok := v.(string); !ok {
			typed = true
			break
		}
	}
	if !typed {
		return nil
	}
	out := make(map[string]json.RawMessage, len(values))
	for k, v := range values {
		b, err := json.Marshal(v)
		if err != nil {
			// A value JSON cannot hold (YAML's .nan) keeps its text in
			// Matrix only.
			continue
		}
		out[k] = b
	}
	return out
}

// jobWarnings returns the warnings of job j of wf: those of the run the
// workflow asks for; then, when j takes the workflow's permissions and
// the workflow sets some, the one saying they are not applied (reported
// where a job takes them, since jobs with permissions of their own do
// not); then the job's own.
func (g *ghCompiler) jobWarnings(wf *ghWorkflow, j *ghJob) []string {
	own := j.warnings
	if j.permissions == nil && len(wf.permissions) > 0 {
		w := g.c.notHonoured(wf.permNode, "permissions are not applied yet: the job's steps get no GitHub token with them")
		own = append([]string{w}, own...)
	}
	if len(wf.runWarnings) == 0 {
		return own
	}
	return slices.Concat(wf.runWarnings, own)
}
