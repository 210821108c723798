package compiler

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/cikit/cikit"
)

// Valid keys, sorted: they are listed in messages as they are.
var (
	nativeTopKeys = []string{"env", "jobs", "stages"}
	nativeJobKeys = []string{"allow_failure", "approval", "artifacts", "cache", "checkout", "concurrency", "env", "environment", "if", "image",
		"matrix", "name", "needs", "retry", "runs_on", "secrets", "services", "stage", "steps", "timeout"}
	nativeStepKeys = []string{"env", "name", "run"}
)

// validJobID reports whether id matches [A-Za-z_][A-Za-z0-9_.-]*. Job IDs
// are written in needs lists and shown in URLs and logs, so they are
// identifiers; dots and dashes allow "test.unit" and "e2e-web".
func validJobID(id string) bool { return validName(id, ".-") }

// validEnvName reports whether name matches [A-Za-z_][A-Za-z0-9_]*: the
// names every shell can export.
func validEnvName(name string) bool { return validName(name, "") }

// validName reports whether s is a letter or _ followed by letters,
// digits, _ and the bytes in more.
func validName(s, more string) bool {
	for i := 0; i < len(s); i++ {
		b := s[i]
		switch {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', b == '_':
		case i > 0 && ('0' <= b && b <= '9' || strings.IndexByte(more, b) >= 0):
		default:
			return false
		}
	}
	return s != ""
}

// owner names what a key belongs to, for messages: the pipeline, a job or
// a step of a job. It is formatted only when a finding is reported, which
// keeps valid files from paying for messages they never get.
type owner struct {
	job  *string // nil for the pipeline
	step int     // 1-based; 0 for the job itself
}

func (o owner) String() string {
	switch {
	case o.job == nil:
		return "the pipeline"
	case o.step > 0:
		return fmt.Sprintf("step %d of job %q", o.step, *o.job)
	}
	return fmt.Sprintf("job %q", *o.job)
}

// of and in attach the owner to a message about one of its keys.
func (o owner) of() string {
	if o.job == nil {
		return ""
	}
	return " of " + o.String()
}

func (o owner) in() string {
	if o.job == nil {
		return " at the top level"
	}
	return " in " + o.String()
}

// compileNative is the front end of the native format.
func compileNative(c *checker, root *yaml.Node) *draft {
	d := &draft{}
	if root == nil || isNull(root) {
		c.report(1, 1, RuleJobs, `no jobs: the file is empty; define jobs under "jobs"`)
		return d
	}
	root = c.resolve(root)
	if root.Kind != yaml.MappingNode {
		c.at(root, RuleType, `a pipeline must be a mapping with a "jobs" key, got %s`, kindName(root))
		return d
	}
	var stages, env, jobs *entry
	for _, e := range c.entries(root) {
		switch e.name {
		case "stages":
			stages = &e
		case "env":
			env = &e
		case "jobs":
			jobs = &e
		case "name":
			d.name, _ = c.scalar(c.resolve(e.val), "name", owner{})
		case "on":
			d.triggers = c.nativeOn(e.val)
		default:
			c.unknownKey(e, owner{}, nativeTopKeys)
		}
	}
	declared := false
	if stages != nil {
		d.stages, declared = c.nativeStages(stages)
	}
	if env != nil {
		d.env = c.env(c.resolve(env.val), owner{})
	}
	if jobs == nil {
		c.report(1, 1, RuleJobs, `no jobs: the pipeline has no "jobs" key`)
		return d
	}
	jobsNode := c.resolve(jobs.val)
	switch {
	case isNull(jobsNode):
		c.at(jobs.key, RuleJobs, `no jobs: "jobs" is empty`)
		return d
	case jobsNode.Kind != yaml.MappingNode:
		c.at(jobsNode, RuleType, `"jobs" must be a mapping of job IDs to jobs, got %s`, kindName(jobsNode))
		return d
	}
	entries := c.entries(jobsNode)
	if len(entries) == 0 {
		c.at(jobs.key, RuleJobs, `no jobs: "jobs" is empty`)
	}
	stageIndex := make(map[string]int, len(d.stages))
	for i, s := range d.stages {
		stageIndex[s] = i
	}
	for _, e := range entries {
		js := c.nativeJob(e, d, declared, stageIndex)
		c.chargeJobs(len(d.jobs), js, e.key, e.name)
		d.jobs = append(d.jobs, js...)
	}
	if len(c.runWarnings) > 0 {
		for _, j := range d.jobs {
			j.spec.Warnings = slices.Concat(c.runWarnings, j.spec.Warnings)
		}
	}
	return d
}

// nativeStages reads the stages list. declared reports that the pipeline
// uses stages at all; "stages: []" and "stages:" do not.
func (c *checker) nativeStages(e *entry) (stages []string, declared bool) {
	n := c.resolve(e.val)
	if isNull(n) {
		return nil, false
	}
	if n.Kind != yaml.SequenceNode {
		c.at(n, RuleType, `"stages" must be a list of stage names, got %s`, kindName(n))
		// The jobs' stage keys cannot be checked against a list we do
		// not have; do not report them as well.
		return nil, true
	}
	seen := make(map[string]bool, len(n.Content))
	for i, item := range n.Content {
		v := c.resolve(item)
		s, ok := text(v)
		if !ok || strings.TrimSpace(s) == "" {
			what := kindName(v)
			if ok {
				what = "an empty string"
			}
			c.at(item, RuleStage, "stage %d must be a non-empty name, got %s", i+1, what)
			continue
		}
		if seen[s] {
			c.at(item, RuleStage, "stage %q is listed twice", s)
			continue
		}
		seen[s] = true
		stages = append(stages, s)
	}
	return stages, len(n.Content) > 0
}

// nativeJob reads one job: one jobDecl, or one per variant of its matrix.
// A job too broken to read is still returned, so that the jobs needing it
// are not reported as well.
func (c *checker) nativeJob(e entry, d *draft, declared bool, stageIndex map[string]int) []*jobDecl {
	id := e.name
	own := owner{job: &id}
	if !validJobID(id) {
		c.at(e.key, RuleJobID, "invalid job ID %q: IDs start with a letter or _ and hold only letters, digits, _, . and -", id)
	}
	j := &jobDecl{
		spec:  &cikit.JobSpec{ID: id, Name: id},
		key:   e.key,
		stage: -1,
	}
	n := c.resolve(e.val)
	if isNull(n) {
		c.at(e.key, RuleSteps, "job %q has no steps", id)
		return []*jobDecl{j}
	}
	if n.Kind != yaml.MappingNode {
		c.at(n, RuleType, "job %q must be a mapping of job keys, got %s", id, kindName(n))
		return []*jobDecl{j}
	}
	// The stage and steps are read after the loop: the stage needs the
	// job's position in the stage list, and the steps are reported at the
	// job's key when missing.
	var stage, steps, stepsKey, matrix *yaml.Node
	var cond *parsedIf
	j.spec.Checkout = &cikit.Checkout{Strategy: "fetch"}
	// warn records what the job asks for that is not honoured yet.
	warn := func(n *yaml.Node, format string, args ...any) {
		j.spec.Warnings = append(j.spec.Warnings, c.notHonoured(n, format, args...))
	}
	tplNodes := make([]*yaml.Node, tplCount) // where templates were written
	for _, k := range c.entries(n) {
		v := c.resolve(k.val)
		switch k.name {
		case "name":
			tplNodes[tplName] = v
			if s, ok := c.scalar(v, k.name, own); ok && s != "" {
				j.spec.Name = s
			}
		case "stage":
			if !isNull(v) {
				stage = v
			}
		case "image":
			tplNodes[tplImage] = v
			j.spec.Image, _ = c.scalar(v, k.name, own)
		case "checkout":
			j.spec.Checkout = c.nativeCheckout(v, own)
		case "matrix":
			matrix = v
		case "if":
			cond = c.nativeIf(v, own)
		case "runs_on":
			tplNodes[tplRunsOn] = v
			j.spec.RunsOn = c.stringList(v, k.name, own)
		case "services":
			tplNodes[tplServices] = v
			j.spec.Services = c.nativeServices(v, own)
		case "concurrency":
			tplNodes[tplConcurrency] = v
			j.spec.Concurrency = c.nativeConcurrency(v, own)
		case "environment":
			tplNodes[tplEnvironment] = v
			if j.spec.Environment = c.nativeEnvironment(v, own); j.spec.Environment != nil {
				warn(k.key, "environment chooses the secrets the job reads, and the platform's protection rules and policy for it apply; no deployment is recorded yet")
			}
		case "cache":
			tplNodes[tplCache] = v
			j.spec.Caches = c.nativeCaches(v, own)
		case "artifacts":
			j.spec.Artifacts = c.nativeArtifacts(v, own)
		case "retry":
			j.spec.Retry = c.nativeRetry(v, own)
		case "secrets":
			j.spec.Secrets = c.nativeSecrets(v, own)
		case "env":
			j.spec.Env = c.env(v, own)
		case "needs":
			j.hasNeeds = true
			j.needs = c.needs(v, own)
		case "steps":
			steps, stepsKey = v, k.key
		case "allow_failure":
			j.spec.AllowFailure = c.boolean(v, k.name, own)
		case "approval":
			j.spec.Gate = c.nativeApproval(v, own)
		case "timeout":
			j.spec.Timeout = c.timeout(v, own)
		default:
			c.unknownKey(k, own, nativeJobKeys)
		}
	}
	if steps == nil {
		c.at(e.key, RuleSteps, "job %q has no steps", id)
	} else {
		j.spec.Steps = c.nativeSteps(stepsKey, steps, own)
	}
	c.nativeStage(j, stage, d.stages, declared, stageIndex)
	if len(d.env) > 0 {
		c.chargePlan(len(d.env), e.key)
		env := maps.Clone(d.env)
		maps.Copy(env, j.spec.Env)
		j.spec.Env = env
	}
	jobs := []*jobDecl{j}
	if matrix != nil {
		if m := c.nativeMatrix(matrix, own); m != nil {
			jobs = c.expandNative(j, m, tplNodes)
		}
	} else {
		c.applyTemplates(j, nil, tplNodes)
	}
	for _, vj := range jobs {
		c.decideIf(vj, cond, own)
	}
	return jobs
}

// nativeStage places a job in its stage, v (nil when the job names none).
func (c *checker) nativeStage(j *jobDecl, v *yaml.Node, stages []string, declared bool, stageIndex map[string]int) {
	if v == nil {
		if len(stages) > 0 {
			j.spec.Stage, j.stage = stages[0], 0
		}
		return
	}
	s, ok := c.scalar(v, "stage", owner{job: &j.spec.ID})
	switch {
	case !ok:
	case !declared:
		c.at(v, RuleStage, "job %q sets stage %q but the pipeline declares no stages", j.spec.ID, s)
	case len(stages) == 0:
		// The stages list is itself invalid and already reported.
	default:
		i, known := stageIndex[s]
		if !known {
			c.at(v, RuleStage, "job %q has unknown stage %q%s (stages: %s)", j.spec.ID, s, didYouMean(c.suggest(s, stages)), list(stages))
			return
		}
		j.spec.Stage, j.stage = s, i
	}
}

// nativeSteps reads a job's steps, n: each a command string, or a mapping
// with run and optionally name and env.
func (c *checker) nativeSteps(key, n *yaml.Node, own owner) []cikit.Step {
	if isNull(n) || n.Kind == yaml.SequenceNode && len(n.Content) == 0 {
		c.at(key, RuleSteps, "%s has no steps", own)
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		c.at(n, RuleType, `"steps"%s must be a list of commands (strings or mappings), got %s`, own.of(), kindName(n))
		return nil
	}
	steps := make([]cikit.Step, 0, len(n.Content))
	for i, item := range n.Content {
		stepOwner := owner{job: own.job, step: i + 1}
		v := c.resolve(item)
		var step cikit.Step
		switch {
		case isNull(v):
			c.at(item, RuleSteps, "%s has an empty command", stepOwner)
			continue
		case v.Kind == yaml.ScalarNode:
			step.Run = v.Value
		case v.Kind == yaml.MappingNode:
			var ok bool
			if step, ok = c.nativeStep(item, v, stepOwner); !ok {
				continue
			}
		default:
			c.at(v, RuleType, "%s must be a command string or a mapping with \"run\", got %s", stepOwner, kindName(v))
			continue
		}
		if strings.TrimSpace(step.Run) == "" {
			c.at(item, RuleSteps, "%s has an empty command", stepOwner)
			continue
		}
		if step.Name == "" {
			step.Name = firstLine(step.Run)
		}
		steps = append(steps, step)
	}
	return steps
}

// nativeStep reads a mapping step; ok is false when it is reported.
func (c *checker) nativeStep(item, m *yaml.Node, own owner) (step cikit.Step, ok bool) {
	hasRun := false
	ok = true
	for _, k := range c.entries(m) {
		v := c.resolve(k.val)
		switch k.name {
		case "name":
			step.Name, _ = c.scalar(v, k.name, own)
		case "run":
			hasRun = true
			if isNull(v) {
				c.at(k.key, RuleSteps, "%s has an empty command", own)
				ok = false
				break
			}
			var isText bool
			if step.Run, isText = c.scalar(v, k.name, own); !isText {
				ok = false
			}
		case "env":
			step.Env = c.env(v, own)
		default:
			c.unknownKey(k, own, nativeStepKeys)
		}
	}
	if !hasRun {
		c.at(item, RuleSteps, `%s has no "run" command`, own)
		ok = false
	}
	return step, ok
}

// firstLine returns the first line of a script that is not blank, trimmed:
// a step's default name.
func firstLine(run string) string {
	for line := range strings.Lines(run) {
		if s := strings.TrimSpace(line); s != "" {
			return s
		}
	}
	return ""
}

// scalar returns the text of a value that must be a string; ok is false
// for null (not reported: it means "not set") and for other types
// (reported).
func (c *checker) scalar(v *yaml.Node, key string, own owner) (string, bool) {
	if isNull(v) {
		return "", false
	}
	s, ok := text(v)
	if !ok {
		c.at(v, RuleType, "%q%s must be a string, got %s", key, own.of(), kindName(v))
	}
	return s, ok
}

// needs reads a needs value: one job ID or a list of them. A repeated ID
// is dropped without a finding: the meaning is the same.
func (c *checker) needs(v *yaml.Node, own owner) []needRef {
	var items []*yaml.Node
	switch {
	case isNull(v):
		return nil
	case v.Kind == yaml.ScalarNode:
		items = []*yaml.Node{v}
	case v.Kind == yaml.SequenceNode:
		items = v.Content
	default:
		c.at(v, RuleType, `"needs"%s must be a job ID or a list of job IDs, got %s`, own.of(), kindName(v))
		return nil
	}
	var refs []needRef
	seen := make(map[string]bool, len(items))
	for _, item := range items {
		iv := c.resolve(item)
		id, ok := text(iv)
		if !ok {
			c.at(item, RuleType, `entries of "needs"%s must be job IDs, got %s`, own.of(), kindName(iv))
			continue
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		refs = append(refs, needRef{id: id, node: item})
	}
	return refs
}

func (c *checker) timeout(v *yaml.Node, own owner) time.Duration {
	if isNull(v) {
		return 0
	}
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" {
		c.at(v, RuleType, `"timeout"%s must be a duration such as "10m" or "1h30m", got %s`, own.of(), kindName(v))
		return 0
	}
	d, err := time.ParseDuration(v.Value)
	if err != nil {
		c.at(v, RuleTimeout, `invalid timeout %q%s: use a duration such as "90s", "10m" or "1h30m"`, v.Value, own.of())
		return 0
	}
	if d <= 0 {
		c.at(v, RuleTimeout, "timeout%s must be positive, got %q", own.of(), v.Value)
		return 0
	}
	return d
}

// env reads an env mapping, n. Values keep the text they were written with
// ("1.10" stays "1.10", not "1.1"); null is the empty string.
func (c *checker) env(n *yaml.Node, own owner) map[string]string {
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		c.at(n, RuleType, `"env"%s must be a mapping of names to values, got %s`, own.of(), kindName(n))
		return nil
	}
	entries := c.entries(n)
	if len(entries) == 0 {
		return nil
	}
	env := make(map[string]string, len(entries))
	for _, e := range entries {
		if !validEnvName(e.name) {
			c.at(e.key, RuleEnv, "invalid env name %q%s: names start with a letter or _ and hold only letters, digits and _", e.name, own.in())
			continue
		}
		v := c.resolve(e.val)
		switch {
		case isNull(v):
			env[e.name] = ""
		case v.Kind == yaml.ScalarNode:
			env[e.name] = v.Value
		default:
			c.at(v, RuleType, "env %q%s must be a string, number or boolean, got %s", e.name, own.of(), kindName(v))
		}
	}
	if len(env) == 0 {
		return nil
	}
	return env
}

// unknownKey reports a key that is not one of valid: with the nearest
// valid key when one is close, else with the list of them.
func (c *checker) unknownKey(e entry, own owner, valid []string) {
	if hint := c.suggest(e.name, valid); hint != "" {
		c.at(e.key, RuleKey, "unknown key %q%s%s", e.name, own.in(), didYouMean(hint))
		return
	}
	c.at(e.key, RuleKey, "unknown key %q%s (valid keys: %s)", e.name, own.in(), strings.Join(valid, ", "))
}
