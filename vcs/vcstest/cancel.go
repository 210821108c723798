package vcstest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/vcs"
)

// exerciseCancelled covers calls made with a context already cancelled.
func exerciseCancelled(t *testing.T, cfg Config) {
	t.Run("Cancelled", func(t *testing.T) {
		t.Parallel()
		b := setup(t, cfg)
		sha := b.fix.Commit(t, repo, "main", map[string]string{"a": "1"})
		b.fix.Commit(t, repo, "feature", map[string]string{"a": "2"})
		n := b.fix.OpenPullRequest(t, repo, repo, "feature", "main")
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		for name, call := range map[string]func() error{
			"ReadFile":      func() error { _, err := b.p.ReadFile(ctx, repo, sha, "a"); return err },
			"ReadDir":       func() error { _, err := b.p.ReadDir(ctx, repo, sha, ""); return err },
			"ResolveRef":    func() error { _, err := b.p.ResolveRef(ctx, repo, "main"); return err },
			"DefaultBranch": func() error { _, err := b.p.DefaultBranch(ctx, repo); return err },
			"ChangedFiles":  func() error { _, err := b.p.ChangedFiles(ctx, repo, "main", "feature"); return err },
			"OpenPullRequest": func() error {
				_, _, err := b.p.OpenPullRequest(ctx, repo, "feature")
				return err
			},
			"PullRequest": func() error { _, err := b.p.PullRequest(ctx, repo, n); return err },
			"SetStatus": func() error {
				return b.p.SetStatus(ctx, repo, sha, &vcs.Status{Context: "cikit", State: vcs.StateSuccess})
			},
		} {
			require.ErrorIs(t, call(), context.Canceled, name)
		}
		require.Empty(t, b.fix.Statuses(t, repo, sha), "nothing posted")
	})
}
