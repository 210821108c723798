// Package vcs is the platform's seam to version control: reading a
// repository's files at a commit (the pipeline as it was at that commit),
// asking about refs, changes and pull requests, and posting the statuses
// of runs and jobs on commits — the platform's output reduced to its
// essence, the green check.
//
// Provider is the interface; Memory is an in-process implementation for
// tests and the embedded platform, and Cached keeps a provider's answers
// about files at commits. Providers that can list recent pushes
// (PushLister) let ingest's Reconciler build the pushes whose webhook never
// came; those that can list every file of a commit (FileLister, through
// ListFiles) let GitLab's rules:exists globs be decided. The
// implementations: vcs/github, vcs/gitlab and vcs/local (git
// repositories on this machine); vcs/vcstest is the conformance suite
// they pass; vcs/status delivers statuses without making the scheduler
// wait.
package vcs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
)

// ErrNotFound is matched by the errors of a file, directory, repository or
// commit that does not exist. It is fs.ErrNotExist, so a compiler's file
// source can tell "no pipeline here" from a failure.
var ErrNotFound = fs.ErrNotExist

// Provider is the platform's view of one version control system: it
// reads repositories at commits, asks about pull (merge) requests, and
// posts the statuses of runs and jobs on commits. Repositories are named
// "org/repo" ("acme/platform/api" for nested groups); paths are
// slash-separated and relative to the repository's root. What does not
// exist is an error matching ErrNotFound. Implementations are safe for
// concurrent use; package vcs/vcstest is the conformance suite they pass.
type Provider interface {
	// ReadFile returns a file of repo at commit sha.
	ReadFile(ctx context.Context, repo, sha, path string) ([]byte, error)
	// ReadDir returns the names of the files directly in dir of repo at
	// commit sha, sorted ("" is the root). Subdirectories are not listed.
	ReadDir(ctx context.Context, repo, sha, dir string) ([]string, error)
	// ResolveRef returns the commit a branch or tag of repo points at.
	ResolveRef(ctx context.Context, repo, ref string) (sha string, err error)
	// DefaultBranch returns the name of repo's default branch.
	DefaultBranch(ctx context.Context, repo string) (string, error)
	// ChangedFiles returns the paths of the files that head changes
	// since its merge base with base (a "three-dot" comparison, what a
	// pull request shows), sorted, each once; a rename lists both paths.
	// Base and head are commit SHAs or branch names.
	ChangedFiles(ctx context.Context, repo, base, head string) ([]string, error)
	// OpenPullRequest returns the number of an open pull (or merge)
	// request of repo whose head is branch; ok is false when there is
	// none.
	OpenPullRequest(ctx context.Context, repo, branch string) (number int, ok bool, err error)
	// PullRequest returns pull (or merge) request number of repo.
	PullRequest(ctx context.Context, repo string, number int) (*PullRequest, error)
	// SetStatus posts the status of a run or job on commit sha of repo,
	// replacing the one posted before under the same Context.
	SetStatus(ctx context.Context, repo, sha string, st *Status) error
}

// PushLister is a Provider that can list a repository's recent pushes:
// what a reconciliation compares with the webhook deliveries received, to
// build the pushes whose delivery never came.
type PushLister interface {
	// Pushes returns the pushes to branches and tags of repo since the
	// given time, oldest first.
	Pushes(ctx context.Context, repo string, since time.Time) ([]Push, error)
}

// Push is one push to a branch or tag.
type Push struct {
	// Branch or Tag is what was pushed.
	Branch, Tag string
	// Before is the ref's previous commit (all zeros for a new ref) and
	// SHA its new one.
	Before, SHA string
	// At is when the forge recorded the push; Actor who pushed.
	At    time.Time
	Actor string
}

// PullRequest is a pull request (GitHub) or merge request (GitLab).
type PullRequest struct {
	Number int
	// Open is false once it was merged or closed.
	Open bool
	// HeadRepo is the repository its head branch lives in; Fork says it
	// is not the pull request's own repository. A fork's pull request
	// runs code from outside: it gets no secrets.
	HeadRepo   string
	HeadBranch string
	HeadSHA    string
	BaseBranch string
	Fork       bool
}

// State is what a status says of a run or job.
type State string

// The states of a Status. Providers map them onto their own: GitHub's
// commit statuses know only pending, success, failure and error, so
// running is pending there and skipped is success.
const (
	StatePending   State = "pending"
	StateRunning   State = "running"
	StateSuccess   State = "success"
	StateFailure   State = "failure"
	StateCancelled State = "cancelled"
	StateSkipped   State = "skipped"
)

// Status is the state of a run or job, posted on a commit.
type Status struct {
	// Context names what the status is about, such as "cikit" for a run
	// or "cikit/build" for its job build: one status per Context and
	// commit, the latest.
	Context string
	State   State
	// Description says it in a line (GitHub keeps 140 characters).
	Description string
	// TargetURL links to the run or job on the platform.
	TargetURL string
}

// Validate reports what is wrong with st, if anything.
func (st *Status) Validate() error {
	switch {
	case st.Context == "":
		return errors.New("vcs: a status needs a Context")
	case len(st.Context) > 255:
		return fmt.Errorf("vcs: status context %q is longer than 255 bytes", st.Context)
	}
	switch st.State {
	case StatePending, StateRunning, StateSuccess, StateFailure, StateCancelled, StateSkipped:
		return nil
	}
	return fmt.Errorf("vcs: status state %q is not pending, running, success, failure, cancelled or skipped", st.State)
}

// Memory is a Provider over commits held in memory. The zero value is
// empty and ready to use. A repository exists once a method here names
// it. Commits have no history unless SetParents gives it: ChangedFiles
// compares head with the merge base of the two commits when their
// parents say there is one, and with base itself otherwise.
type Memory struct {
	mu       sync.Mutex
	repos    map[string]bool
	commits  map[string]map[string][]byte // "repo@sha" -> path -> content
	parents  map[string][]string          // "repo@sha" -> parent SHAs
	prs      map[string]int               // "repo\x00branch" -> number
	pulls    map[string]*PullRequest      // "repo#number" -> pull request
	refs     map[string]string            // "repo\x00ref" -> sha
	defaults map[string]string            // repo -> default branch
	statuses map[string][]Status          // "repo@sha" -> statuses posted, in order
	pushes   map[string][]Push            // repo -> pushes recorded, in order
}

var (
	_ Provider   = (*Memory)(nil)
	_ PushLister = (*Memory)(nil)
)

// AddPush records a push of repo, for Pushes.
func (m *Memory) AddPush(repo string, p Push) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pushes == nil {
		m.pushes = make(map[string][]Push)
	}
	m.pushes[repo] = append(m.pushes[repo], p)
}

func (m *Memory) Pushes(ctx context.Context, repo string, since time.Time) ([]Push, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Push
	for _, p := range m.pushes[repo] {
		if !p.At.Before(since) {
			out = append(out, p)
		}
	}
	slices.SortStableFunc(out, func(a, b Push) int { return a.At.Compare(b.At) })
	return out, nil
}

// AddCommit records the files of repo at sha, replacing any recorded
// before.
func (m *Memory) AddCommit(repo, sha string, files map[string]string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.commits == nil {
		m.commits = make(map[string]map[string][]byte)
	}
	c := make(map[string][]byte, len(files))
	for p, data := range files {
		c[p] = []byte(data)
	}
	m.commits[repo+"@"+sha] = c
	m.addRepo(repo)
}

// SetParents records the parents of commit sha of repo, the history
// ChangedFiles finds merge bases in.
func (m *Memory) SetParents(repo, sha string, parents ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.parents == nil {
		m.parents = make(map[string][]string)
	}
	m.parents[repo+"@"+sha] = slices.Clone(parents)
	m.addRepo(repo)
}

func (m *Memory) addRepo(repo string) {
	if m.repos == nil {
		m.repos = make(map[string]bool)
	}
	m.repos[repo] = true
}

// mergeBase returns the nearest commit to head, breadth first, that is
// also base or an ancestor of base; ok is false when their recorded
// histories do not meet.
func (m *Memory) mergeBase(repo, base, head string) (sha string, ok bool) {
	ancestors := map[string]bool{}
	for queue := []string{base}; len(queue) > 0; queue = queue[1:] {
		if c := queue[0]; !ancestors[c] {
			ancestors[c] = true
			queue = append(queue, m.parents[repo+"@"+c]...)
		}
	}
	seen := map[string]bool{}
	for queue := []string{head}; len(queue) > 0; queue = queue[1:] {
		c := queue[0]
		if ancestors[c] {
			return c, true
		}
		if !seen[c] {
			seen[c] = true
			queue = append(queue, m.parents[repo+"@"+c]...)
		}
	}
	return "", false
}

// SetRef points a branch or tag of repo at sha.
func (m *Memory) SetRef(repo, ref, sha string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.refs == nil {
		m.refs = make(map[string]string)
	}
	m.refs[repo+"\x00"+ref] = sha
	m.addRepo(repo)
}

func (m *Memory) ResolveRef(ctx context.Context, repo, ref string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	// A ref is found under the name it was set with, full or short.
	names := []string{ref}
	if short, ok := strings.CutPrefix(ref, "refs/heads/"); ok {
		names = append(names, short)
	} else if short, ok := strings.CutPrefix(ref, "refs/tags/"); ok {
		names = append(names, short)
	} else {
		names = append(names, "refs/heads/"+ref, "refs/tags/"+ref)
	}
	for _, name := range names {
		if sha, ok := m.refs[repo+"\x00"+name]; ok {
			return sha, nil
		}
	}
	return "", fmt.Errorf("vcs: ref %s of %s: %w", ref, repo, ErrNotFound)
}

// SetPullRequest opens pull request number of repo with head branch, or
// closes it when number is 0.
func (m *Memory) SetPullRequest(repo, branch string, number int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.prs == nil {
		m.prs = make(map[string]int)
	}
	if number == 0 {
		if n, ok := m.prs[repo+"\x00"+branch]; ok {
			if pr := m.pulls[fmt.Sprintf("%s#%d", repo, n)]; pr != nil {
				pr.Open = false
			}
		}
		delete(m.prs, repo+"\x00"+branch)
		return
	}
	m.prs[repo+"\x00"+branch] = number
	m.addRepo(repo)
	if m.pulls == nil {
		m.pulls = make(map[string]*PullRequest)
	}
	k := fmt.Sprintf("%s#%d", repo, number)
	if pr, ok := m.pulls[k]; ok {
		pr.Open, pr.HeadBranch = true, branch
		return
	}
	m.pulls[k] = &PullRequest{Number: number, Open: true, HeadRepo: repo, HeadBranch: branch, HeadSHA: m.refs[repo+"\x00"+branch],
		BaseBranch: m.defaultBranch(repo)}
}

// AddPullRequest records pull request pr of repo as it is given, replacing
// the one of that number: OpenPullRequest finds it by its head branch
// while pr.Open and it is not from a fork.
func (m *Memory) AddPullRequest(repo string, pr PullRequest) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pulls == nil {
		m.pulls = make(map[string]*PullRequest)
	}
	if m.prs == nil {
		m.prs = make(map[string]int)
	}
	c := pr
	m.pulls[fmt.Sprintf("%s#%d", repo, pr.Number)] = &c
	m.addRepo(repo)
	if pr.Open && !pr.Fork {
		m.prs[repo+"\x00"+pr.HeadBranch] = pr.Number
	}
}

func (m *Memory) PullRequest(ctx context.Context, repo string, number int) (*PullRequest, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	pr, ok := m.pulls[fmt.Sprintf("%s#%d", repo, number)]
	if !ok {
		return nil, fmt.Errorf("vcs: pull request %d of %s: %w", number, repo, ErrNotFound)
	}
	c := *pr
	return &c, nil
}

// SetDefaultBranch names repo's default branch; it is "main" until set.
func (m *Memory) SetDefaultBranch(repo, branch string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.defaults == nil {
		m.defaults = make(map[string]string)
	}
	m.defaults[repo] = branch
	m.addRepo(repo)
}

func (m *Memory) defaultBranch(repo string) string {
	if b, ok := m.defaults[repo]; ok {
		return b
	}
	return "main"
}

func (m *Memory) DefaultBranch(ctx context.Context, repo string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.repos[repo] {
		return "", fmt.Errorf("vcs: repository %s: %w", repo, ErrNotFound)
	}
	return m.defaultBranch(repo), nil
}

func (m *Memory) ChangedFiles(ctx context.Context, repo, base, head string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	base, head = m.resolve(repo, base), m.resolve(repo, head)
	if _, err := m.commit(repo, base); err != nil {
		return nil, err
	}
	h, err := m.commit(repo, head)
	if err != nil {
		return nil, err
	}
	if mb, ok := m.mergeBase(repo, base, head); ok {
		base = mb
	}
	b, err := m.commit(repo, base)
	if err != nil {
		return nil, err
	}
	var out []string
	for p, data := range h {
		if old, ok := b[p]; !ok || !bytes.Equal(old, data) {
			out = append(out, p)
		}
	}
	for p := range b {
		if _, ok := h[p]; !ok {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (m *Memory) SetStatus(ctx context.Context, repo, sha string, st *Status) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := st.Validate(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.commit(repo, sha); err != nil {
		return err
	}
	if m.statuses == nil {
		m.statuses = make(map[string][]Status)
	}
	m.statuses[repo+"@"+sha] = append(m.statuses[repo+"@"+sha], *st)
	return nil
}

// Statuses returns the latest status of each context posted on commit sha
// of repo, by context.
func (m *Memory) Statuses(repo, sha string) []Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	latest := map[string]Status{}
	for _, st := range m.statuses[repo+"@"+sha] {
		latest[st.Context] = st
	}
	out := make([]Status, 0, len(latest))
	for _, st := range latest {
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b Status) int { return strings.Compare(a.Context, b.Context) })
	return out
}

// StatusHistory returns every status posted on commit sha of repo, in
// order.
func (m *Memory) StatusHistory(repo, sha string) []Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.statuses[repo+"@"+sha])
}

// resolve returns the commit rev names: itself when it is a commit, else
// what the ref rev points at (or rev, when it is neither).
func (m *Memory) resolve(repo, rev string) string {
	if _, ok := m.commits[repo+"@"+rev]; ok {
		return rev
	}
	if sha, ok := m.refs[repo+"\x00"+rev]; ok {
		return sha
	}
	return rev
}

func (m *Memory) commit(repo, sha string) (map[string][]byte, error) {
	c, ok := m.commits[repo+"@"+sha]
	if !ok {
		return nil, fmt.Errorf("vcs: commit %s of %s: %w", sha, repo, ErrNotFound)
	}
	return c, nil
}

func (m *Memory) ReadFile(ctx context.Context, repo, sha, p string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := m.commit(repo, sha)
	if err != nil {
		return nil, err
	}
	data, ok := c[p]
	if !ok {
		return nil, fmt.Errorf("vcs: %s at %s of %s: %w", p, sha, repo, ErrNotFound)
	}
	return slices.Clone(data), nil
}

func (m *Memory) ReadDir(ctx context.Context, repo, sha, dir string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := m.commit(repo, sha)
	if err != nil {
		return nil, err
	}
	var names []string
	for p := range c {
		if d, name := path.Split(p); strings.TrimSuffix(d, "/") == dir && name != "" {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("vcs: directory %s at %s of %s: %w", dir, sha, repo, ErrNotFound)
	}
	slices.Sort(names)
	return names, nil
}

// ListFiles returns the paths of the files below dir of repo at commit
// sha, at any depth, sorted (FileLister).
func (m *Memory) ListFiles(ctx context.Context, repo, sha, dir string, max int) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := m.commit(repo, sha)
	if err != nil {
		return nil, err
	}
	var files []string
	for p := range c {
		if dir == "" || strings.HasPrefix(p, dir+"/") {
			files = append(files, p)
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("vcs: directory %s at %s of %s: %w", dir, sha, repo, ErrNotFound)
	}
	slices.Sort(files)
	if len(files) > max {
		return files[:max], ErrTooManyFiles
	}
	return files, nil
}

func (m *Memory) OpenPullRequest(ctx context.Context, repo, branch string) (int, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.prs[repo+"\x00"+branch]
	if pr := m.pulls[fmt.Sprintf("%s#%d", repo, n)]; !ok || pr == nil || !pr.Open {
		return 0, false, nil
	}
	return n, true, nil
}

// RateLimitError is a provider's answer that the forge refused a call
// for its rate limit (GitHub's 403 or 429 with Retry-After or a reset
// time, GitLab's 429): try again after RetryAfter.
type RateLimitError struct {
	RetryAfter time.Duration
	Err        error
}

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("vcs: rate limited; retry after %s: %v", e.RetryAfter, e.Err)
}

func (e *RateLimitError) Unwrap() error { return e.Err }

// IsNotFound reports whether err says that something does not exist.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
