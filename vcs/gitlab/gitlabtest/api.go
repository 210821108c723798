package gitlabtest

import (
	"cmp"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"mime"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cikit/cikit/vcs/internal/gitrepo"
)

const apiPrefix = "/api/v4/"

// ServeHTTP answers a request to GitLab's REST API v4, or one of git's
// smart HTTP protocol at a project's http_url_to_repo.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if gitrepo.IsGitPath(r.URL.Path) {
		s.serveGit(w, r)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	if s.throttled(w) {
		return
	}
	if !s.authorized(r) {
		writeMessage(w, http.StatusUnauthorized, "401 Unauthorized")
		return
	}
	raw := r.URL.EscapedPath()
	if !strings.HasPrefix(raw, apiPrefix) {
		writeMessage(w, http.StatusNotFound, "404 Not Found")
		return
	}
	var seg []string
	for _, part := range strings.Split(strings.TrimPrefix(raw, apiPrefix), "/") {
		p, err := url.PathUnescape(part)
		if err != nil {
			writeMessage(w, http.StatusBadRequest, "400 Bad request - malformed path")
			return
		}
		seg = append(seg, p)
	}
	if len(seg) < 2 || seg[0] != "projects" {
		writeMessage(w, http.StatusNotFound, "404 Not Found")
		return
	}
	p := s.lookup(seg[1])
	if p == nil {
		writeMessage(w, http.StatusNotFound, "404 Project Not Found")
		return
	}
	var route string // what follows the project: "merge_requests" or "repository/tree"
	switch {
	case len(seg) > 3 && seg[2] == "repository":
		route = "repository/" + seg[3]
	case len(seg) > 2:
		route = seg[2]
	}
	get := r.Method == http.MethodGet || r.Method == http.MethodHead
	switch {
	case len(seg) == 2 && get:
		writeJSON(w, http.StatusOK, s.projectJSON(r, p))
	case route == "repository/files" && len(seg) == 6 && seg[5] == "raw" && get:
		s.rawFile(w, r, p, seg[4])
	case route == "repository/tree" && len(seg) == 4 && get:
		s.tree(w, r, p)
	case route == "repository/branches" && len(seg) == 5 && get:
		s.branch(w, r, p, seg[4])
	case route == "repository/tags" && len(seg) == 5 && get:
		s.tag(w, r, p, seg[4])
	case route == "repository/compare" && len(seg) == 4 && get:
		s.compare(w, r, p)
	case route == "repository/commits" && len(seg) == 6 && seg[5] == "statuses" && get:
		s.listStatuses(w, r, p, seg[4])
	case route == "merge_requests" && len(seg) == 3 && get:
		s.listMergeRequests(w, r, p)
	case route == "merge_requests" && len(seg) == 4 && get:
		s.mergeRequest(w, r, p, seg[3])
	case route == "events" && len(seg) == 3 && get:
		s.listEvents(w, r, p)
	case route == "statuses" && len(seg) == 4 && r.Method == http.MethodPost:
		s.setStatus(w, r, p, seg[3])
	case route == "deploy_tokens" && len(seg) == 3 && r.Method == http.MethodPost:
		s.createDeployToken(w, r, p)
	case route == "deploy_tokens" && len(seg) == 3 && get:
		s.listDeployTokens(w, p)
	case route == "deploy_tokens" && len(seg) == 4 && r.Method == http.MethodDelete:
		s.deleteDeployToken(w, p, seg[3])
	default:
		writeMessage(w, http.StatusNotFound, "404 Not Found")
	}
}

// throttled counts the request against the rate limit and answers 429 when
// it is over, the way GitLab's Rack::Attack throttles do.
func (s *Server) throttled(w http.ResponseWriter) bool {
	if s.cfg.RateLimit <= 0 {
		return false
	}
	now := s.cfg.Now()
	if s.windowStart.IsZero() || !now.Before(s.windowStart.Add(s.cfg.RateWindow)) {
		s.windowStart, s.windowCount = now, 0
	}
	s.windowCount++
	if s.windowCount <= s.cfg.RateLimit {
		return false
	}
	reset := s.windowStart.Add(s.cfg.RateWindow)
	h := w.Header()
	h.Set("RateLimit-Name", "throttle_authenticated_api")
	h.Set("RateLimit-Limit", strconv.Itoa(s.cfg.RateLimit))
	h.Set("RateLimit-Observed", strconv.Itoa(s.windowCount))
	h.Set("RateLimit-Remaining", "0")
	h.Set("RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
	h.Set("RateLimit-ResetTime", reset.UTC().Format(http.TimeFormat))
	h.Set("Retry-After", strconv.Itoa(int(math.Ceil(reset.Sub(now).Seconds()))))
	h.Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusTooManyRequests)
	fmt.Fprint(w, "Retry later\n")
	return true
}

func (s *Server) authorized(r *http.Request) bool {
	if tok := r.Header.Get("PRIVATE-TOKEN"); tok != "" {
		return tok == s.cfg.Token
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && tok == s.cfg.Token
}

func (s *Server) lookup(id string) *project {
	if n, err := strconv.Atoi(id); err == nil {
		return s.byID[n]
	}
	return s.projects[id]
}

func (s *Server) rawFile(w http.ResponseWriter, r *http.Request, p *project, file string) {
	ref := cmp.Or(r.URL.Query().Get("ref"), p.defaultBranch)
	c := p.resolve(ref)
	if c == nil {
		writeMessage(w, http.StatusNotFound, "404 Commit Not Found")
		return
	}
	data, ok := c.files[file]
	if !ok {
		writeMessage(w, http.StatusNotFound, "404 File Not Found")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Gitlab-File-Name", path.Base(file))
	h.Set("X-Gitlab-File-Path", file)
	h.Set("X-Gitlab-Ref", ref)
	h.Set("X-Gitlab-Size", strconv.Itoa(len(data)))
	h.Set("X-Gitlab-Blob-Id", blobID(data))
	h.Set("X-Gitlab-Commit-Id", c.sha)
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		fmt.Fprint(w, data)
	}
}

type treeNode struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Type string `json:"type"`
	Path string `json:"path"`
	Mode string `json:"mode"`
}

func (s *Server) tree(w http.ResponseWriter, r *http.Request, p *project) {
	q := r.URL.Query()
	c := p.resolve(cmp.Or(q.Get("ref"), p.defaultBranch))
	if c == nil {
		writeMessage(w, http.StatusNotFound, "404 Tree Not Found")
		return
	}
	dir := strings.Trim(q.Get("path"), "/")
	recursive := q.Get("recursive") == "true"
	nodes := map[string]treeNode{}
	for file, data := range c.files {
		rel := file
		if dir != "" {
			var ok bool
			if rel, ok = strings.CutPrefix(file, dir+"/"); !ok {
				continue
			}
		}
		parts := strings.Split(rel, "/")
		for i := range parts {
			full := path.Join(dir, strings.Join(parts[:i+1], "/"))
			if i == len(parts)-1 {
				nodes[full] = treeNode{ID: blobID(data), Name: parts[i], Type: "blob", Path: full, Mode: "100644"}
			} else {
				nodes[full] = treeNode{ID: treeID(c.sha, full), Name: parts[i], Type: "tree", Path: full, Mode: "040000"}
			}
			if !recursive {
				break
			}
		}
	}
	if len(nodes) == 0 {
		writeMessage(w, http.StatusNotFound, "404 Tree Not Found")
		return
	}
	// GitLab lists trees before blobs, each by path.
	list := slices.SortedFunc(maps.Values(nodes), func(a, b treeNode) int {
		if a.Type != b.Type {
			return strings.Compare(b.Type, a.Type)
		}
		return strings.Compare(a.Path, b.Path)
	})
	writeJSON(w, http.StatusOK, paginate(w, r, list))
}

type commitJSON struct {
	ID             string    `json:"id"`
	ShortID        string    `json:"short_id"`
	Title          string    `json:"title"`
	Message        string    `json:"message"`
	ParentIDs      []string  `json:"parent_ids"`
	AuthorName     string    `json:"author_name"`
	AuthorEmail    string    `json:"author_email"`
	AuthoredDate   time.Time `json:"authored_date"`
	CommitterName  string    `json:"committer_name"`
	CommitterEmail string    `json:"committer_email"`
	CommittedDate  time.Time `json:"committed_date"`
	CreatedAt      time.Time `json:"created_at"`
	WebURL         string    `json:"web_url"`
}

func (s *Server) commitJSON(r *http.Request, p *project, c *commit) commitJSON {
	return commitJSON{ID: c.sha, ShortID: c.sha[:8], Title: c.message, Message: c.message,
		ParentIDs: slices.Clone(c.parents), AuthorName: "Gitlabtest", AuthorEmail: "gitlabtest@example.com",
		AuthoredDate: c.createdAt, CommitterName: "Gitlabtest", CommitterEmail: "gitlabtest@example.com",
		CommittedDate: c.createdAt, CreatedAt: c.createdAt, WebURL: webURL(r, p.path, "-/commit", c.sha)}
}

func (s *Server) branch(w http.ResponseWriter, r *http.Request, p *project, name string) {
	sha, ok := p.branches[name]
	if !ok {
		writeMessage(w, http.StatusNotFound, "404 Branch Not Found")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"name": name, "commit": s.commitJSON(r, p, p.commits[sha]), "merged": false, "protected": name == p.defaultBranch,
		"default": name == p.defaultBranch, "developers_can_push": false, "developers_can_merge": false,
		"can_push": true, "web_url": webURL(r, p.path, "-/tree", name),
	})
}

func (s *Server) tag(w http.ResponseWriter, r *http.Request, p *project, name string) {
	sha, ok := p.tags[name]
	if !ok {
		writeMessage(w, http.StatusNotFound, "404 Tag Not Found")
		return
	}
	c := p.commits[sha]
	writeJSON(w, http.StatusOK, map[string]any{
		"name": name, "message": "", "target": sha, "protected": false, "release": nil, "created_at": nil,
		"commit": s.commitJSON(r, p, c),
	})
}

type diffJSON struct {
	OldPath     string `json:"old_path"`
	NewPath     string `json:"new_path"`
	AMode       string `json:"a_mode"`
	BMode       string `json:"b_mode"`
	NewFile     bool   `json:"new_file"`
	RenamedFile bool   `json:"renamed_file"`
	DeletedFile bool   `json:"deleted_file"`
	Diff        string `json:"diff"`
}

func (s *Server) compare(w http.ResponseWriter, r *http.Request, p *project) {
	q := r.URL.Query()
	from, to := p.resolve(q.Get("from")), p.resolve(q.Get("to"))
	if from == nil || to == nil {
		writeMessage(w, http.StatusNotFound, "404 Ref Not Found")
		return
	}
	base := from
	if q.Get("straight") != "true" {
		base = p.commits[p.mergeBase(from.sha, to.sha)] // nil when unrelated: everything in to is new
	}
	var before map[string]string
	var excluded map[string]int
	if base != nil {
		before, excluded = base.files, p.ancestors(base.sha)
	}
	var commits []commitJSON
	for sha := range p.ancestors(to.sha) {
		if _, ok := excluded[sha]; !ok {
			commits = append(commits, s.commitJSON(r, p, p.commits[sha]))
		}
	}
	slices.SortFunc(commits, func(a, b commitJSON) int {
		return cmp.Or(a.CommittedDate.Compare(b.CommittedDate), strings.Compare(a.ID, b.ID))
	})
	body := map[string]any{
		"commit": nil, "commits": commits, "diffs": diffs(before, to.files),
		"compare_timeout": false, "compare_same_ref": from.sha == to.sha,
		"web_url": webURL(r, p.path, "-/compare", from.sha+"..."+to.sha),
	}
	if len(commits) > 0 {
		body["commit"] = commits[len(commits)-1]
	}
	writeJSON(w, http.StatusOK, body)
}

// diffs compares two trees the way git does by default: a deleted file
// whose content reappears at an added path is a rename.
func diffs(before, after map[string]string) []diffJSON {
	var added, deleted []string
	var out []diffJSON
	for p, data := range after {
		old, ok := before[p]
		switch {
		case !ok:
			added = append(added, p)
		case old != data:
			out = append(out, diffJSON{OldPath: p, NewPath: p, AMode: "100644", BMode: "100644", Diff: unified(old, data)})
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			deleted = append(deleted, p)
		}
	}
	slices.Sort(added)
	slices.Sort(deleted)
	for _, p := range added {
		if i := slices.IndexFunc(deleted, func(d string) bool { return before[d] == after[p] }); i >= 0 {
			out = append(out, diffJSON{OldPath: deleted[i], NewPath: p, AMode: "100644", BMode: "100644", RenamedFile: true})
			deleted = slices.Delete(deleted, i, i+1)
			continue
		}
		out = append(out, diffJSON{OldPath: p, NewPath: p, AMode: "0", BMode: "100644", NewFile: true, Diff: unified("", after[p])})
	}
	for _, p := range deleted {
		out = append(out, diffJSON{OldPath: p, NewPath: p, AMode: "100644", BMode: "0", DeletedFile: true, Diff: unified(before[p], "")})
	}
	slices.SortFunc(out, func(a, b diffJSON) int { return strings.Compare(a.NewPath, b.NewPath) })
	return out
}

// unified is the diff of a whole-file replacement, enough for readers of
// the diff field.
func unified(old, new string) string {
	var b strings.Builder
	oldLines, newLines := lines(old), lines(new)
	fmt.Fprintf(&b, "@@ -%d,%d +%d,%d @@\n", min(1, len(oldLines)), len(oldLines), min(1, len(newLines)), len(newLines))
	for _, l := range oldLines {
		b.WriteString("-" + l + "\n")
	}
	for _, l := range newLines {
		b.WriteString("+" + l + "\n")
	}
	return b.String()
}

func lines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

func (s *Server) projectJSON(r *http.Request, p *project) map[string]any {
	ns, name := path.Split(p.path)
	ns = strings.TrimSuffix(ns, "/")
	out := map[string]any{
		"id": p.id, "name": name, "path": name, "name_with_namespace": strings.ReplaceAll(p.path, "/", " / "),
		"path_with_namespace": p.path, "default_branch": p.defaultBranch, "visibility": "private",
		"created_at": p.createdAt, "web_url": webURL(r, p.path), "http_url_to_repo": webURL(r, p.path) + ".git",
		"namespace":  map[string]any{"name": path.Base(ns), "path": path.Base(ns), "full_path": ns, "kind": "group"},
		"empty_repo": len(p.commits) == 0, "archived": false,
	}
	if f := p.forkedFrom; f != nil {
		out["forked_from_project"] = map[string]any{"id": f.id, "name": path.Base(f.path), "path": path.Base(f.path),
			"path_with_namespace": f.path, "default_branch": f.defaultBranch, "web_url": webURL(r, f.path)}
	}
	return out
}

func (s *Server) mergeRequestJSON(r *http.Request, target *project, mr *mergeRequest) map[string]any {
	head := mr.source.branches[mr.sourceBranch]
	base := target.branches[mr.targetBranch]
	out := map[string]any{
		"id": mr.id, "iid": mr.iid, "project_id": target.id, "title": mr.title, "description": "",
		"state": mr.state, "created_at": mr.createdAt, "updated_at": mr.updatedAt,
		"target_branch": mr.targetBranch, "source_branch": mr.sourceBranch,
		"source_project_id": mr.source.id, "target_project_id": target.id,
		"sha": head, "merge_status": "can_be_merged", "detailed_merge_status": "mergeable", "draft": false,
		"web_url":    webURL(r, target.path, "-/merge_requests", strconv.Itoa(mr.iid)),
		"references": map[string]string{"short": "!" + strconv.Itoa(mr.iid), "full": target.path + "!" + strconv.Itoa(mr.iid)},
	}
	if mr.state == "closed" {
		out["closed_at"] = mr.updatedAt
	}
	if mr.source == target {
		out["diff_refs"] = map[string]string{"base_sha": target.mergeBase(base, head), "head_sha": head, "start_sha": base}
	} else {
		out["diff_refs"] = map[string]string{"base_sha": base, "head_sha": head, "start_sha": base}
	}
	return out
}

func (s *Server) listMergeRequests(w http.ResponseWriter, r *http.Request, p *project) {
	q := r.URL.Query()
	var list []map[string]any
	// GitLab's default order is created_at descending.
	for _, mr := range slices.Backward(p.mergeRequests) {
		if st := q.Get("state"); st != "" && st != "all" && st != mr.state {
			continue
		}
		if b := q.Get("source_branch"); b != "" && b != mr.sourceBranch {
			continue
		}
		if b := q.Get("target_branch"); b != "" && b != mr.targetBranch {
			continue
		}
		list = append(list, s.mergeRequestJSON(r, p, mr))
	}
	writeJSON(w, http.StatusOK, paginate(w, r, list))
}

func (s *Server) mergeRequest(w http.ResponseWriter, r *http.Request, p *project, iid string) {
	n, err := strconv.Atoi(iid)
	if err != nil || n < 1 || n > len(p.mergeRequests) {
		writeMessage(w, http.StatusNotFound, "404 Not found")
		return
	}
	writeJSON(w, http.StatusOK, s.mergeRequestJSON(r, p, p.mergeRequests[n-1]))
}

// listEvents answers a project's events, which here are its pushes. Like
// GitLab, after and before are dates, both exclusive: after=2026-03-01
// starts at 2026-03-02T00:00Z, before=2026-03-01 ends at 2026-03-01T00:00Z.
func (s *Server) listEvents(w http.ResponseWriter, r *http.Request, p *project) {
	q := r.URL.Query()
	var from, until time.Time
	for _, bound := range []struct {
		name string
		to   *time.Time
		add  int
	}{{"after", &from, 1}, {"before", &until, 0}} {
		if v := q.Get(bound.name); v != "" {
			d, err := time.Parse(time.DateOnly, v)
			if err != nil {
				writeError(w, http.StatusBadRequest, bound.name+" is invalid")
				return
			}
			*bound.to = d.AddDate(0, 0, bound.add)
		}
	}
	sort := cmp.Or(q.Get("sort"), "desc")
	if sort != "asc" && sort != "desc" {
		writeError(w, http.StatusBadRequest, "sort does not have a valid value")
		return
	}
	if a := q.Get("action"); a != "" && a != "pushed" || q.Get("target_type") != "" {
		writeJSON(w, http.StatusOK, paginate(w, r, []map[string]any{}))
		return
	}
	var list []map[string]any
	for _, e := range p.events {
		if !from.IsZero() && e.createdAt.Before(from) || !until.IsZero() && !e.createdAt.Before(until) {
			continue
		}
		list = append(list, s.eventJSON(p, e))
	}
	if sort == "desc" {
		slices.Reverse(list)
	}
	writeJSON(w, http.StatusOK, paginate(w, r, list))
}

// timeFormat is how GitLab writes an event's created_at.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

func (s *Server) eventJSON(p *project, e *pushEvent) map[string]any {
	action, actionName := "pushed", "pushed to"
	switch {
	case e.from == "":
		action, actionName = "created", "pushed new"
	case e.to == "":
		action, actionName = "removed", "deleted"
	}
	refType := "branch"
	if e.tag {
		refType = "tag"
	}
	var title any
	if c := p.commits[e.to]; c != nil {
		title = c.message
	}
	return map[string]any{
		"id": e.id, "project_id": p.id, "action_name": actionName, "title": nil,
		"target_id": nil, "target_iid": nil, "target_type": nil, "target_title": nil,
		"author_id": 1, "author_username": "gitlabtest", "created_at": e.createdAt.UTC().Format(timeFormat), "imported": false, "imported_from": "none",
		"author": map[string]any{"id": 1, "username": "gitlabtest", "name": "Gitlabtest", "state": "active"},
		"push_data": map[string]any{
			"commit_count": e.commits, "action": action, "ref_type": refType, "ref": e.ref, "ref_count": nil,
			"commit_from": nullable(e.from), "commit_to": nullable(e.to), "commit_title": title,
		},
	}
}

var statusStates = []string{"pending", "running", "success", "failed", "canceled", "skipped"}

// setStatus keeps GitLab's rules: a pending or running status of the same
// name, ref and commit moves to the new state, refusing to "move" to the
// state it has; a finished one is replaced by a new status.
func (s *Server) setStatus(w http.ResponseWriter, r *http.Request, p *project, sha string) {
	params, err := formOrJSON(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	state := params["state"]
	if state == "" {
		writeError(w, http.StatusBadRequest, "state is missing")
		return
	}
	if !slices.Contains(statusStates, state) {
		writeError(w, http.StatusBadRequest, "state does not have a valid value")
		return
	}
	c, ok := p.commits[sha]
	if !ok {
		writeMessage(w, http.StatusNotFound, "404 Commit Not Found")
		return
	}
	name := cmp.Or(params["name"], params["context"], "default")
	ref := params["ref"]
	if ref == "" {
		ref = p.statusRef(c.sha)
	}
	i := slices.IndexFunc(p.statuses, func(st *CommitStatus) bool {
		return st.SHA == c.sha && st.Ref == ref && st.Name == name
	})
	if i >= 0 {
		if old := p.statuses[i]; old.State == state && (state == "pending" || state == "running") {
			event := map[string]string{"pending": "enqueue", "running": "run"}[state]
			writeMessage(w, http.StatusBadRequest, fmt.Sprintf("Cannot transition status via :%s from :%s (Reasons(s): Status cannot transition via \"%s\")", event, state, event))
			return
		}
	}
	s.nextID++
	st := &CommitStatus{ID: s.nextID, SHA: c.sha, Ref: ref, Name: name, State: state,
		Description: params["description"], TargetURL: params["target_url"], CreatedAt: s.cfg.Now()}
	if i >= 0 {
		if old := p.statuses[i]; old.State == "pending" || old.State == "running" {
			st.ID, st.CreatedAt = old.ID, old.CreatedAt
		}
		p.statuses[i] = st
	} else {
		p.statuses = append(p.statuses, st)
	}
	writeJSON(w, http.StatusCreated, statusJSON(st))
}

// statusRef is the ref GitLab gives a status posted without one: that of
// the pipeline the commit's statuses are already in, else a branch whose
// history holds the commit, the default branch first.
func (p *project) statusRef(sha string) string {
	for _, st := range p.statuses {
		if st.SHA == sha {
			return st.Ref
		}
	}
	branches := slices.Sorted(maps.Keys(p.branches))
	if i := slices.Index(branches, p.defaultBranch); i > 0 {
		branches = append([]string{p.defaultBranch}, slices.Delete(branches, i, i+1)...)
	}
	for _, b := range branches {
		if _, ok := p.ancestors(p.branches[b])[sha]; ok {
			return b
		}
	}
	return p.defaultBranch
}

func (s *Server) listStatuses(w http.ResponseWriter, r *http.Request, p *project, sha string) {
	c := p.resolve(sha)
	if c == nil {
		writeMessage(w, http.StatusNotFound, "404 Commit Not Found")
		return
	}
	q := r.URL.Query()
	var list []map[string]any
	for _, st := range p.statuses {
		if st.SHA != c.sha || q.Get("ref") != "" && q.Get("ref") != st.Ref || q.Get("name") != "" && q.Get("name") != st.Name {
			continue
		}
		list = append(list, statusJSON(st))
	}
	writeJSON(w, http.StatusOK, paginate(w, r, list))
}

func statusJSON(st *CommitStatus) map[string]any {
	out := map[string]any{
		"id": st.ID, "sha": st.SHA, "ref": st.Ref, "status": st.State, "name": st.Name,
		"description": nullable(st.Description), "target_url": nullable(st.TargetURL),
		"created_at": st.CreatedAt, "started_at": nil, "finished_at": nil, "allow_failure": false, "coverage": nil,
		"author": map[string]any{"id": 1, "username": "gitlabtest", "name": "Gitlabtest", "state": "active"},
	}
	if st.State != "pending" {
		out["started_at"] = st.CreatedAt
	}
	if st.State != "pending" && st.State != "running" {
		out["finished_at"] = st.CreatedAt
	}
	return out
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// formOrJSON reads a POST's parameters, which GitLab's Grape API takes as
// a JSON object, a form or the query string.
func formOrJSON(r *http.Request) (map[string]string, error) {
	out := map[string]string{}
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct == "application/json" {
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			return nil, fmt.Errorf("body is not a JSON object: %v", err)
		}
		for k, v := range body {
			switch v := v.(type) {
			case string:
				out[k] = v
			case nil:
			default:
				out[k] = fmt.Sprint(v)
			}
		}
	} else if err := r.ParseForm(); err != nil {
		return nil, err
	} else {
		for k := range r.Form {
			out[k] = r.Form.Get(k)
		}
	}
	for k, v := range r.URL.Query() {
		if _, ok := out[k]; !ok {
			out[k] = v[0]
		}
	}
	return out, nil
}

// paginate returns the page of list the request asks for and sets GitLab's
// offset pagination headers.
func paginate[T any](w http.ResponseWriter, r *http.Request, list []T) []T {
	q := r.URL.Query()
	perPage, err := strconv.Atoi(q.Get("per_page"))
	if err != nil || perPage < 1 {
		perPage = 20
	}
	perPage = min(perPage, 100)
	page, err := strconv.Atoi(q.Get("page"))
	if err != nil || page < 1 {
		page = 1
	}
	total := len(list)
	pages := max(1, (total+perPage-1)/perPage)
	h := w.Header()
	h.Set("X-Page", strconv.Itoa(page))
	h.Set("X-Per-Page", strconv.Itoa(perPage))
	h.Set("X-Total", strconv.Itoa(total))
	h.Set("X-Total-Pages", strconv.Itoa(pages))
	h.Set("X-Next-Page", "")
	h.Set("X-Prev-Page", "")
	link := func(n int, rel string) string {
		u := url.URL{Scheme: "http", Host: r.Host, Path: r.URL.Path, RawPath: r.URL.RawPath}
		v := r.URL.Query()
		v.Set("page", strconv.Itoa(n))
		v.Set("per_page", strconv.Itoa(perPage))
		u.RawQuery = v.Encode()
		return fmt.Sprintf("<%s>; rel=%q", u.String(), rel)
	}
	var links []string
	if page > 1 {
		h.Set("X-Prev-Page", strconv.Itoa(min(page-1, pages)))
		links = append(links, link(min(page-1, pages), "prev"))
	}
	if page < pages {
		h.Set("X-Next-Page", strconv.Itoa(page+1))
		links = append(links, link(page+1, "next"))
	}
	links = append(links, link(1, "first"), link(pages, "last"))
	h.Set("Link", strings.Join(links, ", "))
	start := min((page-1)*perPage, total)
	out := list[start:min(start+perPage, total)]
	if out == nil {
		out = []T{}
	}
	return out
}

func webURL(r *http.Request, parts ...string) string {
	return "http://" + r.Host + "/" + strings.Join(parts, "/")
}

func blobID(data string) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00%s", len(data), data)
	return hex.EncodeToString(h.Sum(nil))
}

func treeID(commit, dir string) string {
	h := sha1.Sum([]byte("tree\x00" + commit + "\x00" + dir))
	return hex.EncodeToString(h[:])
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeMessage(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"message": msg})
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}
