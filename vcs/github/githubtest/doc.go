// Package githubtest is a fake of GitHub's REST API for tests: an
// http.Handler, run with net/http/httptest, that keeps repositories with
// real commit history and answers the endpoints package vcs/github calls
// with GitHub's JSON shapes, status codes, Link pagination and error
// bodies, so the real go-github client is what the tests exercise.
//
// # What it serves
//
//	GET  /repos/{owner}/{repo}                         repository
//	GET  /repos/{owner}/{repo}/contents/{path}?ref=    file (base64; no content over 1 MB) or directory; raw media type
//	GET  /repos/{owner}/{repo}/git/blobs/{sha}         blob (base64, or raw media type)
//	GET  /repos/{owner}/{repo}/git/ref/{ref}           heads/… or tags/… reference
//	GET  /repos/{owner}/{repo}/git/tags/{sha}          annotated tag object
//	GET  /repos/{owner}/{repo}/git/trees/{sha}?recursive= tree of a tree, commit or ref
//	GET  /repos/{owner}/{repo}/compare/{base}...{head} three-dot comparison from the merge base, paginated (see Config.CapCompareFiles)
//	GET  /repos/{owner}/{repo}/pulls?state=&head=&base= pull requests, paginated
//	GET  /repos/{owner}/{repo}/pulls/{number}          pull request
//	POST /repos/{owner}/{repo}/statuses/{sha}          commit status (validated like GitHub's)
//	GET  /repos/{owner}/{repo}/commits/{ref}/statuses  commit statuses, newest first, paginated
//	GET  /repos/{owner}/{repo}/events                  events of the last 90 days, at most 300, newest first, paginated
//	POST /repos/{owner}/{repo}/check-runs              check run (App installations only; validated like GitHub's)
//	PATCH /repos/{owner}/{repo}/check-runs/{id}        check run update (App installations only)
//	GET  /repos/{owner}/{repo}/commits/{ref}/check-runs check runs by check_name, status, app_id, filter; newest first, paginated
//	GET  /repos/{owner}/{repo}/installation            the App's installation (App JWT)
//	POST /app/installations/{id}/access_tokens         installation token (App JWT), narrowed by repositories,
//	                                                   repository_ids and permissions
//	DELETE /installation/token                         revokes the installation token it carries
//	GET  /{owner}/{repo}.git/info/refs, POST .../git-upload-pack   git's smart HTTP, read-only (Config.GitDir)
//
// # Git
//
// Every commit is a real git commit: Commit builds the blob, tree and
// commit objects of its files (author githubtest, the server's clock), so
// the SHAs, tree SHAs and blob SHAs the API answers are git's. With
// Config.GitDir the server also writes them, and its branches and tags
// (annotated ones as tag objects), into a bare repository per repository
// under GitDir/{owner}/{repo}, and serves it with vcs/gitserve at the
// repository's clone_url, {server}/{owner}/{repo}.git: a real git client
// clones and fetches any commit by its SHA. The credential is HTTP basic,
// the password a personal token or an installation token that sees the
// repository and has contents: read (any user name; git's is
// x-access-token). No or an unknown token is 401 with a challenge; a
// repository the token does not see or may not read is 403 (GitHub
// answers 404); every push is 403, whatever the token. CommitAs commits
// have the server's files but not the mirrored commit's object, so git
// cannot fetch them; ImportGit mirrors a commit of a test's own git
// repository with its objects, which git then fetches.
//
// # Events
//
// Seeding records the events GitHub would: a PushEvent (payload ref,
// before, head, size, commits) for each ref that Commit, Branch, Tag or
// AnnotatedTag moves, after a CreateEvent for a ref they create, at the
// server's clock. AddEvent records others (a deleted branch's push, a
// WatchEvent…); DropEvents forgets some, as GitHub's feed may.
//
// # Authentication
//
// Every request needs an Authorization header. Repository endpoints take
// a personal access token added with AddToken (it sees every repository)
// or an installation token the server issued (it sees the installation's
// repositories until it expires or is revoked; others answer 404, as
// GitHub does for a private repository one cannot see). A token asked
// for with repositories or repository_ids sees only those; one asked for
// with permissions has only those, plus metadata: read, and each route
// needs its permission (contents: read for contents, blobs, refs, trees
// and comparisons, pull_requests: read, statuses and checks read or
// write), answering 403 "Resource not accessible by integration"
// otherwise. Asking for a repository outside the installation or a
// permission beyond its own (contents, pull_requests and metadata read,
// statuses and checks write) is 422, as on GitHub. IssuedTokens reads
// back what each installation token was narrowed to and whether it was
// revoked, never its value. App endpoints take an RS256 JWT
// whose iss is an App added with AddApp, checked with its public key,
// with iat not in the future and exp no more than ten minutes ahead.
//
// # Check runs
//
// Only an App's installation token may create or update a check run; a
// personal token gets 403 "You must authenticate via a GitHub App.", as
// on GitHub (listing takes either). As GitHub does, the server starts a
// run at its creation unless started_at says otherwise, completes it
// when given a conclusion, refuses a completed run without one and
// unknown statuses and conclusions (422), clears the conclusion when a
// status other than completed is set, and needs both title and summary
// in an output. CheckRuns reads back the latest run of each name.
//
// # Rate limits
//
// SetRateLimit makes the server refuse requests past a number per
// window, the way GitHub answers a secondary rate limit (403 with
// Retry-After), a primary one (403 with X-RateLimit-Remaining: 0 and
// X-RateLimit-Reset) or 429. Stats counts requests, refusals and token
// exchanges, for tests of callers that must back off.
//
// # Time
//
// Config.Now is the server's clock: token expiry, JWT checks and rate
// windows read it, so tests move time by hand instead of sleeping.
//
// # Stability
//
// A test helper: its seeding methods follow what vcs/vcstest's fixture
// needs and may grow.
package githubtest
