package cli

import (
	"os"
	"path/filepath"
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
