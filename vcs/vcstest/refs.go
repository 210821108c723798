package vcstest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// exerciseRefs covers ResolveRef and DefaultBranch.
func exerciseRefs(t *testing.T, cfg Config) {
	t.Run("ResolveRef", func(t *testing.T) {
		t.Parallel()
		b := setup(t, cfg)
		c1 := b.fix.Commit(t, repo, "main", map[string]string{"a": "1"})
		c2 := b.fix.Commit(t, repo, "main", map[string]string{"a": "2"})
		b.fix.Branch(t, repo, "release/1.x", c1)
		b.fix.Tag(t, repo, "v1.0.0", c1)
		c3 := b.fix.Commit(t, repo, "feature", map[string]string{"b": "1"})

		for ref, want := range map[string]string{"main": c2, "release/1.x": c1, "v1.0.0": c1, "feature": c3,
			// Full names, as events and manual triggers give them.
			"refs/heads/main": c2, "refs/heads/release/1.x": c1, "refs/tags/v1.0.0": c1} {
			got, err := b.p.ResolveRef(b.ctx, repo, ref)
			require.NoError(t, err, ref)
			require.Equal(t, want, got, ref)
		}
	})

	t.Run("DefaultBranch", func(t *testing.T) {
		t.Parallel()
		b := setup(t, cfg)
		b.fix.Commit(t, repo, "main", map[string]string{"a": "1"})
		b.fix.CreateRepo(t, "acme/trunk", "trunk")
		b.fix.Commit(t, "acme/trunk", "trunk", map[string]string{"a": "1"})
		b.fix.Commit(t, "acme/trunk", "main", map[string]string{"a": "2"})

		got, err := b.p.DefaultBranch(b.ctx, repo)
		require.NoError(t, err)
		require.Equal(t, "main", got)
		got, err = b.p.DefaultBranch(b.ctx, "acme/trunk")
		require.NoError(t, err)
		require.Equal(t, "trunk", got, "not whichever branch is called main")
	})
}
