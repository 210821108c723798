package vcs_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/vcs"
	"github.com/cikit/cikit/vcs/vcstest"
)

func TestMemoryConformance(t *testing.T) {
	t.Parallel()
	vcstest.Exercise(t, vcstest.Config{New: func(t *testing.T) (vcs.Provider, vcstest.Fixture) {
		m := &vcs.Memory{}
		return m, &memoryFixture{m: m, snapshots: map[string]map[string]string{}, numbers: map[string]int{}}
	}})
}

// memoryFixture makes commits for a Memory: each new snapshot is the
// branch head's files with the changes applied, and its parent is the
// head, so ChangedFiles finds merge bases.
type memoryFixture struct {
	m         *vcs.Memory
	mu        sync.Mutex
	n         int
	snapshots map[string]map[string]string // sha -> files
	numbers   map[string]int               // repo -> last pull request number
}

func (f *memoryFixture) CreateRepo(t *testing.T, repo, defaultBranch string) {
	f.m.SetDefaultBranch(repo, defaultBranch)
}

func (f *memoryFixture) Commit(t *testing.T, repo, branch string, files map[string]string, deleted ...string) string {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	snap := map[string]string{}
	var parents []string
	if head, err := f.m.ResolveRef(context.Background(), repo, branch); err == nil {
		maps.Copy(snap, f.snapshots[head])
		parents = append(parents, head)
	}
	maps.Copy(snap, files)
	for _, p := range deleted {
		require.Contains(t, snap, p, "deleting a file that is not there")
		delete(snap, p)
	}
	f.n++
	sum := sha1.Sum(fmt.Appendf(nil, "%s %s %d", repo, branch, f.n))
	sha := hex.EncodeToString(sum[:])
	f.snapshots[sha] = snap
	f.m.AddCommit(repo, sha, snap)
	f.m.SetParents(repo, sha, parents...)
	f.m.SetRef(repo, branch, sha)
	return sha
}

func (f *memoryFixture) Branch(t *testing.T, repo, branch, sha string) { f.m.SetRef(repo, branch, sha) }

func (f *memoryFixture) Tag(t *testing.T, repo, tag, sha string) { f.m.SetRef(repo, tag, sha) }

func (f *memoryFixture) OpenPullRequest(t *testing.T, repo, headRepo, headBranch, baseBranch string) int {
	t.Helper()
	head, err := f.m.ResolveRef(context.Background(), headRepo, headBranch)
	require.NoError(t, err)
	f.mu.Lock()
	f.numbers[repo]++
	n := f.numbers[repo]
	f.mu.Unlock()
	f.m.AddPullRequest(repo, vcs.PullRequest{Number: n, Open: true, HeadRepo: headRepo, HeadBranch: headBranch,
		HeadSHA: head, BaseBranch: baseBranch, Fork: headRepo != repo})
	return n
}

func (f *memoryFixture) ClosePullRequest(t *testing.T, repo string, number int) {
	t.Helper()
	pr, err := f.m.PullRequest(context.Background(), repo, number)
	require.NoError(t, err)
	pr.Open = false
	f.m.AddPullRequest(repo, *pr)
}

func (f *memoryFixture) Statuses(t *testing.T, repo, sha string) []vcs.Status {
	return f.m.Statuses(repo, sha)
}

// TestMemoryListFiles: the files below a directory at any depth, sorted,
// bounded; through the cache the same; a provider that cannot list says
// so with errors.ErrUnsupported.
func TestMemoryListFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := &vcs.Memory{}
	m.AddCommit("acme/api", "c1", map[string]string{"a/b/c.go": "", "a/d.go": "", "ab.go": "", "z": ""})
	for _, p := range []vcs.Provider{m, vcs.Cached(m, 10)} {
		files, err := vcs.ListFiles(ctx, p, "acme/api", "c1", "", 10)
		require.NoError(t, err)
		require.Equal(t, []string{"a/b/c.go", "a/d.go", "ab.go", "z"}, files)
		files, err = vcs.ListFiles(ctx, p, "acme/api", "c1", "a", 10)
		require.NoError(t, err)
		require.Equal(t, []string{"a/b/c.go", "a/d.go"}, files, "a directory's files, not those of a sibling with its prefix")
		files, err = vcs.ListFiles(ctx, p, "acme/api", "c1", "", 2)
		require.ErrorIs(t, err, vcs.ErrTooManyFiles)
		require.Len(t, files, 2)
		_, err = vcs.ListFiles(ctx, p, "acme/api", "c1", "missing", 10)
		require.ErrorIs(t, err, vcs.ErrNotFound)
	}
	_, err := vcs.ListFiles(ctx, readOnly{m}, "acme/api", "c1", "", 10)
	require.ErrorIs(t, err, errors.ErrUnsupported)
}

// readOnly is a Provider without the optional interfaces of the one it
// wraps.
type readOnly struct{ vcs.Provider }
