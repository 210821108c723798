// Package checkout puts a job's commit into its workspace, on the runner,
// outside the job's sandbox: the fetch of exactly one commit through a
// per-runner cache of the repositories, with the job's short-lived
// credential, before the job's first step.
//
// # What is fetched
//
// A Request names the run's commit (SHA, with Ref for its branch) and
// the job's cikit.Checkout options: Options.Ref checks out another
// commit, branch or tag instead, Options.Repository another repository
// of the same forge (its default branch unless Ref says otherwise).
// Depth 0 (the default) fetches the commit alone, a shallow fetch of
// depth 1; N at least N commits of history; -1 all of it. Submodules
// ("normal", "recursive") are checked out at the commits the work tree
// records, from their own remotes, with the job's credential when they
// are on the same origin; only http and https are allowed for them, so
// that a repository cannot make the runner read files of its own (such
// as other repositories' mirrors) through a file:// submodule. The
// remote must allow fetching a commit by its SHA, as GitHub, GitLab and
// vcs/gitserve do.
//
// # The cache
//
// Config.CacheDir holds one bare mirror per remote URL. A checkout
// fetches into the mirror under an exclusive flock(2) of it — so jobs of
// one runner, and runners sharing the directory, fetch one at a time per
// repository and the second finds the commit there — and then makes the
// work tree under a shared lock: a repository borrowing the mirror's
// objects through its alternates, with the mirror's shallow boundary, so
// no object is copied. A commit the mirror holds is not fetched again; a
// new commit costs only its new objects, since the mirror's refs tell the
// remote what the runner has. A mirror with all history (after a depth
// -1 checkout) stays complete. The mirror never drops objects
// (gc.pruneExpire=never): a workspace may borrow any of them. The cache
// only grows; remove a mirror while no job of the runner runs to reclaim
// its space.
//
// # Strategies
//
// Options.Strategy "fetch" (the default) keeps the files an earlier job
// left in the directory: tracked ones are rewritten, untracked ones stay
// unless Options.Clean (git clean -ffdx). Its git directory is never
// reused — the checkout runs outside the sandbox, and git must not run
// hooks or configuration a job wrote — and a symbolic link on the way to
// Options.Path is replaced, not followed. "clone" empties the directory
// first. "none" only makes sure the directory exists. The work tree gets
// "origin" pointing at the remote's URL, without credentials, and a
// branch of the run's name when the run's ref is a branch; anything else
// is checked out detached.
//
// # The job's view of the cache
//
// A work tree borrows the mirror's objects, so git commands of the
// job's steps read them: Result.Alternates names the directory, which
// a sandbox must show to the job read-only at the same path (never
// writable: other jobs borrow them too). ObjectDir names it before the
// checkout, creating the mirror if need be, so that a sandbox can be
// started with it while the checkout runs (fleet/process does). An
// executor that cannot show it sets Config.Dissociate (or
// Request.Dissociate, for one checkout), and each work tree gets its own
// copy of the objects it needs, at the cost of copying them on every
// checkout. Mirrors are made readable by every user (git init
// --shared=0644) whatever the runner's umask. Request.Owner
// gives the work tree to the user the job's steps run as, when the runner
// runs as another (root): git refuses a repository another user owns.
//
// # The credential
//
// Source.Username and Source.Token reach git only as an HTTP
// Authorization header scoped to the remote's origin, in command-line
// configuration passed through the environment of the git processes of
// the checkout (GIT_CONFIG_COUNT). They are never written to the
// mirror's or the work tree's .git/config, to the remote URL, to the log
// or to an error, and the job's steps never see them. When the cache
// already holds a commit of another repository (Options.Repository), the
// remote is asked whether the job's credential may read it before it is
// checked out, so a job cannot read through the cache what its token may
// not. A credential past its Source.ExpiresAt is not sent: the checkout
// fails with ErrAccessDenied at once, unless the cache holds the run's
// commit and the remote need not be asked.
//
// # Cost
//
// A checkout starts few processes, each of which costs milliseconds the
// job waits for: the cache's objects, refs and gc thresholds are read
// without git, the work tree's git directory is written directly and one
// git read-tree fills it. A warm checkout of a new commit is one git
// fetch (with git-remote-http, its unpacking and its connectivity
// check) and one git read-tree; a commit the cache holds, read-tree only.
//
// # Failures
//
// Errors are *Error values wrapping a sentinel, with the class the
// executor reports the job's failure with (Class): ErrCommitNotFound,
// ErrRepositoryNotFound and ErrInvalidRequest are cikit.FailureConfig —
// not retried, every attempt would fail the same way; ErrUnreachable
// (including the checkout's Config.Timeout and a transfer stalled for
// Config.StallTimeout), ErrWorkspace and ErrAccessDenied on the run's own
// repository are cikit.FailureInfrastructure, retried by the job's
// policy. Progress lines go to Request.Log.
//
// # Stability
//
// Request and Result may grow fields; the cache's layout is private to
// the package.
package checkout
