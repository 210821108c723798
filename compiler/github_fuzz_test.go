package compiler_test

import (
	"path/filepath"
	"testing"

	"github.com/cikit/cikit/compiler"
)

// FuzzCompileGitHub feeds arbitrary bytes to the GitHub front end, as a
// workflow file.
//
// Invariant: CompileBytes never panics and returns no error; the result
// holds checkCompiled's invariants; triggers never set both a filter and
// its -ignore twin; Plan.Triggered answers for any event with a reason.
func FuzzCompileGitHub(f *testing.F) {
	seedGolden(f, filepath.Join("testdata", "github", "*.yml"))
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
		checkCompiled(t, plan, diags, path)
		if plan == nil {
			return
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
