// Package process runs jobs as local operating-system processes: each job
// in a fresh workspace that is a copy of a source tree, each step as
// `sh -e -c <run>` in its own process group — as plain processes of the
// host, or in a bubblewrap sandbox of the job's own (Config.Sandbox).
//
// # Guarantees
//
//   - Steps run in order; the first failing step fails the job.
//   - The environment is built from scratch and layered: the host variables
//     AllowedEnv names (or Config.Env) and those Config.PassEnv names, then
//     CI=true and the CIKIT_* variables (and in a sandbox HOME, TMPDIR,
//     USER and LOGNAME), then the job's env (which already holds the
//     pipeline's), then the step's.
//   - Background processes a step starts live until the job ends.
//   - On cancellation or timeout every process of the job gets SIGTERM,
//     then SIGKILL after the grace period. When Run returns, no process
//     started by the job's steps is left, including background processes a
//     step left behind. Without a sandbox a process that left its process
//     group (setsid) escapes this; in a sandbox every process is killed.
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
// # The sandbox's supervisor
//
// A sandbox runs the program that imports this package as the job's
// supervisor: it starts the job's steps inside and reports how they
// ended. This package's init function recognizes the sandbox's marks (an
// argument and an environment variable) and runs the supervisor instead
// of the program's main. The program is handed to bubblewrap as an open
// file, so it need not be reachable by the sandbox's user, and it is the
// running program even if its file has been replaced since. The
// supervisor runs as the job's user: the executor trusts nothing it
// reports beyond the job's own outcome, and bounds every wait on it.
package process
