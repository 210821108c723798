package compiler

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/compiler/expr"
	"github.com/cikit/cikit/dag"
)

// expandVersion is the version of expandTemplate this compiler writes and
// reads. A template of another version is refused, never guessed at.
const expandVersion = 1

// expandTemplate is the content of JobSpec.Expand: what it takes to compile
// the placeholder's workflow again, the way it was compiled, once the
// outputs of the jobs the placeholder needs are known. Keeping the source
// rather than a pre-digested form of the job means that the variants are
// built by the same code as those of a matrix known at compile time, so
// that the two cannot drift apart.
type expandTemplate struct {
	Version int `json:"v"`
	// Job is the placeholder's ID in the plan.
	Job string `json:"job"`
	expandBody
}

// expandBody is the part of an expandTemplate that all the placeholders of
// a workflow share.
type expandBody struct {
	// File is the path of the workflow compiled; Files hold its content
	// and that of every workflow of the repository it calls, by path, as
	// they were at the commit.
	File  string            `json:"file"`
	Files map[string]string `json:"files"`
	// Binary holds, in base64, the files that are not UTF-8 (YAML may be
	// UTF-16), which a JSON string cannot hold as they are.
	Binary map[string][]byte `json:"binary,omitempty"`
	// Event and the limits are the Options the workflow was compiled
	// with, but for Event.ChangedFiles, which decides triggers only.
	Event         *Event `json:"event,omitempty"`
	MaxMatrixJobs int    `json:"max_matrix_jobs,omitempty"`
	MaxJobs       int    `json:"max_jobs,omitempty"`
	MaxFileBytes  int    `json:"max_file_bytes,omitempty"`
}

// expansion is the state of a compilation that expands one placeholder.
type expansion struct {
	job   string         // the placeholder's ID
	needs map[string]any // the needs context, as the runner builds it
	env   *expr.GitHubEnv
	// variants are the jobs the placeholder expands to, once built;
	// found says they were.
	variants []*jobDecl
	found    bool
	// placeholders are the jobs of this compilation whose own matrix is
	// computed at run time: none of them may be a variant.
	placeholders map[*cikit.JobSpec]bool
}

func (e *expansion) record(out []*jobDecl) {
	e.variants, e.found = out, true
}

// placeholder builds the one job that stands for job j, whose matrix only
// the run can compute: the job as it is without a matrix but for its
// concurrency group and timeout (a job calling a reusable workflow: the
// caller alone, its name and condition), with MatrixOf its own ID and
// Matrix the matrix as written, under "*". Its Expand is set once every
// file is read (fillExpand).
func (g *ghCompiler) placeholder(wf *ghWorkflow, j *ghJob, call *ghCall) []*jobDecl {
	c := g.c
	if c.expand == nil {
		g.checkExpandable(j, call)
	}
	var d *jobDecl
	if j.uses.set() {
		// The call is checked now, its inputs and the workflow it calls,
		// although only the variants run it.
		before := len(g.placeholders)
		g.buildVariant(wf, j, nil, j.id, call)
		if len(g.placeholders) > before {
			c.at(j.matrix.key, RuleMatrix, "the matrix of job %q is computed when the jobs it needs are done, and so is the matrix of job %q of the workflow it calls: a matrix computed at run time cannot hold another yet", j.id, g.placeholders[before].spec.ID)
			g.placeholders = g.placeholders[:before]
		}
		x := &ghEval{g: g, wf: wf, job: j, call: call}
		name := j.id
		if j.name.set() && j.name.s != "" {
			name = x.renderName(j.name)
		}
		when, cond := x.jobCondition(j.cond)
		perms := j.permissions
		if perms == nil {
			perms = wf.permissions
		}
		spec := &cikit.JobSpec{ID: j.id, Name: name, When: when, If: cond, Permissions: perms, Warnings: g.jobWarnings(wf, j)}
		d = &jobDecl{spec: spec, key: j.key, hasNeeds: j.hasNeeds, needs: j.needs, stage: -1}
	} else {
		d = g.buildVariant(wf, j, nil, j.id, call)[0]
		// Never run, the placeholder holds no concurrency group (its
		// variants, waiting for the group, would wait for it) and no
		// timeout: they are each variant's.
		d.spec.Concurrency, d.spec.Timeout = nil, 0
	}
	d.spec.MatrixOf = j.id
	d.spec.Matrix = g.unexpandedMatrix(j.matrix)
	g.placeholders = append(g.placeholders, d)
	if e := c.expand; e != nil {
		if e.placeholders == nil {
			e.placeholders = map[*cikit.JobSpec]bool{}
		}
		e.placeholders[d.spec] = true
	}
	return []*jobDecl{d}
}

// fillExpand sets the Expand of every placeholder, now that the files the
// workflow calls are read and the placeholders' IDs final. A template
// larger than cikit.MaxExpandBytes is reported at its job.
func (g *ghCompiler) fillExpand() {
	c := g.c
	if len(g.placeholders) == 0 || c.expand != nil {
		return
	}
	t := expandBody{File: c.file, Files: map[string]string{},
		MaxMatrixJobs: c.opts.MaxMatrixJobs, MaxJobs: c.opts.MaxJobs, MaxFileBytes: c.opts.MaxFileBytes}
	t.keep(c.file, g.data)
	for p, ce := range g.parsed {
		if ce != nil {
			t.keep(p, ce.data)
		}
	}
	if ev := c.opts.Event; ev != nil {
		cp := *ev
		cp.ChangedFiles = nil
		t.Event = &cp
	}
	// Every template is the same but for its job: the shared part is
	// encoded once, an object that the version and the job are put in
	// front of.
	body, err := json.Marshal(t)
	if err != nil {
		c.at(g.placeholders[0].key, RuleMatrix, "the matrix of job %q is computed at run time, and the event the workflow is compiled for cannot be kept with it: %v", g.placeholders[0].spec.ID, err)
		return
	}
	for _, d := range g.placeholders {
		id, _ := json.Marshal(d.spec.ID)
		b := make([]byte, 0, len(body)+len(id)+16)
		b = fmt.Appendf(b, `{"v":%d,"job":%s,`, expandVersion, id)
		b = append(b, body[1:]...)
		if len(b) > cikit.MaxExpandBytes {
			c.at(d.key, RuleLimit, "the matrix of job %q is computed when the jobs it needs are done, from what the job keeps of the workflow (%d bytes: the workflow, those it calls and the event), more than the %s a job may keep (cikit.MaxExpandBytes)", d.spec.ID, len(b), cikit.FormatBytes(cikit.MaxExpandBytes))
			continue
		}
		d.spec.Expand = b
	}
}

// keep adds the file at path to the template.
func (t *expandBody) keep(path string, data []byte) {
	if utf8.Valid(data) {
		t.Files[path] = string(data)
		return
	}
	if t.Binary == nil {
		t.Binary = map[string][]byte{}
	}
	t.Binary[path] = data
}

// checkExpandable reports what the matrix of job j reads that is not
// known when it is expanded, once the jobs it needs are done: only the
// needs context is added then. Compiled without an event (a lint), the
// inputs, vars and the parts of the github context an event gives are
// taken to be known, as they are when a run is compiled.
func (g *ghCompiler) checkExpandable(j *ghJob, call *ghCall) {
	env := g.baseEnv(g.top, nil)
	lint := g.c.opts.Event == nil
	reported := map[string]bool{}
	for _, t := range matrixTexts(j.matrix) {
		tm := g.parseTemplate(t.s, t.node, false)
		if !tm.ok {
			continue
		}
		for _, seg := range tm.segs {
			if seg.x == nil {
				continue
			}
			for _, r := range expr.References(g.expandRewrite(seg.x, j, call)) {
				if r.Path[0] == "needs" || !readsUnknown(r.Path, env) || lint && knownAtCompile(r.Path) {
					continue
				}
				if s := r.String(); !reported[s] {
					reported[s] = true
					g.c.at(j.matrix.key, RuleMatrix, "the matrix of job %q reads %s, which is not known before the job runs: a matrix the compiler cannot compute is computed once the jobs it needs are done, from what the compiler knows and needs.*", j.id, s)
				}
			}
		}
	}
}

// ghEventFields are the properties of the github context that an Event
// gives (ghGithubContext).
var ghEventFields = []string{"actor", "base_ref", "event", "event_name", "head_ref", "ref", "ref_name", "ref_type", "sha"}

// knownAtCompile reports whether a reference is known when a run is
// compiled, with its event: the inputs, vars, and what the event gives of
// the github context.
func knownAtCompile(path []string) bool {
	switch path[0] {
	case "inputs", "vars":
		return true
	case "github":
		return len(path) > 1 && slices.Contains(ghEventFields, path[1])
	}
	return false
}

// readsUnknown reports whether what path reads in env is not known, or
// holds something that is not.
func readsUnknown(path []string, env *expr.GitHubEnv) bool {
	if env.Unknown[path[0]] {
		return true
	}
	v, ok := env.Contexts[path[0]]
	if !ok {
		return false
	}
	for _, p := range path[1:] {
		if v == expr.Unknown {
			return true
		}
		if p == "*" {
			break
		}
		m, isMap := v.(map[string]any)
		if !isMap {
			return false
		}
		v = lookupFold(m, p)
	}
	return holdsUnknown(v)
}

func holdsUnknown(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		for _, x := range v {
			if holdsUnknown(x) {
				return true
			}
		}
	case []any:
		return slices.ContainsFunc(v, holdsUnknown)
	}
	return v == expr.Unknown
}

// matrixTexts are the templates of a matrix: its expressions and the
// strings of its literal values that hold some. The values' templates
// have no node: they are reported at the matrix.
func matrixTexts(m *ghMatrix) []ghText {
	var out []ghText
	add := func(t ghText) {
		if t.set() {
			out = append(out, t)
		}
	}
	var nested func(v any)
	nested = func(v any) {
		switch v := v.(type) {
		case string:
			if hasExpr(v) {
				out = append(out, ghText{v, nil})
			}
		case []any:
			for _, x := range v {
				nested(x)
			}
		case map[string]any:
			for _, k := range sortedKeys(v) {
				nested(v[k])
			}
		}
	}
	add(m.expr)
	for _, a := range m.axes {
		add(a.expr)
		nested(a.values)
	}
	add(m.includeExpr)
	add(m.excludeExpr)
	for _, r := range slices.Concat(m.include, m.exclude) {
		add(r.expr)
		for _, k := range r.keys {
			nested(r.values[k])
		}
	}
	return out
}

// expandRewrite rewrites an expression of job j's matrix, compiled for
// call, for the run of the top workflow, as its specs are rewritten when
// the run evaluates them: the outputs of the local reusable workflows it
// needs, then each call's binding, the innermost first.
func (g *ghCompiler) expandRewrite(n expr.Node, j *ghJob, call *ghCall) expr.Node {
	if b := g.outputsBinding(j.wf, j); b != nil {
		n = b.transform(n)
	}
	for c := call; c != nil; c = c.parent {
		n = c.binding.transform(n)
	}
	return n
}

// evalExpanding evaluates a template of the matrix of the job being
// expanded, with the outputs and results of its needs known. What is not
// known then never will be: it is reported, as are errors, naming the
// job.
func (g *ghCompiler) evalExpanding(t ghText, j *ghJob, call *ghCall) (any, bool) {
	if !hasExpr(t.s) {
		return t.s, true
	}
	c := g.c
	tm := g.parseTemplate(t.s, t.node, false)
	if !tm.ok {
		c.at(j.matrix.key, RuleMatrix, "the matrix of job %q holds %s, which is not a valid template", j.id, shortText(t.s))
		return nil, false
	}
	report := func(seg ghSeg, format string, args ...any) {
		if tm.node == nil {
			c.at(j.matrix.key, RuleMatrix, format, args...)
			return
		}
		line, col := c.scalarPos(tm.node, seg.off)
		c.report(line, col, RuleMatrix, format, args...)
	}
	env := g.expandEnv()
	var b strings.Builder
	for _, seg := range tm.segs {
		if seg.x == nil {
			b.WriteString(seg.text)
			continue
		}
		n := g.expandRewrite(seg.x, j, call)
		v, err := expr.EvalGitHub(n, env)
		if err != nil {
			msg := err.Error()
			if ee, ok := errors.AsType[*expr.EvalError](err); ok {
				msg = ee.Msg
			}
			report(seg, "the matrix of job %q: %s", j.id, msg)
			return nil, false
		}
		if v == expr.Unknown {
			var refs []string
			for _, r := range expr.References(n) {
				if readsUnknown(r.Path, env) {
					refs = append(refs, r.String())
				}
			}
			report(seg, "the matrix of job %q cannot be computed when the jobs it needs are done: it reads %s, which is not known then", j.id, cmp.Or(strings.Join(slices.Compact(refs), ", "), "what only the job's own run knows"))
			return nil, false
		}
		if tm.single() {
			return v, true
		}
		if s, ok := v.(string); ok {
			b.WriteString(s)
		} else {
			b.WriteString(expr.ToString(v))
		}
	}
	return b.String(), true
}

// maxShownBytes bounds a value quoted in a message: outputs may be large.
const maxShownBytes = 200

// shortText quotes s for a message, cut to maxShownBytes.
func shortText(s string) string {
	if len(s) <= maxShownBytes {
		return fmt.Sprintf("%q", s)
	}
	cut := maxShownBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%q… (%d bytes)", s[:cut], len(s))
}

// valueText renders a matrix value for a message, cut to maxShownBytes.
func valueText(v any) string {
	s := jsonText(v)
	if len(s) <= maxShownBytes {
		return s
	}
	cut := maxShownBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:cut], len(s))
}

// expandEnv is what the matrix of the job being expanded is evaluated
// with: what the top workflow's jobs know at compile time, and the needs
// context.
func (g *ghCompiler) expandEnv() *expr.GitHubEnv {
	e := g.c.expand
	if e.env != nil {
		return e.env
	}
	base := g.baseEnv(g.top, nil)
	env := &expr.GitHubEnv{Contexts: maps.Clone(base.Contexts), Unknown: maps.Clone(base.Unknown)}
	delete(env.Unknown, "needs")
	env.Contexts["needs"] = e.needs
	delete(env.Contexts, "matrix")
	env.Unknown["matrix"] = true
	e.env = env
	return env
}

// templateSource is the FileSource of an expansion: the files the
// template keeps.
type templateSource struct{ t *expandTemplate }

func (s templateSource) ReadFile(ctx context.Context, path string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if data, ok := s.t.Files[path]; ok {
		return []byte(data), nil
	}
	if data, ok := s.t.Binary[path]; ok {
		return data, nil
	}
	return nil, &fs.PathError{Op: "read", Path: path, Err: fs.ErrNotExist}
}

// ExpandError is ExpandJob failing because of what the job's matrix is
// computed from: the outputs of its needs do not make a matrix, or make
// one too large or empty. Diagnostics are the findings, positioned in the
// workflow; Error names the job and quotes the values.
type ExpandError struct {
	Job         string
	Diagnostics []Diagnostic
}

func (e *ExpandError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cannot expand the matrix of job %q: ", e.Job)
	const shown = 3
	for i, d := range e.Diagnostics[:min(len(e.Diagnostics), shown)] {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s:%d:%d: %s", d.File, d.Line, d.Col, d.Message)
	}
	if n := len(e.Diagnostics) - shown; n > 0 {
		fmt.Fprintf(&b, "; and %d more", n)
	}
	return b.String()
}

// ExpandJob expands a job whose matrix only the run can compute (a job
// with JobSpec.Expand, which Compile writes) into its variants, given how
// the jobs it needs ended. It satisfies dag.ExpanderFunc:
//
//	store, err := dag.NewMemoryStore(dag.MemoryConfig{Expander: dag.ExpanderFunc(compiler.ExpandJob)})
//
// The variants are what Compile would have made of the job had its matrix
// been known at compile time: the same IDs ("test (linux, 20)"), names,
// Matrix and MatrixJSON, runs-on, images, timeouts, conditions,
// concurrency, environment, env, steps and outputs. Each variant needs
// what the job needs (and, for a job calling a reusable workflow, the
// variants it runs after); none has Expand. The job's workflow is compiled
// again for it, from the files and options that Expand keeps, with the
// needs context known to its matrix and to nothing else.
//
// Errors are the job's failure: *ExpandError when the matrix the needs'
// outputs make is not one (a value that is not JSON, not an object, an
// axis that is not a list, include or exclude entries that are not
// objects, no variant at all, more than Options.MaxMatrixJobs), and
// others when Expand is not one this compiler wrote. Outputs are the
// run's own data, written by its steps: whatever they hold, ExpandJob
// returns an error or variants, and never panics.
func ExpandJob(ctx context.Context, req *dag.ExpandRequest) ([]*cikit.JobSpec, error) {
	if req == nil || req.Job == nil {
		return nil, errors.New("compiler: ExpandJob needs a job to expand")
	}
	job := req.Job
	if len(job.Expand) == 0 {
		return nil, fmt.Errorf("compiler: job %q has no matrix to expand: its Expand is empty", job.ID)
	}
	if len(job.Expand) > cikit.MaxExpandBytes {
		return nil, fmt.Errorf("compiler: the Expand of job %q is %d bytes, more than cikit.MaxExpandBytes (%s)", job.ID, len(job.Expand), cikit.FormatBytes(cikit.MaxExpandBytes))
	}
	var t expandTemplate
	dec := json.NewDecoder(bytes.NewReader(job.Expand))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("compiler: the Expand of job %q is not one this compiler writes: %w", job.ID, err)
	}
	switch {
	case t.Version != expandVersion:
		return nil, fmt.Errorf("compiler: the Expand of job %q has version %d, and this compiler reads version %d", job.ID, t.Version, expandVersion)
	case t.Job != job.ID:
		return nil, fmt.Errorf("compiler: the Expand of job %q was written for job %q", job.ID, t.Job)
	}
	src := templateSource{&t}
	data, err := src.ReadFile(ctx, t.File)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("compiler: the Expand of job %q does not hold its workflow %s", job.ID, t.File)
	case err != nil:
		return nil, err
	}
	c := newChecker(t.File)
	c.ctx, c.src = ctx, src
	c.opts = Options{Format: FormatGitHub, Event: t.Event, MaxMatrixJobs: t.MaxMatrixJobs, MaxJobs: t.MaxJobs, MaxFileBytes: t.MaxFileBytes}
	c.expand = &expansion{job: job.ID, needs: expr.GitHubNeeds(req.Needs)}
	c.run(compileGitHub, data)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	diags := c.sorted()
	if HasErrors(diags) {
		errs := slices.DeleteFunc(diags, func(d Diagnostic) bool { return d.Severity == SeverityWarning })
		return nil, &ExpandError{Job: job.ID, Diagnostics: errs}
	}
	e := c.expand
	if !e.found {
		return nil, fmt.Errorf("compiler: job %q has no matrix to expand in %s", job.ID, t.File)
	}
	return e.specs(job)
}

// specs returns the variants built, checked against the placeholder job:
// what each needs outside the variants is what the job needs.
func (e *expansion) specs(job *cikit.JobSpec) ([]*cikit.JobSpec, error) {
	ids := make(map[string]bool, len(e.variants))
	for _, d := range e.variants {
		ids[d.spec.ID] = true
	}
	out := make([]*cikit.JobSpec, len(e.variants))
	for i, d := range e.variants {
		s := d.spec
		if e.placeholders[s] {
			// checkExpandable reports this at compile time; a template
			// cannot reach here without it but for a changed compiler.
			return nil, fmt.Errorf("compiler: cannot expand the matrix of job %q: its variant %q has a matrix computed at run time too", job.ID, s.ID)
		}
		for _, n := range s.Needs {
			if !ids[n] && !slices.Contains(job.Needs, n) {
				return nil, fmt.Errorf("compiler: cannot expand the matrix of job %q: its variant %q needs %q, which the job does not need: the job's Expand does not match it", job.ID, s.ID, n)
			}
		}
		for _, n := range job.Needs {
			if !slices.Contains(s.Needs, n) {
				return nil, fmt.Errorf("compiler: cannot expand the matrix of job %q: its variant %q does not need %q, which the job needs: the job's Expand does not match it", job.ID, s.ID, n)
			}
		}
		s.Format = string(FormatGitHub)
		out[i] = s
	}
	return out, nil
}
