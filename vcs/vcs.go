// Package vcs is the platform's seam to version control: reading a
// repository's files at a commit (the pipeline as it was at that commit)
// and asking about pull requests.
//
// Provider is the interface; Memory is an in-process implementation for
// tests and the embedded platform.
package vcs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
)

// ErrNotFound is matched by the errors of a file, directory, repository or
// commit that does not exist. It is fs.ErrNotExist, so a compiler's file
// source can tell "no pipeline here" from a failure.
var ErrNotFound = fs.ErrNotExist

// Provider reads repositories of one version control system. Repositories
// are named "org/repo" ("acme/platform/api" for nested groups); paths are
// slash-separated and relative to the repository's root.
// Implementations are safe for concurrent use.
type Provider interface {
	// ReadFile returns a file of repo at commit sha.
	ReadFile(ctx context.Context, repo, sha, path string) ([]byte, error)
	// ReadDir returns the names of the files directly in dir of repo at
	// commit sha, sorted.
	ReadDir(ctx context.Context, repo, sha, dir string) ([]string, error)
	// OpenPullRequest returns the number of an open pull (or merge)
	// request of repo whose head is branch; ok is false when there is
	// none.
	OpenPullRequest(ctx context.Context, repo, branch string) (number int, ok bool, err error)
	// ResolveRef returns the commit a branch or tag of repo points at.
	ResolveRef(ctx context.Context, repo, ref string) (sha string, err error)
}

// Memory is a Provider over commits held in memory. The zero value is
// empty and ready to use.
type Memory struct {
	mu      sync.Mutex
	commits map[string]map[string][]byte // "repo@sha" -> path -> content
	prs     map[string]int               // "repo\x00branch" -> number
	refs    map[string]string            // "repo\x00ref" -> sha
}

var _ Provider = (*Memory)(nil)

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
}

// SetRef points a branch or tag of repo at sha.
func (m *Memory) SetRef(repo, ref, sha string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.refs == nil {
		m.refs = make(map[string]string)
	}
	m.refs[repo+"\x00"+ref] = sha
}

func (m *Memory) ResolveRef(ctx context.Context, repo, ref string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	sha, ok := m.refs[repo+"\x00"+ref]
	if !ok {
		return "", fmt.Errorf("vcs: ref %s of %s: %w", ref, repo, ErrNotFound)
	}
	return sha, nil
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
		delete(m.prs, repo+"\x00"+branch)
		return
	}
	m.prs[repo+"\x00"+branch] = number
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

func (m *Memory) OpenPullRequest(ctx context.Context, repo, branch string) (int, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.prs[repo+"\x00"+branch]
	return n, ok, nil
}

// IsNotFound reports whether err says that something does not exist.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
