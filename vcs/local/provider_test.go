package local_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/vcs"
	"github.com/cikit/cikit/vcs/local"
)

func TestNew(t *testing.T) {
	t.Parallel()
	_, err := local.New(local.Config{})
	require.ErrorContains(t, err, "Config.Root")
	_, err = local.New(local.Config{Root: filepath.Join(t.TempDir(), "nope")})
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = local.New(local.Config{Root: t.TempDir(), Git: "no-such-git-here"})
	require.ErrorContains(t, err, "Config.Git")
}

// A repository with a work tree is read from its .git directory: the
// committed files, not the ones changed since.
func TestWorkTree(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	dir := f.dir("acme/wt")
	git(t, f.repos.Root, "", nil, "init", "--quiet", "--initial-branch=trunk", "--", dir)
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".cikit.yml"), []byte("jobs: {}"), 0o600))
	git(t, dir, "", nil, "add", ".cikit.yml")
	git(t, dir, "", nil, "commit", "--quiet", "-m", "first")
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".cikit.yml"), []byte("uncommitted"), 0o600))
	git(t, dir, "", nil, "tag", "-a", "-m", "annotated", "v1")

	sha, err := f.p.ResolveRef(ctx, "acme/wt", "trunk")
	require.NoError(t, err)
	data, err := f.p.ReadFile(ctx, "acme/wt", sha, ".cikit.yml")
	require.NoError(t, err)
	require.Equal(t, "jobs: {}", string(data))
	branch, err := f.p.DefaultBranch(ctx, "acme/wt")
	require.NoError(t, err)
	require.Equal(t, "trunk", branch)
	tagged, err := f.p.ResolveRef(ctx, "acme/wt", "v1")
	require.NoError(t, err)
	require.Equal(t, sha, tagged, "an annotated tag resolves to its commit")
	tagged, err = f.p.ResolveRef(ctx, "acme/wt", "refs/tags/v1")
	require.NoError(t, err)
	require.Equal(t, sha, tagged, "a full ref name")
}

// A directory that is not a repository is not one, even inside another
// repository: git does not look above it.
func TestNotARepository(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	git(t, f.repos.Root, "", nil, "init", "--quiet", "--initial-branch=main", "--", f.repos.Root)
	require.NoError(t, os.MkdirAll(f.dir("acme/plain"), 0o700))
	_, err := f.p.DefaultBranch(ctx, "acme/plain")
	require.ErrorIs(t, err, vcs.ErrNotFound)
	_, err = f.p.ResolveRef(ctx, "acme/plain", "main")
	require.ErrorIs(t, err, vcs.ErrNotFound)
}

func TestRefusesArguments(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	f.CreateRepo(t, "acme/api", "main")
	sha := f.Commit(t, "acme/api", "main", map[string]string{"a/b.yml": "b", "-x": "dash"})
	b := f.Commit(t, "acme/api", "main", map[string]string{"a/b.yml": "c"})
	f.CreateRepo(t, "acme/other", "main")
	f.Commit(t, "acme/other", "main", map[string]string{"a": "1"})
	for _, repo := range []string{"acme", "../acme/api", "acme/../acme/api", "-acme/api", "acme/.git", "acme//api", "/acme/api", "acme/a pi"} {
		_, err := f.p.ReadFile(ctx, repo, sha, "a/b.yml")
		require.ErrorContains(t, err, "repository", repo)
		require.NotErrorIs(t, err, vcs.ErrNotFound, repo)
	}
	for _, p := range []string{"", "/a/b.yml", "a/../a/b.yml", "./a/b.yml", "a//b.yml", "-x", "a/b.yml\n", "a/-b"} {
		_, err := f.p.ReadFile(ctx, "acme/api", sha, p)
		require.ErrorContains(t, err, "path", p)
	}
	for _, d := range []string{"/a", "..", "a/..", "-a"} {
		_, err := f.p.ReadDir(ctx, "acme/api", sha, d)
		require.ErrorContains(t, err, "path", d)
	}
	for _, rev := range []string{"main", "HEAD", "main~1", sha[:12], "--all", "-h", sha + "^{tree}", "ABCDEF" + sha[6:]} {
		_, err := f.p.ReadFile(ctx, "acme/api", rev, "a/b.yml")
		require.ErrorContains(t, err, "not a full commit SHA", rev)
		require.Error(t, f.p.SetStatus(ctx, "acme/api", rev, &vcs.Status{Context: "c", State: vcs.StateSuccess}), rev)
	}
	for _, ref := range []string{"-main", "--output=x", "main~1", "main^", "main@{1}", "a..b", "main:x", "ma in", ".main", "main/", "main.lock", "@", ""} {
		_, err := f.p.ResolveRef(ctx, "acme/api", ref)
		require.ErrorContains(t, err, "not a valid branch or tag name", ref)
		_, err = f.p.ChangedFiles(ctx, "acme/api", ref, "main")
		require.ErrorContains(t, err, "not a valid branch or tag name", ref)
	}
	// What looks like an option is refused above; nothing got through
	// to git as one, and good names still work.
	data, err := f.p.ReadFile(ctx, "acme/api", b, "a/b.yml")
	require.NoError(t, err)
	require.Equal(t, "c", string(data))
	_, err = f.p.ReadFile(ctx, "acme/api", b, "-x")
	require.Error(t, err)
	_, err = f.p.ReadFile(ctx, "acme/other", sha, "a/b.yml")
	require.ErrorIs(t, err, vcs.ErrNotFound, "a commit of another repository")
}

func TestPullRequests(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	f.CreateRepo(t, "acme/api", "main")
	f.Commit(t, "acme/api", "main", map[string]string{"a": "1"})
	f.Commit(t, "acme/api", "feature", map[string]string{"a": "2"})

	_, err := f.p.PullRequestOpen(ctx, &local.PullRequestOpenParams{Repo: "acme/api", HeadBranch: "nope", BaseBranch: "main"})
	require.ErrorIs(t, err, vcs.ErrNotFound, "head branch must exist")
	_, err = f.p.PullRequestOpen(ctx, &local.PullRequestOpenParams{Repo: "acme/api", HeadBranch: "feature", BaseBranch: "nope"})
	require.ErrorIs(t, err, vcs.ErrNotFound, "base branch must exist")
	_, err = f.p.PullRequestOpen(ctx, &local.PullRequestOpenParams{Repo: "acme/api", HeadBranch: "feature"})
	require.ErrorContains(t, err, "BaseBranch")
	require.ErrorIs(t, f.p.PullRequestClose("acme/api", 1), vcs.ErrNotFound)

	n, err := f.p.PullRequestOpen(ctx, &local.PullRequestOpenParams{Repo: "acme/api", HeadBranch: "feature", BaseBranch: "main"})
	require.NoError(t, err)
	require.Equal(t, 1, n, "numbered from 1")
	// The head SHA follows the head branch, as on a forge.
	later := f.Commit(t, "acme/api", "feature", map[string]string{"a": "3"})
	pr, err := f.p.PullRequest(ctx, "acme/api", n)
	require.NoError(t, err)
	require.Equal(t, later, pr.HeadSHA)
	// A fork's pull request is not found by a branch of the repository
	// with the same name.
	f.CreateRepo(t, "fork/api", "main")
	f.Commit(t, "fork/api", "patch", map[string]string{"a": "4"})
	f.Commit(t, "acme/api", "patch", map[string]string{"a": "5"})
	_, err = f.p.PullRequestOpen(ctx, &local.PullRequestOpenParams{Repo: "acme/api", HeadRepo: "fork/api", HeadBranch: "patch",
		BaseBranch: "main"})
	require.NoError(t, err)
	_, ok, err := f.p.OpenPullRequest(ctx, "acme/api", "patch")
	require.NoError(t, err)
	require.False(t, ok)
}
