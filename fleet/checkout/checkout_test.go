package checkout_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet/checkout"
	"github.com/cikit/cikit/vcs/gitserve"
	"github.com/cikit/cikit/vcs/gitserve/gitservetest"
)

const (
	repo  = "acme/api"
	user  = "job"
	token = "job-token-7f3a9c"
	// limited may read acme/api only.
	limited = "limited-token-51d2"
)

type bundle struct {
	repos *gitservetest.Repos
	srv   *httptest.Server
	c     *checkout.Checkouter
	cache string
	sha   string // main's head
	ctx   context.Context
}

// authorize lets token read everything and limited read acme/api.
func authorize(r *http.Request, name string) error {
	u, p, ok := r.BasicAuth()
	switch {
	case !ok:
		return gitserve.ErrUnauthenticated
	case u == user && p == token, u == user && p == limited && name == repo:
		return nil
	}
	return errors.New("this job may not read " + name)
}

func setup(t *testing.T) *bundle {
	t.Helper()
	repos := gitservetest.NewRepos(t)
	repos.Create(t, repo, "main")
	sha := repos.Commit(t, repo, "main", map[string]string{"README.md": "hello\n", "src/main.go": "package main\n"})
	cache := t.TempDir()
	c, err := checkout.New(checkout.Config{CacheDir: cache})
	require.NoError(t, err)
	return &bundle{repos: repos, srv: gitservetest.Serve(t, repos.Root, authorize), c: c, cache: cache, sha: sha, ctx: context.Background()}
}

func (b *bundle) source(tok string) *cikit.CheckoutSource {
	return &cikit.CheckoutSource{URL: b.srv.URL + "/" + repo + ".git", Username: user, Token: tok}
}

func (b *bundle) request(t *testing.T, sha string) checkout.Request {
	return checkout.Request{Source: b.source(token), Repository: repo, SHA: sha, Ref: "refs/heads/main", Dir: t.TempDir()}
}

// git runs git in dir and returns its output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return gitservetest.Git(t, dir, "", nil, args...)
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return string(b)
}

func TestCheckout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := b.request(t, b.sha)
	req.Source.ExpiresAt = time.Now().Add(time.Hour)
	var log bytes.Buffer
	req.Log = &log
	res, err := b.c.Checkout(b.ctx, req)
	require.NoError(t, err, log.String())
	require.Equal(t, b.sha, res.Commit)
	require.Positive(t, res.Duration)
	require.EqualValues(t, 5, res.Fetched, "the commit, the root and src trees, two blobs")
	require.Equal(t, "package main\n", read(t, filepath.Join(req.Dir, "src", "main.go")))
	require.Equal(t, b.sha, git(t, req.Dir, "rev-parse", "HEAD"))
	require.Equal(t, "main", git(t, req.Dir, "rev-parse", "--abbrev-ref", "HEAD"), "a branch is checked out as a branch")
	require.Equal(t, "true", git(t, req.Dir, "rev-parse", "--is-shallow-repository"), "shallow by default")
	require.Equal(t, "", git(t, req.Dir, "status", "--porcelain"), "a clean work tree")
	require.Contains(t, log.String(), "Checked out "+b.sha)
	require.Contains(t, log.String(), "HEAD is now at "+b.sha[:12])
}

// The credential reaches git only through its process's environment:
// no file of the workspace or the cache, and no log line, holds it.
func TestCredentialIsNeverStored(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := b.request(t, b.sha)
	var log bytes.Buffer
	req.Log = &log
	_, err := b.c.Checkout(b.ctx, req)
	require.NoError(t, err)
	secrets := []string{token, base64.StdEncoding.EncodeToString([]byte(user + ":" + token))}
	for _, root := range []string{req.Dir, b.cache} {
		files := 0
		require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			files++
			content := read(t, p)
			for _, s := range secrets {
				require.NotContains(t, content, s, p)
			}
			return nil
		}))
		require.Positive(t, files)
	}
	for _, s := range secrets {
		require.NotContains(t, log.String(), s)
	}
	require.Equal(t, b.srv.URL+"/"+repo+".git", git(t, req.Dir, "config", "remote.origin.url"), "origin is the URL without credentials")
	require.NotContains(t, read(t, filepath.Join(req.Dir, ".git", "config")), "extraheader")
}

// A second checkout of the repository fetches only the new commit's
// objects, and one of a commit the cache holds fetches nothing.
func TestIncremental(t *testing.T) {
	t.Parallel()
	b := setup(t)
	files := map[string]string{}
	for i := range 50 {
		files[fmt.Sprintf("pkg/f%d.go", i)] = fmt.Sprintf("package pkg // %d\n", i)
	}
	first := b.repos.Commit(t, repo, "main", files)
	req := b.request(t, first)
	res, err := b.c.Checkout(b.ctx, req)
	require.NoError(t, err)
	require.Greater(t, res.Fetched, int64(50))

	second := b.repos.Commit(t, repo, "main", map[string]string{"pkg/f7.go": "package pkg // changed\n"})
	req.SHA = second
	res, err = b.c.Checkout(b.ctx, req)
	require.NoError(t, err)
	require.EqualValues(t, 4, res.Fetched, "the commit, the root and pkg trees, the changed blob")
	require.Equal(t, second, git(t, req.Dir, "rev-parse", "HEAD"))
	require.Equal(t, "package pkg // changed\n", read(t, filepath.Join(req.Dir, "pkg", "f7.go")))

	other := b.request(t, second)
	var log bytes.Buffer
	other.Log = &log
	res, err = b.c.Checkout(b.ctx, other)
	require.NoError(t, err)
	require.Zero(t, res.Fetched, "another workspace, same commit: nothing travels")
	require.Contains(t, log.String(), "in the runner's cache")
	require.Equal(t, "package pkg // 3\n", read(t, filepath.Join(other.Dir, "pkg", "f3.go")))
}

func TestDepth(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var head string
	for i := range 4 {
		head = b.repos.Commit(t, repo, "main", map[string]string{"n": fmt.Sprint(i)})
	}
	// 5 commits on main.
	req := b.request(t, head)
	req.Options.Depth = 2
	_, err := b.c.Checkout(b.ctx, req)
	require.NoError(t, err)
	require.Equal(t, "2", git(t, req.Dir, "rev-list", "--count", "HEAD"))

	req.Options.Depth = -1
	res, err := b.c.Checkout(b.ctx, req)
	require.NoError(t, err)
	require.Equal(t, "5", git(t, req.Dir, "rev-list", "--count", "HEAD"), "full history")
	require.Equal(t, "false", git(t, req.Dir, "rev-parse", "--is-shallow-repository"))
	require.EqualValues(t, 8, res.Fetched, "the three older commits, their root trees and the two blobs not seen yet")

	// The cache is complete now: a shallow request of a new commit
	// fetches what is new and keeps it complete.
	newer := b.repos.Commit(t, repo, "main", map[string]string{"n": "new"})
	fresh := b.request(t, newer)
	res, err = b.c.Checkout(b.ctx, fresh)
	require.NoError(t, err)
	require.EqualValues(t, 3, res.Fetched)
	require.Equal(t, "6", git(t, fresh.Dir, "rev-list", "--count", "HEAD"), "the cache's history is there")
}

func TestRefs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	feature := b.repos.Commit(t, repo, "feature", map[string]string{"feature.txt": "f"})
	b.repos.SetRef(t, repo, "refs/tags/v1", b.sha)
	for _, tc := range []struct{ ref, commit, branch string }{
		{"v1", b.sha, "HEAD"},
		{"refs/tags/v1", b.sha, "HEAD"},
		{"feature", feature, "HEAD"},
		{"refs/heads/feature", feature, "feature"},
		{feature, feature, "HEAD"},
	} {
		req := b.request(t, b.sha)
		req.Options.Ref = tc.ref
		res, err := b.c.Checkout(b.ctx, req)
		require.NoError(t, err, tc.ref)
		require.Equal(t, tc.commit, res.Commit, tc.ref)
		require.Equal(t, tc.commit, git(t, req.Dir, "rev-parse", "HEAD"), tc.ref)
		require.Equal(t, tc.branch, git(t, req.Dir, "rev-parse", "--abbrev-ref", "HEAD"), tc.ref)
	}
	// A run of a tag is checked out detached.
	req := b.request(t, b.sha)
	req.Ref = "refs/tags/v1"
	_, err := b.c.Checkout(b.ctx, req)
	require.NoError(t, err)
	require.Equal(t, "HEAD", git(t, req.Dir, "rev-parse", "--abbrev-ref", "HEAD"))
}

func TestStrategies(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dir := t.TempDir()
	run := func(o cikit.Checkout) checkout.Result {
		t.Helper()
		req := b.request(t, b.sha)
		req.Dir, req.Options = dir, o
		res, err := b.c.Checkout(b.ctx, req)
		require.NoError(t, err, "%+v", o)
		return res
	}
	untracked := filepath.Join(dir, "build", "out.bin")
	write := func() {
		require.NoError(t, os.MkdirAll(filepath.Dir(untracked), 0o755))
		require.NoError(t, os.WriteFile(untracked, []byte("x"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "README.md"), []byte("edited"), 0o644))
	}
	run(cikit.Checkout{})
	write()
	run(cikit.Checkout{Strategy: "fetch"})
	require.FileExists(t, untracked, "fetch keeps untracked files")
	require.Equal(t, "hello\n", read(t, filepath.Join(dir, "README.md")), "tracked files are reset")
	run(cikit.Checkout{Strategy: "fetch", Clean: true})
	require.NoFileExists(t, untracked, "clean removes them")
	write()
	run(cikit.Checkout{Strategy: "clone"})
	require.NoFileExists(t, untracked, "clone starts afresh")
	require.Equal(t, "hello\n", read(t, filepath.Join(dir, "README.md")))

	none := t.TempDir()
	req := b.request(t, b.sha)
	req.Dir, req.Options = none, cikit.Checkout{Strategy: "none", Path: "sub"}
	res, err := b.c.Checkout(b.ctx, req)
	require.NoError(t, err)
	require.Empty(t, res.Commit)
	entries, err := os.ReadDir(filepath.Join(none, "sub"))
	require.NoError(t, err)
	require.Empty(t, entries, "none: an empty workspace")

	req = b.request(t, b.sha)
	req.Options.Path = "src/api"
	_, err = b.c.Checkout(b.ctx, req)
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(req.Dir, "src", "api", "README.md"))
}

// The workspace of another repository in the same directory is replaced,
// not mixed with this one.
func TestOtherRepository(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.repos.Create(t, "acme/tools", "trunk")
	tools := b.repos.Commit(t, "acme/tools", "trunk", map[string]string{"tool.sh": "echo\n"})

	req := b.request(t, b.sha)
	req.Options = cikit.Checkout{Repository: "acme/tools", Path: "tools"}
	res, err := b.c.Checkout(b.ctx, req)
	require.NoError(t, err)
	require.Equal(t, tools, res.Commit, "the default branch when no ref is given")
	require.Equal(t, "echo\n", read(t, filepath.Join(req.Dir, "tools", "tool.sh")))
	require.Equal(t, b.srv.URL+"/acme/tools.git", git(t, filepath.Join(req.Dir, "tools"), "config", "remote.origin.url"))

	// A job whose credential may not read it is refused, even when the
	// runner's cache holds the commit: a configuration error.
	for _, ref := range []string{"", tools} {
		req := b.request(t, b.sha)
		req.Source = b.source(limited)
		req.Options = cikit.Checkout{Repository: "acme/tools", Ref: ref}
		_, err = b.c.Checkout(b.ctx, req)
		require.ErrorIs(t, err, checkout.ErrAccessDenied, "ref %q", ref)
		require.Equal(t, cikit.FailureConfig, checkout.Class(err))
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.repos.Create(t, "acme/tools", "main")
	b.repos.Commit(t, "acme/tools", "main", map[string]string{"x": "x"})
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	missing := strings.Repeat("ab", 20)
	for _, tc := range []struct {
		name   string
		change func(*checkout.Request)
		want   error
		class  cikit.FailureClass
	}{
		{"missing commit", func(r *checkout.Request) { r.SHA = missing }, checkout.ErrCommitNotFound, cikit.FailureConfig},
		{"missing ref", func(r *checkout.Request) { r.Options.Ref = "nope" }, checkout.ErrCommitNotFound, cikit.FailureConfig},
		{"missing branch", func(r *checkout.Request) { r.Options.Ref = "refs/heads/nope" }, checkout.ErrCommitNotFound, cikit.FailureConfig},
		{"missing repository", func(r *checkout.Request) {
			r.Source.URL = b.srv.URL + "/acme/nope.git"
		}, checkout.ErrRepositoryNotFound, cikit.FailureConfig},
		{"wrong token", func(r *checkout.Request) { r.Source.Token = "guess" }, checkout.ErrAccessDenied, cikit.FailureInfrastructure},
		{"no token", func(r *checkout.Request) { r.Source.Username, r.Source.Token = "", "" }, checkout.ErrAccessDenied, cikit.FailureInfrastructure},
		{"unreachable", func(r *checkout.Request) { r.Source.URL = closed.URL + "/acme/api.git" }, checkout.ErrUnreachable, cikit.FailureInfrastructure},
		{"bad SHA", func(r *checkout.Request) { r.SHA = "main" }, checkout.ErrInvalidRequest, cikit.FailureConfig},
		{"bad ref", func(r *checkout.Request) { r.Options.Ref = "--upload-pack=evil" }, checkout.ErrInvalidRequest, cikit.FailureConfig},
		{"revision syntax", func(r *checkout.Request) { r.Options.Ref = "main~1" }, checkout.ErrInvalidRequest, cikit.FailureConfig},
		{"path out", func(r *checkout.Request) { r.Options.Path = "../x" }, checkout.ErrInvalidRequest, cikit.FailureConfig},
		{"absolute path", func(r *checkout.Request) { r.Options.Path = "/etc" }, checkout.ErrInvalidRequest, cikit.FailureConfig},
		{"relative dir", func(r *checkout.Request) { r.Dir = "ws" }, checkout.ErrInvalidRequest, cikit.FailureConfig},
		{"strategy", func(r *checkout.Request) { r.Options.Strategy = "copy" }, checkout.ErrInvalidRequest, cikit.FailureConfig},
		{"submodules", func(r *checkout.Request) { r.Options.Submodules = "true" }, checkout.ErrInvalidRequest, cikit.FailureConfig},
		{"depth", func(r *checkout.Request) { r.Options.Depth = -2 }, checkout.ErrInvalidRequest, cikit.FailureConfig},
		{"bad repository", func(r *checkout.Request) { r.Options.Repository = "../etc" }, checkout.ErrInvalidRequest, cikit.FailureConfig},
		{"credentials in URL", func(r *checkout.Request) {
			r.Source.URL = strings.Replace(r.Source.URL, "http://", "http://job:"+token+"@", 1)
		}, checkout.ErrInvalidRequest, cikit.FailureConfig},
		{"credentials in a file URL", func(r *checkout.Request) { r.Source.URL = "file://job:" + token + "@h/x" }, checkout.ErrInvalidRequest, cikit.FailureConfig},
		{"token in the query", func(r *checkout.Request) { r.Source.URL += "?private_token=" + token }, checkout.ErrInvalidRequest, cikit.FailureConfig},
		{"unparsable URL with a token", func(r *checkout.Request) { r.Source.URL = "http://job:" + token + "@h/%zz" }, checkout.ErrInvalidRequest, cikit.FailureConfig},
		{"file URL", func(r *checkout.Request) { r.Source.URL = "file://" + b.repos.Dir(repo) }, checkout.ErrInvalidRequest, cikit.FailureConfig},
		{"no source", func(r *checkout.Request) { r.Source = nil }, checkout.ErrInvalidRequest, cikit.FailureConfig},
		{"bad run repository", func(r *checkout.Request) { r.Repository = "api" }, checkout.ErrInvalidRequest, cikit.FailureConfig},
		{"expired credential", func(r *checkout.Request) {
			r.Source.ExpiresAt = time.Now().Add(-time.Minute)
		}, checkout.ErrAccessDenied, cikit.FailureInfrastructure},
		{"expired credential, other repository", func(r *checkout.Request) {
			r.Source.ExpiresAt = time.Now().Add(-time.Minute)
			r.Options.Repository = "acme/tools"
		}, checkout.ErrAccessDenied, cikit.FailureConfig},
	} {
		req := b.request(t, b.sha)
		var log bytes.Buffer
		req.Log = &log
		tc.change(&req)
		_, err := b.c.Checkout(b.ctx, req)
		require.ErrorIs(t, err, tc.want, tc.name)
		require.Equal(t, tc.class, checkout.Class(err), "%s: %v", tc.name, err)
		require.NotContains(t, err.Error(), token, tc.name)
		require.NotContains(t, log.String(), token, tc.name)
	}
}

// hangingServer serves HTTP requests that never get an answer until the
// test ends.
func hangingServer(t *testing.T) *httptest.Server {
	t.Helper()
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(hang.Close)
	t.Cleanup(func() { close(release) })
	return hang
}

// A remote that accepts the connection and never answers is given up on
// at the checkout's timeout, as an infrastructure failure.
func TestTimeout(t *testing.T) {
	t.Parallel()
	hang := hangingServer(t)
	c, err := checkout.New(checkout.Config{CacheDir: t.TempDir(), Timeout: 500 * time.Millisecond})
	require.NoError(t, err)
	_, err = c.Checkout(context.Background(), checkout.Request{
		Source: &cikit.CheckoutSource{URL: hang.URL + "/acme/api.git"}, Repository: repo,
		SHA: strings.Repeat("1", 40), Dir: t.TempDir(),
	})
	require.ErrorIs(t, err, checkout.ErrUnreachable)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), "timed out after 500ms")
	require.Equal(t, cikit.FailureInfrastructure, checkout.Class(err))
}

// A transfer that stops moving is given up on after the stall timeout,
// long before the checkout's own.
func TestStall(t *testing.T) {
	t.Parallel()
	hang := hangingServer(t)
	c, err := checkout.New(checkout.Config{CacheDir: t.TempDir(), StallTimeout: time.Second, Timeout: time.Hour})
	require.NoError(t, err)
	_, err = c.Checkout(context.Background(), checkout.Request{
		Source: &cikit.CheckoutSource{URL: hang.URL + "/acme/api.git"}, Repository: repo,
		SHA: strings.Repeat("1", 40), Dir: t.TempDir(),
	})
	require.ErrorIs(t, err, checkout.ErrUnreachable)
	require.NotErrorIs(t, err, context.DeadlineExceeded, "git gave up, not the checkout's timeout")
	require.Equal(t, cikit.FailureInfrastructure, checkout.Class(err))
}

// By default the work tree borrows the cache's objects, which the result
// names for the sandbox to show; dissociated, it works without the cache.
func TestAlternatesAndDissociate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := b.request(t, b.sha)
	res, err := b.c.Checkout(b.ctx, req)
	require.NoError(t, err)
	require.Len(t, res.Alternates, 1)
	require.True(t, strings.HasPrefix(res.Alternates[0], b.cache+string(filepath.Separator)), res.Alternates)
	require.Equal(t, res.Alternates[0]+"\n", read(t, filepath.Join(req.Dir, ".git", "objects", "info", "alternates")))

	for _, depth := range []int{0, -1} {
		// Dissociated by the Checkouter's Config, then by the Request.
		for _, perRequest := range []bool{false, true} {
			cache := t.TempDir()
			c, err := checkout.New(checkout.Config{CacheDir: cache, Dissociate: !perRequest})
			require.NoError(t, err)
			req := b.request(t, b.sha)
			req.Options.Depth, req.Dissociate = depth, perRequest
			res, err = c.Checkout(b.ctx, req)
			require.NoError(t, err)
			require.Empty(t, res.Alternates)
			require.NoFileExists(t, filepath.Join(req.Dir, ".git", "objects", "info", "alternates"))
			require.NoError(t, os.RemoveAll(cache))
			git(t, req.Dir, "fsck", "--no-dangling")
			require.Equal(t, "", git(t, req.Dir, "status", "--porcelain"))
			require.Equal(t, "hello\n", git(t, req.Dir, "show", "HEAD:README.md")+"\n")
		}
	}
}

// TestCommitInTheCache: the commit is checked and its subject read from
// the cache whether its object is loose, as a small fetch leaves it, or
// packed; an object that is no commit is ErrCommitNotFound.
func TestCommitInTheCache(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		repack bool
		blob   bool
	}{
		{name: "loose"},
		{name: "packed", repack: true},
		{name: "a blob", blob: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			req := b.request(t, b.sha)
			_, err := b.c.Checkout(b.ctx, req)
			require.NoError(t, err)
			mirrors, err := filepath.Glob(filepath.Join(b.cache, "*.git"))
			require.NoError(t, err)
			require.Len(t, mirrors, 1)
			if tc.repack {
				git(t, mirrors[0], "repack", "-a", "-d", "-q")
				require.NoFileExists(t, filepath.Join(mirrors[0], "objects", b.sha[:2], b.sha[2:]))
			}
			req = b.request(t, b.sha)
			if tc.blob {
				req.SHA = git(t, mirrors[0], "rev-parse", b.sha+":README.md")
			}
			var log bytes.Buffer
			req.Log = &log
			_, err = b.c.Checkout(b.ctx, req)
			if tc.blob {
				require.ErrorIs(t, err, checkout.ErrCommitNotFound)
				return
			}
			require.NoError(t, err)
			require.Contains(t, log.String(), "Commit "+b.sha+" is in the runner's cache\n")
			require.Contains(t, log.String(), "HEAD is now at "+b.sha[:12]+" "+git(t, req.Dir, "log", "-1", "--format=%s")+"\n")
		})
	}
}

// TestObjectDir: ObjectDir names, before the checkout, the directory the
// work tree will borrow from, which exists already, even in an empty
// cache; a request Checkout refuses it refuses alike, and strategy none
// borrows nothing.
func TestObjectDir(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		name    string
		mutate  func(*checkout.Request)
		want    bool // a directory
		invalid bool
	}{
		{name: "the run's commit", want: true},
		{name: "another ref", mutate: func(r *checkout.Request) { r.Options.Ref = "main" }, want: true},
		{name: "strategy none", mutate: func(r *checkout.Request) { r.Options.Strategy = "none" }},
		{name: "not a SHA", mutate: func(r *checkout.Request) { r.SHA = "main" }, invalid: true},
		{name: "credentials in the URL", mutate: func(r *checkout.Request) {
			r.Source = &cikit.CheckoutSource{URL: "http://u:p@example.com/acme/api.git"}
		}, invalid: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cache := t.TempDir()
			c, err := checkout.New(checkout.Config{CacheDir: cache})
			require.NoError(t, err)
			req := b.request(t, b.sha)
			if tc.mutate != nil {
				tc.mutate(&req)
			}
			dir, err := c.ObjectDir(b.ctx, req)
			if tc.want {
				require.NoError(t, err)
				require.DirExists(t, dir, "before the checkout")
			}
			_, checkoutErr := c.Checkout(b.ctx, req)
			if tc.invalid {
				require.ErrorIs(t, err, checkout.ErrInvalidRequest)
				require.ErrorIs(t, checkoutErr, checkout.ErrInvalidRequest)
				require.Equal(t, checkout.Class(checkoutErr), checkout.Class(err))
				return
			}
			require.NoError(t, checkoutErr)
			if !tc.want {
				require.Empty(t, dir)
				return
			}
			res, err := c.Checkout(b.ctx, req)
			require.NoError(t, err)
			require.Equal(t, []string{dir}, res.Alternates)
		})
	}
}

// Nothing a job leaves in its workspace runs, or is written through, when
// the next checkout (outside the sandbox) reuses the directory: not its
// git configuration, not its hooks, not a symbolic link on the path.
func TestEarlierJobCannotRunCode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := b.request(t, b.sha)
	req.Options.Path = "sub/api"
	_, err := b.c.Checkout(b.ctx, req)
	require.NoError(t, err)

	// What a malicious step would leave behind.
	marker := filepath.Join(t.TempDir(), "ran")
	tree := filepath.Join(req.Dir, "sub", "api")
	evil := "#!/bin/sh\ntouch " + marker + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(tree, "evil.sh"), []byte(evil), 0o755))
	f, err := os.OpenFile(filepath.Join(tree, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = fmt.Fprintf(f, "[core]\n\tfsmonitor = %s\n\thooksPath = %s\n", filepath.Join(tree, "evil.sh"), filepath.Join(tree, "hooks"))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, os.MkdirAll(filepath.Join(tree, "hooks"), 0o755))
	for _, hook := range []string{"post-checkout", "reference-transaction"} {
		require.NoError(t, os.WriteFile(filepath.Join(tree, "hooks", hook), []byte(evil), 0o755))
	}
	// They would run, were the git directory reused.
	git(t, tree, "status")
	require.FileExists(t, marker)
	require.NoError(t, os.Remove(marker))

	_, err = b.c.Checkout(b.ctx, req)
	require.NoError(t, err)
	require.NoFileExists(t, marker, "the earlier job's configuration and hooks did not run")
	require.Equal(t, b.sha, git(t, tree, "rev-parse", "HEAD"))

	// A link where the work tree's directory was leads nowhere.
	outside := t.TempDir()
	require.NoError(t, os.RemoveAll(filepath.Join(req.Dir, "sub")))
	require.NoError(t, os.Symlink(outside, filepath.Join(req.Dir, "sub")))
	_, err = b.c.Checkout(b.ctx, req)
	require.NoError(t, err)
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	require.Empty(t, entries, "nothing was written through the link")
	require.Equal(t, "hello\n", read(t, filepath.Join(tree, "README.md")))
}

// A runner killed in the middle of a fetch leaves git's lock files in the
// mirror; the next checkout does not stumble on them.
func TestStaleLocks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.c.Checkout(b.ctx, b.request(t, b.sha))
	require.NoError(t, err)
	mirrors, err := filepath.Glob(filepath.Join(b.cache, "*.git"))
	require.NoError(t, err)
	require.Len(t, mirrors, 1)
	for _, p := range []string{"shallow.lock", "packed-refs.lock", "refs/cikit/heads/main.lock"} {
		require.NoError(t, os.WriteFile(filepath.Join(mirrors[0], p), nil, 0o644))
	}
	next := b.repos.Commit(t, repo, "main", map[string]string{"n": "1"})
	res, err := b.c.Checkout(b.ctx, b.request(t, next))
	require.NoError(t, err)
	require.Equal(t, next, res.Commit)
}

// The work tree is given to the user the job runs as: run as root, the
// test gives it to nobody.
func TestOwner(t *testing.T) {
	t.Parallel()
	b := setup(t)
	owner := checkout.Owner{UID: os.Geteuid(), GID: os.Getegid()}
	if owner.UID == 0 {
		owner = checkout.Owner{UID: 65534, GID: 65534}
	}
	req := b.request(t, b.sha)
	req.Options.Path = "a/b"
	req.Owner = &owner
	// The executor gives the workspace to the job's user before.
	require.NoError(t, os.Lchown(req.Dir, owner.UID, owner.GID))
	_, err := b.c.Checkout(b.ctx, req)
	require.NoError(t, err)
	// A second checkout into the work tree the job's user owns.
	req.SHA = b.repos.Commit(t, repo, "main", map[string]string{"n": "2"})
	_, err = b.c.Checkout(b.ctx, req)
	require.NoError(t, err)
	n := 0
	require.NoError(t, filepath.WalkDir(filepath.Join(req.Dir, "a"), func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		require.NoError(t, err)
		st := fi.Sys().(*syscall.Stat_t)
		require.Equal(t, owner, checkout.Owner{UID: int(st.Uid), GID: int(st.Gid)}, p)
		n++
		return nil
	}))
	require.Greater(t, n, 5)
	// The mirror is readable by that user: work trees borrow from it.
	mirrors, err := filepath.Glob(filepath.Join(b.cache, "*.git"))
	require.NoError(t, err)
	fi, err := os.Stat(mirrors[0])
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o755), fi.Mode().Perm())
}

// Jobs checking out the same repository at once share one fetch: the
// mirror's lock lets one fetch while the others wait and then find the
// commit in the cache.
func TestConcurrent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// A second Checkouter on the same cache, as a second runner process
	// would be.
	c2, err := checkout.New(checkout.Config{CacheDir: b.cache})
	require.NoError(t, err)
	const jobs = 6
	var wg sync.WaitGroup
	results := make([]checkout.Result, jobs)
	errs := make([]error, jobs)
	reqs := make([]checkout.Request, jobs)
	for i := range jobs {
		reqs[i] = b.request(t, b.sha)
		c := b.c
		if i%2 == 1 {
			c = c2
		}
		wg.Go(func() { results[i], errs[i] = c.Checkout(b.ctx, reqs[i]) })
	}
	wg.Wait()
	var fetched int64
	for i := range jobs {
		require.NoError(t, errs[i])
		require.Equal(t, "hello\n", read(t, filepath.Join(reqs[i].Dir, "README.md")))
		fetched += results[i].Fetched
	}
	require.EqualValues(t, 5, fetched, "one job fetched, the others found the commit cached")
}

func TestSubmodules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.repos.Create(t, "acme/deep", "main")
	deep := b.repos.Commit(t, "acme/deep", "main", map[string]string{"deep.txt": "deep\n"})
	b.repos.Create(t, "acme/lib", "main")
	lib := commitWithSubmodule(t, b.repos, "acme/lib", "main", "../deep.git", "deep", deep, map[string]string{"lib.txt": "lib\n"})
	top := commitWithSubmodule(t, b.repos, repo, "main", "../lib.git", "lib", lib, nil)

	for _, tc := range []struct {
		mode string
		deep bool
	}{{"normal", false}, {"recursive", true}} {
		req := b.request(t, top)
		req.Options.Submodules = tc.mode
		_, err := b.c.Checkout(b.ctx, req)
		require.NoError(t, err, tc.mode)
		require.Equal(t, "lib\n", read(t, filepath.Join(req.Dir, "lib", "lib.txt")), tc.mode)
		if tc.deep {
			require.Equal(t, "deep\n", read(t, filepath.Join(req.Dir, "lib", "deep", "deep.txt")))
		} else {
			require.NoFileExists(t, filepath.Join(req.Dir, "lib", "deep", "deep.txt"))
		}
		require.NotContains(t, read(t, filepath.Join(req.Dir, ".git", "config")), token)
	}
	// Without the option, the submodule's directory stays empty.
	req := b.request(t, top)
	_, err := b.c.Checkout(b.ctx, req)
	require.NoError(t, err)
	require.NoFileExists(t, filepath.Join(req.Dir, "lib", "lib.txt"))

	// A submodule URL on this machine is refused: it could read the
	// runner's cache of another repository.
	evil := commitWithSubmodule(t, b.repos, repo, "evil", "file://"+b.repos.Dir("acme/deep"), "evil", deep, nil)
	req = b.request(t, evil)
	req.Options.Submodules = "normal"
	_, err = b.c.Checkout(b.ctx, req)
	require.ErrorIs(t, err, checkout.ErrInvalidRequest)
	require.Equal(t, cikit.FailureConfig, checkout.Class(err))
	require.Contains(t, err.Error(), "transport 'file' not allowed")
	require.NoFileExists(t, filepath.Join(req.Dir, "evil", "deep.txt"))
}

// commitWithSubmodule commits on branch of r a .gitmodules naming url at
// path, the submodule at commit sub, and files.
func commitWithSubmodule(t *testing.T, repos *gitservetest.Repos, r, branch, url, path, sub string, files map[string]string) string {
	t.Helper()
	if files == nil {
		files = map[string]string{}
	}
	files[".gitmodules"] = fmt.Sprintf("[submodule %q]\n\tpath = %s\n\turl = %s\n", path, path, url)
	sha := repos.Commit(t, r, branch, files)
	dir := repos.Dir(r)
	env := []string{"GIT_INDEX_FILE=" + filepath.Join(t.TempDir(), "index")}
	gitservetest.Git(t, dir, "", env, "read-tree", sha)
	gitservetest.Git(t, dir, fmt.Sprintf("160000 %s\t%s\n", sub, path), env, "update-index", "--index-info")
	tree := gitservetest.Git(t, dir, "", env, "write-tree")
	commit := gitservetest.Git(t, dir, "", env, "commit-tree", tree, "-p", sha, "-m", "add "+path)
	repos.SetRef(t, r, "refs/heads/"+branch, commit)
	return commit
}

func TestNew(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]checkout.Config{
		"no cache":         {},
		"negative timeout": {CacheDir: t.TempDir(), Timeout: -1},
		"negative stall":   {CacheDir: t.TempDir(), StallTimeout: -1},
		"no git":           {CacheDir: t.TempDir(), Git: "no-such-git"},
		"cache is a file":  {CacheDir: "checkout_test.go/x"},
	} {
		_, err := checkout.New(cfg)
		require.Error(t, err, name)
	}
}
