package compiler_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/compiler"
)

// onlyDiag asserts that diags is one limit finding at line and returns
// its message.
func onlyDiag(t *testing.T, diags []compiler.Diagnostic, file string, line int) string {
	t.Helper()
	require.Len(t, diags, 1, "%v", diags)
	d := diags[0]
	require.Equal(t, compiler.RuleLimit, d.Rule, d.String())
	require.Equal(t, compiler.SeverityError, d.Severity)
	require.Equal(t, file, d.File, d.String())
	require.Equal(t, line, d.Line, d.String())
	return d.Message
}

func TestMaxFileBytes(t *testing.T) {
	t.Parallel()
	src := "jobs:\n  build: {steps: [make]}\n# " + strings.Repeat("x", compiler.DefaultMaxFileBytes) + "\n"
	plan, diags, err := compiler.CompileBytes(".cikit.yml", []byte(src), compiler.Options{})
	require.NoError(t, err)
	require.Nil(t, plan)
	msg := onlyDiag(t, diags, ".cikit.yml", 1)
	require.Contains(t, msg, fmt.Sprintf("the pipeline file is %d bytes, more than the limit of 1 MiB", len(src)))

	plan, diags, err = compiler.CompileBytes(".cikit.yml", []byte(src), compiler.Options{MaxFileBytes: 2 << 20})
	require.NoError(t, err)
	require.Empty(t, diags)
	require.Len(t, plan.Jobs, 1)
}

// TestMaxFileBytesInclude: an included file is bounded like the file
// that includes it, and the finding is where it is included.
func TestMaxFileBytesInclude(t *testing.T) {
	t.Parallel()
	src := fstestSource{
		".gitlab-ci.yml": "include:\n  - local: big.yml\nbuild:\n  script: make\n",
		"big.yml":        "test:\n  script: make test\n# " + strings.Repeat("x", 200) + "\n",
	}
	plan, diags, err := compiler.Compile(context.Background(), src, ".gitlab-ci.yml", compiler.Options{MaxFileBytes: 100})
	require.NoError(t, err)
	require.Nil(t, plan)
	msg := onlyDiag(t, diags, ".gitlab-ci.yml", 2)
	require.Contains(t, msg, fmt.Sprintf(`included file "big.yml" is %d bytes, more than the limit of 100 B`, len(src["big.yml"])))
}

func TestMaxJobsNative(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("jobs:\n")
	for i := range 10_000 {
		fmt.Fprintf(&b, "  j%d: {steps: [x]}\n", i)
	}
	plan, diags, err := compiler.CompileBytes(".cikit.yml", []byte(b.String()), compiler.Options{})
	require.NoError(t, err)
	require.Nil(t, plan)
	// j1000 is the 1,001st job, on line 1002.
	msg := onlyDiag(t, diags, ".cikit.yml", 1002)
	require.Equal(t, `job "j1000" takes the run to 1001 jobs, more than the limit of 1000 jobs per run (Options.MaxJobs)`, msg)

	plan, diags, err = compiler.CompileBytes(".cikit.yml", []byte(b.String()), compiler.Options{MaxJobs: 10_000})
	require.NoError(t, err)
	require.Empty(t, diags)
	require.Len(t, plan.Jobs, 10_000)
}

// TestMaxJobsGitHubMatrices: 40 jobs of a 256-variant matrix each; the
// fourth takes the run past 1,000.
func TestMaxJobsGitHubMatrices(t *testing.T) {
	t.Parallel()
	values := make([]string, 256)
	for i := range values {
		values[i] = fmt.Sprint(i)
	}
	var b strings.Builder
	b.WriteString("on: push\njobs:\n")
	for i := range 40 {
		fmt.Fprintf(&b, "  j%d:\n    runs-on: x\n    strategy: {matrix: {n: [%s]}}\n    steps: [{run: make}]\n", i, strings.Join(values, ", "))
	}
	path := ".github/workflows/ci.yml"
	plan, diags, err := compiler.CompileBytes(path, []byte(b.String()), compiler.Options{})
	require.NoError(t, err)
	require.Nil(t, plan)
	msg := onlyDiag(t, diags, path, 3+3*4)
	require.Equal(t, `job "j3" expands to 256 jobs, which take the run to 1024 jobs, more than the limit of 1000 jobs per run (Options.MaxJobs)`, msg)

	plan, diags, err = compiler.CompileBytes(path, []byte(b.String()), compiler.Options{MaxJobs: 40 * 256})
	require.NoError(t, err)
	require.Empty(t, diags)
	require.Len(t, plan.Jobs, 40*256)
}

func TestMaxJobsGitLabParallel(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := range 6 {
		fmt.Fprintf(&b, "j%d:\n  parallel: 200\n  script: make\n", i)
	}
	for i := range 2 {
		fmt.Fprintf(&b, "m%d:\n  parallel:\n    matrix:\n      - {A: [a, b, c, d, e, f, g, h, i, j], B: [a, b, c, d, e, f, g, h, i, j]}\n  script: make\n", i)
	}
	plan, diags, err := compiler.CompileBytes(".gitlab-ci.yml", []byte(b.String()), compiler.Options{MaxJobs: 1300})
	require.NoError(t, err)
	require.Nil(t, plan)
	msg := onlyDiag(t, diags, ".gitlab-ci.yml", 1+6*3+5)
	require.Equal(t, `job "m1" expands to 100 jobs, which take the run to 1400 jobs, more than the limit of 1300 jobs per run (Options.MaxJobs)`, msg)

	plan, diags, err = compiler.CompileBytes(".gitlab-ci.yml", []byte(b.String()), compiler.Options{})
	require.NoError(t, err)
	require.Nil(t, plan)
	msg = onlyDiag(t, diags, ".gitlab-ci.yml", 1+5*3)
	require.Equal(t, `job "j5" expands to 200 jobs, which take the run to 1200 jobs, more than the limit of 1000 jobs per run (Options.MaxJobs)`, msg)
}

// TestMaxJobSpecBytes: a job whose spec a runner could not decode is a
// diagnostic at the job, not a run whose attempts all fail.
func TestMaxJobSpecBytes(t *testing.T) {
	t.Parallel()
	script := strings.Repeat("echo hello world\n", cikit.MaxJobSpecBytes/16)
	src := fmt.Sprintf("jobs:\n  small: {steps: [make]}\n  huge:\n    steps:\n      - run: %q\n", script)
	plan, diags, err := compiler.CompileBytes(".cikit.yml", []byte(src), compiler.Options{MaxFileBytes: 16 << 20})
	require.NoError(t, err)
	require.Nil(t, plan)
	msg := onlyDiag(t, diags, ".cikit.yml", 3)
	require.Contains(t, msg, `job "huge" compiles to a spec of `)
	require.Contains(t, msg, "more than the 4 MiB a runner takes (cikit.MaxJobSpecBytes)")
}

func TestOutputsLimits(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", cikit.MaxOutputValueBytes)
	var b strings.Builder
	b.WriteString("on: push\njobs:\n  one:\n    runs-on: x\n    outputs:\n      big: " + big + "\n    steps: [{run: make}]\n")
	b.WriteString("  many:\n    runs-on: x\n    outputs:\n")
	for i := range 9 {
		fmt.Fprintf(&b, "      o%d: %s\n", i, big[:120<<10])
	}
	b.WriteString("    steps: [{run: make}]\n")
	path := ".github/workflows/ci.yml"
	plan, diags, err := compiler.CompileBytes(path, []byte(b.String()), compiler.Options{MaxFileBytes: 4 << 20})
	require.NoError(t, err)
	require.Nil(t, plan)
	require.Len(t, diags, 2, "%v", diags)
	require.Equal(t, 3, diags[0].Line)
	require.Contains(t, diags[0].Message, `output "big" of job "one" is declared with 131075 bytes, more than the 128 KiB an output may hold`)
	require.Equal(t, 8, diags[1].Line)
	require.Contains(t, diags[1].Message, `the outputs of job "many" are declared with 1105938 bytes, more than the 1 MiB the outputs of a job may hold`)
}

// sizedSource is a compiler.MaxFileSource over files in memory that
// records the reads made without a bound.
type sizedSource struct {
	files     fstestSource
	unbounded []string
}

func (s *sizedSource) ReadFile(ctx context.Context, p string) ([]byte, error) {
	s.unbounded = append(s.unbounded, p)
	return s.files.ReadFile(ctx, p)
}

func (s *sizedSource) ReadFileMax(ctx context.Context, p string, max int) ([]byte, error) {
	data, err := s.files.ReadFile(ctx, p)
	if err == nil && len(data) > max {
		return nil, &compiler.FileTooLargeError{Path: p, Size: int64(len(data))}
	}
	return data, err
}

// TestMaxFileSource: through a source that knows sizes, the files of a
// pipeline are read with the bound, and one over it is the same
// diagnostic, unread.
func TestMaxFileSource(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := &sizedSource{files: fstestSource{
		".gitlab-ci.yml": "include:\n  - local: big.yml\nbuild:\n  script: make\n  rules:\n    - exists: [big.yml]\n",
		"big.yml":        "test:\n  script: make test\n# " + strings.Repeat("x", 200) + "\n",
	}}
	plan, diags, err := compiler.Compile(ctx, src, ".gitlab-ci.yml", compiler.Options{MaxFileBytes: 100})
	require.NoError(t, err)
	require.Nil(t, plan)
	msg := onlyDiag(t, diags, ".gitlab-ci.yml", 2)
	require.Contains(t, msg, fmt.Sprintf(`included file "big.yml" is %d bytes, more than the limit of 100 B`, len(src.files["big.yml"])))

	plan, diags, err = compiler.Compile(ctx, src, ".gitlab-ci.yml", compiler.Options{MaxFileBytes: 10})
	require.NoError(t, err)
	require.Nil(t, plan)
	msg = onlyDiag(t, diags, ".gitlab-ci.yml", 1)
	require.Contains(t, msg, fmt.Sprintf("the pipeline file is %d bytes, more than the limit of 10 B", len(src.files[".gitlab-ci.yml"])))

	plan, diags, err = compiler.Compile(ctx, src, ".gitlab-ci.yml", compiler.Options{})
	require.NoError(t, err)
	require.Empty(t, diags)
	require.Len(t, plan.Jobs, 2)
	require.Empty(t, src.unbounded, "every read is bounded, rules:exists too")
}
