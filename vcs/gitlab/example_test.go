package gitlab_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/cikit/cikit/vcs"
	"github.com/cikit/cikit/vcs/gitlab"
	"github.com/cikit/cikit/vcs/gitlab/gitlabtest"
)

// Example reads a pipeline at a branch's commit, finds the branch's merge
// request and posts a job's status — against gitlabtest here, against
// gitlab.com or a self-managed instance by BaseURL and token.
func Example() {
	forge := gitlabtest.New(gitlabtest.Config{})
	ts := httptest.NewServer(forge)
	defer ts.Close()
	_, _ = forge.CreateProject("acme/platform/api", "main")
	_, _ = forge.Commit("acme/platform/api", "main", map[string]string{".gitlab-ci.yml": "build:\n  script: make\n"})
	_, _ = forge.Commit("acme/platform/api", "feature", map[string]string{"main.go": "package main\n"})
	_, _ = forge.OpenMergeRequest("acme/platform/api", "acme/platform/api", "feature", "main")

	p, err := gitlab.New(gitlab.Config{BaseURL: ts.URL, Token: forge.Token(), HTTPClient: ts.Client()})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	sha, _ := p.ResolveRef(ctx, "acme/platform/api", "feature")
	pipeline, _ := p.ReadFile(ctx, "acme/platform/api", sha, ".gitlab-ci.yml")
	fmt.Printf("%s", pipeline)
	changed, _ := p.ChangedFiles(ctx, "acme/platform/api", "main", sha)
	fmt.Println("changed:", changed)
	n, ok, _ := p.OpenPullRequest(ctx, "acme/platform/api", "feature")
	fmt.Println("merge request:", n, ok)
	err = p.SetStatus(ctx, "acme/platform/api", sha, &vcs.Status{Context: "cikit/build", State: vcs.StateFailure})
	statuses, _ := forge.Statuses("acme/platform/api", sha)
	fmt.Println(err, statuses[0].Name, statuses[0].State)
	// Output:
	// build:
	//   script: make
	// changed: [main.go]
	// merge request: 1 true
	// <nil> cikit/build failed
}
