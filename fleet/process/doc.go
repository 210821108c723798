// Package process runs jobs as local operating-system processes: each job
// in a fresh workspace that is a copy of a source tree, each step as
// `sh -e -c <run>` in its own process group.
//
// # Guarantees
//
//   - Steps run in order; the first failing step fails the job.
//   - The environment is layered: the executor's base environment, then
//     CI=true and the CIKIT_* variables, then the job's env (which already
//     holds the pipeline's), then the step's.
//   - On cancellation or timeout every process of the job gets SIGTERM,
//     then SIGKILL after the grace period. When Run returns, no process
//     started by the job's steps is left, including background processes a
//     step left behind — unless it escaped its process group (setsid);
//     the sandboxed backend of package fleet closes that gap.
//   - The workspace is removed when the job ends, so nothing one job
//     leaves behind is seen by the next.
//
// # Isolation
//
// None beyond the workspace: steps run as the calling user with the
// host's network and file system. Use it for trusted code (a developer's
// own pipeline on their machine, `cikit run`).
package process
