package compiler

import (
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/compiler/expr"
)

// glJob is one job of the pipeline as read, before its parallel copies.
type glJob struct {
	name string
	key  *yaml.Node
	spec *cikit.JobSpec
	// in records that the pipeline has the job for the event; broken
	// jobs are kept in, so that their dependents are not reported too.
	in    bool
	stage int
	// needs and dependencies as written; needsSet and depsSet record
	// that the keys are there, even empty.
	needs    []*glv
	needsSet bool
	deps     []*glv
	depsSet  bool
	// parallel is the number of copies (parallel: N); matrix the
	// entries of parallel:matrix.
	parallel     int
	matrix       []glMatrixEntry
	parallelNode *glv
	decls        []*jobDecl // the job's jobDecls, once expanded
	commands     int        // the commands of its scripts, for chargeRead
}

// glMatrixEntry is one entry of parallel:matrix: variables and their
// values, in the order written.
type glMatrixEntry struct {
	names  []string
	values [][]string
}

// Valid values of job keys.
var (
	glJobWhen      = []string{"always", "delayed", "manual", "on_failure", "on_success"}
	glRuleWhen     = []string{"always", "delayed", "manual", "never", "on_failure", "on_success"}
	glWorkflowWhen = []string{"always", "never"}
	glRetryWhen    = []string{"always", "api_failure", "archived_failure", "data_integrity_failure",
		"job_execution_timeout", "runner_system_failure", "runner_unsupported", "scheduler_failure",
		"script_failure", "stale_schedule", "stuck_or_timeout_failure", "unknown_failure", "unmet_prerequisites"}
	glEnvironmentActions = []string{"access", "prepare", "start", "stop", "verify"}
	glCacheKeys          = []string{"fallback_keys", "key", "paths", "policy", "unprotect", "untracked", "when"}
	glArtifactsKeys      = []string{"access", "exclude", "expire_in", "expose_as", "name", "paths", "public", "reports", "untracked", "when"}
	glWhenOutcome        = []string{"always", "on_failure", "on_success"}
)

const (
	maxParallel = 200 // GitLab's bound on parallel and parallel:matrix
	maxCaches   = 4   // GitLab's bound on the caches of a job
	maxStartIn  = 7 * 24 * time.Hour
)

// job reads the job under top-level entry e. It returns nil for an entry
// that is not a job at all.
func (g *glFront) job(e *glEntry) *glJob {
	name := e.name
	if strings.TrimSpace(name) == "" || len([]rune(name)) > 255 {
		g.at(e.key, RuleJobID, "invalid job name %q: names are 1 to 255 characters and not blank", name)
	}
	j := &glJob{name: name, key: e.key, in: true, stage: -1,
		spec: &cikit.JobSpec{ID: name, Name: name}}
	v := g.extendedValue(name)
	if v.isNull() {
		if hint := g.suggest(name, glTopKeys); hint != "" {
			g.at(e.key, RuleKey, "unknown top-level key %q; did you mean %q?", name, hint)
			return nil
		}
		g.at(e.key, RuleSteps, "job %q has no script: a job needs script, run or trigger", name)
		return j
	}
	if v.kind != glMap {
		if hint := g.suggest(name, glTopKeys); hint != "" {
			g.at(e.key, RuleKey, "unknown top-level key %q; did you mean %q?", name, hint)
		} else {
			g.gat(v, RuleType, "job %q must be a mapping of job keys, got %s", name, v.what())
		}
		return nil
	}
	if !slices.ContainsFunc(v.keys, func(k glEntry) bool { return slices.Contains(glJobKeys, k.name) }) {
		if hint := g.suggest(name, glTopKeys); hint != "" {
			// A mapping without a single job key, named like a keyword.
			g.at(e.key, RuleKey, "unknown top-level key %q; did you mean %q?", name, hint)
			return nil
		}
	}
	v = g.deref(v)
	inheritDefault, inheritVars := g.inherit(v.get("inherit"))
	v = g.withDefaults(v, inheritDefault)

	r := &glReader{g: g, j: j}
	for _, k := range v.keys {
		r.key(k)
	}
	r.check(e)
	g.chargeRead(j.spec, j.commands, e.key)

	globals := g.globals
	if inheritVars != nil {
		globals = g.globals.filter(inheritVars)
	}
	vars := g.decide(j, r, globals.overlay(r.vars))
	if !j.in {
		return j
	}
	if len(vars.vals) > 0 {
		g.chargePlan(len(vars.vals), e.key)
		j.spec.Env = g.env(vars, g.vars.given)
	}
	if r.trigger == nil {
		j.spec.Checkout = g.checkout(j, vars, j.spec.Env)
	}
	return j
}

// maxReadWork bounds the steps, paths, tags and other list entries the
// jobs of a pipeline hold, copies of parallel jobs counted.
const maxReadWork = maxPlanEntries

// chargeRead accounts for the list entries of a job read, or copied for
// parallel, and stops the compilation past maxReadWork.
func (g *glFront) chargeRead(s *cikit.JobSpec, commands int, at *yaml.Node) {
	n := commands + len(s.Steps) + len(s.AfterSteps) + len(s.RunsOn) + len(s.Services) + len(s.Secrets)
	for _, c := range s.Caches {
		n += 1 + len(c.Paths) + len(c.KeyFiles) + len(c.RestoreKeys)
	}
	if s.Artifacts != nil {
		n += len(s.Artifacts.Paths) + len(s.Artifacts.Exclude)
	}
	g.readWork += n
	if g.readWork > maxReadWork {
		g.at(at, RuleLimit, "the jobs hold more than %d steps, paths and other entries; the pipeline is too large", maxReadWork)
		panic(abort{})
	}
}

// inherit reads inherit: which default keys and global variables the job
// takes. nil functions mean all of them.
func (g *glFront) inherit(v *glv) (defaults, vars func(string) bool) {
	if v.isNull() {
		return nil, nil
	}
	if v.kind != glMap {
		g.gat(v, RuleType, `"inherit" must be a mapping with "default" and "variables", got %s`, v.what())
		return nil, nil
	}
	read := func(v *glv, key string, valid []string) func(string) bool {
		if v.isNull() {
			return nil
		}
		if b, ok := g.text(v); ok && v.tag() == "!!bool" {
			all := strings.EqualFold(b, "true")
			return func(string) bool { return all }
		}
		if v.kind != glSeq {
			g.gat(v, RuleType, "inherit:%s must be true, false or a list of names, got %s", key, v.what())
			return nil
		}
		var names []string
		for _, it := range v.items {
			n, ok := g.str(it, "inherit:"+key)
			if !ok {
				continue
			}
			if valid != nil && !slices.Contains(valid, n) {
				g.gat(it, RuleValue, "inherit:default names %q, which is not a default key%s (keys: %s)", n, didYouMean(g.suggest(n, valid)), list(valid))
			}
			names = append(names, n)
		}
		return func(s string) bool { return slices.Contains(names, s) }
	}
	for _, k := range v.keys {
		switch k.name {
		case "default":
			defaults = read(k.val, "default", glDefaultKeys)
		case "variables":
			vars = read(k.val, "variables", nil)
		default:
			g.unknownGLKey(k, "in inherit", []string{"default", "variables"})
		}
	}
	return defaults, vars
}

// withDefaults adds to job v the default keys it does not set.
func (g *glFront) withDefaults(v *glv, inherit func(string) bool) *glv {
	if len(g.defaults.keys) == 0 {
		return v
	}
	out := v
	for _, d := range g.defaults.keys {
		if !slices.Contains(glDefaultKeys, d.name) || v.get(d.name) != nil || inherit != nil && !inherit(d.name) {
			continue
		}
		if out == v {
			out = &glv{kind: glMap, n: v.n, keys: slices.Clip(slices.Clone(v.keys))}
		}
		out.keys = append(out.keys, glEntry{name: d.name, key: d.key, val: g.deref(d.val)})
	}
	return out
}

// filter returns the variables whose names keep accepts.
func (d *glVarsDecl) filter(keep func(string) bool) *glVarsDecl {
	out := &glVarsDecl{vals: map[string]string{}, noExpand: map[string]bool{}, nodes: map[string]*yaml.Node{}}
	for _, n := range d.names {
		if keep(n) {
			out.names = append(out.names, n)
			out.vals[n] = d.vals[n]
			out.nodes[n] = d.nodes[n]
			out.noExpand[n] = d.noExpand[n]
		}
	}
	return out
}

// glReader reads the keys of one job.
type glReader struct {
	g               *glFront
	j               *glJob
	vars            *glVarsDecl
	script, trigger *glEntry
	// before, lines and after are the commands of before_script, script
	// and after_script; run the steps of run.
	before, lines, after []string
	run                  []cikit.Step
	// scriptClean records that the script holds only commands, so that
	// an empty one is worth a finding of its own.
	scriptClean  bool
	stage        *glv
	when         cikit.When
	whenNode     *glv
	allowFailure *bool
	exitCodes    []int
	startIn      *glv
	rules        []*glRule
	rulesSet     bool
	only, except *glPolicy
}

func (r *glReader) key(k glEntry) {
	g, s, v := r.g, r.j.spec, k.val
	switch k.name {
	case "script":
		r.script = &k
		r.lines = g.script(v, k.name)
		r.scriptClean = g.cleanScript(v)
	case "run":
		r.script = &k
		r.run = g.runSteps(r.j, v)
		r.scriptClean = !hasBad(v)
	case "before_script":
		r.before = g.script(v, k.name)
	case "after_script":
		r.after = g.script(v, k.name)
	case "trigger":
		r.trigger = &k
		s.Uses = g.trigger(v)
		g.at(k.key, RuleTrigger, "trigger: (child/multi-project pipelines) is not supported yet: job %q would start %s, and no pipeline would run", r.j.name, cmpOr(quote(s.Uses), "another pipeline"))
	case "stage", "type":
		if r.stage == nil || k.name == "stage" {
			r.stage = v
		}
	case "image":
		s.Image, s.ImageOptions = g.image(v)
	case "services":
		s.Services = g.services(v)
	case "variables":
		r.vars = g.variables(v, false)
	case "tags":
		s.RunsOn = g.strList(v, k.name)
	case "cache":
		s.Caches = r.caches(v)
	case "artifacts":
		s.Artifacts = r.artifacts(v)
	case "retry":
		s.Retry = g.retry(v)
	case "timeout":
		s.Timeout = g.duration(v, "timeout", RuleTimeout)
	case "allow_failure":
		r.allowFailure, r.exitCodes = g.allowFailure(v)
	case "when":
		r.when, r.whenNode = g.when(v, glJobWhen), v
	case "start_in":
		r.startIn = v
	case "needs":
		switch {
		case v.isNull():
		case v.kind == glScalar:
			g.gat(v, RuleType, `"needs" must be a list of jobs, got %s`, v.what())
			r.j.needsSet = true
		default:
			r.j.needsSet = true
			r.j.needs = g.seqOf(v, true)
		}
	case "dependencies":
		if !v.isNull() {
			r.j.depsSet = true
			if v.kind != glSeq {
				g.gat(v, RuleType, `"dependencies" must be a list of jobs, got %s`, v.what())
			} else {
				r.j.deps = v.items
			}
		}
	case "rules":
		// Rules that are not a list are reported, and then ignored
		// rather than taken as rules that never match.
		r.rulesSet = v.kind == glSeq
		r.rules = g.rules(v, ruleJob)
	case "only":
		r.only = g.policy(v, "only")
	case "except":
		r.except = g.policy(v, "except")
	case "parallel":
		g.parallel(r.j, v)
	case "environment":
		if s.Environment = g.environment(v); s.Environment != nil {
			r.warn(k.key, "environment %q chooses the secrets the job reads, and the platform's protection rules and policy for it apply; no deployment is recorded yet", s.Environment.Name)
		}
	case "resource_group":
		if grp, ok := g.str(v, k.name); ok && grp != "" {
			s.Concurrency = &cikit.Concurrency{Group: grp}
		}
	case "secrets":
		if s.Secrets = g.secrets(v); len(s.Secrets) > 0 {
			r.warn(k.key, "%s: cikit reads secrets by name from the platform's secret providers (the job's environment, project and group scopes): their vault, azure_key_vault, gcp_secret_manager and file settings are not used, and each variable holds the value, not a file",
				strings.Join(s.Secrets, ", "))
		}
	case "id_tokens":
		s.IDTokens = g.idTokens(v)
	case "interruptible":
		if b, ok := g.boolean(v, k.name); ok && b {
			r.warn(k.key, glInterruptibleWarning)
		}
	case "coverage":
		if c, ok := g.str(v, k.name); ok && c != "" {
			r.warn(k.key, "coverage is not read from the job's log yet")
		}
	case "inherit", "extends":
		// Read before the other keys (extends is gone by now).
	case "hooks", "identity", "dast_configuration", "pages", "release", "manual_confirmation":
		if !v.isNull() {
			r.warn(k.key, "%s is not honoured yet: %s", k.name, glServiceKeys[k.name])
		}
	default:
		r.g.unknownGLKey(k, "in a job", glJobKeys)
	}
}

// glInterruptibleWarning is the warning of interruptible, set by the job
// or by a rule.
const glInterruptibleWarning = "interruptible is not honoured yet: a newer pipeline does not cancel the job"

// glServiceKeys say what the GitLab keys around a job's run ask for,
// which the platform does not do yet.
var glServiceKeys = map[string]string{
	"hooks":               "no hook script runs before the checkout",
	"identity":            "no cloud identity is given to the job",
	"dast_configuration":  "no security scan profile applies",
	"pages":               "nothing is published as a site",
	"release":             "no release is created",
	"manual_confirmation": "a manual job starts without the confirmation dialog",
}

// warn records, at n, that the job asks for something the platform does
// not honour yet (see checker.notHonoured).
func (r *glReader) warn(n *yaml.Node, format string, args ...any) {
	r.j.spec.Warnings = append(r.j.spec.Warnings, r.g.notHonoured(n, format, args...))
}

// check validates what depends on several keys, once all are read, and
// makes the job's steps: before_script and script in one shell session
// (GitLab's), then the steps of run, and after_script in a fresh one.
func (r *glReader) check(e *glEntry) {
	g, j := r.g, r.j
	if lines := append(slices.Clip(r.before), r.lines...); len(lines) > 0 && (r.script == nil || r.script.name == "script") {
		j.spec.Steps = append(j.spec.Steps, glScriptStep("script", lines))
	} else if len(r.before) > 0 {
		j.spec.Steps = append(j.spec.Steps, glScriptStep("before_script", r.before))
	}
	j.spec.Steps = append(j.spec.Steps, r.run...)
	if len(r.after) > 0 {
		j.spec.AfterSteps = []cikit.Step{glScriptStep("after_script", r.after)}
	}
	j.commands = len(r.before) + len(r.lines) + len(r.after)
	switch {
	case r.trigger != nil && r.script != nil:
		g.at(r.script.key, RuleKey, "job %q has both %s and trigger: a trigger job starts another pipeline and runs no script", j.name, r.script.name)
	case r.trigger == nil && r.script == nil:
		g.at(e.key, RuleSteps, "job %q has no script: a job needs script, run or trigger", j.name)
	case r.trigger == nil && len(j.spec.Steps) == 0 && r.scriptClean:
		g.at(r.script.key, RuleSteps, "job %q has an empty script", j.name)
	}
	if r.rulesSet {
		for _, p := range []*glPolicy{r.only, r.except} {
			if p != nil {
				g.gat(p.node, RuleKey, "only and except cannot be used with rules")
			}
		}
	}
	if r.startIn != nil && !r.startIn.isNull() {
		switch {
		case r.rulesSet:
			g.gat(r.startIn, RuleKey, "start_in cannot be used with rules; set it in the rule")
		case r.when != cikit.WhenDelayed:
			g.gat(r.startIn, RuleValue, "start_in needs when: delayed")
		default:
			j.spec.StartIn = g.startIn(r.startIn)
		}
	} else if r.when == cikit.WhenDelayed && !r.rulesSet {
		g.gat(r.whenNode, RuleValue, "a delayed job needs start_in")
	}
	// The stage: a name of the stages list, "test" by default.
	stage := "test"
	if r.stage != nil {
		if s, ok := g.str(r.stage, "stage"); ok {
			stage = s
		}
	}
	if i, ok := g.stageIndex[stage]; ok {
		j.stage = i
		j.spec.Stage = stage
	} else if r.stage != nil && !r.stage.isNull() {
		g.gat(r.stage, RuleStage, "unknown stage %q%s (stages: %s)", stage, didYouMean(g.suggest(stage, g.stages)), list(g.stages))
	} else {
		g.at(e.key, RuleStage, "job %q is in the default stage \"test\", which the stages list lacks (stages: %s)", j.name, list(g.stages))
	}
}

// decide applies rules or only/except to the job, and the attributes of
// the rule that decided. It returns the job's variables, with those of
// the rule.
func (g *glFront) decide(j *glJob, r *glReader, vars *glVarsDecl) *glVarsDecl {
	when := cmpOr(string(r.when), string(cikit.WhenOnSuccess))
	allowFailure := r.allowFailure
	exitCodes := r.exitCodes
	env := g.vars.with(vars.vals)
	if r.rulesSet {
		dec := g.decideRules(r.rules, env)
		if !dec.in {
			j.in = false
			return vars
		}
		j.spec.If = dec.cond
		rule := dec.rule
		if rule.interruptible != nil {
			j.spec.Warnings = append(j.spec.Warnings, g.notHonoured(rule.interruptible, glInterruptibleWarning))
		}
		if rule.when != "" {
			when = string(rule.when)
		}
		if rule.allowFailure != nil {
			allowFailure, exitCodes = rule.allowFailure, rule.exitCodes
		}
		if allowFailure == nil {
			// With rules, a manual job blocks the pipeline unless it
			// says it may fail.
			no := false
			allowFailure = &no
		}
		vars = vars.overlay(rule.variables)
		if cikit.When(when) == cikit.WhenDelayed {
			j.spec.StartIn = rule.startIn
			if rule.startIn == 0 && rule.when == cikit.WhenDelayed {
				g.gat(rule.whenNode, RuleValue, "a delayed rule needs start_in")
			}
		}
		if rule.needs != nil {
			j.needsSet, j.needs = true, g.seqOf(rule.needs, true)
		}
	} else if g.decideOnlyExcept(r.only, r.except, env, g.workflowRules) == triFalse {
		j.in = false
		return vars
	}
	if allowFailure == nil {
		// A manual job without rules may fail: nobody may ever start it.
		b := cikit.When(when) == cikit.WhenManual
		allowFailure = &b
	}
	j.spec.AllowFailure = *allowFailure
	if *allowFailure {
		j.spec.AllowFailureExitCodes = exitCodes
	}
	if cikit.When(when) != cikit.WhenOnSuccess {
		j.spec.When = cikit.When(when)
	}
	return vars
}

// script reads script, before_script or after_script: a string or a
// list of strings, nested lists flattened, blank commands left out.
func (g *glFront) script(v *glv, key string) []string {
	if v.isNull() {
		return nil
	}
	if v.kind == glMap || v.kind == glRef {
		g.gat(v, RuleType, "%q must be a command or a list of commands, got %s", key, v.what())
		return nil
	}
	var lines []string
	for _, item := range g.seqOf(v, true) {
		switch {
		case item.kind == glScalar && item.tag() != "!!str":
			g.gat(item, RuleType, "the commands of %q must be strings, got %s; quote it", key, item.what())
			continue
		case item.kind != glScalar:
			g.gat(item, RuleType, "the commands of %q must be strings, got %s", key, item.what())
			continue
		}
		if strings.TrimSpace(item.text) == "" {
			continue
		}
		lines = append(lines, item.text)
	}
	return lines
}

// cleanScript reports whether a script holds only strings: when it holds
// other values, or broken references, those are reported instead.
func (g *glFront) cleanScript(v *glv) bool {
	if hasBad(v) {
		return false
	}
	for _, it := range g.seqOf(v, true) {
		if it.kind != glScalar || it.tag() != "!!str" {
			return false
		}
	}
	return true
}

// runSteps reads run, GitLab's steps: each a mapping with a name and a
// script, or a step reference with inputs.
func (g *glFront) runSteps(j *glJob, v *glv) []cikit.Step {
	if v.kind != glSeq {
		g.gat(v, RuleType, `"run" must be a list of steps, got %s`, v.what())
		return nil
	}
	var steps []cikit.Step
	for _, item := range v.items {
		if item.kind != glMap {
			g.gat(item, RuleType, "a step of run must be a mapping with name and script or step, got %s", item.what())
			continue
		}
		var st cikit.Step
		for _, k := range item.keys {
			switch k.name {
			case "name":
				st.Name, _ = g.str(k.val, "name")
			case "script":
				st.Run, _ = g.str(k.val, "script")
			case "step":
				st.Uses, _ = g.str(k.val, "step")
				if st.Uses != "" {
					j.spec.Warnings = append(j.spec.Warnings, g.notHonoured(k.key, "step %q of job %q is not run by the platform yet (GitLab's CI/CD steps): the step fails when the job runs", st.Uses, j.name))
				}
			case "env":
				st.Env = g.env(g.variables(k.val, false), g.vars.given)
			case "inputs":
				for _, in := range k.val.keysOrNil() {
					if t, ok := g.text(in.val); ok {
						if st.With == nil {
							st.With = map[string]string{}
						}
						st.With[in.name] = t
					}
				}
			default:
				g.unknownGLKey(k, "in a step", []string{"env", "inputs", "name", "script", "step"})
			}
		}
		if st.Run == "" && st.Uses == "" {
			g.gat(item, RuleSteps, "a step of run needs a script or a step")
			continue
		}
		if st.Name == "" {
			st.Name = cmpOr(firstLine(st.Run), st.Uses)
		}
		steps = append(steps, st)
	}
	return steps
}

// trigger reads a trigger: the pipeline the job starts, recorded in
// Uses as a project path ("group/project", "@branch" when given) or a
// child pipeline's file ("./ci/child.yml").
func (g *glFront) trigger(v *glv) string {
	if s, ok := g.text(v); ok {
		return s
	}
	if v.kind != glMap {
		g.gat(v, RuleType, `"trigger" must be a project path or a mapping with project or include, got %s`, v.what())
		return ""
	}
	var project, branch, include string
	for _, k := range v.keys {
		switch k.name {
		case "project":
			project, _ = g.str(k.val, k.name)
		case "branch":
			branch, _ = g.str(k.val, k.name)
		case "include":
			for _, it := range g.seqOf(k.val, false) {
				if s, ok := g.text(it); ok && include == "" {
					include = s
				}
				for _, f := range []string{"local", "file", "template", "artifact"} {
					if s, ok := g.text(it.get(f)); ok && include == "" {
						include = s
					}
				}
			}
		case "strategy", "forward", "inputs":
			// How the trigger waits for and passes variables to the
			// downstream pipeline: the platform's business.
		default:
			g.unknownGLKey(k, "in trigger", []string{"branch", "forward", "include", "inputs", "project", "strategy"})
		}
	}
	switch {
	case project != "" && branch != "":
		return project + "@" + branch
	case project != "":
		return project
	case include != "":
		return "./" + strings.TrimPrefix(include, "/")
	}
	g.gat(v, RuleValue, "a trigger needs a project or an include")
	return ""
}

// image reads image: a name, or a mapping with the name and how to start
// the container; the options are nil when none is given.
func (g *glFront) image(v *glv) (string, *cikit.ImageOptions) {
	if v.isNull() {
		return "", nil
	}
	if s, ok := g.text(v); ok {
		return s, nil
	}
	if v.kind != glMap {
		g.gat(v, RuleType, `"image" must be an image name or a mapping with "name", got %s`, v.what())
		return "", nil
	}
	name := ""
	var opts cikit.ImageOptions
	for _, k := range v.keys {
		switch k.name {
		case "name":
			name, _ = g.str(k.val, "name")
		case "entrypoint", "docker", "pull_policy":
			g.imageOption(k, &opts)
		case "kubernetes":
			// Kubernetes executor settings: no executor of cikit's has
			// a use for them.
		default:
			g.unknownGLKey(k, "in image", []string{"docker", "entrypoint", "kubernetes", "name", "pull_policy"})
		}
	}
	if name == "" {
		g.gat(v, RuleValue, `an image needs a "name"`)
	}
	return name, imageOptions(opts)
}

// imageOption reads one of the entrypoint, pull_policy and docker keys of
// an image or a service into o.
func (g *glFront) imageOption(k glEntry, o *cikit.ImageOptions) {
	switch k.name {
	case "entrypoint":
		o.Entrypoint = g.strList(k.val, "entrypoint")
	case "pull_policy":
		for _, it := range g.seqOf(k.val, false) {
			p, ok := g.str(it, "pull_policy")
			if !ok {
				continue
			}
			switch p {
			case cikit.PullAlways, cikit.PullIfNotPresent, cikit.PullNever:
				o.PullPolicy = append(o.PullPolicy, p)
			default:
				g.gat(it, RuleValue, "unknown pull_policy %q: use %q, %q or %q", p, cikit.PullAlways, cikit.PullIfNotPresent, cikit.PullNever)
			}
		}
	case "docker":
		if k.val.isNull() {
			return
		}
		if k.val.kind != glMap {
			g.gat(k.val, RuleType, `"docker" must be a mapping with "user" or "platform", got %s`, k.val.what())
			return
		}
		for _, d := range k.val.keys {
			switch d.name {
			case "user":
				o.User, _ = g.str(d.val, "user")
			case "platform":
				// The runner pulls for its own platform.
			default:
				g.unknownGLKey(d, "in docker", []string{"platform", "user"})
			}
		}
	}
}

// imageOptions returns o, or nil when it sets nothing.
func imageOptions(o cikit.ImageOptions) *cikit.ImageOptions {
	if o.Entrypoint == nil && o.PullPolicy == nil && o.User == "" && o.Env == nil && o.Credentials == nil && o.Options == nil {
		return nil
	}
	return &o
}

func (g *glFront) services(v *glv) []cikit.Service {
	if v.isNull() {
		return nil
	}
	if v.kind != glSeq {
		g.gat(v, RuleType, `"services" must be a list of images or mappings with "name", got %s`, v.what())
		return nil
	}
	var out []cikit.Service
	for _, item := range g.seqOf(v, true) {
		if s, ok := g.text(item); ok {
			out = append(out, cikit.Service{Name: glServiceName(s), Image: s})
			continue
		}
		if item.kind != glMap {
			g.gat(item, RuleType, "a service must be an image name or a mapping with \"name\", got %s", item.what())
			continue
		}
		var s cikit.Service
		var opts cikit.ImageOptions
		for _, k := range item.keys {
			switch k.name {
			case "name":
				s.Image, _ = g.str(k.val, "name")
			case "alias":
				// Several aliases may be given, separated by commas or
				// spaces; the first is the host name.
				if a, ok := g.str(k.val, "alias"); ok {
					if f := strings.FieldsFunc(a, func(r rune) bool { return r == ',' || r == ' ' }); len(f) > 0 {
						s.Name = f[0]
					}
				}
			case "command":
				s.Command = g.strList(k.val, "command")
			case "variables":
				s.Env = g.env(g.variables(k.val, false), g.vars.given)
			case "entrypoint", "pull_policy", "docker":
				g.imageOption(k, &opts)
			case "kubernetes":
				// Kubernetes executor settings.
			default:
				g.unknownGLKey(k, "in a service", []string{"alias", "command", "docker", "entrypoint", "kubernetes", "name", "pull_policy", "variables"})
			}
		}
		if s.Image == "" {
			g.gat(item, RuleValue, `a service needs a "name": the image to run`)
			continue
		}
		if s.Name == "" {
			s.Name = glServiceName(s.Image)
		}
		s.ImageOptions = imageOptions(opts)
		out = append(out, s)
	}
	return out
}

// duration reads a GitLab duration: "1h 30m", "3 hours", 3600 (seconds).
func (g *glFront) duration(v *glv, key, rule string) time.Duration {
	if v.isNull() {
		return 0
	}
	s, ok := g.text(v)
	if !ok {
		g.gat(v, RuleType, "%q must be a duration such as \"1h 30m\" or \"10 minutes\", got %s", key, v.what())
		return 0
	}
	d, ok := parseGitLabDuration(s)
	if !ok {
		g.gat(v, rule, "invalid %s %q: use a duration such as \"1h 30m\", \"90 minutes\" or \"2 days\"", key, s)
		return 0
	}
	if d <= 0 {
		g.gat(v, rule, "%s must be positive, got %q", key, s)
		return 0
	}
	return d
}

func (g *glFront) startIn(v *glv) time.Duration {
	d := g.duration(v, "start_in", RuleValue)
	if d > maxStartIn {
		g.gat(v, RuleValue, "start_in must be at most a week, got %q", v.text)
		return 0
	}
	return d
}

func (g *glFront) when(v *glv, valid []string) cikit.When {
	s, ok := g.str(v, "when")
	if !ok {
		return ""
	}
	if !slices.Contains(valid, s) {
		g.gat(v, RuleValue, "invalid when %q%s (valid: %s)", s, didYouMean(g.suggest(s, valid)), list(valid))
		return ""
	}
	return cikit.When(s)
}

// allowFailure reads true, false, or {exit_codes: code or codes}.
func (g *glFront) allowFailure(v *glv) (*bool, []int) {
	if v.isNull() {
		return nil, nil
	}
	if v.kind == glScalar {
		b, ok := g.boolean(v, "allow_failure")
		if !ok {
			return nil, nil
		}
		return &b, nil
	}
	if v.kind != glMap {
		g.gat(v, RuleType, `"allow_failure" must be true, false or a mapping with "exit_codes", got %s`, v.what())
		return nil, nil
	}
	var codes []int
	for _, k := range v.keys {
		if k.name != "exit_codes" {
			g.unknownGLKey(k, "in allow_failure", []string{"exit_codes"})
			continue
		}
		codes = g.exitCodes(k.val)
	}
	if len(codes) == 0 {
		return nil, nil
	}
	yes := true
	return &yes, codes
}

func (g *glFront) exitCodes(v *glv) []int {
	var codes []int
	for _, it := range g.seqOf(v, false) {
		n, err := strconv.Atoi(it.text)
		if it.kind != glScalar || it.tag() != "!!int" || err != nil {
			g.gat(it, RuleType, "exit codes must be integers, got %s", it.what())
			continue
		}
		codes = append(codes, n)
	}
	return codes
}

// retry reads 0 to 2 retries, or {max, when, exit_codes}.
func (g *glFront) retry(v *glv) *cikit.Retry {
	if v.isNull() {
		return nil
	}
	max := func(v *glv) int {
		n, err := strconv.Atoi(v.text)
		if v.kind != glScalar || v.tag() != "!!int" || err != nil {
			g.gat(v, RuleType, `"retry" must be a number of retries (0 to 2) or a mapping with "max", got %s`, v.what())
			return 0
		}
		if n < 0 || n > 2 {
			g.gat(v, RuleValue, "retry must be between 0 and 2, got %d", n)
			return 0
		}
		return n
	}
	if v.kind == glScalar {
		if n := max(v); n > 0 {
			return &cikit.Retry{Max: n}
		}
		return nil
	}
	if v.kind != glMap {
		g.gat(v, RuleType, `"retry" must be a number of retries (0 to 2) or a mapping with "max", got %s`, v.what())
		return nil
	}
	r := &cikit.Retry{}
	for _, k := range v.keys {
		switch k.name {
		case "max":
			r.Max = max(k.val)
		case "when":
			for i, w := range g.strList(k.val, "when") {
				at := k.val
				if k.val.kind == glSeq {
					at = k.val.items[i]
				}
				if !slices.Contains(glRetryWhen, w) {
					g.gat(at, RuleValue, "invalid retry when %q%s (valid: %s)", w, didYouMean(g.suggest(w, glRetryWhen)), strings.Join(glRetryWhen, ", "))
					continue
				}
				r.When = append(r.When, w)
			}
		case "exit_codes":
			r.ExitCodes = g.exitCodes(k.val)
		default:
			g.unknownGLKey(k, "in retry", []string{"exit_codes", "max", "when"})
		}
	}
	if r.Max == 0 {
		return nil
	}
	if slices.Contains(r.When, "always") {
		r.When, r.ExitCodes = nil, nil // every failure, whatever its code
	}
	return r
}

// caches reads cache: a mapping or a list of at most maxCaches of them.
// fallback_keys are exact keys tried in order after the key, as GitLab
// tries them (Cache.FallbackKeys), not prefixes; untracked also caches
// the files git does not track.
func (r *glReader) caches(v *glv) []cikit.Cache {
	g := r.g
	if v.isNull() {
		return nil
	}
	items := []*glv{v}
	if v.kind == glSeq {
		items = v.items
		if len(items) > maxCaches {
			g.gat(v, RuleValue, "a job may have at most %d caches, got %d", maxCaches, len(items))
		}
	}
	var out []cikit.Cache
	for _, item := range items {
		if item.kind != glMap {
			g.gat(item, RuleType, `"cache" must be a mapping with "key" and "paths", or a list of them, got %s`, item.what())
			continue
		}
		if len(item.keys) == 0 {
			// cache: {} turns a default cache off.
			continue
		}
		k := cikit.Cache{}
		keySet := false
		for _, e := range item.keys {
			switch e.name {
			case "key":
				keySet = g.cacheKey(e.val, &k)
			case "paths":
				k.Paths = g.strList(e.val, "paths")
			case "fallback_keys":
				k.FallbackKeys = g.strList(e.val, "fallback_keys")
			case "policy":
				// A policy may be a variable, decided when the job runs.
				if p, ok := g.str(e.val, "policy"); ok && (strings.Contains(p, "$") || g.oneOfGL(e.val, p, "cache policy", []string{"pull", "pull-push", "push"})) {
					k.Policy = p
				}
			case "when":
				if w, ok := g.str(e.val, "when"); ok && g.oneOfGL(e.val, w, "cache when", glWhenOutcome) {
					k.When = w
				}
			case "untracked":
				k.Untracked, _ = g.boolean(e.val, e.name)
			case "unprotect":
				if b, _ := g.boolean(e.val, e.name); b {
					r.warn(e.key, "cache:unprotect has no effect: caches are kept per branch scope, and protected and unprotected branches never share one")
				}
			default:
				g.unknownGLKey(e, "in cache", glCacheKeys)
			}
		}
		if !keySet {
			k.Key = "default"
		}
		if k.Paths == nil {
			k.Paths = []string{}
		}
		out = append(out, k)
	}
	return out
}

// cacheKey reads a cache key: a string, or {files, prefix}. With files,
// the runner makes the key from a hash of the files' content, after the
// prefix (Cache.KeyFiles, Cache.KeyPrefix); GitLab makes it from the
// commits that last changed them instead. Both change the key exactly
// when the files change, but the keys differ, so a cache saved by GitLab
// is never restored here.
func (g *glFront) cacheKey(v *glv, k *cikit.Cache) bool {
	if v.isNull() {
		return false
	}
	if s, ok := g.text(v); ok {
		k.Key = s
		return true
	}
	if v.kind != glMap {
		g.gat(v, RuleType, "a cache key must be a string or a mapping with \"files\", got %s", v.what())
		return false
	}
	for _, e := range v.keys {
		switch e.name {
		case "files":
			k.KeyFiles = g.strList(e.val, "files")
			if len(k.KeyFiles) == 0 || len(k.KeyFiles) > 2 {
				g.gat(e.val, RuleValue, "cache key files must name one or two files, got %d", len(k.KeyFiles))
			}
		case "prefix":
			k.KeyPrefix, _ = g.str(e.val, "prefix")
		default:
			g.unknownGLKey(e, "in a cache key", []string{"files", "prefix"})
		}
	}
	if len(k.KeyFiles) == 0 {
		g.gat(v, RuleValue, `a cache key mapping needs "files"`)
		return false
	}
	return true
}

// glReportTypes are GitLab's artifacts:reports types.
var glReportTypes = []string{
	"accessibility", "annotations", "api_fuzzing", "browser_performance", "codequality",
	"container_scanning", "coverage_fuzzing", "coverage_report", "cyclonedx", "dast",
	"dependency_scanning", "dotenv", "junit", "license_scanning", "load_performance",
	"metrics", "performance", "repository_xray", "requirements", "sast", "secret_detection",
	"terraform",
}

// glRemovedReports are report types GitLab no longer accepts, and what
// replaced them.
var glRemovedReports = map[string]string{
	"cobertura":          `it was removed in GitLab 16.0: use coverage_report with coverage_format: cobertura`,
	"license_management": `it was removed in GitLab 15.0: use license_scanning or cyclonedx`,
}

// glArtifactAccess are the values of artifacts:access.
var glArtifactAccess = []string{"all", "developer", "maintainer", "none"}

// artifacts reads artifacts. An artifacts: with reports and no paths is
// still artifacts: its reports are uploaded, and a dotenv report passes
// its variables to the jobs that need it. untracked also archives the
// files git does not track; expire_in: never keeps them until deleted.
// expose_as, public: false and access other than all ask the platform to
// show or guard the files, which it does not do: those are warnings.
func (r *glReader) artifacts(v *glv) *cikit.Artifacts {
	g := r.g
	if v.isNull() {
		return nil
	}
	if v.kind != glMap {
		g.gat(v, RuleType, `"artifacts" must be a mapping with "paths", got %s`, v.what())
		return nil
	}
	a := &cikit.Artifacts{}
	var public, access *glEntry
	for i, e := range v.keys {
		switch e.name {
		case "paths":
			a.Paths = g.strList(e.val, "paths")
		case "exclude":
			a.Exclude = g.strList(e.val, "exclude")
		case "name":
			a.Name, _ = g.str(e.val, "name")
		case "when":
			if w, ok := g.str(e.val, "when"); ok && g.oneOfGL(e.val, w, "artifacts when", glWhenOutcome) {
				a.When = w
			}
		case "expire_in":
			if s, ok := g.text(e.val); ok && s == "never" {
				a.ExpireNever = true
			} else {
				a.ExpireIn = g.duration(e.val, "expire_in", RuleValue)
			}
		case "untracked":
			a.Untracked, _ = g.boolean(e.val, e.name)
		case "reports":
			a.Reports = g.reports(e.val)
		case "expose_as":
			if s, ok := g.str(e.val, e.name); ok && s != "" {
				r.warn(e.key, "artifacts:expose_as %q is not shown: the platform does not link artifacts from merge requests; they are uploaded as usual", s)
			}
		case "public":
			public = &v.keys[i]
			if b, ok := g.boolean(e.val, e.name); ok && !b {
				r.warn(e.key, "artifacts:public: false is not honoured: downloads of the artifacts are not restricted (the platform has no per-user access)")
			}
		case "access":
			access = &v.keys[i]
			if s, ok := g.str(e.val, e.name); ok && g.oneOfGL(e.val, s, "artifacts access", glArtifactAccess) && s != "all" {
				r.warn(e.key, "artifacts:access %q is not honoured: downloads of the artifacts are not restricted (the platform has no per-user access)", s)
			}
		default:
			g.unknownGLKey(e, "in artifacts", glArtifactsKeys)
		}
	}
	if public != nil && access != nil {
		g.at(access.key, RuleKey, "artifacts:public and artifacts:access cannot be used together: keep access")
	}
	if len(a.Paths) == 0 && len(a.Reports) == 0 && !a.Untracked {
		return nil
	}
	return a
}

// reports reads artifacts:reports: each report type to a path or a list
// of paths; coverage_report is a mapping {coverage_format, path}.
func (g *glFront) reports(v *glv) map[string][]string {
	if v.isNull() {
		return nil
	}
	if v.kind != glMap {
		g.gat(v, RuleType, `"reports" must be a mapping of report types to paths, got %s`, v.what())
		return nil
	}
	out := map[string][]string{}
	for _, e := range v.keys {
		if why, removed := glRemovedReports[e.name]; removed {
			g.at(e.key, RuleKey, "report type %q is not accepted: %s", e.name, why)
			continue
		}
		if !slices.Contains(glReportTypes, e.name) {
			g.unknownReport(e)
			continue
		}
		var paths []string
		if e.name == "coverage_report" {
			paths = g.coverageReport(e.val)
		} else {
			paths = g.strList(e.val, e.name)
		}
		if len(paths) > 0 {
			out[e.name] = paths
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// unknownReport reports a report type that is not one of GitLab's.
func (g *glFront) unknownReport(e glEntry) {
	if hint := g.suggest(e.name, glReportTypes); hint != "" {
		g.at(e.key, RuleKey, "unknown report type %q in artifacts:reports%s", e.name, didYouMean(hint))
		return
	}
	g.at(e.key, RuleKey, "unknown report type %q in artifacts:reports (valid types: %s)", e.name, strings.Join(glReportTypes, ", "))
}

// coverageReport reads reports:coverage_report, {coverage_format, path},
// and returns its path.
func (g *glFront) coverageReport(v *glv) []string {
	if v.isNull() {
		return nil
	}
	if v.kind != glMap {
		g.gat(v, RuleType, `"coverage_report" must be a mapping with "coverage_format" and "path", got %s`, v.what())
		return nil
	}
	var path string
	format := false
	for _, e := range v.keys {
		switch e.name {
		case "coverage_format":
			if f, ok := g.str(e.val, e.name); ok {
				format = true
				g.oneOfGL(e.val, f, "coverage_format", []string{"cobertura", "jacoco"})
			}
		case "path":
			path, _ = g.str(e.val, e.name)
		default:
			g.unknownGLKey(e, "in coverage_report", []string{"coverage_format", "path"})
		}
	}
	if !format || path == "" {
		g.gat(v, RuleValue, `coverage_report needs "coverage_format" (cobertura or jacoco) and "path"`)
		return nil
	}
	return []string{path}
}

func (g *glFront) environment(v *glv) *cikit.Environment {
	if v.isNull() {
		return nil
	}
	if s, ok := g.text(v); ok {
		return &cikit.Environment{Name: s}
	}
	if v.kind != glMap {
		g.gat(v, RuleType, `"environment" must be a name or a mapping with "name", got %s`, v.what())
		return nil
	}
	env := &cikit.Environment{}
	for _, e := range v.keys {
		switch e.name {
		case "name":
			env.Name, _ = g.str(e.val, "name")
		case "url":
			env.URL, _ = g.str(e.val, "url")
		case "action":
			if a, ok := g.str(e.val, "action"); ok && g.oneOfGL(e.val, a, "environment action", glEnvironmentActions) {
				env.Action = a
			}
		case "on_stop", "auto_stop_in", "kubernetes", "deployment_tier":
			// GitLab's environment management: stopping, expiry, cluster
			// and tier are tracked by the platform, not run by the job.
		default:
			g.unknownGLKey(e, "in environment", []string{"action", "auto_stop_in", "deployment_tier", "kubernetes", "name", "on_stop", "url"})
		}
	}
	if env.Name == "" {
		g.gat(v, RuleValue, `an environment needs a "name"`)
		return nil
	}
	return env
}

// secrets reads the secrets a job reads: their variable names.
func (g *glFront) secrets(v *glv) []string {
	if v.isNull() {
		return nil
	}
	if v.kind != glMap {
		g.gat(v, RuleType, `"secrets" must be a mapping of variable names to secret definitions, got %s`, v.what())
		return nil
	}
	var names []string
	for _, e := range v.keys {
		if e.val.kind != glMap {
			g.gat(e.val, RuleType, "secret %q must be a mapping naming its provider (vault, azure_key_vault, gcp_secret_manager …), got %s", e.name, e.val.what())
			continue
		}
		names = append(names, e.name)
	}
	return names
}

// glVariableName is the name of a variable an ID token goes into.
var glVariableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// idTokens reads id_tokens: variable names to {aud: audience or list of
// audiences}.
func (g *glFront) idTokens(v *glv) []cikit.IDToken {
	if v.isNull() {
		return nil
	}
	if v.kind != glMap {
		g.gat(v, RuleType, `"id_tokens" must be a mapping of variable names to {aud: …}, got %s`, v.what())
		return nil
	}
	var out []cikit.IDToken
	for _, e := range v.keys {
		if !glVariableName.MatchString(e.name) {
			g.gat(e.val, RuleValue, "id_tokens: %q is not a variable name (letters, digits and _)", e.name)
			continue
		}
		if len(out) == cikit.MaxIDTokens {
			g.gat(e.val, RuleValue, "id_tokens: a job asks for at most %d ID tokens", cikit.MaxIDTokens)
			break
		}
		if e.val.kind != glMap {
			g.gat(e.val, RuleType, "id_tokens: %q must be a mapping with aud, got %s", e.name, e.val.what())
			continue
		}
		tok, bad := cikit.IDToken{Name: e.name}, false
		for _, f := range e.val.keys {
			if f.name != "aud" {
				g.unknownGLKey(f, "in an ID token", []string{"aud"})
				bad = true
				continue
			}
			for _, a := range g.strList(f.val, "aud") {
				switch {
				case a == "" || len(a) > cikit.MaxAudienceBytes || strings.ContainsFunc(a, func(r rune) bool { return r < ' ' || r == 0x7f }):
					g.gat(f.val, RuleValue, "id_tokens: %q: an audience is 1 to %d printable bytes", e.name, cikit.MaxAudienceBytes)
					bad = true
				case strings.Contains(a, "$"):
					g.gat(f.val, RuleValue, "id_tokens: %q: audience %q holds a variable, which cikit does not expand in id_tokens: write the audience itself", e.name, a)
					bad = true
				default:
					tok.Audience = append(tok.Audience, a)
				}
			}
		}
		switch {
		case bad:
		case len(tok.Audience) == 0:
			g.gat(e.val, RuleValue, "id_tokens: %q needs an aud", e.name)
		case len(tok.Audience) > cikit.MaxAudiences:
			g.gat(e.val, RuleValue, "id_tokens: %q has %d audiences; the limit is %d", e.name, len(tok.Audience), cikit.MaxAudiences)
		default:
			out = append(out, tok)
		}
	}
	return out
}

func (g *glFront) oneOfGL(v *glv, s, what string, valid []string) bool {
	if slices.Contains(valid, s) {
		return true
	}
	g.gat(v, RuleValue, "invalid %s %q%s (valid: %s)", what, s, didYouMean(g.suggest(s, valid)), list(valid))
	return false
}

// parallel reads parallel: a number of copies, or a matrix.
func (g *glFront) parallel(j *glJob, v *glv) {
	if v.isNull() {
		return
	}
	j.parallelNode = v
	if v.kind == glScalar {
		n, err := strconv.Atoi(v.text)
		if v.tag() != "!!int" || err != nil {
			g.gat(v, RuleType, `"parallel" must be a number of copies or a mapping with "matrix", got %s`, v.what())
			return
		}
		if n < 1 || n > maxParallel {
			g.gat(v, RuleMatrix, "parallel must be between 1 and %d, got %d", maxParallel, n)
			return
		}
		j.parallel = n
		return
	}
	if v.kind != glMap {
		g.gat(v, RuleType, `"parallel" must be a number of copies or a mapping with "matrix", got %s`, v.what())
		return
	}
	for _, k := range v.keys {
		if k.name != "matrix" {
			g.unknownGLKey(k, "in parallel", []string{"matrix"})
			continue
		}
		j.matrix = g.matrix(k.val)
	}
}

// matrix reads parallel:matrix: a list of mappings of variable names to
// a value or a list of values.
func (g *glFront) matrix(v *glv) []glMatrixEntry {
	if v.kind != glSeq || len(v.items) == 0 {
		g.gat(v, RuleType, "parallel:matrix must be a list of mappings of variables to values, got %s", v.what())
		return nil
	}
	var out []glMatrixEntry
	for _, item := range v.items {
		if item.kind != glMap || len(item.keys) == 0 {
			g.gat(item, RuleType, "an entry of parallel:matrix must be a mapping of variables to values, got %s", item.what())
			continue
		}
		var m glMatrixEntry
		for _, k := range item.keys {
			var vals []string
			for _, it := range g.seqOf(k.val, false) {
				if it.kind != glScalar {
					g.gat(it, RuleType, "matrix values must be strings, got %s", it.what())
					continue
				}
				vals = append(vals, it.text)
			}
			if len(vals) == 0 {
				g.gat(k.val, RuleMatrix, "matrix variable %q has no values", k.name)
				continue
			}
			m.names = append(m.names, k.name)
			m.values = append(m.values, vals)
		}
		if len(m.names) > 0 {
			out = append(out, m)
		}
	}
	return out
}

// ruleKind says where a rules list is: the keys and whens it may hold.
type ruleKind uint8

const (
	ruleJob ruleKind = iota
	ruleWorkflow
	ruleInclude
)

var glRuleKeys = map[ruleKind][]string{
	ruleJob:      {"allow_failure", "changes", "exists", "if", "interruptible", "needs", "start_in", "variables", "when"},
	ruleWorkflow: {"auto_cancel", "changes", "exists", "if", "variables", "when"},
	ruleInclude:  {"changes", "exists", "if", "when"},
}

// rules reads a rules list.
func (g *glFront) rules(v *glv, kind ruleKind) []*glRule {
	if v.isNull() {
		return nil
	}
	if v.kind != glSeq {
		g.gat(v, RuleType, `"rules" must be a list of rules, got %s`, v.what())
		return nil
	}
	var out []*glRule
	for _, item := range g.seqOf(v, true) {
		if item.kind != glMap {
			g.gat(item, RuleType, "a rule must be a mapping with if, changes, exists or when, got %s", item.what())
			continue
		}
		r := &glRule{node: item}
		var startIn *glEntry
		for i, k := range item.keys {
			if k.name == "start_in" {
				startIn = &item.keys[i]
			}
			g.ruleKey(r, k, kind)
		}
		if startIn != nil && kind == ruleJob && r.when != cikit.WhenDelayed {
			g.at(startIn.key, RuleValue, "start_in needs when: delayed in the same rule")
		}
		out = append(out, r)
	}
	return out
}

func (g *glFront) ruleKey(r *glRule, k glEntry, kind ruleKind) {
	v := k.val
	switch k.name {
	case "if":
		r.cond = g.condition(v)
	case "changes":
		r.changesSet = true
		if v.kind == glMap {
			for _, c := range v.keys {
				switch c.name {
				case "paths":
					r.changes = g.strList(c.val, "paths")
				case "compare_to":
					r.compareTo = true
					g.str(c.val, "compare_to")
				default:
					g.unknownGLKey(c, "in changes", []string{"compare_to", "paths"})
				}
			}
		} else {
			r.changes = g.strList(v, "changes")
		}
	case "exists":
		r.existsSet = true
		if v.kind == glMap {
			for _, c := range v.keys {
				switch c.name {
				case "paths":
					r.exists = g.strList(c.val, "paths")
				case "project", "ref":
					r.existsRemote = true
				default:
					g.unknownGLKey(c, "in exists", []string{"paths", "project", "ref"})
				}
			}
		} else {
			r.exists = g.strList(v, "exists")
		}
	case "when":
		valid := glRuleWhen
		if kind != ruleJob {
			valid = glWorkflowWhen
		}
		r.when, r.whenNode = g.when(v, valid), v
	case "allow_failure":
		if kind == ruleJob {
			r.allowFailure, r.exitCodes = g.allowFailure(v)
			return
		}
		g.unknownGLKey(k, "in this rule", glRuleKeys[kind])
	case "start_in":
		if kind == ruleJob {
			r.startIn = g.startIn(v)
			return
		}
		g.unknownGLKey(k, "in this rule", glRuleKeys[kind])
	case "variables":
		if kind == ruleInclude {
			g.unknownGLKey(k, "in this rule", glRuleKeys[kind])
			return
		}
		r.variables = g.variables(v, false)
	case "needs":
		if kind == ruleJob {
			r.needs = v
			return
		}
		g.unknownGLKey(k, "in this rule", glRuleKeys[kind])
	case "interruptible":
		if kind != ruleJob {
			g.unknownGLKey(k, "in this rule", glRuleKeys[kind])
			return
		}
		if b, ok := g.boolean(v, k.name); ok && b {
			r.interruptible = k.key
		}
	case "auto_cancel":
		if kind != ruleWorkflow {
			g.unknownGLKey(k, "in this rule", glRuleKeys[kind])
			return
		}
		if !v.isNull() {
			r.autoCancel = k.key
		}
	default:
		g.unknownGLKey(k, "in a rule", glRuleKeys[kind])
	}
}

// condition parses an if: expression.
func (g *glFront) condition(v *glv) *glCond {
	s, ok := g.str(v, "if")
	if !ok {
		return nil
	}
	if e, ok := g.parsed[s]; ok {
		return &glCond{text: s, node: v, expr: e}
	}
	e, err := expr.ParseGitLab(s)
	if err != nil {
		msg, col := err.Error(), v.n.Column
		var se *expr.SyntaxError
		if errors.As(err, &se) {
			msg = se.Msg
			col += exprColumn(v.n, s, se.Offset)
		}
		report := func() { g.report(v.n.Line, col, RuleExpression, "invalid expression %q: %s", s, msg) }
		if f, ok := g.nodeFiles[v.n]; ok {
			g.within(f, report)
		} else {
			report()
		}
		return nil
	}
	if g.parsed == nil {
		g.parsed = make(map[string]expr.Node)
	}
	g.parsed[s] = e
	return &glCond{text: s, node: v, expr: e}
}

// exprColumn returns how many columns after the start of scalar n the
// byte offset off of its value s is, when the value is written as it
// reads (a plain scalar, or a quoted one without escapes); 0 otherwise.
func exprColumn(n *yaml.Node, s string, off int) int {
	if off < 0 || off > len(s) || strings.ContainsRune(s, '\n') {
		return 0
	}
	runes := utf8.RuneCountInString(s[:off])
	switch n.Style {
	case 0:
		return runes
	case yaml.DoubleQuotedStyle:
		if !strings.ContainsAny(s, "\\\"") {
			return runes + 1
		}
	case yaml.SingleQuotedStyle:
		if !strings.Contains(s, "'") {
			return runes + 1
		}
	}
	return 0
}

// glPolicyKeys are the keys of only and except in their mapping form.
var glPolicyKeys = []string{"changes", "kubernetes", "refs", "variables"}

// policy reads only or except: a list of refs, or a mapping of refs,
// variables, changes and kubernetes.
func (g *glFront) policy(v *glv, key string) *glPolicy {
	if v.isNull() {
		return nil
	}
	p := &glPolicy{node: v}
	switch v.kind {
	case glSeq:
		p.refs, p.refsSet = g.strList(v, key), true
		g.checkRefs(v, p.refs)
		return p
	case glMap:
		if key == "only" {
			// The mapping form keeps only's default refs unless it
			// names its own.
			p.refs, p.refsSet = []string{"branches", "tags"}, true
		}
	default:
		g.gat(v, RuleType, "%q must be a list of refs or a mapping of refs, variables and changes, got %s", key, v.what())
		return nil
	}
	for _, k := range v.keys {
		switch k.name {
		case "refs":
			p.refs, p.refsSet = g.strList(k.val, "refs"), true
			g.checkRefs(k.val, p.refs)
		case "variables":
			p.variables = []*glCond{}
			for _, it := range g.seqOf(k.val, false) {
				if c := g.condition(it); c != nil {
					p.variables = append(p.variables, c)
				}
			}
		case "changes":
			p.changes, p.changesSet = g.strList(k.val, "changes"), true
		case "kubernetes":
			if s, ok := g.str(k.val, "kubernetes"); ok {
				if s != "active" {
					g.gat(k.val, RuleValue, `only:kubernetes must be "active", got %q`, s)
				}
				p.kubernetes = true
			}
		default:
			g.unknownGLKey(k, "in "+key, glPolicyKeys)
		}
	}
	return p
}

// checkRefs reports ref patterns that are invalid regular expressions.
func (g *glFront) checkRefs(v *glv, refs []string) {
	for i, r := range refs {
		pattern, _, _ := strings.Cut(r, "@")
		if re, ok := refRegexp(pattern); ok && re == nil {
			at := v
			if v.kind == glSeq && i < len(v.items) {
				at = v.items[i]
			}
			_, err := rubyRegexp(pattern[1:strings.LastIndexByte(pattern, '/')], "")
			g.gat(at, RuleExpression, "invalid regular expression %s: %v", pattern, regexpProblem(err))
		}
	}
}
