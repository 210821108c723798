package main_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"go.uber.org/goleak"

	"github.com/cikit/cikit/internal/proctest"
)

// binary is the cikit binary built once for all tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cikit-bin-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "cikit")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		panic("building cikit: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			panic(err)
		}
	}
	os.Exit(code)
}

const repoRoot = "../../.."

type outcome struct {
	code           int
	stdout, stderr string
}

func cikit(t *testing.T, dir string, env []string, args ...string) outcome {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("running cikit: %v", err)
	}
	return outcome{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}

type report struct {
	State        string      `json:"state"`
	CriticalPath []string    `json:"critical_path"`
	CriticalNS   int64       `json:"critical_path_ns"`
	Jobs         []reportJob `json:"jobs"`
}

type reportJob struct {
	ID         string     `json:"id"`
	State      string     `json:"state"`
	ExitCode   int        `json:"exit_code"`
	Reason     string     `json:"reason"`
	StartedAt  *time.Time `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
}

func readReport(t *testing.T, path string) *report {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var r report
	require.NoError(t, json.Unmarshal(data, &r))
	return &r
}

func states(r *report) map[string]string {
	m := map[string]string{}
	for _, j := range r.Jobs {
		m[j.ID] = j.State
	}
	return m
}

// TestReadmeRunCommand runs examples/hello with the command the README
// gives, so the README cannot drift from what works.
func TestReadmeRunCommand(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	require.NoError(t, err)
	m := regexp.MustCompile("(?m)^go run ./reference/cmd/cikit (run .*)$").FindSubmatch(readme)
	require.NotNil(t, m, "README.md has no `go run ./reference/cmd/cikit run …` line")
	args := strings.Fields(string(m[1]))
	require.Equal(t, []string{"run", "--dir", "examples/hello"}, args)

	rep := filepath.Join(t.TempDir(), "report.json")
	out := cikit(t, repoRoot, nil, append(args, "--report", rep)...)
	require.Equal(t, 0, out.code, "stdout:\n%s\nstderr:\n%s", out.stdout, out.stderr)
	r := readReport(t, rep)
	require.Equal(t, "succeeded", r.State)
	require.Equal(t, map[string]string{
		"build": "succeeded", "unit": "succeeded", "lint": "succeeded",
		"coverage": "failed", "integration": "succeeded",
	}, states(r), "coverage is the job allowed to fail")
	require.Equal(t, "build", r.CriticalPath[0])
	require.Equal(t, "integration", r.CriticalPath[len(r.CriticalPath)-1])

	require.Contains(t, out.stdout, "[integration] Hello, cikit!\n")
	require.Regexp(t, `(?m)^coverage\s+FAILED\s+\S+\s+allowed to fail: step "coverage gate" exited with code 1$`, out.stdout)
	require.Regexp(t, `(?m)^critical path: build → \w+ → integration \(\S+\)$`, out.stdout)
	require.Contains(t, out.stdout, "run succeeded in ")
	require.NoDirExists(t, filepath.Join(repoRoot, "examples/hello/bin"), "jobs work in copies, not in the source")
}

func TestRunFailingPipeline(t *testing.T) {
	t.Parallel()
	rep := filepath.Join(t.TempDir(), "report.json")
	out := cikit(t, "testdata/failing", nil, "run", "--report", rep)
	require.Equal(t, 1, out.code, out.stdout)
	r := readReport(t, rep)
	require.Equal(t, "failed", r.State)
	require.Equal(t, map[string]string{"build": "failed", "test": "skipped", "docs": "succeeded", "publish": "skipped"}, states(r))
	require.Equal(t, 2, r.Jobs[0].ExitCode)
	require.Contains(t, out.stdout, "[build]   main.go:3: syntax error\n", "stderr of steps is streamed too")
	require.Regexp(t, `(?m)^\[build\] +✘ failed in \S+: step "compile" exited with code 2$`, out.stdout)
	require.Regexp(t, `(?m)^\[test\] +○ skipped: needs build, which failed$`, out.stdout)
	require.Regexp(t, `(?m)^publish\s+SKIPPED\s+-\s+needs test, which was skipped$`, out.stdout)
	require.NotContains(t, out.stdout, "never runs")
}

func TestRunInvalidPipeline(t *testing.T) {
	t.Parallel()
	out := cikit(t, "testdata/invalid", nil, "run")
	require.Equal(t, 2, out.code)
	require.Empty(t, out.stdout, "nothing runs")
	lines := strings.Split(strings.TrimSpace(out.stderr), "\n")
	require.Len(t, lines, 3, out.stderr)
	require.Regexp(t, `^\.cikit\.yml:5:5: unknown key "allowed_failure" .*did you mean "allow_failure"\? .*\[key\]$`, lines[0])
	require.Regexp(t, `^\.cikit\.yml:8:13: .*"biuld".*did you mean "build"\?.*\[needs\]$`, lines[1])
	require.Contains(t, lines[2], "is invalid (2 finding(s)); nothing ran")
}

func TestLint(t *testing.T) {
	t.Parallel()
	out := cikit(t, "testdata/invalid", nil, "lint")
	require.Equal(t, 1, out.code)
	require.Regexp(t, `^\.cikit\.yml:5:5: .* \[key\]\n\.cikit\.yml:8:13: .* \[needs\]\n$`, out.stdout)

	out = cikit(t, ".", nil, "lint", "-format", "json", "testdata/invalid/.cikit.yml", "testdata/failing/.cikit.yml")
	require.Equal(t, 1, out.code)
	var diags []struct {
		File      string
		Line, Col int
		Rule      string
		Message   string
	}
	require.NoError(t, json.Unmarshal([]byte(out.stdout), &diags))
	require.Len(t, diags, 2)
	require.Equal(t, "testdata/invalid/.cikit.yml", diags[0].File)
	require.Equal(t, []int{5, 5}, []int{diags[0].Line, diags[0].Col})

	out = cikit(t, repoRoot, nil, "lint", "examples/hello/.cikit.yml")
	require.Equal(t, 0, out.code, out.stdout)
	require.Empty(t, out.stdout)

	out = cikit(t, ".", nil, "lint", "testdata/no-such-file.yml")
	require.Equal(t, 2, out.code)
	require.Contains(t, out.stderr, "no-such-file.yml")
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	runner := []string{"runner", "-server", "http://127.0.0.1:1", "-registration-token", "t"}
	for _, args := range [][]string{{}, {"frobnicate"}, {"run", "--parallel", "0"}, {"run", "extra"}, {"run", "--dir", "testdata"}, {"lint", "-format", "xml"},
		append(runner, "-sandbox", "maybe"), append(runner, "-sandbox", "off", "-limit-processes", "64"), append(runner, "-limit-memory", "1.5G"),
		append(runner, "-limit-processes", "4"),
	} {
		out := cikit(t, ".", nil, args...)
		require.Equal(t, 2, out.code, "cikit %v: %s", args, out.stderr)
		require.NotEmpty(t, out.stderr)
	}
	out := cikit(t, ".", nil, append(runner, "-sandbox", "maybe")...)
	require.Contains(t, out.stderr, `-sandbox must be auto, require or off, not "maybe"`)
	out = cikit(t, ".", nil, append(runner, "-sandbox", "off", "-limit-processes", "64")...)
	require.Contains(t, out.stderr, "the -limit-* flags need the sandbox")
	out = cikit(t, ".", nil, append(runner, "-limit-processes", "4")...)
	require.Contains(t, out.stderr, "Limits.Processes must be at least 32")

	out = cikit(t, ".", nil, "help")
	require.Equal(t, 0, out.code)
	require.Contains(t, out.stderr, "run ")
	out = cikit(t, ".", nil, "runner", "-h")
	require.Equal(t, 0, out.code)
	for _, flag := range []string{"-sandbox string", "-network", "-limit-cpu", "-limit-memory", "-limit-processes", "-limit-file-size", "-limit-tmp", "docs/isolation.md"} {
		require.Contains(t, out.stderr, flag)
	}
}

// TestRunParallelism: build → [unit, lint] → integration sleeping 1 s,
// 2 s, 2 s and 1 s. unit and lint must overlap, judged from the start and
// end times the run recorded, not from how long it took.
func TestRunParallelism(t *testing.T) {
	t.Parallel()
	rep := filepath.Join(t.TempDir(), "report.json")
	out := cikit(t, "testdata/parallel", nil, "run", "--parallel", "4", "--report", rep)
	require.Equal(t, 0, out.code, out.stdout)
	r := readReport(t, rep)
	at := map[string][2]time.Time{}
	for _, j := range r.Jobs {
		require.NotNil(t, j.StartedAt, j.ID)
		require.NotNil(t, j.FinishedAt, j.ID)
		at[j.ID] = [2]time.Time{*j.StartedAt, *j.FinishedAt}
	}
	overlap := func(a, b string) bool { return at[a][0].Before(at[b][1]) && at[b][0].Before(at[a][1]) }
	require.True(t, overlap("unit", "lint"), "unit and lint ran one after the other: %v", at)
	for _, j := range []string{"unit", "lint"} {
		require.False(t, at[j][0].Before(at["build"][1]), "%s started before build finished", j)
		require.False(t, at["integration"][0].Before(at[j][1]), "integration started before %s finished", j)
	}
	require.Len(t, r.CriticalPath, 3)
	require.Equal(t, []string{"build", "integration"}, []string{r.CriticalPath[0], r.CriticalPath[2]})
}

// TestRunInterrupt sends SIGINT to a running cikit: the step and the
// background process it started are terminated, the job that had not
// started is cancelled, and cikit exits 130 leaving no process behind.
func TestRunInterrupt(t *testing.T) {
	t.Parallel()
	pids := t.TempDir()
	rep := filepath.Join(t.TempDir(), "report.json")
	// Jobs get only the variables of cikit's environment they are given.
	cmd := exec.Command(binary, "run", "--grace", "2s", "--report", rep, "--pass-env", "PIDS")
	cmd.Dir = "testdata/interrupt"
	cmd.Env = append(os.Environ(), "PIDS="+pids)
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stdout
	require.NoError(t, cmd.Start())
	// child.pid appears whole (renamed into place), after shell.pid.
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(pids, "child.pid"))
		return err == nil
	}, time.Minute, 20*time.Millisecond)
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	err := cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 130, ee.ExitCode(), stdout.String())
	require.Contains(t, stdout.String(), "interrupted; cancelling the run")
	r := readReport(t, rep)
	require.Equal(t, "cancelled", r.State)
	require.Equal(t, map[string]string{"long": "cancelled", "after": "cancelled"}, states(r))
	for _, name := range []string{"shell.pid", "child.pid"} {
		data, err := os.ReadFile(filepath.Join(pids, name))
		require.NoError(t, err)
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		require.NoError(t, err)
		require.False(t, proctest.Alive(pid), "%s %d outlived cikit", name, pid)
	}
}

func TestGraph(t *testing.T) {
	t.Parallel()
	out := cikit(t, repoRoot, nil, "graph", "examples/hello/.cikit.yml")
	require.Equal(t, 0, out.code, out.stderr)
	require.Equal(t, `%% 5 jobs, width 3, critical path 3 jobs
flowchart LR
  n0["build"]
  n1["unit"]
  n2["lint"]
  n3["coverage"]
  n4["integration"]
  n0 --> n1
  n0 --> n2
  n0 --> n3
  n1 --> n4
  n2 --> n4
  n3 --> n4
  classDef critical stroke:#d33,stroke-width:3px
  class n0,n1,n4 critical
  linkStyle 0,3 stroke:#d33,stroke-width:3px
`, out.stdout)

	// With the durations of a run, the path follows the slow jobs.
	report := filepath.Join(t.TempDir(), "report.json")
	require.NoError(t, os.WriteFile(report, []byte(`{"jobs": [
		{"id": "build", "duration_ns": 1000000000}, {"id": "unit", "duration_ns": 1000000000},
		{"id": "lint", "duration_ns": 3000000000}, {"id": "integration", "duration_ns": 1000000000}]}`), 0o644))
	out = cikit(t, ".", nil, "graph", "-format", "dot", "-durations", report, "testdata/parallel/.cikit.yml")
	require.Equal(t, 0, out.code, out.stderr)
	require.Contains(t, out.stdout, "// 4 jobs, width 2, critical path 3 jobs taking 5s\n")
	require.Contains(t, out.stdout, `  n2 [label="lint", color="#dd3333", penwidth=3];`)
	require.Contains(t, out.stdout, `  n1 [label="unit"];`)
	require.Contains(t, out.stdout, `  n2 -> n3 [color="#dd3333", penwidth=3];`)

	out = cikit(t, ".", nil, "graph", "testdata/invalid/.cikit.yml")
	require.Equal(t, 2, out.code)
	require.Contains(t, out.stderr, "testdata/invalid/.cikit.yml:8:13:")
}

// TestRunOtherFormats runs a GitHub workflow and a GitLab pipeline
// through the same local executor: actions are reported as not run,
// ${{ }} expressions and step conditions are evaluated, matrix variants
// and GitLab's after_script run.
func TestRunOtherFormats(t *testing.T) {
	t.Parallel()
	rep := filepath.Join(t.TempDir(), "report.json")
	out := cikit(t, "testdata/github", nil, "run", "--report", rep)
	require.Equal(t, 1, out.code, out.stdout+out.stderr)
	require.Equal(t, map[string]string{"build": "succeeded", "test (ubuntu-latest)": "succeeded", "test (macos-latest)": "failed"}, states(readReport(t, rep)))
	for _, want := range []string{
		"[build]                --- actions/checkout@v4\n[build]                --- the workspace is the runner's fixed directory ",
		"[build]                building for Linux\n",
		"[test (macos-latest)]  testing macos-latest-target\n",
		"[test (macos-latest)]  collecting logs of macos-latest\n",
		"[test (macos-latest)]  cleanup\n",
		"[test (ubuntu-latest)] not after a failure\n",
		"[test (ubuntu-latest)] cleanup\n",
	} {
		require.Contains(t, out.stdout, want)
	}
	require.NotContains(t, out.stdout, "[test (ubuntu-latest)] collecting logs")
	require.NotContains(t, out.stdout, "[test (macos-latest)]  not after a failure")

	out = cikit(t, "testdata/gitlab", nil, "run", "--report", rep)
	require.Equal(t, 0, out.code, out.stdout+out.stderr)
	require.Equal(t, map[string]string{"build": "succeeded", "test: [linux]": "succeeded", "test: [mac]": "succeeded"}, states(readReport(t, rep)))
	require.Contains(t, out.stdout, "[build]         hello from build\n")
	require.Contains(t, out.stdout, "[test: [mac]]   test on mac\n")
	require.Contains(t, out.stdout, "[test: [mac]]   cleanup on mac\n")
}

// TestRunWithWarnings: a warning does not stop a run; the job whose
// condition is always false is skipped and fails nothing.
func TestRunWithWarnings(t *testing.T) {
	t.Parallel()
	rep := filepath.Join(t.TempDir(), "report.json")
	out := cikit(t, "testdata/warning", nil, "run", "--report", rep)
	require.Equal(t, 0, out.code, out.stdout+out.stderr)
	require.Contains(t, out.stderr, `.github/workflows/ci.yml:9:9: warning: condition "false" is always false`)
	r := readReport(t, rep)
	require.Equal(t, map[string]string{"build": "succeeded", "e2e": "skipped"}, states(r))
	require.NotContains(t, out.stdout, "never")

	out = cikit(t, "testdata/warning", nil, "lint", ".github/workflows/ci.yml")
	require.Equal(t, 1, out.code, "lint reports warnings as findings")
	require.Contains(t, out.stdout, "warning: condition")
}
