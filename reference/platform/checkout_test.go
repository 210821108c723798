package platform_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// goPipeline vets and tests the Go module of its repository. The sandbox
// has no network and a read-only home, so the module has no dependencies
// and Go's caches live in the workspace.
const goPipeline = `jobs:
  test:
    steps:
      - env | grep ^CIKIT_PIPELINE_URL=
      - export GOCACHE="$PWD/.cache/go-build" GOPATH="$PWD/.cache/go" GOTOOLCHAIN=local GOFLAGS=-mod=mod GOENV=off; go vet ./... && go test ./...
`

const goMod = "module example.com/app\n\ngo 1.22\n"

const goCode = "package app\n\n// Add adds.\nfunc Add(a, b int) int { return a + b }\n"

func goTest(want int) string {
	return fmt.Sprintf("package app\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif got := Add(2, 2); got != %d {\n\t\tt.Fatalf(\"Add(2, 2) = %%d\", got)\n\t}\n}\n", want)
}

// TestPushedCommitIsTested: a push of a Go module whose pipeline runs
// `go vet ./... && go test ./...` tests the pushed commit, checked out by
// the runner from the platform's own git server: the first commit's run
// succeeds; a second commit whose test fails makes the second run fail
// and leaves the first green. Each job reports the commit it checked out.
// (Before, jobs started in an empty workspace and `go vet` found no
// module.)
func TestPushedCommitIsTested(t *testing.T) {
	t.Parallel()
	pushedCommitIsTested(t, newGoWorld(t))
}

// TestPushedCommitIsTestedPostgres is TestPushedCommitIsTested on
// PostgreSQL, Redis and S3.
func TestPushedCommitIsTestedPostgres(t *testing.T) {
	t.Parallel()
	w := newGoWorld(t)
	w.onPostgres(t)
	pushedCommitIsTested(t, w)
}

func newGoWorld(t *testing.T) *world {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("the Go toolchain, in PATH, runs this test's pipeline: %v", err)
	}
	w := newWorld(t, map[string]string{".cikit.yml": goPipeline, "go.mod": goMod, "app.go": goCode, "app_test.go": goTest(4)})
	w.cfg.Runners.Local = 1
	return w
}

func pushedCommitIsTested(t *testing.T, w *world) {
	s := serve(t, w.cfg)
	base := s.p.URL()

	firstRun := w.pushed(t, base, "delivery-go-1", w.sha, "test", "success")
	var job struct {
		State            string        `json:"state"`
		Commit           string        `json:"commit"`
		CheckoutDuration time.Duration `json:"checkout_duration_ns"`
	}
	require.Equal(t, 200, getJSON(t, base+"/api/v1/runs/"+firstRun+"/jobs/test", &job))
	require.Equal(t, w.sha, job.Commit, "the job checked out the pushed commit")
	require.Positive(t, job.CheckoutDuration)
	_, text := getText(t, base+"/api/v1/runs/"+firstRun+"/jobs/test/log")
	require.Contains(t, text, "--- checkout "+w.sha[:7])
	require.Contains(t, text, "ok  \texample.com/app")
	require.Contains(t, text, "CIKIT_PIPELINE_URL="+base+"/runs/"+firstRun+"\n", "the job knows its run's page")

	// The second commit breaks the test.
	repo := filepath.Join(w.root, "repos", repoName)
	require.NoError(t, os.WriteFile(filepath.Join(repo, "app_test.go"), []byte(goTest(5)), 0o644))
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-c", "user.name=e2e", "-c", "user.email=e2e@example.com", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = repo
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
		return strings.TrimSpace(string(out))
	}
	git("commit", "-q", "-am", "a test that fails")
	second := git("rev-parse", "HEAD")
	require.NoError(t, w.github.CommitAs(repoName, "main", second, map[string]string{"app_test.go": goTest(5)}))
	secondRun := w.pushed(t, base, "delivery-go-2", second, "test", "failure")
	require.NotEqual(t, firstRun, secondRun)
	_, text = getText(t, base+"/api/v1/runs/"+secondRun+"/jobs/test/log")
	require.Contains(t, text, "Add(2, 2) = 4")
	require.Equal(t, 200, getJSON(t, base+"/api/v1/runs/"+firstRun+"/jobs/test", &job))
	require.Equal(t, "succeeded", job.State, "the first run stays green")
}
