package compiler_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/compiler"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func compileNative(t *testing.T, src string) (*compiler.Plan, []compiler.Diagnostic) {
	t.Helper()
	plan, diags, err := compiler.CompileBytes(".cikit.yml", []byte(src), compiler.Options{})
	require.NoError(t, err)
	return plan, diags
}

func TestCompileBytesPlan(t *testing.T) {
	t.Parallel()
	plan, diags := compileNative(t, `
stages: [build, test]
env: {A: "1"}
jobs:
  build:
    env: {B: "2"}
    steps:
      - make
      - name: vet
        run: go vet
        env: {C: "3"}
    timeout: 90s
  unit:
    stage: test
    allow_failure: true
    steps: [make test]
`)
	require.Empty(t, diags)
	require.NotNil(t, plan)
	want := []*cikit.JobSpec{
		{
			ID: "build", Name: "build", Stage: "build",
			Env: map[string]string{"A": "1", "B": "2"},
			Steps: []cikit.Step{
				{Name: "make", Run: "make"},
				{Name: "vet", Run: "go vet", Env: map[string]string{"C": "3"}},
			},
			Timeout:  90 * time.Second,
			Checkout: &cikit.Checkout{Strategy: "fetch"},
			Format:   "native",
		},
		{
			ID: "unit", Name: "unit", Stage: "test", Needs: []string{"build"},
			Env:          map[string]string{"A": "1"},
			Steps:        []cikit.Step{{Name: "make test", Run: "make test"}},
			AllowFailure: true,
			Checkout:     &cikit.Checkout{Strategy: "fetch"},
			Format:       "native",
		},
	}
	if diff := cmp.Diff(want, plan.Jobs); diff != "" {
		t.Fatalf("jobs (-want +got):\n%s", diff)
	}
	require.Equal(t, ".cikit.yml", plan.File)
	require.Equal(t, compiler.FormatNative, plan.Format)
	require.Equal(t, []string{"build", "test"}, plan.Stages)
	require.Equal(t, map[string]string{"A": "1"}, plan.Env)

	g := plan.Graph()
	require.NotNil(t, g)
	require.Equal(t, 2, g.Len())
	i, ok := g.Index("unit")
	require.True(t, ok)
	require.Equal(t, []int{0}, g.Parents(i))
	require.True(t, g.Node(i).AllowFailure)

	require.Same(t, plan.Jobs[1], plan.Job("unit"))
	require.Nil(t, plan.Job("deploy"))
}

// A job's env is its own map: changing one job must not change another,
// nor the pipeline's.
func TestCompileBytesEnvNotShared(t *testing.T) {
	t.Parallel()
	plan, diags := compileNative(t, "env: {A: x}\njobs:\n  a: {steps: [x]}\n  b: {steps: [x]}\n")
	require.Empty(t, diags)
	plan.Jobs[0].Env["A"] = "changed"
	require.Equal(t, "x", plan.Jobs[1].Env["A"])
	require.Equal(t, "x", plan.Env["A"])
}

func TestCompileBytesDiagnosticsSortedAndComplete(t *testing.T) {
	t.Parallel()
	plan, diags := compileNative(t, `
jobs:
  b:
    needs: [nope]
    steps: []
  a:
    imgae: x
    steps: [x]
    timeout: 0s
`)
	require.Nil(t, plan)
	got := make([]string, len(diags))
	for i, d := range diags {
		got[i] = d.String()
	}
	want := []string{
		`.cikit.yml:4:13: job "b" needs unknown job "nope" (jobs: b, a) [needs]`,
		`.cikit.yml:5:5: job "b" has no steps [steps]`,
		`.cikit.yml:7:5: unknown key "imgae" in job "a"; did you mean "image"? [key]`,
		`.cikit.yml:9:14: timeout of job "a" must be positive, got "0s" [timeout]`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("diagnostics (-want +got):\n%s", diff)
	}
}

func TestDiagnosticString(t *testing.T) {
	t.Parallel()
	d := compiler.Diagnostic{File: "ci/.cikit.yml", Line: 3, Col: 5, Rule: compiler.RuleKey, Message: `unknown key "x"`}
	require.Equal(t, `ci/.cikit.yml:3:5: unknown key "x" [key]`, d.String())
}

func TestDetect(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]compiler.Format{
		".cikit.yml":            compiler.FormatNative,
		".cikit.yaml":           compiler.FormatNative,
		"sub/dir/.cikit.yml":    compiler.FormatNative,
		"cikit.yml":             "",
		".cikit.yml.bak":        "",
		".gitlab-ci.yml":        compiler.FormatGitLab,
		".gitlab-ci.yaml":       compiler.FormatGitLab,
		"sub/.gitlab-ci.yml":    compiler.FormatGitLab,
		"gitlab-ci.yml":         "",
		".github/workflows/a.y": "",
		"":                      "",
	} {
		got, ok := compiler.Detect(path)
		require.Equal(t, want, got, path)
		require.Equal(t, want != "", ok, path)
	}
}

func TestCompileBytesFormatErrors(t *testing.T) {
	t.Parallel()
	_, _, err := compiler.CompileBytes("pipeline.yml", []byte("jobs: {}"), compiler.Options{})
	require.ErrorIs(t, err, compiler.ErrUnknownFormat)

	_, _, err = compiler.CompileBytes(".cikit.yml", []byte("jobs: {}"), compiler.Options{Format: "jenkins"})
	require.ErrorIs(t, err, compiler.ErrUnknownFormat)

	// An explicit format wins over the name.
	plan, diags, err := compiler.CompileBytes("pipeline.yml", []byte("jobs: {a: {steps: [x]}}"), compiler.Options{Format: compiler.FormatNative})
	require.NoError(t, err)
	require.Empty(t, diags)
	require.Equal(t, "pipeline.yml", plan.File)
}

func TestCompile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "ci"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ci", ".cikit.yml"), []byte("jobs: {a: {steps: [x]}}\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".cikit.yml"), []byte("jobs: {a: {stepz: [x]}}\n"), 0o644))
	src := compiler.DirSource(dir)

	plan, diags, err := compiler.Compile(ctx, src, "ci/.cikit.yml", compiler.Options{})
	require.NoError(t, err)
	require.Empty(t, diags)
	require.Equal(t, "ci/.cikit.yml", plan.File)
	require.Len(t, plan.Jobs, 1)

	plan, diags, err = compiler.Compile(ctx, src, ".cikit.yml", compiler.Options{})
	require.NoError(t, err)
	require.Nil(t, plan)
	require.Len(t, diags, 2)
	require.Equal(t, ".cikit.yml", diags[0].File)

	_, _, err = compiler.Compile(ctx, src, "missing/.cikit.yml", compiler.Options{})
	require.ErrorIs(t, err, fs.ErrNotExist)

	// The format is settled before anything is read.
	_, _, err = compiler.Compile(ctx, failingSource{}, "Jenkinsfile", compiler.Options{})
	require.ErrorIs(t, err, compiler.ErrUnknownFormat)
}

type failingSource struct{}

func (failingSource) ReadFile(context.Context, string) ([]byte, error) {
	panic("ReadFile must not be called")
}

func TestDirSource(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	parent := t.TempDir()
	dir := filepath.Join(parent, "repo")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "f.yml"), []byte("hello"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(parent, "secret"), []byte("secret"), 0o644))
	src := compiler.DirSource(dir)

	t.Run("reads", func(t *testing.T) {
		t.Parallel()
		got, err := src.ReadFile(ctx, "sub/f.yml")
		require.NoError(t, err)
		require.Equal(t, "hello", string(got))
	})
	t.Run("missing", func(t *testing.T) {
		t.Parallel()
		_, err := src.ReadFile(ctx, "sub/none.yml")
		require.ErrorIs(t, err, fs.ErrNotExist)
	})
	t.Run("escapes", func(t *testing.T) {
		t.Parallel()
		for _, p := range []string{
			"../secret", "sub/../../secret", "sub/../f.yml", "/etc/passwd",
			filepath.Join(parent, "secret"), "./sub/f.yml", "", ".", "sub/", "sub//f.yml",
		} {
			_, err := src.ReadFile(ctx, p)
			require.ErrorIs(t, err, fs.ErrInvalid, "%q", p)
			require.NotErrorIs(t, err, fs.ErrNotExist, "%q", p)
		}
	})
	t.Run("symlink out", func(t *testing.T) {
		t.Parallel()
		if runtime.GOOS == "windows" {
			t.Skip("symbolic links need privileges on Windows")
		}
		link := filepath.Join(dir, "link")
		require.NoError(t, os.Symlink(filepath.Join(parent, "secret"), link))
		_, err := src.ReadFile(ctx, "link")
		require.Error(t, err)
	})
	t.Run("cancelled", func(t *testing.T) {
		t.Parallel()
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := src.ReadFile(cctx, "sub/f.yml")
		require.ErrorIs(t, err, context.Canceled)
	})
}

// Stage order implies needs only for jobs without a needs key, and only on
// the nearest earlier stage that has jobs.
func TestStageBarrier(t *testing.T) {
	t.Parallel()
	plan, diags := compileNative(t, `
stages: [a, b, c, d]
jobs:
  a1: {steps: [x]}
  a2: {stage: a, steps: [x]}
  c1: {stage: c, steps: [x]}
  c2: {stage: c, needs: [], steps: [x]}
  d1: {stage: d, steps: [x]}
  d2: {stage: d, needs: [a2], steps: [x]}
`)
	require.Empty(t, diags)
	got := map[string][]string{}
	for _, j := range plan.Jobs {
		got[j.ID] = j.Needs
	}
	want := map[string][]string{
		"a1": nil, "a2": nil,
		"c1": {"a1", "a2"}, "c2": nil,
		"d1": {"c1", "c2"}, "d2": {"a2"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("needs (-want +got):\n%s", diff)
	}
}

// The plan-size limit stops a pipeline whose jobs × env grows past it,
// with one diagnostic instead of gigabytes.
func TestPlanLimit(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("env:\n")
	for i := range 3000 {
		fmt.Fprintf(&b, "  E%d: x\n", i)
	}
	b.WriteString("jobs:\n")
	for i := range 1000 {
		fmt.Fprintf(&b, "  j%d: {steps: [x]}\n", i)
	}
	plan, diags := compileNative(t, b.String())
	require.Nil(t, plan)
	require.Len(t, diags, 1)
	require.Equal(t, compiler.RuleLimit, diags[0].Rule)
}

// A classic billion laughs: ten levels of lists, each aliasing the one
// before ten times. The compiler follows aliases only where it reads a
// value, and a need that is a list is reported, not expanded.
func TestBillionLaughsLists(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("jobs:\n  x:\n    steps: [make]\n    needs:\n      - &a0 [lol]\n")
	for i := 1; i < 10; i++ {
		refs := strings.Repeat(fmt.Sprintf("*a%d, ", i-1), 10)
		fmt.Fprintf(&b, "      - &a%d [%s]\n", i, strings.TrimSuffix(refs, ", "))
	}
	b.WriteString("    env: {A: *a9}\n")
	plan, diags := compileNative(t, b.String())
	require.Nil(t, plan)
	require.Len(t, diags, 11) // ten needs that are lists, one env value
	for _, d := range diags {
		require.Equal(t, compiler.RuleType, d.Rule, d.String())
	}
}

// TestNativeIfWithEvent: with the event known, a condition on the github
// context is decided when compiling; a part that needs the run stays.
func TestNativeIfWithEvent(t *testing.T) {
	t.Parallel()
	src := []byte(`jobs:
  build:
    steps: [make]
  release:
    needs: [build]
    if: github.ref == 'refs/heads/main' && needs.build.result == 'success'
    steps: [make release]
  tag-only:
    if: startsWith(github.ref, 'refs/tags/')
    steps: [make dist]
`)
	compile := func(ev *compiler.Event) *compiler.Plan {
		plan, diags, err := compiler.CompileBytes(".cikit.yml", src, compiler.Options{Event: ev})
		require.NoError(t, err)
		require.Empty(t, diags)
		return plan
	}
	main := compile(&compiler.Event{Name: "push", Ref: "refs/heads/main", Branch: "main"})
	require.Equal(t, &cikit.Condition{Lang: cikit.LangGitHub, Expr: "github.ref == 'refs/heads/main' && needs.build.result == 'success'"}, main.Job("release").If)
	require.Equal(t, cikit.WhenNever, main.Job("tag-only").When)

	feature := compile(&compiler.Event{Name: "push", Ref: "refs/heads/feature", Branch: "feature"})
	require.Equal(t, cikit.WhenNever, feature.Job("release").When, "false && anything is false")
	require.Nil(t, feature.Job("release").If)

	tag := compile(&compiler.Event{Name: "push", Ref: "refs/tags/v1.0.0", Tag: "v1.0.0"})
	require.Empty(t, tag.Job("tag-only").When)
	require.Nil(t, tag.Job("tag-only").If)

	lint := compile(nil)
	require.NotNil(t, lint.Job("tag-only").If, "without an event the condition stays for run time")
}

// TestNativeTriggered: the native triggers decide with GitHub's filter
// semantics which events start the pipeline.
func TestNativeTriggered(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/native/on.yml")
	require.NoError(t, err)
	plan, diags, err := compiler.CompileBytes(".cikit.yml", data, compiler.Options{})
	require.NoError(t, err)
	require.Len(t, diags, 1)
	require.Equal(t, ".cikit.yml:12:3: warning: schedule is not run yet: no run starts on its own at these times [unsupported]", diags[0].String())
	for _, tc := range []struct {
		ev   compiler.Event
		want bool
	}{
		{compiler.Event{Name: "push", Branch: "main", ChangedFiles: []string{"cmd/main.go"}}, true},
		{compiler.Event{Name: "push", Branch: "main", ChangedFiles: []string{"docs/intro.md", "README.md"}}, false},
		{compiler.Event{Name: "push", Branch: "release/1.2", ChangedFiles: []string{"go.mod"}}, true},
		{compiler.Event{Name: "push", Branch: "feature/x", ChangedFiles: []string{"go.mod"}}, false},
		{compiler.Event{Name: "push", Tag: "v1.2.3"}, true},
		{compiler.Event{Name: "push", Tag: "nightly"}, false},
		{compiler.Event{Name: "pull_request", BaseBranch: "main"}, true},
		{compiler.Event{Name: "pull_request", BaseBranch: "develop"}, false},
		{compiler.Event{Name: "schedule"}, true},
		{compiler.Event{Name: "manual"}, true},
	} {
		ok, reason := plan.Triggered(&tc.ev)
		require.Equal(t, tc.want, ok, "%+v: %s", tc.ev, reason)
		require.NotEmpty(t, reason)
	}
}

// TestPlanFiles: a plan names the files it was compiled from, the
// compiled one first and each included one once, in the order read; a
// file rules:exists only looks for is not one of them, and a pipeline
// compiled from bytes names its own path.
func TestPlanFiles(t *testing.T) {
	t.Parallel()
	src := fstestSource{
		".gitlab-ci.yml": `include:
  - local: ci/build.yml
  - local: ci/test.yml
  - local: ci/build.yml
lint:
  rules: [{exists: [go.mod]}]
  script: [make lint]
`,
		"ci/build.yml": "build:\n  script: [make]\n",
		"ci/test.yml":  "include: [{local: ci/build.yml}]\ntest:\n  script: [make test]\n",
		"go.mod":       "module example.com/m\n",
	}
	plan, diags, err := compiler.Compile(t.Context(), src, ".gitlab-ci.yml", compiler.Options{})
	require.NoError(t, err)
	require.False(t, compiler.HasErrors(diags), "%v", diags)
	require.Equal(t, []string{".gitlab-ci.yml", "ci/build.yml", "ci/test.yml"}, plan.Files)

	plan, diags, err = compiler.CompileBytes(".cikit.yml", []byte("jobs:\n  build:\n    steps: [make]\n"), compiler.Options{})
	require.NoError(t, err)
	require.Empty(t, diags)
	require.Equal(t, []string{".cikit.yml"}, plan.Files)
}
