package checkout_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet/checkout"
	"github.com/cikit/cikit/vcs/gitserve"
)

// A runner checks out a job's commit from the platform's git server with
// the job's token, and tells a commit that does not exist (a
// configuration error) from a forge it cannot reach.
func Example() {
	tmp, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "repos", "acme", "api")
	sh := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@example.com", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@example.com")
		out, _ := cmd.Output()
		return strings.TrimSpace(string(out))
	}
	_ = os.MkdirAll(src, 0o755)
	sh("init", "--quiet", "--initial-branch=main")
	_ = os.WriteFile(filepath.Join(src, "go.mod"), []byte("module example.com/api\n"), 0o644)
	sh("add", "go.mod")
	sh("commit", "--quiet", "-m", "first")
	sha := sh("rev-parse", "HEAD")

	h, _ := gitserve.New(gitserve.Config{Root: filepath.Join(tmp, "repos"), Authorize: func(r *http.Request, repo string) error {
		if _, token, _ := r.BasicAuth(); token != "job-token" {
			return gitserve.ErrUnauthenticated
		}
		return nil
	}})
	srv := httptest.NewServer(h)
	defer srv.Close()

	c, err := checkout.New(checkout.Config{CacheDir: filepath.Join(tmp, "cache")})
	if err != nil {
		fmt.Println(err)
		return
	}
	req := checkout.Request{
		Source:     &cikit.CheckoutSource{URL: srv.URL + "/acme/api.git", Username: "job", Token: "job-token"},
		Repository: "acme/api", SHA: sha, Ref: "refs/heads/main",
		Dir: filepath.Join(tmp, "workspace"),
	}
	res, err := c.Checkout(context.Background(), req)
	if err != nil {
		fmt.Println(err)
		return
	}
	mod, _ := os.ReadFile(filepath.Join(req.Dir, "go.mod"))
	fmt.Printf("%t %d objects: %s", res.Commit == sha, res.Fetched, mod)

	req.SHA = strings.Repeat("0", 40)
	_, err = c.Checkout(context.Background(), req)
	fmt.Println(errors.Is(err, checkout.ErrCommitNotFound), checkout.Class(err))
	// Output:
	// true 3 objects: module example.com/api
	// true config
}
