// Package local is a vcs.Provider over git repositories on this machine,
// read with the git command-line tool: the forge of the embedded platform
// and of `cikit run`.
//
// # Repositories
//
// Repositories live under one root directory: repository "org/name" is
// the git repository at <root>/org/name ("acme/platform/api" nests
// deeper), bare or with a work tree (then its .git directory is used).
// The provider reads only objects and refs, never a work tree or an
// index, so uncommitted changes are invisible and pushing into a bare
// repository is the usual way to feed it. A directory that is not itself
// a repository is not one: git never searches the directories above it.
//
// # Pull requests and statuses
//
// Local git has neither. The provider keeps them in memory, for the
// provider's life: PullRequestOpen opens a pull request (numbered from 1
// per repository), PullRequestClose closes it, and Statuses reads back
// the latest status per context that SetStatus posted. A pull request's
// head SHA is its head branch's commit when asked, as on a forge.
//
// # Safety
//
// Every name reaches git checked: repositories, refs and paths are
// validated (no "..", no leading '-', no control characters), commits
// must be full hexadecimal SHAs, and what git would read as an option is
// refused or put after "--" or "--end-of-options". Git runs with a clean
// environment — no system or user configuration, no terminal prompts, no
// replace objects — and is killed when the call's context ends. The
// repositories' own configuration is trusted: the platform owns them.
package local
