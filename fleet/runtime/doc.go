// Package runtime holds the run-time semantics of a job that are pure
// logic: what the executor (fleet/process) applies around the processes it
// starts, kept apart so that it is tested without running anything. Its
// only I/O is reading: an action's action.yml (LoadAction) and the
// workspace's files for hashFiles.
//
// # What it owns
//
//   - Environment files: ParseEnvFile reads GITHUB_ENV and GITHUB_OUTPUT
//     (NAME=value and NAME<<DELIMITER … DELIMITER), ParsePathFile reads
//     GITHUB_PATH, PrependPath applies it. GitHubFiles names the files
//     of one step and the variables that point at them.
//   - Workflow commands: ParseCommand reads one ::name k=v::message line;
//     CommandWriter is the io.Writer a job's output goes through, which
//     masks ::add-mask:: values, records ::error/::warning/::notice as
//     annotations and ::set-output as outputs, keeps ::group:: markers
//     for the log to fold and honours ::stop-commands::.
//   - Expressions: GitHub evaluates ${{ }} at run time against the
//     github, env, matrix, strategy, needs, steps, inputs (booleans and
//     numbers typed), vars, secrets, job and runner contexts (Expand, StepRuns, StepEnv, SetStep, JobOutputs).
//   - Predefined variables: Env gives CI, CIKIT_* and, by the job's
//     format, GitHub's default variables or GitLab's predefined ones;
//     Overrides the GitLab manual variables and the dotenv variables of
//     the job's needs (NeedsDotenv) that rank above the job's;
//     GitLabEnv expands the references a GitLab job's variables hold to
//     them ($NAME, ${NAME}, "$$" for "$").
//   - Caches and reports: RenderCache renders a cache's keys (native
//     {{ hash(…) }} placeholders with expr.RenderCacheKey, GitLab variables
//     and key files), HashFiles is GitHub's hashFiles, and ParseDotenv
//     reads a GitLab dotenv report.
//   - Local composite actions: LoadAction reads action.yml; an Action
//     gives its steps, its inputs context and its outputs.
//
// # Using it from an executor
//
// For one job: build a GitHub from Params (GitHub workflows), write
// EventJSON to Params.EventPath, start from Env(p), overlay the job's env
// (GitHub.JobEnv, or for GitLab GitLabEnv of Spec.Env), then Overrides(p).
// Make one CommandWriter for the job's output, with the job's
// mask.Masker (holding its secrets) in CommandOptions.
// For each step: StepRuns decides whether it runs; StepEnv gives its
// environment (and makes env.* of its expressions read it); Expand its
// run, shell, working-directory and with values; create its GitHubFiles;
// run it with CommandWriter.BeginStep before and Flush after; then read
// the files: AddEnv with GITHUB_ENV, PrependPath with GITHUB_PATH, and
// SetStep with its outcome and GITHUB_OUTPUT merged over
// CommandWriter.StepOutputs. At the end, JobOutputs evaluates the job's
// outputs.
//
// A step whose uses: is a local action (LocalAction) runs the action's
// steps: LoadAction reads it, InputsContext builds its inputs from the
// step's with:, GitHub.Composite gives the contexts its steps run in, as
// a job's steps do, and EvalOutputs its outputs, which become the using
// step's. Composite actions nest at most MaxActionDepth deep.
//
// # Limits
//
// Every file and line read here is bounded: environment files by the
// limit given (DefaultEnvFileBytes), output lines by
// CommandOptions.MaxLineBytes, annotations by cikit.MaxAnnotations, job
// outputs by cikit.MaxOutputValueBytes and cikit.MaxOutputsBytes, an
// action.yml by MaxActionBytes. Nothing here panics on any input.
//
// # Stability
//
// The exported names are stable; messages may be reworded, and contexts
// and variables may gain entries as the platform learns more of a run.
package runtime
