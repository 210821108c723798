package vcstest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/vcs"
)

// exerciseListFiles covers ListFiles of a Provider that is a
// vcs.FileLister; the suite requires none to be.
func exerciseListFiles(t *testing.T, cfg Config) {
	t.Run("ListFiles", func(t *testing.T) {
		t.Parallel()
		b := setup(t, cfg)
		if _, ok := b.p.(vcs.FileLister); !ok {
			t.Skipf("%T is not a vcs.FileLister", b.p)
		}
		c1 := b.fix.Commit(t, repo, "main", map[string]string{
			".cikit.yml":       "x",
			"ci/a.yml":         "a",
			"ci/sub/c.yml":     "c",
			"ci/sub/deep/d.md": "d",
			"docs/a b%20.md":   "spaces",
		})
		c2 := b.fix.Commit(t, repo, "main", map[string]string{"ci/e.yml": "e"}, "ci/sub/c.yml")
		list := func(sha, dir string, max int) ([]string, error) {
			return vcs.ListFiles(b.ctx, b.p, repo, sha, dir, max)
		}
		all, err := list(c1, "", 0)
		require.NoError(t, err)
		require.Equal(t, []string{".cikit.yml", "ci/a.yml", "ci/sub/c.yml", "ci/sub/deep/d.md", "docs/a b%20.md"}, all, "every file at any depth, sorted")
		got, err := list(c1, "ci/sub", 0)
		require.NoError(t, err)
		require.Equal(t, []string{"ci/sub/c.yml", "ci/sub/deep/d.md"}, got, "paths from the root, below the directory only")
		got, err = list(c2, "ci", 100)
		require.NoError(t, err)
		require.Equal(t, []string{"ci/a.yml", "ci/e.yml", "ci/sub/deep/d.md"}, got, "at the later commit")

		got, err = list(c1, "", 2)
		require.ErrorIs(t, err, vcs.ErrTooManyFiles)
		require.Len(t, got, 2, "max of them")

		for name, dir := range map[string]string{"missing dir": "nope", "a file": "ci/a.yml"} {
			_, err := list(c1, dir, 0)
			require.ErrorIs(t, err, vcs.ErrNotFound, name)
		}
		_, err = list(missingSHA, "", 0)
		require.ErrorIs(t, err, vcs.ErrNotFound, "unknown commit")
	})
}
