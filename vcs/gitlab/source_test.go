package gitlab_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/vcs"
	"github.com/cikit/cikit/vcs/gitlab"
	"github.com/cikit/cikit/vcs/gitlab/gitlabtest"
	"github.com/cikit/cikit/vcs/gitserve/gitservetest"
)

// TestMintSource: the minted deploy token fetches its project's commit
// with a real git client, and nothing else: not another project, not a
// push, not the API.
func TestMintSource(t *testing.T) {
	t.Parallel()
	b := setup(t, gitlabtest.Config{GitDir: t.TempDir()})
	ctx := context.Background()
	b.project(t, "group/sub/api", "main")
	b.project(t, "group/secret", "main")
	first := b.commit(t, "group/sub/api", "main", map[string]string{"go.mod": "module example.com/api\n"})
	sha := b.commit(t, "group/sub/api", "main", map[string]string{"api.go": "package api\n", "a/b/c.txt": "c\n"})
	secret := b.commit(t, "group/secret", "main", map[string]string{"key": "hunter2\n"})
	tagObject, err := b.srv.AnnotatedTag("group/sub/api", "v1", first)
	require.NoError(t, err)

	src, err := b.p.MintSource(ctx, "group/sub/api", 10*time.Minute)
	require.NoError(t, err)
	require.Equal(t, b.url+"/group/sub/api.git", src.URL)
	require.True(t, strings.HasPrefix(src.Username, "gitlab+deploy-token-"), src.Username)
	require.True(t, strings.HasPrefix(src.Token, "gldt-"))
	require.Equal(t, b.clock.Now().Add(10*time.Minute), src.ExpiresAt)
	require.NotContains(t, src.String(), src.Token)
	names, err := b.srv.DeployTokens("group/sub/api")
	require.NoError(t, err)
	require.Len(t, names, 1)
	require.True(t, strings.HasPrefix(names[0], "cikit-checkout-"))

	dir, err := gitservetest.Fetch(t, src, src.URL, sha)
	require.NoError(t, err)
	head, _ := gitservetest.Client(t, dir, nil, "rev-parse", "HEAD")
	require.Equal(t, sha, head)
	data, err := os.ReadFile(dir + "/a/b/c.txt")
	require.NoError(t, err)
	require.Equal(t, "c\n", string(data))
	_, err = gitservetest.Fetch(t, src, src.URL, first)
	require.NoError(t, err, "an older commit by its SHA")
	refs, err := gitservetest.Client(t, dir, src, "ls-remote", src.URL)
	require.NoError(t, err)
	require.Contains(t, refs, sha+"\trefs/heads/main")
	require.Contains(t, refs, tagObject+"\trefs/tags/v1")
	require.Contains(t, refs, first+"\trefs/tags/v1^{}", "the tag is a real tag object")

	// Another project is not the token's; nor the API.
	_, err = gitservetest.Fetch(t, src, b.url+"/group/secret.git", secret)
	require.ErrorContains(t, err, "could not be found")
	_, err = b.provider(t, src.Token).DefaultBranch(ctx, "group/sub/api")
	require.ErrorIs(t, err, gitlab.ErrUnauthorized)
	// The user name is part of a deploy token's credential.
	_, err = gitservetest.Fetch(t, &cikit.CheckoutSource{Username: "someone", Token: src.Token}, src.URL, sha)
	require.Error(t, err)

	// No push.
	_, err = gitservetest.Client(t, dir, nil, "commit", "-q", "--allow-empty", "-m", "injected")
	require.NoError(t, err)
	out, err := gitservetest.Client(t, dir, src, "push", src.URL, "HEAD:refs/heads/main")
	require.Error(t, err)
	require.Contains(t, out, "403")
	main, err := b.p.ResolveRef(ctx, "group/sub/api", "main")
	require.NoError(t, err)
	require.Equal(t, sha, main, "the push moved nothing")

	// Each mint is its own token; revoked, one stops working and leaves
	// the project's list; expired, the other stops too.
	again, err := b.p.MintSource(ctx, "group/sub/api", time.Hour)
	require.NoError(t, err)
	require.NotEqual(t, src.Token, again.Token)
	require.NoError(t, b.p.RevokeSource(ctx, src))
	_, err = gitservetest.Fetch(t, src, src.URL, sha)
	require.Error(t, err)
	require.ErrorContains(t, b.p.RevokeSource(ctx, src), "not a live deploy token")
	names, err = b.srv.DeployTokens("group/sub/api")
	require.NoError(t, err)
	require.Len(t, names, 1)
	_, err = gitservetest.Fetch(t, again, again.URL, sha)
	require.NoError(t, err)
	b.clock.Advance(time.Hour)
	_, err = gitservetest.Fetch(t, again, again.URL, sha)
	require.Error(t, err)
	st := b.srv.GitStats()
	require.Equal(t, 2, st.DeployTokensCreated)
	require.Equal(t, 1, st.DeployTokensDeleted)
	require.Positive(t, st.Refused)
}

// TestMintSourceFork: a fork's git repository has the history it shares
// with its source.
func TestMintSourceFork(t *testing.T) {
	t.Parallel()
	b := setup(t, gitlabtest.Config{GitDir: t.TempDir()})
	b.project(t, "group/api", "main")
	base := b.commit(t, "group/api", "main", map[string]string{"a": "1"})
	_, err := b.srv.ForkProject("group/api", "someone/api")
	require.NoError(t, err)
	mine := b.commit(t, "someone/api", "feature", map[string]string{"b": "2"})
	src, err := b.p.MintSource(context.Background(), "someone/api", time.Minute)
	require.NoError(t, err)
	dir, err := gitservetest.Fetch(t, src, src.URL, mine)
	require.NoError(t, err)
	parent, _ := gitservetest.Client(t, dir, nil, "cat-file", "-p", "HEAD")
	require.Contains(t, parent, "parent "+base)
	_, err = gitservetest.Fetch(t, src, src.URL, base)
	require.NoError(t, err)
}

// TestMintSourceErrors: what cannot be minted says why.
func TestMintSourceErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, gitlabtest.Config{})
	ctx := context.Background()
	b.project(t, "group/api", "main")
	for _, ttl := range []time.Duration{0, -time.Second, gitlab.MaxSourceTTL + time.Second} {
		_, err := b.p.MintSource(ctx, "group/api", ttl)
		require.ErrorContains(t, err, "ttl", "%s", ttl)
	}
	_, err := b.p.MintSource(ctx, "", time.Minute)
	require.ErrorContains(t, err, "empty")
	_, err = b.p.MintSource(ctx, "group/missing", time.Minute)
	require.ErrorIs(t, err, vcs.ErrNotFound)
	_, err = b.provider(t, "wrong").MintSource(ctx, "group/api", time.Minute)
	require.ErrorIs(t, err, gitlab.ErrUnauthorized)
	require.ErrorContains(t, b.p.RevokeSource(ctx, nil), "no token")
	require.ErrorContains(t, b.p.RevokeSource(ctx, &cikit.CheckoutSource{URL: "x", Token: "gldt-unknown"}), "not a live deploy token")

	limited := setup(t, gitlabtest.Config{RateLimit: 1})
	limited.project(t, "group/api", "main")
	_, err = limited.p.MintSource(ctx, "group/api", time.Minute) // the project's read passes
	var rl *vcs.RateLimitError
	require.ErrorAs(t, err, &rl)
	names, err := limited.srv.DeployTokens("group/api")
	require.NoError(t, err)
	require.Empty(t, names)

	// Without a git directory the server says it serves no git.
	src, err := b.p.MintSource(ctx, "group/api", time.Minute)
	require.NoError(t, err)
	_, err = gitservetest.Fetch(t, src, src.URL, strings.Repeat("a", 40))
	require.ErrorContains(t, err, "serves no git: Config.GitDir is empty")
}

// TestMintSourceImported: a commit of a test's own git repository,
// imported, keeps its SHA, serves its files through the API and is
// fetched by a deploy token.
func TestMintSourceImported(t *testing.T) {
	t.Parallel()
	b := setup(t, gitlabtest.Config{GitDir: t.TempDir()})
	ctx := context.Background()
	b.project(t, "group/api", "main")
	local := t.TempDir()
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "first"}} {
		if args[0] == "add" {
			require.NoError(t, os.WriteFile(local+"/go.mod", []byte("module example.com/x\n"), 0o644))
		}
		out, err := gitservetest.Client(t, local, nil, args...)
		require.NoError(t, err, "%s", out)
	}
	want, _ := gitservetest.Client(t, local, nil, "rev-parse", "HEAD")
	sha, err := b.srv.ImportGit("group/api", "main", local, "HEAD")
	require.NoError(t, err)
	require.Equal(t, want, sha)
	_, err = b.srv.ImportGit("group/api", "main", local, "HEAD")
	require.ErrorContains(t, err, "exists")

	data, err := b.p.ReadFile(ctx, "group/api", sha, "go.mod")
	require.NoError(t, err)
	require.Equal(t, "module example.com/x\n", string(data))
	src, err := b.p.MintSource(ctx, "group/api", time.Minute)
	require.NoError(t, err)
	dir, err := gitservetest.Fetch(t, src, src.URL, sha)
	require.NoError(t, err)
	got, err := os.ReadFile(dir + "/go.mod")
	require.NoError(t, err)
	require.Equal(t, "module example.com/x\n", string(got))
}
