package github_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/vcs"
	"github.com/cikit/cikit/vcs/github"
	"github.com/cikit/cikit/vcs/github/githubtest"
	"github.com/cikit/cikit/vcs/gitserve/gitservetest"
)

// TestMintSource: the minted credential fetches its repository's commit
// with a real git client, and nothing else: not another repository of
// the same installation, not a push, not an API call beyond contents.
func TestMintSource(t *testing.T) {
	t.Parallel()
	b := setupServer(t, githubtest.Config{GitDir: t.TempDir()})
	ctx := context.Background()
	require.NoError(t, b.srv.CreateRepo("acme/api", "main"))
	require.NoError(t, b.srv.CreateRepo("acme/secret", "main"))
	_, err := b.srv.Install(appID, "acme/api", "acme/secret")
	require.NoError(t, err)
	first, err := b.srv.Commit("acme/api", "main", map[string]string{"go.mod": "module example.com/api\n"})
	require.NoError(t, err)
	sha, err := b.srv.Commit("acme/api", "main", map[string]string{"api.go": "package api\n", "sub/dir/x.txt": "x\n"})
	require.NoError(t, err)
	secret, err := b.srv.Commit("acme/secret", "main", map[string]string{"key": "hunter2\n"})
	require.NoError(t, err)

	p := b.app(t)
	src, err := p.MintSource(ctx, "acme/api", 10*time.Minute)
	require.NoError(t, err)
	require.Equal(t, b.ts.URL+"/acme/api.git", src.URL)
	require.Equal(t, github.SourceUsername, src.Username)
	require.True(t, strings.HasPrefix(src.Token, "ghs_"))
	require.Equal(t, b.clock.Now().Add(time.Hour), src.ExpiresAt)
	require.NotContains(t, src.String(), src.Token)

	// The commit, and only it, depth 1; its files are the API's.
	dir, err := gitservetest.Fetch(t, src, src.URL, sha)
	require.NoError(t, err)
	head, _ := gitservetest.Client(t, dir, nil, "rev-parse", "HEAD")
	require.Equal(t, sha, head)
	data, err := os.ReadFile(dir + "/sub/dir/x.txt")
	require.NoError(t, err)
	require.Equal(t, "x\n", string(data))
	count, _ := gitservetest.Client(t, dir, nil, "rev-list", "--count", "HEAD")
	require.Equal(t, "1", count)
	// An older commit, not a ref's tip, is fetched by its SHA too.
	_, err = gitservetest.Fetch(t, src, src.URL, first)
	require.NoError(t, err)

	// Another repository the installation covers is not the token's.
	_, err = gitservetest.Fetch(t, src, b.ts.URL+"/acme/secret.git", secret)
	require.ErrorContains(t, err, "not found")
	other, err := p.MintSource(ctx, "acme/secret", 10*time.Minute)
	require.NoError(t, err)
	_, err = gitservetest.Fetch(t, other, b.ts.URL+"/acme/api.git", sha)
	require.Error(t, err, "nor the other way round")

	// No push, even of a commit on top of the fetched one.
	_, err = gitservetest.Client(t, dir, nil, "commit", "-q", "--allow-empty", "-m", "injected")
	require.NoError(t, err)
	out, err := gitservetest.Client(t, dir, src, "push", src.URL, "HEAD:refs/heads/main")
	require.Error(t, err)
	require.Contains(t, out, "403")
	main, err := p.ResolveRef(ctx, "acme/api", "main")
	require.NoError(t, err)
	require.Equal(t, sha, main, "the push moved nothing")

	// A wrong token is refused with a challenge (git then wants a
	// user name it cannot prompt for), as is no credential.
	refused := b.srv.Stats().GitRefused
	_, err = gitservetest.Fetch(t, &cikit.CheckoutSource{Username: github.SourceUsername, Token: "ghs_wrong"}, src.URL, sha)
	require.ErrorContains(t, err, "could not read Username")
	_, err = gitservetest.Fetch(t, nil, src.URL, sha)
	require.ErrorContains(t, err, "could not read Username")
	require.Equal(t, refused+2, b.srv.Stats().GitRefused)

	// Through the API the token reads the repository's contents and
	// does nothing else.
	tp, err := github.New(github.Config{BaseURL: b.ts.URL, HTTPClient: b.ts.Client(), Token: src.Token, Now: b.clock.Now})
	require.NoError(t, err)
	got, err := tp.ReadFile(ctx, "acme/api", sha, "api.go")
	require.NoError(t, err)
	require.Equal(t, "package api\n", string(got))
	_, err = tp.ReadFile(ctx, "acme/secret", secret, "key")
	require.ErrorIs(t, err, vcs.ErrNotFound)
	err = tp.SetStatus(ctx, "acme/api", sha, &vcs.Status{Context: "x", State: vcs.StateSuccess})
	require.ErrorContains(t, err, "403")
	_, _, err = tp.OpenPullRequest(ctx, "acme/api", "main")
	require.ErrorContains(t, err, "403")

	// Each mint is its own token; the Provider's own token is apart.
	again, err := p.MintSource(ctx, "acme/api", 10*time.Minute)
	require.NoError(t, err)
	require.NotEqual(t, src.Token, again.Token)

	// Revoked, it stops working; revoking twice is no error.
	require.NoError(t, p.RevokeSource(ctx, src))
	_, err = gitservetest.Fetch(t, src, src.URL, sha)
	require.ErrorContains(t, err, "could not read Username")
	require.NoError(t, p.RevokeSource(ctx, src))
	_, err = gitservetest.Fetch(t, again, again.URL, sha)
	require.NoError(t, err, "revoking one token leaves the others")
	require.Equal(t, 1, b.srv.Stats().TokensRevoked)

	// Expired, it stops working too.
	b.clock.Advance(time.Hour)
	_, err = gitservetest.Fetch(t, again, again.URL, sha)
	require.ErrorContains(t, err, "could not read Username")
}

// TestMintSourceErrors: what cannot be minted says why.
func TestMintSourceErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.repo(t, "acme/api", map[string]string{"a": "1"})
	require.NoError(t, b.srv.CreateRepo("acme/elsewhere", "main"))
	p := b.app(t)

	_, err := b.pat(t).MintSource(ctx, "acme/api", time.Minute)
	require.ErrorIs(t, err, github.ErrCannotMint)
	for _, ttl := range []time.Duration{0, -time.Second, github.MaxSourceTTL + time.Second} {
		_, err = p.MintSource(ctx, "acme/api", ttl)
		require.ErrorContains(t, err, "ttl", "%s", ttl)
	}
	_, err = p.MintSource(ctx, "acme", time.Minute)
	require.ErrorContains(t, err, "not owner/name")
	_, err = p.MintSource(ctx, "acme/elsewhere", time.Minute)
	require.ErrorIs(t, err, github.ErrNotInstalled)
	require.ErrorIs(t, err, vcs.ErrNotFound)
	require.Zero(t, b.srv.Stats().TokensIssued)

	b.srv.SetRateLimit(githubtest.RateLimit{Requests: 1, Kind: githubtest.Secondary})
	_, err = p.MintSource(ctx, "acme/api", time.Minute) // the installation lookup
	var rl *vcs.RateLimitError
	require.ErrorAs(t, err, &rl)
	require.Equal(t, time.Minute, rl.RetryAfter)
	b.srv.SetRateLimit(githubtest.RateLimit{})

	require.ErrorContains(t, p.RevokeSource(ctx, nil), "no token")
}

// TestMintSourceShortToken: a token that would end before the job's ttl
// is refused rather than handed out.
func TestMintSourceShortToken(t *testing.T) {
	t.Parallel()
	b := setupServer(t, githubtest.Config{TokenTTL: 5 * time.Minute})
	b.repo(t, "acme/api", map[string]string{"a": "1"})
	_, err := b.app(t).MintSource(context.Background(), "acme/api", 10*time.Minute)
	require.ErrorContains(t, err, "before the 10m0s asked for")
}

// TestMintSourceReinstalled: an installation that went away since it was
// found is looked up again.
func TestMintSourceReinstalled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	require.NoError(t, b.srv.CreateRepo("acme/api", "main"))
	old, err := b.srv.Install(appID, "acme/api")
	require.NoError(t, err)
	p := b.app(t)
	_, err = p.MintSource(ctx, "acme/api", time.Minute)
	require.NoError(t, err)
	require.NoError(t, b.srv.Uninstall(old))
	_, err = b.srv.Install(appID, "acme/api")
	require.NoError(t, err)
	_, err = p.MintSource(ctx, "acme/api", time.Minute)
	require.NoError(t, err)
	require.Equal(t, 2, b.srv.Stats().InstallationLookups)
}

// localRepo makes a git repository of the test's own with two commits
// and returns it and its commits.
func localRepo(t *testing.T) (dir, first, second string) {
	t.Helper()
	dir = t.TempDir()
	run := func(args ...string) string {
		out, err := gitservetest.Client(t, dir, nil, args...)
		require.NoError(t, err, "git %v: %s", args, out)
		return out
	}
	run("init", "-q", "-b", "main")
	require.NoError(t, os.WriteFile(dir+"/go.mod", []byte("module example.com/x\n"), 0o644))
	run("add", "-A")
	run("commit", "-q", "-m", "first")
	first = run("rev-parse", "HEAD")
	require.NoError(t, os.MkdirAll(dir+"/cmd/x", 0o755))
	require.NoError(t, os.WriteFile(dir+"/cmd/x/main.go", []byte("package main\n"), 0o755))
	run("add", "-A")
	run("commit", "-q", "-m", "second")
	second = run("rev-parse", "HEAD")
	return dir, first, second
}

// TestMintSourceImported: a commit of a test's own git repository,
// imported, keeps its SHA, serves its files through the API and is
// fetched whole with its history.
func TestMintSourceImported(t *testing.T) {
	t.Parallel()
	b := setupServer(t, githubtest.Config{GitDir: t.TempDir()})
	ctx := context.Background()
	require.NoError(t, b.srv.CreateRepo("acme/api", "main"))
	_, err := b.srv.Install(appID, "acme/api")
	require.NoError(t, err)
	local, first, second := localRepo(t)
	sha, err := b.srv.ImportGit("acme/api", "main", local, "main")
	require.NoError(t, err)
	require.Equal(t, second, sha)
	_, err = b.srv.ImportGit("acme/api", "main", local, "no-such-branch")
	require.ErrorContains(t, err, "no-such-branch")

	p := b.app(t)
	data, err := p.ReadFile(ctx, "acme/api", sha, "cmd/x/main.go")
	require.NoError(t, err)
	require.Equal(t, "package main\n", string(data))
	src, err := p.MintSource(ctx, "acme/api", time.Minute)
	require.NoError(t, err)
	dir, err := gitservetest.Fetch(t, src, src.URL, sha)
	require.NoError(t, err)
	got, err := os.ReadFile(dir + "/go.mod")
	require.NoError(t, err)
	require.Equal(t, "module example.com/x\n", string(got))
	_, err = gitservetest.Fetch(t, src, src.URL, first)
	require.NoError(t, err, "the real commit's parent came along")
}

// TestMintSourceLongest: the longest ttl is met by GitHub's hour even
// when the clock here runs ahead of GitHub's (less than the minute the
// App's JWT allows) and the answer takes time.
func TestMintSourceLongest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.repo(t, "acme/api", map[string]string{"a": "1"})
	p, err := github.New(github.Config{BaseURL: b.ts.URL, HTTPClient: b.ts.Client(), AppID: appID, PrivateKey: keyPEM(appKey()),
		Now: func() time.Time { return b.clock.Now().Add(50*time.Second + 700*time.Millisecond) }})
	require.NoError(t, err)
	src, err := p.MintSource(context.Background(), "acme/api", github.MaxSourceTTL)
	require.NoError(t, err)
	require.Equal(t, b.clock.Now().Add(time.Hour), src.ExpiresAt)
}
