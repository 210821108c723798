package compiler_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cikit/cikit/compiler"
)

// FuzzCompileGitHub feeds arbitrary bytes to the GitHub front end, as a
// workflow file.
//
// Invariant: CompileBytes never panics and returns no error; the
// diagnostics are sorted by (line, col, rule, message), each in the
// compiled file with Line >= 1, Col >= 1 and a non-empty Rule and Message;
// the plan is nil exactly when a diagnostic is an error; a plan has unique
// job IDs, a valid graph (one node per job, in job order, with the job's
// needs, and a complete topological order), at least one step in every
// job, matrix variants that name the job they come from, and triggers
// that never set both a filter and its -ignore twin; Plan.Triggered
// answers for any event without panicking.
func FuzzCompileGitHub(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "github", "*.yml"))
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
	const path = ".github/workflows/fuzz.yml"
	events := []*compiler.Event{
		nil,
		{Name: "push", Ref: "refs/heads/main", ChangedFiles: []string{"a/b.go", "README.md"}},
		{Name: "tag", Tag: "v1.2.3"},
		{Name: "pull_request", BaseBranch: "main", Payload: map[string]any{"action": "opened"}},
		{Name: "manual"},
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		plan, diags, err := compiler.CompileBytes(path, data, compiler.Options{Format: compiler.FormatGitHub})
		if err != nil {
			t.Fatalf("error: %v", err)
		}
		if (plan == nil) != compiler.HasErrors(diags) {
			t.Fatalf("plan %v with %d diagnostics (errors: %v)", plan != nil, len(diags), compiler.HasErrors(diags))
		}
		for i, d := range diags {
			if d.Line < 1 || d.Col < 1 || d.Rule == "" || d.Message == "" || d.File != path {
				t.Fatalf("malformed diagnostic %#v", d)
			}
			if i > 0 && compareDiags(diags[i-1], d) > 0 {
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
			if len(j.Steps) == 0 {
				t.Fatalf("job %q has no steps", j.ID)
			}
			if j.Matrix != nil && j.MatrixOf == "" {
				t.Fatalf("job %q has matrix values but names no matrix job", j.ID)
			}
			n := g.Node(i)
			if n.ID != j.ID || !slices.Equal(n.Needs, j.Needs) {
				t.Fatalf("node %d is %+v, job is %q needing %v", i, n, j.ID, j.Needs)
			}
		}
		if len(g.Order()) != g.Len() {
			t.Fatalf("topological order has %d of %d nodes", len(g.Order()), g.Len())
		}
		for _, tr := range plan.Triggers {
			if tr.Branches != nil && tr.BranchesIgnore != nil || tr.Tags != nil && tr.TagsIgnore != nil || tr.Paths != nil && tr.PathsIgnore != nil {
				t.Fatalf("trigger %+v has a filter and its -ignore twin", tr)
			}
		}
		for _, ev := range events {
			if ok, why := plan.Triggered(ev); why == "" {
				t.Fatalf("Triggered(%+v) = %v without a reason", ev, ok)
			}
		}
	})
}
