package local_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/vcs"
	"github.com/cikit/cikit/vcs/local"
	"github.com/cikit/cikit/vcs/vcstest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	vcstest.Exercise(t, vcstest.Config{New: func(t *testing.T) (vcs.Provider, vcstest.Fixture) {
		f := setup(t)
		return f.p, f
	}})
}

// fixture makes real commits with git in bare repositories under a
// temporary root, without a work tree: each commit is the branch head's
// tree, read into a private index, with the changes applied.
type fixture struct {
	p    *local.Provider
	root string
	mu   sync.Mutex
	n    int
}

func setup(t *testing.T) *fixture {
	t.Helper()
	root := t.TempDir()
	p, err := local.New(local.Config{Root: root})
	require.NoError(t, err)
	return &fixture{p: p, root: root}
}

// git runs git in dir with a clean environment plus env, returning its
// trimmed standard output.
func git(t *testing.T, dir, stdin string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"GIT_CONFIG_NOSYSTEM=1", "HOME=" + os.DevNull, "GIT_CONFIG_GLOBAL=" + os.DevNull,
		"GIT_AUTHOR_NAME=cikit", "GIT_AUTHOR_EMAIL=cikit@example.com",
		"GIT_COMMITTER_NAME=cikit", "GIT_COMMITTER_EMAIL=cikit@example.com"}, env...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}

func (f *fixture) dir(repo string) string { return filepath.Join(f.root, filepath.FromSlash(repo)) }

func (f *fixture) CreateRepo(t *testing.T, repo, defaultBranch string) {
	t.Helper()
	git(t, f.root, "", nil, "init", "--quiet", "--bare", "--initial-branch="+defaultBranch, "--", f.dir(repo))
}

func (f *fixture) Commit(t *testing.T, repo, branch string, files map[string]string, deleted ...string) string {
	t.Helper()
	f.mu.Lock()
	f.n++
	n := f.n
	f.mu.Unlock()
	dir := f.dir(repo)
	env := []string{"GIT_INDEX_FILE=" + filepath.Join(t.TempDir(), "index")}
	ref := "refs/heads/" + branch
	head, err := f.p.ResolveRef(context.Background(), repo, branch)
	if err == nil {
		git(t, dir, "", env, "read-tree", head)
	} else {
		require.ErrorIs(t, err, vcs.ErrNotFound)
		git(t, dir, "", env, "read-tree", "--empty")
	}
	var info strings.Builder
	for p, content := range files {
		oid := git(t, dir, content, env, "hash-object", "-w", "--stdin")
		fmt.Fprintf(&info, "100644 %s\t%s\n", oid, p)
	}
	for _, p := range deleted {
		fmt.Fprintf(&info, "0 %s\t%s\n", strings.Repeat("0", 40), p)
	}
	git(t, dir, info.String(), env, "update-index", "--index-info")
	tree := git(t, dir, "", env, "write-tree")
	args := []string{"commit-tree", tree, "-m", fmt.Sprintf("commit %d", n)}
	if head != "" {
		args = append(args, "-p", head)
	}
	sha := git(t, dir, "", env, args...)
	git(t, dir, "", nil, "update-ref", ref, sha)
	return sha
}

func (f *fixture) Branch(t *testing.T, repo, branch, sha string) {
	t.Helper()
	git(t, f.dir(repo), "", nil, "update-ref", "refs/heads/"+branch, sha)
}

func (f *fixture) Tag(t *testing.T, repo, tag, sha string) {
	t.Helper()
	git(t, f.dir(repo), "", nil, "update-ref", "refs/tags/"+tag, sha)
}

func (f *fixture) OpenPullRequest(t *testing.T, repo, headRepo, headBranch, baseBranch string) int {
	t.Helper()
	n, err := f.p.PullRequestOpen(context.Background(), &local.PullRequestOpenParams{Repo: repo, HeadRepo: headRepo,
		HeadBranch: headBranch, BaseBranch: baseBranch})
	require.NoError(t, err)
	return n
}

func (f *fixture) ClosePullRequest(t *testing.T, repo string, number int) {
	t.Helper()
	require.NoError(t, f.p.PullRequestClose(repo, number))
}

func (f *fixture) Statuses(t *testing.T, repo, sha string) []vcs.Status {
	return f.p.Statuses(repo, sha)
}

// TestReadFileMax: a file larger than the bound is refused from its size
// in the object store; one within it is read.
func TestReadFileMax(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.CreateRepo(t, "acme/api", "main")
	sha := f.Commit(t, "acme/api", "main", map[string]string{".cikit.yml": "0123456789", "empty": ""})
	var p vcs.Provider = f.p
	_, err := vcs.ReadFileMax(context.Background(), p, "acme/api", sha, ".cikit.yml", 9)
	tl, ok := errors.AsType[*vcs.FileTooLargeError](err)
	require.True(t, ok, "%v", err)
	require.Equal(t, &vcs.FileTooLargeError{Path: ".cikit.yml", Size: 10, Max: 9}, tl)
	data, err := vcs.ReadFileMax(context.Background(), p, "acme/api", sha, ".cikit.yml", 10)
	require.NoError(t, err)
	require.Equal(t, "0123456789", string(data))
	data, err = vcs.ReadFileMax(context.Background(), p, "acme/api", sha, "empty", 0)
	require.NoError(t, err)
	require.Empty(t, data)
	_, err = vcs.ReadFileMax(context.Background(), p, "acme/api", sha, "missing", 10)
	require.ErrorIs(t, err, vcs.ErrNotFound)

	// Through the cache, the same answers.
	c := vcs.Cached(p, 10)
	_, err = vcs.ReadFileMax(context.Background(), c, "acme/api", sha, ".cikit.yml", 9)
	require.ErrorAs(t, err, &tl)
	data, err = vcs.ReadFileMax(context.Background(), c, "acme/api", sha, ".cikit.yml", 10)
	require.NoError(t, err)
	require.Equal(t, "0123456789", string(data))
	_, err = vcs.ReadFileMax(context.Background(), c, "acme/api", sha, ".cikit.yml", 9)
	require.ErrorAs(t, err, &tl, "a cached answer is checked against the bound")
}

// TestListFiles: every file below a directory, at any depth, sorted;
// past the bound, as many as asked and vcs.ErrTooManyFiles; a missing
// directory is not found. Through the cache, the same answers.
func TestListFiles(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.CreateRepo(t, "acme/api", "main")
	sha := f.Commit(t, "acme/api", "main", map[string]string{".gitlab-ci.yml": "x", "cmd/app/main.go": "package main",
		"cmd/app/internal/x.go": "package internal", "README.md": "hi"})
	for _, p := range []vcs.Provider{f.p, vcs.Cached(f.p, 10)} {
		ctx := context.Background()
		files, err := vcs.ListFiles(ctx, p, "acme/api", sha, "", 10)
		require.NoError(t, err)
		require.Equal(t, []string{".gitlab-ci.yml", "README.md", "cmd/app/internal/x.go", "cmd/app/main.go"}, files)
		files, err = vcs.ListFiles(ctx, p, "acme/api", sha, "cmd", 10)
		require.NoError(t, err)
		require.Equal(t, []string{"cmd/app/internal/x.go", "cmd/app/main.go"}, files)
		files, err = vcs.ListFiles(ctx, p, "acme/api", sha, "", 3)
		require.ErrorIs(t, err, vcs.ErrTooManyFiles)
		require.Len(t, files, 3)
		_, err = vcs.ListFiles(ctx, p, "acme/api", sha, "missing", 10)
		require.ErrorIs(t, err, vcs.ErrNotFound)
		_, err = vcs.ListFiles(ctx, p, "acme/api", sha, "../x", 10)
		require.Error(t, err)
	}
}
