package gitlab_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"time"

	"github.com/cikit/cikit/vcs/gitlab"
	"github.com/cikit/cikit/vcs/gitlab/gitlabtest"
)

// ExampleProvider_MintSource mints the read-only credential a runner
// fetches one job's commit with: a deploy token of the one project with
// read_repository, expiring with the job, deleted when the job is done.
func ExampleProvider_MintSource() {
	dir, err := os.MkdirTemp("", "gitlab-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	forge := gitlabtest.New(gitlabtest.Config{GitDir: dir}) // serves git at each project's clone URL
	ts := httptest.NewServer(forge)
	defer ts.Close()
	if _, err := forge.CreateProject("acme/api", "main"); err != nil {
		panic(err)
	}

	p, err := gitlab.New(gitlab.Config{BaseURL: ts.URL, Token: forge.Token(), HTTPClient: ts.Client()})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	src, err := p.MintSource(ctx, "acme/api", 30*time.Minute)
	if err != nil {
		panic(err)
	}
	// git fetches src.URL with src.Username and src.Token as HTTP basic
	// credentials; String never shows the token.
	fmt.Println(src.URL == ts.URL+"/acme/api.git", src.String() == src.URL, src.Username)
	live, _ := forge.DeployTokens("acme/api")
	fmt.Println(len(live), "live deploy token")
	if err := p.RevokeSource(ctx, src); err != nil {
		panic(err)
	}
	live, _ = forge.DeployTokens("acme/api")
	fmt.Println(len(live), "after the job")
	// Output:
	// true true gitlab+deploy-token-2
	// 1 live deploy token
	// 0 after the job
}
