package githubtest

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"

	"github.com/cikit/cikit/vcs/internal/gitrepo"
)

// maxContentSize is the largest file the contents API returns inline;
// for a larger one it answers without content (encoding "none").
const maxContentSize = 1 << 20

// compareFilesPerPage is how many changed files a page of a comparison
// lists.
const compareFilesPerPage = 300

const docsURL = "https://docs.github.com/rest"

// caller is who made a request: a personal access token, an
// installation token or an App's JWT.
type caller struct {
	pat          bool
	installation int64
	app          int64
	token        *issuedToken // the installation token's, with installation
}

func (s *Server) routes() {
	s.mux = http.NewServeMux()
	// perm is the permission an installation token needs, as
	// "name:level".
	callerRoute := func(pattern, perm string, fn func(w http.ResponseWriter, req *http.Request, r *repo, c caller)) {
		name, level, _ := strings.Cut(perm, ":")
		s.mux.HandleFunc(pattern, s.authed(false, func(w http.ResponseWriter, req *http.Request, c caller) {
			r := s.repos[strings.ToLower(req.PathValue("owner")+"/"+req.PathValue("repo"))]
			if r == nil || !s.visible(c, r) {
				notFound(w)
				return
			}
			if !c.may(name, level) {
				writeError(w, http.StatusForbidden, "Resource not accessible by integration")
				return
			}
			fn(w, req, r, c)
		}))
	}
	repoRoute := func(pattern, perm string, fn func(w http.ResponseWriter, req *http.Request, r *repo)) {
		callerRoute(pattern, perm, func(w http.ResponseWriter, req *http.Request, r *repo, _ caller) { fn(w, req, r) })
	}
	repoRoute("GET /repos/{owner}/{repo}", "metadata:read", func(w http.ResponseWriter, req *http.Request, r *repo) {
		writeJSON(w, http.StatusOK, repoJSON(r, req))
	})
	repoRoute("GET /repos/{owner}/{repo}/contents/{path...}", "contents:read", s.contents)
	repoRoute("GET /repos/{owner}/{repo}/git/blobs/{sha}", "contents:read", s.blob)
	repoRoute("GET /repos/{owner}/{repo}/git/ref/{ref...}", "contents:read", s.ref)
	repoRoute("GET /repos/{owner}/{repo}/git/tags/{sha}", "contents:read", s.tagObject)
	repoRoute("GET /repos/{owner}/{repo}/git/trees/{sha...}", "contents:read", s.tree)
	repoRoute("GET /repos/{owner}/{repo}/compare/{basehead...}", "contents:read", s.compare)
	repoRoute("GET /repos/{owner}/{repo}/pulls", "pull_requests:read", s.pulls)
	repoRoute("GET /repos/{owner}/{repo}/pulls/{number}", "pull_requests:read", s.pull)
	repoRoute("POST /repos/{owner}/{repo}/statuses/{sha}", "statuses:write", s.createStatus)
	repoRoute("GET /repos/{owner}/{repo}/commits/{ref}/statuses", "statuses:read", s.listStatuses)
	repoRoute("GET /repos/{owner}/{repo}/events", "metadata:read", s.listEvents)
	callerRoute("POST /repos/{owner}/{repo}/check-runs", "checks:write", s.createCheckRun)
	callerRoute("PATCH /repos/{owner}/{repo}/check-runs/{id}", "checks:write", s.updateCheckRun)
	repoRoute("GET /repos/{owner}/{repo}/commits/{ref}/check-runs", "checks:read", s.listCheckRuns)
	s.mux.HandleFunc("GET /repos/{owner}/{repo}/installation", s.authed(true, s.installation))
	s.mux.HandleFunc("POST /app/installations/{id}/access_tokens", s.authed(true, s.accessToken))
	s.mux.HandleFunc("DELETE /installation/token", s.authed(false, s.revokeToken))
	s.mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { notFound(w) })
}

// ServeHTTP answers req as GitHub's REST API would, and git's smart HTTP
// requests (/{owner}/{repo}.git/...) as github.com's git does.
func (s *Server) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if gitrepo.IsGitPath(req.URL.Path) {
		s.serveGit(w, req)
		return
	}
	s.mux.ServeHTTP(w, req)
}

// may reports whether c has permission name at level ("read" or
// "write"): a personal token has every one, an installation token those
// it was issued with.
func (c caller) may(name, level string) bool {
	if c.pat {
		return true
	}
	if c.installation == 0 || c.token == nil {
		return false
	}
	perms := c.token.perms
	if perms == nil {
		perms = permissions
	}
	return covers(perms[name], level)
}

// covers reports whether permission level have includes level want.
func covers(have, want string) bool {
	return have == "write" || have == "admin" || have == "read" && want == "read"
}

// authed counts the request, applies the rate limit, checks the caller
// (an App JWT when app, a token otherwise) and runs fn, all under the
// server's lock so each request sees one state.
func (s *Server) authed(app bool, fn func(http.ResponseWriter, *http.Request, caller)) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.stats.Requests++
		if s.limited(w) {
			return
		}
		cred, ok := credential(req)
		if !ok {
			writeError(w, http.StatusUnauthorized, "Requires authentication")
			return
		}
		var c caller
		switch {
		case app:
			id, err := s.verifyJWT(cred)
			if err != nil {
				writeError(w, http.StatusUnauthorized, "A JSON web token could not be decoded: "+err.Error())
				return
			}
			c.app = id
		case s.pats[cred]:
			c.pat = true
		default:
			t, ok := s.tokens[cred]
			if !ok || !s.now().Before(t.expires) || s.installs[t.installation] == nil {
				writeError(w, http.StatusUnauthorized, "Bad credentials")
				return
			}
			c.installation, c.token = t.installation, &t
		}
		fn(w, req, c)
	}
}

func credential(req *http.Request) (string, bool) {
	h := req.Header.Get("Authorization")
	for _, scheme := range []string{"Bearer ", "bearer ", "token "} {
		if v, ok := strings.CutPrefix(h, scheme); ok && v != "" {
			return v, true
		}
	}
	return "", false
}

// verifyJWT checks an App's JWT the way GitHub does: RS256, signed by the
// App named in iss, issued not in the future, expiring in at most ten
// minutes.
func (s *Server) verifyJWT(raw string) (int64, error) {
	var app int64
	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(raw, claims, func(t *jwt.Token) (any, error) {
		var err error
		app, err = issuer(claims["iss"])
		if err != nil {
			return nil, err
		}
		key := s.apps[app]
		if key == nil {
			return nil, fmt.Errorf("no App %d", app)
		}
		return key, nil
	}, jwt.WithValidMethods([]string{"RS256"}), jwt.WithTimeFunc(s.now), jwt.WithIssuedAt(), jwt.WithExpirationRequired())
	if err != nil {
		return 0, err
	}
	exp, err := claims.GetExpirationTime()
	if err != nil {
		return 0, err
	}
	if exp.Sub(s.now()) > 10*time.Minute {
		return 0, fmt.Errorf("'Expiration time' claim ('exp') is too far in the future")
	}
	return app, nil
}

// issuer reads iss, which GitHub takes as a number or a string.
func issuer(v any) (int64, error) {
	switch v := v.(type) {
	case float64:
		return int64(v), nil
	case string:
		return strconv.ParseInt(v, 10, 64)
	}
	return 0, fmt.Errorf("'Issuer' claim ('iss') must be an App ID")
}

func (s *Server) visible(c caller, r *repo) bool {
	switch {
	case c.pat:
		return true
	case c.installation != 0:
		in := s.installs[c.installation]
		key := strings.ToLower(r.fullName())
		return in != nil && in.repos[key] && (c.token == nil || c.token.repos == nil || c.token.repos[key])
	}
	return false
}

func (s *Server) limited(w http.ResponseWriter) bool {
	l := s.limit
	if l.Requests == 0 {
		return false
	}
	now := s.now()
	if s.window.IsZero() || !now.Before(s.window.Add(l.Window)) {
		s.window, s.inWindow = now, 0
	}
	s.inWindow++
	if s.inWindow <= l.Requests {
		return false
	}
	s.stats.Limited++
	end := s.window.Add(l.Window)
	wait := max(1, int64(math.Ceil(end.Sub(now).Seconds())))
	switch l.Kind {
	case Primary:
		w.Header().Set("X-RateLimit-Limit", strconv.Itoa(l.Requests))
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Used", strconv.Itoa(s.inWindow-1))
		reset := end.Unix()
		if end.After(time.Unix(reset, 0)) {
			reset++ // not before the window's end
		}
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(reset, 10))
		w.Header().Set("X-RateLimit-Resource", "core")
		writeJSON(w, http.StatusForbidden, map[string]any{
			"message":           "API rate limit exceeded.",
			"documentation_url": docsURL + "/overview/rate-limits-for-the-rest-api#about-primary-rate-limits",
			"status":            "403",
		})
	case TooMany:
		w.Header().Set("Retry-After", strconv.FormatInt(wait, 10))
		writeError(w, http.StatusTooManyRequests, "Too Many Requests")
	default:
		w.Header().Set("Retry-After", strconv.FormatInt(wait, 10))
		writeJSON(w, http.StatusForbidden, map[string]any{
			"message":           "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
			"documentation_url": docsURL + "/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits",
			"status":            "403",
		})
	}
	return true
}

func (s *Server) installation(w http.ResponseWriter, req *http.Request, c caller) {
	full := strings.ToLower(req.PathValue("owner") + "/" + req.PathValue("repo"))
	for _, id := range slices.Sorted(maps.Keys(s.installs)) {
		in := s.installs[id]
		if in.app == c.app && in.repos[full] {
			s.stats.InstallationLookups++
			writeJSON(w, http.StatusOK, map[string]any{
				"id":                   id,
				"app_id":               in.app,
				"account":              map[string]any{"login": req.PathValue("owner")},
				"target_type":          "Organization",
				"repository_selection": "selected",
				"access_tokens_url":    apiURL(req, fmt.Sprintf("/app/installations/%d/access_tokens", id)),
				"permissions":          permissions,
			})
			return
		}
	}
	notFound(w)
}

var permissions = map[string]string{"contents": "read", "pull_requests": "read", "statuses": "write", "checks": "write", "metadata": "read"}

func (s *Server) accessToken(w http.ResponseWriter, req *http.Request, c caller) {
	id, _ := strconv.ParseInt(req.PathValue("id"), 10, 64)
	in := s.installs[id]
	if in == nil || in.app != c.app {
		notFound(w)
		return
	}
	var ask struct {
		Repositories  []string          `json:"repositories"`
		RepositoryIDs []int64           `json:"repository_ids"`
		Permissions   map[string]string `json:"permissions"`
	}
	if req.ContentLength != 0 {
		if err := json.NewDecoder(http.MaxBytesReader(w, req.Body, maxBody)).Decode(&ask); err != nil {
			writeError(w, http.StatusBadRequest, "Problems parsing JSON")
			return
		}
	}
	tok := issuedToken{installation: id, expires: s.now().Add(s.tokenTTL).UTC().Truncate(time.Second)}
	var listed []*repo
	if len(ask.Repositories)+len(ask.RepositoryIDs) > 0 {
		tok.repos = map[string]bool{}
		for _, key := range slices.Sorted(maps.Keys(in.repos)) {
			r := s.repos[key]
			if r == nil {
				continue
			}
			if slices.ContainsFunc(ask.Repositories, func(n string) bool { return strings.EqualFold(n, r.name) }) || slices.Contains(ask.RepositoryIDs, r.id) {
				tok.repos[key] = true
				listed = append(listed, r)
			}
		}
		if len(listed) != len(ask.Repositories)+len(ask.RepositoryIDs) {
			writeError(w, http.StatusUnprocessableEntity, "There is at least one repository that does not exist or is not accessible to the parent installation.")
			return
		}
	}
	granted := permissions
	if len(ask.Permissions) > 0 {
		// GitHub grants metadata: read to every token.
		granted = map[string]string{"metadata": "read"}
		for name, level := range ask.Permissions {
			if (level != "read" && level != "write") || !covers(permissions[name], level) {
				writeError(w, http.StatusUnprocessableEntity, "The permissions requested are not granted to this installation.")
				return
			}
			granted[name] = level
		}
		tok.perms = granted
	}
	value := newToken()
	tok.record = &IssuedToken{Installation: id, Permissions: maps.Clone(tok.perms)}
	for _, r := range listed {
		tok.record.Repositories = append(tok.record.Repositories, r.fullName())
	}
	s.issued = append(s.issued, tok.record)
	s.tokens[value] = tok
	s.stats.TokensIssued++
	answer := map[string]any{
		"token":                value,
		"expires_at":           tok.expires.Format(time.RFC3339),
		"permissions":          granted,
		"repository_selection": "selected",
	}
	if listed != nil {
		list := make([]map[string]any, len(listed))
		for i, r := range listed {
			list[i] = repoJSON(r, req)
		}
		answer["repositories"] = list
	}
	writeJSON(w, http.StatusCreated, answer)
}

// maxBody is the largest request body the server reads.
const maxBody = 1 << 20

// revokeToken ends the installation token the request carries.
func (s *Server) revokeToken(w http.ResponseWriter, req *http.Request, c caller) {
	if c.installation == 0 {
		writeError(w, http.StatusForbidden, "Only an installation token can be revoked.")
		return
	}
	cred, _ := credential(req)
	if t, ok := s.tokens[cred]; ok && t.record != nil {
		t.record.Revoked = true
	}
	delete(s.tokens, cred)
	s.stats.TokensRevoked++
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) contents(w http.ResponseWriter, req *http.Request, r *repo) {
	ref := cmp.Or(req.URL.Query().Get("ref"), r.defaultBranch)
	c := r.resolve(ref)
	if c == nil {
		writeError(w, http.StatusNotFound, "No commit found for the ref "+ref)
		return
	}
	p := strings.Trim(req.PathValue("path"), "/")
	if b, ok := c.files[p]; ok {
		data := r.blobs[b]
		if rawRequested(req) {
			w.Header().Set("Content-Type", "application/vnd.github.raw")
			w.WriteHeader(http.StatusOK)
			w.Write(data)
			return
		}
		f := entryJSON(req, r, c, "file", p, b, len(data))
		if len(data) > maxContentSize {
			f["content"], f["encoding"] = "", "none"
		} else {
			f["content"], f["encoding"] = encode(data), "base64"
		}
		writeJSON(w, http.StatusOK, f)
		return
	}
	entries := map[string]map[string]any{}
	for fp, b := range c.files {
		rest, ok := strings.CutPrefix(fp, p+"/")
		if p == "" {
			rest, ok = fp, true
		}
		if !ok {
			continue
		}
		if name, _, isDir := strings.Cut(rest, "/"); isDir {
			dp := strings.TrimPrefix(p+"/"+name, "/")
			entries[name] = entryJSON(req, r, c, "dir", dp, treeHash(c, dp), 0)
		} else {
			entries[name] = entryJSON(req, r, c, "file", fp, b, len(r.blobs[b]))
		}
	}
	if len(entries) == 0 {
		notFound(w)
		return
	}
	list := make([]map[string]any, 0, len(entries))
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		list = append(list, entries[name])
	}
	writeJSON(w, http.StatusOK, list)
}

func entryJSON(req *http.Request, r *repo, c *commit, kind, p, sha string, size int) map[string]any {
	self := apiURL(req, "/repos/"+r.fullName()+"/contents/"+p) + "?ref=" + c.sha
	e := map[string]any{
		"type":         kind,
		"name":         p[strings.LastIndex(p, "/")+1:],
		"path":         p,
		"sha":          sha,
		"size":         size,
		"url":          self,
		"html_url":     "https://github.com/" + r.fullName() + "/blob/" + c.sha + "/" + p,
		"download_url": nil,
	}
	if kind == "file" {
		e["git_url"] = apiURL(req, "/repos/"+r.fullName()+"/git/blobs/"+sha)
		e["download_url"] = "https://raw.githubusercontent.com/" + r.fullName() + "/" + c.sha + "/" + p
	} else {
		e["git_url"] = apiURL(req, "/repos/"+r.fullName()+"/git/trees/"+sha)
	}
	e["_links"] = map[string]any{"self": e["url"], "git": e["git_url"], "html": e["html_url"]}
	return e
}

func (s *Server) blob(w http.ResponseWriter, req *http.Request, r *repo) {
	sha := req.PathValue("sha")
	data, ok := r.blobs[sha]
	if !ok {
		notFound(w)
		return
	}
	if rawRequested(req) {
		w.Header().Set("Content-Type", "application/vnd.github.raw")
		w.WriteHeader(http.StatusOK)
		w.Write(data)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"sha":      sha,
		"node_id":  "B_" + sha[:12],
		"size":     len(data),
		"url":      apiURL(req, "/repos/"+r.fullName()+"/git/blobs/"+sha),
		"content":  encode(data),
		"encoding": "base64",
	})
}

func (s *Server) ref(w http.ResponseWriter, req *http.Request, r *repo) {
	name := strings.TrimPrefix(req.PathValue("ref"), "refs/")
	var sha, kind string
	if b, ok := strings.CutPrefix(name, "heads/"); ok && r.branches[b] != "" {
		sha, kind = r.branches[b], "commit"
	} else if t, ok := strings.CutPrefix(name, "tags/"); ok && r.tags[t] != "" {
		sha, kind = r.tags[t], "commit"
		if r.tagObjects[sha] != nil {
			kind = "tag"
		}
	} else {
		notFound(w)
		return
	}
	objectPath := "/git/commits/"
	if kind == "tag" {
		objectPath = "/git/tags/"
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"ref":     "refs/" + name,
		"node_id": "REF_" + sha[:12],
		"url":     apiURL(req, "/repos/"+r.fullName()+"/git/refs/"+name),
		"object": map[string]any{
			"type": kind,
			"sha":  sha,
			"url":  apiURL(req, "/repos/"+r.fullName()+objectPath+sha),
		},
	})
}

func (s *Server) tagObject(w http.ResponseWriter, req *http.Request, r *repo) {
	o := r.tagObjects[req.PathValue("sha")]
	if o == nil {
		notFound(w)
		return
	}
	kind, objectPath := "commit", "/git/commits/"
	if r.tagObjects[o.target] != nil {
		kind, objectPath = "tag", "/git/tags/"
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"node_id": "TAG_" + o.sha[:12],
		"sha":     o.sha,
		"tag":     o.name,
		"message": o.message,
		"url":     apiURL(req, "/repos/"+r.fullName()+"/git/tags/"+o.sha),
		"tagger":  map[string]any{"name": "githubtest", "email": "githubtest@example.com", "date": s.now().UTC().Format(time.RFC3339)},
		"object": map[string]any{
			"type": kind,
			"sha":  o.target,
			"url":  apiURL(req, "/repos/"+r.fullName()+objectPath+o.target),
		},
		"verification": map[string]any{"verified": false, "reason": "unsigned"},
	})
}

// tree lists a directory of a commit, every file and directory below
// it with recursive; sha is a tree's, or a commit's or ref's, whose root
// tree it lists.
func (s *Server) tree(w http.ResponseWriter, req *http.Request, r *repo) {
	sha := req.PathValue("sha")
	t, ok := r.trees[sha]
	if !ok {
		c := r.resolve(sha)
		if c == nil {
			notFound(w)
			return
		}
		t = treeRef{commit: c}
	}
	recursive := req.URL.Query().Get("recursive") != ""
	prefix := strings.TrimPrefix(t.dir+"/", "/")
	entries := map[string]map[string]any{}
	for fp, b := range t.commit.files {
		rest, ok := strings.CutPrefix(fp, prefix)
		if !ok {
			continue
		}
		parts := strings.Split(rest, "/")
		if !recursive {
			parts = parts[:1]
		}
		for i := range parts {
			p := strings.Join(parts[:i+1], "/")
			if i == len(parts)-1 && p == rest {
				entries[p] = map[string]any{"path": p, "mode": "100644", "type": "blob", "sha": b, "size": len(r.blobs[b]),
					"url": apiURL(req, "/repos/"+r.fullName()+"/git/blobs/"+b)}
				continue
			}
			ts := treeHash(t.commit, prefix+p)
			entries[p] = map[string]any{"path": p, "mode": "040000", "type": "tree", "sha": ts,
				"url": apiURL(req, "/repos/"+r.fullName()+"/git/trees/"+ts)}
		}
	}
	list := []map[string]any{}
	for _, p := range slices.Sorted(maps.Keys(entries)) {
		list = append(list, entries[p])
	}
	root := treeHash(t.commit, t.dir)
	writeJSON(w, http.StatusOK, map[string]any{
		"sha":       root,
		"url":       apiURL(req, "/repos/"+r.fullName()+"/git/trees/"+root),
		"tree":      list,
		"truncated": false,
	})
}

func (s *Server) compare(w http.ResponseWriter, req *http.Request, r *repo) {
	baseRef, headRef, ok := strings.Cut(req.PathValue("basehead"), "...")
	if !ok {
		notFound(w)
		return
	}
	base, head := r.resolve(r.ownRef(baseRef)), r.resolve(r.ownRef(headRef))
	if base == nil || head == nil {
		notFound(w)
		return
	}
	mb := r.mergeBase(base, head)
	if mb == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("No common ancestor between %s and %s.", baseRef, headRef))
		return
	}
	inBase, inHead := r.ancestors(base), r.ancestors(head)
	var commits []*commit
	behind := 0
	for sha := range inHead {
		if !inBase[sha] {
			commits = append(commits, r.commits[sha])
		}
	}
	for sha := range inBase {
		if !inHead[sha] {
			behind++
		}
	}
	slices.SortFunc(commits, func(a, b *commit) int { return int(a.seq - b.seq) })
	status := "diverged"
	switch {
	case len(commits) == 0 && behind == 0:
		status = "identical"
	case behind == 0:
		status = "ahead"
	case len(commits) == 0:
		status = "behind"
	}
	files := diff(req, r, mb, head)

	q := req.URL.Query()
	paged := q.Has("page") || q.Has("per_page")
	page, perPage := pageParams(q, 30)
	pageCommits := commits
	if paged {
		pageCommits = pageOf(commits, page, perPage)
	} else if len(commits) > 250 {
		pageCommits = commits[len(commits)-250:]
	}
	pageFiles := pageOf(files, page, compareFilesPerPage)
	filePages := pages(len(files), compareFilesPerPage)
	if s.capFiles && page > 1 {
		pageFiles = pageFiles[:0]
	}
	if s.capFiles {
		filePages = 1
	}
	if paged {
		link(w, req, page, perPage, max(1, pages(len(commits), perPage), filePages))
	}
	commitList := make([]map[string]any, len(pageCommits))
	for i, c := range pageCommits {
		commitList[i] = commitJSON(req, r, c)
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"url":               apiURL(req, "/repos/"+r.fullName()+"/compare/"+baseRef+"..."+headRef),
		"html_url":          "https://github.com/" + r.fullName() + "/compare/" + baseRef + "..." + headRef,
		"permalink_url":     "https://github.com/" + r.fullName() + "/compare/" + base.sha + "..." + head.sha,
		"base_commit":       commitJSON(req, r, base),
		"merge_base_commit": commitJSON(req, r, mb),
		"status":            status,
		"ahead_by":          len(commits),
		"behind_by":         behind,
		"total_commits":     len(commits),
		"commits":           commitList,
		"files":             pageFiles,
	})
}

// ownRef strips an "owner:" prefix naming r's owner from a compare side.
func (r *repo) ownRef(ref string) string {
	if owner, rest, ok := strings.Cut(ref, ":"); ok && strings.EqualFold(owner, r.owner) {
		return rest
	}
	return ref
}

// diff lists the files head changes since base as GitHub's compare
// does: added, modified and removed, and renamed (with
// previous_filename) when a removed file's content reappears at a new
// path; sorted by filename.
func diff(req *http.Request, r *repo, base, head *commit) []map[string]any {
	var added, removed []string
	var out []map[string]any
	for p, b := range head.files {
		switch ob, ok := base.files[p]; {
		case !ok:
			added = append(added, p)
		case ob != b:
			out = append(out, fileJSON(req, r, head, p, b, "modified"))
		}
	}
	for p := range base.files {
		if _, ok := head.files[p]; !ok {
			removed = append(removed, p)
		}
	}
	slices.Sort(added)
	slices.Sort(removed)
	renamedFrom := map[string]bool{}
	for _, p := range added {
		f := fileJSON(req, r, head, p, head.files[p], "added")
		for _, old := range removed {
			if !renamedFrom[old] && base.files[old] == head.files[p] {
				renamedFrom[old] = true
				f["status"], f["previous_filename"] = "renamed", old
				break
			}
		}
		out = append(out, f)
	}
	for _, p := range removed {
		if !renamedFrom[p] {
			out = append(out, fileJSON(req, r, base, p, base.files[p], "removed"))
		}
	}
	slices.SortFunc(out, func(a, b map[string]any) int { return strings.Compare(a["filename"].(string), b["filename"].(string)) })
	return out
}

func fileJSON(req *http.Request, r *repo, c *commit, p, blob, status string) map[string]any {
	return map[string]any{
		"sha":          blob,
		"filename":     p,
		"status":       status,
		"additions":    0,
		"deletions":    0,
		"changes":      0,
		"blob_url":     "https://github.com/" + r.fullName() + "/blob/" + c.sha + "/" + p,
		"raw_url":      "https://github.com/" + r.fullName() + "/raw/" + c.sha + "/" + p,
		"contents_url": apiURL(req, "/repos/"+r.fullName()+"/contents/"+p) + "?ref=" + c.sha,
	}
}

func commitJSON(req *http.Request, r *repo, c *commit) map[string]any {
	parents := make([]map[string]any, len(c.parents))
	for i, p := range c.parents {
		parents[i] = map[string]any{"sha": p, "url": apiURL(req, "/repos/"+r.fullName()+"/commits/"+p)}
	}
	who := map[string]any{"name": "githubtest", "email": "githubtest@example.com", "date": c.time.Format(time.RFC3339)}
	return map[string]any{
		"sha":      c.sha,
		"node_id":  "C_" + c.sha[:12],
		"url":      apiURL(req, "/repos/"+r.fullName()+"/commits/"+c.sha),
		"html_url": "https://github.com/" + r.fullName() + "/commit/" + c.sha,
		"commit": map[string]any{
			"message":   c.message,
			"author":    who,
			"committer": who,
			"tree":      map[string]any{"sha": treeHash(c, "")},
		},
		"parents": parents,
	}
}

func (s *Server) pulls(w http.ResponseWriter, req *http.Request, r *repo) {
	q := req.URL.Query()
	state := cmp.Or(q.Get("state"), "open")
	var list []*pull
	for _, p := range slices.Backward(r.pulls) { // newest first, GitHub's default order
		switch {
		case state == "open" && !p.open, state == "closed" && p.open:
			continue
		case q.Get("base") != "" && q.Get("base") != p.baseBranch:
			continue
		}
		if h := q.Get("head"); h != "" {
			user, branch, ok := strings.Cut(h, ":")
			if !ok || !strings.EqualFold(user, p.headRepo.owner) || branch != p.headBranch {
				continue
			}
		}
		list = append(list, p)
	}
	page, perPage := pageParams(q, 30)
	link(w, req, page, perPage, max(1, pages(len(list), perPage)))
	out := []map[string]any{}
	for _, p := range pageOf(list, page, perPage) {
		out = append(out, pullJSON(req, r, p))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) pull(w http.ResponseWriter, req *http.Request, r *repo) {
	n, err := strconv.Atoi(req.PathValue("number"))
	if err != nil || n < 1 || n > len(r.pulls) {
		notFound(w)
		return
	}
	writeJSON(w, http.StatusOK, pullJSON(req, r, r.pulls[n-1]))
}

func pullJSON(req *http.Request, r *repo, p *pull) map[string]any {
	state := "open"
	var closed any
	if !p.open {
		state, closed = "closed", p.created.Format(time.RFC3339)
	}
	end := func(repo *repo, branch string) map[string]any {
		return map[string]any{
			"label": repo.owner + ":" + branch,
			"ref":   branch,
			"sha":   repo.branches[branch],
			"user":  map[string]any{"login": repo.owner},
			"repo":  repoJSON(repo, req),
		}
	}
	return map[string]any{
		"id":         r.id*1000 + int64(p.number),
		"number":     p.number,
		"state":      state,
		"title":      "Merge " + p.headRepo.owner + ":" + p.headBranch + " into " + p.baseBranch,
		"url":        apiURL(req, fmt.Sprintf("/repos/%s/pulls/%d", r.fullName(), p.number)),
		"html_url":   fmt.Sprintf("https://github.com/%s/pull/%d", r.fullName(), p.number),
		"user":       map[string]any{"login": p.headRepo.owner},
		"draft":      false,
		"merged":     false,
		"created_at": p.created.Format(time.RFC3339),
		"updated_at": p.created.Format(time.RFC3339),
		"closed_at":  closed,
		"head":       end(p.headRepo, p.headBranch),
		"base":       end(r, p.baseBranch),
	}
}

func repoJSON(r *repo, req *http.Request) map[string]any {
	return map[string]any{
		"id":             r.id,
		"node_id":        fmt.Sprintf("R_%d", r.id),
		"name":           r.name,
		"full_name":      r.fullName(),
		"owner":          map[string]any{"login": r.owner, "type": "Organization"},
		"private":        true,
		"fork":           false,
		"html_url":       "https://github.com/" + r.fullName(),
		"clone_url":      apiURL(req, "/"+r.fullName()+".git"),
		"url":            apiURL(req, "/repos/"+r.fullName()),
		"default_branch": r.defaultBranch,
	}
}

func (s *Server) createStatus(w http.ResponseWriter, req *http.Request, r *repo) {
	sha := req.PathValue("sha")
	var in struct {
		State       string `json:"state"`
		TargetURL   string `json:"target_url"`
		Description string `json:"description"`
		Context     string `json:"context"`
	}
	if err := json.NewDecoder(req.Body).Decode(&in); err != nil {
		writeError(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	if r.commits[sha] == nil {
		writeError(w, http.StatusUnprocessableEntity, "No commit found for SHA: "+sha)
		return
	}
	switch {
	case !slices.Contains([]string{"pending", "success", "failure", "error"}, in.State):
		invalid(w, "state", in.State+" is not a valid state")
		return
	case utf8.RuneCountInString(in.Description) > 140:
		invalid(w, "description", "description is too long (maximum is 140 characters)")
		return
	}
	s.seq++
	st := &status{id: s.seq, state: in.State, description: in.Description, targetURL: in.TargetURL,
		contxt: cmp.Or(in.Context, "default"), created: s.now().UTC()}
	r.statuses[sha] = append(r.statuses[sha], st)
	s.stats.StatusesCreated++
	writeJSON(w, http.StatusCreated, statusJSON(req, r, sha, st))
}

func (s *Server) listStatuses(w http.ResponseWriter, req *http.Request, r *repo) {
	c := r.resolve(req.PathValue("ref"))
	if c == nil {
		notFound(w)
		return
	}
	list := slices.Clone(r.statuses[c.sha])
	slices.Reverse(list)
	page, perPage := pageParams(req.URL.Query(), 30)
	link(w, req, page, perPage, max(1, pages(len(list), perPage)))
	out := []map[string]any{}
	for _, st := range pageOf(list, page, perPage) {
		out = append(out, statusJSON(req, r, c.sha, st))
	}
	writeJSON(w, http.StatusOK, out)
}

func statusJSON(req *http.Request, r *repo, sha string, st *status) map[string]any {
	return map[string]any{
		"url":         apiURL(req, "/repos/"+r.fullName()+"/statuses/"+sha),
		"id":          st.id,
		"node_id":     fmt.Sprintf("SC_%d", st.id),
		"state":       st.state,
		"description": st.description,
		"target_url":  st.targetURL,
		"context":     st.contxt,
		"created_at":  st.created.Format(time.RFC3339),
		"updated_at":  st.created.Format(time.RFC3339),
		"creator":     map[string]any{"login": "githubtest"},
	}
}

// pageParams reads page and per_page (at most 100) as GitHub does.
func pageParams(q url.Values, defaultPerPage int) (page, perPage int) {
	page, _ = strconv.Atoi(q.Get("page"))
	perPage, _ = strconv.Atoi(q.Get("per_page"))
	if perPage <= 0 {
		perPage = defaultPerPage
	}
	return max(page, 1), min(perPage, 100)
}

func pages(n, perPage int) int { return (n + perPage - 1) / perPage }

// pageOf returns a page of list, never nil: GitHub's lists are [] when
// empty.
func pageOf[T any](list []T, page, perPage int) []T {
	lo := min((page-1)*perPage, len(list))
	return append([]T{}, list[lo:min(lo+perPage, len(list))]...)
}

// link sets the Link header of a page of last pages, with next, last,
// first and prev as GitHub gives them.
func link(w http.ResponseWriter, req *http.Request, page, perPage, last int) {
	at := func(n int, rel string) string {
		q := req.URL.Query()
		q.Set("page", strconv.Itoa(n))
		q.Set("per_page", strconv.Itoa(perPage))
		return fmt.Sprintf(`<%s?%s>; rel="%s"`, apiURL(req, req.URL.Path), q.Encode(), rel)
	}
	var rels []string
	if page < last {
		rels = append(rels, at(page+1, "next"), at(last, "last"))
	}
	if page > 1 {
		rels = append(rels, at(1, "first"), at(page-1, "prev"))
	}
	if len(rels) > 0 {
		w.Header().Set("Link", strings.Join(rels, ", "))
	}
}

func apiURL(req *http.Request, p string) string {
	scheme := "http"
	if req.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + req.Host + p
}

func rawRequested(req *http.Request) bool {
	return strings.Contains(req.Header.Get("Accept"), ".raw")
}

// encode is base64 in lines of 60 characters, as GitHub sends content.
func encode(data []byte) string {
	enc := base64.StdEncoding.EncodeToString(data)
	var b strings.Builder
	for len(enc) > 60 {
		b.WriteString(enc[:60])
		b.WriteByte('\n')
		enc = enc[60:]
	}
	b.WriteString(enc)
	b.WriteByte('\n')
	return b.String()
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, message string) {
	writeJSON(w, code, map[string]any{"message": message, "documentation_url": docsURL, "status": strconv.Itoa(code)})
}

func notFound(w http.ResponseWriter) { writeError(w, http.StatusNotFound, "Not Found") }

func invalid(w http.ResponseWriter, field, message string) {
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
		"message":           "Validation Failed",
		"errors":            []map[string]any{{"resource": "Status", "field": field, "code": "custom", "message": message}},
		"documentation_url": docsURL + "/commits/statuses#create-a-commit-status",
		"status":            "422",
	})
}
