package vcstest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/vcs"
)

// exerciseRead covers ReadFile, ReadDir and what they do not find.
func exerciseRead(t *testing.T, cfg Config) {
	t.Run("ReadAtCommit", func(t *testing.T) {
		t.Parallel()
		b := setup(t, cfg)
		c1 := b.fix.Commit(t, repo, "main", map[string]string{
			".cikit.yml":       "jobs: {a: {}}",
			"README.md":        "readme",
			"ci/b.yml":         "b",
			"ci/a.yml":         "a",
			"ci/sub/c.yml":     "c",
			"ci/sub/deep/d.md": "d",
		})
		require.Regexp(t, "^[0-9a-f]{40}$", c1, "Fixture.Commit returns a full SHA")
		c2 := b.fix.Commit(t, repo, "main", map[string]string{
			".cikit.yml": "jobs: {b: {}}",
			"ci/e.yml":   "e",
		}, "README.md", "ci/b.yml")
		require.NotEqual(t, c1, c2)

		read := func(sha, p string) string {
			t.Helper()
			data, err := b.p.ReadFile(b.ctx, repo, sha, p)
			require.NoError(t, err, "%s at %s", p, sha)
			return string(data)
		}
		require.Equal(t, "jobs: {a: {}}", read(c1, ".cikit.yml"))
		require.Equal(t, "jobs: {b: {}}", read(c2, ".cikit.yml"))
		require.Equal(t, "c", read(c2, "ci/sub/c.yml"), "unchanged files are carried over")
		require.Equal(t, "d", read(c1, "ci/sub/deep/d.md"))
		// The old commit is still there after later commits changed and
		// deleted its files.
		require.Equal(t, "readme", read(c1, "README.md"))
		require.Equal(t, "b", read(c1, "ci/b.yml"))
		_, err := b.p.ReadFile(b.ctx, repo, c2, "README.md")
		require.ErrorIs(t, err, vcs.ErrNotFound, "deleted in c2")
		_, err = b.p.ReadFile(b.ctx, repo, c1, "ci/e.yml")
		require.ErrorIs(t, err, vcs.ErrNotFound, "added only in c2")

		dir := func(sha, d string) []string {
			t.Helper()
			names, err := b.p.ReadDir(b.ctx, repo, sha, d)
			require.NoError(t, err, "directory %q at %s", d, sha)
			return names
		}
		require.Equal(t, []string{"a.yml", "b.yml"}, dir(c1, "ci"), "direct children, sorted, no subdirectories")
		require.Equal(t, []string{"a.yml", "e.yml"}, dir(c2, "ci"))
		require.Equal(t, []string{".cikit.yml", "README.md"}, dir(c1, ""), "the root")
		require.Equal(t, []string{".cikit.yml"}, dir(c2, ""))
		require.Equal(t, []string{"c.yml"}, dir(c1, "ci/sub"))
		require.Equal(t, []string{"d.md"}, dir(c2, "ci/sub/deep"))
	})

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t, cfg)
		sha := b.fix.Commit(t, repo, "main", map[string]string{".cikit.yml": "x", "ci/a.yml": "a"})
		for name, call := range map[string]func() error{
			"file of unknown repo": func() error { _, err := b.p.ReadFile(b.ctx, "acme/nope", sha, ".cikit.yml"); return err },
			"dir of unknown repo":  func() error { _, err := b.p.ReadDir(b.ctx, "acme/nope", sha, "ci"); return err },
			"file of unknown commit": func() error {
				_, err := b.p.ReadFile(b.ctx, repo, missingSHA, ".cikit.yml")
				return err
			},
			"dir of unknown commit": func() error { _, err := b.p.ReadDir(b.ctx, repo, missingSHA, "ci"); return err },
			"missing file":          func() error { _, err := b.p.ReadFile(b.ctx, repo, sha, "nope.yml"); return err },
			"file in missing dir":   func() error { _, err := b.p.ReadFile(b.ctx, repo, sha, "nope/a.yml"); return err },
			"missing dir":           func() error { _, err := b.p.ReadDir(b.ctx, repo, sha, "nope"); return err },
			"ref of unknown repo":   func() error { _, err := b.p.ResolveRef(b.ctx, "acme/nope", "main"); return err },
			"missing ref":           func() error { _, err := b.p.ResolveRef(b.ctx, repo, "nope"); return err },
			"default of unknown repo": func() error {
				_, err := b.p.DefaultBranch(b.ctx, "acme/nope")
				return err
			},
			"changes of unknown commit": func() error {
				_, err := b.p.ChangedFiles(b.ctx, repo, sha, missingSHA)
				return err
			},
			"missing pull request": func() error { _, err := b.p.PullRequest(b.ctx, repo, 999); return err },
			"pull request of unknown repo": func() error {
				_, err := b.p.PullRequest(b.ctx, "acme/nope", 1)
				return err
			},
		} {
			require.ErrorIs(t, call(), vcs.ErrNotFound, name)
		}
	})
}
