// Package github is the vcs.Provider of GitHub and GitHub Enterprise
// Server, over the REST API with go-github.
//
// # Authentication
//
// A Provider authenticates as a personal access token (Config.Token) or
// as a GitHub App (Config.AppID and Config.PrivateKey). As an App it signs
// a short RS256 JWT, finds the installation of each repository it is
// asked about (cached for the Provider's life), and exchanges the JWT for
// an installation token, which it reuses until Config.TokenRefresh before
// it expires; concurrent callers share one exchange.
//
// # What it calls
//
//	ReadFile        GET  /repos/{owner}/{repo}/contents/{path}?ref={sha}, then
//	                GET  /repos/{owner}/{repo}/git/blobs/{sha} (raw) for files over 1 MB
//	ReadDir         GET  /repos/{owner}/{repo}/contents/{dir}?ref={sha}
//	ResolveRef      GET  /repos/{owner}/{repo}/git/ref/heads/{ref}, else .../tags/{ref} (or refs/… as given),
//	                GET  /repos/{owner}/{repo}/git/tags/{sha} to peel annotated tags
//	DefaultBranch   GET  /repos/{owner}/{repo}
//	ChangedFiles    GET  /repos/{owner}/{repo}/compare/{base}...{head}, every page; when
//	                the first lists 300 files and no page more, GitHub may have cut the
//	                list: GET /repos/{owner}/{repo}/git/trees/{sha}?recursive=1 of the
//	                merge base and of head, compared
//	OpenPullRequest GET  /repos/{owner}/{repo}/pulls?state=open&head={owner}:{branch}
//	PullRequest     GET  /repos/{owner}/{repo}/pulls/{number}
//	SetStatus       POST /repos/{owner}/{repo}/statuses/{sha}; with Config.CheckRuns:
//	                GET  /repos/{owner}/{repo}/commits/{sha}/check-runs?check_name=&app_id= (once per run),
//	                then PATCH /repos/{owner}/{repo}/check-runs/{id}, or POST /repos/{owner}/{repo}/check-runs
//	Pushes          GET  /repos/{owner}/{repo}/events, pages until one goes back past since,
//	                GET  /repos/{owner}/{repo}/git/tags/{sha} to peel a pushed tag (404: a commit)
//	MintSource      POST /app/installations/{id}/access_tokens {repositories, permissions},
//	                GET  /repos/{owner}/{repo} only when the answer lists no clone_url
//	RevokeSource    DELETE /installation/token, with the token revoked
//
// # Checkout credentials
//
// MintSource gives a runner what it needs to fetch one job's commit and
// no more: the repository's clone URL and a fresh installation token
// narrowed to that one repository with the permission contents: read
// (GitHub adds metadata: read to every token), used with the user name
// x-access-token. Such a token cannot push, cannot read the App's other
// repositories and cannot write statuses or check runs. GitHub's tokens
// live an hour and cannot be made shorter: MintSource refuses a ttl over
// MaxSourceTTL and a token that would expire before ttl, and RevokeSource
// ends a token when its job is done. Minting needs App authentication; a
// Provider of a personal access token answers ErrCannotMint, as such a
// token can be neither narrowed nor made read-only.
//
// # Pushes
//
// Pushes (vcs.PushLister) reads the PushEvents of the repository's events
// API, which keeps 90 days and 300 events at most: a window reaching
// further back sees only what GitHub still lists. Events arrive there
// from seconds to hours after the push. A push's SHA is its payload's
// head, the ref's new value, except that a tag's is peeled to its
// commit, as the push webhook's head_commit names it; Before is the
// payload's as it is. Ref deletions (head all zeros) and refs other than
// branches and tags are left out.
//
// # Statuses
//
// Commit statuses know pending, success, failure and error. SetStatus
// maps running to pending, skipped to success (with "Skipped" as the
// description when there is none), and cancelled to error: a cancelled
// run says nothing about the code, and error is GitHub's state for "did
// not finish", where failure would claim the code is broken. Descriptions
// longer than GitHub's 140 characters are cut, ending in "…".
//
// # Check runs
//
// With Config.CheckRuns (App authentication only) SetStatus reports each
// Status as a check run named Status.Context on the commit, which pull
// requests show with more detail than a commit status and which most
// required checks name. Pending is status queued, running in_progress,
// and success, failure, cancelled and skipped are completed with that
// conclusion. The description is the run's output title and summary,
// the target URL its details URL; an empty one leaves the run's as it
// was. The first status of a context on a commit creates the run, later
// ones update it; the Provider finds the App's run of that name by
// listing the commit's runs once and remembers the newest 4096 runs it
// used, so a new Provider picks up the runs of an old one. A completed
// run is not reopened: a status that is not final after it creates a
// new run, the one GitHub shows. Two first statuses of one context
// posted at once may create two runs; GitHub shows the newer.
//
// # Errors
//
// What does not exist (repository, file, ref, commit, pull request, an
// App installation on the repository) is an error matching
// vcs.ErrNotFound. A call GitHub refuses for its rate limit — primary
// (403 with X-RateLimit-Remaining: 0), secondary (403 with Retry-After)
// or 429 — is a *vcs.RateLimitError whose RetryAfter says when to try
// again. The Provider never retries and keeps no memory of rate limits
// between calls: the caller (a status reporter) owns backing off, on its
// own clock.
//
// # Stability
//
// Config may grow fields; the mapping of states above is part of the
// contract.
package github
