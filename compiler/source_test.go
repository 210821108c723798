package compiler_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/compiler"
)

// TestDirSourceListFiles: a DirSource lists the files below a folder at
// any depth, without .git and without following links out of it; a
// folder that is missing (or a file) matches fs.ErrNotExist, and more
// files than asked for is ErrTooManyFiles.
func TestDirSourceListFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, name := range []string{"a.txt", "src/b.go", "src/deep/c.go", ".git/HEAD", "src/.hidden"} {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), nil, 0o644))
	}
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret"), nil, 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "src", "link")))
	src := compiler.DirSource(dir)

	files, err := src.ListFiles(t.Context(), "", 100)
	require.NoError(t, err)
	slices.Sort(files)
	require.Equal(t, []string{"a.txt", "src/.hidden", "src/b.go", "src/deep/c.go", "src/link"}, files)

	files, err = src.ListFiles(t.Context(), "src/deep", 100)
	require.NoError(t, err)
	require.Equal(t, []string{"src/deep/c.go"}, files)

	_, err = src.ListFiles(t.Context(), "no/such", 100)
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, err = src.ListFiles(t.Context(), "a.txt", 100)
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, err = src.ListFiles(t.Context(), "../x", 100)
	require.ErrorIs(t, err, fs.ErrInvalid)

	files, err = src.ListFiles(t.Context(), "", 2)
	require.ErrorIs(t, err, compiler.ErrTooManyFiles)
	require.Len(t, files, 2)
}

// TestExistsComparisonsLimit: past GitLab's 10,000 comparisons of files
// and glob patterns, an exists clause is true without comparing, as on
// GitLab.
func TestExistsComparisonsLimit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// 50 globs and 201 files (the pipeline file counted): 10,050
	// comparisons.
	var globs []string
	for i := range 50 {
		globs = append(globs, strconv.Quote("no/such/"+strconv.Itoa(i)+"/**/*.go"))
	}
	for i := range 200 {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "f"+strconv.Itoa(i)), nil, 0o644))
	}
	src := "never-matches:\n  script: make\n  rules:\n    - exists: [" + strings.Join(globs, ", ") + "]\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".gitlab-ci.yml"), []byte(src), 0o644))
	plan, diags, err := compiler.Compile(t.Context(), compiler.DirSource(dir), ".gitlab-ci.yml", compiler.Options{})
	require.NoError(t, err)
	require.Empty(t, diags)
	require.NotNil(t, plan.Job("never-matches"))

	// 200 files: 10,000 comparisons, made, and nothing matches.
	require.NoError(t, os.Remove(filepath.Join(dir, "f0")))
	plan, diags, err = compiler.Compile(t.Context(), compiler.DirSource(dir), ".gitlab-ci.yml", compiler.Options{})
	require.NoError(t, err)
	require.Nil(t, plan)
	require.NotEmpty(t, diags)
}
