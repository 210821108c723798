package compiler

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/compiler/expr"
)

// ghContexts are the contexts of GitHub's expressions.
var ghContexts = []string{"env", "github", "inputs", "job", "jobs", "matrix", "needs", "runner", "secrets", "steps", "strategy", "vars"}

// ghWhere is a place of a workflow where expressions may be written, with
// the contexts and special functions GitHub allows there (its "context
// availability" table).
type ghWhere struct {
	name      string   // for messages
	contexts  []string // sorted
	status    bool     // success(), failure(), cancelled() and always()
	hashFiles bool
}

var (
	ghAtWorkflow   = &ghWhere{name: "the workflow's run-name, concurrency and input defaults", contexts: []string{"github", "inputs", "vars"}}
	ghAtWorkflowEn = &ghWhere{name: "the workflow's env", contexts: []string{"github", "inputs", "secrets", "vars"}}
	ghAtCallOutput = &ghWhere{name: "the outputs of workflow_call", contexts: []string{"github", "inputs", "jobs", "vars"}}
	ghAtJobIf      = &ghWhere{name: "a job's if", contexts: []string{"github", "inputs", "needs", "vars"}, status: true}
	ghAtStrategy   = &ghWhere{name: "a job's strategy", contexts: []string{"github", "inputs", "needs", "vars"}}
	ghAtJob        = &ghWhere{name: "this key of a job", contexts: []string{"github", "inputs", "matrix", "needs", "strategy", "vars"}}
	ghAtJobEnv     = &ghWhere{name: "a job's env and the secrets it passes", contexts: []string{"github", "inputs", "matrix", "needs", "secrets", "strategy", "vars"}}
	ghAtDefaults   = &ghWhere{name: "a job's defaults", contexts: []string{"env", "github", "inputs", "matrix", "needs", "strategy", "vars"}}
	ghAtCredential = &ghWhere{name: "registry credentials", contexts: []string{"env", "github", "inputs", "matrix", "needs", "secrets", "strategy", "vars"}}
	ghAtServiceEnv = &ghWhere{name: "the env of a container or service", contexts: []string{"env", "github", "inputs", "job", "matrix", "needs", "runner", "secrets", "strategy", "vars"}}
	ghAtEnvURL     = &ghWhere{name: "an environment's url", contexts: []string{"env", "github", "inputs", "job", "matrix", "needs", "runner", "steps", "strategy", "vars"}}
	ghAtOutputs    = &ghWhere{name: "a job's outputs", contexts: []string{"env", "github", "inputs", "job", "matrix", "needs", "runner", "secrets", "steps", "strategy", "vars"}}
	ghAtStepIf     = &ghWhere{name: "a step's if", contexts: []string{"env", "github", "inputs", "job", "matrix", "needs", "runner", "steps", "strategy", "vars"}, status: true, hashFiles: true}
	ghAtStep       = &ghWhere{name: "this key of a step", contexts: []string{"env", "github", "inputs", "job", "matrix", "needs", "runner", "secrets", "steps", "strategy", "vars"}, hashFiles: true}
	ghAtSnapshotIf = &ghWhere{name: "a snapshot's if", contexts: []string{"github", "inputs", "matrix", "needs", "strategy", "vars"}}
)

// ghTemplate is a value with ${{ }} expressions, parsed: a string field,
// or a condition (whose expression may be written without ${{ }}).
type ghTemplate struct {
	src  string
	node *yaml.Node
	segs []ghSeg
	ok   bool // parsed without errors
}

// ghSeg is literal text (x nil) or one expression of a template.
type ghSeg struct {
	off  int // of text in src
	text string
	x    expr.Node
}

// single reports whether the template is one expression and nothing else,
// which GitHub evaluates to the expression's own value.
func (t *ghTemplate) single() bool { return len(t.segs) == 1 && t.segs[0].x != nil }

// ghUse is a template of a job (or of the workflow) and where it is.
type ghUse struct {
	t     *ghTemplate
	where *ghWhere
	step  int // the 1-based step it is in; 0 outside steps
}

// parseTemplate parses src, the value of node. A condition is one
// expression, with or without ${{ }}. Syntax errors are reported at their
// position; ok is false then.
func (g *ghCompiler) parseTemplate(src string, node *yaml.Node, cond bool) *ghTemplate {
	if t, ok := g.templates[node]; ok && node != nil && t.src == src {
		return t
	}
	t := &ghTemplate{src: src, node: node, ok: true}
	if node != nil {
		if g.templates == nil {
			g.templates = map[*yaml.Node]*ghTemplate{}
		}
		g.templates[node] = t
	}
	report := func(off int, format string, args ...any) {
		t.ok = false
		if node == nil {
			return
		}
		line, col := g.c.scalarPos(node, off)
		g.c.report(line, col, RuleExpr, format, args...)
	}
	var segs []expr.Segment
	switch {
	case cond && !hasExpr(src):
		segs = []expr.Segment{{Offset: 0, Text: src, Expr: true}}
	default:
		var err error
		segs, err = expr.SplitTemplate(src)
		var se *expr.SyntaxError
		if errors.As(err, &se) {
			report(se.Offset, "invalid expression: %s", se.Msg)
			return t
		}
		if cond {
			var exprs, text int
			for _, s := range segs {
				if s.Expr {
					exprs++
				} else if strings.TrimSpace(s.Text) != "" {
					text++
				}
			}
			if exprs != 1 || text > 0 {
				t.ok = false
				if node != nil {
					g.c.at(node, RuleIfCond, "condition %q is always true: text around or between ${{ }} makes it a non-empty string; write one expression, as in ${{ a && b }}", src)
				}
				return t
			}
			segs = slices.DeleteFunc(segs, func(s expr.Segment) bool { return !s.Expr })
		}
	}
	for _, s := range segs {
		seg := ghSeg{off: s.Offset, text: s.Text}
		if s.Expr {
			n, err := expr.ParseGitHub(s.Text)
			if err != nil {
				var se *expr.SyntaxError
				off, msg := 0, err.Error()
				if errors.As(err, &se) {
					off, msg = se.Offset, se.Msg
				}
				report(s.Offset+off, "invalid expression: %s", msg)
				continue
			}
			seg.x = n
		}
		t.segs = append(t.segs, seg)
	}
	return t
}

// use registers a field of job j (nil for the workflow) that may hold
// expressions, parsing it; its references are checked once every job is
// known (checkUses).
func (g *ghCompiler) use(uses *[]ghUse, t ghText, where *ghWhere, step int) *ghTemplate {
	if !t.set() || !hasExpr(t.s) {
		return nil
	}
	tm := g.parseTemplate(t.s, t.node, false)
	*uses = append(*uses, ghUse{t: tm, where: where, step: step})
	return tm
}

// useCond registers a condition.
func (g *ghCompiler) useCond(uses *[]ghUse, t ghText, where *ghWhere, step int) *ghTemplate {
	if !t.set() {
		return nil
	}
	tm := g.parseTemplate(t.s, t.node, true)
	*uses = append(*uses, ghUse{t: tm, where: where, step: step})
	return tm
}

// useMap registers the values of a mapping of strings (env, with,
// outputs), reading their nodes again from the mapping.
func (g *ghCompiler) useMap(uses *[]ghUse, v *yaml.Node, where *ghWhere, step int) {
	v = g.c.resolve(v)
	if v.Kind != yaml.MappingNode {
		if v.Kind == yaml.ScalarNode {
			g.use(uses, ghText{v.Value, v}, where, step)
		}
		return
	}
	for i := 1; i < len(v.Content); i += 2 {
		if val := g.c.resolve(v.Content[i]); val.Kind == yaml.ScalarNode {
			g.use(uses, ghText{val.Value, val}, where, step)
		}
	}
}

// ghScope is what the references of a template may name.
type ghScope struct {
	wf  *ghWorkflow
	job *ghJob // nil for the workflow's own fields
}

// checkUses checks the expressions of the workflow and of its jobs: the
// functions they call, the contexts they read, and what they read of
// them.
func (g *ghCompiler) checkUses(wf *ghWorkflow) {
	for _, u := range wf.uses {
		g.checkUse(u, ghScope{wf: wf})
	}
	for _, j := range wf.jobs {
		for _, u := range j.exprs {
			g.checkUse(u, ghScope{wf: wf, job: j})
		}
	}
}

func (g *ghCompiler) checkUse(u ghUse, s ghScope) {
	if !u.t.ok {
		return
	}
	for _, seg := range u.t.segs {
		if seg.x != nil {
			g.checkExpr(u, seg, s)
		}
	}
}

// checkExpr checks one expression of a template.
func (g *ghCompiler) checkExpr(u ghUse, seg ghSeg, s ghScope) {
	c := g.c
	at := func(off int, format string, args ...any) {
		line, col := c.scalarPos(u.t.node, seg.off+off)
		c.report(line, col, RuleExpr, format, args...)
	}
	for _, p := range expr.CheckGitHub(seg.x, nil) {
		at(p.Offset, "%s", p.Msg)
	}
	walkExpr(seg.x, func(n expr.Node) {
		call, ok := n.(*expr.Call)
		if !ok {
			return
		}
		switch name := strings.ToLower(call.Name); name {
		case "success", "failure", "cancelled", "always":
			if !u.where.status {
				at(call.Offset, "%s() is only available in if: conditions", call.Name)
			}
		case "hashfiles":
			if !u.where.hashFiles {
				at(call.Offset, "hashFiles() is only available in steps, where the workspace exists")
			}
		case "fromjson":
			if len(call.Args) != 1 {
				return
			}
			if lit, ok := call.Args[0].(*expr.Literal); ok {
				if str, ok := lit.Value.(string); ok {
					var v any
					if err := json.Unmarshal([]byte(str), &v); err != nil {
						at(lit.Offset, "fromJSON() is given invalid JSON: %v", err)
					}
				}
			}
		}
	})
	for _, r := range expr.References(seg.x) {
		g.checkRef(u, r, s, func(rule, format string, args ...any) {
			line, col := c.scalarPos(u.t.node, seg.off+r.Offset)
			c.report(line, col, rule, format, args...)
		})
	}
}

// checkRef checks one use of a context.
func (g *ghCompiler) checkRef(u ghUse, r expr.Ref, s ghScope, report func(rule, format string, args ...any)) {
	c := g.c
	name := r.Path[0]
	if !slices.Contains(ghContexts, name) {
		report(RuleExpr, "unknown context %q%s (available here: %s)", name, didYouMean(c.suggest(name, u.where.contexts)), strings.Join(u.where.contexts, ", "))
		return
	}
	if !slices.Contains(u.where.contexts, name) {
		report(RuleExpr, "context %q is not available in %s (available: %s)", name, u.where.name, strings.Join(u.where.contexts, ", "))
		return
	}
	prop := func(i int) string {
		if i < len(r.Path) {
			return r.Path[i]
		}
		return ""
	}
	switch name {
	case "matrix":
		j := s.job
		if j == nil || prop(1) == "" || prop(1) == "*" {
			return
		}
		if j.matrix == nil {
			report(RuleMatrixRef, "%s refers to the matrix, and job %q has none, so it is always empty", r, j.id)
			return
		}
		keys, known := j.matrix.keys()
		if known && !slices.ContainsFunc(keys, func(k string) bool { return strings.EqualFold(k, prop(1)) }) {
			report(RuleExpr, "the matrix of job %q has no %q%s (matrix: %s)", j.id, prop(1), didYouMean(c.suggest(prop(1), keys)), list(keys))
		}
	case "needs":
		j := s.job
		if j == nil || prop(1) == "" || prop(1) == "*" {
			return
		}
		var target *ghJob
		var needs []string
		for _, n := range j.needs {
			needs = append(needs, n.id)
			if strings.EqualFold(n.id, prop(1)) {
				target = s.wf.jobIndex[strings.ToLower(n.id)]
			}
		}
		if target == nil {
			if len(needs) == 0 {
				report(RuleExpr, "job %q needs no job, so needs.%s is not there", j.id, prop(1))
			} else {
				report(RuleExpr, "job %q does not need %q, so needs.%s is not there; needs has only the jobs it needs directly%s (needs: %s)", j.id, prop(1), prop(1), didYouMean(c.suggest(prop(1), needs)), list(needs))
			}
			return
		}
		switch prop(2) {
		case "", "*", "result":
		case "outputs":
			if out := prop(3); out != "" && out != "*" {
				g.checkOutput(target, out, func(format string, args ...any) { report(RuleExpr, format, args...) })
			}
		default:
			report(RuleExpr, "needs.%s has no %q: a job's needs entry has outputs and result", prop(1), prop(2))
		}
	case "jobs":
		if prop(1) == "" || prop(1) == "*" {
			return
		}
		target := s.wf.jobIndex[prop(1)]
		if target == nil {
			ids := make([]string, len(s.wf.jobs))
			for i, jj := range s.wf.jobs {
				ids[i] = jj.id
			}
			report(RuleExpr, "the workflow has no job %q%s (jobs: %s)", prop(1), didYouMean(c.suggest(prop(1), ids)), list(ids))
			return
		}
		switch prop(2) {
		case "", "*", "result":
		case "outputs":
			if out := prop(3); out != "" && out != "*" {
				g.checkOutput(target, out, func(format string, args ...any) { report(RuleExpr, format, args...) })
			}
		default:
			report(RuleExpr, "jobs.%s has no %q: a job there has outputs and result", prop(1), prop(2))
		}
	case "steps":
		j := s.job
		if j == nil || prop(1) == "" || prop(1) == "*" {
			return
		}
		limit := len(j.stepIDs)
		if u.step > 0 {
			limit = u.step - 1 // a step sees the steps before it
		}
		var ids []string
		found := false
		for _, sid := range j.stepIDs[:min(limit, len(j.stepIDs))] {
			if sid == "" {
				continue
			}
			ids = append(ids, sid)
			if strings.EqualFold(sid, prop(1)) {
				found = true
			}
		}
		if !found {
			later := slices.ContainsFunc(j.stepIDs, func(sid string) bool { return strings.EqualFold(sid, prop(1)) })
			switch {
			case later:
				report(RuleExpr, "step %q runs after this one, so steps.%s is not there yet", prop(1), prop(1))
			case len(ids) == 0:
				report(RuleExpr, "no step before this one has an id, so steps.%s is not there", prop(1))
			default:
				report(RuleExpr, "no step before this one has the id %q%s (ids: %s)", prop(1), didYouMean(c.suggest(prop(1), ids)), list(ids))
			}
			return
		}
		switch prop(2) {
		case "", "*", "outputs", "outcome", "conclusion":
		default:
			report(RuleExpr, "steps.%s has no %q: a step there has outputs, outcome and conclusion", prop(1), prop(2))
		}
	case "inputs":
		if prop(1) == "" || prop(1) == "*" {
			return
		}
		names, declared := s.wf.inputNames()
		if !declared {
			report(RuleExpr, "the workflow has no inputs: declare them under on.workflow_dispatch.inputs or on.workflow_call.inputs")
			return
		}
		if !slices.ContainsFunc(names, func(n string) bool { return strings.EqualFold(n, prop(1)) }) {
			report(RuleExpr, "the workflow declares no input %q%s (inputs: %s)", prop(1), didYouMean(c.suggest(prop(1), names)), list(names))
		}
	}
}

// checkOutput checks that job target declares output out, when its
// outputs are known.
func (g *ghCompiler) checkOutput(target *ghJob, out string, report func(format string, args ...any)) {
	var names []string
	switch {
	case target.uses.set():
		local, _ := parseCallRef(target.uses.s)
		ce := g.parsed[local]
		if local == "" || ce == nil || ce.wf.call == nil {
			return // another repository's workflow, or one reported already
		}
		for _, o := range ce.wf.call.outputs {
			names = append(names, o.name)
		}
	default:
		names = sortedKeys(target.outputs)
	}
	if slices.ContainsFunc(names, func(n string) bool { return strings.EqualFold(n, out) }) {
		return
	}
	if len(names) == 0 {
		report("job %q has no outputs, so it has no output %q", target.id, out)
		return
	}
	report("job %q has no output %q%s (outputs: %s)", target.id, out, didYouMean(g.c.suggest(out, names)), list(names))
}

// keys returns the names the matrix context has: the axes and the keys of
// include entries. known is false when part of the matrix is computed.
func (m *ghMatrix) keys() (keys []string, known bool) {
	if m.expr.set() || m.includeExpr.set() {
		return nil, false
	}
	for _, a := range m.axes {
		keys = append(keys, a.name)
	}
	for _, r := range m.include {
		if r.expr.set() {
			return nil, false
		}
		for _, k := range r.keys {
			if !slices.ContainsFunc(keys, func(x string) bool { return strings.EqualFold(x, k) }) {
				keys = append(keys, k)
			}
		}
	}
	return keys, true
}

// inputNames returns the inputs the workflow declares; declared is false
// when it declares no inputs at all.
func (wf *ghWorkflow) inputNames() (names []string, declared bool) {
	for _, in := range wf.dispatch {
		names = append(names, in.Name)
	}
	if wf.call != nil {
		for _, in := range wf.call.inputs {
			if !slices.Contains(names, in.Name) {
				names = append(names, in.Name)
			}
		}
	}
	return names, len(names) > 0
}

// walkExpr calls f for n and every node below it.
func walkExpr(n expr.Node, f func(expr.Node)) {
	if n == nil {
		return
	}
	f(n)
	switch x := n.(type) {
	case *expr.Property:
		walkExpr(x.X, f)
	case *expr.Index:
		walkExpr(x.X, f)
		walkExpr(x.Index, f)
	case *expr.Not:
		walkExpr(x.X, f)
	case *expr.Binary:
		walkExpr(x.X, f)
		walkExpr(x.Y, f)
	case *expr.Call:
		for _, a := range x.Args {
			walkExpr(a, f)
		}
	}
}

// ghEval evaluates the expressions of one job variant: the job, its
// matrix values and the call its workflow is compiled for.
type ghEval struct {
	g       *ghCompiler
	wf      *ghWorkflow
	job     *ghJob
	variant *ghVariant
	call    *ghCall
	env     *expr.GitHubEnv
}

// environment returns what is known when the job is compiled: the matrix
// variant, the inputs (bound by a call, or given with a manual event),
// and, when Options.Event is set, the github and vars contexts. The rest
// is known only at run time.
func (x *ghEval) environment() *expr.GitHubEnv {
	if x.env != nil {
		return x.env
	}
	base := x.g.baseEnv(x.wf, x.call)
	env := &expr.GitHubEnv{Contexts: make(map[string]any, len(base.Contexts)+1), Unknown: base.Unknown}
	maps.Copy(env.Contexts, base.Contexts)
	switch {
	case x.variant != nil:
		env.Contexts["matrix"] = x.variant.values
	case x.job != nil && x.job.matrix != nil:
		env.Unknown = maps.Clone(base.Unknown)
		env.Unknown["matrix"] = true
	default:
		env.Contexts["matrix"] = map[string]any{}
	}
	x.env = env
	return env
}

// baseEnv is what every job of wf compiled for call knows, the matrix
// aside; made once per workflow and call. Its maps are shared: copy them
// before changing them.
func (g *ghCompiler) baseEnv(wf *ghWorkflow, call *ghCall) *expr.GitHubEnv {
	key := ghEnvKey{wf, call}
	if env, ok := g.envs[key]; ok {
		return env
	}
	env := &expr.GitHubEnv{
		Contexts: map[string]any{},
		Unknown:  map[string]bool{"needs": true, "steps": true, "job": true, "jobs": true, "runner": true, "secrets": true, "env": true, "strategy": true},
	}
	ev := g.c.opts.Event
	switch {
	case call != nil:
		env.Contexts["inputs"] = call.inputs
	case ev != nil && wf != nil:
		env.Contexts["inputs"] = wf.eventInputs(ev)
	default:
		env.Unknown["inputs"] = true
	}
	if ev != nil {
		if g.github == nil {
			g.github = ghGithubContext(ev)
		}
		env.Contexts["github"] = g.github
		if ev.Variables != nil {
			env.Contexts["vars"] = anyMap(ev.Variables)
		} else {
			env.Unknown["vars"] = true
		}
	} else {
		env.Unknown["github"], env.Unknown["vars"] = true, true
	}
	if g.envs == nil {
		g.envs = map[ghEnvKey]*expr.GitHubEnv{}
	}
	g.envs[key] = env
	return env
}

type ghEnvKey struct {
	wf   *ghWorkflow
	call *ghCall
}

// eventInputs is the inputs context of a run of the workflow for ev: the
// inputs of a manual run, over the defaults of those not given; empty
// for other events.
func (wf *ghWorkflow) eventInputs(ev *Event) map[string]any {
	inputs := map[string]any{}
	if canonicalEvent(ev.Name) != "manual" {
		return inputs
	}
	for _, in := range wf.dispatch {
		if in.Default != nil {
			inputs[in.Name] = typedInput(in.Type, *in.Default)
		}
	}
	maps.Copy(inputs, ev.Inputs)
	return inputs
}

// ghGithubFields are the properties of the github context; those the
// event does not give are known only at run time.
var ghGithubFields = []string{
	"action", "action_path", "action_ref", "action_repository", "action_status", "actor", "actor_id",
	"api_url", "base_ref", "env", "event", "event_name", "event_path", "graphql_url", "head_ref", "job",
	"path", "ref", "ref_name", "ref_protected", "ref_type", "repository", "repository_id",
	"repository_owner", "repository_owner_id", "repositoryUrl", "retention_days", "run_attempt",
	"run_id", "run_number", "secret_source", "server_url", "sha", "token", "triggering_actor",
	"workflow", "workflow_ref", "workflow_sha", "workspace",
}

// ghGithubContext is the github context for ev: what the event tells, in
// GitHub's terms, and Unknown for the rest.
func ghGithubContext(ev *Event) map[string]any {
	ctx := make(map[string]any, len(ghGithubFields))
	for _, f := range ghGithubFields {
		ctx[f] = expr.Unknown
	}
	set := func(k, v string) {
		if v != "" {
			ctx[k] = v
		}
	}
	name := ev.Name
	switch canonicalEvent(name) {
	case "manual":
		name = "workflow_dispatch"
	case "push", "pull_request":
		name = canonicalEvent(name)
	}
	set("event_name", name)
	branch, tag := refNames(ev)
	set("ref", ev.Ref)
	switch {
	case name == "pull_request" || name == "pull_request_target":
		set("head_ref", branch)
		set("base_ref", ev.BaseBranch)
		if ev.Ref == "" {
			ctx["ref"] = expr.Unknown
		}
	case tag != "":
		set("ref_name", tag)
		set("ref_type", "tag")
		if ev.Ref == "" {
			set("ref", "refs/tags/"+tag)
		}
		ctx["base_ref"], ctx["head_ref"] = "", ""
	case branch != "":
		set("ref_name", branch)
		set("ref_type", "branch")
		if ev.Ref == "" {
			set("ref", "refs/heads/"+branch)
		}
		ctx["base_ref"], ctx["head_ref"] = "", ""
	}
	set("sha", ev.SHA)
	set("actor", ev.Actor)
	if ev.Payload != nil {
		ctx["event"] = ev.Payload
	}
	return ctx
}

// eval evaluates template t (as written at node, or text without one);
// known is false when a part depends on the run. Errors are reported.
func (x *ghEval) eval(t ghText) (v any, known bool) {
	if !hasExpr(t.s) {
		return t.s, true
	}
	tm := x.g.parseTemplate(t.s, t.node, false)
	if !tm.ok {
		return nil, false
	}
	env := x.environment()
	if tm.single() {
		v, err := x.evalExpr(tm.segs[0].x, env)
		if err != nil {
			x.evalError(tm, tm.segs[0], err)
			return nil, false
		}
		return v, v != expr.Unknown
	}
	var b strings.Builder
	b.Grow(len(t.s))
	for _, seg := range tm.segs {
		if seg.x == nil {
			b.WriteString(seg.text)
			continue
		}
		v, err := x.evalExpr(seg.x, env)
		if err != nil {
			x.evalError(tm, seg, err)
			return nil, false
		}
		if v == expr.Unknown {
			return nil, false
		}
		if s, ok := v.(string); ok {
			b.WriteString(s)
		} else {
			b.WriteString(expr.ToString(v))
		}
	}
	return b.String(), true
}

// evalExpr evaluates n, reading matrix.NAME, the commonest expression,
// straight from the variant.
func (x *ghEval) evalExpr(n expr.Node, env *expr.GitHubEnv) (any, error) {
	if p, ok := n.(*expr.Property); ok && x.variant != nil {
		if ctx, ok := p.X.(*expr.Context); ok && strings.EqualFold(ctx.Name, "matrix") {
			if v, ok := x.variant.values[p.Name]; ok {
				switch v.(type) {
				case string, bool, float64, nil:
					return v, nil
				}
			}
		}
	}
	return expr.EvalGitHub(n, env)
}

// evalError reports an expression that fails with what is known now: it
// fails at run time too.
func (x *ghEval) evalError(tm *ghTemplate, seg ghSeg, err error) {
	if tm.node == nil {
		return
	}
	var ee *expr.EvalError
	off, msg := 0, err.Error()
	if errors.As(err, &ee) {
		off, msg = ee.Offset, ee.Msg
	}
	line, col := x.g.c.scalarPos(tm.node, seg.off+off)
	x.g.c.report(line, col, RuleExpr, "%s", msg)
}

// render returns the text of t with the expressions that can be
// evaluated now replaced by their values, and the others as written, for
// the run: "test-${{ matrix.os }}-${{ github.ref }}" is
// "test-linux-${{ github.ref }}" without the event.
func (x *ghEval) render(t ghText) string {
	v, known := x.eval(t)
	if known {
		return expr.ToString(v)
	}
	tm := x.g.parseTemplate(t.s, t.node, false)
	if !tm.ok || tm.single() {
		return t.s
	}
	env := x.environment()
	var b strings.Builder
	for _, seg := range tm.segs {
		if seg.x == nil {
			b.WriteString(seg.text)
			continue
		}
		if v, err := expr.EvalGitHub(seg.x, env); err == nil && v != expr.Unknown {
			b.WriteString(expr.ToString(v))
			continue
		}
		b.WriteString("${{")
		b.WriteString(seg.text)
		b.WriteString("}}")
	}
	return b.String()
}

// renderName renders a job's name for a variant. A name without
// expressions gets the variant's values appended, as GitHub does.
func (x *ghEval) renderName(t ghText) string {
	if x.variant != nil && !hasExpr(t.s) {
		return variantName(t.s, *x.variant)
	}
	return x.render(t)
}

// concurrency renders a concurrency group for the variant: its group
// with what is known, and cancel-in-progress when it is an expression
// that can be evaluated (false, the safe side, when it cannot: a job then
// waits for the one before it instead of cancelling it).
func (x *ghEval) concurrency(c *cikit.Concurrency, group *yaml.Node, cancel ghText) *cikit.Concurrency {
	out := *c
	out.Group = x.render(ghText{c.Group, group})
	if cancel.set() {
		out.CancelInProgress, _ = x.bool(cancel)
	}
	return &out
}

// value evaluates t to a value; known is false when it depends on the
// run.
func (x *ghEval) value(t ghText) (any, bool) { return x.eval(t) }

// bool evaluates a boolean that may be an expression.
func (x *ghEval) bool(t ghText) (b, known bool) {
	v, known := x.eval(t)
	if !known {
		return false, false
	}
	return expr.Truthy(v), true
}

// minutes evaluates timeout-minutes.
func (x *ghEval) minutes(t ghText) time.Duration {
	v, known := x.eval(t)
	if !known {
		return 0
	}
	switch v := v.(type) {
	case float64:
		return minutesDuration(renderValue(v))
	case string:
		return minutesDuration(v)
	}
	return 0
}

// condition returns the parsed expression of a condition, nil when it is
// absent or reported.
func (g *ghCompiler) condition(t ghText) (expr.Node, string) {
	if !t.set() {
		return nil, ""
	}
	tm := g.parseTemplate(t.s, t.node, true)
	if !tm.ok || len(tm.segs) != 1 || tm.segs[0].x == nil {
		return nil, ""
	}
	return tm.segs[0].x, strings.TrimSpace(tm.segs[0].text)
}

// jobCondition reads a job's if: into when it runs and what is left to
// decide at run time. GitHub adds success() to a condition that calls no
// status function; a condition that does decides alone how the job reacts
// to its needs' outcome. What the compiler knows (the event, the inputs)
// is used to decide: a condition known to be false makes the job never
// run (it stays in the plan, so that the jobs needing it react as GitHub's
// do: skipped, unless their own condition says otherwise).
func (x *ghEval) jobCondition(t ghText) (cikit.When, *cikit.Condition) {
	n, src := x.g.condition(t)
	if n == nil {
		return "", nil
	}
	truth, err := condTruth(n, x.environment())
	if err != nil {
		tm := x.g.parseTemplate(t.s, t.node, true)
		x.evalError(tm, tm.segs[0], err)
		return "", nil
	}
	status := expr.UsesStatus(n)
	switch truth {
	case expr.False:
		return cikit.WhenNever, nil
	case expr.True:
		if status {
			return cikit.WhenAlways, nil
		}
		return "", nil
	}
	when := statusWhen(n)
	if call, ok := n.(*expr.Call); ok && len(call.Args) == 0 {
		switch strings.ToLower(call.Name) {
		case "success", "failure":
			return when, nil
		}
	}
	return when, &cikit.Condition{Lang: cikit.LangGitHub, Expr: src}
}

// condTruth evaluates n as a condition: only whether it is true matters,
// which can be known when its value is not. a && b is a when a is falsy,
// else b, so it is true exactly when both are, whatever a is when it is
// false; likewise for || and !. This is Kleene's logic over GitHub's
// truthiness: failure() && github.event_name == 'push' is false for a
// pull request although failure() is not known yet.
func condTruth(n expr.Node, env *expr.GitHubEnv) (expr.Tri, error) {
	switch x := n.(type) {
	case *expr.Binary:
		if x.Op != expr.OpAnd && x.Op != expr.OpOr {
			break
		}
		decides := expr.False // the value of a left operand that decides
		if x.Op == expr.OpOr {
			decides = expr.True
		}
		l, err := condTruth(x.X, env)
		if err != nil || l == decides {
			return l, err // the right operand is not evaluated
		}
		r, err := condTruth(x.Y, env)
		if err != nil {
			if l == expr.Unknown {
				return expr.Unknown, nil // at run time it may not be evaluated
			}
			return expr.Unknown, err
		}
		switch {
		case r == decides:
			return r, nil
		case l == expr.Unknown || r == expr.Unknown:
			return expr.Unknown, nil
		}
		return r, nil
	case *expr.Not:
		v, err := condTruth(x.X, env)
		switch v {
		case expr.True:
			return expr.False, err
		case expr.False:
			return expr.True, err
		}
		return v, err
	}
	v, err := expr.EvalGitHub(n, env)
	if err != nil {
		return expr.Unknown, err
	}
	return expr.Condition(v), nil
}

// statusWhen is how a job whose condition is n reacts to the outcome of
// its needs: by the status function that is a top-level conjunct of n
// (success() on success, failure() on failure, always() whatever it is),
// on success when n calls none, and always, leaving the decision to the
// condition, when status functions are used in another way.
func statusWhen(n expr.Node) cikit.When {
	if !expr.UsesStatus(n) {
		return ""
	}
	var conjuncts []expr.Node
	var split func(n expr.Node)
	split = func(n expr.Node) {
		if b, ok := n.(*expr.Binary); ok && b.Op == expr.OpAnd {
			split(b.X)
			split(b.Y)
			return
		}
		conjuncts = append(conjuncts, n)
	}
	split(n)
	for _, c := range conjuncts {
		call, ok := c.(*expr.Call)
		if !ok || len(call.Args) > 0 {
			continue
		}
		switch strings.ToLower(call.Name) {
		case "success":
			return ""
		case "failure":
			return cikit.WhenOnFailure
		case "always":
			return cikit.WhenAlways
		}
	}
	return cikit.WhenAlways
}

// stepCondition reads a step's if: a condition for the runner, nil for
// success() alone (the default).
func (g *ghCompiler) stepCondition(t ghText) *cikit.Condition {
	n, src := g.condition(t)
	if n == nil {
		return nil
	}
	if call, ok := n.(*expr.Call); ok && len(call.Args) == 0 && strings.EqualFold(call.Name, "success") {
		return nil
	}
	return &cikit.Condition{Lang: cikit.LangGitHub, Expr: src}
}

// constantCondition reports a condition that is always true or always
// false whatever the run: it reads no context and calls no status
// function or hashFiles. That is a mistake or a leftover: the if: does
// nothing, or its job or step never runs.
func (g *ghCompiler) constantCondition(t ghText) {
	n, _ := g.condition(t)
	if n == nil || len(expr.References(n)) > 0 || expr.UsesStatus(n) {
		return
	}
	hash := false
	walkExpr(n, func(x expr.Node) {
		if c, ok := x.(*expr.Call); ok && strings.EqualFold(c.Name, "hashFiles") {
			hash = true
		}
	})
	if hash {
		return
	}
	v, err := expr.EvalGitHub(n, &expr.GitHubEnv{})
	if err != nil {
		return // reported as an expression error
	}
	if expr.Truthy(v) {
		g.c.at(t.node, RuleIfCond, "condition %q is always true; remove the if:", t.s)
	} else {
		g.c.at(t.node, RuleIfCond, "condition %q is always false, so this never runs; remove it, or the if:", t.s)
	}
}

// evalValue evaluates t for job j (without variant): for the parts of a
// matrix.
func (g *ghCompiler) evalValue(t ghText, j *ghJob, call *ghCall) (any, bool) {
	if e := g.c.expand; e != nil && e.job == call.pathOf(j.id) {
		return g.evalExpanding(t, j, call)
	}
	x := &ghEval{g: g, wf: j.wf, job: j, call: call}
	x.environment()
	// The matrix is being computed: it is not known yet.
	delete(x.env.Contexts, "matrix")
	x.env.Unknown = maps.Clone(x.env.Unknown)
	x.env.Unknown["matrix"] = true
	return x.eval(t)
}

// ghBinding says what the expressions of a called workflow's jobs mean in
// the run of the caller, where the runner evaluates them: the callee's
// inputs are what the caller passes, its secrets those the caller maps,
// and its jobs are named "caller/job".
type ghBinding struct {
	prefix  string               // "caller/"
	inputs  map[string]expr.Node // by lower-case name
	secrets map[string]expr.Node // by lower-case name; nil with inherit
	// outputs are the outputs of the local reusable workflows that jobs
	// of this workflow call, by lower-case job ID and output name: what
	// needs.JOB.outputs.NAME reads in the expanded jobs.
	outputs map[string]map[string]expr.Node
}

// accessName splits a property access, or an index by a string literal,
// into what is accessed and the name.
func accessName(n expr.Node) (x expr.Node, name string, ok bool) {
	switch a := n.(type) {
	case *expr.Property:
		return a.X, a.Name, a.Name != "*"
	case *expr.Index:
		if lit, isLit := a.Index.(*expr.Literal); isLit {
			if s, isStr := lit.Value.(string); isStr {
				return a.X, s, true
			}
		}
	}
	return nil, "", false
}

// callOutput returns what needs.JOB.outputs.NAME stands for when JOB is
// expanded in place, or nil.
func (b *ghBinding) callOutput(n expr.Node) expr.Node {
	if len(b.outputs) == 0 {
		return nil
	}
	outs, name, ok := accessName(n)
	if !ok {
		return nil
	}
	job, key, ok := accessName(outs)
	if !ok || !strings.EqualFold(key, "outputs") {
		return nil
	}
	ctx, id, ok := accessName(job)
	if !ok {
		return nil
	}
	if c, isCtx := ctx.(*expr.Context); !isCtx || !strings.EqualFold(c.Name, "needs") {
		return nil
	}
	return b.outputs[strings.ToLower(id)][strings.ToLower(name)]
}

// rewrite returns s with its expressions rewritten for the caller's run;
// a condition (cond) is one expression without ${{ }}.
func (b *ghBinding) rewrite(s string, cond bool) string {
	if cond {
		n, err := expr.ParseGitHub(s)
		if err != nil {
			return s
		}
		return b.transform(n).String()
	}
	if !hasExpr(s) {
		return s
	}
	segs, err := expr.SplitTemplate(s)
	if err != nil {
		return s
	}
	var out strings.Builder
	for _, seg := range segs {
		if !seg.Expr {
			out.WriteString(seg.Text)
			continue
		}
		n, err := expr.ParseGitHub(seg.Text)
		if err != nil {
			return s
		}
		n = b.transform(n)
		if v, ok := constantValue(n); ok {
			// What the caller passed is known: write it in.
			out.WriteString(expr.ToString(v))
			continue
		}
		out.WriteString("${{ ")
		out.WriteString(n.String())
		out.WriteString(" }}")
	}
	return out.String()
}

// constantValue evaluates an expression that reads no context and calls
// no status function or hashFiles; ok is false for others.
func constantValue(n expr.Node) (any, bool) {
	if len(expr.References(n)) > 0 || expr.UsesStatus(n) {
		return nil, false
	}
	pure := true
	walkExpr(n, func(x expr.Node) {
		if c, ok := x.(*expr.Call); ok && strings.EqualFold(c.Name, "hashFiles") {
			pure = false
		}
	})
	if !pure {
		return nil, false
	}
	v, err := expr.EvalGitHub(n, &expr.GitHubEnv{})
	if err != nil || v == expr.Unknown {
		return nil, false
	}
	switch v.(type) {
	case []any, map[string]any:
		return nil, false // kept as written: a template shows them as Array and Object
	}
	return v, true
}

// transform rewrites the context uses of n.
func (b *ghBinding) transform(n expr.Node) expr.Node {
	if r := b.callOutput(n); r != nil {
		return r
	}
	switch x := n.(type) {
	case *expr.Property:
		if ctx, ok := x.X.(*expr.Context); ok {
			if r := b.replace(ctx, x.Name); r != nil {
				return r
			}
			return x
		}
		c := *x
		c.X = b.transform(x.X)
		return &c
	case *expr.Index:
		if ctx, ok := x.X.(*expr.Context); ok {
			if lit, ok := x.Index.(*expr.Literal); ok {
				if name, ok := lit.Value.(string); ok {
					if r := b.replace(ctx, name); r != nil {
						return r
					}
				}
			}
		}
		c := *x
		c.X = b.transform(x.X)
		if x.Index != nil {
			c.Index = b.transform(x.Index)
		}
		return &c
	case *expr.Not:
		c := *x
		c.X = b.transform(x.X)
		return &c
	case *expr.Binary:
		c := *x
		c.X, c.Y = b.transform(x.X), b.transform(x.Y)
		return &c
	case *expr.Call:
		c := *x
		c.Args = make([]expr.Node, len(x.Args))
		for i, a := range x.Args {
			c.Args[i] = b.transform(a)
		}
		return &c
	}
	return n
}

// replace returns what ctx.name stands for in the caller's run, or nil
// when it stays.
func (b *ghBinding) replace(ctx *expr.Context, name string) expr.Node {
	switch strings.ToLower(ctx.Name) {
	case "inputs":
		if r, ok := b.inputs[strings.ToLower(name)]; ok {
			return r
		}
	case "secrets":
		if b.secrets == nil || strings.EqualFold(name, "GITHUB_TOKEN") {
			return nil // inherited, or the token every workflow has
		}
		if r, ok := b.secrets[strings.ToLower(name)]; ok {
			return r
		}
		return &expr.Literal{Value: ""}
	case "needs", "jobs":
		if name == "*" || b.prefix == "" {
			return nil
		}
		return &expr.Index{X: &expr.Context{Name: "needs"}, Index: &expr.Literal{Value: b.prefix + name}}
	}
	return nil
}

// literalOf is the expression that stands for a known value.
func literalOf(v any) expr.Node {
	switch v := v.(type) {
	case nil, bool, float64, string:
		return &expr.Literal{Value: v}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return &expr.Literal{Value: fmt.Sprint(v)}
	}
	return &expr.Call{Name: "fromJSON", Args: []expr.Node{&expr.Literal{Value: string(b)}}}
}

// apply rewrites every expression of a called workflow's job for the run
// of the caller. Maps and slices the variants share are copied first.
func (b *ghBinding) apply(s *cikit.JobSpec) {
	rw := func(v string) string { return b.rewrite(v, false) }
	rwMap := func(m map[string]string) map[string]string {
		if m == nil {
			return nil
		}
		out := make(map[string]string, len(m))
		for k, v := range m {
			out[k] = rw(v)
		}
		return out
	}
	s.Env = rwMap(s.Env)
	s.Outputs = rwMap(s.Outputs)
	for i, l := range s.RunsOn {
		if hasExpr(l) {
			s.RunsOn = slices.Clone(s.RunsOn)
			s.RunsOn[i] = rw(l)
		}
	}
	s.Image = rw(s.Image)
	rwImage := func(o *cikit.ImageOptions) *cikit.ImageOptions {
		if o == nil {
			return nil
		}
		o = o.Clone()
		o.User, o.Env = rw(o.User), rwMap(o.Env)
		if o.Credentials != nil {
			o.Credentials.Username, o.Credentials.Password = rw(o.Credentials.Username), rw(o.Credentials.Password)
		}
		for i, w := range o.Options {
			o.Options[i] = rw(w)
		}
		return o
	}
	s.ImageOptions = rwImage(s.ImageOptions)
	if s.If != nil {
		s.If = &cikit.Condition{Lang: s.If.Lang, Expr: b.rewrite(s.If.Expr, true)}
	}
	if s.Concurrency != nil {
		c := *s.Concurrency
		c.Group = rw(c.Group)
		s.Concurrency = &c
	}
	if s.Environment != nil {
		e := *s.Environment
		e.Name, e.URL = rw(e.Name), rw(e.URL)
		s.Environment = &e
	}
	services := make([]cikit.Service, len(s.Services))
	for i, svc := range s.Services {
		svc.Image = rw(svc.Image)
		svc.Env, svc.Options = rwMap(svc.Env), rw(svc.Options)
		svc.ImageOptions = rwImage(svc.ImageOptions)
		if svc.Health != nil {
			h := *svc.Health
			h.Cmd = rw(h.Cmd)
			svc.Health = &h
		}
		services[i] = svc
	}
	if s.Services != nil {
		s.Services = services
	}
	if m, ok := s.Matrix["*"]; ok {
		s.Matrix = map[string]string{"*": b.rewriteMatrix(m)}
	}
	steps := make([]cikit.Step, len(s.Steps))
	for i, st := range s.Steps {
		st.Name, st.Run, st.WorkingDirectory = rw(st.Name), rw(st.Run), rw(st.WorkingDirectory)
		st.With, st.Env = rwMap(st.With), rwMap(st.Env)
		if st.If != nil {
			st.If = &cikit.Condition{Lang: st.If.Lang, Expr: b.rewrite(st.If.Expr, true)}
		}
		steps[i] = st
	}
	s.Steps = steps
}

// rewriteMatrix rewrites a matrix left for the run: one expression, or
// the matrix as written in JSON, whose strings are rewritten one by one so
// that the JSON stays valid.
func (b *ghBinding) rewriteMatrix(m string) string {
	var v any
	if err := json.Unmarshal([]byte(m), &v); err != nil {
		return b.rewrite(m, false)
	}
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case string:
			return b.rewrite(x, false)
		case []any:
			for i := range x {
				x[i] = walk(x[i])
			}
		case map[string]any:
			for k := range x {
				x[k] = walk(x[k])
			}
		}
		return v
	}
	return jsonText(walk(v))
}

// secretsOf lists the secrets a job reads: the names of the secrets
// context its expressions use, sorted; GITHUB_TOKEN is not one, as the
// platform issues it.
func secretsOf(s *cikit.JobSpec) []string {
	seen := map[string]bool{}
	scan := func(v string, cond bool) {
		if !cond && !hasExpr(v) || cond && !strings.Contains(strings.ToLower(v), "secrets") {
			return
		}
		var nodes []expr.Node
		if cond {
			if n, err := expr.ParseGitHub(v); err == nil {
				nodes = append(nodes, n)
			}
		} else if segs, err := expr.SplitTemplate(v); err == nil {
			for _, seg := range segs {
				if !seg.Expr {
					continue
				}
				if n, err := expr.ParseGitHub(seg.Text); err == nil {
					nodes = append(nodes, n)
				}
			}
		}
		for _, n := range nodes {
			for _, r := range expr.References(n) {
				if len(r.Path) > 1 && r.Path[0] == "secrets" && r.Path[1] != "*" && r.Path[1] != "github_token" {
					seen[strings.ToUpper(r.Path[1])] = true
				}
			}
		}
	}
	for _, v := range s.Env {
		scan(v, false)
	}
	for _, svc := range s.Services {
		for _, v := range svc.Env {
			scan(v, false)
		}
	}
	for _, st := range s.Steps {
		scan(st.Run, false)
		for _, v := range st.With {
			scan(v, false)
		}
		for _, v := range st.Env {
			scan(v, false)
		}
	}
	for _, v := range s.Outputs {
		scan(v, false)
	}
	if len(seen) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(seen))
}
