package compiler_test

import (
	"cmp"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/compiler"
)

var update = flag.Bool("update", false, "rewrite the golden .out files from the compiler's output")

// TestGolden compiles every testdata/native/*.yml and compares a summary of
// the plan, or the diagnostics, with the .out file next to it.
func TestGolden(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "native", "*.yml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, file := range files {
		name := filepath.Base(file)
		t.Run(strings.TrimSuffix(name, ".yml"), func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(file)
			require.NoError(t, err)
			plan, diags, err := compiler.CompileBytes(name, data, compiler.Options{Format: compiler.FormatNative})
			require.NoError(t, err)
			got := summary(plan, diags)

			out := strings.TrimSuffix(file, ".yml") + ".out"
			if *update {
				require.NoError(t, os.WriteFile(out, []byte(got), 0o644))
				return
			}
			want, err := os.ReadFile(out)
			require.NoError(t, err, "run go test -update to create it")
			if diff := gocmp.Diff(string(want), got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", out, diff)
			}
		})
	}
}

// summary renders a compilation result for a person to check: the plan
// field by field, or the diagnostics as a compiler prints them.
func summary(plan *compiler.Plan, diags []compiler.Diagnostic) string {
	var b strings.Builder
	if plan == nil {
		for _, d := range diags {
			fmt.Fprintln(&b, d)
		}
		return b.String()
	}
	fmt.Fprintf(&b, "stages: %s\n", cmp.Or(strings.Join(plan.Stages, ", "), "-"))
	fmt.Fprintf(&b, "env: %s\n", envString(plan.Env))
	g := plan.Graph()
	order := make([]string, 0, g.Len())
	for _, i := range g.Order() {
		order = append(order, g.Node(i).ID)
	}
	fmt.Fprintf(&b, "order: %s\n", strings.Join(order, ", "))
	for _, j := range plan.Jobs {
		fmt.Fprintf(&b, "\njob %s\n", j.ID)
		fmt.Fprintf(&b, "  name: %q\n", j.Name)
		fmt.Fprintf(&b, "  stage: %q\n", j.Stage)
		fmt.Fprintf(&b, "  needs: [%s]\n", strings.Join(j.Needs, ", "))
		fmt.Fprintf(&b, "  image: %q\n", j.Image)
		fmt.Fprintf(&b, "  env: %s\n", envString(j.Env))
		fmt.Fprintf(&b, "  allow_failure: %t\n", j.AllowFailure)
		fmt.Fprintf(&b, "  timeout: %s\n", j.Timeout)
		for _, s := range j.Steps {
			fmt.Fprintf(&b, "  step %q: run %q", s.Name, s.Run)
			if s.Env != nil {
				fmt.Fprintf(&b, " env %s", envString(s.Env))
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

func envString(env map[string]string) string {
	if env == nil {
		return "-"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		parts = append(parts, fmt.Sprintf("%s=%q", k, env[k]))
	}
	return strings.Join(parts, " ")
}
