package compiler

import (
	"errors"
	"io/fs"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/compiler/expr"
	"github.com/cikit/cikit/internal/refslug"
)

// GitLab decides at pipeline creation which jobs a pipeline has: rules,
// only/except, workflow:rules and include:rules look at the pipeline's
// variables, its ref and source, the files it changes and the files that
// exist. The compiler decides the same way when Options.Event tells it
// enough, with three-valued logic: what depends on something it does not
// know is Unknown, and an Unknown decision keeps the job, so that a lint
// or a graph shows every job that could run.

// tri is a three-valued truth.
type tri int8

const (
	triFalse tri = iota
	triTrue
	triUnknown
)

func triOf(b bool) tri {
	if b {
		return triTrue
	}
	return triFalse
}

func (t tri) and(u tri) tri {
	switch {
	case t == triFalse || u == triFalse:
		return triFalse
	case t == triTrue && u == triTrue:
		return triTrue
	}
	return triUnknown
}

func (t tri) or(u tri) tri {
	switch {
	case t == triTrue || u == triTrue:
		return triTrue
	case t == triFalse && u == triFalse:
		return triFalse
	}
	return triUnknown
}

func (t tri) not() tri {
	switch t {
	case triTrue:
		return triFalse
	case triFalse:
		return triTrue
	}
	return triUnknown
}

// refKind is the kind of ref a pipeline runs for.
type refKind uint8

const (
	refUnknown refKind = iota
	refBranch
	refTag
	refMergeRequest
)

// glVars are the variables a condition sees, and what is known of the
// pipeline. With no Event (known is false) nothing is known: variables
// in the file could be overridden when the pipeline is created, and
// everything else comes from the event. With an Event, its Variables are
// the pipeline's (project, group, trigger and manual ones): a variable
// that is neither there, nor in the file, nor predefined is unset; a
// predefined one the event does not tell is unknown.
type glVars struct {
	known   bool
	event   *Event
	source  string // CI_PIPELINE_SOURCE, "" when unknown
	ref     refKind
	refName string // the branch or tag name, "" when unknown
	// given are the event's variables, which win over the file's;
	// predefined are those derived from the event's fields; null names
	// predefined variables known to be unset for this kind of pipeline.
	given, predefined map[string]string
	null              map[string]bool
	// file holds the file's variables in force (global, then the job's
	// over them), below given and above predefined, as in GitLab.
	file map[string]string
}

// eventSources maps Event.Name to GitLab's pipeline sources.
var eventSources = map[string]string{
	"push": "push", "tag": "push",
	"merge_request": "merge_request_event", "merge_request_event": "merge_request_event", "pull_request": "merge_request_event",
	"schedule": "schedule", "manual": "web", "web": "web", "workflow_dispatch": "web",
	"api": "api", "trigger": "trigger", "pipeline": "pipeline", "parent_pipeline": "parent_pipeline",
	"chat": "chat", "external": "external", "external_pull_request_event": "external_pull_request_event",
}

func newGLVars(e *Event) *glVars {
	v := &glVars{event: e}
	if e == nil {
		return v
	}
	v.known = true
	v.given = e.Variables
	v.predefined = map[string]string{"CI": "true", "GITLAB_CI": "true"}
	v.null = map[string]bool{}
	v.source = e.Variables["CI_PIPELINE_SOURCE"]
	if v.source == "" {
		v.source = eventSources[e.Name]
		if v.source == "" {
			v.source = e.Name
		}
	}
	switch {
	case v.source == "merge_request_event":
		v.ref, v.refName = refMergeRequest, cmpOr(e.Branch, strings.TrimPrefix(e.Ref, "refs/heads/"))
	case e.Tag != "":
		v.ref, v.refName = refTag, e.Tag
	case strings.HasPrefix(e.Ref, "refs/tags/"):
		v.ref, v.refName = refTag, strings.TrimPrefix(e.Ref, "refs/tags/")
	case e.Branch != "":
		v.ref, v.refName = refBranch, e.Branch
	case strings.HasPrefix(e.Ref, "refs/heads/"):
		v.ref, v.refName = refBranch, strings.TrimPrefix(e.Ref, "refs/heads/")
	}
	if v.source != "" {
		v.predefined["CI_PIPELINE_SOURCE"] = v.source
	}
	set := func(name, val string) {
		if val != "" {
			v.predefined[name] = val
		}
	}
	set("CI_DEFAULT_BRANCH", e.DefaultBranch)
	set("CI_COMMIT_SHA", e.SHA)
	if len(e.SHA) >= 8 {
		set("CI_COMMIT_SHORT_SHA", e.SHA[:8])
	}
	if v.refName != "" {
		set("CI_COMMIT_REF_NAME", v.refName)
		set("CI_COMMIT_REF_SLUG", refslug.Of(v.refName))
	}
	switch v.ref {
	case refBranch:
		set("CI_COMMIT_BRANCH", v.refName)
		v.null["CI_COMMIT_TAG"] = true
	case refTag:
		set("CI_COMMIT_TAG", v.refName)
		v.null["CI_COMMIT_BRANCH"] = true
	case refMergeRequest:
		v.null["CI_COMMIT_BRANCH"] = true
		v.null["CI_COMMIT_TAG"] = true
		set("CI_MERGE_REQUEST_SOURCE_BRANCH_NAME", v.refName)
		set("CI_MERGE_REQUEST_TARGET_BRANCH_NAME", e.BaseBranch)
	}
	return v
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// with returns vars seeing the file's variables fileVars.
func (v *glVars) with(fileVars map[string]string) *glVars {
	w := *v
	w.file = fileVars
	return &w
}

// lookup returns the value of a variable: ok is false when it is unset;
// known is false when the compiler cannot tell.
func (v *glVars) lookup(name string) (val string, ok, known bool) {
	if !v.known {
		return "", false, false
	}
	if s, ok := v.given[name]; ok {
		return s, true, true
	}
	if s, ok := v.file[name]; ok {
		return s, true, true
	}
	if s, ok := v.predefined[name]; ok {
		return s, true, true
	}
	if v.null[name] {
		return "", false, true
	}
	if strings.HasPrefix(name, "CI_MERGE_REQUEST_") && v.ref != refUnknown && v.ref != refMergeRequest {
		return "", false, true
	}
	if strings.HasPrefix(name, "CI_EXTERNAL_PULL_REQUEST_") && v.source != "" && v.source != "external_pull_request_event" {
		return "", false, true
	}
	// The event carries the pipeline's variables, so any other variable
	// is unset, as GitLab sees it; but GitLab predefines many more than
	// the event tells, and those are unknown.
	predefined := strings.HasPrefix(name, "CI_") || strings.HasPrefix(name, "GITLAB_") ||
		strings.HasPrefix(name, "CHAT_") || name == "TRIGGER_PAYLOAD"
	return "", false, !predefined
}

// expand replaces $NAME and ${NAME} in s with known values; ok is false
// when s refers to a variable whose value is not known.
func (v *glVars) expand(s string) (string, bool) {
	if !strings.Contains(s, "$") {
		return s, true
	}
	ok := true
	out := varRef.ReplaceAllStringFunc(s, func(m string) string {
		name := strings.Trim(m, "${}")
		val, set, known := v.lookup(name)
		if !known {
			ok = false
		}
		if !set {
			return ""
		}
		return val
	})
	return out, ok
}

var varRef = regexp.MustCompile(`\$(\w+|\{\w+\})`)

// changesMatch decides a changes clause: its glob patterns against the
// files the pipeline changes. GitLab counts changes as true in pipelines
// that have no diff (tags, schedules, web and API runs …).
func (v *glVars) changesMatch(patterns []string, compareTo bool) tri {
	if !v.known {
		return triUnknown
	}
	switch {
	case v.ref == refTag:
		return triTrue
	case v.source != "" && v.source != "push" && v.source != "merge_request_event" && v.source != "external_pull_request_event":
		return triTrue
	case compareTo || v.event.ChangedFiles == nil:
		return triUnknown
	}
	result := triFalse
	for _, p := range patterns {
		p, ok := v.expand(p)
		if !ok {
			result = triUnknown
			continue
		}
		for _, f := range v.event.ChangedFiles {
			if gitlabGlobMatch(p, f) {
				return triTrue
			}
		}
	}
	return result
}

// maxExistsComparisons is GitLab's bound on the path comparisons of the
// glob patterns of one exists clause: past it GitLab takes the clause as
// true without comparing.
const maxExistsComparisons = 10_000

// existsMatch decides an exists clause as GitLab does: whether one of
// the patterns names a file of the repository. Plain paths are looked up
// through the FileSource. Glob patterns are matched against every file of
// the repository when the source is a FileLister (a glob under a folder
// that does not exist matches nothing), and unknown otherwise; when the
// files times the globs are more than GitLab compares, the clause is
// true, as on GitLab. An empty pattern names no file.
func (g *glFront) existsMatch(patterns []string, vars *glVars) tri {
	result := triFalse
	var globs []string
	for _, p := range patterns {
		p, ok := vars.expand(p)
		p = strings.TrimPrefix(p, "/")
		switch {
		case !ok:
			result = triUnknown
			continue
		case p == "":
			continue
		case isGlob(p):
			globs = append(globs, p)
			continue
		case g.src == nil:
			result = triUnknown
			continue
		}
		// Whether the file exists, not what it holds: a source that can
		// refuses it unread.
		_, err := readMax(g.ctx, g.src, p, 0)
		_, tooLarge := errors.AsType[*FileTooLargeError](err)
		switch {
		case err == nil || tooLarge:
			return triTrue
		case errors.Is(err, fs.ErrNotExist):
		default:
			result = triUnknown
		}
	}
	if len(globs) == 0 {
		return result
	}
	lister, ok := g.src.(FileLister)
	if !ok {
		return triUnknown
	}
	files, err := g.listFiles(lister, maxExistsComparisons/len(globs))
	switch {
	case errors.Is(err, ErrTooManyFiles):
		return triTrue
	case err != nil:
		return triUnknown
	}
	for _, glob := range globs {
		for _, f := range files {
			if gitlabGlobMatch(glob, f) {
				return triTrue
			}
		}
	}
	return result
}

// glListing is the repository's files, listed once for every exists
// clause that lists as many.
type glListing struct {
	files []string
	err   error
}

func (g *glFront) listFiles(l FileLister, max int) ([]string, error) {
	if r, ok := g.listed[max]; ok {
		return r.files, r.err
	}
	files, err := l.ListFiles(g.ctx, "", max)
	if g.listed == nil {
		g.listed = map[int]glListing{}
	}
	g.listed[max] = glListing{files, err}
	return files, err
}

// refsMatch decides an only/except refs list.
func (v *glVars) refsMatch(patterns []string) tri {
	result := triFalse
	for _, p := range patterns {
		result = result.or(v.refMatch(p))
		if result == triTrue {
			return result
		}
	}
	return result
}

func (v *glVars) refMatch(pattern string) tri {
	pattern, project, hasProject := strings.Cut(pattern, "@")
	inProject := triTrue
	if hasProject {
		path, set, known := v.lookup("CI_PROJECT_PATH")
		inProject = triUnknown
		if known {
			inProject = triOf(set && path == project)
		}
	}
	if !v.known {
		return triUnknown.and(inProject)
	}
	var m tri
	switch {
	case pattern == "branches" && v.ref != refUnknown:
		m = triOf(v.ref == refBranch)
	case pattern == "tags" && v.ref != refUnknown:
		m = triOf(v.ref == refTag)
	case pattern == "branches" || pattern == "tags":
		m = triUnknown
	case isSourceKeyword(pattern):
		src := strings.TrimSuffix(v.source, "_event")
		m = triOf(src == pattern || pluralize(src) == pattern)
		if v.source == "" {
			m = triUnknown
		}
	case v.ref == refUnknown || v.refName == "":
		m = triUnknown
	case v.ref == refMergeRequest:
		// Ref names and patterns match branch and tag pipelines only.
		m = triFalse
	default:
		if re, ok := refRegexp(pattern); ok {
			m = triOf(re != nil && re.MatchString(v.refName))
		} else {
			m = triOf(pattern == v.refName)
		}
	}
	return m.and(inProject)
}

// glSourceKeywords are the pipeline sources only/except may name.
var glSourceKeywords = []string{"api", "chat", "external", "external_pull_requests", "merge_requests",
	"parent_pipelines", "pipelines", "pushes", "schedules", "triggers", "web", "webide"}

func isSourceKeyword(s string) bool { return slices.Contains(glSourceKeywords, s) }

func pluralize(s string) string {
	if strings.HasSuffix(s, "sh") || strings.HasSuffix(s, "ch") || strings.HasSuffix(s, "s") || strings.HasSuffix(s, "x") {
		return s + "es"
	}
	return s + "s"
}

// refRegexp reads a "/regexp/flags" ref pattern; ok is false for a plain
// name, re is nil for an invalid regular expression.
func refRegexp(p string) (re *regexp.Regexp, ok bool) {
	if len(p) < 2 || p[0] != '/' {
		return nil, false
	}
	end := strings.LastIndexByte(p, '/')
	if end == 0 || strings.Trim(p[end+1:], "ismU") != "" {
		return nil, false
	}
	re, err := rubyRegexp(p[1:end], p[end+1:])
	if err != nil {
		return nil, true
	}
	return re, true
}

// rubyRegexp compiles a regular expression written for Ruby (GitLab runs
// them with RE2 in Ruby syntax) with Go's RE2: \Z and \h are spelled
// differently, and Ruby's m flag is RE2's s.
func rubyRegexp(src, flags string) (*regexp.Regexp, error) {
	var b strings.Builder
	for i := 0; i < len(src); i++ {
		if src[i] == '\\' && i+1 < len(src) {
			switch src[i+1] {
			case 'Z':
				b.WriteString(`\z`)
				i++
				continue
			case 'h':
				b.WriteString(`[0-9a-fA-F]`)
				i++
				continue
			case '/':
				b.WriteByte('/')
				i++
				continue
			}
			b.WriteByte(src[i])
			b.WriteByte(src[i+1])
			i++
			continue
		}
		b.WriteByte(src[i])
	}
	prefix := ""
	for _, f := range flags {
		switch f {
		case 'i':
			prefix += "i"
		case 'm', 's':
			prefix += "s"
		case 'U':
			prefix += "U"
		}
	}
	expr := b.String()
	if prefix != "" {
		expr = "(?" + prefix + ")" + expr
	}
	return regexp.Compile(expr)
}

// glRule is one entry of rules (of a job, of workflow or of an include).
type glRule struct {
	node    *glv
	cond    *glCond // nil without if
	changes []string
	// compareTo records changes:compare_to, which the compiler cannot
	// evaluate: it would need the diff against another ref.
	compareTo    bool
	changesSet   bool
	exists       []string
	existsSet    bool
	existsRemote bool // exists:project, in another repository
	when         cikit.When
	whenNode     *glv
	allowFailure *bool
	exitCodes    []int
	startIn      time.Duration
	variables    *glVarsDecl
	needs        *glv // rules:needs replaces the job's needs
	// interruptible and autoCancel are where the rule asks for a
	// cancellation policy, which is not honoured yet; nil when it does
	// not.
	interruptible, autoCancel *yaml.Node
}

// glCond is a parsed if: expression and where it is written.
type glCond struct {
	text string
	node *glv
	expr expr.Node
}

// eval evaluates the condition with what vars know. A variable holding a
// regular expression that does not compile makes it false, as in GitLab.
func (c *glCond) eval(vars *glVars) tri {
	t, err := expr.EvalGitLabPartial(c.expr, vars.lookup)
	switch {
	case err != nil || t == expr.False:
		return triFalse
	case t == expr.True:
		return triTrue
	}
	return triUnknown
}

// match decides whether the rule's clauses all hold.
func (g *glFront) ruleMatch(r *glRule, vars *glVars) tri {
	t := triTrue
	if r.cond != nil {
		t = t.and(r.cond.eval(vars))
	}
	if r.changesSet {
		t = t.and(vars.changesMatch(r.changes, r.compareTo))
	}
	if r.existsSet {
		e := triUnknown
		if !r.existsRemote {
			e = g.existsMatch(r.exists, vars)
		}
		t = t.and(e)
	}
	return t
}

// glDecision is the outcome of rules: whether the job (or pipeline, or
// include) is in, the rule that decided, and, when the outcome hinges on
// one condition the compiler could not evaluate, that condition.
type glDecision struct {
	in   bool
	rule *glRule
	cond *cikit.Condition
}

// decideRules applies rules the way GitLab does, first match wins, with
// unknowns: a rule that may match and would include decides for
// inclusion (the job could run), and a rule that may match but would
// exclude is passed over (the job could still run through a later rule).
// No rule that may match means the job is out.
func (g *glFront) decideRules(rules []*glRule, vars *glVars) glDecision {
	for i, r := range rules {
		m := g.ruleMatch(r, vars)
		never := r.when == cikit.WhenNever
		switch {
		case m == triFalse:
			continue
		case m == triTrue:
			return glDecision{in: !never, rule: r}
		case never:
			continue
		}
		d := glDecision{in: true, rule: r}
		// The run-time condition is exact when only this rule's if is
		// unknown, every rule before it is known not to match, and no
		// later rule could include the job.
		exact := r.cond != nil && r.cond.eval(vars) == triUnknown &&
			(!r.changesSet || vars.changesMatch(r.changes, r.compareTo) == triTrue) &&
			(!r.existsSet || !r.existsRemote && g.existsMatch(r.exists, vars) == triTrue)
		for _, prev := range rules[:i] {
			exact = exact && g.ruleMatch(prev, vars) == triFalse
		}
		for _, next := range rules[i+1:] {
			exact = exact && (next.when == cikit.WhenNever || g.ruleMatch(next, vars) == triFalse)
		}
		if exact {
			d.cond = &cikit.Condition{Lang: cikit.LangGitLab, Expr: r.cond.text}
		}
		return d
	}
	return glDecision{}
}

// glPolicy is an only or except entry.
type glPolicy struct {
	node       *glv
	refs       []string
	refsSet    bool
	variables  []*glCond
	changes    []string
	changesSet bool
	kubernetes bool
}

// satisfied tells whether a policy holds: every kind of condition it sets
// holds (for only); for except, any holding excludes, which the caller
// computes with anySatisfied.
func (p *glPolicy) conditions(g *glFront, vars *glVars) []tri {
	var out []tri
	if p.refsSet {
		out = append(out, vars.refsMatch(p.refs))
	}
	if p.variables != nil {
		t := triFalse
		for _, c := range p.variables {
			t = t.or(c.eval(vars))
		}
		out = append(out, t)
	}
	if p.changesSet {
		out = append(out, vars.changesMatch(p.changes, false))
	}
	if p.kubernetes {
		// Whether a Kubernetes integration is active is not in the event.
		out = append(out, triUnknown)
	}
	return out
}

// decideOnlyExcept applies only and except: all of only's conditions must
// hold, and none of except's. A job without either runs for branches and
// tags, unless the pipeline has workflow:rules.
func (g *glFront) decideOnlyExcept(only, except *glPolicy, vars *glVars, hasWorkflowRules bool) tri {
	in := triTrue
	switch {
	case only != nil:
		for _, t := range only.conditions(g, vars) {
			in = in.and(t)
		}
	case !hasWorkflowRules:
		in = vars.refsMatch([]string{"branches", "tags"})
	}
	if except != nil {
		for _, t := range except.conditions(g, vars) {
			in = in.and(t.not())
		}
	}
	return in
}

// regexpProblem is what is wrong with a regular expression, in words.
func regexpProblem(err error) string {
	var re *syntax.Error
	if errors.As(err, &re) {
		return string(re.Code)
	}
	return err.Error()
}
