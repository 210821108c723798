// Package gitlab is the vcs.Provider for GitLab (gitlab.com or a
// self-managed instance), over GitLab's REST API v4 with the official
// client, gitlab.com/gitlab-org/api/client-go.
//
// # Repositories and tokens
//
// A repository is a project's full path, "group/sub/project"; nested groups
// are fine, and the path is sent URL-encoded as the project's ID. The token
// is a project, group or personal access token, sent as PRIVATE-TOKEN. It
// needs read_api to read and api to post statuses. A refused token is an
// error matching ErrUnauthorized.
//
// # How the methods map onto GitLab
//
//   - ReadFile: GET /projects/:id/repository/files/:path/raw?ref=sha
//   - ReadDir: GET /projects/:id/repository/tree?ref=sha&path=dir, every page
//   - ResolveRef: the branch of that name, else the tag
//   - DefaultBranch: the project's default_branch
//   - ChangedFiles: compare from=base to=head with straight=false (from the
//     merge base), both old_path and new_path of each diff
//   - OpenPullRequest: the newest opened merge request of the project from
//     its own branch
//   - PullRequest: the merge request by IID; Fork when its source project is
//     not the target project
//   - SetStatus: POST /projects/:id/statuses/:sha with name = Context
//   - Pushes (vcs.PushLister): GET /projects/:id/events?action=pushed&sort=asc,
//     every page, from the day before since (after is a date and exclusive),
//     then filtered by created_at; ref deletions are skipped, and a new
//     ref's Before is all zeros
//   - MintSource: GET /projects/:id (http_url_to_repo), then POST
//     /projects/:id/deploy_tokens with scopes [read_repository] and
//     expires_at
//   - RevokeSource: DELETE /projects/:id/deploy_tokens/:token_id
//
// GitLab's commit status states are pending, running, success, failed,
// canceled and skipped; vcs.StateFailure is failed and vcs.StateCancelled is
// canceled, the others keep their names.
//
// # Checkout credentials
//
// MintSource gives a runner what it needs to fetch one job's commit and
// no more: the project's HTTP clone URL and a new project deploy token
// whose one scope is read_repository, expiring when the job's ttl is
// over, with the deploy token's user name. A deploy token can clone and
// fetch its project only: it cannot push, call the API or read another
// project. Each call creates one, named "cikit-checkout-…"; RevokeSource
// deletes it when its job is done, as GitLab otherwise keeps expired
// deploy tokens listed in the project's settings. Creating deploy tokens
// needs the Maintainer role (and the api scope) for the Provider's token;
// GitLab's 403 is then an error saying so. GitLab's CI job tokens are not
// used: GitLab issues them to its own runners only.
//
// # Errors and rate limits
//
// A 404 is an error matching vcs.ErrNotFound. A 429 is a *vcs.RateLimitError
// whose RetryAfter comes from Retry-After, else RateLimit-Reset. The provider
// never retries and never waits: the client's own retries and its
// header-driven throttle are turned off, so the caller decides what to do
// with a refusal.
//
// # Testing
//
// Package gitlab/gitlabtest is an in-process GitLab the provider's tests run
// against; use it for tests of code that talks to GitLab.
package gitlab
