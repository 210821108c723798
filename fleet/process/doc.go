// Package process runs jobs as local operating-system processes: each job
// in a fresh workspace, each step in its own process group — as plain
// processes of the host, or in a bubblewrap sandbox of the job's own
// (Config.Sandbox).
//
// # The job's world
//
// RunJob runs a job in the world of its run (Job.Context):
//
//   - The workspace is a checkout of the run's commit when the context
//     has a source and the job asks for one: before the first step when
//     JobSpec.Checkout is set (native and GitLab jobs; strategy "none"
//     leaves it empty), or where a GitHub step uses actions/checkout (any
//     version; its ref, fetch-depth, path, submodules, clean and
//     repository inputs). Config.Checkout (fleet/checkout) makes it in
//     the executor's process, outside the sandbox, whose user then owns
//     it; the source's credential never reaches the steps. The sandbox
//     starts while the checkout before the first step runs, and shows
//     the object directory of the runner's git cache the work tree
//     borrows (ObjectCache) read-only, so nothing is copied; an
//     actions/checkout step, a cache the sandbox's user cannot reach
//     (the log says why) and a Checkouter that is no ObjectCache copy the
//     objects into the work tree instead. A commit that
//     does not exist fails the job as cikit.FailureConfig, anything else
//     as cikit.FailureInfrastructure. Without a source the workspace is a
//     copy of Config.Source, the runner's fixed directory, and the log
//     says so.
//   - The output of every job, whatever its format, goes through a
//     mask.Writer of a Masker of the job's own: the values of
//     Job.Secrets, the checkout token, registry credentials and what
//     GitHub steps register with ::add-mask:: are masked, with their
//     common encodings, also across writes and the chunks the output is
//     read in. A secret too short to be masked fails the job before its
//     first step.
//   - The environment is the executor's (below), then fleet/runtime's
//     predefined variables for the job's format (CI, CIKIT_*, GitHub's
//     or GitLab's), then the job's env, then the step's.
//   - GitHub jobs (JobSpec.Format "github") run with GitHub's run-time
//     semantics: ${{ }} in run, env, with, shell, working-directory and
//     if: evaluated against the run's contexts, steps' outcomes and
//     outputs, needs' results and outputs; fresh GITHUB_ENV, GITHUB_PATH,
//     GITHUB_OUTPUT and GITHUB_STEP_SUMMARY files for each step, applied
//     to the later ones; GITHUB_EVENT_PATH holding the payload; workflow
//     commands in the output (::add-mask::, ::error and the other
//     annotations, ::group::, ::set-output); GitHub's default shells; job
//     outputs evaluated at the end within cikit.MaxOutputsBytes; local
//     composite actions (uses: ./path) and the artifact and cache actions
//     (below) run natively. Any other action fails its step, naming it.
//   - Artifacts and caches go through Job.Files, the attempt's
//     artifacts.Broker, and Config.Transfer, which sends and fetches the
//     archives with the presigned requests the broker hands out. Archives
//     pass through a directory of the executor's beside the job's
//     directory, which the sandbox does not show; every download's size
//     and SHA-256 are checked before it is unpacked, and unpacking never
//     writes outside its directory (artifacts.Unpack).
//   - Before the first step of a native or GitLab job (after the
//     checkout), the artifacts of the jobs it needs, but those of
//     JobSpec.NoArtifactsFrom, are unpacked into the workspace; a failed
//     or mismatched download fails the job (cikit.FailureInfrastructure).
//     Then its caches (JobSpec.Caches) whose policy pulls are looked up
//     (the key, the fallback keys, the longest restore-key prefix;
//     fleet/runtime renders the keys) and restored.
//   - At the end of a job that was not cancelled, its caches whose
//     policy pushes and whose when matches the outcome are saved, unless
//     an exact hit or an archive equal to the one restored makes that
//     useless; then its artifacts are uploaded as artifacts:when says
//     (on_success by default), with their reports whatever the outcome: a
//     dotenv report becomes the job's outputs, which the GitLab jobs that
//     need it get as variables, and the other reports are uploaded as
//     artifacts of type report. No file matched is a warning; a refused
//     upload fails the job; a cache that cannot be restored or saved is
//     a warning. Result.Caches reports every cache.
//   - GitHub's actions/cache (at any version; key, path, restore-keys,
//     lookup-only, fail-on-cache-miss, save-always; saved at the job's end
//     when it succeeded and missed an exact hit), actions/cache/restore,
//     actions/cache/save, actions/upload-artifact (name, path with "!"
//     exclusions archived relative to the paths' least common ancestor,
//     if-no-files-found, retention-days, overwrite, include-hidden-files)
//     and actions/download-artifact (name, path, pattern,
//     merge-multiple; the job's own run only) run in the executor. Their
//     paths must lie in the job's directory (the workspace, RUNNER_TEMP,
//     a HOME there for ~).
//   - A job that declares artifacts or caches, or uses those actions, on
//     a runner without Files fails saying so.
//   - GitLab jobs' variables are expanded against the run's when the job
//     starts; their after-steps see CI_JOB_STATUS and run also when the
//     job is cancelled or times out (for at most 5 minutes more).
//   - JobSpec.Warnings head the log, one "--- warning:" line each.
//
// A job's directory in the work root holds its workspace and its
// temporary directory (RUNNER_TEMP: environment files, scripts, the
// event payload); the sandbox shows both and nothing else of the work
// root.
//
// # Guarantees
//
//   - Steps run in order; the first failing step fails the job (a GitHub
//     step's if: may run it after a failure).
//   - The environment is built from scratch and layered: the host variables
//     AllowedEnv names (or Config.Env) and those Config.PassEnv names, then
//     the predefined variables (and in a sandbox HOME, TMPDIR, USER and
//     LOGNAME), then the job's env (which already holds the pipeline's;
//     for a GitHub job overlaid by what earlier steps wrote to
//     GITHUB_ENV), then a GitLab manual trigger's variables, then the
//     step's.
//   - Background processes a step starts live until the job ends.
//   - On cancellation or timeout every process of the job gets SIGTERM,
//     then SIGKILL after the grace period. When Run returns, no process
//     started by the job's steps is left, including background processes a
//     step left behind and those that left their process group or session
//     (setsid, daemons).
//   - Given the job's lease (RunLeased), the job's supervisor kills every
//     process of the job when the lease's deadline passes without a
//     renewal, even if the executor's own process is stopped or frozen;
//     see LeaseDeadline.
//   - The workspace is removed when the job ends, so nothing one job
//     leaves behind is seen by the next. An executor that is killed
//     leaves its jobs' workspaces; New removes those of its work root
//     that no live executor holds (each holds a lock file beside every
//     workspace it uses), and nothing else.
//
// # Isolation
//
// Without a sandbox, none beyond the workspace: steps run as the calling
// user with the host's network and file system. Use it for trusted code
// (a developer's own pipeline on their machine, `cikit run`).
//
// With Config.Sandbox each job runs in a bubblewrap sandbox: its own
// user, PID, IPC, UTS, mount and network namespaces, a read-only view of
// the system, only its workspace writable, never as root on the host, and
// with limits on its resources: a cgroup v2 of its own where the host
// delegates one, rlimits otherwise (see Sandbox and Limits). It shares the
// host's kernel. docs/isolation.md says what that protects against
// compared with a VM per job, and what it does not.
//
// A job given an Image (Job.Image) runs in its sandbox with the image's
// root file system as / instead of the host's directories, with the
// image's environment, user and shell; see Image. Only a sandbox runs
// images. With Config.Images the executor finds the image itself: the
// one the job names (JobSpec.Image: native and GitLab image:, GitHub
// container:), the one its runs-on labels map to, or the runner's
// default. It pulls it into the runner's cache (package image), gives
// the job a view of it of its own, thrown away after the job, and
// records the digest in Result.ImageDigest; see Images. The job's
// services (JobSpec.Services) run from their images in sandboxes of
// their own that share the job's network, ready before its first step
// and stopped after its last; see DefaultServiceTimeout.
//
// # The job's supervisor
//
// Every job has a supervisor, a process of its own that is the program
// importing this package: it starts the job's steps and reports how they
// ended, and holds the watchdog of the job's lease. In a sandbox it runs
// inside; without one it runs beside the job as a process of the host,
// the parent of the steps and the subreaper (PR_SET_CHILD_SUBREAPER) of
// every process they start, so that it finds and kills those that leave
// their parents. It kills the job and exits when the executor closes its
// connection, so a job does not outlive an executor that died. This
// package's init function recognizes the supervisor's marks (an argument
// and an environment variable) and runs the supervisor instead of the
// program's main. The program is handed to bubblewrap as an open
// file, so it need not be reachable by the sandbox's user, and it is the
// running program even if its file has been replaced since (without a
// sandbox, /proc/self/exe is run). In an image, whose loader and
// libraries are not the host's, a dynamically linked program runs under
// the host's loader with the host's libraries it needs, shown read-only
// under /.cikit/host; a static one runs as it is. The sandbox's
// supervisor runs as the
// job's user: the executor trusts nothing it
// reports beyond the job's own outcome, and bounds every wait on it.
package process
