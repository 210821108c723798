package compiler

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/cikit/cikit"
)

// Diagnostic is one finding about a pipeline file, positioned where its
// author can fix it.
type Diagnostic struct {
	File string // the path given to Compile
	Line int    // 1-based
	Col  int    // 1-based, in characters
	// Rule identifies the kind of finding, one of the Rule constants. It is
	// stable, so tools may filter or count by it.
	Rule string
	// Severity is SeverityError for a pipeline that cannot be built as
	// written, SeverityWarning for one that can but very likely does not
	// do what its author meant (a condition that is always false).
	Severity Severity
	// Message says what is wrong and, where it can, what would be right:
	// the valid keys, stages or jobs, and the nearest one to what was
	// written. Messages are for people and may be reworded.
	Message string
}

// String formats d the way compilers do, so editors and CI logs can link
// to the position: "file:line:col: message [rule]", with "warning: "
// before the message of a warning.
func (d Diagnostic) String() string {
	if d.Severity == SeverityWarning {
		return fmt.Sprintf("%s:%d:%d: warning: %s [%s]", d.File, d.Line, d.Col, d.Message, d.Rule)
	}
	return fmt.Sprintf("%s:%d:%d: %s [%s]", d.File, d.Line, d.Col, d.Message, d.Rule)
}

// Severity says whether a finding stops the pipeline from compiling.
type Severity string

const (
	SeverityError   Severity = "error"
	SeverityWarning Severity = "warning"
)

// warningRules are the rules whose findings are warnings: the pipeline
// runs as written (the platform it was written for would run it), but
// part of it is dead or always empty.
var warningRules = map[string]bool{
	RuleIfCond:      true,
	RuleMatrixRef:   true,
	RuleUnsupported: true,
}

// Rule identifiers of diagnostics.
const (
	RuleSyntax  = "syntax"  // the file is not valid YAML, holds several documents, or repeats a key
	RuleAlias   = "alias"   // an alias or merge key refers to itself or expands too much
	RuleType    = "type"    // a value has the wrong type (a list where a mapping belongs, …)
	RuleKey     = "key"     // an unknown key
	RuleJobs    = "jobs"    // the pipeline has no jobs
	RuleJobID   = "job-id"  // a job ID that is not a valid identifier
	RuleSteps   = "steps"   // a job without steps, or a step without a command
	RuleEnv     = "env"     // an invalid environment variable name
	RuleNeeds   = "needs"   // a need that names no job
	RuleStage   = "stage"   // an invalid stage list, or a job in an unknown stage
	RuleCycle   = "cycle"   // jobs that need each other, or a job that needs itself
	RuleTimeout = "timeout" // a timeout that is not a positive duration
	RuleLimit   = "limit"   // a file, a job's spec or the plan is larger than its limit
	RuleInclude = "include" // a file the pipeline includes cannot be read
	// RuleMatrixRef: a GitHub expression reads matrix.x in a job without
	// a matrix, so it is always empty (a warning).
	RuleMatrixRef = "matrix-ref"
	// RuleUnsupported: the pipeline asks for something the platform
	// accepts but does not honour yet (a container image, caches, a
	// remote action …). A warning: the job runs, without it; the same
	// words are in JobSpec.Warnings, which the runner prints at the top
	// of the job's log.
	RuleUnsupported = "unsupported"
	// RuleTrigger: a GitLab trigger job (a child or multi-project
	// pipeline), which the platform does not run yet. An error, so that
	// such a pipeline never passes without the pipeline it starts.
	RuleTrigger = "trigger"
)

// Limits on the work a single file can cause. They are far above what a
// hand-written pipeline needs and keep a hostile one cheap.
const (
	// maxAliasNodes bounds the nodes reachable through aliases and merge
	// keys, summed over every use: a "billion laughs" file has few nodes
	// but expands exponentially.
	maxAliasNodes = 100_000
	// maxPlanEntries bounds the env entries and needs the plan
	// materialises. Both grow as a product (jobs × pipeline env, jobs of
	// a stage × jobs of the previous one), not with the file's size.
	maxPlanEntries = 500_000
	// maxSuggestWork bounds the edit-distance work of "did you mean"
	// hints, which is quadratic in the names compared.
	maxSuggestWork = 20_000_000
)

// checker accumulates the diagnostics and the work of one compilation.
type checker struct {
	// file is the file being read: the compiled one, or one it includes
	// while the front end reads that (see within).
	file string
	data []byte // the content of file, for positions inside scalars
	ctx  context.Context
	src  FileSource // nil when compiling bytes alone
	opts Options
	// read are the files read through src for the pipeline's content
	// (includes, called workflows), in the order first read: Plan.Files
	// after the compiled file.
	read []string
	// nodeFiles names the file of nodes read from other files than the
	// compiled one (included files), so that findings about them, also
	// those of link, name the file they are written in.
	nodeFiles map[*yaml.Node]string
	diags     []Diagnostic
	// runWarnings are what the pipeline asks of its runs that is not
	// honoured yet (a schedule), for the Warnings of every job of the
	// native format.
	runWarnings []string
	// expand is set when the compilation expands a job whose matrix
	// only the run can compute (ExpandJob).
	expand      *expansion
	sizes       map[*yaml.Node]int // subtree sizes, for charging aliases
	aliasNodes  int
	planEntries int
	suggestWork int
}

// abort is panicked by a checker past a limit, to stop the walk from any
// depth, and recovered by run. It never leaves the package.
type abort struct{}

func newChecker(file string) *checker {
	return &checker{file: file}
}

// run parses data and applies fe and link to it. It returns a draft that
// is complete when no diagnostic was reported.
func (c *checker) run(fe frontend, data []byte) (d *draft) {
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(abort); !ok {
				panic(v)
			}
			d = &draft{}
		}
	}()
	c.data = data
	if !c.fileFits(int64(len(data)), c.file, nil) {
		return &draft{}
	}
	root, ok := c.parseYAML(data)
	if !ok {
		return &draft{}
	}
	d = fe(c, root)
	c.link(d)
	c.checkSpecs(d)
	return d
}

// fileFits reports whether size, the size of file path of the pipeline,
// is within Options.MaxFileBytes, and reports it when it is not: at the
// top of the file compiled, or at n, where a file is included. A file that
// large is not read further.
func (c *checker) fileFits(size int64, path string, n *yaml.Node) bool {
	limit := int64(c.opts.maxFileBytes())
	if size <= limit {
		return true
	}
	if n != nil {
		c.at(n, RuleLimit, "included file %q is %d bytes, more than the limit of %s (Options.MaxFileBytes)", path, size, cikit.FormatBytes(limit))
		return false
	}
	c.report(1, 1, RuleLimit, "the pipeline file is %d bytes, more than the limit of %s (Options.MaxFileBytes); split it or raise the limit", size, cikit.FormatBytes(limit))
	return false
}

// chargeJobs accounts for the jobs js of the job written at key (id, as
// written) joining a draft that has before jobs already, and stops the
// compilation when they take it past Options.MaxJobs: the diagnostic names
// the job, the total and the limit, and nothing more is expanded.
func (c *checker) chargeJobs(before int, js []*jobDecl, key *yaml.Node, id string) {
	limit := c.opts.maxJobs()
	total := before + len(js)
	if total <= limit {
		return
	}
	if len(js) > 1 {
		c.at(key, RuleLimit, "job %q expands to %d jobs, which take the run to %d jobs, more than the limit of %d jobs per run (Options.MaxJobs)", id, len(js), total, limit)
	} else {
		c.at(key, RuleLimit, "job %q takes the run to %d jobs, more than the limit of %d jobs per run (Options.MaxJobs)", id, total, limit)
	}
	panic(abort{})
}

// checkSpecs reports the jobs whose compiled spec is larger than a runner
// takes (cikit.MaxJobSpecBytes), and those that declare more outputs than
// a job may have (cikit.MaxOutputValueBytes, cikit.MaxOutputsBytes).
func (c *checker) checkSpecs(d *draft) {
	for _, j := range d.jobs {
		total := 0
		for _, name := range slices.Sorted(maps.Keys(j.spec.Outputs)) {
			n := len(name) + len(j.spec.Outputs[name])
			total += n
			if n > cikit.MaxOutputValueBytes {
				c.at(j.key, RuleLimit, "output %q of job %q is declared with %d bytes, more than the %s an output may hold", name, j.spec.ID, n, cikit.FormatBytes(cikit.MaxOutputValueBytes))
			}
		}
		if total > cikit.MaxOutputsBytes {
			c.at(j.key, RuleLimit, "the outputs of job %q are declared with %d bytes, more than the %s the outputs of a job may hold", j.spec.ID, total, cikit.FormatBytes(cikit.MaxOutputsBytes))
		}
		var size byteCounter
		if err := json.NewEncoder(&size).Encode(j.spec); err == nil && size > cikit.MaxJobSpecBytes {
			c.at(j.key, RuleLimit, "job %q compiles to a spec of %d bytes, more than the %s a runner takes (cikit.MaxJobSpecBytes); move its scripts into files of the repository", j.spec.ID, size, cikit.FormatBytes(cikit.MaxJobSpecBytes))
		}
	}
}

// byteCounter is an io.Writer that counts what is written to it.
type byteCounter int

func (b *byteCounter) Write(p []byte) (int, error) {
	*b += byteCounter(len(p))
	return len(p), nil
}

func (c *checker) report(line, col int, rule, format string, args ...any) {
	c.diags = append(c.diags, Diagnostic{
		File:     c.file,
		Line:     max(line, 1),
		Col:      max(col, 1),
		Rule:     rule,
		Severity: severity(rule),
		Message:  fmt.Sprintf(format, args...),
	})
}

// at reports a finding at node n; a node without a position (nil, or made
// up by the compiler) reports at the top of the file.
func (c *checker) at(n *yaml.Node, rule, format string, args ...any) {
	line, col := 1, 1
	if n != nil {
		line, col = n.Line, n.Column
		if f, ok := c.nodeFiles[n]; ok {
			c.within(f, func() { c.report(line, col, rule, format, args...) })
			return
		}
	}
	c.report(line, col, rule, format, args...)
}

// notHonoured reports, as a RuleUnsupported warning at n, that what the
// pipeline asks for there is accepted but not honoured yet, and returns
// the same finding as a line for JobSpec.Warnings: the runner prints it
// at the top of the job's log, where the file's position helps the
// reader find the key.
func (c *checker) notHonoured(n *yaml.Node, format string, args ...any) string {
	msg := fmt.Sprintf(format, args...)
	c.at(n, RuleUnsupported, "%s", msg)
	file, line := c.file, 1
	if n != nil {
		line = max(n.Line, 1)
		if f, ok := c.nodeFiles[n]; ok {
			file = f
		}
	}
	return fmt.Sprintf("%s:%d: %s", file, line, msg)
}

// sorted returns the diagnostics in reading order, file by file (an
// included file has findings of its own). Identical findings are
// collapsed: content shared through an alias is checked at each use but
// written once.
func (c *checker) sorted() []Diagnostic {
	slices.SortFunc(c.diags, func(a, b Diagnostic) int {
		return cmp.Or(
			cmp.Compare(a.File, b.File),
			cmp.Compare(a.Line, b.Line),
			cmp.Compare(a.Col, b.Col),
			cmp.Compare(a.Rule, b.Rule),
			cmp.Compare(a.Message, b.Message),
		)
	})
	return slices.Compact(c.diags)
}

// chargePlan accounts for n entries the plan will hold and stops the
// compilation past maxPlanEntries.
func (c *checker) chargePlan(n int, at *yaml.Node) {
	c.planEntries += n
	if c.planEntries > maxPlanEntries {
		c.at(at, RuleLimit, "the pipeline expands to more than %d env entries and needs; split it", maxPlanEntries)
		panic(abort{})
	}
}

// readFile reads a file the pipeline refers to (an include, a reusable
// workflow) through the FileSource, reporting at n when it cannot.
func (c *checker) readFile(path string, n *yaml.Node) ([]byte, bool) {
	if c.src == nil {
		c.at(n, RuleInclude, "cannot read %q: the pipeline was compiled without access to the repository", path)
		return nil, false
	}
	data, err := readMax(c.ctx, c.src, path, c.opts.maxFileBytes())
	if err == nil && !slices.Contains(c.read, path) {
		c.read = append(c.read, path)
	}
	if tl, ok := errors.AsType[*FileTooLargeError](err); ok {
		return nil, c.fileFits(tl.Size, path, n)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		c.at(n, RuleInclude, "included file %q does not exist at this commit", path)
		return nil, false
	case err != nil:
		c.at(n, RuleInclude, "cannot read included file %q: %v", path, err)
		return nil, false
	}
	return data, c.fileFits(int64(len(data)), path, n)
}

// within runs f with findings positioned in file instead of the current
// one: for the content of an included file.
func (c *checker) within(file string, f func()) {
	prev := c.file
	c.file = file
	defer func() { c.file = prev }()
	f()
}

func severity(rule string) Severity {
	if warningRules[rule] {
		return SeverityWarning
	}
	return SeverityError
}

// HasErrors reports whether any of diags is an error: then Compile
// returned no plan.
func HasErrors(diags []Diagnostic) bool {
	for _, d := range diags {
		if d.Severity != SeverityWarning {
			return true
		}
	}
	return false
}
