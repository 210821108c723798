package compiler

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

// Format names a pipeline file format. Each format has its own front end;
// all of them produce the same Plan.
type Format string

// FormatNative is cikit's own format, the `.cikit.yml` file.
const FormatNative Format = "native"

// ErrUnknownFormat is matched by the error Compile and CompileBytes return
// when Options.Format names no supported format, or when it is empty and
// the path does not tell the format.
var ErrUnknownFormat = errors.New("unknown pipeline format")

// frontend walks the root node of a parsed YAML document (nil for an empty
// file) and returns the jobs it declares, reporting findings on c. Formats
// differ in their keys and defaults, not in how needs, stages and cycles
// are checked: that is link's job, shared by all of them.
type frontend func(c *checker, root *yaml.Node) *draft

var frontends = map[Format]frontend{
	FormatNative: compileNative,
	FormatGitLab: compileGitLab,
	FormatGitHub: compileGitHub,
}

// Detect returns the format of the pipeline file at path, judged by its
// name alone, and false when the name belongs to no known format.
//
// Paths are slash-separated, as in a repository.
func Detect(p string) (Format, bool) {
	switch path.Base(p) {
	case ".cikit.yml", ".cikit.yaml":
		return FormatNative, true
	case ".gitlab-ci.yml", ".gitlab-ci.yaml":
		return FormatGitLab, true
	}
	if isGitHubWorkflowPath(p) {
		return FormatGitHub, true
	}
	return "", false
}

// Options tunes a compilation. The zero value detects the format from the
// path.
type Options struct {
	// Format is the format of the file. When empty, it is detected from
	// the path with Detect. A format that is neither given nor
	// detectable is an error, not a diagnostic: the caller chose the
	// file, so there is nothing its author could fix.
	Format Format
	// MaxMatrixJobs bounds the variants one matrix (or GitLab parallel)
	// job may expand to; more is a diagnostic. Default:
	// DefaultMaxMatrixJobs.
	MaxMatrixJobs int
	// MaxJobs bounds the jobs of one run, every matrix variant and
	// parallel copy counted; more is a diagnostic at the job that takes
	// the run past it. Default: DefaultMaxJobs.
	MaxJobs int
	// MaxFileBytes bounds the size of the pipeline file and of each file
	// it includes; a larger one is a diagnostic and is not parsed.
	// Default: DefaultMaxFileBytes.
	MaxFileBytes int
	// Event is what triggered the pipeline, when known. The compiler
	// decides with it what it can at compile time: trigger filters,
	// GitLab rules and only/except, GitHub conditions on the github
	// context. Without it (linting, drawing a graph) every job is kept
	// and such conditions stay in the plan for run time.
	Event *Event
}

// Event describes what triggered a pipeline, as far as compilation needs
// to know. Zero fields are unknown.
type Event struct {
	// Name is the kind of event: "push", "pull_request", "tag",
	// "schedule", "manual" (workflow_dispatch, a web trigger),
	// "merge_request", or a provider's own name.
	Name string
	// Ref is the full ref ("refs/heads/main", "refs/tags/v1.2.0");
	// Branch and Tag are its short forms, one of them set.
	Ref, Branch, Tag string
	SHA              string
	// BaseBranch is the target branch of a pull or merge request.
	BaseBranch    string
	DefaultBranch string
	// ChangedFiles are the paths the push or request changes, for path
	// filters and rules:changes; nil when unknown.
	ChangedFiles []string
	// Variables are the pipeline variables (GitLab's predefined and
	// user variables, a manual run's variables).
	Variables map[string]string
	// Inputs are the inputs of a manual run (workflow_dispatch).
	Inputs map[string]any
	// Payload is the provider's event payload (GitHub's github.event).
	Payload map[string]any
	Actor   string
}

// Defaults of Options.
const (
	// DefaultMaxJobs is the default of Options.MaxJobs: 1,000 jobs a
	// run. A run's cost (its rows, its dispatch, a person reading it)
	// grows with its jobs, and one push should not occupy a cluster;
	// 1,000 is four of GitHub's largest matrices (256 jobs each) and
	// more than hand-written pipelines have. Platforms that run larger
	// pipelines raise it.
	DefaultMaxJobs = 1000
	// DefaultMaxFileBytes is the default of Options.MaxFileBytes: 1 MiB,
	// the size GitHub serves a file through its contents API at, and
	// larger than hand-written pipelines (GitLab allows 4 MiB for a
	// whole configuration, includes merged).
	DefaultMaxFileBytes = 1 << 20
)

func (o Options) maxJobs() int {
	if o.MaxJobs > 0 {
		return o.MaxJobs
	}
	return DefaultMaxJobs
}

func (o Options) maxFileBytes() int {
	if o.MaxFileBytes > 0 {
		return o.MaxFileBytes
	}
	return DefaultMaxFileBytes
}

func (o Options) maxMatrixJobs() int {
	if o.MaxMatrixJobs > 0 {
		return o.MaxMatrixJobs
	}
	return DefaultMaxMatrixJobs
}

// Plan is a compiled pipeline: its jobs, fully resolved, and their graph.
// A Plan is never returned together with an error diagnostic (warnings
// may come with it), so every Plan is valid: job IDs are unique, every need names a job, there is no cycle and
// every job has at least one step, starts another pipeline (Uses, as a
// GitLab trigger job does), or is a placeholder for a matrix computed at
// run time (Expand; see ExpandJob), which may have none.
//
// A Plan is not modified by the compiler after it is returned; callers
// that modify Jobs must not rely on Graph afterwards.
type Plan struct {
	// File is the path the plan was compiled from, as given.
	File string
	// Format is the format the file was read as.
	Format Format
	// Name is the pipeline's display name (GitHub's workflow name); ""
	// when it has none.
	Name string
	// Triggers are the events that start the pipeline, in file order; nil
	// when the file declares none. See Triggered.
	Triggers []Trigger
	// Concurrency places whole runs of the pipeline in a concurrency
	// group (GitHub's workflow-level concurrency); nil when none.
	Concurrency *cikit.Concurrency
	// Stages are the declared stages, in order; nil when none.
	Stages []string
	// Env is the pipeline-level environment, already merged into every
	// job's Env; nil when empty.
	Env map[string]string
	// Jobs are the jobs in file order. Job.Needs holds the effective
	// needs: the explicit ones, or those implied by stage order.
	Jobs []*cikit.JobSpec
	// Files are the repository files whose content the plan was
	// compiled from: File first, then those it includes or calls
	// (GitLab's include:local, GitHub's local reusable workflows), each
	// once, in the order first read. A change to any of them may change
	// the plan, which is what a platform's policy asks when it holds
	// runs whose pipeline a pull request edits. Files only tested for
	// existence (GitLab's rules:exists) are not among them.
	Files []string

	graph *dag.Graph
}

// Graph returns the job graph of the plan. Node i of the graph is Jobs[i].
// It is never nil for a plan returned by Compile or CompileBytes.
func (p *Plan) Graph() *dag.Graph { return p.graph }

// Job returns the job with the given ID, or nil when there is none.
func (p *Plan) Job(id string) *cikit.JobSpec {
	if p.graph != nil {
		if i, ok := p.graph.Index(id); ok && i < len(p.Jobs) {
			return p.Jobs[i]
		}
		return nil
	}
	for _, j := range p.Jobs {
		if j.ID == id {
			return j
		}
	}
	return nil
}

// Compile reads the pipeline file at path from src and compiles it.
//
// Findings about the file's content are diagnostics: all of them, sorted by
// file (findings in the files it includes name those), line, column, rule
// and message. The plan is nil exactly when one of them is an error
// (HasErrors); warnings come with the plan. The error is for failures that are not the file
// author's to fix: the file cannot be read (a missing file matches
// fs.ErrNotExist), or its format is unknown (ErrUnknownFormat). The format
// is settled before the file is read, so an unknown format costs no read.
func Compile(ctx context.Context, src FileSource, path string, opts Options) (*Plan, []Diagnostic, error) {
	format, err := resolveFormat(path, opts)
	if err != nil {
		return nil, nil, err
	}
	data, err := readMax(ctx, src, path, opts.maxFileBytes())
	if tl, ok := errors.AsType[*FileTooLargeError](err); ok {
		c := newChecker(path)
		c.opts = opts
		c.fileFits(tl.Size, path, nil)
		return nil, c.sorted(), nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("compiler: reading %s: %w", path, err)
	}
	opts.Format = format
	return compile(ctx, src, path, data, opts)
}

// CompileBytes compiles the content of the pipeline file at path, already
// read. It is Compile without the read, for callers that hold the bytes
// (a lint command, a webhook that carried the file, fuzzing). Having no
// FileSource, it reports files the pipeline includes as unreadable. It
// does no I/O and is safe on untrusted input: it never panics, and
// aliases, merge keys, matrices and implied needs are bounded, so that a
// small file cannot cost a large amount of time or memory.
func CompileBytes(path string, data []byte, opts Options) (*Plan, []Diagnostic, error) {
	return compile(context.Background(), nil, path, data, opts)
}

func compile(ctx context.Context, src FileSource, path string, data []byte, opts Options) (*Plan, []Diagnostic, error) {
	format, err := resolveFormat(path, opts)
	if err != nil {
		return nil, nil, err
	}
	c := newChecker(path)
	c.ctx, c.src, c.opts = ctx, src, opts
	d := c.run(frontends[format], data)
	diags := c.sorted()
	if HasErrors(diags) {
		return nil, diags, nil
	}
	plan := &Plan{File: path, Format: format, Name: d.name, Triggers: d.triggers, Concurrency: d.concurrency, Stages: d.stages, Env: d.env, graph: d.graph}
	plan.Files = append([]string{path}, slices.DeleteFunc(c.read, func(f string) bool { return f == path })...)
	plan.Jobs = make([]*cikit.JobSpec, len(d.jobs))
	for i, j := range d.jobs {
		j.spec.Format = string(format)
		plan.Jobs[i] = j.spec
	}
	if plan.graph == nil {
		// link builds the graph whenever it reports nothing, so this is a
		// bug in the compiler, not in the file.
		return nil, nil, fmt.Errorf("compiler: internal error: %s compiled without errors but has no job graph", path)
	}
	return plan, diags, nil
}

func resolveFormat(p string, opts Options) (Format, error) {
	if opts.Format == "" {
		f, ok := Detect(p)
		if !ok {
			return "", fmt.Errorf("compiler: %w: cannot tell the format of %q from its name; set Options.Format", ErrUnknownFormat, p)
		}
		return f, nil
	}
	if _, ok := frontends[opts.Format]; !ok {
		return "", fmt.Errorf("compiler: %w %q", ErrUnknownFormat, opts.Format)
	}
	return opts.Format, nil
}
