package policy_test

import (
	"context"
	"fmt"

	"github.com/cikit/cikit/secrets/policy"
)

// Example loads the team's policy in place of the default one and asks
// it about two jobs: a member's fork asking for the fork-ci runners, and
// a deployment to production from main.
func Example() {
	engine, err := policy.New(policy.Config{Path: "policy.rego"})
	if err != nil {
		fmt.Println(err) // a broken policy: every problem, with its position
		return
	}
	forkCI := &policy.Input{
		Event:             "pull_request",
		Repository:        "acme/api",
		Ref:               policy.Ref{Type: "branch", Name: "patch-1", Base: "main"},
		PullRequest:       9,
		Fork:              true,
		AuthorAssociation: "MEMBER",
		Job: policy.Job{
			ID:                   "test",
			RunsOn:               []string{"fork-ci"},
			DefaultSecretsScopes: []string{"repo:acme/api"},
			DefaultCacheScope:    "pr/9",
		},
	}
	deploy := &policy.Input{
		Event:      "push",
		Repository: "acme/api",
		Ref:        policy.Ref{Type: "branch", Name: "main", Protected: true, Default: true},
		Job: policy.Job{
			ID:                   "deploy",
			Environment:          "production",
			DefaultSecretsScopes: []string{"env:acme/api:production", "repo:acme/api"},
			DefaultCacheScope:    "branch/main",
		},
	}
	for _, in := range []*policy.Input{forkCI, deploy} {
		d, err := engine.Eval(context.Background(), in)
		if err != nil {
			fmt.Println(err) // the job must not run
			continue
		}
		a := d.Admission(engine.Name())
		fmt.Printf("%s: %s %q\n  secrets %v, cache %q, token %v, runners %v\n",
			in.Job.ID, a.Decision, a.Reason, a.SecretsScopes, a.CacheScope, a.TokenPermissions, a.RunnerLabelsAllowed)
	}
	// Output:
	// test: allow ""
	//   secrets [], cache "fork/pr-9", token map[contents:read metadata:read], runners [* !self-hosted]
	// deploy: require_approval "deployment to production: a release manager must approve"
	//   secrets [env:acme/api:production repo:acme/api], cache "branch/main", token map[], runners []
}
