package gitserve_test

import (
	"bytes"
	"compress/gzip"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/vcs/gitserve"
	"github.com/cikit/cikit/vcs/gitserve/gitservetest"
)

const (
	repo     = "acme/api"
	user     = "job"
	password = "s3cret-token"
)

type bundle struct {
	repos *gitservetest.Repos
	srv   *httptest.Server
	url   string // the repository's URL
	sha   string // main's head
}

func setup(t *testing.T) *bundle {
	t.Helper()
	repos := gitservetest.NewRepos(t)
	repos.Create(t, repo, "main")
	sha := repos.Commit(t, repo, "main", map[string]string{"README.md": "hello\n", "src/main.go": "package main\n"})
	srv := gitservetest.Serve(t, repos.Root, gitservetest.BasicAuth(user, password))
	return &bundle{repos: repos, srv: srv, url: srv.URL + "/" + repo + ".git", sha: sha}
}

// gitClient runs the git client in dir with a clean environment and the
// credential (if any) as an HTTP header, returning its combined output
// and error.
func gitClient(t *testing.T, dir, cred string, args ...string) (string, error) {
	t.Helper()
	env := append(append([]string{}, gitservetest.Env...), "PATH="+os.Getenv("PATH"))
	if cred != "" {
		env = append(env, "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.extraHeader",
			"GIT_CONFIG_VALUE_0=Authorization: Basic "+cred)
	}
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// basic is the base64 of user:password, as an Authorization header
// carries it.
func basic(u, p string) string {
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	r.SetBasicAuth(u, p)
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Basic ")
}

func TestCloneAndFetch(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"0", "2"} {
		t.Run("protocol v"+version, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			work := t.TempDir()
			out, err := gitClient(t, work, basic(user, password), "-c", "protocol.version="+version, "clone", "--quiet", b.url, "w")
			require.NoError(t, err, out)
			got, err := os.ReadFile(filepath.Join(work, "w", "src", "main.go"))
			require.NoError(t, err)
			require.Equal(t, "package main\n", string(got))
			head, err := gitClient(t, filepath.Join(work, "w"), "", "rev-parse", "HEAD")
			require.NoError(t, err)
			require.Equal(t, b.sha, strings.TrimSpace(head))

			// A commit no ref points to any more (a force-push moved
			// its branch) is still fetched by its SHA, shallow.
			lost := b.repos.Commit(t, repo, "topic", map[string]string{"lost.txt": "x"})
			b.repos.SetRef(t, repo, "refs/heads/topic", "")
			shallow := t.TempDir()
			_, err = gitClient(t, shallow, "", "init", "--quiet")
			require.NoError(t, err)
			out, err = gitClient(t, shallow, basic(user, password), "-c", "protocol.version="+version,
				"fetch", "--quiet", "--depth=1", b.url, lost)
			require.NoError(t, err, out)
			typ, err := gitClient(t, shallow, "", "cat-file", "-t", lost)
			require.NoError(t, err, typ)
			require.Equal(t, "commit", strings.TrimSpace(typ))
		})
	}
}

func TestPushIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	work := t.TempDir()
	out, err := gitClient(t, work, basic(user, password), "clone", "--quiet", b.url, "w")
	require.NoError(t, err, out)
	w := filepath.Join(work, "w")
	require.NoError(t, os.WriteFile(filepath.Join(w, "new.txt"), []byte("new"), 0o644))
	_, err = gitClient(t, w, "", "add", "new.txt")
	require.NoError(t, err)
	out, err = gitClient(t, w, "", "commit", "--quiet", "-m", "push me")
	require.NoError(t, err, out)
	out, err = gitClient(t, w, basic(user, password), "push", "origin", "HEAD:main")
	require.Error(t, err, "a push must fail")
	require.Contains(t, out, "403")
	require.Equal(t, b.sha, gitservetest.Git(t, b.repos.Dir(repo), "", nil, "rev-parse", "refs/heads/main"), "main did not move")

	// Asked directly, the push service is refused with the reason.
	req, err := http.NewRequest(http.MethodGet, b.url+"/info/refs?service=git-receive-pack", nil)
	require.NoError(t, err)
	req.SetBasicAuth(user, password)
	resp := do(t, req)
	require.Equal(t, http.StatusForbidden, resp.code)
	require.Contains(t, resp.body, "read-only")
}

func TestCredentials(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for name, tc := range map[string]struct {
		cred      string
		status    int
		challenge bool
	}{
		"none":           {"", http.StatusUnauthorized, true},
		"wrong password": {basic(user, "guess"), http.StatusForbidden, false},
		"wrong user":     {basic("other", password), http.StatusForbidden, false},
		"right":          {basic(user, password), http.StatusOK, false},
	} {
		req, err := http.NewRequest(http.MethodGet, b.url+"/info/refs?service=git-upload-pack", nil)
		require.NoError(t, err)
		if tc.cred != "" {
			req.Header.Set("Authorization", "Basic "+tc.cred)
		}
		resp := do(t, req)
		require.Equal(t, tc.status, resp.code, "%s: %s", name, resp.body)
		require.Equal(t, tc.challenge, resp.header.Get("WWW-Authenticate") == `Basic realm="cikit"`, name)

		// The real client fails the same way, without prompting.
		out, err := gitClient(t, t.TempDir(), tc.cred, "clone", "--quiet", b.url, "w")
		if tc.status == http.StatusOK {
			require.NoError(t, err, out)
		} else {
			require.Error(t, err, name)
			require.NotContains(t, out, password)
		}
	}

	// A repository that does not exist is not told apart from one that
	// does before authentication.
	req, err := http.NewRequest(http.MethodGet, b.srv.URL+"/acme/missing.git/info/refs?service=git-upload-pack", nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, do(t, req).code)
	req.SetBasicAuth(user, password)
	require.Equal(t, http.StatusNotFound, do(t, req).code)
}

func TestAuthorizeUnavailable(t *testing.T) {
	t.Parallel()
	repos := gitservetest.NewRepos(t)
	repos.Create(t, repo, "main")
	h, err := gitserve.New(gitserve.Config{Root: repos.Root, Authorize: func(*http.Request, string) error {
		return errors.Join(errors.New("the token store is down"), gitserve.ErrUnavailable)
	}})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/acme/api/info/refs?service=git-upload-pack", nil))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.NotEmpty(t, rec.Header().Get("Retry-After"))
	require.Contains(t, rec.Body.String(), "token store is down")
}

func TestRequests(t *testing.T) {
	t.Parallel()
	repos := gitservetest.NewRepos(t)
	repos.Create(t, repo, "main")
	repos.Commit(t, repo, "main", map[string]string{"a": "1"})
	// A repository with a work tree is served from its .git directory.
	gitservetest.Git(t, repos.Root, "", nil, "init", "--quiet", "acme/worktree")
	const maxBody = 1 << 10
	var seen []string
	h, err := gitserve.New(gitserve.Config{Root: repos.Root, MaxRequestBytes: maxBody, Authorize: func(_ *http.Request, r string) error {
		seen = append(seen, r)
		return nil
	}})
	require.NoError(t, err)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(bytes.Repeat([]byte("0"), maxBody+1))
	require.NoError(t, zw.Close())
	flush := func() *bytes.Buffer {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write([]byte("0000"))
		_ = zw.Close()
		return &b
	}

	for _, tc := range []struct {
		name, method, path string
		header             map[string]string
		body               []byte
		status             int
		contains           string
	}{
		{"advertisement", "GET", "/acme/api.git/info/refs?service=git-upload-pack", nil, nil, 200, "# service=git-upload-pack"},
		{"without .git", "GET", "/acme/api/info/refs?service=git-upload-pack", nil, nil, 200, "refs/heads/main"},
		{"v2 capabilities", "GET", "/acme/api/info/refs?service=git-upload-pack", map[string]string{"Git-Protocol": "version=2"}, nil, 200, "version 2"},
		{"work tree", "GET", "/acme/worktree/info/refs?service=git-upload-pack", nil, nil, 200, "# service"},
		{"HEAD", "HEAD", "/acme/api/info/refs?service=git-upload-pack", nil, nil, 200, ""},
		{"traversal", "GET", "/acme/../../etc/info/refs?service=git-upload-pack", nil, nil, 400, "empty part or one starting with '.'"},
		{"dot part", "GET", "/acme/.git/info/refs?service=git-upload-pack", nil, nil, 400, "starting with '.'"},
		{"option", "GET", "/acme/-x/info/refs?service=git-upload-pack", nil, nil, 400, "starting with '.' or '-'"},
		{"one part", "GET", "/api/info/refs?service=git-upload-pack", nil, nil, 400, "not org/name"},
		{"space", "GET", "/acme/a%20b/info/refs?service=git-upload-pack", nil, nil, 400, "character other than"},
		{"unknown", "GET", "/acme/nope/info/refs?service=git-upload-pack", nil, nil, 404, "not found"},
		{"a directory, no repository", "GET", "/acme/info/refs?service=git-upload-pack", nil, nil, 400, "not org/name"},
		{"not git", "GET", "/acme/api", nil, nil, 404, "not a git URL"},
		{"dumb info/refs", "GET", "/acme/api/info/refs", nil, nil, 403, "smart HTTP"},
		{"dumb object", "GET", "/acme/api/objects/info/packs", nil, nil, 403, "smart HTTP"},
		{"dumb HEAD", "GET", "/acme/api/HEAD", nil, nil, 403, "smart HTTP"},
		{"receive-pack", "POST", "/acme/api/git-receive-pack", nil, nil, 403, "read-only"},
		{"other service", "GET", "/acme/api/info/refs?service=git-upload-archive", nil, nil, 403, "unknown service"},
		{"POST info/refs", "POST", "/acme/api/info/refs?service=git-upload-pack", nil, nil, 405, "GET"},
		{"GET upload-pack", "GET", "/acme/api/git-upload-pack", nil, nil, 405, "POST"},
		{"wrong content type", "POST", "/acme/api/git-upload-pack", map[string]string{"Content-Type": "text/plain"}, []byte("0000"), 415, "Content-Type"},
		{"too large", "POST", "/acme/api/git-upload-pack", map[string]string{"Content-Type": "application/x-git-upload-pack-request"}, bytes.Repeat([]byte("0"), maxBody+1), 413, "larger than 1024 bytes"},
		{"gzip too large", "POST", "/acme/api/git-upload-pack", map[string]string{"Content-Type": "application/x-git-upload-pack-request", "Content-Encoding": "gzip"}, gz.Bytes(), 413, "larger than"},
		{"gzip broken", "POST", "/acme/api/git-upload-pack", map[string]string{"Content-Type": "application/x-git-upload-pack-request", "Content-Encoding": "gzip"}, []byte("not gzip"), 400, "gzip"},
		{"other encoding", "POST", "/acme/api/git-upload-pack", map[string]string{"Content-Type": "application/x-git-upload-pack-request", "Content-Encoding": "br"}, []byte("x"), 415, "only gzip"},
		{"gzip flush", "POST", "/acme/api/git-upload-pack", map[string]string{"Content-Type": "application/x-git-upload-pack-request", "Content-Encoding": "gzip"}, flush().Bytes(), 200, ""},
		{"garbage request", "POST", "/acme/api/git-upload-pack", map[string]string{"Content-Type": "application/x-git-upload-pack-request"}, []byte("zzzz"), 500, "upload-pack failed"},
	} {
		req := httptest.NewRequest(tc.method, tc.path, bytes.NewReader(tc.body))
		for k, v := range tc.header {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, tc.status, rec.Code, "%s: %s", tc.name, rec.Body.String())
		require.Contains(t, rec.Body.String(), tc.contains, tc.name)
	}
	for _, r := range seen {
		require.NoError(t, gitserve.CheckRepo(r), "only valid names reach Authorize")
	}
}

// TestAdvertisementsKept: a protocol v2 advertisement, capabilities and
// no refs, runs git once per repository and configuration, and again
// after the repository's configuration changed; a v0 one, which lists the
// refs, runs git every time and shows a new commit.
func TestAdvertisementsKept(t *testing.T) {
	t.Parallel()
	repos := gitservetest.NewRepos(t)
	repos.Create(t, repo, "main")
	repos.Commit(t, repo, "main", map[string]string{"a": "1"})
	// A git that counts its runs.
	bin := t.TempDir()
	count := filepath.Join(bin, "runs")
	gitBin, err := exec.LookPath("git")
	require.NoError(t, err)
	script := "#!/bin/sh\necho run >>" + count + "\nexec " + gitBin + " \"$@\"\n"
	require.NoError(t, os.WriteFile(filepath.Join(bin, "git"), []byte(script), 0o755))
	h, err := gitserve.New(gitserve.Config{Root: repos.Root, Git: filepath.Join(bin, "git"), Authorize: func(*http.Request, string) error { return nil }})
	require.NoError(t, err)
	runs := func() int {
		b, err := os.ReadFile(count)
		if errors.Is(err, os.ErrNotExist) {
			return 0
		}
		require.NoError(t, err)
		return strings.Count(string(b), "run\n")
	}
	get := func(protocol string) string {
		req := httptest.NewRequest("GET", "/acme/api/info/refs?service=git-upload-pack", nil)
		if protocol != "" {
			req.Header.Set("Git-Protocol", protocol)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		require.Equal(t, "application/x-git-upload-pack-advertisement", rec.Header().Get("Content-Type"))
		return rec.Body.String()
	}

	first := get("version=2")
	require.Contains(t, first, "version 2\n")
	require.NotContains(t, first, "filter")
	for range 3 {
		require.Equal(t, first, get("version=2"))
	}
	require.Equal(t, 1, runs(), "one git for four v2 advertisements")

	gitservetest.Git(t, repos.Dir(repo), "", nil, "config", "uploadpack.allowFilter", "true")
	changed := get("version=2")
	require.Contains(t, changed, "filter", "the new configuration is advertised")
	require.Equal(t, 2, runs())

	sha := repos.Commit(t, repo, "main", map[string]string{"a": "2"})
	require.Contains(t, get(""), sha+" refs/heads/main")
	require.Contains(t, get(""), sha+" refs/heads/main")
	require.Equal(t, 4, runs(), "v0 lists the refs: git runs each time")
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	repos := gitservetest.NewRepos(t)
	repos.Create(t, repo, "main")
	// A timeout that has passed before git starts: git is not run and
	// the answer says why.
	h, err := gitserve.New(gitserve.Config{Root: repos.Root, Timeout: time.Nanosecond, Authorize: func(*http.Request, string) error { return nil }})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/acme/api/info/refs?service=git-upload-pack", nil))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.Contains(t, rec.Body.String(), "timed out")
}

func TestNew(t *testing.T) {
	t.Parallel()
	allow := func(*http.Request, string) error { return nil }
	for name, cfg := range map[string]gitserve.Config{
		"no root":          {Authorize: allow},
		"no authorize":     {Root: t.TempDir()},
		"missing root":     {Root: filepath.Join(t.TempDir(), "nope"), Authorize: allow},
		"negative limit":   {Root: t.TempDir(), Authorize: allow, MaxRequestBytes: -1},
		"no git":           {Root: t.TempDir(), Authorize: allow, Git: "no-such-git-binary"},
		"root is not dir":  {Root: "gitserve_test.go", Authorize: allow},
		"negative timeout": {Root: t.TempDir(), Authorize: allow, Timeout: -time.Second},
	} {
		_, err := gitserve.New(cfg)
		require.Error(t, err, name)
	}
}

type response struct {
	code   int
	header http.Header
	body   string
}

func do(t *testing.T, req *http.Request) response {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(resp.Body)
	require.NoError(t, err)
	return response{resp.StatusCode, resp.Header, b.String()}
}
