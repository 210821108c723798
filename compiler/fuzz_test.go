package compiler_test

import (
	"cmp"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cikit/cikit/compiler"
)

// FuzzCompileNative feeds arbitrary bytes to the native front end.
//
// Invariant: CompileBytes never panics and returns no error for the native
// format, and the result holds checkCompiled's invariants.
func FuzzCompileNative(f *testing.F) {
	seedGolden(f, filepath.Join("testdata", "native", "*.yml"))
	f.Fuzz(func(t *testing.T, data []byte) {
		plan, diags, err := compiler.CompileBytes(".cikit.yml", data, compiler.Options{Format: compiler.FormatNative})
		if err != nil {
			t.Fatalf("error: %v", err)
		}
		checkCompiled(t, plan, diags, ".cikit.yml")
	})
}

// seedGolden adds the files matching the patterns to the fuzz corpus.
func seedGolden(f *testing.F, patterns ...string) {
	f.Helper()
	for _, pattern := range patterns {
		files, err := filepath.Glob(pattern)
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
}

// checkCompiled asserts what every compilation result holds, whatever the
// input: the plan is nil exactly when a diagnostic is an error; the
// diagnostics are sorted by (file, line, col, rule, message), each with
// Line >= 1, Col >= 1, a non-empty Rule and Message, and in file (any
// file when file is ""); a plan has unique job IDs, something to run in
// every job (steps, or another pipeline in Uses), matrix variants that
// name their matrix job, and a graph with one node per job, in job order,
// with the job's needs and a complete topological order.
func checkCompiled(t testing.TB, plan *compiler.Plan, diags []compiler.Diagnostic, file string) {
	t.Helper()
	if (plan == nil) != compiler.HasErrors(diags) {
		t.Fatalf("plan %v with %d diagnostics (errors: %v)", plan != nil, len(diags), compiler.HasErrors(diags))
	}
	for i, d := range diags {
		if d.Line < 1 || d.Col < 1 || d.Rule == "" || d.Message == "" || d.File == "" || file != "" && d.File != file {
			t.Fatalf("malformed diagnostic %#v", d)
		}
		if i > 0 && cmp.Or(cmp.Compare(diags[i-1].File, d.File), compareDiags(diags[i-1], d)) > 0 {
			t.Fatalf("diagnostics out of order: %s before %s", diags[i-1], d)
		}
	}
	if plan == nil {
		return
	}
	g := plan.Graph()
	if g == nil || g.Len() != len(plan.Jobs) {
		t.Fatalf("graph does not match the %d jobs", len(plan.Jobs))
	}
	ids := map[string]bool{}
	for i, j := range plan.Jobs {
		if ids[j.ID] {
			t.Fatalf("job ID %q is used twice", j.ID)
		}
		ids[j.ID] = true
		if len(j.Steps) == 0 && j.Uses == "" {
			t.Fatalf("job %q has nothing to run", j.ID)
		}
		if j.Matrix != nil && j.MatrixOf == "" {
			t.Fatalf("job %q has matrix values but names no matrix job", j.ID)
		}
		n := g.Node(i)
		if n.ID != j.ID || !slices.Equal(n.Needs, j.Needs) {
			t.Fatalf("node %d is %+v, job is %q needing %v", i, n, j.ID, j.Needs)
		}
		if plan.Job(j.ID) != j {
			t.Fatalf("Job(%q) is not the job", j.ID)
		}
	}
	if len(g.Order()) != g.Len() {
		t.Fatalf("topological order has %d of %d nodes", len(g.Order()), g.Len())
	}
}

func compareDiags(a, b compiler.Diagnostic) int {
	return cmp.Or(
		cmp.Compare(a.Line, b.Line),
		cmp.Compare(a.Col, b.Col),
		cmp.Compare(a.Rule, b.Rule),
		cmp.Compare(a.Message, b.Message),
	)
}

// FuzzCompileGitLab feeds arbitrary bytes to the GitLab front end, as the
// main file of a repository that holds the golden files (so includes,
// extends, !reference and exists are exercised), without an event and
// with one.
//
// Invariant: Compile never panics and returns no error, and the result
// holds checkCompiled's invariants (findings may be in included files).
func FuzzCompileGitLab(f *testing.F) {
	dir := filepath.Join("testdata", "gitlab")
	for _, pattern := range []string{"*.yml", "include/*.yml"} {
		files, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data, false)
			f.Add(data, true)
		}
	}
	src := compiler.DirSource(dir)
	event := &compiler.Event{Name: "push", Branch: "main", DefaultBranch: "main", ChangedFiles: []string{"src/main.go"}}
	f.Fuzz(func(t *testing.T, data []byte, withEvent bool) {
		opts := compiler.Options{Format: compiler.FormatGitLab}
		if withEvent {
			opts.Event = event
		}
		plan, diags, err := compiler.Compile(t.Context(), fuzzSource{src, data}, fuzzMain, opts)
		if err != nil {
			t.Fatalf("error: %v", err)
		}
		checkCompiled(t, plan, diags, "")
	})
}

// fuzzMain is the name of the fuzzed main file: a name the golden
// directory does not have, so that the fuzzer's bytes are what is read.
const fuzzMain = ".gitlab-ci.yml"

// fuzzSource serves the fuzzed bytes as the main file and the golden
// directory's files as the rest of the repository.
type fuzzSource struct {
	compiler.FileSource
	main []byte
}

func (s fuzzSource) ReadFile(ctx context.Context, path string) ([]byte, error) {
	if path == fuzzMain {
		return s.main, nil
	}
	return s.FileSource.ReadFile(ctx, path)
}
