// Package gitlabtest is an in-process GitLab: an http.Handler that answers
// the part of GitLab's REST API v4 a CI platform uses, from projects,
// commits, branches, tags, merge requests and commit statuses held in
// memory. Tests run it with httptest and point the real GitLab client at
// it, so what is tested is the client's requests and GitLab's answers, not
// a mock of either.
//
// # What it serves
//
// Under /api/v4, with projects named by numeric ID or URL-encoded path
// ("group%2Fsub%2Fproject"):
//
//	GET  /projects/:id
//	GET  /projects/:id/repository/files/:file_path/raw?ref=
//	GET  /projects/:id/repository/tree?ref=&path=&recursive=
//	GET  /projects/:id/repository/branches/:branch
//	GET  /projects/:id/repository/tags/:tag
//	GET  /projects/:id/repository/compare?from=&to=&straight=
//	GET  /projects/:id/repository/commits/:sha/statuses?ref=&name=&all=
//	GET  /projects/:id/merge_requests?state=&source_branch=&target_branch=
//	GET  /projects/:id/merge_requests/:iid
//	GET  /projects/:id/events?action=&target_type=&after=&before=&sort=
//	POST /projects/:id/statuses/:sha
//	POST /projects/:id/deploy_tokens   (name, scopes, expires_at, username)
//	GET  /projects/:id/deploy_tokens
//	DELETE /projects/:id/deploy_tokens/:token_id
//
// and, with Config.GitDir, git's smart HTTP protocol at a project's
// http_url_to_repo ({server}/{path}.git/info/refs and .../git-upload-pack).
//
// Lists are paginated the way GitLab does it: page and per_page (20 by
// default, at most 100) in, X-Page, X-Per-Page, X-Total, X-Total-Pages,
// X-Next-Page, X-Prev-Page and Link out. What does not exist is a 404 with
// GitLab's body, such as {"message":"404 Project Not Found"}.
//
// # GitLab's behaviour it keeps
//
// Every request must carry the server's token in PRIVATE-TOKEN (or as a
// Bearer token); otherwise the answer is 401 {"message":"401 Unauthorized"}.
// Commits have parents, so compare with straight=false diffs from the merge
// base, as GitLab does; a file moved with its content unchanged is a
// rename. A commit status is kept per name, ref and commit: a new POST
// under the same name replaces it, and posting the state a pending or
// running status already has is refused with 400, like GitLab's state
// machine does. Every seeding that moves or deletes a branch or tag
// records a push event at the server's clock, with GitLab's push_data
// (action pushed, created or removed; commit_from null for a new ref,
// commit_to null for a removed one); events are newest first unless
// sort=asc, and after and before are exclusive dates (UTC), as GitLab
// reads them. With Config.RateLimit set, requests beyond the limit in a
// window are answered 429 "Retry later" with Retry-After and RateLimit-*
// headers, like GitLab's throttles.
//
// # Git
//
// Every commit is a real git commit: Commit builds the blob, tree and
// commit objects of its files (author gitlabtest, the server's clock), so
// the SHAs the API answers are git's, and AnnotatedTag makes a tag object.
// With Config.GitDir the server writes them, with the branches and tags,
// into a bare repository per project under GitDir/{path}, a fork's
// borrowing its source's objects, and serves it read-only with
// vcs/gitserve. The credential is HTTP basic: the server's access token
// with any user name, or a deploy token of the project with the scope
// read_repository, not expired or deleted, with its user name (GitLab's
// default gitlab+deploy-token-{id}). No or an unknown credential is 401
// with a challenge; a deploy token of another project is 403 (GitLab
// answers 404); every push is 403. Deploy tokens are refused by the API
// (401), as on GitLab; DeployTokens and GitStats read back what clients
// did. ImportGit mirrors a commit of a test's own git repository, its
// SHA, files and objects.
//
// # Seeding
//
// CreateProject, ForkProject, ForkRelation, Commit, Branch, Tag,
// DeleteBranch, DeleteTag, OpenMergeRequest and CloseMergeRequest build the
// state the API then reports; Statuses and Requests read back what clients
// did. They are safe for concurrent use with requests in flight.
//
// # Stability
//
// The seeding methods are stable. The set of endpoints grows as providers
// need them; anything GitLab answers and this package does not is a 404.
package gitlabtest
