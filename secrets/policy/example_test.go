package policy_test

import (
	"context"
	"fmt"

	"github.com/cikit/cikit/secrets/policy"
)

// The default policy holds a first-time contributor's fork pull request
// for approval, and restricts what its jobs may have.
func ExampleEngine_Eval() {
	engine, err := policy.New(policy.Config{}) // the default policy
	if err != nil {
		panic(err)
	}
	d, err := engine.Eval(context.Background(), &policy.Input{
		Event:                "pull_request",
		Repository:           "acme/api",
		Ref:                  policy.Ref{Type: "branch", Name: "patch-1", Base: "main"},
		PullRequest:          7,
		Fork:                 true,
		AuthorAssociation:    "FIRST_TIME_CONTRIBUTOR",
		FirstTimeContributor: true,
		Job: policy.Job{
			ID:                   "test",
			Secrets:              []string{"NPM_TOKEN"},
			Permissions:          map[string]string{"contents": "write", "id-token": "write"},
			RunsOn:               []string{"self-hosted"},
			DefaultSecretsScopes: []string{"org:acme", "repo:acme/api"},
			DefaultCacheScope:    "pr/7",
		},
	})
	if err != nil {
		fmt.Println("the job must not run:", err)
		return
	}
	a := d.Admission(engine.Name())
	fmt.Println(a.Decision, "by the", a.Policy, "policy:", a.Reason)
	fmt.Println("secrets:", a.SecretsScopes, "cache:", a.CacheScope)
	fmt.Println("token:", a.TokenPermissions, "runners:", a.RunnerLabelsAllowed)
	// Output:
	// require_approval by the default policy: fork pull request by a first-time contributor: a maintainer must approve before it runs
	// secrets: [] cache: fork/pr-7
	// token: map[contents:read metadata:read] runners: [* !self-hosted]
}
