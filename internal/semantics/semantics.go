// Package semantics holds small real-world-style GitHub workflows and
// GitLab files, one for each run-time semantic of a format that real
// files depend on (the default shell, working directories, the matrix
// and env contexts, a matrix computed by the run, a job's condition
// decided by the run, the run number, GitLab's shell session, after_script,
// allow_failure:exit_codes, variables, rules:exists, trigger: and the
// warnings of keys not honoured yet), with
// what each job must print; and WorldFiles, a repository whose GitHub
// workflow and GitLab file use the job's world together (checkout of the
// full history, a composite action, environment and output files, an
// annotation, parallel variants). The tests of `cikit run` and of the
// embedded platform run the same files, so both executors keep the same
// semantics.
package semantics

// SHA stands, in a case's wanted lines, for the commit the run is for.
const SHA = "{sha}"

// Case is one pipeline file and what running it must give.
type Case struct {
	// Name is the case's name: short, unique, usable as a git branch
	// name.
	Name string
	// Path is where the pipeline file is in the repository
	// (".github/workflows/ci.yml" or ".gitlab-ci.yml"), and File its
	// content.
	Path, File string
	// Files are more files of the repository, by path.
	Files map[string]string
	// Jobs are, by job id, what each job that runs must give; no other
	// job runs.
	Jobs map[string]Job
	// Skipped are the jobs of the run that do not run because a job they
	// need failed, or because their condition is false.
	Skipped []string
	// Error, when set, says that the pipeline does not run at all, and
	// is a part of the message that says why; Jobs is empty then.
	Error string
	// Inputs, when set, make the case a manual run (workflow_dispatch,
	// the platform's manual trigger) with these inputs instead of a push.
	Inputs map[string]string
}

// Job is what one job of a case must give.
type Job struct {
	// Failed says that the job fails; otherwise it succeeds.
	Failed bool
	// Allowed says that the job's failure is allowed: the jobs that need
	// it run, and it does not fail the run.
	Allowed bool
	// Lines are lines its output holds, whole, in any order; SHA in one
	// stands for the run's commit.
	Lines []string
	// Never are texts its output never holds.
	Never []string
}

// RunFailed reports whether the run of c fails: a job of it fails
// without its failure being allowed.
func (c *Case) RunFailed() bool {
	for _, j := range c.Jobs {
		if j.Failed && !j.Allowed {
			return true
		}
	}
	return false
}

// exitCodesFile is a GitLab file whose lint job exits with code and may
// fail only with exit code 1; deploy, of the next stage, needs it.
func exitCodesFile(code string) string {
	return `stages: [test, deploy]
lint:
  stage: test
  script:
    - echo "lint exits ` + code + `"
    - exit ` + code + `
  allow_failure:
    exit_codes: [1]
deploy:
  stage: deploy
  script:
    - echo deployed
`
}

// Cases are the cases, one per semantic.
var Cases = []Case{
	{
		Name: "github-default-shell",
		Path: ".github/workflows/ci.yml",
		File: `on: push
jobs:
  shell:
    runs-on: ubuntu-latest
    steps:
      - run: |
          [[ $- == *e* ]] && echo "bash $BASH_VERSION with errexit" | cut -d' ' -f1,3-
          false
          echo "after false"
`,
		Jobs: map[string]Job{"shell": {Failed: true, Lines: []string{"bash with errexit"}, Never: []string{"after false"}}},
	},
	{
		Name: "github-expression-shell-and-directory",
		Path: ".github/workflows/ci.yml",
		File: `on: push
env:
  SHELL_NAME: sh
  DIR: sub
jobs:
  expr:
    runs-on: ubuntu-latest
    defaults:
      run:
        shell: ${{ 'bash' }}
    steps:
      - run: mkdir -p sub
      - run: echo "default shell ${BASH_VERSION:+bash} in ${PWD##*/}"
        working-directory: ${{ env.DIR }}
      - run: echo "step shell ${BASH_VERSION:-sh}"
        shell: ${{ env.SHELL_NAME }}
`,
		Jobs: map[string]Job{"expr": {Lines: []string{"default shell bash in sub", "step shell sh"}}},
	},
	{
		Name: "github-absolute-working-directory",
		Path: ".github/workflows/ci.yml",
		File: `on: push
jobs:
  abs:
    runs-on: ubuntu-latest
    steps:
      - run: echo "at $PWD"
        working-directory: /
`,
		Jobs: map[string]Job{"abs": {Lines: []string{"at /"}}},
	},
	{
		Name: "github-matrix-objects",
		Path: ".github/workflows/ci.yml",
		File: `on: push
jobs:
  build:
    runs-on: ubuntu-latest
    strategy:
      matrix:
        target:
          - {os: linux, arch: amd64}
        tags:
          - [fast, race]
    steps:
      - run: echo "os=${{ matrix.target.os }} arch=${{ matrix.target.arch }} tags=${{ join(matrix.tags, '+') }}"
`,
		Jobs: map[string]Job{"build (linux, amd64, fast, race)": {Lines: []string{"os=linux arch=amd64 tags=fast+race"}}},
	},
	{
		// A boolean input is a boolean in the inputs context, so false is
		// falsy (the text "false" would be truthy), and equal to false;
		// a number is a number; github.event.inputs has them as text.
		Name: "github-typed-inputs",
		Path: ".github/workflows/ci.yml",
		File: `on:
  workflow_dispatch:
    inputs:
      flag:
        type: boolean
        default: true
      n:
        type: number
      level:
        type: choice
        options: [low, high]
        default: low
jobs:
  typed:
    runs-on: ubuntu-latest
    env:
      N_JSON: ${{ toJSON(inputs.n) }}
    steps:
      - if: ${{ inputs.flag }}
        run: echo "flag is truthy"
      - if: ${{ !inputs.flag }}
        run: echo "flag is falsy"
      - run: echo "flag == false ${{ inputs.flag == false }}, event flag '${{ github.event.inputs.flag }}' is text ${{ github.event.inputs.flag == 'false' }}"
      - run: echo "n=$N_JSON level=${{ inputs.level }}"
`,
		Inputs: map[string]string{"flag": "false", "n": "2.50"},
		Jobs: map[string]Job{"typed": {
			Lines: []string{"flag is falsy", "flag == false true, event flag 'false' is text true", "n=2.5 level=low"},
			Never: []string{"flag is truthy"},
		}},
	},
	{
		// Each variant knows its place: strategy.job-index from 0 in the
		// expansion order, strategy.job-total the number of variants; a
		// job without matrix is 0 of 1.
		Name: "github-strategy-context",
		Path: ".github/workflows/ci.yml",
		File: `on: push
jobs:
  test:
    runs-on: ubuntu-latest
    strategy:
      matrix:
        os: [linux, mac]
    steps:
      - run: echo "${{ matrix.os }} is ${{ strategy.job-index }}/${{ strategy.job-total }} fail-fast ${{ strategy.fail-fast }}"
  solo:
    runs-on: ubuntu-latest
    steps:
      - run: echo "solo is ${{ strategy.job-index }}/${{ strategy.job-total }} max-parallel ${{ strategy.max-parallel }}"
`,
		Jobs: map[string]Job{
			"test (linux)": {Lines: []string{"linux is 0/2 fail-fast true"}},
			"test (mac)":   {Lines: []string{"mac is 1/2 fail-fast true"}},
			"solo":         {Lines: []string{"solo is 0/1 max-parallel 1"}},
		},
	},
	{
		Name: "github-env-context",
		Path: ".github/workflows/ci.yml",
		File: `on: push
env:
  NAME: world
jobs:
  env:
    runs-on: ubuntu-latest
    env:
      GREETING: hello
    steps:
      - run: echo "loud=${{ env.LOUD }} shell=$LOUD"
        env:
          LOUD: ${{ env.GREETING }} ${{ env.NAME }}!
`,
		Jobs: map[string]Job{"env": {Lines: []string{"loud=hello world! shell=hello world!"}}},
	},
	{
		Name: "github-context-of-the-run",
		Path: ".github/workflows/ci.yml",
		File: `on: push
jobs:
  ctx:
    runs-on: ubuntu-latest
    steps:
      - run: test "${{ github.workspace }}" = "$GITHUB_WORKSPACE" && test "$PWD" = "$GITHUB_WORKSPACE" && echo workspace-ok
      - run: echo "actor=$GITHUB_ACTOR/${{ github.actor }} owner=${{ github.repository_owner }} event=${{ github.event_name }} pusher=${{ github.event.pusher.name }} sha=${{ github.sha }}"
`,
		Jobs: map[string]Job{"ctx": {Lines: []string{"workspace-ok", "actor=alice/alice owner=acme event=push pusher=alice sha=" + SHA}}},
	},
	{
		Name: "github-run-number",
		Path: ".github/workflows/ci.yml",
		File: `on: push
jobs:
  number:
    runs-on: ubuntu-latest
    steps:
      - run: |
          test "$GITHUB_RUN_NUMBER" -ge 1 && test "${{ github.run_number }}" = "$GITHUB_RUN_NUMBER" &&
            test "$CIKIT_RUN_NUMBER" = "$GITHUB_RUN_NUMBER" && echo run-number-ok
`,
		Jobs: map[string]Job{"number": {Lines: []string{"run-number-ok"}}},
	},
	{
		Name: "github-run-time-matrix",
		Path: ".github/workflows/ci.yml",
		File: `on: push
jobs:
  plan:
    runs-on: ubuntu-latest
    outputs:
      matrix: ${{ steps.list.outputs.matrix }}
    steps:
      - id: list
        run: echo 'matrix={"pkg":["api","web"],"include":[{"pkg":"web","node":true}]}' >> "$GITHUB_OUTPUT"
  test:
    needs: plan
    runs-on: ubuntu-latest
    strategy:
      matrix: ${{ fromJSON(needs.plan.outputs.matrix) }}
    outputs:
      last: ${{ steps.t.outputs.tested }}
    steps:
      - id: t
        run: |
          echo "testing ${{ matrix.pkg }} node=${{ matrix.node || false }}"
          echo "tested=${{ matrix.pkg }}" >> "$GITHUB_OUTPUT"
  report:
    needs: test
    runs-on: ubuntu-latest
    steps:
      - run: echo "test ${{ needs.test.result }}, an output ${{ needs.test.outputs.last != '' }}"
`,
		Jobs: map[string]Job{
			"plan":       {},
			"test":       {},
			"test (api)": {Lines: []string{"testing api node=false"}},
			"test (web)": {Lines: []string{"testing web node=true"}},
			"report":     {Lines: []string{"test success, an output true"}},
		},
	},
	{
		Name: "github-run-time-job-condition",
		Path: ".github/workflows/ci.yml",
		File: `on: push
jobs:
  a:
    runs-on: ubuntu-latest
    outputs:
      deploy: ${{ steps.d.outputs.deploy }}
    steps:
      - id: d
        run: echo deploy=no >> "$GITHUB_OUTPUT"
  ship:
    needs: a
    if: needs.a.outputs.deploy == 'yes'
    runs-on: ubuntu-latest
    steps:
      - run: echo shipping
  note:
    needs: a
    if: needs.a.outputs.deploy == 'no'
    runs-on: ubuntu-latest
    steps:
      - run: echo "not deploying (${{ needs.a.outputs.deploy }})"
  after:
    needs: ship
    if: always()
    runs-on: ubuntu-latest
    steps:
      - run: echo "ship ${{ needs.ship.result }}"
`,
		Jobs: map[string]Job{
			"a":     {},
			"note":  {Lines: []string{"not deploying (no)"}},
			"after": {Lines: []string{"ship skipped"}},
		},
		Skipped: []string{"ship"},
	},
	{
		Name: "gitlab-one-shell-session",
		Path: ".gitlab-ci.yml",
		File: `session:
  before_script:
    - mkdir -p sub && cd sub
    - GREETING=hi
  script:
    - echo "in ${PWD##*/} $GREETING"
`,
		Jobs: map[string]Job{"session": {Lines: []string{"in sub hi"}}},
	},
	{
		Name: "gitlab-after-script-status",
		Path: ".gitlab-ci.yml",
		File: `fails:
  script:
    - exit 1
  after_script:
    - echo "status $CI_JOB_STATUS"
passes:
  script:
    - X=set
  after_script:
    - echo "status $CI_JOB_STATUS x=${X:-unset}"
`,
		Jobs: map[string]Job{
			"fails":  {Failed: true, Lines: []string{"status failed"}},
			"passes": {Lines: []string{"status success x=unset"}},
		},
	},
	{
		Name: "gitlab-allow-failure-exit-code",
		Path: ".gitlab-ci.yml",
		File: exitCodesFile("1"),
		Jobs: map[string]Job{
			"lint":   {Failed: true, Allowed: true, Lines: []string{"lint exits 1"}},
			"deploy": {Lines: []string{"deployed"}},
		},
	},
	{
		Name:    "gitlab-allow-failure-other-exit-code",
		Path:    ".gitlab-ci.yml",
		File:    exitCodesFile("2"),
		Jobs:    map[string]Job{"lint": {Failed: true, Lines: []string{"lint exits 2"}}},
		Skipped: []string{"deploy"},
	},
	{
		Name: "gitlab-variables",
		Path: ".gitlab-ci.yml",
		File: `variables:
  BASE: /opt
  BIN: $BASE/bin
  LITERAL: $$BASE
vars:
  variables:
    TOOL: ${BIN}/tool
  script:
    - echo "tool=$TOOL literal=$LITERAL"
`,
		Jobs: map[string]Job{"vars": {Lines: []string{"tool=/opt/bin/tool literal=$BASE"}}},
	},
	{
		Name:  "gitlab-rules-exists",
		Path:  ".gitlab-ci.yml",
		Files: map[string]string{"cmd/app/main.go": "package main\n\nfunc main() {}\n"},
		File: `present:
  rules:
    - exists: ["**/*.go"]
  script:
    - echo present ran
absent:
  rules:
    - exists: ["missing/**/*.go"]
  script:
    - echo absent ran
`,
		Jobs: map[string]Job{"present": {Lines: []string{"present ran"}}},
	},
	{
		Name: "gitlab-trigger",
		Path: ".gitlab-ci.yml",
		File: `build:
  script:
    - echo built
child:
  trigger:
    include: child.yml
`,
		Error: "trigger: (child/multi-project pipelines) is not supported yet",
	},
	{
		Name: "gitlab-key-not-honoured",
		Path: ".gitlab-ci.yml",
		File: `build:
  interruptible: true
  script:
    - echo built
`,
		Jobs: map[string]Job{"build": {Lines: []string{"--- warning: .gitlab-ci.yml:2: interruptible is not honoured yet: a newer pipeline does not cancel the job", "built"}}},
	},
}
