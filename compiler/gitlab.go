package compiler

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/cikit/cikit/compiler/expr"
)

// FormatGitLab is GitLab CI's format, the `.gitlab-ci.yml` file.
const FormatGitLab Format = "gitlab"

// Rules of the GitLab front end.
const (
	RuleWorkflow   = "workflow"   // workflow:rules keep the pipeline from running for the event
	RuleExtends    = "extends"    // extends names no job, loops, or nests too deep
	RuleReference  = "reference"  // a !reference tag that names nothing
	RuleExpression = "expression" // an invalid rules:if or only/except:variables expression
)

// Keys GitLab knows, sorted: they are listed in messages as they are.
var (
	glTopKeys = []string{"after_script", "before_script", "cache", "default", "image", "include",
		"services", "spec", "stages", "types", "variables", "workflow"}
	glJobKeys = []string{"after_script", "allow_failure", "artifacts", "before_script", "cache",
		"coverage", "dast_configuration", "dependencies", "environment", "except", "extends", "hooks",
		"id_tokens", "identity", "image", "inherit", "interruptible", "manual_confirmation", "needs",
		"only", "pages", "parallel", "release", "resource_group", "retry", "rules", "run", "script",
		"secrets", "services", "stage", "start_in", "tags", "timeout", "trigger", "type", "variables", "when"}
	glDefaultKeys = []string{"after_script", "artifacts", "before_script", "cache", "hooks",
		"id_tokens", "image", "interruptible", "retry", "services", "tags", "timeout"}
	// glGlobalDefaults are the deprecated top-level forms of default keys.
	glGlobalDefaults = []string{"after_script", "before_script", "cache", "image", "services"}
	glWorkflowKeys   = []string{"auto_cancel", "name", "rules"}
	glDefaultStages  = []string{"build", "test", "deploy"}
)

// glFront is the state of one GitLab compilation.
type glFront struct {
	*checker
	vars *glVars // what the event tells, without the file's variables
	top  *glv    // the configuration, includes merged
	// named indexes the top-level keys of top.
	named map[string]*glEntry
	// extended holds the values of top-level keys with their extends
	// merged in; extending marks those being merged, to find loops.
	extended  map[string]*glv
	extending map[string]bool
	// extDepth is how many levels of extends a key has below it, and
	// extDeepest its parent with the most, for messages.
	extDepth   map[string]int
	extDeepest map[string]string
	// derefs counts !reference resolutions, bounded like aliases;
	// derefed remembers the values already resolved, which extends and
	// default share between many jobs.
	derefs  int
	derefed map[*glv]*glv
	// parsed remembers the conditions parsed: templates share them
	// between many jobs.
	parsed map[string]expr.Node
	// readWork counts the entries read into jobs (steps, paths, tags …):
	// extends lets a small file give many jobs a large template.
	readWork int
	// incomplete is set when a local include could not be read: names
	// the pipeline refers to may be defined there, so their absence is
	// not reported again. offline lists the includes a pure compiler
	// cannot read (remote, template, project, component).
	incomplete bool
	offline    []*glv
	included   int      // files read, for the include limit
	including  []string // the include chain, for loops
	mergeWork  int
	varWork    int // bytes variable expansion made, for maxVarExpansionWork
	// listed holds the repository's files, by the most listed, for
	// rules:exists.
	listed map[int]glListing
	// workflowRules records that the pipeline has workflow:rules, which
	// drops the default of only.
	workflowRules bool
	// runWarnings are what the pipeline asks of its run that is not
	// honoured yet (workflow:name …), for the Warnings of every job.
	runWarnings []string
	stages      []string
	stageIndex  map[string]int
	globals     *glVarsDecl // the pipeline's variables, workflow's included
	defaults    *glv        // the default keys, deprecated globals merged
}

// compileGitLab is the front end of GitLab CI's format.
func compileGitLab(c *checker, root *yaml.Node) *draft {
	g := &glFront{checker: c, vars: newGLVars(c.opts.Event)}
	d := &draft{}
	if root == nil || isNull(root) {
		c.report(1, 1, RuleJobs, "no jobs: the file is empty; a job is a top-level key with a script")
		return d
	}
	top := c.glConvert(root, "")
	if top.kind != glMap {
		g.gat(top, RuleType, "a GitLab pipeline must be a mapping of keywords and jobs, got %s", top.what())
		return d
	}
	g.top = g.includes(top, c.file)
	g.named = make(map[string]*glEntry, len(g.top.keys))
	for i := range g.top.keys {
		g.named[g.top.keys[i].name] = &g.top.keys[i]
	}
	g.extended = map[string]*glv{}
	g.extending = map[string]bool{}
	g.extDepth = map[string]int{}
	g.extDeepest = map[string]string{}

	g.readStages()
	g.readGlobals()
	if !g.readWorkflow() {
		return d
	}
	d.stages = g.stages
	if len(g.globals.vals) > 0 {
		d.env = g.env(g.globals, g.vars.given)
	}
	jobs := g.readJobs()
	if !slices.ContainsFunc(jobs, func(j *glJob) bool { return j.in }) {
		offline := ""
		if len(g.offline) > 0 {
			offline = fmt.Sprintf("; includes the compiler cannot read (line %d) may add some", g.offline[0].n.Line)
		}
		switch {
		case g.incomplete:
			// The jobs may all be in the includes that failed.
		case g.anyVisibleJob() && g.vars.known:
			g.report(1, 1, RuleJobs, "no jobs run for this event: rules and only/except leave out every job%s", offline)
		case g.anyVisibleJob():
			g.report(1, 1, RuleJobs, "no jobs can run: rules leave out every job for any event%s", offline)
		case len(g.offline) > 0:
			for _, inc := range g.offline {
				g.gat(inc, RuleInclude, "the pipeline has no jobs of its own, and the compiler cannot read this include: it reads only local files")
			}
		default:
			g.report(1, 1, RuleJobs, "no jobs: the pipeline defines only hidden jobs (names starting with \".\") and keywords; a job is a top-level key with a script")
		}
		return d
	}
	if !slices.ContainsFunc(jobs, func(j *glJob) bool {
		return j.in && j.stage != 0 && j.stage != len(g.stages)-1
	}) {
		g.report(1, 1, RuleJobs, "the pipeline has only .pre and .post jobs, and GitLab does not run such a pipeline")
		return d
	}
	d.jobs = g.finish(jobs)
	if len(g.runWarnings) > 0 {
		for _, j := range d.jobs {
			j.spec.Warnings = slices.Concat(g.runWarnings, j.spec.Warnings)
		}
	}
	return d
}

// readStages reads stages (or the deprecated types), with .pre first and
// .post last as GitLab adds them.
func (g *glFront) readStages() {
	var list *glEntry
	for _, name := range []string{"stages", "types"} {
		if e := g.named[name]; e != nil && list == nil {
			list = e
		}
	}
	declared := glDefaultStages
	if list != nil {
		v := g.deref(list.val)
		switch {
		case v.isNull():
		case v.kind != glSeq:
			g.gat(v, RuleType, "%q must be a list of stage names, got %s", list.name, v.what())
		default:
			declared = nil
			seen := map[string]bool{}
			for i, item := range g.seqOf(v, true) {
				s, ok := g.text(item)
				if !ok || strings.TrimSpace(s) == "" {
					g.gat(item, RuleStage, "stage %d must be a non-empty name, got %s", i+1, item.what())
					continue
				}
				if seen[s] {
					// GitLab keeps the first; a repeated stage is harmless.
					continue
				}
				seen[s] = true
				declared = append(declared, s)
			}
		}
	}
	g.stages = []string{".pre"}
	for _, s := range declared {
		if s != ".pre" && s != ".post" {
			g.stages = append(g.stages, s)
		}
	}
	g.stages = append(g.stages, ".post")
	g.stageIndex = make(map[string]int, len(g.stages))
	for i, s := range g.stages {
		g.stageIndex[s] = i
	}
}

// readGlobals reads the pipeline's variables and the defaults of jobs:
// default, and the deprecated top-level forms of its keys.
func (g *glFront) readGlobals() {
	g.globals = &glVarsDecl{}
	if e := g.named["variables"]; e != nil {
		g.globals = g.variables(g.deref(e.val), true)
	}
	g.defaults = &glv{kind: glMap, n: nullNode}
	if e := g.named["default"]; e != nil {
		v := g.deref(e.val)
		switch {
		case v.isNull():
		case v.kind != glMap:
			g.gat(v, RuleType, `"default" must be a mapping of job keys, got %s`, v.what())
		default:
			for _, k := range v.keys {
				if !slices.Contains(glDefaultKeys, k.name) {
					g.unknownGLKey(k, "in default", glDefaultKeys)
				}
			}
			g.defaults = v
		}
	}
	for _, name := range glGlobalDefaults {
		e := g.named[name]
		if e == nil {
			continue
		}
		if g.defaults.get(name) != nil {
			g.at(e.key, RuleKey, "%q is set both at the top level and in default; keep the one in default", name)
			continue
		}
		d := *g.defaults
		d.keys = append(slices.Clip(d.keys), *e)
		g.defaults = &d
	}
}

// readWorkflow applies workflow:rules. It returns false when they keep
// the pipeline from running for a known event, which is reported.
func (g *glFront) readWorkflow() bool {
	e := g.named["workflow"]
	if e == nil {
		return true
	}
	v := g.deref(e.val)
	if v.isNull() {
		return true
	}
	if v.kind != glMap {
		g.gat(v, RuleType, `"workflow" must be a mapping with "rules", got %s`, v.what())
		return true
	}
	var rules []*glRule
	var rulesEntry *glEntry
	for i, k := range v.keys {
		switch k.name {
		case "rules":
			rules = g.rules(k.val, ruleWorkflow)
			if k.val.kind == glSeq {
				g.workflowRules = true
				rulesEntry = &v.keys[i]
			}
		case "name":
			if n, ok := g.str(g.deref(k.val), "name"); ok && n != "" {
				g.runWarnings = append(g.runWarnings, g.notHonoured(k.key, "workflow:name is not shown yet: the run is not named by it"))
			}
		case "auto_cancel":
			if !k.val.isNull() {
				g.runWarnings = append(g.runWarnings, g.notHonoured(k.key, glAutoCancelWarning))
			}
		default:
			g.unknownGLKey(k, "in workflow", glWorkflowKeys)
		}
	}
	if rulesEntry == nil {
		return true
	}
	dec := g.decideRules(rules, g.vars.with(g.globals.vals))
	if !dec.in && g.vars.known {
		at := rulesEntry.key
		if dec.rule != nil {
			at = dec.rule.node.n
		}
		g.at(at, RuleWorkflow, "the pipeline does not run for this event (workflow:rules)")
		return false
	}
	// Without an event (a lint, a graph) the pipeline is kept whatever
	// its workflow says: the jobs are what is being looked at.
	if dec.rule != nil && dec.rule.variables != nil {
		g.globals = g.globals.overlay(dec.rule.variables)
	}
	if dec.rule != nil && dec.rule.autoCancel != nil {
		g.runWarnings = append(g.runWarnings, g.notHonoured(dec.rule.autoCancel, glAutoCancelWarning))
	}
	return true
}

// readJobs reads every job of the pipeline, in file order, and decides
// which of them the pipeline has.
func (g *glFront) readJobs() []*glJob {
	var jobs []*glJob
	for i := range g.top.keys {
		e := &g.top.keys[i]
		switch {
		case slices.Contains(glTopKeys, e.name):
			if e.name == "spec" {
				// The header of a component or of a file with inputs:
				// its inputs are read where the file is included.
				continue
			}
		case strings.HasPrefix(e.name, "."):
			// Hidden jobs are templates for extends, !reference and
			// anchors; their extends are checked like a job's.
			g.extendedValue(e.name)
		default:
			if j := g.job(e); j != nil {
				jobs = append(jobs, j)
			}
		}
	}
	return jobs
}

// anyVisibleJob reports whether the pipeline defines a job, excluded or
// not.
func (g *glFront) anyVisibleJob() bool {
	for _, e := range g.top.keys {
		if !slices.Contains(glTopKeys, e.name) && !strings.HasPrefix(e.name, ".") {
			return true
		}
	}
	return false
}

// unknownGLKey reports a key GitLab does not know where it is written.
func (g *glFront) unknownGLKey(e glEntry, where string, valid []string) {
	if hint := g.suggest(e.name, valid); hint != "" {
		g.at(e.key, RuleKey, "unknown key %q %s%s", e.name, where, didYouMean(hint))
		return
	}
	g.at(e.key, RuleKey, "unknown key %q %s (valid keys: %s)", e.name, where, list(valid))
}

// text returns the text of a scalar, ok false for anything else.
func (g *glFront) text(v *glv) (string, bool) {
	if v == nil || v.kind != glScalar {
		return "", false
	}
	return v.text, true
}

// str reads a value that must be a string (numbers and booleans count:
// GitLab reads them as their text); null is "not set".
func (g *glFront) str(v *glv, key string) (string, bool) {
	if v.isNull() {
		return "", false
	}
	if v.kind != glScalar {
		g.gat(v, RuleType, "%q must be a string, got %s", key, v.what())
		return "", false
	}
	return v.text, true
}

// strList reads a string or a list of strings.
func (g *glFront) strList(v *glv, key string) []string {
	if v.isNull() {
		return nil
	}
	var out []string
	for _, it := range g.seqOf(v, false) {
		if it.kind != glScalar {
			g.gat(it, RuleType, "%q must be a string or a list of strings, got %s", key, it.what())
			continue
		}
		out = append(out, it.text)
	}
	return out
}

// boolean reads true or false; null is "not set".
func (g *glFront) boolean(v *glv, key string) (b, ok bool) {
	if v.isNull() {
		return false, false
	}
	if v.kind == glScalar && v.tag() == "!!bool" {
		return strings.EqualFold(v.text, "true"), true
	}
	g.gat(v, RuleType, "%q must be true or false, got %s", key, v.what())
	return false, false
}

// glAutoCancelWarning is the warning of workflow:auto_cancel, set in
// workflow or by a workflow rule.
const glAutoCancelWarning = "workflow:auto_cancel is not honoured yet: a newer pipeline does not cancel this one"

// glVarsDecl is a variables mapping: values as written, the names whose
// values must not be expanded (expand: false), and where each is written.
type glVarsDecl struct {
	names    []string
	vals     map[string]string
	noExpand map[string]bool
	nodes    map[string]*yaml.Node
}

// overlay returns d with o's variables over it.
func (d *glVarsDecl) overlay(o *glVarsDecl) *glVarsDecl {
	if o == nil || len(o.names) == 0 {
		return d
	}
	out := &glVarsDecl{vals: maps.Clone(d.vals), noExpand: maps.Clone(d.noExpand), names: slices.Clone(d.names), nodes: maps.Clone(d.nodes)}
	if out.vals == nil {
		out.vals = map[string]string{}
	}
	if out.nodes == nil {
		out.nodes = map[string]*yaml.Node{}
	}
	for _, n := range o.names {
		if _, ok := out.vals[n]; !ok {
			out.names = append(out.names, n)
		}
		out.vals[n] = o.vals[n]
		out.nodes[n] = o.nodes[n]
		if o.noExpand[n] {
			if out.noExpand == nil {
				out.noExpand = map[string]bool{}
			}
			out.noExpand[n] = true
		} else {
			delete(out.noExpand, n)
		}
	}
	return out
}

// variables reads a variables mapping. Global variables may carry a
// description and options (for manual runs), job variables only a value
// and expand.
func (g *glFront) variables(v *glv, global bool) *glVarsDecl {
	d := &glVarsDecl{}
	if v.isNull() {
		return d
	}
	if v.kind != glMap {
		g.gat(v, RuleType, `"variables" must be a mapping of names to values, got %s`, v.what())
		return d
	}
	valid := []string{"expand", "value"}
	if global {
		valid = []string{"description", "expand", "options", "value"}
	}
	d.vals = make(map[string]string, len(v.keys))
	d.nodes = make(map[string]*yaml.Node, len(v.keys))
	for _, e := range v.keys {
		if e.name == "" || strings.ContainsAny(e.name, "=\x00") {
			g.at(e.key, RuleEnv, "invalid variable name %q: names cannot be empty or hold \"=\"", e.name)
			continue
		}
		val := g.deref(e.val)
		value, noExpand := "", false
		switch val.kind {
		case glNull:
		case glScalar:
			value = val.text
		case glMap:
			for _, k := range val.keys {
				kv := g.deref(k.val)
				switch {
				case k.name == "value":
					if kv.kind == glScalar {
						value = kv.text
					} else if !kv.isNull() {
						g.gat(kv, RuleType, "the value of variable %q must be a string, got %s", e.name, kv.what())
					}
				case k.name == "expand":
					if b, ok := g.boolean(kv, "expand"); ok {
						noExpand = !b
					}
				case k.name == "description" && global:
					g.str(kv, "description")
				case k.name == "options" && global:
					// The choices a person gets for a manual run; the
					// value is the default.
					g.strList(kv, "options")
				default:
					g.unknownGLKey(k, "in variable "+quote(e.name), valid)
				}
			}
		default:
			g.gat(val, RuleType, "variable %q must be a string, a number, a boolean or a mapping with \"value\", got %s", e.name, val.what())
			continue
		}
		if _, dup := d.vals[e.name]; !dup {
			d.names = append(d.names, e.name)
		}
		d.vals[e.name] = value
		d.nodes[e.name] = e.key
		if noExpand {
			if d.noExpand == nil {
				d.noExpand = map[string]bool{}
			}
			d.noExpand[e.name] = true
		}
	}
	return d
}

func quote(s string) string { return `"` + s + `"` }
