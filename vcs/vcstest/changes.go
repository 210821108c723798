package vcstest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// exerciseChangedFiles covers ChangedFiles, the three-dot comparison.
func exerciseChangedFiles(t *testing.T, cfg Config) {
	t.Run("ChangedFilesThreeDot", func(t *testing.T) {
		t.Parallel()
		b := setup(t, cfg)
		fork := b.fix.Commit(t, repo, "main", map[string]string{
			"a.go":        "a",
			"b.go":        "b",
			"c.go":        "c",
			"old/name.md": "same content",
			"keep.md":     "k",
		})
		b.fix.Branch(t, repo, "feature", fork)
		b.fix.Commit(t, repo, "feature", map[string]string{"a.go": "a2", "z/new.go": "new"}, "b.go")
		// A rename (delete plus add of the same content) lists both
		// paths; a file changed twice is listed once.
		b.fix.Commit(t, repo, "feature", map[string]string{"a.go": "a3", "new/name.md": "same content"}, "old/name.md")
		head, err := b.p.ResolveRef(b.ctx, repo, "feature")
		require.NoError(t, err)
		// main moves on after the fork, changing other files: they are not
		// the feature's changes.
		base := b.fix.Commit(t, repo, "main", map[string]string{"c.go": "c2", "d.go": "d"}, "keep.md")

		want := []string{"a.go", "b.go", "new/name.md", "old/name.md", "z/new.go"}
		got, err := b.p.ChangedFiles(b.ctx, repo, base, head)
		require.NoError(t, err)
		require.Equal(t, want, got, "sorted, each once, only the feature's changes")
		got, err = b.p.ChangedFiles(b.ctx, repo, "main", "feature")
		require.NoError(t, err)
		require.Equal(t, want, got, "branch names work as well as SHAs")

		// The other way round: what main did since the merge base.
		got, err = b.p.ChangedFiles(b.ctx, repo, head, base)
		require.NoError(t, err)
		require.Equal(t, []string{"c.go", "d.go", "keep.md"}, got)

		got, err = b.p.ChangedFiles(b.ctx, repo, fork, fork)
		require.NoError(t, err)
		require.Empty(t, got, "a commit changes nothing since itself")
	})
}
