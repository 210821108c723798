package vcstest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/vcs"
)

// exercisePullRequests covers OpenPullRequest and PullRequest.
func exercisePullRequests(t *testing.T, cfg Config) {
	t.Run("PullRequest", func(t *testing.T) {
		t.Parallel()
		b := setup(t, cfg)
		b.fix.Commit(t, repo, "main", map[string]string{"a": "1"})
		head := b.fix.Commit(t, repo, "feature", map[string]string{"a": "2"})
		b.fix.Commit(t, repo, "other", map[string]string{"a": "3"})

		_, ok, err := b.p.OpenPullRequest(b.ctx, repo, "feature")
		require.NoError(t, err)
		require.False(t, ok, "no pull request yet")

		n := b.fix.OpenPullRequest(t, repo, repo, "feature", "main")
		got, ok, err := b.p.OpenPullRequest(b.ctx, repo, "feature")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, n, got)
		_, ok, err = b.p.OpenPullRequest(b.ctx, repo, "other")
		require.NoError(t, err)
		require.False(t, ok, "found by its head branch only")

		pr, err := b.p.PullRequest(b.ctx, repo, n)
		require.NoError(t, err)
		require.Equal(t, &vcs.PullRequest{Number: n, Open: true, HeadRepo: repo, HeadBranch: "feature", HeadSHA: head,
			BaseBranch: "main", Fork: false}, pr)

		b.fix.ClosePullRequest(t, repo, n)
		_, ok, err = b.p.OpenPullRequest(b.ctx, repo, "feature")
		require.NoError(t, err)
		require.False(t, ok, "a closed pull request is not open")
		pr, err = b.p.PullRequest(b.ctx, repo, n)
		require.NoError(t, err, "a closed pull request is still found by number")
		require.False(t, pr.Open)

		// A second pull request from the same branch, after the first was
		// closed, is the open one.
		n2 := b.fix.OpenPullRequest(t, repo, repo, "feature", "main")
		require.NotEqual(t, n, n2)
		got, ok, err = b.p.OpenPullRequest(b.ctx, repo, "feature")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, n2, got)
	})

	t.Run("PullRequestFromFork", func(t *testing.T) {
		t.Parallel()
		b := setup(t, cfg)
		b.fix.Commit(t, repo, "main", map[string]string{"a": "1"})
		b.fix.CreateRepo(t, forkRepo, "main")
		b.fix.Commit(t, forkRepo, "main", map[string]string{"a": "1"})
		head := b.fix.Commit(t, forkRepo, "patch", map[string]string{"a": "2"})

		n := b.fix.OpenPullRequest(t, repo, forkRepo, "patch", "main")
		pr, err := b.p.PullRequest(b.ctx, repo, n)
		require.NoError(t, err)
		require.Equal(t, &vcs.PullRequest{Number: n, Open: true, HeadRepo: forkRepo, HeadBranch: "patch", HeadSHA: head,
			BaseBranch: "main", Fork: true}, pr)
	})
}
