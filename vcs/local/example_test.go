package local_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/cikit/cikit/vcs/local"
)

// A repository with a work tree under the root: its default branch, a
// file at the branch's commit, and what the branch changed since a tag.
func Example() {
	root, err := os.MkdirTemp("", "repos")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(root)
	dir := filepath.Join(root, "acme", "api")
	gitIn := func(args ...string) {
		args = append([]string{"-C", dir, "-c", "user.name=cikit", "-c", "user.email=cikit@example.com"}, args...)
		cmd := exec.Command("git", args...)
		cmd.Env = []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.DevNull, "HOME=" + os.DevNull}
		if out, err := cmd.CombinedOutput(); err != nil {
			panic(fmt.Sprint(err, string(out)))
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		panic(err)
	}
	gitIn("init", "--quiet", "--initial-branch=main")
	gitIn("commit", "--quiet", "--allow-empty", "-m", "empty")
	gitIn("tag", "v0")
	if err := os.WriteFile(filepath.Join(dir, ".cikit.yml"), []byte("jobs: {}\n"), 0o600); err != nil {
		panic(err)
	}
	gitIn("add", ".cikit.yml")
	gitIn("commit", "--quiet", "-m", "pipeline")

	p, err := local.New(local.Config{Root: root})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	branch, err := p.DefaultBranch(ctx, "acme/api")
	if err != nil {
		panic(err)
	}
	sha, err := p.ResolveRef(ctx, "acme/api", branch)
	if err != nil {
		panic(err)
	}
	data, err := p.ReadFile(ctx, "acme/api", sha, ".cikit.yml")
	if err != nil {
		panic(err)
	}
	changed, err := p.ChangedFiles(ctx, "acme/api", "v0", branch)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s: %s", branch, data)
	fmt.Println(changed)
	// Output:
	// main: jobs: {}
	// [.cikit.yml]
}
