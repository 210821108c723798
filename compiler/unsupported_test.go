package compiler_test

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/compiler"
)

// unsupportedSummary collects the RuleUnsupported warnings of the real
// files: what each asks for that the platform does not honour yet,
// counted by the key the warning names, so that a change in what is
// honoured shows as a change of the summary a person reviews.
type unsupportedSummary struct {
	b strings.Builder
}

func newUnsupportedSummary() *unsupportedSummary {
	u := &unsupportedSummary{}
	u.b.WriteString("# What the real files ask for that is not honoured yet: warnings by key.\n")
	return u
}

// add records the unsupported warnings of file and returns the other
// diagnostics. With a plan, each warning is also in the Warnings of a job
// of the plan, which the runner prints, or t fails.
func (u *unsupportedSummary) add(t *testing.T, file string, plan *compiler.Plan, diags []compiler.Diagnostic) []compiler.Diagnostic {
	t.Helper()
	var rest []compiler.Diagnostic
	counts := map[string]int{}
	inJobs := map[string]bool{}
	if plan != nil {
		for _, j := range plan.Jobs {
			for _, w := range j.Warnings {
				inJobs[w] = true
			}
		}
	}
	for _, d := range diags {
		if d.Rule != compiler.RuleUnsupported {
			rest = append(rest, d)
			continue
		}
		if line := fmt.Sprintf("%s:%d: %s", d.File, d.Line, d.Message); plan != nil && !inJobs[line] {
			t.Errorf("%s: the warning %q is in no job's Warnings", file, line)
		}
		key, _, _ := strings.Cut(d.Message, " ")
		counts[key]++
	}
	if len(counts) == 0 {
		return rest
	}
	parts := make([]string, 0, len(counts))
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
	}
	fmt.Fprintf(&u.b, "%s: %s\n", file, strings.Join(parts, ", "))
	return rest
}

// check compares the summary with the golden file out.
func (u *unsupportedSummary) check(t *testing.T, out string) {
	t.Helper()
	if *update {
		require.NoError(t, os.WriteFile(out, []byte(u.b.String()), 0o644))
		return
	}
	want, err := os.ReadFile(out)
	require.NoError(t, err, "run go test -update to create it")
	if diff := gocmp.Diff(string(want), u.b.String()); diff != "" {
		t.Errorf("%s (-want +got):\n%s", out, diff)
	}
}
