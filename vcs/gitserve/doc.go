// Package gitserve serves the git repositories under a root directory over
// git's smart HTTP protocol, read-only: the remote a runner fetches a job's
// commit from on the embedded platform and with vcs/local.
//
// # Layout and URLs
//
// Repositories live as vcs/local reads them: repository "org/name" is the
// git repository at <root>/org/name, bare or with a work tree (then its
// .git directory is served). A Handler answers, for repository R, with or
// without a ".git" suffix on R:
//
//	GET  /R/info/refs?service=git-upload-pack   the ref advertisement
//	POST /R/git-upload-pack                     a fetch
//
// Mount it under a prefix with http.StripPrefix. Only fetching exists:
// git-receive-pack (a push) is answered 403 Forbidden with a message that
// says the remote is read-only, and the dumb HTTP protocol (plain files
// under R) 403 as well. Any other path is 404 Not Found; a repository name
// that is not one ("..", a part starting with '.' or '-', a character
// other than letters, digits, '.', '_' and '-') is 400 Bad Request.
//
// # Authorization
//
// Every request is authorized before anything about the repository is
// read, by Config.Authorize, given the request and the repository's name:
// the platform checks HTTP basic credentials against the job tokens it
// minted. An error matching ErrUnauthenticated is answered 401
// Unauthorized with a WWW-Authenticate challenge, so git asks for (or
// sends) credentials; ErrUnavailable is 503 with Retry-After; any other
// error is 403 Forbidden, with the error's text as the message git shows.
// A repository that does not exist is 404, after authorization, so that an
// unauthenticated caller learns nothing about which repositories exist.
//
// # Limits and safety
//
// A request body (the wants and haves of a fetch, gunzipped when the
// client compressed it) is at most Config.MaxRequestBytes: more is 413. A
// request runs for at most Config.Timeout, after which git is killed.
// Git runs as `git upload-pack --stateless-rpc` on the repository's git
// directory with a clean environment — no system or user configuration,
// HOME at /dev/null, no terminal — and with
// uploadpack.allowAnySHA1InWant, so that a runner can fetch exactly the
// commit a job is for, even one no branch points to any more. The
// repositories' own configuration is trusted: the platform owns them.
// A protocol v2 advertisement (capabilities, no refs) is git's answer
// kept per repository until the repository's config file changes, so a
// fetch costs one git process.
//
// # Stability
//
// The URL layout is git's; the Go API may grow fields in Config.
package gitserve
