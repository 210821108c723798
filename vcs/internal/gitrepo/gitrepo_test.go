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
	"github.com/cikit/cikit/vcs/gitserve"
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

// TestIsGitPath: git requests are told from API calls.
func TestIsGitPath(t *testing.T) {
	for p, want := range map[string]bool{
		"/acme/api.git/info/refs":            true,
		"/acme/api.git/git-upload-pack":      true,
		"/group/sub/p.git/git-receive-pack":  true,
		"/acme/api/info/refs":                false,
		"/repos/acme/api":                    false,
		"/repos/acme/api.git/info/refs":      false,
		"/acme/api.git/objects/info/packs":   false,
		"/api/v4/projects/1/x.git/info/refs": false,
		"/acme/api.git/info/refs/../../x":    false,
	} {
		require.Equal(t, want, gitrepo.IsGitPath(p), p)
	}
}

// TestServe: served by gitserve, a repository written here is cloned and
// fetched by exact SHAs, shallow and full, by a real git client; a push
// changes nothing.
func TestServe(t *testing.T) {
	needGit(t)
	root := t.TempDir()
	r, err := gitrepo.Create(filepath.Join(root, "acme", "api"))
	require.NoError(t, err)
	first := build(t, r, map[string]string{"go.mod": "module x\n"})
	second := build(t, r, map[string]string{"go.mod": "module x\n", "x.go": "package x\n"}, first)
	require.NoError(t, r.SetRefs("main", map[string]string{"refs/heads/main": second}))

	h, err := gitserve.New(gitserve.Config{Root: root, Authorize: func(*http.Request, string) error { return nil }})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
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

}

// TestReadCommit: a commit's files come back byte for byte, odd names
// and shared blobs included, and FetchFrom copies its objects.
func TestReadCommit(t *testing.T) {
	needGit(t)
	files := map[string]string{"bin": "\x00\n\xff\n", "same-1": "x", "dir/same-2": "x", "tab\tname": "t", "empty": ""}
	work := t.TempDir()
	git(t, work, "init", "-q")
	for p, data := range files {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(work, p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(work, p), []byte(data), 0o644))
	}
	git(t, work, "add", "-A")
	git(t, work, "-c", "user.name=x", "-c", "user.email=x@example.com", "commit", "-q", "-m", "c")
	want := git(t, work, "rev-parse", "HEAD")

	sha, got, err := gitrepo.ReadCommit(work, "HEAD")
	require.NoError(t, err)
	require.Equal(t, want, sha)
	require.Len(t, got, len(files))
	for p, data := range files {
		require.Equal(t, data, string(got[p]), p)
	}
	_, _, err = gitrepo.ReadCommit(work, "nope")
	require.ErrorContains(t, err, "nope")
	_, _, err = gitrepo.ReadCommit(work, "--upload-pack=x")
	require.Error(t, err, "a revision is never an option")

	r, err := gitrepo.Create(filepath.Join(t.TempDir(), "a", "b"))
	require.NoError(t, err)
	require.NoError(t, r.FetchFrom(work, sha))
	require.Equal(t, "commit", git(t, r.Dir(), "cat-file", "-t", sha))
	require.Error(t, r.FetchFrom(work, strings.Repeat("0", 40)))
}
