package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFindPipeline(t *testing.T) {
	t.Parallel()
	touch := func(dir, name string) {
		t.Helper()
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), nil, 0o644))
	}
	dir := t.TempDir()
	_, err := findPipeline(dir)
	require.ErrorContains(t, err, "no pipeline file")

	touch(dir, ".github/workflows/ci.yml")
	f, err := findPipeline(dir)
	require.NoError(t, err)
	require.Equal(t, ".github/workflows/ci.yml", f)

	touch(dir, ".github/workflows/release.yaml")
	_, err = findPipeline(dir)
	require.ErrorContains(t, err, "has 2 workflows (.github/workflows/ci.yml, .github/workflows/release.yaml); choose one with -file")

	touch(dir, ".gitlab-ci.yml")
	f, err = findPipeline(dir)
	require.NoError(t, err)
	require.Equal(t, ".gitlab-ci.yml", f)

	touch(dir, ".cikit.yml")
	f, err = findPipeline(dir)
	require.NoError(t, err)
	require.Equal(t, ".cikit.yml", f, "the native file wins")
}

// TestLintAndRunShowLimits: a pipeline past the jobs limit is refused by
// `cikit lint` and `cikit run` with the diagnostic the server gives.
func TestLintAndRunShowLimits(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("jobs:\n")
	for i := range 1001 {
		fmt.Fprintf(&b, "  j%d: {steps: [x]}\n", i)
	}
	path := filepath.Join(dir, ".cikit.yml")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	want := `:1002:3: job "j1000" takes the run to 1001 jobs, more than the limit of 1000 jobs per run (Options.MaxJobs) [limit]`

	var out, errOut bytes.Buffer
	require.Equal(t, ExitFailed, lintCmd(context.Background(), []string{path}, &out, &errOut), errOut.String())
	require.Equal(t, path+want+"\n", out.String())

	out.Reset()
	errOut.Reset()
	require.Equal(t, ExitInvalid, runCmd(context.Background(), []string{"-dir", dir}, &out, &errOut))
	require.Contains(t, errOut.String(), path+want+"\n")
	require.Contains(t, errOut.String(), "nothing ran")
}

// TestLintWarnsWhatIsNotHonoured: `cikit lint` names what a pipeline asks
// for that the platform does not do yet, at its position, as warnings
// that do not fail; an action other than actions/checkout and local ones
// is named and said to fail at run time. A GitLab trigger job is an
// error.
func TestLintWarnsWhatIsNotHonoured(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := filepath.Join(dir, ".github", "workflows", "ci.yml")
	require.NoError(t, os.MkdirAll(filepath.Dir(wf), 0o755))
	require.NoError(t, os.WriteFile(wf, []byte(`on: push
jobs:
  test:
    runs-on: ubuntu-latest
    container: golang:1.26
    steps:
      - uses: actions/checkout@v4
      - uses: ./.github/actions/setup
      - uses: actions/setup-go@v5
      - run: go test ./...
`), 0o644))
	var out, errOut bytes.Buffer
	require.Equal(t, ExitOK, lintCmd(context.Background(), []string{wf}, &out, &errOut), errOut.String())
	require.Equal(t, wf+`:9:15: warning: action "actions/setup-go@v5" is not run by the platform yet (it runs actions/checkout, the artifact and cache actions and local ./ actions): step 3 of job "test" fails when it runs [unsupported]
`, out.String())

	out.Reset()
	require.Equal(t, ExitOK, lintCmd(context.Background(), []string{"-format", "json", wf}, &out, &errOut), errOut.String())
	require.Contains(t, out.String(), `"severity": "warning"`)
	require.Contains(t, out.String(), `"rule": "unsupported"`)

	gl := filepath.Join(dir, ".gitlab-ci.yml")
	require.NoError(t, os.WriteFile(gl, []byte("child:\n  trigger:\n    include: ci/child.yml\n"), 0o644))
	out.Reset()
	require.Equal(t, ExitFailed, lintCmd(context.Background(), []string{gl}, &out, &errOut), errOut.String())
	require.Equal(t, gl+`:2:3: trigger: (child/multi-project pipelines) is not supported yet: job "child" would start "./ci/child.yml", and no pipeline would run [trigger]
`, out.String())
}

// TestLintReadsTheRepository: run in a repository, `cikit lint` reads
// the pipeline as the platform does, with its local includes and the
// files rules:exists looks for.
func TestLintReadsTheRepository(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	write(".gitlab-ci.yml", "include: ci/jobs.yml\nbuild:\n  script: make\n  needs: [tests]\n")
	write("ci/jobs.yml", "tests:\n  script: go test ./...\n  rules:\n    - exists: [\"src/**/*.go\"]\n")
	t.Chdir(dir)

	var out, errOut bytes.Buffer
	require.Equal(t, ExitFailed, lintCmd(context.Background(), nil, &out, &errOut), errOut.String())
	require.Equal(t, `.gitlab-ci.yml:4:11: job "build" needs "tests", which is not in the pipeline for this event: its rules or only/except leave it out [needs]`+"\n", out.String(),
		"no Go file: the included job is left out by rules:exists")

	write("src/pkg/a.go", "package pkg\n")
	out.Reset()
	require.Equal(t, ExitOK, lintCmd(context.Background(), []string{".gitlab-ci.yml"}, &out, &errOut), errOut.String())
	require.Empty(t, out.String())
}
