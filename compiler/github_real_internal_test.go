package compiler

import (
	"context"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/internal/testenv"
)

// TestRealMatrixSizes records, in testdata/github_real_matrix.golden, how
// many variants each matrix job of each real workflow of the shared
// collection expands to. It reads the front end's draft, which has the
// jobs also when a file has findings (see TestRealWorkflows for those).
//
// Counts checked by hand against the files and GitHub's semantics:
//
//   - psf/requests run-tests build, 24: 8 Python versions × 3 systems;
//     both excludes name "macos-latest" and remove 3.8 and 3.9 on
//     "macOS-latest", because GitHub compares ignoring case (22); the two
//     macos-13 includes fit no combination and add a job each.
//   - fastapi test, 14: 8 Python versions × 2 pydantic versions, less the
//     two excluded pydantic-v1 combinations of 3.14 and 3.14t.
//   - go-gorm tests postgres, 12: 4 images × 3 Go versions × 1 platform.
//   - opencontainers/runc test, 21: of 3×2×2×2×2×2 = 96, criu-dev is left
//     only with Go 1.21.x, not rootless, no race, dmz "" and not on the
//     arm64 runner (2); runc_nodmz only on ubuntu-22.04 with Go 1.21.x,
//     not rootless, no race and criu "" (1); of the rest, 8 on each Ubuntu
//     and 2 on arm64 (Go 1.21.x, no race) (18).
//   - opencontainers/runc cross-i386, 2: its one axis; the variant whose
//     value is "" is named "cross-i386", as GitHub shows no empty value.
//   - go-sql-driver/mysql test: its matrix is fromJSON of the outputs of
//     the job list, known only at run time: one job, unexpanded.
func TestRealMatrixSizes(t *testing.T) {
	t.Parallel()
	dir := testenv.SharedTestdata(t, "gha")
	var files []string
	for _, ext := range []string{"*.yml", "*.yaml"} {
		m, err := filepath.Glob(filepath.Join(dir, ext))
		require.NoError(t, err)
		files = append(files, m...)
	}
	slices.Sort(files)
	var counts strings.Builder
	for _, file := range files {
		base := filepath.Base(file)
		parts := strings.SplitN(base, "__", 3)
		require.Len(t, parts, 3)
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		c := newChecker(".github/workflows/" + parts[2])
		c.ctx, c.src, c.opts = context.Background(), realSource{dir, parts[0] + "__" + parts[1]}, Options{Format: FormatGitHub}
		d := c.run(compileGitHub, data)
		variants := map[string]int{}
		unexpanded := map[string]bool{}
		var order []string
		for _, j := range d.jobs {
			of := j.spec.MatrixOf
			if of == "" {
				continue
			}
			if variants[of] == 0 {
				order = append(order, of)
			}
			variants[of]++
			_, unexpanded[of] = j.spec.Matrix["*"]
		}
		for _, job := range order {
			n := fmt.Sprint(variants[job])
			if unexpanded[job] {
				n = "unexpanded (run-time matrix)"
			}
			fmt.Fprintf(&counts, "%s %s: %s\n", base, job, n)
		}
	}
	golden := filepath.Join("testdata", "github_real_matrix.golden")
	if f := flag.Lookup("update"); f != nil && f.Value.String() == "true" {
		require.NoError(t, os.WriteFile(golden, []byte(counts.String()), 0o644))
		return
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err, "run go test -update to create it")
	if diff := gocmp.Diff(string(want), counts.String()); diff != "" {
		t.Errorf("%s (-want +got):\n%s", golden, diff)
	}
}

// realSource serves .github/workflows/NAME of repository OWNER__REPO from
// the collection's file OWNER__REPO__NAME.
type realSource struct{ dir, repo string }

func (r realSource) ReadFile(ctx context.Context, p string) ([]byte, error) {
	name, ok := strings.CutPrefix(p, ".github/workflows/")
	if !ok || strings.Contains(name, "/") {
		return nil, &fs.PathError{Op: "read", Path: p, Err: fs.ErrNotExist}
	}
	return DirSource(r.dir).ReadFile(ctx, r.repo+"__"+name)
}
