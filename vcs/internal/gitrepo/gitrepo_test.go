package gitrepo_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/internal/testenv"
	"github.com/cikit/cikit/vcs/internal/gitrepo"
)

var who = gitrepo.Ident{Name: "test", Email: "test@example.com"}

func needGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		testenv.ToolUnavailable(t, "git", err)
	}
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

// build writes a commit of files on top of parents into r and returns
// its SHA.
func build(t *testing.T, r *gitrepo.Repo, files map[string]string, parents ...string) string {
	t.Helper()
	blobs := map[string]string{}
	for p, data := range files {
		o := gitrepo.Blob([]byte(data))
		require.NoError(t, r.Write(o))
		blobs[p] = o.SHA()
	}
	dirs, trees, err := gitrepo.Trees(blobs)
	require.NoError(t, err)
	require.NoError(t, r.Write(trees...))
	c := gitrepo.Commit(dirs[""], parents, "a commit", who, time.Unix(1_700_000_000, 0))
	require.NoError(t, r.Write(c))
	return c.SHA()
}

// TestObjectsAreGits: the objects built here are the ones git itself
// makes of the same files, and git reads them back whole (fsck).
func TestObjectsAreGits(t *testing.T) {
	needGit(t)
	files := map[string]string{"a.txt": "a\n", "a/b.txt": "b\n", "a.b/c": "c\n", "z/y/x/w": "deep\n", "a-": "dash\n"}
	work := t.TempDir()
	git(t, work, "init", "-q")
	for p, data := range files {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(work, p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(work, p), []byte(data), 0o644))
	}
	git(t, work, "add", "-A")
	wantTree := git(t, work, "write-tree")

	r, err := gitrepo.Create(filepath.Join(t.TempDir(), "acme", "api"))
	require.NoError(t, err)
	sha := build(t, r, files)
	tag := gitrepo.Tag(sha, "v1", "release", who, time.Unix(1_700_000_100, 0))
	require.NoError(t, r.Write(tag))
	require.NoError(t, r.SetRefs("main", map[string]string{"refs/heads/main": sha, "refs/tags/v1": tag.SHA()}))

	require.Equal(t, wantTree, git(t, r.Dir(), "rev-parse", "main^{tree}"))
	require.Equal(t, sha, git(t, r.Dir(), "rev-parse", "HEAD"))
	require.Equal(t, sha, git(t, r.Dir(), "rev-parse", "v1^{commit}"))
	require.Equal(t, "tag", git(t, r.Dir(), "cat-file", "-t", "v1"))
	git(t, r.Dir(), "fsck", "--strict", "--no-dangling")
}

// TestTreesRefuses: paths that are no files of a tree are errors.
func TestTreesRefuses(t *testing.T) {
	blob := gitrepo.Blob([]byte("x")).SHA()
	for _, files := range []map[string]string{
		{"": blob}, {"/a": blob}, {"a/": blob}, {"a//b": blob},
		{"a": blob, "a/b": blob}, // a file and a directory
		{"a": "not a sha"},
	} {
		_, _, err := gitrepo.Trees(files)
		require.Error(t, err, "%v", files)
	}
}

// TestParsePath: git requests are told from API paths, and repository
// paths that climb out are no git requests.
func TestParsePath(t *testing.T) {
	for p, want := range map[string]gitrepo.Request{
		"/acme/api.git/info/refs":              {Repo: "acme/api", Part: "info/refs"},
		"/acme/api.git/git-upload-pack":        {Repo: "acme/api", Part: "git-upload-pack"},
		"/group/sub/p.git/git-receive-pack":    {Repo: "group/sub/p", Part: "git-receive-pack"},
		"/repos/acme/api":                      {},
		"/acme/api.git/objects/info/packs":     {},
		"/../etc.git/info/refs":                {},
		"/acme/../api.git/info/refs":           {},
		"/acme//api.git/info/refs":             {},
		"/.git/info/refs":                      {},
		"acme/api.git/info/refs":               {},
		"/acme/api.git/info/refs/../../x":      {},
		"/api/v4/projects/1/repository/.git/x": {},
	} {
		got, ok := gitrepo.ParsePath(p)
		require.Equal(t, want, got, p)
		require.Equal(t, want != gitrepo.Request{}, ok, p)
	}
}

// FuzzParsePath: no path makes ParsePath panic, and what it accepts is a
// clean relative repository path.
func FuzzParsePath(f *testing.F) {
	for _, p := range []string{"/acme/api.git/info/refs", "/a/b/c.git/git-upload-pack", "/../x.git/info/refs", "/a.git/.git/info/refs"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		r, ok := gitrepo.ParsePath(p)
		if !ok {
			return
		}
		if filepath.IsAbs(r.Repo) || filepath.Clean(r.Repo) != r.Repo || strings.HasPrefix(r.Repo, "..") {
			t.Fatalf("ParsePath(%q) accepted repository %q", p, r.Repo)
		}
	})
}

// TestServe: a real git client clones and fetches exact SHAs over smart
// HTTP, shallow and full; pushing and the dumb protocol are refused.
func TestServe(t *testing.T) {
	needGit(t)
	r, err := gitrepo.Create(filepath.Join(t.TempDir(), "acme", "api"))
	require.NoError(t, err)
	first := build(t, r, map[string]string{"go.mod": "module x\n"})
	second := build(t, r, map[string]string{"go.mod": "module x\n", "x.go": "package x\n"}, first)
	require.NoError(t, r.SetRefs("main", map[string]string{"refs/heads/main": second}))

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		gr, ok := gitrepo.ParsePath(req.URL.Path)
		if !ok || gr.Repo != "acme/api" {
			http.NotFound(w, req)
			return
		}
		gitrepo.Serve(w, req, gr, r)
	}))
	t.Cleanup(srv.Close)
	url := srv.URL + "/acme/api.git"

	full := t.TempDir()
	git(t, full, "clone", "-q", url, ".")
	require.Equal(t, second, git(t, full, "rev-parse", "HEAD"))
	require.Equal(t, "2", git(t, full, "rev-list", "--count", "HEAD"))

	// A runner's fetch: one commit by its SHA, not a ref tip, depth 1.
	for _, proto := range []string{"0", "2"} {
		shallow := t.TempDir()
		git(t, shallow, "init", "-q")
		git(t, shallow, "-c", "protocol.version="+proto, "fetch", "-q", "--depth=1", url, first)
		require.Equal(t, first, git(t, shallow, "rev-parse", "FETCH_HEAD"))
		require.Equal(t, "1", git(t, shallow, "rev-list", "--count", "FETCH_HEAD"))
	}

	git(t, full, "-c", "user.name=x", "-c", "user.email=x@example.com", "commit", "-q", "--allow-empty", "-m", "mine")
	cmd := exec.Command("git", "push", url, "HEAD:refs/heads/main")
	cmd.Dir = full
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "%s", out)
	require.Contains(t, string(out), "403")
	require.Equal(t, second, git(t, r.Dir(), "rev-parse", "main"), "the push changed nothing")

	for _, c := range []struct {
		method, path string
		code         int
	}{
		{"GET", "/acme/api.git/info/refs", http.StatusBadRequest},
		{"GET", "/acme/api.git/info/refs?service=git-receive-pack", http.StatusForbidden},
		{"POST", "/acme/api.git/git-receive-pack", http.StatusForbidden},
		{"GET", "/acme/api.git/git-upload-pack", http.StatusMethodNotAllowed},
		{"POST", "/acme/api.git/info/refs?service=git-upload-pack", http.StatusMethodNotAllowed},
	} {
		req, err := http.NewRequest(c.method, srv.URL+c.path, nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, c.code, resp.StatusCode, "%s %s", c.method, c.path)
	}
	big := strings.NewReader(strings.Repeat("0", gitrepo.MaxRequestBytes+1))
	resp, err := http.Post(srv.URL+"/acme/api.git/git-upload-pack", "application/x-git-upload-pack-request", big)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
}
