// Package gitservetest makes git repositories and serves them over smart
// HTTP with gitserve, for tests of whatever fetches from a forge: a
// directory of bare repositories filled by commits made without a work
// tree, an httptest server with a basic-auth check, and the git client of
// a runner holding a checkout credential (Client, Fetch).
//
//	repos := gitservetest.NewRepos(t)
//	repos.Create(t, "acme/api", "main")
//	sha := repos.Commit(t, "acme/api", "main", map[string]string{"go.mod": "module x\n"})
//	srv := gitservetest.Serve(t, repos.Root, gitservetest.BasicAuth("job", "secret"))
//	// git clone srv.URL + "/acme/api.git" with job:secret
package gitservetest

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/internal/testenv"
	"github.com/cikit/cikit/vcs/gitserve"
)

// Env is the environment the helpers run git with: no system or user
// configuration, and a fixed identity.
var Env = []string{
	"GIT_CONFIG_NOSYSTEM=1", "HOME=" + os.DevNull, "GIT_CONFIG_GLOBAL=" + os.DevNull,
	"GIT_TERMINAL_PROMPT=0", "LC_ALL=C",
	"GIT_AUTHOR_NAME=cikit", "GIT_AUTHOR_EMAIL=cikit@example.com",
	"GIT_COMMITTER_NAME=cikit", "GIT_COMMITTER_EMAIL=cikit@example.com",
}

// Git runs git in dir with Env plus env and stdin, failing tb on an
// error, and returns its trimmed standard output.
func Git(tb testing.TB, dir, stdin string, env []string, args ...string) string {
	tb.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(append(append([]string{}, Env...), "PATH="+os.Getenv("PATH")), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		tb.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

// Client runs git in dir as a runner does, with Env and the credential
// of src (none when src is nil) as an HTTP basic Authorization header
// given as git's configuration in the environment, never in a URL or a
// file. It returns git's trimmed combined output and error.
func Client(tb testing.TB, dir string, src *cikit.CheckoutSource, args ...string) (string, error) {
	tb.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		testenv.ToolUnavailable(tb, "git", err)
	}
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(append([]string{}, Env...), "PATH="+os.Getenv("PATH"))
	if src != nil {
		basic := base64.StdEncoding.EncodeToString([]byte(src.Username + ":" + src.Token))
		cmd.Env = append(cmd.Env, "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.extraHeader",
			"GIT_CONFIG_VALUE_0=Authorization: Basic "+basic)
	}
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// Fetch fetches commit sha from url with src's credential (see Client)
// into a new repository, depth 1, as a runner does, checks it out and
// returns the repository. The error is the fetch's, with git's output,
// or the checkout's.
func Fetch(tb testing.TB, src *cikit.CheckoutSource, url, sha string) (string, error) {
	tb.Helper()
	dir := tb.TempDir()
	if out, err := Client(tb, dir, nil, "init", "-q"); err != nil {
		tb.Fatalf("git init: %v: %s", err, out)
	}
	if out, err := Client(tb, dir, src, "fetch", "-q", "--depth=1", url, sha); err != nil {
		return dir, fmt.Errorf("%w: %s", err, out)
	}
	_, err := Client(tb, dir, nil, "checkout", "-q", "FETCH_HEAD")
	return dir, err
}

// Repos is a directory of bare repositories laid out as gitserve and
// vcs/local read them.
type Repos struct {
	// Root is the directory: repository "org/name" is Root/org/name.
	Root string

	mu sync.Mutex
	n  int
}

// NewRepos returns an empty Repos in a temporary directory.
func NewRepos(tb testing.TB) *Repos {
	tb.Helper()
	return &Repos{Root: tb.TempDir()}
}

// Dir returns the git directory of repo.
func (r *Repos) Dir(repo string) string { return filepath.Join(r.Root, filepath.FromSlash(repo)) }

// Create makes the empty bare repository repo with defaultBranch.
func (r *Repos) Create(tb testing.TB, repo, defaultBranch string) {
	tb.Helper()
	Git(tb, r.Root, "", nil, "init", "--quiet", "--bare", "--initial-branch="+defaultBranch, "--", r.Dir(repo))
}

// Commit commits on branch of repo, on top of its head (the first commit
// creates the branch), writing files and deleting the paths in deleted,
// and returns the new commit's SHA.
func (r *Repos) Commit(tb testing.TB, repo, branch string, files map[string]string, deleted ...string) string {
	tb.Helper()
	r.mu.Lock()
	r.n++
	n := r.n
	r.mu.Unlock()
	dir := r.Dir(repo)
	env := []string{"GIT_INDEX_FILE=" + filepath.Join(tb.TempDir(), "index")}
	ref := "refs/heads/" + branch
	head := r.head(dir, ref)
	if head != "" {
		Git(tb, dir, "", env, "read-tree", head)
	}
	var info strings.Builder
	for p, content := range files {
		oid := Git(tb, dir, content, env, "hash-object", "-w", "--stdin")
		fmt.Fprintf(&info, "100644 %s\t%s\n", oid, p)
	}
	for _, p := range deleted {
		fmt.Fprintf(&info, "0 %s\t%s\n", strings.Repeat("0", 40), p)
	}
	Git(tb, dir, info.String(), env, "update-index", "--index-info")
	tree := Git(tb, dir, "", env, "write-tree")
	args := []string{"commit-tree", tree, "-m", fmt.Sprintf("commit %d", n)}
	if head != "" {
		args = append(args, "-p", head)
	}
	sha := Git(tb, dir, "", env, args...)
	Git(tb, dir, "", nil, "update-ref", ref, sha)
	return sha
}

// head returns the commit ref points to in the git directory dir, or ""
// when it does not exist yet.
func (r *Repos) head(dir, ref string) string {
	cmd := exec.Command("git", "rev-parse", "--verify", "--quiet", ref)
	cmd.Dir = dir
	cmd.Env = append(append([]string{}, Env...), "PATH="+os.Getenv("PATH"))
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// SetRef points ref ("refs/tags/v1", "refs/heads/x") of repo at sha, or
// deletes it when sha is "".
func (r *Repos) SetRef(tb testing.TB, repo, ref, sha string) {
	tb.Helper()
	if sha == "" {
		Git(tb, r.Dir(repo), "", nil, "update-ref", "-d", ref)
		return
	}
	Git(tb, r.Dir(repo), "", nil, "update-ref", ref, sha)
}

// BasicAuth returns a gitserve authorizer that lets in requests with the
// HTTP basic credential user:password, for any repository: none is
// ErrUnauthenticated, another one a refusal.
func BasicAuth(user, password string) func(*http.Request, string) error {
	return func(req *http.Request, repo string) error {
		u, p, ok := req.BasicAuth()
		if !ok {
			return gitserve.ErrUnauthenticated
		}
		if u != user || p != password {
			return errors.New("this credential may not read " + repo)
		}
		return nil
	}
}

// Serve serves the repositories under root with gitserve, authorized by
// authorize, on an httptest server closed when tb ends; the repository
// "org/name" is at URL + "/org/name.git".
func Serve(tb testing.TB, root string, authorize func(*http.Request, string) error) *httptest.Server {
	tb.Helper()
	h, err := gitserve.New(gitserve.Config{Root: root, Authorize: authorize})
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(h)
	tb.Cleanup(srv.Close)
	return srv
}
