package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet/process"
	"github.com/cikit/cikit/internal/testenv"
)

// pipelineDir writes files into a fresh directory, outside any git work
// tree, and returns it.
func pipelineDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	return dir
}

type cliResult struct {
	code           int
	stdout, stderr string
}

// runIn runs `cikit run -dir dir args…` in this process.
func runIn(t *testing.T, dir string, args ...string) cliResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := runCmd(t.Context(), append([]string{"-dir", dir}, args...), &stdout, &stderr)
	return cliResult{code, stdout.String(), stderr.String()}
}

// reportOf runs `cikit run` with -report and returns the job states.
func reportOf(t *testing.T, dir string, args ...string) (cliResult, *result) {
	t.Helper()
	rep := filepath.Join(t.TempDir(), "report.json")
	out := runIn(t, dir, append(args, "-report", rep)...)
	data, err := os.ReadFile(rep)
	require.NoError(t, err, "no report: %s\n%s", out.stdout, out.stderr)
	var r result
	require.NoError(t, json.Unmarshal(data, &r))
	return out, &r
}

func jobStates(r *result) map[string]cikit.JobState {
	m := map[string]cikit.JobState{}
	for _, j := range r.Jobs {
		m[j.ID] = j.State
	}
	return m
}

const chainPipeline = `stages: [build, test, deploy]
build:
  stage: build
  script: [echo built]
lint:
  stage: build
  script: [echo linted]
unit:
  stage: test
  needs: [build]
  script: [echo unit]
deploy:
  stage: deploy
  needs: [unit]
  when: manual
  script: [echo deployed]
docs:
  stage: deploy
  needs: []
  script: [echo docs]
`

const dispatchWorkflow = `on:
  push:
  workflow_dispatch:
    inputs:
      name:
        required: true
        type: string
      dry:
        type: boolean
        default: false
      level:
        type: choice
        options: [low, high]
        default: low
jobs:
  greet:
    runs-on: ubuntu-latest
    steps:
      - run: echo "hello ${{ inputs.name }} dry=${{ inputs.dry }} level=${{ inputs.level }} event=${{ github.event_name }} payload=${{ github.event.inputs.name }}"
`

// TestRunFlagErrors: every flag refuses bad input with an error that names
// the flag and what is wrong, exit code 2, and nothing runs.
func TestRunFlagErrors(t *testing.T) {
	t.Parallel()
	gitlab := pipelineDir(t, map[string]string{".gitlab-ci.yml": chainPipeline})
	github := pipelineDir(t, map[string]string{".github/workflows/ci.yml": dispatchWorkflow})
	prOnly := pipelineDir(t, map[string]string{".github/workflows/ci.yml": "on: pull_request\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps: [{run: echo a}]\n"})
	matrix := pipelineDir(t, map[string]string{".cikit.yml": "jobs:\n  test:\n    matrix:\n      os: [linux, mac]\n    steps: [echo $OS]\n"})
	files := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(files, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		return p
	}
	bigPayload := write("big.json", `{"x":"`+strings.Repeat("a", cikit.MaxPayloadBytes)+`"}`)
	nearlyFull := write("nearly.json", `{"x":"`+strings.Repeat("a", cikit.MaxPayloadBytes-20)+`"}`)
	arrayPayload := write("array.json", `[1, 2]`)
	twoPayloads := write("two.json", `{} {}`)
	badVars := write("bad.env", "# comment\nGOOD=1\nthis line has the-secret-value\n")
	bigVars := write("big.env", "A="+strings.Repeat("a", maxValuesFileBytes)+"\n")
	missing := filepath.Join(files, "missing.json")

	for _, tc := range []struct {
		name string
		dir  string
		args []string
		want string
		// hidden must not appear in the output: a secret's value.
		hidden string
	}{
		{"var without =", gitlab, []string{"-var", "FOO"}, `invalid value "FOO" for flag -var: want NAME=VALUE, got "FOO"`, ""},
		{"var bad name", gitlab, []string{"-var", "1X=2"}, `invalid name "1X"`, ""},
		{"var twice", gitlab, []string{"-var", "A=1", "-var", "A=2"}, "A is given twice", ""},
		{"var too long", gitlab, []string{"-var", "A=" + strings.Repeat("v", maxValueBytes+1)}, "more than the 65536 allowed", ""},
		{"var-file missing", gitlab, []string{"-var-file", missing}, "-var-file: open " + missing, ""},
		{"var-file bad line", gitlab, []string{"-var-file", badVars}, "-var-file: " + badVars + ":3: want NAME=VALUE", "the-secret-value"},
		{"var-file too large", gitlab, []string{"-var-file", bigVars}, "is larger than the 1048576 bytes allowed", ""},
		{"secret without =", gitlab, []string{"-secret", "hunter2"}, "cikit run: -secret: want NAME=VALUE (the value is not shown)", "hunter2"},
		{"secret bad name", gitlab, []string{"-secret", "1TOKEN=hunter2"}, "cikit run: -secret: invalid name: names start with a letter", "1TOKEN"},
		{"secret twice", gitlab, []string{"-secret", "T=hunter2", "-secret", "T=hunter3"}, "cikit run: -secret: T is given twice", "hunter"},
		{"secret-file bad line", gitlab, []string{"-secret-file", badVars}, ":3: want NAME=VALUE", "the-secret-value"},
		{"secret-file missing", gitlab, []string{"-secret-file", missing}, "-secret-file: open", ""},
		{"event-path missing", gitlab, []string{"-event-path", missing}, "-event-path: open " + missing, ""},
		{"event-path too large", gitlab, []string{"-event-path", bigPayload}, "is larger than the 1048576 bytes an event payload may have", ""},
		{"event-path not an object", gitlab, []string{"-event-path", arrayPayload}, "an event payload is a JSON object, got an array", ""},
		{"event-path two values", gitlab, []string{"-event-path", twoPayloads}, "more than one JSON value", ""},
		{"event name", gitlab, []string{"-event", "Push!"}, `-event "Push!": an event name is lowercase letters`, ""},
		{"format", gitlab, []string{"-format", "jenkins"}, `-format "jenkins": the formats are github, gitlab and native`, ""},
		{"only without job", gitlab, []string{"-only"}, "-only runs the jobs -job names without their needs, and no -job is given", ""},
		{"job unknown", gitlab, []string{"-job", "biuld"}, "-job biuld: the pipeline has no job biuld for this event (its jobs: build, lint, unit, deploy, docs)", ""},
		{"job empty", gitlab, []string{"-job", ""}, "a job name is required", ""},
		{"matrix syntax", matrix, []string{"-matrix", "os=linux"}, `want KEY:VALUE, got "os=linux"`, ""},
		{"matrix unknown key", matrix, []string{"-matrix", "arch:x64"}, "-matrix arch:x64: no job has a matrix key arch (matrix keys: os)", ""},
		{"matrix unknown value", matrix, []string{"-matrix", "os:windows"}, "-matrix os:windows: no variant has os windows (its values: linux, mac)", ""},
		{"input unknown", github, []string{"-input", "nmae=x"}, `-input nmae of .github/workflows/ci.yml: the pipeline declares no such input (its inputs: name, dry, level); did you mean "name"?`, ""},
		{"input required", github, []string{"-event", "workflow_dispatch"}, "-input name of .github/workflows/ci.yml: it is required and has no default", ""},
		{"input boolean", github, []string{"-input", "name=a", "-input", "dry=yes"}, `-input dry of .github/workflows/ci.yml: a boolean input is true or false, got "yes"`, ""},
		{"input choice", github, []string{"-input", "name=a", "-input", "level=mid"}, `-input level of .github/workflows/ci.yml: "mid" is not one of the choices low, high`, ""},
		{"payload full with inputs", github, []string{"-event-path", nearlyFull, "-input", "name=" + strings.Repeat("n", 100)}, "the event's payload with its inputs is 1048", ""},
		{"input on push", github, []string{"-event", "push", "-input", "name=a"}, "-input is for a manual run, and -event is push", ""},
		{"input to gitlab", gitlab, []string{"-input", "name=a"}, "-input name: .gitlab-ci.yml declares no inputs; GitLab pipelines take variables: use -var name=…", ""},
		{"not triggered", prOnly, nil, `does not run for this event: the pipeline is not triggered by "push" events (triggers: pull_request); choose the event with -event`, ""},
		{"matrix leaves no variant", matrix, []string{"-matrix", "os:linux", "-job", "test (mac)"}, "-job test (mac): -matrix leaves no variant of it", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := runIn(t, tc.dir, tc.args...)
			require.Equal(t, ExitInvalid, out.code, "stdout:\n%s\nstderr:\n%s", out.stdout, out.stderr)
			require.Contains(t, out.stderr, tc.want)
			require.NotContains(t, out.stdout, "started", "nothing runs")
			if tc.hidden != "" {
				require.NotContains(t, out.stdout+out.stderr, tc.hidden)
			}
		})
	}
}

// TestRunList: -list prints the jobs that would run, with stages, needs
// and how they start, and runs none; -job, -only and -matrix narrow it.
func TestRunList(t *testing.T) {
	t.Parallel()
	dir := pipelineDir(t, map[string]string{".gitlab-ci.yml": chainPipeline})
	out := runIn(t, dir, "-list")
	require.Equal(t, ExitOK, out.code, out.stderr)
	require.Equal(t, `JOB     STAGE   NEEDS  NOTE
build   build   -      
lint    build   -      
unit    test    build  
deploy  deploy  unit   manual; allowed to fail
docs    deploy  -      
`, out.stdout)

	out = runIn(t, dir, "-list", "-job", "deploy")
	require.Equal(t, ExitOK, out.code, out.stderr)
	require.Equal(t, `JOB     STAGE   NEEDS  NOTE
build   build   -      
unit    test    build  
deploy  deploy  unit   manual (started by -job); allowed to fail
`, out.stdout)

	out = runIn(t, dir, "-list", "-job", "deploy", "-only")
	require.Equal(t, ExitOK, out.code, out.stderr)
	require.Equal(t, "JOB     STAGE   NEEDS  NOTE\ndeploy  deploy  -      manual (started by -job); allowed to fail\n", out.stdout)
	require.Contains(t, out.stderr, "-only: deploy runs without the jobs it needs (unit): their results and outputs are empty")

	matrix := pipelineDir(t, map[string]string{".cikit.yml": `jobs:
  test:
    matrix:
      os: [linux, mac]
      go: ["1.25", "1.26"]
    steps: [echo $OS]
  report:
    needs: [test]
    steps: [echo report]
`})
	out = runIn(t, matrix, "-list", "-matrix", "os:mac", "-matrix", "go:1.26", "-matrix", "go:1.25")
	require.Equal(t, ExitOK, out.code, out.stderr)
	require.Equal(t, `JOB               STAGE  NEEDS                               NOTE
test (mac, 1.25)  -      -                                   
test (mac, 1.26)  -      -                                   
report            -      test (mac, 1.25), test (mac, 1.26)  
`, out.stdout)
}

// TestRunJobWithNeeds: -job runs the job and what it needs, directly or
// not, and nothing else; -only runs it alone; a manual job named with
// -job starts.
func TestRunJobWithNeeds(t *testing.T) {
	t.Parallel()
	dir := pipelineDir(t, map[string]string{".gitlab-ci.yml": chainPipeline})
	out, r := reportOf(t, dir, "-job", "deploy")
	require.Equal(t, ExitOK, out.code, out.stdout+out.stderr)
	require.Equal(t, map[string]cikit.JobState{"build": cikit.JobSucceeded, "unit": cikit.JobSucceeded, "deploy": cikit.JobSucceeded}, jobStates(r))
	require.Contains(t, out.stdout, "[deploy] deployed\n")
	require.NotContains(t, out.stdout, "linted")

	out, r = reportOf(t, dir, "-job", "unit", "-only")
	require.Equal(t, ExitOK, out.code, out.stdout+out.stderr)
	require.Equal(t, map[string]cikit.JobState{"unit": cikit.JobSucceeded}, jobStates(r))
	require.Equal(t, []string{"unit"}, r.CriticalPath)

	out, r = reportOf(t, dir, "-job", "docs", "-job", "lint")
	require.Equal(t, ExitOK, out.code, out.stdout+out.stderr)
	require.Equal(t, map[string]cikit.JobState{"lint": cikit.JobSucceeded, "docs": cikit.JobSucceeded}, jobStates(r))
}

// recorder is a jobRunner that records the context each job gets and
// ends it as its outputs say, so that what `cikit run` passes from job to
// job shows before any executor evaluates outputs.
type recorder struct {
	mu       sync.Mutex
	contexts map[string]*cikit.JobContext
	outputs  map[string]map[string]string
	fail     map[string]bool
}

func (rec *recorder) RunJob(_ context.Context, job process.Job) process.Result {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.contexts[job.Spec.ID] = job.Context
	if rec.fail[job.Spec.ID] {
		return process.Result{State: cikit.JobFailed, ExitCode: 1, Reason: "failed on purpose", FailureClass: cikit.FailureScript}
	}
	return process.Result{State: cikit.JobSucceeded, Outputs: rec.outputs[job.Spec.ID]}
}

// TestRunJobContext: each job gets the run's context (event, payload,
// inputs, the work tree's commit, ref and repository), the run's ID and
// its attempt, and the results and outputs of the jobs it needs that ran
// before it in the same run.
func TestRunJobContext(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		testenv.ToolUnavailable(t, "git", err)
	}
	dir := pipelineDir(t, map[string]string{".github/workflows/ci.yml": `on:
  workflow_dispatch:
    inputs:
      target: {type: string, default: staging}
      dry: {type: boolean, default: true}
jobs:
  a:
    runs-on: ubuntu-latest
    outputs:
      x: ${{ steps.s.outputs.x }}
    steps: [{id: s, run: echo x=1 >> "$GITHUB_OUTPUT"}]
  broken:
    runs-on: ubuntu-latest
    continue-on-error: true
    steps: [{run: exit 1}]
  b:
    needs: [a, broken]
    if: always()
    runs-on: ubuntu-latest
    steps: [{run: echo b}]
`})
	gitIn(t, dir, "init", "-q", "-b", "feature/x")
	gitIn(t, dir, "remote", "add", "origin", "https://token:secret@github.com/acme/api.git")
	gitIn(t, dir, "add", "-A")
	gitIn(t, dir, "commit", "-q", "-m", "one")
	sha := strings.TrimSpace(gitIn(t, dir, "rev-parse", "HEAD"))
	payload := filepath.Join(t.TempDir(), "event.json")
	require.NoError(t, os.WriteFile(payload, []byte(`{"sender": {"login": "octocat"}, "inputs": {"target": "prod"}}`), 0o644))

	rec := &recorder{contexts: map[string]*cikit.JobContext{}, outputs: map[string]map[string]string{"a": {"x": "1"}}, fail: map[string]bool{"broken": true}}
	var stdout, stderr bytes.Buffer
	rep := filepath.Join(t.TempDir(), "report.json")
	code := runWith(t.Context(), []string{"-dir", dir, "-event-path", payload, "-input", "dry=false", "-report", rep}, &stdout, &stderr,
		func(process.Config) (jobRunner, error) { return rec, nil })
	require.Equal(t, ExitOK, code, stdout.String()+stderr.String())

	a, b := rec.contexts["a"], rec.contexts["b"]
	require.NotNil(t, a)
	require.NotNil(t, b)
	require.Equal(t, "local", a.Provider)
	require.Equal(t, "workflow_dispatch", a.Event)
	require.Equal(t, "acme/api", a.Repository, "the name, never the credential of the remote")
	require.Equal(t, sha, a.SHA)
	require.Equal(t, "refs/heads/feature/x", a.Ref)
	require.Equal(t, "feature/x", a.RefName)
	require.Equal(t, "branch", a.RefType)
	require.Equal(t, "octocat", a.Actor)
	require.Equal(t, map[string]string{"target": "prod", "dry": "false"}, a.Inputs, "-input over the payload's inputs over the defaults")
	require.JSONEq(t, `{"sender": {"login": "octocat"}, "inputs": {"target": "prod", "dry": "false"}}`, string(a.Payload))
	require.NotEmpty(t, a.RunID)
	require.Equal(t, a.RunID, b.RunID)
	require.Equal(t, 1, a.Attempt)
	require.Nil(t, a.Source, "a local run's workspace is a copy of the directory")
	require.Empty(t, a.Needs)
	require.Equal(t, map[string]cikit.NeedResult{
		"a":      {Result: cikit.JobSucceeded, Outputs: map[string]string{"x": "1"}},
		"broken": {Result: cikit.JobFailed},
	}, b.Needs)

	data, err := os.ReadFile(rep)
	require.NoError(t, err)
	var r result
	require.NoError(t, json.Unmarshal(data, &r))
	require.Equal(t, map[string]string{"x": "1"}, r.Jobs[0].Outputs, "the report has the jobs' outputs")
}

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return string(out)
}

// TestReadGit: a work tree's commit, branch, repository and default
// branch; a tag at a detached HEAD; nothing outside a work tree.
func TestReadGit(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		testenv.ToolUnavailable(t, "git", err)
	}
	require.Equal(t, gitInfo{}, readGit(t.Context(), t.TempDir()))

	origin := t.TempDir()
	gitIn(t, origin, "init", "-q", "-b", "trunk")
	require.NoError(t, os.WriteFile(filepath.Join(origin, "f"), []byte("f"), 0o644))
	gitIn(t, origin, "add", "-A")
	gitIn(t, origin, "commit", "-q", "-m", "one")
	gitIn(t, origin, "tag", "v1.2.0")
	clone := filepath.Join(t.TempDir(), "widget")
	gitIn(t, t.TempDir(), "clone", "-q", origin, clone)
	sha := strings.TrimSpace(gitIn(t, clone, "rev-parse", "HEAD"))
	require.Equal(t, gitInfo{SHA: sha, Ref: "refs/heads/trunk", Repository: filepath.Base(origin), DefaultBranch: "trunk"}, readGit(t.Context(), clone))

	gitIn(t, clone, "checkout", "-q", "--detach", "v1.2.0")
	require.Equal(t, "refs/tags/v1.2.0", readGit(t.Context(), clone).Ref)

	bare := t.TempDir()
	gitIn(t, bare, "init", "-q")
	require.Equal(t, gitInfo{}, readGit(t.Context(), bare), "a repository without a commit has no context")
}

func TestRepositoryName(t *testing.T) {
	t.Parallel()
	for remote, want := range map[string]string{
		"https://github.com/acme/api.git":                         "acme/api",
		"https://x-access-token:tok@github.com/acme/api":          "acme/api",
		"git@github.com:acme/api.git":                             "acme/api",
		"ssh://git@gitlab.example.com:2222/acme/platform/api.git": "acme/platform/api",
		"/srv/git/widget.git":                                     "widget",
		"file:///srv/git/widget.git":                              "widget",
		"../widget":                                               "widget",
		"":                                                        "",
	} {
		require.Equal(t, want, repositoryName(remote), remote)
	}
}

// TestLocalEventRunContext: what the payload tells of the ref and of a
// pull request reaches the run's context.
func TestLocalEventRunContext(t *testing.T) {
	t.Parallel()
	payload, err := parsePayload([]byte(`{"ref": "refs/tags/v2", "pull_request": {"number": 7, "base": {"ref": "main"}, "head": {"ref": "fix"}}}`))
	require.NoError(t, err)
	ev := &localEvent{name: "pull_request", payload: payload, git: gitInfo{SHA: "abc", Ref: "refs/heads/fix", Repository: "acme/api"}}
	rc := ev.runContext()
	require.Equal(t, "refs/tags/v2", rc.Ref)
	require.Equal(t, "v2", rc.RefName)
	require.Equal(t, "tag", rc.RefType)
	require.Equal(t, 7, rc.PRNumber)
	require.Equal(t, "main", rc.BaseRef)
	require.Equal(t, "fix", rc.HeadRef)
	cev := ev.compilerEvent("github")
	require.Equal(t, "v2", cev.Tag)
	require.Equal(t, "main", cev.BaseBranch)
}

// TestRunGitHubInputs: a workflow_dispatch run sees its inputs (defaults
// included) and its payload's inputs.
func TestRunGitHubInputs(t *testing.T) {
	t.Parallel()
	dir := pipelineDir(t, map[string]string{".github/workflows/ci.yml": dispatchWorkflow})
	out := runIn(t, dir, "-input", "name=ann", "-input", "dry=true")
	require.Equal(t, ExitOK, out.code, out.stdout+out.stderr)
	require.Contains(t, out.stdout, "hello ann dry=true level=low event=workflow_dispatch payload=ann\n")
}

const varsWorkflow = `on: push
jobs:
  deploy:
    if: vars.DEPLOY == 'yes'
    runs-on: ubuntu-latest
    steps:
      - run: echo "region ${{ vars.REGION }}"
      - run: test "${{ secrets.TOKEN }}" = "$(printf hunter2; printf %s -value)" && echo secret-ok
  always:
    runs-on: ubuntu-latest
    steps: [{run: echo always}]
`

// valuesFiles writes a -var-file and a -secret-file.
func valuesFiles(t *testing.T) (vars, secrets string) {
	t.Helper()
	vars = filepath.Join(t.TempDir(), "vars.env")
	require.NoError(t, os.WriteFile(vars, []byte("# the region\nREGION=eu-west\nDEPLOY='no'\n"), 0o644))
	secrets = filepath.Join(t.TempDir(), "secrets.env")
	require.NoError(t, os.WriteFile(secrets, []byte("export TOKEN=\"hunter2-value\"\n"), 0o644))
	return vars, secrets
}

// TestRunGitHubVarsDecideJobs: -var and -var-file (the flag over the
// file) reach the vars context the compiler decides a job's if with.
func TestRunGitHubVarsDecideJobs(t *testing.T) {
	t.Parallel()
	dir := pipelineDir(t, map[string]string{".github/workflows/ci.yml": varsWorkflow})
	vars, _ := valuesFiles(t)
	out := runIn(t, dir, "-var-file", vars, "-list")
	require.Equal(t, ExitOK, out.code, out.stdout+out.stderr)
	require.Contains(t, out.stdout, "deploy  -      -      never: its condition is false for this event\n", "vars.DEPLOY is 'no' from the file")
	out = runIn(t, dir, "-var-file", vars, "-var", "DEPLOY=yes", "-list")
	require.Equal(t, ExitOK, out.code, out.stdout+out.stderr)
	require.Regexp(t, `(?m)^deploy +- +- +$`, out.stdout)
}

// TestRunGitHubVarsAndSecretsInSteps: -var reaches the vars context and
// -secret the secrets context of the steps, and cikit prints the secret
// nowhere.
func TestRunGitHubVarsAndSecretsInSteps(t *testing.T) {
	t.Parallel()
	dir := pipelineDir(t, map[string]string{".github/workflows/ci.yml": varsWorkflow})
	vars, secrets := valuesFiles(t)
	out, r := reportOf(t, dir, "-var-file", vars, "-var", "DEPLOY=yes", "-secret-file", secrets)
	require.Equal(t, ExitOK, out.code, out.stdout+out.stderr)
	require.Equal(t, map[string]cikit.JobState{"deploy": cikit.JobSucceeded, "always": cikit.JobSucceeded}, jobStates(r))
	require.Contains(t, out.stdout, "[deploy] region eu-west\n")
	require.Contains(t, out.stdout, "[deploy] secret-ok\n")
	require.NotContains(t, out.stdout+out.stderr, "hunter2-value")
}

// TestRunGitHubEvent: -event and -event-path decide the on: filters and
// reach the github context.
func TestRunGitHubEvent(t *testing.T) {
	t.Parallel()
	dir := pipelineDir(t, map[string]string{".github/workflows/ci.yml": `on:
  pull_request:
    branches: [main]
jobs:
  check:
    runs-on: ubuntu-latest
    steps:
      - run: echo "pr ${{ github.event.pull_request.number }} into ${{ github.base_ref }} from ${{ github.head_ref }} by ${{ github.actor }} (${{ github.event_name }})"
`})
	payload := func(base string) string {
		p := filepath.Join(t.TempDir(), "event.json")
		require.NoError(t, os.WriteFile(p, []byte(`{"action": "opened", "sender": {"login": "octocat"},
			"pull_request": {"number": 7, "base": {"ref": "`+base+`"}, "head": {"ref": "fix"}}}`), 0o644))
		return p
	}
	out := runIn(t, dir, "-event", "pull_request", "-event-path", payload("main"))
	require.Equal(t, ExitOK, out.code, out.stdout+out.stderr)
	require.Contains(t, out.stdout, "[check] pr 7 into main from fix by octocat (pull_request)\n")

	out = runIn(t, dir, "-event", "pull_request", "-event-path", payload("release"))
	require.Equal(t, ExitInvalid, out.code, out.stdout)
	require.Contains(t, out.stderr, "does not run for this event")
	require.Contains(t, out.stderr, `"release"`)
}

// TestRunGitLabValues: -var and -secret are variables of every job, over
// the file's; rules see them and the event's pipeline source.
func TestRunGitLabValues(t *testing.T) {
	t.Parallel()
	dir := pipelineDir(t, map[string]string{".gitlab-ci.yml": `variables:
  GREETING: hello
build:
  script:
    - echo "$GREETING from build"
    - test "$TOKEN" = "$(printf hunter2; printf %s -value)" && echo secret-ok
deploy:
  rules:
    - if: $DEPLOY == "yes"
  script: [echo deploying]
review:
  rules:
    - if: $CI_PIPELINE_SOURCE == "merge_request_event"
  script: [echo reviewing]
`})
	out, r := reportOf(t, dir, "-var", "GREETING=hi", "-var", "DEPLOY=yes", "-secret", "TOKEN=hunter2-value")
	require.Equal(t, ExitOK, out.code, out.stdout+out.stderr)
	require.Equal(t, map[string]cikit.JobState{"build": cikit.JobSucceeded, "deploy": cikit.JobSucceeded}, jobStates(r))
	require.Contains(t, out.stdout, "[build]  hi from build\n")
	require.Contains(t, out.stdout, "[build]  secret-ok\n")
	require.NotContains(t, out.stdout+out.stderr, "hunter2-value")

	out, r = reportOf(t, dir, "-event", "merge_request_event")
	require.Equal(t, ExitOK, out.code, out.stdout+out.stderr)
	require.Equal(t, map[string]cikit.JobState{"review": cikit.JobSucceeded}, jobStates(r))
}

// TestRunNativeValues: in a native pipeline -var and the inputs of a
// manual run are in every job's environment, a secret only in the jobs
// that name it; a secret no job names is a warning, and a named secret not
// given fails its job before its first step.
func TestRunNativeValues(t *testing.T) {
	t.Parallel()
	dir := pipelineDir(t, map[string]string{".cikit.yml": `on:
  push:
  manual:
    inputs:
      TARGET: {type: string, default: staging}
jobs:
  migrate:
    secrets: [DB_PASSWORD]
    steps:
      - echo "region $REGION target ${TARGET:-none}"
      - test "$DB_PASSWORD" = "$(printf hunter2; printf %s -value)" && echo secret-ok
  build:
    secrets: [SIGNING_KEY]
    steps:
      - echo "build sees ${DB_PASSWORD:-no password}"
  show:
    steps:
      - echo "target ${TARGET:-none}"
`})
	out := runIn(t, dir, "-var", "REGION=eu", "-secret", "DB_PASSWORD=hunter2-value", "-secret", "UNUSED=xxxxxxxx")
	require.Equal(t, ExitFailed, out.code, out.stdout+out.stderr)
	require.Contains(t, out.stdout, "[migrate] region eu target none\n")
	require.Contains(t, out.stdout, "[migrate] secret-ok\n")
	require.NotContains(t, out.stdout, "build sees", "a job whose secret is missing runs no step")
	require.Contains(t, out.stdout, "secrets: SIGNING_KEY not given to the job")
	require.Contains(t, out.stderr, "warning: job build reads the secret SIGNING_KEY, which is not given")
	require.Contains(t, out.stderr, "warning: -secret UNUSED: no job of this run names it in secrets, so none gets it")
	require.NotContains(t, out.stdout+out.stderr, "hunter2-value")

	require.Contains(t, out.stdout, "[show]    target none\n")

	out = runIn(t, dir, "-event", "manual", "-job", "show")
	require.Equal(t, ExitOK, out.code, out.stdout+out.stderr)
	require.Contains(t, out.stdout, "[show] target staging\n", "a manual run's input defaults")
	out = runIn(t, dir, "-input", "TARGET=prod", "-job", "show")
	require.Equal(t, ExitOK, out.code, out.stdout+out.stderr)
	require.Contains(t, out.stdout, "[show] target prod\n")
}

// TestRunFormat: -format runs a pipeline file whose name tells no format;
// without it the file is refused.
func TestRunFormat(t *testing.T) {
	t.Parallel()
	dir := pipelineDir(t, map[string]string{"ci/pipeline.yml": "build:\n  script: [echo built by gitlab]\n"})
	out := runIn(t, dir, "-file", "ci/pipeline.yml", "-format", "gitlab")
	require.Equal(t, ExitOK, out.code, out.stdout+out.stderr)
	require.Contains(t, out.stdout, "[build] built by gitlab\n")

	out = runIn(t, dir, "-file", "ci/pipeline.yml")
	require.Equal(t, ExitInvalid, out.code)
	require.Contains(t, out.stderr, "unknown pipeline format")
}

// TestRunListFormats: -list and -matrix on GitLab's parallel:matrix, and
// a GitHub condition left for run time shown as such.
func TestRunListFormats(t *testing.T) {
	t.Parallel()
	gitlab := pipelineDir(t, map[string]string{".gitlab-ci.yml": `stages: [build, test]
build:
  stage: build
  script: [echo built]
test:
  stage: test
  parallel:
    matrix:
      - OS: [linux, mac]
  script: [echo "test on $OS"]
`})
	out := runIn(t, gitlab, "-list", "-matrix", "OS:mac")
	require.Equal(t, ExitOK, out.code, out.stderr)
	require.Equal(t, "JOB          STAGE  NEEDS  NOTE\nbuild        build  -      \ntest: [mac]  test   build  \n", out.stdout)
	out = runIn(t, gitlab, "-matrix", "OS:mac")
	require.Equal(t, ExitOK, out.code, out.stderr)
	require.Contains(t, out.stdout, "[test: [mac]] test on mac\n")
	require.NotContains(t, out.stdout, "test on linux")

	github := pipelineDir(t, map[string]string{".github/workflows/ci.yml": `on: push
jobs:
  a:
    runs-on: ubuntu-latest
    steps: [{run: echo a}]
  report:
    needs: a
    if: needs.a.result == 'failure'
    runs-on: ubuntu-latest
    steps: [{run: echo report}]
`})
	out = runIn(t, github, "-list")
	require.Equal(t, ExitOK, out.code, out.stderr)
	require.Regexp(t, `(?m)^report +- +a +.*if: .*needs\.a\.result == 'failure'`, out.stdout)
}
