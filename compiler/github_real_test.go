package compiler_test

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/compiler"
	"github.com/cikit/cikit/internal/testenv"
)

// realWorkflows serves the workflows of the shared collection, where
// .github/workflows/NAME of repository OWNER/REPO is the file
// OWNER__REPO__NAME.
type realWorkflows struct {
	dir  string
	repo string // OWNER__REPO
}

func (r realWorkflows) ReadFile(ctx context.Context, p string) ([]byte, error) {
	name, ok := strings.CutPrefix(p, ".github/workflows/")
	if !ok || strings.Contains(name, "/") {
		return nil, &fs.PathError{Op: "read", Path: p, Err: fs.ErrNotExist}
	}
	return compiler.DirSource(r.dir).ReadFile(ctx, r.repo+"__"+name)
}

// realFindings are the diagnostics the real files get, by file name. Each
// is a true finding: GitHub rejects the file, the file cannot do what it
// says, or (for the moby files) the collection lacks a file the workflow
// calls. Every other file compiles without diagnostics.
var realFindings = map[string][]string{
	// A string in double quotes: GitHub's expressions quote strings with
	// single quotes, and GitHub rejects the workflow.
	"go-gitea__gitea__cron-licenses.yml": {
		`9:30: invalid expression: unexpected '"': strings in expressions are in single quotes, as in 'text' [expression]`,
	},
	// The job has no matrix, so matrix.go is always empty: the step is
	// named "Set up Go " (the version is in env.LATEST_GO_VERSION). A
	// leftover of a matrix job; actionlint reports it too.
	"labstack__echo__checks.yml": {
		`26:29: matrix.go refers to the matrix, and job "check" has none, so it is always empty [matrix-ref]`,
	},
	// The same in the Windows job, which has no matrix: the cache key and
	// its restore key get an empty Go version.
	"spf13__cobra__test.yml": {
		`93:35: matrix.go refers to the matrix, and job "test-win" has none, so it is always empty [matrix-ref]`,
		`94:44: matrix.go refers to the matrix, and job "test-win" has none, so it is always empty [matrix-ref]`,
	},
	// The job is disabled with "if: false" (the comment above it says the
	// tests do not pass). The job can never run: actionlint reports such
	// constant conditions too, and the finding tells the author to remove
	// the job, or the condition once the job works.
	"go-gitea__gitea__pull-e2e-tests.yml": {
		`17:9: condition "false" is always false, so this never runs; remove it, or the if: [if-cond]`,
	},
	// The collection holds .dco.yml and .test-prepare.yml of moby/moby but
	// not .windows.yml, which both Windows workflows call; with the
	// repository at hand it would be read. The finding is the clear
	// message a missing called workflow gets.
	"moby__moby__windows-2022.yml": {
		`33:11: included file ".github/workflows/.windows.yml" does not exist at this commit [include]`,
	},
	"moby__moby__windows-2025.yml": {
		`28:11: included file ".github/workflows/.windows.yml" does not exist at this commit [include]`,
	},
}

// TestRealWorkflows compiles every workflow of the shared collection of
// real GitHub workflows and checks that it compiles without diagnostics,
// or with exactly the true findings of realFindings. (The sizes of their
// matrices are checked by TestRealMatrixSizes.)
func TestRealWorkflows(t *testing.T) {
	t.Parallel()
	dir := testenv.SharedTestdata(t, "gha")
	var files []string
	for _, ext := range []string{"*.yml", "*.yaml"} {
		m, err := filepath.Glob(filepath.Join(dir, ext))
		require.NoError(t, err)
		files = append(files, m...)
	}
	slices.Sort(files)
	require.NotEmpty(t, files)
	unsupported := newUnsupportedSummary()
	defer unsupported.check(t, filepath.Join("testdata", "github", "real_unsupported.out"))
	for _, file := range files {
		base := filepath.Base(file)
		parts := strings.SplitN(base, "__", 3)
		require.Len(t, parts, 3, "file %s is not named OWNER__REPO__NAME", base)
		path := ".github/workflows/" + parts[2]
		src := realWorkflows{dir: dir, repo: parts[0] + "__" + parts[1]}
		plan, diags, err := compiler.Compile(context.Background(), src, path, compiler.Options{})
		require.NoError(t, err, base)
		diags = unsupported.add(t, base, plan, diags)
		var got []string
		for _, d := range diags {
			require.Equal(t, path, d.File, "%s: a finding in another file: %s", base, d)
			got = append(got, fmt.Sprintf("%d:%d: %s [%s]", d.Line, d.Col, d.Message, d.Rule))
		}
		if diff := gocmp.Diff(realFindings[base], got); diff != "" {
			t.Errorf("%s: findings (-want +got):\n%s", base, diff)
		}
	}
}
