package vcs_test

import (
	"context"
	"fmt"

	"github.com/cikit/cikit/vcs"
)

// A cached provider answers a file at a commit once, found or not.
func ExampleCached() {
	m := &vcs.Memory{}
	const sha = "9fceb02d0ae598e95dc970b74767f19372d61af8"
	m.AddCommit("acme/api", sha, map[string]string{".cikit.yml": "jobs: {}"})
	p := vcs.Cached(m, 100)

	ctx := context.Background()
	data, _ := p.ReadFile(ctx, "acme/api", sha, ".cikit.yml")
	m.AddCommit("acme/api", sha, map[string]string{".cikit.yml": "changed"}) // commits never change: the cache does not look
	again, _ := p.ReadFile(ctx, "acme/api", sha, ".cikit.yml")
	_, err := p.ReadFile(ctx, "acme/api", sha, ".github/workflows/ci.yml")
	fmt.Println(string(data), string(again), vcs.IsNotFound(err))
	// Output: jobs: {} jobs: {} true
}
