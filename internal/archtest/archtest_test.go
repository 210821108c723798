package archtest

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

const module = "github.com/cikit/cikit"

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestModuleBoundaries is the check this package exists for.
func TestModuleBoundaries(t *testing.T) {
	t.Parallel()
	gomod := goCmd(t, "", "env", "GOMOD")
	gomod = strings.TrimSpace(gomod)
	require.NotEmpty(t, gomod, "not inside a module")
	require.NotEqual(t, "/dev/null", gomod, "not inside a module")
	root := filepath.Dir(gomod)
	require.Equal(t, module, strings.TrimSpace(goCmd(t, root, "list", "-m")))

	listing := goCmd(t, root, "list", "-deps", "-f", ListFormat, "./...")
	require.Contains(t, listing, module+" ", "the listing misses the root package")
	for _, v := range Violations(module, listing) {
		t.Error(v)
	}
}

func goCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	// go test puts its own go first on PATH, so this is the toolchain
	// running the tests.
	cmd := exec.CommandContext(t.Context(), "go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go %s: %s", strings.Join(args, " "), stderr.String())
	return string(out)
}

func TestViolations(t *testing.T) {
	t.Parallel()
	const (
		root       = module
		dag        = module + "/dag"
		compiler   = module + "/compiler"
		ref        = module + "/reference"
		refAPI     = module + "/reference/api"
		example    = module + "/examples/localrun"
		reference2 = module + "/reference2"
		lease      = module + "/lease"
		artifacts  = module + "/artifacts"
		artsTest   = module + "/artifacts/artifactstest"
		logs       = module + "/logs"
		logsTest   = module + "/logs/logstest"
	)
	refRule := "only reference/... and examples/... may import the reference platform"
	artsRule := "logs stores finished logs in artifacts' blob stores, so artifacts never imports logs"
	rootRule := "the root package is the shared vocabulary and imports no other package of the module"

	for _, tc := range []struct {
		name    string
		listing string
		want    []Violation
	}{
		{
			name: "clean",
			listing: lines(
				"context",
				root+" errors fmt",
				dag+" context "+root,
				compiler+" "+dag+" "+root,
				refAPI+" net/http "+compiler+" "+dag+" "+root,
				ref+" "+refAPI+" "+compiler+" "+dag+" "+root,
				example+" "+ref+" "+refAPI+" "+root,
				// Another module's packages may depend on anything.
				"example.com/other "+ref,
			),
		},
		{
			name: "library depends on reference",
			listing: lines(
				root+" errors",
				lease+" "+refAPI+" "+root,
				compiler+" "+lease+" "+refAPI+" "+root,
				ref+" "+refAPI,
			),
			want: []Violation{
				{compiler, refAPI, refRule},
				{lease, refAPI, refRule},
			},
		},
		{
			name:    "root depends on module packages",
			listing: lines(root + " errors " + dag + " " + ref),
			want: []Violation{
				{root, dag, rootRule},
				{root, ref, rootRule},
			},
		},
		{
			name: "artifacts below logs",
			listing: lines(
				logs+" "+artifacts+" "+root,
				logsTest+" "+logs+" "+artifacts+" "+root,
				artifacts+" "+root,
				artsTest+" "+artifacts+" "+logs+" "+root,
			),
			want: []Violation{{artsTest, logs, artsRule}},
		},
		{
			name: "a prefix is not a parent",
			listing: lines(
				reference2+" "+ref,
				dag+" "+reference2,
			),
			want: []Violation{{reference2, ref, refRule}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := Violations(module, tc.listing)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Violations (-want +got):\n%s", diff)
			}
		})
	}
}

func lines(ls ...string) string { return strings.Join(ls, "\n") + "\n" }
