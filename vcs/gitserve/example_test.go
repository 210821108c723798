package gitserve_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"

	"github.com/cikit/cikit/vcs/gitserve"
)

// The platform mounts a Handler under /git/ and authorizes each request
// by its basic credential; a runner then fetches
// <platform>/git/acme/api.git with the job's token.
func Example() {
	root, _ := os.MkdirTemp("", "repos")
	defer os.RemoveAll(root)
	_ = exec.Command("git", "init", "--quiet", "--bare", root+"/acme/api").Run()

	h, err := gitserve.New(gitserve.Config{
		Root: root,
		Authorize: func(r *http.Request, repo string) error {
			_, token, ok := r.BasicAuth()
			switch {
			case !ok:
				return gitserve.ErrUnauthenticated
			case token != "job-token" || repo != "acme/api":
				return errors.New("this job's token may not read " + repo)
			}
			return nil
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	mux := http.NewServeMux()
	mux.Handle("/git/", http.StripPrefix("/git", h))

	for _, token := range []string{"", "wrong", "job-token"} {
		req := httptest.NewRequest(http.MethodGet, "/git/acme/api.git/info/refs?service=git-upload-pack", nil)
		if token != "" {
			req.SetBasicAuth("job", token)
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		fmt.Println(rec.Code, rec.Header().Get("Content-Type"))
	}
	// Output:
	// 401 text/plain; charset=utf-8
	// 403 text/plain; charset=utf-8
	// 200 application/x-git-upload-pack-advertisement
}
