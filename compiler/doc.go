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
// version reads the native format (FormatNative), GitHub Actions
// workflows (FormatGitHub) and GitLab CI's (FormatGitLab). Formats are
// chosen by Options.Format or detected from the file name with Detect.
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
// Beyond these, a job may have:
//
//	matrix:                        # one job per combination, "test (linux, 1.26)"
//	  os: [linux, macos]           # values are also env vars of the variant
//	  go: ["1.25", "1.26"]
//	  include: [{os: windows, go: "1.26"}]   # GitHub's include/exclude semantics
//	  exclude: [{os: macos, go: "1.25"}]
//	if: github.ref == 'refs/heads/main'      # GitHub expression language
//	runs_on: [linux, "{{ matrix.os }}"]      # runner labels; {{ matrix.x }} templates
//	services: [postgres:16, {name: cache, image: redis:7, ports: ["6379"]}]
//	concurrency: {group: deploy, cancel_in_progress: true}
//	retry: {max: 2, when: [infrastructure, timeout]}
//	cache: {key: 'mod-{{ hash("go.sum") }}', paths: [/go/pkg/mod], fallback_keys: [mod-main], restore_keys: [mod-], when: always}
//	artifacts: {paths: [dist/], expire_in: 7d}     # or expire_in: never
//	environment: {name: production, url: https://example.com}
//	secrets: [DEPLOY_TOKEN]
//	checkout: {depth: 0, submodules: recursive, strategy: clone, path: src}
//	approval: {reason: deployment to production, reviewers: [alice, "role:release"], wait_timer: 10m, expires: 72h}
//
// The runner puts the run's commit into the workspace before the first
// step (JobSpec.Checkout): by default a shallow fetch into the
// workspace's root. checkout changes how: depth is the commits of history
// (0 for all of it), submodules true, false or "recursive", strategy
// "fetch" (reuse the runner's copy), "clone" (a fresh one) or "none", and
// path a folder of the workspace; `checkout: false` is no checkout at
// all, the workspace starting empty.
//
// A job with approval waits, once its needs are done, until a person
// approves it (JobSpec.Gate, the job MANUAL meanwhile): `approval: true`
// with the reason "approval required by the pipeline"
// (DefaultApprovalReason), or a mapping whose reason says why (at most
// cikit.MaxGateTextBytes), reviewers who may approve (user names, or
// "role:NAME"; at most cikit.MaxGateReviewers; by default anyone with the
// approve role), wait_timer how long the job still waits after the
// approval and expires how long an approval may take before the job
// fails (Go durations from 0 to 720h, MaxApprovalDuration).
// `approval: false` is no gate. The platform may add reasons and
// reviewers of its own (environment protection rules, its policy).
//
// The pipeline may also say what triggers it, with GitHub's filter
// patterns ("**" crosses directories, "!" excludes):
//
//	on:
//	  push: {branches: [main], paths: ["**", "!docs/**"]}
//	  pull_request: {branches: [main], types: [opened, synchronize]}
//	  tag: {tags: ["v*"]}
//	  schedule: ["0 3 * * 1-5"]
//	  manual: {inputs: {target: {type: choice, options: [staging, prod]}}}
//
// The inputs a manual run is given are checked against those its trigger
// declares by Plan.CheckInputs, for `cikit run` and the platform's manual
// trigger alike: an unknown input, a value not of its type or not one of
// its choices, and a required input missing are an *InputError; the
// defaults of the others are filled in, and booleans and numbers typed
// for the conditions (Event.Inputs) and the job (cikit.RunContext's
// InputTypes).
//
// A condition that depends only on what is known when compiling (the
// event, the matrix, env) is decided then: false makes the job When
// never; always() and failure() set When; the rest stays in JobSpec.If.
// hash() in cache keys stays for the runner, which hashes the files and
// renders the key with expr.RenderCacheKey; the compiler checks the
// templates with the same parser. A cache's fallback_keys are exact keys
// tried in order after its key, restore_keys prefixes tried after them;
// policy is pull-push, pull or push, when on_success, on_failure or
// always, as in GitLab.
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
// them ("test 1/3", "deploy: [aws, app1]"), with CI_NODE_INDEX (from 1)
// and CI_NODE_TOTAL in each copy's Env; a need of the job is a need of
// every copy. A trigger job (a child or multi-project pipeline) is an
// error, rule "trigger": the platform does not start other pipelines
// yet, and a job that passes without running them would be a lie.
//
// A job runs as GitLab runs it. before_script and script are one step,
// one shell session: each command is printed as GitLab prints it ("$ make",
// the first line of a multi-line command and "# collapsed multi-line
// command") and then run, so a cd or a variable of one command holds in
// the next and the first failing command fails the job; after_script is
// one step of its own, in a fresh session (JobSpec.AfterSteps). The runner
// checks out the commit before the first step (JobSpec.Checkout), as the
// variables GIT_STRATEGY (fetch, clone, none, or empty: none), GIT_DEPTH
// (0 for the whole history) and GIT_SUBMODULE_STRATEGY (none, normal,
// recursive) say, the pipeline's variables winning over the file's; by
// default a shallow fetch. Variables that refer to variables of the file
// ($NAME, ${NAME}) are expanded into Env as GitLab expands them; what the
// compiler cannot resolve (predefined variables, the pipeline's own, a
// loop of references) stays for the runner, which expands Env once more
// with the run's variables, "$$" being a literal "$" there (so "$$"
// stays "$$" in Env, and a variable with expand: false has its "$"
// doubled).
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
// they are nil); exists decides as GitLab does, with or without an
// event: plain paths are asked of the FileSource, glob patterns are
// matched against the repository's files when the source is a
// FileLister (a glob under a folder that does not exist matches nothing;
// past GitLab's 10,000 comparisons the clause is true, as there) and are
// unknown otherwise, and an empty pattern names no file. YAML merge keys
// resolve as in GitLab's YAML library: in order, a later "<<" overriding
// what came before.
//
// Includes of other kinds than local (remote, template, project,
// component) cannot be read by a compiler that reads only the commit's
// files: they are left out without a finding, and a name that may come
// from them (an extends parent, a need, a !reference) is reported saying
// so. A local include that does not exist is a finding, and the names it
// would have defined are then not reported again.
//
// Cross-pipeline and cross-project needs order nothing in this pipeline
// and are accepted without an edge.
//
// cache: and artifacts: compile to JobSpec.Caches and JobSpec.Artifacts,
// which the runner restores, saves, uploads and downloads. fallback_keys
// are exact keys (Cache.FallbackKeys), untracked adds the files git does
// not track, key:files hashes the content of the files (GitLab uses the
// commits that last changed them: the keys change together, but differ
// from GitLab's). artifacts:reports keeps GitLab's report types (checked,
// with a hint for a typo) and their paths; an artifacts: with only
// reports is still artifacts, and a dotenv report passes its variables to
// the jobs that need the job. expire_in: never is ExpireNever.
// cache:unprotect, artifacts:expose_as, public: false and access other
// than all ask for what the platform does not do (caches are kept per
// branch scope; downloads are not restricted per user): warnings.
// needs:artifacts: false and dependencies (dependencies: [] included)
// are NoArtifactsFrom.
//
// # GitHub Actions workflows
//
// A .yml or .yaml file directly in .github/workflows is a workflow, read
// with GitHub's workflow syntax: name, run-name, on, env, defaults,
// concurrency, permissions and jobs, with every key of a job and a step.
// Each ${{ }} is parsed and checked where it is written: the contexts
// GitHub makes available there, the functions, and what it reads of
// matrix, needs, steps, inputs and jobs.
//
// A matrix expands with the semantics of GitHub's own matrix builder:
// include and exclude entries compare with ==, which ignores case and
// converts numbers and strings; a variant is named and identified by its
// job and the values of its axes, "test (ubuntu-latest, 20)" (the values
// an include adds are not shown, as on GitHub), MatrixOf names the job
// it comes from, and Strategy its place among the variants (the strategy
// context: job-index from 0 in expansion order, job-total, fail-fast and
// max-parallel as written). Expressions the compiler can evaluate
// (fromJSON of a constant, inputs with known values) are. Fields that take expressions
// (name, runs-on, the container and service images, timeout-minutes,
// continue-on-error, concurrency, environment) are evaluated for each
// variant, what cannot be evaluated yet kept as written.
//
// A matrix (or an axis, an include or exclude list, a value of it) read
// from the outputs or results of the jobs the job needs, such as
// matrix: ${{ fromJSON(needs.setup.outputs.matrix) }}, is known only once
// they are done. The job then compiles to one placeholder: MatrixOf is its
// own ID, Matrix holds the single key "*", the matrix as written (in JSON
// when it is a mapping), for a person reading the plan, and Expand holds
// what it takes to compile the job again: the workflow file, the
// workflows of the repository it calls, the event (its changed files
// aside) and the limits of Options. The placeholder holds no concurrency
// group and no timeout, which are its variants'; a placeholder of a job
// that calls a reusable workflow is the caller alone, its name and
// condition, without steps. The scheduler never runs a placeholder: when its needs are done,
// it calls its dag.Expander, ExpandJob, which compiles the workflow again
// with the needs context known to that matrix alone, and returns the
// variants exactly as Compile would have made them of the same matrix
// written in: IDs, names, Matrix, MatrixJSON and every field above, each
// variant needing what the placeholder needs (the jobs of a called
// workflow also their siblings they run after), none with Expand. The
// jobs that need the matrix job need the placeholder, which ends when its
// variants have.
//
// Only needs.* is added when the matrix is expanded. A matrix that reads
// anything else the compiler does not know (github.repository, the run
// number, vars the event does not give) is an error at compile time; when
// linting, without an event, the inputs, vars and what an event gives of
// the github context are taken to be known. A placeholder whose Expand
// would be larger than cikit.MaxExpandBytes is an error at its job, as is
// a matrix computed at run time of a job that calls a workflow with one of
// its own: a variant cannot be a placeholder. ExpandJob fails, with an
// *ExpandError naming the job and quoting the value (cut short), when the
// outputs make no matrix: not JSON, not an object of lists, include or
// exclude entries that are not objects, no variant left, or more than
// Options.MaxMatrixJobs; the scheduler fails the job so, with
// cikit.FailureConfig. Expand is private to the compiler: its content may
// change between versions, and a version ExpandJob does not read is
// refused, not guessed at.
//
// A job's if: becomes When and If. GitHub adds success() to a condition
// that calls no status function; so no condition, or success(), is
// WhenOnSuccess (When left empty); always() is WhenAlways and failure()
// WhenOnFailure; a condition that also reads something else keeps the
// expression in If, with When from its status function (a top-level
// conjunct of success(), failure() or always(); WhenAlways when status
// functions are used otherwise, for the scheduler to decide). With
// Options.Event the compiler decides what the event tells: a condition
// that is then false makes the job WhenNever. The job stays in the plan,
// so the jobs that need it react as they do on GitHub: skipped, unless
// their own condition (always(), say) lets them run. A condition that is
// then true is dropped. Fields of the github context that the event does
// not give (github.repository, say) stay for the run. The run's store
// decides what is left in If once the job's needs are done, with
// DecideJob (a dag.Decider): the github context from the run's context,
// the inputs, the needs' results and outputs, and the status functions
// on the needs' results; false skips the job. A GitLab rules:if that
// only the run can decide is left in If too, and DecideJob evaluates it
// with the run's variables, a variable still unknown being undefined.
//
// A job that calls a reusable workflow of this repository
// (uses: ./.github/workflows/x.yml, read through the FileSource) is
// expanded in place: the called workflow's jobs become jobs "caller/job"
// (nested calls "caller/inner/job", matrix callers "caller (v)/job"),
// named "caller name / job name". They need what the caller needs, and a
// need of the caller means all of them. The caller's condition is put on
// the jobs that start the called workflow. The called workflow's
// expressions are rewritten for the caller's run, where they are
// evaluated: inputs become what the caller passes (a constant is written
// in), secrets what it maps (others read as empty, unless "secrets:
// inherit"), needs.job and jobs.job become needs['caller/job'], and
// needs.caller.outputs.x in the caller's workflow becomes the called
// workflow's output. GitHub's limits hold: four levels of workflows, 20
// distinct reusable workflows, no cycles. A reusable workflow of another
// repository stays one job with Uses set and one step that names it with
// its inputs, and a warning: it is not run yet. The runner runs
// actions/checkout (any version), the artifact and cache actions
// (actions/upload-artifact, download-artifact, cache, cache/restore and
// cache/save, any version: expr.BuiltinAction) natively from their
// inputs, and the actions of the repository (uses: ./path); every other
// action (JavaScript, Docker, docker://) is a warning naming it, since
// the step fails when it runs. The inputs of the artifact and cache
// actions are checked when they are literal: a required one missing
// (path; key for the cache actions) or a value the action rejects
// (if-no-files-found, retention-days from 1 to 90, compression-level
// from 0 to 9, booleans) is an error, rule "input"; an input the action
// does not have is a warning with a hint. Matrix values
// that are objects or arrays are also kept as JSON (JobSpec.MatrixJSON),
// so that matrix.config.os reads them at run time.
//
// The events of on: are the plan's Triggers, in a format-neutral form
// (workflow_dispatch is the event "manual"); Plan.Triggered decides
// whether an event starts the pipeline, with GitHub's filter patterns.
// Keys a JobSpec has no place for are checked and not kept: container
// credentials, ports, volumes and options, a service's volumes and
// entrypoint (containers are not run yet, which is a warning), the queue
// of a concurrency group. GitHub reads no YAML merge keys, so they
// are reported; anchors and aliases are read.
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
// # What is not honoured yet
//
// A key the compiler accepts changes what runs, or says it does not. What
// a pipeline asks for that the platform accepts but does not do yet is a
// warning at the key (rule "unsupported"), and the same finding, with the
// file and line, is a line of the job's JobSpec.Warnings, which the
// runner prints at the top of the job's log: container images (image:,
// container:), services, secrets, environments,
// GitHub permissions (no token is given to the steps), fail-fast and
// max-parallel, snapshot, run-name, schedules (on: schedule starts no
// run yet, in GitHub workflows and the native format), GitLab's
// workflow:name and workflow:auto_cancel, interruptible, coverage,
// hooks, id_tokens, identity, pages, release, dast_configuration,
// manual_confirmation, GitLab CI/CD steps (run: with step:), the git variables the checkout
// does not follow (GIT_CLONE_PATH, GIT_CHECKOUT, GIT_CLEAN_FLAGS …), the
// inputs of actions/checkout its checkout does not follow (token, lfs,
// sparse-checkout, ssh-key …; it follows ref, fetch-depth, path,
// submodules, clean and repository) and inputs it does not have, the
// inputs of the artifact and cache actions the runner does not follow
// (compression-level, artifact-ids, enableCrossOsArchive,
// upload-chunk-size; github-token, repository and run-id, which ask for
// another run's artifacts and fail the step), GitLab's cache:unprotect,
// artifacts:expose_as, public: false and access, and actions other than
// actions/checkout, the artifact and cache actions and local ones. Keys that ask for
// nothing (a null image, interruptible: false) are not reported.
//
// # Limits
//
// What one pipeline may ask of the platform is bounded, each limit a
// RuleLimit diagnostic where its author can act on it:
//
//   - a pipeline file, and each file it includes, is at most
//     Options.MaxFileBytes (DefaultMaxFileBytes, 1 MiB), reported at the
//     top of the file or where it is included; a MaxFileSource is asked
//     with that bound, so a huge file is not read at all;
//   - a run has at most Options.MaxJobs jobs (DefaultMaxJobs, 1,000),
//     matrix variants and parallel copies counted, reported at the job
//     that takes it past the limit; one matrix expands to at most
//     Options.MaxMatrixJobs (DefaultMaxMatrixJobs, 256);
//   - a job's spec is at most cikit.MaxJobSpecBytes (4 MiB) of JSON, what
//     a runner decodes, and its declared outputs at most
//     cikit.MaxOutputValueBytes each and cikit.MaxOutputsBytes together.
//
// # Stability
//
// Compile, CompileBytes, Plan, Diagnostic, FileSource and the Rule
// identifiers are stable: later versions add formats, keys and rules, and
// do not change what a valid file means. Messages may be reworded. A file
// that compiles today compiles to the same JobSpecs tomorrow, since stored
// runs are replayed from them.
package compiler
