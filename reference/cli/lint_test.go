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
