package local_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/vcs"
	"github.com/cikit/cikit/vcs/gitserve/gitservetest"
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
// temporary root, without a work tree (gitservetest.Repos).
type fixture struct {
	p     *local.Provider
	repos *gitservetest.Repos
}

func setup(t *testing.T) *fixture {
	t.Helper()
	repos := gitservetest.NewRepos(t)
	p, err := local.New(local.Config{Root: repos.Root})
	require.NoError(t, err)
	return &fixture{p: p, repos: repos}
}

// git runs git in dir with a clean environment plus env, returning its
// trimmed standard output.
func git(t *testing.T, dir, stdin string, env []string, args ...string) string {
	t.Helper()
	return gitservetest.Git(t, dir, stdin, env, args...)
}

func (f *fixture) dir(repo string) string { return f.repos.Dir(repo) }

func (f *fixture) CreateRepo(t *testing.T, repo, defaultBranch string) {
	t.Helper()
	f.repos.Create(t, repo, defaultBranch)
}

func (f *fixture) Commit(t *testing.T, repo, branch string, files map[string]string, deleted ...string) string {
	t.Helper()
	if _, err := f.p.ResolveRef(context.Background(), repo, branch); err != nil {
		require.ErrorIs(t, err, vcs.ErrNotFound)
	}
	return f.repos.Commit(t, repo, branch, files, deleted...)
}

func (f *fixture) Branch(t *testing.T, repo, branch, sha string) {
	t.Helper()
	f.repos.SetRef(t, repo, "refs/heads/"+branch, sha)
}

func (f *fixture) Tag(t *testing.T, repo, tag, sha string) {
	t.Helper()
	f.repos.SetRef(t, repo, "refs/tags/"+tag, sha)
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
