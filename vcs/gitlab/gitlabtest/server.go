package gitlabtest

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cikit/cikit/vcs/gitserve"
	"github.com/cikit/cikit/vcs/internal/gitrepo"
)

// DefaultToken is the access token a Server accepts when Config.Token is
// empty.
const DefaultToken = "glpat-gitlabtest"

// DefaultRateWindow is the window Config.RateLimit counts requests in when
// Config.RateWindow is zero: GitLab's throttles count per minute.
const DefaultRateWindow = time.Minute

// Config configures a Server. The zero value accepts DefaultToken and does
// not limit the rate.
type Config struct {
	// Token is the access token requests must carry.
	Token string
	// RateLimit is how many requests the server answers in a window; the
	// rest get 429 until the window ends. Zero means no limit.
	RateLimit int
	// RateWindow is the length of a rate limit window; a window starts
	// with the first request after the previous one ended.
	RateWindow time.Duration
	// Now is the server's clock, for rate limit windows, timestamps and
	// the expiry of deploy tokens; time.Now when nil.
	Now func() time.Time
	// GitDir is where the server keeps a bare git repository of each
	// project, which it serves over git's smart HTTP protocol at the
	// project's http_url_to_repo (see the package documentation).
	// Empty: the server keeps no git repositories and answers git
	// requests 404.
	GitDir string
}

// Server is an in-process GitLab. Create it with New and serve it with
// httptest.NewServer.
type Server struct {
	cfg Config

	mu          sync.Mutex
	projects    map[string]*project // by path_with_namespace
	byID        map[int]*project
	nextID      int // projects, merge requests, statuses and events share a sequence, as IDs need only be unique
	commitCount int
	requests    int
	windowStart time.Time
	windowCount int
	git         GitStats
	gitHandler  *gitserve.Handler // nil without Config.GitDir or after gitErr
	gitErr      error             // why git cannot be served
}

// GitStats counts the git requests a Server saw.
type GitStats struct {
	// Requests counts git's smart HTTP requests that reached
	// authorization; Refused those it refused (no or a bad credential,
	// no access). Pushes are refused after it.
	Requests, Refused int
	// DeployTokensCreated and DeployTokensDeleted count the deploy
	// tokens made and deleted through the API.
	DeployTokensCreated, DeployTokensDeleted int
}

// GitStats returns the counts so far.
func (s *Server) GitStats() GitStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.git
}

// CommitStatus is a commit status as the server keeps it.
type CommitStatus struct {
	ID          int
	SHA         string
	Ref         string
	Name        string
	State       string // pending, running, success, failed, canceled or skipped
	Description string
	TargetURL   string
	CreatedAt   time.Time
}

type project struct {
	id            int
	path          string
	defaultBranch string
	forkedFrom    *project
	createdAt     time.Time
	commits       map[string]*commit // immutable once made; forks share them
	branches      map[string]string
	tags          map[string]string
	mergeRequests []*mergeRequest   // by iid
	statuses      []*CommitStatus   // latest per name, ref and sha
	events        []*pushEvent      // oldest first
	annotated     map[string]string // tag -> its tag object, for the git refs
	deployTokens  []*deployToken
	repo          *gitrepo.Repo // nil without Config.GitDir
}

// deployToken is a project deploy token, as GitLab keeps it.
type deployToken struct {
	id             int
	name, username string
	token          string
	scopes         []string
	expires        time.Time // zero: never
	revoked        bool
}

// pushEvent is a push to one ref, as GitLab records it in a project's
// events: from is "" for a new ref and to is "" for a removed one.
type pushEvent struct {
	id        int
	createdAt time.Time
	ref       string
	tag       bool
	from, to  string
	commits   int
}

type commit struct {
	sha       string
	parents   []string
	files     map[string]string
	message   string
	createdAt time.Time
}

type mergeRequest struct {
	id, iid      int
	title        string
	source       *project
	sourceBranch string
	targetBranch string
	state        string // opened, closed or merged
	createdAt    time.Time
	updatedAt    time.Time
}

// New returns a Server with no projects.
func New(cfg Config) *Server {
	if cfg.Token == "" {
		cfg.Token = DefaultToken
	}
	if cfg.RateWindow <= 0 {
		cfg.RateWindow = DefaultRateWindow
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{cfg: cfg, projects: map[string]*project{}, byID: map[int]*project{}}
	if cfg.GitDir != "" {
		s.gitHandler, s.gitErr = gitserve.New(gitserve.Config{Root: cfg.GitDir, Authorize: s.authorizeGit, Realm: "GitLab"})
	}
	return s
}

// Token returns the access token the server accepts.
func (s *Server) Token() string { return s.cfg.Token }

// Requests returns how many requests the server has received, answered
// or refused.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// CreateProject creates an empty project at path ("group/sub/project")
// whose default branch will be defaultBranch, and returns its ID.
func (s *Server) CreateProject(path, defaultBranch string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if path == "" || strings.HasPrefix(path, "/") || strings.HasSuffix(path, "/") || !strings.Contains(path, "/") {
		return 0, fmt.Errorf("gitlabtest: project path %q is not namespace/project", path)
	}
	if defaultBranch == "" {
		return 0, errors.New("gitlabtest: a project needs a default branch")
	}
	if _, ok := s.projects[path]; ok {
		return 0, fmt.Errorf("gitlabtest: project %s exists", path)
	}
	p := &project{path: path, defaultBranch: defaultBranch, createdAt: s.cfg.Now(),
		commits: map[string]*commit{}, branches: map[string]string{}, tags: map[string]string{}, annotated: map[string]string{}}
	if s.gitErr != nil {
		return 0, fmt.Errorf("gitlabtest: Config.GitDir: %w", s.gitErr)
	}
	if s.cfg.GitDir != "" {
		repo, err := gitrepo.Create(filepath.Join(s.cfg.GitDir, filepath.FromSlash(path)))
		if err != nil {
			return 0, fmt.Errorf("gitlabtest: project %s: %w", path, err)
		}
		p.repo = repo
	}
	s.nextID++
	p.id = s.nextID
	s.projects[path] = p
	s.byID[p.id] = p
	return p.id, nil
}

// ForkProject forks project source to path, with its commits, branches and
// tags as they are now, and returns the fork's ID.
func (s *Server) ForkProject(source, path string) (int, error) {
	s.mu.Lock()
	src, err := s.project(source)
	var branch string
	if err == nil {
		branch = src.defaultBranch
	}
	s.mu.Unlock()
	if err != nil {
		return 0, err
	}
	id, err := s.CreateProject(path, branch)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fork := s.byID[id]
	fork.forkedFrom = src
	maps.Copy(fork.commits, src.commits)
	maps.Copy(fork.branches, src.branches)
	maps.Copy(fork.tags, src.tags)
	maps.Copy(fork.annotated, src.annotated)
	if fork.repo != nil {
		// The fork's git repository borrows the source's objects, as
		// GitLab's object pools do.
		if err := fork.repo.Borrow(src.repo); err != nil {
			return 0, fmt.Errorf("gitlabtest: fork %s: %w", path, err)
		}
		if err := fork.syncRefs(); err != nil {
			return 0, err
		}
	}
	return id, nil
}

// ForkRelation records that project fork is a fork of project source, as
// GitLab's POST /projects/:id/fork/:forked_from_id does for projects that
// already exist; their histories stay as they are.
func (s *Server) ForkRelation(fork, source string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := s.project(fork)
	if err != nil {
		return err
	}
	src, err := s.project(source)
	if err != nil {
		return err
	}
	if f == src {
		return fmt.Errorf("gitlabtest: %s cannot be a fork of itself", fork)
	}
	if f.forkedFrom != nil && f.forkedFrom != src {
		return fmt.Errorf("gitlabtest: %s is already a fork of %s", fork, f.forkedFrom.path)
	}
	f.forkedFrom = src
	return nil
}

// Commit makes a commit on branch of project that writes files and
// deletes the paths in deleted, and returns its SHA. Its parent is the
// branch's head; a new branch starts from the default branch's head, or
// with a root commit when the project has no commits yet.
func (s *Server) Commit(projectPath, branch string, files map[string]string, deleted ...string) (string, error) {
	return s.commit(projectPath, branch, "", files, deleted)
}

// ImportGit mirrors commit rev (a SHA, branch or tag) of the git
// repository at dir, a test's own, onto branch of project: a commit with
// that SHA and its files (its whole tree) whose parent is the branch's
// head, as Commit makes it, whatever the real commit's parents are; with
// Config.GitDir its objects are copied into the project's git repository
// so that git fetches it. It returns the SHA.
func (s *Server) ImportGit(projectPath, branch, dir, rev string) (string, error) {
	sha, data, err := gitrepo.ReadCommit(dir, rev)
	if err != nil {
		return "", fmt.Errorf("gitlabtest: %w", err)
	}
	s.mu.Lock()
	p, err := s.project(projectPath)
	s.mu.Unlock()
	if err != nil {
		return "", err
	}
	if p.repo != nil {
		if err := p.repo.FetchFrom(dir, sha); err != nil {
			return "", fmt.Errorf("gitlabtest: project %s: %w", projectPath, err)
		}
	}
	files := make(map[string]string, len(data))
	for path, b := range data {
		files[path] = string(b)
	}
	return s.commit(projectPath, branch, sha, files, nil)
}

// commit makes a commit on branch; with sha set, one of that SHA (an
// imported commit) whose files are all of files.
func (s *Server) commit(projectPath, branch, sha string, files map[string]string, deleted []string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.project(projectPath)
	if err != nil {
		return "", err
	}
	if branch == "" {
		return "", errors.New("gitlabtest: a commit needs a branch")
	}
	head, ok := p.branches[branch]
	if !ok {
		head = p.branches[p.defaultBranch]
	}
	tree := map[string]string{}
	var parents []string
	if head != "" {
		if sha == "" {
			tree = maps.Clone(p.commits[head].files)
		}
		parents = []string{head}
	}
	for path, data := range files {
		if path == "" || strings.HasPrefix(path, "/") || strings.HasSuffix(path, "/") {
			return "", fmt.Errorf("gitlabtest: file path %q is not a repository path", path)
		}
		tree[path] = data
	}
	for _, path := range deleted {
		if _, ok := tree[path]; !ok {
			return "", fmt.Errorf("gitlabtest: %s does not exist on %s of %s", path, branch, projectPath)
		}
		delete(tree, path)
	}
	blobs := make(map[string]string, len(tree))
	objs := make([]gitrepo.Object, 0, len(files)+2)
	for path, data := range tree {
		o := gitrepo.Blob([]byte(data))
		blobs[path] = o.SHA()
		if _, ok := files[path]; ok {
			objs = append(objs, o)
		}
	}
	dirs, trees, err := gitrepo.Trees(blobs)
	if err != nil {
		return "", fmt.Errorf("gitlabtest: commit on %s of %s: %w", branch, projectPath, err)
	}
	// The message's number keeps two commits of one tree and parent
	// made in one second apart.
	c := &commit{parents: parents, files: tree, createdAt: s.cfg.Now(),
		message: fmt.Sprintf("Commit %d on %s", s.commitCount+1, branch)}
	c.sha = sha
	if sha == "" {
		obj := gitrepo.Commit(dirs[""], parents, c.message, ident, c.createdAt)
		c.sha = obj.SHA()
		objs = append(objs, obj)
	} else if _, ok := p.commits[sha]; ok {
		return "", fmt.Errorf("gitlabtest: commit %s exists in %s", sha, projectPath)
	}
	if err := p.writeGit(append(objs, trees...)...); err != nil {
		return "", err
	}
	s.commitCount++
	p.commits[c.sha] = c
	s.push(p, branch, false, c.sha)
	return c.sha, p.syncRefs()
}

// ident is the author, committer and tagger of what the server makes.
var ident = gitrepo.Ident{Name: "gitlabtest", Email: "gitlabtest@example.com"}

// writeGit stores objs in p's git repository, if it has one.
func (p *project) writeGit(objs ...gitrepo.Object) error {
	if p.repo == nil {
		return nil
	}
	if err := p.repo.Write(objs...); err != nil {
		return fmt.Errorf("gitlabtest: project %s: %w", p.path, err)
	}
	return nil
}

// syncRefs makes the refs of p's git repository, if it has one, its
// branches and tags.
func (p *project) syncRefs() error {
	if p.repo == nil {
		return nil
	}
	refs := make(map[string]string, len(p.branches)+len(p.tags))
	for b, sha := range p.branches {
		refs["refs/heads/"+b] = sha
	}
	for t, sha := range p.tags {
		refs["refs/tags/"+t] = cmp.Or(p.annotated[t], sha)
	}
	if err := p.repo.SetRefs(p.defaultBranch, refs); err != nil {
		return fmt.Errorf("gitlabtest: project %s: %w", p.path, err)
	}
	return nil
}

// Branch points branch of project at commit sha, creating it if needed.
func (s *Server) Branch(projectPath, branch, sha string) error {
	return s.setRef(projectPath, branch, sha, false)
}

// Tag points tag of project at commit sha, creating it if needed.
func (s *Server) Tag(projectPath, tag, sha string) error {
	return s.setRef(projectPath, tag, sha, true)
}

// AnnotatedTag points tag of project at commit sha through a tag object,
// whose SHA it returns: GitLab's push event names the tag object
// (commit_to), the tag's API its commit.
func (s *Server) AnnotatedTag(projectPath, tag, sha string) (string, error) {
	if err := s.setRef(projectPath, tag, sha, true); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.project(projectPath)
	if err != nil {
		return "", err
	}
	obj := gitrepo.Tag(sha, tag, tag, ident, s.cfg.Now())
	if err := p.writeGit(obj); err != nil {
		return "", err
	}
	object := obj.SHA()
	p.annotated[tag] = object
	p.events[len(p.events)-1].to = object
	return object, p.syncRefs()
}

func (s *Server) setRef(projectPath, name, sha string, tag bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.project(projectPath)
	if err != nil {
		return err
	}
	if name == "" {
		return errors.New("gitlabtest: a ref needs a name")
	}
	if _, ok := p.commits[sha]; !ok {
		return fmt.Errorf("gitlabtest: commit %s is not in %s", sha, projectPath)
	}
	s.push(p, name, tag, sha)
	return p.syncRefs()
}

// DeleteBranch deletes branch of project, which must not be the default
// branch, as GitLab refuses that.
func (s *Server) DeleteBranch(projectPath, branch string) error {
	return s.deleteRef(projectPath, branch, false)
}

// DeleteTag deletes tag of project.
func (s *Server) DeleteTag(projectPath, tag string) error {
	return s.deleteRef(projectPath, tag, true)
}

func (s *Server) deleteRef(projectPath, name string, tag bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.project(projectPath)
	if err != nil {
		return err
	}
	refs, kind := p.branches, "branch"
	if tag {
		refs, kind = p.tags, "tag"
	}
	if _, ok := refs[name]; !ok {
		return fmt.Errorf("gitlabtest: %s %s is not in %s", kind, name, projectPath)
	}
	if !tag && name == p.defaultBranch {
		return fmt.Errorf("gitlabtest: %s is the default branch of %s", name, projectPath)
	}
	s.push(p, name, tag, "")
	return p.syncRefs()
}

// push points a branch or tag of p at sha, or deletes it when sha is "",
// and records the push event, unless the ref already points there.
func (s *Server) push(p *project, ref string, tag bool, sha string) {
	refs := p.branches
	if tag {
		refs = p.tags
	}
	old := refs[ref]
	if old == sha {
		return
	}
	if tag {
		delete(p.annotated, ref) // a tag set again is lightweight
	}
	if sha == "" {
		delete(refs, ref)
	} else {
		refs[ref] = sha
	}
	commits := 0
	if !tag && sha != "" {
		// GitLab counts the commits the push brings to the ref; a new
		// branch brings those the default branch has not.
		since := old
		if since == "" && ref != p.defaultBranch {
			since = p.branches[p.defaultBranch]
		}
		var known map[string]int
		if since != "" {
			known = p.ancestors(since)
		}
		for c := range p.ancestors(sha) {
			if _, ok := known[c]; !ok {
				commits++
			}
		}
	}
	s.nextID++
	p.events = append(p.events, &pushEvent{id: s.nextID, createdAt: s.cfg.Now(), ref: ref, tag: tag,
		from: old, to: sha, commits: commits})
}

// OpenMergeRequest opens a merge request into targetBranch of project from
// sourceBranch of sourceProject (project itself or a fork of it) and
// returns its IID.
func (s *Server) OpenMergeRequest(projectPath, sourceProject, sourceBranch, targetBranch string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	target, err := s.project(projectPath)
	if err != nil {
		return 0, err
	}
	source, err := s.project(sourceProject)
	if err != nil {
		return 0, err
	}
	if source != target && source.forkedFrom != target {
		return 0, fmt.Errorf("gitlabtest: %s is not %s or a fork of it", sourceProject, projectPath)
	}
	if _, ok := source.branches[sourceBranch]; !ok {
		return 0, fmt.Errorf("gitlabtest: branch %s is not in %s", sourceBranch, sourceProject)
	}
	if _, ok := target.branches[targetBranch]; !ok {
		return 0, fmt.Errorf("gitlabtest: branch %s is not in %s", targetBranch, projectPath)
	}
	s.nextID++
	now := s.cfg.Now()
	mr := &mergeRequest{id: s.nextID, iid: len(target.mergeRequests) + 1, source: source,
		sourceBranch: sourceBranch, targetBranch: targetBranch, state: "opened", createdAt: now, updatedAt: now,
		title: fmt.Sprintf("Merge %s into %s", sourceBranch, targetBranch)}
	target.mergeRequests = append(target.mergeRequests, mr)
	return mr.iid, nil
}

// CloseMergeRequest closes merge request iid of project.
func (s *Server) CloseMergeRequest(projectPath string, iid int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.project(projectPath)
	if err != nil {
		return err
	}
	if iid < 1 || iid > len(p.mergeRequests) {
		return fmt.Errorf("gitlabtest: merge request !%d is not in %s", iid, projectPath)
	}
	mr := p.mergeRequests[iid-1]
	mr.state, mr.updatedAt = "closed", s.cfg.Now()
	return nil
}

// Statuses returns the latest status of each name on commit sha of
// project, sorted by name and then ref.
func (s *Server) Statuses(projectPath, sha string) ([]CommitStatus, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.project(projectPath)
	if err != nil {
		return nil, err
	}
	var out []CommitStatus
	for _, st := range p.statuses {
		if st.SHA == sha {
			out = append(out, *st)
		}
	}
	slices.SortFunc(out, func(a, b CommitStatus) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.Ref, b.Ref))
	})
	return out, nil
}

func (s *Server) project(path string) (*project, error) {
	p, ok := s.projects[path]
	if !ok {
		return nil, fmt.Errorf("gitlabtest: project %s does not exist", path)
	}
	return p, nil
}

// resolve returns the commit a branch, tag or SHA names in p; GitLab
// tries them in that order.
func (p *project) resolve(ref string) *commit {
	if sha, ok := p.branches[ref]; ok {
		return p.commits[sha]
	}
	if sha, ok := p.tags[ref]; ok {
		return p.commits[sha]
	}
	return p.commits[ref]
}

// ancestors returns the commits reachable from sha, with their distance.
func (p *project) ancestors(sha string) map[string]int {
	dist := map[string]int{sha: 0}
	queue := []string{sha}
	for len(queue) > 0 {
		c := p.commits[queue[0]]
		queue = queue[1:]
		for _, parent := range c.parents {
			if _, seen := dist[parent]; !seen {
				dist[parent] = dist[c.sha] + 1
				queue = append(queue, parent)
			}
		}
	}
	return dist
}

// mergeBase returns the common ancestor of a and b nearest to b, or ""
// when they share no history.
func (p *project) mergeBase(a, b string) string {
	fromA := p.ancestors(a)
	best, bestDist := "", -1
	for sha, d := range p.ancestors(b) {
		if _, ok := fromA[sha]; ok && (bestDist < 0 || d < bestDist || d == bestDist && sha < best) {
			best, bestDist = sha, d
		}
	}
	return best
}
