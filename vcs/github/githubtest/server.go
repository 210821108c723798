package githubtest

import (
	"cmp"
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cikit/cikit/vcs/gitserve"
	"github.com/cikit/cikit/vcs/internal/gitrepo"
)

// DefaultTokenTTL is how long an installation token lasts, as on GitHub.
const DefaultTokenTTL = time.Hour

// Config configures a Server. The zero value is usable.
type Config struct {
	// Now is the server's clock. Default: time.Now.
	Now func() time.Time
	// TokenTTL is how long the installation tokens it issues last.
	// Default: DefaultTokenTTL.
	TokenTTL time.Duration
	// CapCompareFiles makes comparisons list changed files as GitHub
	// documents it: on the first page only, at most 300 in all. Without
	// it they list 300 a page, on as many pages as it takes.
	CapCompareFiles bool
	// GitDir is where the server keeps a bare git repository of each
	// repository, which it serves over git's smart HTTP protocol at the
	// repository's clone URL (see the package documentation). Empty:
	// the server keeps no git repositories and answers git requests 404.
	GitDir string
}

// Server is a fake GitHub API. It is safe for concurrent use: seed it
// from a test while a provider calls it.
type Server struct {
	now      func() time.Time
	tokenTTL time.Duration
	capFiles bool
	gitDir   string
	git      *gitserve.Handler // nil without gitDir or after gitErr
	gitErr   error             // why git cannot be served
	mux      *http.ServeMux

	mu       sync.Mutex
	repos    map[string]*repo // lower-cased full name
	pats     map[string]bool
	apps     map[int64]*rsa.PublicKey
	installs map[int64]*installation
	tokens   map[string]issuedToken
	issued   []*IssuedToken // every installation token issued, oldest first
	seq      int64          // ids of repositories, installations and pull requests; commit order
	limit    RateLimit
	window   time.Time // start of the current rate window
	inWindow int
	stats    Stats
}

type installation struct {
	app   int64
	repos map[string]bool // lower-cased full names
}

type issuedToken struct {
	installation int64
	expires      time.Time
	// repos narrows the token to some of the installation's
	// repositories (lower-cased full names); nil: all of them.
	repos map[string]bool
	// perms are the token's permissions; nil: the installation's.
	perms map[string]string
	// record is what IssuedTokens reports of the token.
	record *IssuedToken
}

type repo struct {
	id            int64
	owner, name   string
	defaultBranch string
	commits       map[string]*commit
	blobs         map[string][]byte
	branches      map[string]string
	trees         map[string]treeRef // tree sha -> the commit and directory it lists
	tags          map[string]string  // tag name -> commit or tag object sha
	tagObjects    map[string]*tagObject
	pulls         []*pull
	statuses      map[string][]*status // commit sha -> statuses, oldest first
	events        []*Event             // oldest first
	checkRuns     []*checkRun          // oldest first
	git           *gitrepo.Repo        // nil without Config.GitDir
}

func (r *repo) fullName() string { return r.owner + "/" + r.name }

type commit struct {
	sha     string
	seq     int64
	parents []string
	files   map[string]string // path -> blob sha
	trees   map[string]string // directory ("" for the root) -> tree sha
	message string
	time    time.Time
}

type treeRef struct {
	commit *commit
	dir    string
}

type tagObject struct {
	sha, name, message, target string
}

type pull struct {
	number     int
	open       bool
	headRepo   *repo
	headBranch string
	baseBranch string
	created    time.Time
}

type status struct {
	id                                    int64
	state, description, targetURL, contxt string
	created                               time.Time
}

// Status is a commit status as GitHub keeps it.
type Status struct {
	Context     string
	State       string // pending, success, failure or error
	Description string
	TargetURL   string
}

// NewServer returns an empty Server.
func NewServer(cfg Config) *Server {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{
		now:      cfg.Now,
		tokenTTL: cmp.Or(cfg.TokenTTL, DefaultTokenTTL),
		capFiles: cfg.CapCompareFiles,
		gitDir:   cfg.GitDir,
		repos:    map[string]*repo{},
		pats:     map[string]bool{},
		apps:     map[int64]*rsa.PublicKey{},
		installs: map[int64]*installation{},
		tokens:   map[string]issuedToken{},
	}
	s.routes()
	if s.gitDir != "" {
		s.git, s.gitErr = gitserve.New(gitserve.Config{Root: s.gitDir, Authorize: s.authorizeGit, Realm: "GitHub"})
	}
	return s
}

// ErrExists is returned by seeding a repository, pull request or App
// that is there already.
var ErrExists = errors.New("githubtest: already exists")

// ErrNotFound is returned by seeding methods given a repository, branch,
// commit, App or pull request the server does not have.
var ErrNotFound = errors.New("githubtest: not found")

// AddToken accepts token as a personal access token that can see every
// repository.
func (s *Server) AddToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pats[token] = true
}

// AddApp registers GitHub App id, whose JWTs key verifies.
func (s *Server) AddApp(id int64, key *rsa.PublicKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apps[id] = key
}

// Install installs App app on repos and returns the installation's id.
func (s *Server) Install(app int64, repos ...string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.apps[app] == nil {
		return 0, fmt.Errorf("app %d: %w", app, ErrNotFound)
	}
	in := &installation{app: app, repos: map[string]bool{}}
	for _, r := range repos {
		if s.repos[strings.ToLower(r)] == nil {
			return 0, fmt.Errorf("repository %s: %w", r, ErrNotFound)
		}
		in.repos[strings.ToLower(r)] = true
	}
	s.seq++
	s.installs[s.seq] = in
	return s.seq, nil
}

// Uninstall removes installation id: its tokens stop working and its
// repositories no longer have it.
func (s *Server) Uninstall(id int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.installs[id] == nil {
		return fmt.Errorf("installation %d: %w", id, ErrNotFound)
	}
	delete(s.installs, id)
	return nil
}

// CreateRepo creates the empty repository fullName ("owner/name") whose
// default branch is defaultBranch ("main" when empty). Its first Commit
// on any branch creates that branch.
func (s *Server) CreateRepo(fullName, defaultBranch string) error {
	owner, name, ok := strings.Cut(fullName, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return fmt.Errorf("githubtest: repository %q is not owner/name", fullName)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := strings.ToLower(fullName)
	if s.repos[key] != nil {
		return fmt.Errorf("repository %s: %w", fullName, ErrExists)
	}
	r := &repo{
		owner: owner, name: name, defaultBranch: cmp.Or(defaultBranch, "main"),
		commits: map[string]*commit{}, blobs: map[string][]byte{}, branches: map[string]string{}, trees: map[string]treeRef{},
		tags: map[string]string{}, tagObjects: map[string]*tagObject{}, statuses: map[string][]*status{},
	}
	if s.gitErr != nil {
		return fmt.Errorf("githubtest: Config.GitDir: %w", s.gitErr)
	}
	if s.gitDir != "" {
		g, err := gitrepo.Create(filepath.Join(s.gitDir, owner, name))
		if err != nil {
			return fmt.Errorf("githubtest: repository %s: %w", fullName, err)
		}
		r.git = g
	}
	s.seq++
	r.id = s.seq
	s.repos[key] = r
	return nil
}

// Commit adds a commit to branch of repo on top of the branch's head
// (the first commit of a new branch has no parent), writing files and
// removing deleted, and moves the branch to it.
func (s *Server) Commit(repoName, branch string, files map[string]string, deleted ...string) (string, error) {
	return s.commit(repoName, branch, "", files, deleted)
}

// CommitAs is Commit with the commit's SHA given: how a test mirrors a
// commit of a real git repository, so that statuses posted for the git
// commit's SHA find it. The SHA must be 40 hex digits and new to repo.
// Its files are the server's, but its commit object is not: with
// Config.GitDir, git fetches of it fail; ImportGit mirrors a commit with
// its objects.
func (s *Server) CommitAs(repoName, branch, sha string, files map[string]string) error {
	if len(sha) != 40 || strings.Trim(sha, "0123456789abcdef") != "" {
		return fmt.Errorf("githubtest: %q is not a commit SHA", sha)
	}
	_, err := s.commit(repoName, branch, sha, files, nil)
	return err
}

// ImportGit mirrors commit rev (a SHA, branch or tag) of the git
// repository at dir, a test's own, onto branch of repo, like CommitAs
// with the commit's SHA and its files (its whole tree), and, with
// Config.GitDir, copies the commit's objects into the server's git
// repository so that git fetches it. The branch moves to it; the
// server's history of the branch is its parent, whatever the real
// commit's parents are. It returns the SHA.
func (s *Server) ImportGit(repoName, branch, dir, rev string) (string, error) {
	sha, data, err := gitrepo.ReadCommit(dir, rev)
	if err != nil {
		return "", fmt.Errorf("githubtest: %w", err)
	}
	s.mu.Lock()
	r, err := s.repo(repoName)
	s.mu.Unlock()
	if err != nil {
		return "", err
	}
	if r.git != nil {
		if err := r.git.FetchFrom(dir, sha); err != nil {
			return "", fmt.Errorf("githubtest: repository %s: %w", repoName, err)
		}
	}
	files := make(map[string]string, len(data))
	for p, b := range data {
		files[p] = string(b)
	}
	return s.commitTree(repoName, branch, sha, files, nil, true)
}

func (s *Server) commit(repoName, branch, sha string, files map[string]string, deleted []string) (string, error) {
	return s.commitTree(repoName, branch, sha, files, deleted, false)
}

// commitTree commits files on branch: on top of the files of its head,
// or, with whole, as all the commit's files.
func (s *Server) commitTree(repoName, branch, sha string, files map[string]string, deleted []string, whole bool) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.repo(repoName)
	if err != nil {
		return "", err
	}
	tree := map[string]string{}
	var parents []string
	if head, ok := r.branches[branch]; ok {
		parents = []string{head}
		if !whole {
			for p, b := range r.commits[head].files {
				tree[p] = b
			}
		}
	}
	for _, p := range deleted {
		delete(tree, p)
	}
	objs := make([]gitrepo.Object, 0, len(files)+2)
	for p, data := range files {
		o := gitrepo.Blob([]byte(data))
		b := o.SHA()
		r.blobs[b] = []byte(data)
		tree[p] = b
		objs = append(objs, o)
	}
	dirs, trees, err := gitrepo.Trees(tree)
	if err != nil {
		return "", fmt.Errorf("githubtest: commit on %s of %s: %w", branch, repoName, err)
	}
	objs = append(objs, trees...)
	seq := s.seq + 1
	c := &commit{seq: seq, parents: parents, files: tree, trees: dirs,
		message: fmt.Sprintf("commit %d", seq), time: s.now().UTC().Truncate(time.Second)}
	// The message's sequence number keeps two commits of one tree and
	// parent made in one second apart.
	obj := gitrepo.Commit(dirs[""], parents, c.message, ident, c.time)
	if sha == "" {
		sha = obj.SHA()
		objs = append(objs, obj)
	} else if r.commits[sha] != nil {
		return "", fmt.Errorf("githubtest: commit %s exists in %s", sha, repoName)
	}
	c.sha = sha
	if err := r.writeGit(objs...); err != nil {
		return "", err
	}
	s.seq = seq
	r.commits[c.sha] = c
	s.moveRef(r, "refs/heads/"+branch, r.branches[branch], c.sha, []*commit{c})
	r.branches[branch] = c.sha
	for d, t := range dirs {
		r.trees[t] = treeRef{c, d}
	}
	return c.sha, r.syncRefs()
}

// ident is the author, committer and tagger of what the server makes.
var ident = gitrepo.Ident{Name: "githubtest", Email: "githubtest@example.com"}

// writeGit stores objs in r's git repository, if it has one.
func (r *repo) writeGit(objs ...gitrepo.Object) error {
	if r.git == nil {
		return nil
	}
	if err := r.git.Write(objs...); err != nil {
		return fmt.Errorf("githubtest: repository %s: %w", r.fullName(), err)
	}
	return nil
}

// syncRefs makes the refs of r's git repository, if it has one, its
// branches and tags.
func (r *repo) syncRefs() error {
	if r.git == nil {
		return nil
	}
	refs := make(map[string]string, len(r.branches)+len(r.tags))
	for b, sha := range r.branches {
		refs["refs/heads/"+b] = sha
	}
	for t, sha := range r.tags {
		refs["refs/tags/"+t] = sha
	}
	if err := r.git.SetRefs(r.defaultBranch, refs); err != nil {
		return fmt.Errorf("githubtest: repository %s: %w", r.fullName(), err)
	}
	return nil
}

// Branch points branch of repo at commit sha, creating or moving it.
func (s *Server) Branch(repoName, branch, sha string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.repo(repoName)
	if err != nil {
		return err
	}
	if r.commits[sha] == nil {
		return fmt.Errorf("commit %s of %s: %w", sha, repoName, ErrNotFound)
	}
	old := r.branches[branch]
	s.moveRef(r, "refs/heads/"+branch, old, sha, r.newCommits(old, sha))
	r.branches[branch] = sha
	return r.syncRefs()
}

// Tag points the lightweight tag of repo at commit sha.
func (s *Server) Tag(repoName, tag, sha string) error {
	return s.tag(repoName, tag, sha, "")
}

// AnnotatedTag creates an annotated tag of repo: a tag object with
// message that points at commit sha, which the tag ref points at.
func (s *Server) AnnotatedTag(repoName, tag, sha, message string) error {
	return s.tag(repoName, tag, sha, cmp.Or(message, tag))
}

func (s *Server) tag(repoName, tag, sha, message string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.repo(repoName)
	if err != nil {
		return err
	}
	if r.commits[sha] == nil {
		return fmt.Errorf("commit %s of %s: %w", sha, repoName, ErrNotFound)
	}
	target := sha
	if message != "" {
		obj := gitrepo.Tag(sha, tag, message, ident, s.now().UTC())
		if err := r.writeGit(obj); err != nil {
			return err
		}
		o := &tagObject{sha: obj.SHA(), name: tag, message: message, target: sha}
		r.tagObjects[o.sha] = o
		target = o.sha
	}
	old := r.tags[tag]
	s.moveRef(r, "refs/tags/"+tag, old, target, r.newCommits(r.peel(old), sha))
	r.tags[tag] = target
	return r.syncRefs()
}

// OpenPullRequest opens a pull request of repo that merges headBranch of
// headRepo (repo itself, or a fork) into baseBranch, and returns its
// number.
func (s *Server) OpenPullRequest(repoName, headRepo, headBranch, baseBranch string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.repo(repoName)
	if err != nil {
		return 0, err
	}
	h, err := s.repo(headRepo)
	if err != nil {
		return 0, err
	}
	if _, ok := h.branches[headBranch]; !ok {
		return 0, fmt.Errorf("branch %s of %s: %w", headBranch, headRepo, ErrNotFound)
	}
	if _, ok := r.branches[baseBranch]; !ok {
		return 0, fmt.Errorf("branch %s of %s: %w", baseBranch, repoName, ErrNotFound)
	}
	// Pull requests and issues share their numbers on GitHub; here
	// there are no issues, so numbers count the repository's pulls.
	p := &pull{number: len(r.pulls) + 1, open: true, headRepo: h, headBranch: headBranch,
		baseBranch: baseBranch, created: s.now().UTC()}
	r.pulls = append(r.pulls, p)
	return p.number, nil
}

// ClosePullRequest closes pull request number of repo.
func (s *Server) ClosePullRequest(repoName string, number int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.repo(repoName)
	if err != nil {
		return err
	}
	if number < 1 || number > len(r.pulls) {
		return fmt.Errorf("pull request %d of %s: %w", number, repoName, ErrNotFound)
	}
	r.pulls[number-1].open = false
	return nil
}

// Statuses returns the latest status of each context on commit sha of
// repo, sorted by context.
func (s *Server) Statuses(repoName, sha string) ([]Status, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.repo(repoName)
	if err != nil {
		return nil, err
	}
	latest := map[string]Status{}
	for _, st := range r.statuses[sha] {
		latest[st.contxt] = Status{Context: st.contxt, State: st.state, Description: st.description, TargetURL: st.targetURL}
	}
	return slices.SortedFunc(maps.Values(latest), func(a, b Status) int { return strings.Compare(a.Context, b.Context) }), nil
}

// RateLimit makes the server refuse requests beyond Requests in each
// Window, as GitHub does when a client goes too fast.
type RateLimit struct {
	// Requests is how many requests a window admits; 0 turns limiting
	// off.
	Requests int
	// Window is how long a window lasts; it starts with its first
	// request. Default: one minute.
	Window time.Duration
	// Kind is the answer to a refused request.
	Kind LimitKind
}

// LimitKind is how the server refuses a request over its rate limit.
type LimitKind int

const (
	// Secondary answers 403 with Retry-After (seconds until the window
	// ends) and a body naming the secondary rate limit, like GitHub's
	// secondary limits.
	Secondary LimitKind = iota
	// Primary answers 403 with X-RateLimit-Remaining: 0 and
	// X-RateLimit-Reset (the window's end, Unix seconds), like GitHub's
	// hourly limit.
	Primary
	// TooMany answers 429 with Retry-After.
	TooMany
)

// SetRateLimit replaces the rate limit, starting a new window.
func (s *Server) SetRateLimit(l RateLimit) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.Window == 0 {
		l.Window = time.Minute
	}
	s.limit, s.window, s.inWindow = l, time.Time{}, 0
}

// Stats counts what the server saw.
type Stats struct {
	// Requests counts every request, refused ones included.
	Requests int
	// Limited counts the requests refused for the rate limit.
	Limited int
	// TokensIssued counts installation tokens issued; TokensRevoked
	// those revoked (DELETE /installation/token).
	TokensIssued, TokensRevoked int
	// GitRequests counts git's smart HTTP requests that reached
	// authorization; GitRefused those it refused (no or a bad
	// credential, no access). Pushes are refused after it.
	GitRequests, GitRefused int
	// InstallationLookups counts answers to GET .../installation.
	InstallationLookups int
	// StatusesCreated counts commit statuses created.
	StatusesCreated int
	// CheckRunsCreated and CheckRunsUpdated count check runs created
	// and updated.
	CheckRunsCreated, CheckRunsUpdated int
}

// IssuedToken is what the server recorded of an installation token it
// issued: what it was narrowed to and whether it was revoked. It holds
// no token value.
type IssuedToken struct {
	// Installation is the installation the token is of.
	Installation int64
	// Repositories are the full names of the repositories the token was
	// narrowed to, sorted; nil for a token of all the installation's.
	Repositories []string
	// Permissions are the token's permissions (metadata: read among
	// them); nil for a token with the installation's.
	Permissions map[string]string
	// Revoked says whether DELETE /installation/token ended the token.
	Revoked bool
}

// IssuedTokens returns what the server recorded of the installation
// tokens it issued, oldest first.
func (s *Server) IssuedTokens() []IssuedToken {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]IssuedToken, len(s.issued))
	for i, t := range s.issued {
		out[i] = *t
		out[i].Repositories = slices.Clone(t.Repositories)
		out[i].Permissions = maps.Clone(t.Permissions)
	}
	return out
}

// Stats returns the counts so far.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

func (s *Server) repo(fullName string) (*repo, error) {
	r := s.repos[strings.ToLower(fullName)]
	if r == nil {
		return nil, fmt.Errorf("repository %s: %w", fullName, ErrNotFound)
	}
	return r, nil
}

// resolve returns the commit ref names in r: a branch, a tag (peeled),
// or a commit's full or abbreviated (7+ hex digits) SHA.
func (r *repo) resolve(ref string) *commit {
	if sha, ok := r.branches[ref]; ok {
		return r.commits[sha]
	}
	if sha, ok := r.tags[ref]; ok {
		return r.commits[r.peel(sha)]
	}
	if c := r.commits[ref]; c != nil {
		return c
	}
	if len(ref) >= 7 {
		var found *commit
		for sha, c := range r.commits {
			if strings.HasPrefix(sha, ref) {
				if found != nil {
					return nil
				}
				found = c
			}
		}
		return found
	}
	return nil
}

func (r *repo) peel(sha string) string {
	for {
		o := r.tagObjects[sha]
		if o == nil {
			return sha
		}
		sha = o.target
	}
}

// mergeBase returns the common ancestor of a and b made last, which with
// the linear and branching histories this server builds is git's merge
// base.
func (r *repo) mergeBase(a, b *commit) *commit {
	inA := r.ancestors(a)
	var best *commit
	for sha := range r.ancestors(b) {
		if inA[sha] && (best == nil || r.commits[sha].seq > best.seq) {
			best = r.commits[sha]
		}
	}
	return best
}

func (r *repo) ancestors(c *commit) map[string]bool {
	seen := map[string]bool{}
	stack := []string{c.sha}
	for len(stack) > 0 {
		sha := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[sha] {
			continue
		}
		seen[sha] = true
		stack = append(stack, r.commits[sha].parents...)
	}
	return seen
}

// treeHash is the SHA of the tree of directory dir ("" for the root) of
// commit c.
func treeHash(c *commit, dir string) string { return c.trees[dir] }

func newToken() string {
	b := make([]byte, 18)
	rand.Read(b) // crypto/rand.Read never fails
	return "ghs_" + hex.EncodeToString(b)
}
