package compiler

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/compiler/expr"
)

// ghJob is one job of a workflow as written. Fields that may hold ${{ }}
// expressions keep their text and node: they are rendered per matrix
// variant when the plan is built.
type ghJob struct {
	wf  *ghWorkflow
	id  string
	key *yaml.Node

	name     ghText
	needs    []needRef // as written, resolved to job IDs as declared
	hasNeeds bool
	cond     ghText // if
	runsOn   []ghText
	env      map[string]string
	defaults ghDefaults
	steps    []cikit.Step

	timeout      ghText // timeout-minutes
	allowFailure bool   // continue-on-error
	coeExpr      ghText

	container   *ghContainer
	services    []ghService
	matrix      *ghMatrix
	noFailFast  bool // strategy.fail-fast: false
	maxParallel int  // strategy.max-parallel as a number; 0 when not one
	permissions map[string]string
	environment *ghEnvironment
	concurrency *cikit.Concurrency
	concNode    *yaml.Node
	concCancel  ghText // cancel-in-progress, when an expression
	outputs     map[string]string

	uses    ghText // a reusable workflow
	with    []ghWith
	secrets []ghWith
	inherit bool // secrets: inherit

	// mergedEnv is the env of the job's specs, shared by its variants;
	// nil until the first is built.
	mergedEnv map[string]string

	secretNames    []string        // the secrets it reads, once known; shared by its variants
	staticServices []cikit.Service // its services when no variant changes them

	exprs   []ghUse  // the job's expressions, checked once every job is known
	stepIDs []string // the id of each step, "" for a step without one

	// warnings are what the job asks for that is not honoured yet, for
	// JobSpec.Warnings (see checker.notHonoured).
	warnings []string
}

// warn records, at n, that job j asks for something the platform does not
// honour yet.
func (g *ghCompiler) warn(j *ghJob, n *yaml.Node, format string, args ...any) {
	j.warnings = append(j.warnings, g.c.notHonoured(n, format, args...))
}

// runnerAction says whether the runner runs action ref itself: any
// version of actions/checkout, which is the runner's own checkout, of
// the artifact and cache actions, which it runs natively from their
// inputs (expr.BuiltinAction), and the actions of the workflow's
// repository (./path). Other actions, of JavaScript or Docker, are not
// run yet.
func runnerAction(ref string) bool {
	_, builtin := expr.BuiltinAction(ref)
	return builtin || strings.HasPrefix(ref, "./") || isCheckoutAction(ref)
}

// isCheckoutAction reports whether ref is actions/checkout, any version.
func isCheckoutAction(ref string) bool {
	name, _, ok := strings.Cut(ref, "@")
	return ok && strings.EqualFold(name, "actions/checkout")
}

// checkoutHonoured are the inputs of actions/checkout the runner's
// checkout follows.
var checkoutHonoured = []string{"clean", "fetch-depth", "path", "ref", "repository", "submodules"}

// checkoutInputs are the other inputs of actions/checkout, with their
// default (a value that asks for nothing) and what they ask for.
var checkoutInputs = map[string]struct{ def, what string }{
	"fetch-tags":                {"false", "fetching tags"},
	"filter":                    {"", "a partial clone filter"},
	"github-server-url":         {"", "another GitHub server"},
	"lfs":                       {"false", "Git LFS files"},
	"persist-credentials":       {"", ""},
	"set-safe-directory":        {"", ""},
	"show-progress":             {"", ""},
	"sparse-checkout":           {"", "a sparse checkout"},
	"sparse-checkout-cone-mode": {"true", "a sparse checkout without cone mode"},
	"ssh-key":                   {"", "an SSH key"},
	"ssh-known-hosts":           {"", "SSH known hosts"},
	"ssh-strict":                {"true", "SSH without strict host key checking"},
	"ssh-user":                  {"", "another SSH user"},
	"token":                     {"", "its own token (the runner fetches with the job's read-only credential)"},
}

// checkoutInputs checks the inputs of an actions/checkout step: an
// unknown one, which the action ignores with a warning, and one that asks
// for what the runner's checkout does not do are warnings.
// persist-credentials, set-safe-directory and show-progress ask for
// nothing that matters here: the credential is never left in the
// workspace, and the checkout is the runner's.
func (g *ghCompiler) checkoutInputs(j *ghJob, with *yaml.Node, where string) {
	c := g.c
	if with.Kind != yaml.MappingNode {
		return
	}
	for _, e := range c.ghEntries(with, true) {
		if slices.Contains(checkoutHonoured, e.name) {
			continue
		}
		in, known := checkoutInputs[e.name]
		if !known {
			valid := slices.Concat(checkoutHonoured, slices.Collect(maps.Keys(checkoutInputs)))
			slices.Sort(valid)
			g.warn(j, e.key, "input %q is not one of actions/checkout's, which ignores it (in %s)%s", e.name, where, didYouMean(c.suggest(e.name, valid)))
			continue
		}
		v := c.resolve(e.val)
		if in.what == "" || isNull(v) || v.Kind == yaml.ScalarNode && (v.Value == "" || strings.EqualFold(v.Value, in.def)) {
			continue
		}
		g.warn(j, e.key, "input %q of actions/checkout asks for %s, which the runner's checkout does not do yet", e.name, in.what)
	}
}

// ghText is a string value as written and the node it comes from.
type ghText struct {
	s    string
	node *yaml.Node // nil when absent
}

func (t ghText) set() bool { return t.node != nil }

// ghWith is one input or secret passed to a reusable workflow.
type ghWith struct {
	name  string
	key   *yaml.Node
	value ghText
	// typ is the YAML type of the value, to check it against the type
	// of the input: "!!str", "!!bool", "!!int", "!!float".
	typ string
}

type ghContainer struct {
	image ghText
	env   map[string]string
	creds *cikit.RegistryCredentials
	opts  ghContainerOptions
}

type ghService struct {
	name    string
	key     *yaml.Node
	image   ghText
	env     map[string]string
	ports   []string
	command string
	options string
	creds   *cikit.RegistryCredentials
	opts    ghContainerOptions
}

type ghEnvironment struct {
	name, url ghText
}

// jobs reads the jobs mapping.
func (g *ghCompiler) jobs(wf *ghWorkflow, e entry) {
	c := g.c
	v := c.resolve(e.val)
	switch {
	case isNull(v):
		c.at(e.key, RuleJobs, `no jobs: "jobs" is empty`)
		return
	case v.Kind != yaml.MappingNode:
		c.at(v, RuleType, `"jobs" must be a mapping of job IDs to jobs, got %s`, kindName(v))
		return
	}
	entries := c.ghEntries(v, true)
	if len(entries) == 0 {
		c.at(e.key, RuleJobs, `no jobs: "jobs" is empty`)
	}
	for _, je := range entries {
		j := g.job(wf, je)
		wf.jobs = append(wf.jobs, j)
		wf.jobIndex[strings.ToLower(j.id)] = j
	}
	// Needs are checked once every job is known, against the job IDs as
	// declared: GitHub compares them ignoring case.
	ids := make([]string, len(wf.jobs))
	for i, j := range wf.jobs {
		ids[i] = j.id
	}
	for _, j := range wf.jobs {
		kept := j.needs[:0]
		for _, r := range j.needs {
			target, ok := wf.jobIndex[strings.ToLower(r.id)]
			switch {
			case !ok:
				hint := c.suggest(r.id, ids)
				if hint == j.id {
					hint = ""
				}
				if hint != "" {
					c.at(r.node, RuleNeeds, "job %q needs unknown job %q%s", j.id, r.id, didYouMean(hint))
				} else {
					c.at(r.node, RuleNeeds, "job %q needs unknown job %q (jobs: %s)", j.id, r.id, list(ids))
				}
			case target == j:
				c.at(r.node, RuleCycle, "job %q needs itself", j.id)
			default:
				r.id = target.id
				kept = append(kept, r)
			}
		}
		j.needs = kept
	}
}

// job reads one job.
func (g *ghCompiler) job(wf *ghWorkflow, e entry) *ghJob {
	c := g.c
	j := &ghJob{wf: wf, id: e.name, key: e.key}
	if !validGitHubID(e.name) {
		c.at(e.key, RuleJobID, "invalid job ID %q: IDs start with a letter or _ and hold only letters, digits, - and _", e.name)
	}
	v := c.resolve(e.val)
	if isNull(v) {
		c.at(e.key, RuleSteps, `job %q is empty: give it "runs-on" and "steps", or "uses" to call a reusable workflow`, j.id)
		return j
	}
	if v.Kind != yaml.MappingNode {
		c.at(v, RuleType, "job %q must be a mapping, got %s", j.id, kindName(v))
		return j
	}
	where := fmt.Sprintf("job %q", j.id)
	var stepsOnly, callOnly *entry
	var stepsNode, stepsKey *yaml.Node
	hasRunsOn := false
	for _, k := range c.ghEntries(v, false) {
		val := c.resolve(k.val)
		switch k.name {
		case "name":
			if s, ok := c.ghString(val, `"name"`); ok {
				j.name = ghText{s, val}
				g.use(&j.exprs, j.name, ghAtJob, 0)
			}
		case "needs":
			j.hasNeeds = true
			j.needs = g.needs(val, j.id)
		case "if":
			j.cond = g.condText(val, where)
			if g.useCond(&j.exprs, j.cond, ghAtJobIf, 0) != nil {
				g.constantCondition(j.cond)
			}
		case "runs-on":
			hasRunsOn = true
			j.runsOn = g.runsOn(val, j.id)
			if val.Kind == yaml.ScalarNode {
				g.use(&j.exprs, ghText{val.Value, val}, ghAtJob, 0)
			} else {
				for _, l := range j.runsOn {
					g.use(&j.exprs, l, ghAtJob, 0)
				}
			}
		case "permissions":
			if j.permissions = c.ghPermissions(val); len(j.permissions) > 0 {
				g.warn(j, k.key, "permissions are not applied yet: the job's steps get no GitHub token with them")
			}
		case "environment":
			j.environment = g.environment(k, j.id)
			if j.environment != nil {
				g.warn(j, k.key, "environment chooses the secrets the job reads, and the platform's protection rules and policy for it apply; no deployment is recorded yet")
			}
			if e := j.environment; e != nil {
				g.use(&j.exprs, e.name, ghAtJob, 0)
				g.use(&j.exprs, e.url, ghAtEnvURL, 0)
			}
		case "concurrency":
			j.concurrency, j.concCancel = c.ghConcurrency(k, where)
			j.concNode = c.groupNode(val)
			g.useConcurrency(&j.exprs, val, ghAtJob)
		case "outputs":
			j.outputs = g.outputs(val, j.id)
			g.useMap(&j.exprs, val, ghAtOutputs, 0)
		case "env":
			j.env = c.ghEnv(val, where)
			g.useMap(&j.exprs, val, ghAtJobEnv, 0)
		case "defaults":
			j.defaults = c.ghDefaultsOf(k, where)
			if run := c.resolve(val); run.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(run.Content); i += 2 {
					g.useMap(&j.exprs, run.Content[i+1], ghAtDefaults, 0)
				}
			}
		case "steps":
			stepsNode, stepsKey = val, k.key
		case "timeout-minutes":
			j.timeout = g.minutes(val, "timeout-minutes", where)
			g.use(&j.exprs, j.timeout, ghAtJob, 0)
		case "strategy":
			g.strategy(j, k)
			g.useAll(&j.exprs, val, ghAtStrategy, 0)
		case "continue-on-error":
			var expr string
			j.allowFailure, expr, _ = c.ghBool(val, `"continue-on-error"`)
			if expr != "" {
				j.coeExpr = ghText{expr, val}
				g.use(&j.exprs, j.coeExpr, ghAtJob, 0)
			}
		case "container":
			if j.container = g.container(k, j.id); j.container != nil {
				j.warnings = append(j.warnings, j.container.opts.warnings...)
			}
			g.useContainer(&j.exprs, val)
		case "services":
			if j.services = g.services(val, j.id); len(j.services) > 0 {
				for _, s := range j.services {
					j.warnings = append(j.warnings, s.opts.warnings...)
				}
			}
			if val.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(val.Content); i += 2 {
					g.useContainer(&j.exprs, c.resolve(val.Content[i+1]))
				}
			}
		case "snapshot":
			g.snapshot(k, j)
			g.warn(j, k.key, "snapshot is not taken: no runner image is made from the job")
		case "uses":
			if s, ok := c.ghNonEmpty(val, `"uses"`); ok {
				j.uses = ghText{s, val}
				if local, msg := parseCallRef(s); local == "" && msg == "" {
					g.warn(j, val, "reusable workflow %q of another repository is not run by the platform yet: job %q fails when it runs", s, j.id)
				}
			}
		case "with":
			j.with = g.withs(val, `"with"`)
			for _, w := range j.with {
				g.use(&j.exprs, w.value, ghAtJob, 0)
			}
		case "secrets":
			if val.Kind == yaml.ScalarNode && !isNull(val) {
				if val.Value == "inherit" {
					j.inherit = true
				} else {
					c.at(val, RuleCall, `"secrets" of job %q must be a mapping of secrets or "inherit", got %s%s`, j.id, ghDescribe(val), didYouMean(c.suggest(val.Value, []string{"inherit"})))
				}
			} else {
				j.secrets = g.withs(val, `"secrets"`)
				for _, w := range j.secrets {
					g.use(&j.exprs, w.value, ghAtJobEnv, 0)
				}
			}
		default:
			c.ghUnknownKey(k, where, ghJobKeys)
			continue
		}
		if slices.Contains(ghStepsOnlyKeys, k.name) && stepsOnly == nil {
			stepsOnly = &k
		}
		if slices.Contains(ghCallOnlyKeys, k.name) && callOnly == nil && k.name != "uses" {
			callOnly = &k
		}
	}
	if j.uses.set() {
		if stepsOnly != nil {
			c.at(stepsOnly.key, RuleKey, "job %q calls a reusable workflow with \"uses\", so it cannot have %q (it may have name, uses, with, secrets, strategy, needs, if, concurrency and permissions)", j.id, stepsOnly.name)
		}
		return j
	}
	if callOnly != nil {
		c.at(callOnly.key, RuleKey, "%q is only for a job that calls a reusable workflow with \"uses\", and job %q has no \"uses\"", callOnly.name, j.id)
	}
	if !hasRunsOn {
		c.at(e.key, RuleRunsOn, "job %q has no \"runs-on\": say which runner it runs on, such as \"runs-on: ubuntu-latest\"", j.id)
	}
	if stepsNode == nil {
		c.at(e.key, RuleSteps, "job %q has no \"steps\"", j.id)
	} else {
		j.steps = g.steps(stepsKey, stepsNode, j)
	}
	return j
}

// needs reads a needs value: one job ID or a list of them. A repeated ID
// is dropped without a finding: it means the same.
func (g *ghCompiler) needs(v *yaml.Node, job string) []needRef {
	c := g.c
	ids, nodes := c.ghStrings(v, fmt.Sprintf(`"needs" of job %q`, job), false)
	var refs []needRef
	seen := map[string]bool{}
	for i, id := range ids {
		if seen[strings.ToLower(id)] {
			continue
		}
		seen[strings.ToLower(id)] = true
		refs = append(refs, needRef{id: id, node: nodes[i]})
	}
	return refs
}

// condText reads an if: condition. A bare boolean is a condition too
// (written "if: false"); its text is what was written.
func (g *ghCompiler) condText(v *yaml.Node, where string) ghText {
	v = g.c.resolve(v)
	if v.Kind != yaml.ScalarNode || isNull(v) || strings.TrimSpace(v.Value) == "" {
		g.c.at(v, RuleType, `"if" of %s must be a condition, got %s`, where, ghDescribe(v))
		return ghText{}
	}
	return ghText{v.Value, v}
}

// runsOn reads runs-on: a label, a list of labels, or {group, labels}.
// A runner group becomes the label "group:NAME".
func (g *ghCompiler) runsOn(v *yaml.Node, job string) []ghText {
	c := g.c
	what := fmt.Sprintf(`"runs-on" of job %q`, job)
	if v.Kind == yaml.MappingNode {
		var out []ghText
		var group ghText
		hasLabels := false
		for _, e := range c.ghEntries(v, false) {
			switch e.name {
			case "group":
				if s, ok := c.ghNonEmpty(e.val, `"runs-on.group"`); ok {
					group = ghText{"group:" + s, c.resolve(e.val)}
				}
			case "labels":
				hasLabels = true
				labels, nodes := c.ghStrings(e.val, `"runs-on.labels"`, false)
				for i, l := range labels {
					out = append(out, ghText{l, c.resolve(nodes[i])})
				}
			default:
				c.ghUnknownKey(e, what, ghRunsOnKeys)
			}
		}
		if group.set() {
			out = append([]ghText{group}, out...)
		}
		if !group.set() && !hasLabels {
			c.at(v, RuleRunsOn, `%s needs a "group" or "labels"`, what)
		}
		return out
	}
	labels, nodes := c.ghStrings(v, what, false)
	if v.Kind == yaml.SequenceNode && len(v.Content) == 0 || isNull(v) {
		c.at(v, RuleRunsOn, "%s names no runner label", what)
	}
	out := make([]ghText, len(labels))
	for i, l := range labels {
		out[i] = ghText{l, c.resolve(nodes[i])}
	}
	return out
}

// minutes reads timeout-minutes: a positive number, or an expression.
func (g *ghCompiler) minutes(v *yaml.Node, key, where string) ghText {
	c := g.c
	switch {
	case isNull(v):
		return ghText{}
	case v.Kind == yaml.ScalarNode && (v.ShortTag() == "!!int" || v.ShortTag() == "!!float"):
		f, err := strconv.ParseFloat(strings.ReplaceAll(v.Value, "_", ""), 64)
		if err != nil || !(f > 0) {
			c.at(v, RuleTimeout, "%q of %s must be a positive number of minutes, got %s", key, where, v.Value)
			return ghText{}
		}
		return ghText{v.Value, v}
	case v.Kind == yaml.ScalarNode && v.ShortTag() == "!!str" && isExprTemplate(v.Value):
		return ghText{v.Value, v}
	}
	c.at(v, RuleType, "%q of %s must be a number of minutes or a ${{ }} expression, got %s", key, where, ghDescribe(v))
	return ghText{}
}

// environment reads environment: a name, or {name, url, deployment}.
func (g *ghCompiler) environment(e entry, job string) *ghEnvironment {
	c := g.c
	v := c.resolve(e.val)
	what := fmt.Sprintf(`"environment" of job %q`, job)
	if v.Kind == yaml.ScalarNode {
		if s, ok := c.ghNonEmpty(v, what); ok {
			return &ghEnvironment{name: ghText{s, v}}
		}
		return nil
	}
	entries, ok := c.ghMapping(v, what, false)
	if !ok {
		return nil
	}
	env := &ghEnvironment{}
	for _, ee := range entries {
		switch ee.name {
		case "name":
			if s, ok := c.ghNonEmpty(ee.val, `"environment.name"`); ok {
				env.name = ghText{s, c.resolve(ee.val)}
			}
		case "url":
			if s, ok := c.ghString(ee.val, `"environment.url"`); ok {
				env.url = ghText{s, c.resolve(ee.val)}
			}
		case "deployment":
			c.ghBool(ee.val, `"environment.deployment"`)
		default:
			c.ghUnknownKey(ee, what, ghEnvironmentKeys)
		}
	}
	if !env.name.set() {
		c.at(e.key, RuleValue, "%s has no \"name\"", what)
		return nil
	}
	return env
}

// outputs reads a job's outputs: names to (usually) expressions.
func (g *ghCompiler) outputs(v *yaml.Node, job string) map[string]string {
	c := g.c
	entries, ok := c.ghMapping(v, fmt.Sprintf(`"outputs" of job %q`, job), true)
	if !ok || len(entries) == 0 {
		return nil
	}
	out := make(map[string]string, len(entries))
	for _, e := range entries {
		if s, ok := c.ghString(e.val, fmt.Sprintf("output %q", e.name)); ok {
			out[e.name] = s
		}
	}
	return out
}

// withs reads the with: or secrets: of a reusable workflow call.
func (g *ghCompiler) withs(v *yaml.Node, what string) []ghWith {
	c := g.c
	entries, ok := c.ghMapping(v, what, true)
	if !ok {
		return nil
	}
	out := make([]ghWith, 0, len(entries))
	for _, e := range entries {
		val := c.resolve(e.val)
		if val.Kind != yaml.ScalarNode {
			c.at(val, RuleType, "%q in %s must be a string, number or boolean, got %s", e.name, what, kindName(val))
			continue
		}
		out = append(out, ghWith{name: e.name, key: e.key, value: ghText{val.Value, val}, typ: val.ShortTag()})
	}
	return out
}

// container reads container: an image, or a mapping with image and its
// options. Ports and volumes are checked and not kept: a job's container
// publishes nothing and mounts only the workspace.
func (g *ghCompiler) container(e entry, job string) *ghContainer {
	c := g.c
	v := c.resolve(e.val)
	what := fmt.Sprintf(`"container" of job %q`, job)
	if v.Kind == yaml.ScalarNode {
		s, ok := c.ghNonEmpty(v, what)
		if !ok {
			return nil
		}
		return &ghContainer{image: ghText{s, v}}
	}
	entries, ok := c.ghMapping(v, what, false)
	if !ok {
		return nil
	}
	ct := &ghContainer{}
	hasImage := false
	for _, ce := range entries {
		switch ce.name {
		case "image":
			hasImage = true
			if s, ok := c.ghString(ce.val, `"container.image"`); ok {
				ct.image = ghText{s, c.resolve(ce.val)}
			}
		case "credentials":
			ct.creds = g.credentials(ce)
		case "env":
			ct.env = c.ghEnv(ce.val, what)
		case "ports", "volumes":
			c.ghStrings(ce.val, fmt.Sprintf("%q", ce.name), false)
		case "options":
			if o, ok := c.ghString(ce.val, `"options"`); ok {
				ct.opts = c.containerOptions(c.resolve(ce.val), o, false)
			}
		default:
			c.ghUnknownKey(ce, what, ghContainerKeys)
		}
	}
	if !hasImage {
		c.at(e.key, RuleValue, "%s has no \"image\"", what)
		return nil
	}
	return ct
}

// credentials reads the registry credentials of a container or service,
// kept as written for the runner to expand; nil when they are not both
// given, or are computed by one expression.
func (g *ghCompiler) credentials(e entry) *cikit.RegistryCredentials {
	c := g.c
	v := c.resolve(e.val)
	if v.Kind == yaml.ScalarNode && isExprTemplate(v.Value) {
		return nil
	}
	entries, ok := c.ghMapping(v, `"credentials"`, false)
	if !ok {
		return nil
	}
	has := map[string]bool{}
	var creds cikit.RegistryCredentials
	for _, ce := range entries {
		switch ce.name {
		case "username", "password":
			has[ce.name] = true
			s, _ := c.ghString(ce.val, fmt.Sprintf("%q", ce.name))
			if ce.name == "username" {
				creds.Username = s
			} else {
				creds.Password = s
			}
		default:
			c.ghUnknownKey(ce, `"credentials"`, ghCredentialKeys)
		}
	}
	if !has["username"] || !has["password"] {
		c.at(e.key, RuleValue, `"credentials" need both "username" and "password"`)
		return nil
	}
	return &creds
}

// services reads services: names to containers.
func (g *ghCompiler) services(v *yaml.Node, job string) []ghService {
	c := g.c
	if v.Kind == yaml.ScalarNode && isExprTemplate(v.Value) {
		c.at(v, RuleValue, `the services of job %q are computed by an expression; cikit needs them written out to start them`, job)
		return nil
	}
	entries, ok := c.ghMapping(v, fmt.Sprintf(`"services" of job %q`, job), true)
	if !ok {
		return nil
	}
	var out []ghService
	for _, se := range entries {
		s := ghService{name: se.name, key: se.key}
		what := fmt.Sprintf("service %q of job %q", se.name, job)
		sv := c.resolve(se.val)
		if sv.Kind == yaml.ScalarNode {
			if img, ok := c.ghNonEmpty(sv, what); ok {
				s.image = ghText{img, sv}
				out = append(out, s)
			}
			continue
		}
		fields, ok := c.ghMapping(sv, what, false)
		if !ok {
			continue
		}
		hasImage := false
		for _, f := range fields {
			switch f.name {
			case "image":
				hasImage = true
				if img, ok := c.ghString(f.val, `"image"`); ok {
					s.image = ghText{img, c.resolve(f.val)}
				}
			case "credentials":
				s.creds = g.credentials(f)
			case "env":
				s.env = c.ghEnv(f.val, what)
			case "ports":
				s.ports, _ = c.ghStrings(f.val, `"ports"`, false)
			case "volumes":
				c.ghStrings(f.val, `"volumes"`, false)
			case "options":
				if o, ok := c.ghString(f.val, `"options"`); ok {
					s.options, s.opts = o, c.containerOptions(c.resolve(f.val), o, true)
				}
			case "command":
				s.command, _ = c.ghString(f.val, `"command"`)
			case "entrypoint":
				c.ghString(f.val, `"entrypoint"`)
			default:
				c.ghUnknownKey(f, what, ghServiceKeys)
			}
		}
		if !hasImage {
			c.at(se.key, RuleValue, "%s has no \"image\"", what)
			continue
		}
		out = append(out, s)
	}
	return out
}

// snapshot checks snapshot: an image name, or {image-name, version, if}.
// cikit builds no runner images, so nothing of it is kept.
func (g *ghCompiler) snapshot(e entry, j *ghJob) {
	c := g.c
	v := c.resolve(e.val)
	what := fmt.Sprintf(`"snapshot" of job %q`, j.id)
	if v.Kind == yaml.ScalarNode {
		c.ghNonEmpty(v, what)
		return
	}
	entries, ok := c.ghMapping(v, what, false)
	if !ok {
		return
	}
	hasName := false
	for _, se := range entries {
		switch se.name {
		case "image-name":
			hasName = true
			c.ghNonEmpty(se.val, `"image-name"`)
		case "version":
			if s, ok := c.ghNonEmpty(se.val, `"version"`); ok && s != "" {
				c.ghCheckGlob(se.val, true)
			}
		case "if":
			t := g.condText(se.val, what)
			if g.useCond(&j.exprs, t, ghAtSnapshotIf, 0) != nil {
				g.constantCondition(t)
			}
		default:
			c.ghUnknownKey(se, what, ghSnapshotKeys)
		}
	}
	if !hasName {
		c.at(e.key, RuleValue, `%s has no "image-name"`, what)
	}
}

// steps reads a job's steps.
func (g *ghCompiler) steps(key, v *yaml.Node, j *ghJob) []cikit.Step {
	c := g.c
	if isNull(v) || v.Kind == yaml.SequenceNode && len(v.Content) == 0 {
		c.at(key, RuleSteps, "job %q has no steps", j.id)
		return nil
	}
	if v.Kind != yaml.SequenceNode {
		c.at(v, RuleType, `"steps" of job %q must be a list of steps, got %s`, j.id, kindName(v))
		return nil
	}
	ids := map[string]*yaml.Node{}
	steps := make([]cikit.Step, 0, len(v.Content))
	for i, item := range v.Content {
		s, ok := g.step(item, i+1, j, ids)
		j.stepIDs = append(j.stepIDs, s.ID)
		if ok {
			steps = append(steps, s)
		}
	}
	return steps
}

// step reads one step; ok is false when it is reported.
func (g *ghCompiler) step(item *yaml.Node, n int, j *ghJob, ids map[string]*yaml.Node) (cikit.Step, bool) {
	c := g.c
	var s cikit.Step
	where := fmt.Sprintf("step %d of job %q", n, j.id)
	v := c.resolve(item)
	if v.Kind != yaml.MappingNode {
		c.at(item, RuleType, `%s must be a mapping with "run" or "uses", got %s`, where, kindName(v))
		return s, false
	}
	entries := c.ghEntries(v, false)
	var run, uses *entry
	for _, e := range entries {
		switch e.name {
		case "run":
			run = &e
		case "uses":
			uses = &e
		}
	}
	ok := true
	switch {
	case run != nil && uses != nil:
		later := run
		if uses.key.Line > run.key.Line || uses.key.Line == run.key.Line && uses.key.Column > run.key.Column {
			later = uses
		}
		c.at(later.key, RuleSteps, `%s has both "run" and "uses"; a step runs a command or an action, not both`, where)
		ok = false
	case run == nil && uses == nil:
		c.at(item, RuleSteps, `%s has neither "run" nor "uses"`, where)
		ok = false
	}
	valid := ghStepKeys
	switch {
	case run != nil && uses == nil:
		valid = ghRunStepKeys
	case uses != nil && run == nil:
		valid = ghUsesStepKeys
	}
	for _, e := range entries {
		val := c.resolve(e.val)
		switch e.name {
		case "name", "run", "working-directory", "continue-on-error", "timeout-minutes":
			if val.Kind == yaml.ScalarNode {
				g.use(&j.exprs, ghText{val.Value, val}, ghAtStep, n)
			}
		case "with", "env":
			g.useMap(&j.exprs, val, ghAtStep, n)
		}
		switch {
		case !slices.Contains(valid, e.name):
			if slices.Contains(ghStepKeys, e.name) {
				kind := `a step that runs a command ("run")`
				if run == nil {
					kind = `a step that uses an action ("uses")`
				}
				c.at(e.key, RuleKey, "%q is not for %s, in %s", e.name, kind, where)
			} else {
				c.ghUnknownKey(e, where, valid)
			}
		case e.name == "id":
			id, isText := c.ghNonEmpty(val, `"id"`)
			if !isText || id == "" {
				continue
			}
			s.ID = id
			if !hasExpr(id) && !validGitHubID(id) {
				c.at(val, RuleStepID, "invalid step ID %q in %s: IDs start with a letter or _ and hold only letters, digits, - and _", id, where)
			}
			lower := strings.ToLower(id)
			if first, dup := ids[lower]; dup {
				c.at(val, RuleStepID, "step ID %q in job %q is already used at line %d (IDs ignore case)", id, j.id, first.Line)
			}
			ids[lower] = val
		case e.name == "name":
			s.Name, _ = c.ghString(val, `"name"`)
		case e.name == "if":
			if t := g.condText(val, where); t.set() {
				if g.useCond(&j.exprs, t, ghAtStepIf, n) != nil {
					g.constantCondition(t)
				}
				s.If = g.stepCondition(t)
			}
		case e.name == "run":
			text, isText := c.ghString(val, `"run"`)
			if isText && strings.TrimSpace(text) == "" {
				c.at(e.key, RuleSteps, "%s has an empty \"run\" command", where)
				ok = false
			}
			s.Run = text
		case e.name == "shell":
			s.Shell, _ = c.ghNonEmpty(val, `"shell"`)
		case e.name == "working-directory":
			s.WorkingDirectory, _ = c.ghNonEmpty(val, `"working-directory"`)
		case e.name == "uses":
			ref, isText := c.ghNonEmpty(val, `"uses"`)
			if isText && ref != "" {
				if msg := checkActionRef(ref); msg != "" {
					c.at(val, RuleValue, "invalid action %q in %s: %s", ref, where, msg)
					ok = false
				} else if !runnerAction(ref) {
					g.warn(j, val, "action %q is not run by the platform yet (it runs actions/checkout, the artifact and cache actions and local ./ actions): %s fails when it runs", ref, where)
				}
			}
			s.Uses = ref
		case e.name == "with":
			s.With = g.stepWith(val, where)
		case e.name == "env":
			s.Env = c.ghEnv(val, where)
		case e.name == "continue-on-error":
			var coe string
			s.ContinueOnError, coe, _ = c.ghBool(val, `"continue-on-error"`)
			if coe != "" {
				// Known only when the step runs: kept, with the step
				// marked as allowed to fail only when it is constant.
				s.ContinueOnError = false
			}
		case e.name == "timeout-minutes":
			t := g.minutes(val, "timeout-minutes", where)
			if t.set() && !hasExpr(t.s) {
				if f, err := strconv.ParseFloat(t.s, 64); err == nil && f != float64(int64(f)) {
					c.at(val, RuleTimeout, `"timeout-minutes" of %s must be a whole number of minutes, got %s`, where, t.s)
				}
				s.Timeout = minutesDuration(t.s)
			}
		}
	}
	if !ok {
		return s, false
	}
	if isCheckoutAction(s.Uses) {
		for _, e := range entries {
			if e.name == "with" {
				g.checkoutInputs(j, c.resolve(e.val), where)
			}
		}
	}
	if action, builtin := expr.BuiltinAction(s.Uses); builtin {
		var with *yaml.Node
		for _, e := range entries {
			if e.name == "with" {
				with = c.resolve(e.val)
			}
		}
		g.builtinActionInputs(j, action, c.resolve(uses.val), with, where)
	}
	if s.Run != "" {
		s.Shell = firstNonEmpty(s.Shell, j.defaults.shell, j.wf.defaults.shell)
		s.WorkingDirectory = firstNonEmpty(s.WorkingDirectory, j.defaults.workingDirectory, j.wf.defaults.workingDirectory)
	}
	if s.Name == "" {
		if s.Run != "" {
			s.Name = firstLine(s.Run)
		} else {
			s.Name = s.Uses
		}
	}
	return s, true
}

// stepWith reads the inputs of an action.
func (g *ghCompiler) stepWith(v *yaml.Node, where string) map[string]string {
	c := g.c
	entries, ok := c.ghMapping(v, fmt.Sprintf(`"with" of %s`, where), true)
	if !ok || len(entries) == 0 {
		return nil
	}
	out := make(map[string]string, len(entries))
	for _, e := range entries {
		val := c.resolve(e.val)
		switch {
		case isNull(val):
			out[e.name] = ""
		case val.Kind == yaml.ScalarNode:
			out[e.name] = val.Value
		default:
			c.at(val, RuleType, "input %q of %s must be a string, number or boolean, got %s", e.name, where, kindName(val))
		}
	}
	return out
}

// checkActionRef checks the form of an action reference and says what is
// wrong, or "".
func checkActionRef(ref string) string {
	switch {
	case strings.HasPrefix(ref, "docker://"):
		if len(ref) == len("docker://") {
			return "name the image after docker://"
		}
	case strings.HasPrefix(ref, "./"), strings.HasPrefix(ref, "$/"):
		if strings.Contains(ref, "@") && strings.HasPrefix(ref, "$/") {
			return "an action of this repository ($/) takes no @ref: it is always the running commit"
		}
	case hasExpr(ref):
		return "GitHub does not evaluate expressions in \"uses\""
	default:
		name, ref, ok := strings.Cut(ref, "@")
		if !ok || ref == "" {
			return `name a version: "owner/repo@ref" (a tag, branch or commit SHA)`
		}
		if owner, repo, _ := strings.Cut(name, "/"); owner == "" || repo == "" {
			return `an action is "owner/repo@ref", "owner/repo/path@ref", "./path" or "docker://image"`
		}
	}
	return ""
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// strategy reads a job's strategy: its matrix, fail-fast and
// max-parallel.
func (g *ghCompiler) strategy(j *ghJob, e entry) {
	c := g.c
	entries, ok := c.ghMapping(e.val, fmt.Sprintf(`"strategy" of job %q`, j.id), false)
	if !ok {
		return
	}
	for _, se := range entries {
		v := c.resolve(se.val)
		switch se.name {
		case "matrix":
			j.matrix = g.matrix(se, j.id)
		case "fail-fast":
			b, x, ok := c.ghBool(v, `"fail-fast"`)
			if b || x != "" {
				g.warn(j, se.key, "fail-fast is not honoured yet: a failing variant does not cancel the others")
			}
			j.noFailFast = ok && !b && x == "" && !isNull(v)
		case "max-parallel":
			g.warn(j, se.key, "max-parallel is not honoured yet: the variants run as runners allow")
			switch {
			case v.Kind == yaml.ScalarNode && v.ShortTag() == "!!int":
				if n, err := strconv.Atoi(strings.ReplaceAll(v.Value, "_", "")); err != nil || n <= 0 {
					c.at(v, RuleValue, `"max-parallel" of job %q must be a positive whole number, got %s`, j.id, v.Value)
				} else {
					j.maxParallel = n
				}
			case v.Kind == yaml.ScalarNode && v.ShortTag() == "!!str" && isExprTemplate(v.Value):
			default:
				c.at(v, RuleType, `"max-parallel" of job %q must be a whole number or a ${{ }} expression, got %s`, j.id, ghDescribe(v))
			}
		default:
			c.ghUnknownKey(se, fmt.Sprintf(`"strategy" of job %q`, j.id), ghStrategyKeys)
		}
	}
}

// mergeEnv overlays maps in order into a new map; nil when all are empty.
func mergeEnv(envs ...map[string]string) map[string]string {
	n := 0
	for _, e := range envs {
		n += len(e)
	}
	if n == 0 {
		return nil
	}
	out := make(map[string]string, n)
	for _, e := range envs {
		maps.Copy(out, e)
	}
	return out
}

// useAll registers every string of a value: the strategy, whose matrix
// values may hold expressions at any depth.
func (g *ghCompiler) useAll(uses *[]ghUse, v *yaml.Node, where *ghWhere, step int) {
	v = g.c.resolve(v)
	switch v.Kind {
	case yaml.ScalarNode:
		g.use(uses, ghText{v.Value, v}, where, step)
	case yaml.SequenceNode:
		for _, item := range v.Content {
			g.useAll(uses, item, where, step)
		}
	case yaml.MappingNode:
		for i := 1; i < len(v.Content); i += 2 {
			g.useAll(uses, v.Content[i], where, step)
		}
	}
}

// useContainer registers the expressions of a container or service: its
// image, env and credentials.
func (g *ghCompiler) useContainer(uses *[]ghUse, v *yaml.Node) {
	c := g.c
	v = c.resolve(v)
	if v.Kind == yaml.ScalarNode {
		g.use(uses, ghText{v.Value, v}, ghAtJob, 0)
		return
	}
	if v.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		val := c.resolve(v.Content[i+1])
		switch c.resolve(v.Content[i]).Value {
		case "image":
			g.use(uses, ghText{val.Value, val}, ghAtJob, 0)
		case "env":
			g.useMap(uses, val, ghAtServiceEnv, 0)
		case "credentials":
			g.useAll(uses, val, ghAtCredential, 0)
		}
	}
}
