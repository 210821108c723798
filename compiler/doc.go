// Package compiler turns pipeline files into a Plan: the jobs of a run,
// fully resolved into cikit.JobSpecs, and their dag.Graph.
//
// # What it owns
//
// The compiler owns the meaning of pipeline files: their keys, defaults,
// stage barriers, needs and everything a person can get wrong in them. It
// is pure: files come through a FileSource at one commit, and the same
// bytes always give the same plan or the same diagnostics. It never runs
// anything and reaches no network; the platform fetches the file, compiles
// it, and stores the JobSpecs with the run, so an old commit rebuilds with
// the pipeline it had.
//
// Each file format has a front end; all produce the same Plan. This
// version reads the native format (FormatNative) and GitLab CI's
// (FormatGitLab). Formats are chosen by Options.Format or detected from
// the file name with Detect.
//
// # The native format
//
// A `.cikit.yml` (or `.cikit.yaml`) file at the repository root:
//
//	stages: [build, test]          # optional
//	env: {GOFLAGS: -mod=mod}       # optional, for every job
//	jobs:
//	  build:
//	    name: Build it             # optional, defaults to the ID
//	    stage: build               # optional, defaults to the first stage
//	    image: golang:1.26         # optional
//	    env: {CGO_ENABLED: 0}      # overlays the pipeline's env
//	    steps:
//	      - go build ./...         # a command; its first line names it
//	      - name: vet              # or a mapping with run, name and env
//	        run: go vet ./...
//	    timeout: 10m               # optional, a Go duration
//	  unit:
//	    stage: test
//	    needs: [build]             # job IDs, or one ID
//	    allow_failure: true        # dependents run even if it fails
//	    steps: [go test ./...]
//
// Stages are barriers: a job without a needs key needs every job of the
// nearest earlier stage that has jobs. A job with a needs key, even
// `needs: []`, needs exactly what it names and may start before the
// barrier. JobSpec.Needs holds the effective needs either way, so runners
// and schedulers never see stages.
//
// Env values keep the text they were written with (`1.10` stays "1.10");
// a null value is the empty string. Aliases and merge keys (`<<: *base`,
// `<<: [*a, *b]`) are resolved by the compiler, within a fixed budget, so
// a small file cannot expand into a large one.
//
// # The GitLab format
//
// A `.gitlab-ci.yml` file compiles as GitLab would create the pipeline:
// included local files are merged in (the including file wins, mapping
// by mapping), then extends (multi-level, GitLab's deep merge), then
// !reference tags, then default (with inherit), and rules, only/except
// and workflow:rules decide which jobs the pipeline has. Stages are
// barriers, .pre and .post always exist, and a job without needs gets,
// as in GitLab, the artifacts of every earlier job that uploads some, or
// of those its dependencies name: its Needs list them all. parallel and
// parallel:matrix jobs become one job per copy, named as GitLab names
// them ("test 1/3", "deploy: [aws, app1]"); a need of the job is a need
// of every copy. A trigger job has no steps and names the pipeline it
// starts in Uses.
//
// Decisions use Options.Event. Event.Variables are taken as the
// pipeline's variables (project, group, schedule, manual ones): a
// variable that is neither there, nor in the file, nor predefined is
// unset, as GitLab sees it; the predefined variables the event's fields
// give (CI_PIPELINE_SOURCE, CI_COMMIT_BRANCH, CI_COMMIT_TAG,
// CI_COMMIT_REF_NAME, CI_DEFAULT_BRANCH, CI_MERGE_REQUEST_* …) are
// derived when Variables do not set them, and other predefined variables
// are unknown. Logic is three-valued: a condition that depends on
// something unknown keeps the job, with the attributes of the first rule
// that may match, so that a lint or a graph shows every job that could
// run; when one unknown if: alone decides whether the job runs, it stays
// in JobSpec.If for run time. Without an event nothing is known (the
// file's variables can be overridden when a pipeline is created), and
// workflow:rules are not applied; with one, a workflow that does not run
// is a diagnostic (rule "workflow"), since a plan cannot be empty.
// changes compares Event.ChangedFiles with the patterns (unknown when
// they are nil); exists asks the FileSource for plain paths, with or
// without an event, and counts patterns as unknown, since a FileSource
// does not list directories. YAML merge keys resolve as in GitLab's YAML
// library: in order, a later "<<" overriding what came before.
//
// Includes of other kinds than local (remote, template, project,
// component) cannot be read by a compiler that reads only the commit's
// files: they are left out without a finding, and a name that may come
// from them (an extends parent, a need, a !reference) is reported saying
// so. A local include that does not exist is a finding, and the names it
// would have defined are then not reported again.
//
// Keys GitLab knows but JobSpec does not carry are accepted and ignored:
// artifacts:reports, coverage, interruptible, hooks, id_tokens, identity,
// pages, release, dast_configuration, manual_confirmation, environment
// details beyond name, url and action, image and service entrypoints.
// Cross-pipeline and cross-project needs order nothing in this pipeline
// and are accepted without an edge.
//
// # Diagnostics
//
// Mistakes in a file are Diagnostics, not errors: Compile reports all of
// them, sorted by position, each with a file:line:col position, a stable
// Rule identifier (the Rule constants) and a message that names the valid
// keys, stages or jobs and suggests the nearest one to a typo. A plan is
// returned exactly when there are none. Compile's error is kept for what
// the file's author cannot fix: an unreadable file, an unknown format.
//
// Untrusted files are expected: the compiler does not panic on any input,
// and bounds the work an input can cause (aliases, implied needs, hints).
//
// # Stability
//
// Compile, CompileBytes, Plan, Diagnostic, FileSource and the Rule
// identifiers are stable: later versions add formats, keys and rules, and
// do not change what a valid file means. Messages may be reworded. A file
// that compiles today compiles to the same JobSpecs tomorrow, since stored
// runs are replayed from them.
package compiler
