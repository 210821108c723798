package compiler

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/compiler/expr"
)

// FormatGitHub is GitHub Actions' workflow format: the files in a
// repository's .github/workflows directory.
const FormatGitHub Format = "github"

// Rules of findings that only GitHub workflows have.
const (
	RuleEvent       = "event"         // an unknown event, activity type or filter, or filters that exclude each other
	RuleFilter      = "filter"        // an invalid branch, tag or path filter pattern
	RuleSchedule    = "schedule"      // an invalid cron schedule or time zone
	RuleInput       = "input"         // an invalid or missing input of a manual run, a reusable workflow or an action the runner runs
	RulePermissions = "permissions"   // an unknown permission scope or level
	RuleRunsOn      = "runs-on"       // a job without runner labels
	RuleStepID      = "step-id"       // an invalid or repeated step ID
	RuleCall        = "workflow-call" // a reusable workflow call that cannot work
	RuleIfCond      = "if-cond"       // a condition that is always true or always false
)

// isGitHubWorkflowPath reports whether p names a workflow file: a .yml or
// .yaml file directly in a .github/workflows directory. GitHub reads no
// subdirectory of it.
func isGitHubWorkflowPath(p string) bool {
	dir, file := path.Split(p)
	if dir != ".github/workflows/" && !strings.HasSuffix(dir, "/.github/workflows/") {
		return false
	}
	ext := path.Ext(file)
	return (ext == ".yml" || ext == ".yaml") && file != ext
}

// Valid keys, sorted: they are listed in messages as they are.
var (
	ghTopKeys         = []string{"concurrency", "defaults", "env", "jobs", "name", "on", "permissions", "run-name"}
	ghJobKeys         = []string{"concurrency", "container", "continue-on-error", "defaults", "env", "environment", "if", "name", "needs", "outputs", "permissions", "runs-on", "secrets", "services", "snapshot", "steps", "strategy", "timeout-minutes", "uses", "with"}
	ghRunStepKeys     = []string{"continue-on-error", "env", "id", "if", "name", "run", "shell", "timeout-minutes", "working-directory"}
	ghUsesStepKeys    = []string{"continue-on-error", "env", "id", "if", "name", "timeout-minutes", "uses", "with"}
	ghStepKeys        = []string{"continue-on-error", "env", "id", "if", "name", "run", "shell", "timeout-minutes", "uses", "with", "working-directory"}
	ghContainerKeys   = []string{"credentials", "env", "image", "options", "ports", "volumes"}
	ghServiceKeys     = []string{"command", "credentials", "entrypoint", "env", "image", "options", "ports", "volumes"}
	ghCredentialKeys  = []string{"password", "username"}
	ghStrategyKeys    = []string{"fail-fast", "matrix", "max-parallel"}
	ghConcurrencyKeys = []string{"cancel-in-progress", "group", "queue"}
	ghEnvironmentKeys = []string{"deployment", "name", "url"}
	ghDefaultsKeys    = []string{"run"}
	ghDefaultsRunKeys = []string{"shell", "working-directory"}
	ghRunsOnKeys      = []string{"group", "labels"}
	ghSnapshotKeys    = []string{"if", "image-name", "version"}
	// ghCallOnlyKeys are the keys only a job that calls a reusable
	// workflow has; ghStepsOnlyKeys those such a job cannot have.
	ghCallOnlyKeys  = []string{"secrets", "uses", "with"}
	ghStepsOnlyKeys = []string{"container", "continue-on-error", "defaults", "env", "environment", "outputs", "runs-on", "services", "snapshot", "steps", "timeout-minutes"}
)

// ghMaxCallDepth is GitHub's limit on nested reusable workflows: the
// caller and up to three levels of called workflows.
const ghMaxCallDepth = 4

// ghMaxCalledWorkflows is GitHub's limit on the distinct reusable workflows
// one workflow may call, nested calls included.
const ghMaxCalledWorkflows = 20

// compileGitHub is the front end of GitHub workflows.
func compileGitHub(c *checker, root *yaml.Node) *draft {
	g := &ghCompiler{c: c, calledFiles: map[string]bool{}, stack: []string{c.file}, data: c.data}
	d := &draft{}
	wf := g.workflow(root, c.file, false)
	if wf == nil {
		return d
	}
	g.top = wf
	d.name = wf.name
	d.triggers = wf.triggers
	if wf.concurrency != nil {
		x := &ghEval{g: g, wf: wf}
		d.concurrency = x.concurrency(wf.concurrency, wf.concNode, wf.concCancel)
	}
	d.env = wf.env
	for _, j := range wf.jobs {
		js := g.build(wf, j, nil)
		c.chargeJobs(len(d.jobs), js, j.key, j.id)
		d.jobs = append(d.jobs, js...)
	}
	g.fillExpand()
	return d
}

// ghCompiler holds the state of one GitHub compilation across the files it
// reads.
type ghCompiler struct {
	c *checker
	// stack is the chain of workflow files being compiled: the file at
	// the top, then each called workflow.
	stack []string
	// calledFiles are the distinct reusable workflows called so far.
	calledFiles map[string]bool
	// parsed are the called workflows read so far, by path; nil for one
	// that could not be read.
	parsed map[string]*ghCallee
	// order holds the key order of the objects of matrix values, by map
	// identity: names show their values in the order written.
	order map[uintptr]keyOrdered
	// templates are the parsed expression templates, by the node they are
	// written at: each is parsed and checked once, and evaluated for each
	// matrix variant.
	templates map[*yaml.Node]*ghTemplate
	// envs are the evaluation environments by workflow and call, and
	// github the github context of Options.Event: made once.
	envs   map[ghEnvKey]*expr.GitHubEnv
	github map[string]any
	// top is the top workflow, and data its content; placeholders are
	// the jobs whose matrices only the run can compute, which get their
	// JobSpec.Expand once every file is read.
	top          *ghWorkflow
	data         []byte
	placeholders []*jobDecl
}

// ghEntries returns the pairs of mapping m in order. GitHub reads no merge
// keys, so they are reported; a key written twice is reported and left
// out. fold makes keys that differ only in case duplicates, as GitHub's
// are for job IDs, env, matrix, inputs and other user-named keys.
func (c *checker) ghEntries(m *yaml.Node, fold bool) []entry {
	out := make([]entry, 0, len(m.Content)/2)
	// Mappings are small: a scan finds duplicates faster than a map.
	var seen map[string]*yaml.Node
	if len(m.Content) > 32 {
		seen = make(map[string]*yaml.Node, len(m.Content)/2)
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		key := m.Content[i]
		k := c.resolve(key)
		if isMergeKey(k) {
			c.at(key, RuleSyntax, `GitHub does not read the YAML merge key "<<"; write the keys out, or use an alias for the whole mapping`)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			c.at(key, RuleType, "mapping keys must be strings, got %s", kindName(k))
			continue
		}
		var first *yaml.Node
		if seen != nil {
			id := k.Value
			if fold {
				id = strings.ToLower(id)
			}
			first = seen[id]
			if first == nil {
				seen[id] = k
			}
		} else {
			for _, e := range out {
				if e.name == k.Value || fold && strings.EqualFold(e.name, k.Value) {
					first = c.resolve(e.key)
					break
				}
			}
		}
		if first != nil {
			note := ""
			if fold && first.Value != k.Value {
				note = " (keys here ignore case)"
			}
			c.at(key, RuleSyntax, "key %q is already defined at line %d%s", k.Value, first.Line, note)
			continue
		}
		out = append(out, entry{key: key, name: k.Value, val: m.Content[i+1]})
	}
	return out
}

// ghMapping resolves v and returns its entries, reporting a value that is
// not a mapping. Null is an empty mapping.
func (c *checker) ghMapping(v *yaml.Node, what string, fold bool) ([]entry, bool) {
	v = c.resolve(v)
	if isNull(v) {
		return nil, true
	}
	if v.Kind != yaml.MappingNode {
		c.at(v, RuleType, "%s must be a mapping, got %s", what, kindName(v))
		return nil, false
	}
	return c.ghEntries(v, fold), true
}

// ghString returns the text of a scalar that must be a string (numbers
// and booleans read as written). Null is "" and not reported.
func (c *checker) ghString(v *yaml.Node, what string) (string, bool) {
	v = c.resolve(v)
	if isNull(v) {
		return "", true
	}
	if v.Kind != yaml.ScalarNode {
		c.at(v, RuleType, "%s must be a string, got %s", what, kindName(v))
		return "", false
	}
	return v.Value, true
}

// ghNonEmpty is ghString that also reports an empty or null value.
func (c *checker) ghNonEmpty(v *yaml.Node, what string) (string, bool) {
	s, ok := c.ghString(v, what)
	if ok && strings.TrimSpace(s) == "" {
		c.at(c.resolve(v), RuleValue, "%s must not be empty", what)
		return "", false
	}
	return s, ok
}

// ghStrings reads a string or a list of strings; null is nil.
func (c *checker) ghStrings(v *yaml.Node, what string, allowEmpty bool) ([]string, []*yaml.Node) {
	v = c.resolve(v)
	if isNull(v) {
		return nil, nil
	}
	var items []*yaml.Node
	switch v.Kind {
	case yaml.ScalarNode:
		items = []*yaml.Node{v}
	case yaml.SequenceNode:
		items = v.Content
	default:
		c.at(v, RuleType, "%s must be a string or a list of strings, got %s", what, kindName(v))
		return nil, nil
	}
	out := make([]string, 0, len(items))
	nodes := make([]*yaml.Node, 0, len(items))
	for _, item := range items {
		iv := c.resolve(item)
		if iv.Kind != yaml.ScalarNode || isNull(iv) {
			c.at(item, RuleType, "entries of %s must be strings, got %s", what, kindName(iv))
			continue
		}
		if !allowEmpty && strings.TrimSpace(iv.Value) == "" {
			c.at(item, RuleValue, "entries of %s must not be empty", what)
			continue
		}
		out = append(out, iv.Value)
		nodes = append(nodes, item)
	}
	return out, nodes
}

// ghBool reads a boolean, or an expression left as written: GitHub's
// booleans may be ${{ }} expressions. A quoted "true" is a string, not a
// boolean, as GitHub reads it.
func (c *checker) ghBool(v *yaml.Node, what string) (b bool, expr string, ok bool) {
	v = c.resolve(v)
	switch {
	case isNull(v):
		return false, "", true
	case v.Kind == yaml.ScalarNode && v.ShortTag() == "!!bool":
		return strings.EqualFold(v.Value, "true"), "", true
	case v.Kind == yaml.ScalarNode && v.ShortTag() == "!!str" && isExprTemplate(v.Value):
		return false, v.Value, true
	}
	c.at(v, RuleType, "%s must be true, false or a ${{ }} expression, got %s", what, ghDescribe(v))
	return false, "", false
}

// ghDescribe names a value for a message: its type, and for a short string
// its text.
func ghDescribe(v *yaml.Node) string {
	if v.Kind == yaml.ScalarNode && v.ShortTag() == "!!str" && len(v.Value) <= 40 {
		return fmt.Sprintf("the string %q", v.Value)
	}
	return kindName(v)
}

// isExprTemplate reports whether s is one ${{ }} expression and nothing
// else, spaces aside: the form GitHub requires where a value of another
// type may be computed.
func isExprTemplate(s string) bool {
	s = strings.TrimSpace(s)
	return strings.HasPrefix(s, "${{") && strings.HasSuffix(s, "}}") && strings.Count(s, "${{") == 1
}

// hasExpr reports whether s holds a ${{ }} placeholder.
func hasExpr(s string) bool { return strings.Contains(s, "${{") }

// ghUnknownKey reports a key that is not valid where it is.
func (c *checker) ghUnknownKey(e entry, where string, valid []string) {
	c.at(e.key, RuleKey, "unknown key %q in %s%s (valid keys: %s)", e.name, where, didYouMean(c.suggest(e.name, valid)), strings.Join(valid, ", "))
}

// validGitHubID reports whether id is a valid job or step ID:
// [A-Za-z_][A-Za-z0-9_-]*.
func validGitHubID(id string) bool { return validName(id, "-") }

// ghWorkflow is one workflow file, read.
type ghWorkflow struct {
	file        string
	name        string
	triggers    []Trigger
	call        *ghCallSpec // on.workflow_call; nil when the workflow is not reusable
	dispatch    []Input     // on.workflow_dispatch inputs
	hasDispatch bool
	env         map[string]string
	defaults    ghDefaults
	concurrency *cikit.Concurrency
	concNode    *yaml.Node // the concurrency group as written
	concCancel  ghText     // cancel-in-progress, when an expression
	permissions map[string]string
	permNode    *yaml.Node // where permissions are written
	// runWarnings are what the workflow asks of its run that is not
	// honoured yet, for the Warnings of each of its jobs.
	runWarnings []string
	called      bool // read as a reusable workflow
	jobs        []*ghJob
	jobIndex    map[string]*ghJob // by lower-case ID
	uses        []ghUse           // the expressions of the workflow's own keys
}

// ghDefaults are the defaults of run steps.
type ghDefaults struct {
	shell, workingDirectory string
}

// workflow reads a workflow file's root node. called says the file is
// read as a reusable workflow. It returns nil when the file is too broken
// to have jobs.
func (g *ghCompiler) workflow(root *yaml.Node, file string, called bool) *ghWorkflow {
	c := g.c
	if root == nil || isNull(root) {
		c.report(1, 1, RuleJobs, `no jobs: the file is empty; a workflow needs "on" and "jobs"`)
		return nil
	}
	root = c.resolve(root)
	if root.Kind != yaml.MappingNode {
		c.at(root, RuleType, `a workflow must be a mapping with "on" and "jobs" keys, got %s`, kindName(root))
		return nil
	}
	wf := &ghWorkflow{file: file, jobIndex: map[string]*ghJob{}, called: called}
	var on, jobs *entry
	for _, e := range c.ghEntries(root, false) {
		switch e.name {
		case "name":
			wf.name, _ = c.ghString(e.val, `"name"`)
		case "run-name":
			if s, ok := c.ghNonEmpty(e.val, `"run-name"`); ok {
				g.use(&wf.uses, ghText{s, c.resolve(e.val)}, ghAtWorkflow, 0)
				if s != "" && !wf.called {
					// A called workflow's run-name names no run, on GitHub
					// either.
					wf.runWarnings = append(wf.runWarnings, c.notHonoured(e.key, "run-name is not shown yet: the run is named by the workflow's name"))
				}
			}
		case "on":
			on = &e
		case "env":
			wf.env = c.ghEnv(e.val, "the workflow")
			g.useMap(&wf.uses, e.val, ghAtWorkflowEn, 0)
		case "defaults":
			wf.defaults = c.ghDefaultsOf(e, "the workflow")
		case "concurrency":
			wf.concurrency, wf.concCancel = c.ghConcurrency(e, "the workflow")
			wf.concNode = c.groupNode(e.val)
			g.useConcurrency(&wf.uses, e.val, ghAtWorkflow)
		case "permissions":
			wf.permissions, wf.permNode = c.ghPermissions(e.val), e.key
		case "jobs":
			jobs = &e
		default:
			c.ghUnknownKey(e, "the workflow", ghTopKeys)
		}
	}
	if on == nil {
		c.at(root, RuleEvent, `the workflow has no "on" key, so nothing triggers it; add one such as "on: push"`)
	} else {
		g.on(wf, *on)
	}
	if wf.call != nil {
		for _, in := range wf.call.inputs {
			if in.defaultNode != nil {
				g.use(&wf.uses, ghText{in.def, in.defaultNode}, ghAtWorkflow, 0)
			}
		}
		for _, o := range wf.call.outputs {
			if o.node != nil {
				g.use(&wf.uses, ghText{o.value, o.node}, ghAtCallOutput, 0)
			}
		}
	}
	if jobs == nil {
		c.at(root, RuleJobs, `no jobs: the workflow has no "jobs" key`)
		return wf
	}
	g.jobs(wf, *jobs)
	g.checkUses(wf)
	return wf
}

// groupNode returns the node of a concurrency group: the value, or its
// "group" key's value.
func (c *checker) groupNode(v *yaml.Node) *yaml.Node {
	v = c.resolve(v)
	if v.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(v.Content); i += 2 {
			if c.resolve(v.Content[i]).Value == "group" {
				return c.resolve(v.Content[i+1])
			}
		}
	}
	return v
}

// useConcurrency registers the expressions of a concurrency value.
func (g *ghCompiler) useConcurrency(uses *[]ghUse, v *yaml.Node, where *ghWhere) {
	v = g.c.resolve(v)
	if v.Kind == yaml.ScalarNode {
		g.use(uses, ghText{v.Value, v}, where, 0)
		return
	}
	g.useMap(uses, v, where, 0)
}

// ghEnv reads an env mapping. Names may be anything a process
// environment can hold: not empty, without '=', '&' or white space (GitHub
// and Windows refuse those). Values keep the text they were written with.
func (c *checker) ghEnv(v *yaml.Node, where string) map[string]string {
	rv := c.resolve(v)
	if rv.Kind == yaml.ScalarNode && !isNull(rv) {
		c.at(rv, RuleType, `"env" of %s must be a mapping of names to values, got %s`, where, ghDescribe(rv))
		return nil
	}
	entries, ok := c.ghMapping(v, fmt.Sprintf(`"env" of %s`, where), true)
	if !ok || len(entries) == 0 {
		return nil
	}
	env := make(map[string]string, len(entries))
	for _, e := range entries {
		if e.name == "" || strings.ContainsAny(e.name, "=& \t\r\n") && !hasExpr(e.name) {
			c.at(e.key, RuleEnv, "invalid env name %q in %s: names hold no '=', '&' or white space", e.name, where)
			continue
		}
		val := c.resolve(e.val)
		switch {
		case isNull(val):
			env[e.name] = ""
		case val.Kind == yaml.ScalarNode:
			env[e.name] = val.Value
		default:
			c.at(val, RuleType, "env %q of %s must be a string, number or boolean, got %s", e.name, where, kindName(val))
		}
	}
	return env
}

// ghDefaultsOf reads defaults: run: shell and working-directory.
func (c *checker) ghDefaultsOf(e entry, where string) ghDefaults {
	var d ghDefaults
	entries, ok := c.ghMapping(e.val, fmt.Sprintf(`"defaults" of %s`, where), false)
	if !ok {
		return d
	}
	hasRun := false
	for _, de := range entries {
		if de.name != "run" {
			c.ghUnknownKey(de, `"defaults"`, ghDefaultsKeys)
			continue
		}
		hasRun = true
		runEntries, ok := c.ghMapping(de.val, `"defaults.run"`, false)
		if !ok {
			continue
		}
		for _, re := range runEntries {
			switch re.name {
			case "shell":
				d.shell, _ = c.ghNonEmpty(re.val, `"defaults.run.shell"`)
			case "working-directory":
				d.workingDirectory, _ = c.ghNonEmpty(re.val, `"defaults.run.working-directory"`)
			default:
				c.ghUnknownKey(re, `"defaults.run"`, ghDefaultsRunKeys)
			}
		}
	}
	if !hasRun && ok {
		c.at(e.key, RuleValue, `"defaults" of %s has no "run" defaults, the only kind there is`, where)
	}
	return d
}

// ghConcurrency reads a concurrency group: a group name, or a mapping with
// group, cancel-in-progress and queue. cancel is cancel-in-progress when it
// is an expression.
func (c *checker) ghConcurrency(e entry, where string) (conc *cikit.Concurrency, cancel ghText) {
	v := c.resolve(e.val)
	if v.Kind == yaml.ScalarNode {
		group, ok := c.ghNonEmpty(v, fmt.Sprintf(`"concurrency" of %s`, where))
		if !ok {
			return nil, cancel
		}
		return &cikit.Concurrency{Group: group}, cancel
	}
	entries, ok := c.ghMapping(v, fmt.Sprintf(`"concurrency" of %s`, where), false)
	if !ok {
		return nil, cancel
	}
	conc = &cikit.Concurrency{}
	var cancelNode, queueNode *yaml.Node
	hasGroup, queueMax := false, false
	for _, ce := range entries {
		switch ce.name {
		case "group":
			hasGroup = true
			conc.Group, _ = c.ghNonEmpty(ce.val, `"concurrency.group"`)
		case "cancel-in-progress":
			var expr string
			conc.CancelInProgress, expr, _ = c.ghBool(ce.val, `"cancel-in-progress"`)
			if expr == "" && conc.CancelInProgress {
				cancelNode = ce.val
			}
			if expr != "" {
				cancel = ghText{expr, c.resolve(ce.val)}
			}
		case "queue":
			q, ok := c.ghString(ce.val, `"concurrency.queue"`)
			if !ok {
				continue
			}
			switch q {
			case "max":
				queueMax, queueNode = true, c.resolve(ce.val)
			case "single":
			default:
				c.at(c.resolve(ce.val), RuleValue, `invalid "queue" %q in "concurrency" of %s (valid: max, single)`, q, where)
			}
		default:
			c.ghUnknownKey(ce, `"concurrency"`, ghConcurrencyKeys)
		}
	}
	if queueMax && cancelNode != nil {
		c.at(queueNode, RuleValue, `"queue: max" cannot be combined with "cancel-in-progress: true" in "concurrency" of %s: a queue keeps runs that cancelling would drop`, where)
	}
	if !hasGroup {
		c.at(e.key, RuleValue, `"concurrency" of %s has no "group"`, where)
		return nil, cancel
	}
	if conc.Group == "" {
		return nil, cancel
	}
	return conc, cancel
}

// ghPermissionScopes are the scopes of GITHUB_TOKEN and the levels each
// may be given.
var ghPermissionScopes = map[string][]string{
	"actions":             {"read", "write", "none"},
	"artifact-metadata":   {"read", "write", "none"},
	"attestations":        {"read", "write", "none"},
	"checks":              {"read", "write", "none"},
	"contents":            {"read", "write", "none"},
	"deployments":         {"read", "write", "none"},
	"discussions":         {"read", "write", "none"},
	"id-token":            {"write", "none"},
	"issues":              {"read", "write", "none"},
	"models":              {"read", "none"},
	"packages":            {"read", "write", "none"},
	"pages":               {"read", "write", "none"},
	"pull-requests":       {"read", "write", "none"},
	"repository-projects": {"read", "write", "none"},
	"security-events":     {"read", "write", "none"},
	"statuses":            {"read", "write", "none"},
}

// ghPermissions reads permissions: "read-all", "write-all", or a mapping
// of scopes to levels. The result maps every scope it grants to a level;
// read-all and write-all are spelled out over every scope (to the level
// each scope allows), and {} is an empty, non-nil map: no access.
func (c *checker) ghPermissions(v *yaml.Node) map[string]string {
	v = c.resolve(v)
	if v.Kind == yaml.ScalarNode && !isNull(v) {
		level := v.Value
		if level != "read-all" && level != "write-all" {
			c.at(v, RulePermissions, `invalid permissions %q: give "read-all", "write-all", or a mapping of scopes to read, write or none%s`, level, didYouMean(c.suggest(level, []string{"read-all", "write-all"})))
			return nil
		}
		want := strings.TrimSuffix(level, "-all")
		out := make(map[string]string, len(ghPermissionScopes))
		for scope, levels := range ghPermissionScopes {
			switch {
			case slices.Contains(levels, want):
				out[scope] = want
			case want == "write" && slices.Contains(levels, "read"):
				out[scope] = "read"
			}
		}
		return out
	}
	entries, ok := c.ghMapping(v, `"permissions"`, false)
	if !ok {
		return nil
	}
	out := make(map[string]string, len(entries))
	scopes := sortedKeys(ghPermissionScopes)
	for _, e := range entries {
		levels, known := ghPermissionScopes[e.name]
		if !known {
			c.at(e.key, RulePermissions, "unknown permission scope %q%s (scopes: %s)", e.name, didYouMean(c.suggest(e.name, scopes)), strings.Join(scopes, ", "))
			continue
		}
		level, ok := c.ghString(e.val, fmt.Sprintf("permission %q", e.name))
		if !ok {
			continue
		}
		if !slices.Contains(levels, level) {
			c.at(c.resolve(e.val), RulePermissions, "invalid level %q for permission %q (valid: %s)", level, e.name, strings.Join(levels, ", "))
			continue
		}
		out[e.name] = level
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
