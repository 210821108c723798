package semantics

// WorldWorkflow is a GitHub workflow using what real ones do: the full
// history checked out by actions/checkout, a local composite action with
// an input (defaulted or given) and an output, $GITHUB_ENV between
// steps, $GITHUB_OUTPUT read by a dependent job and an ::error
// annotation.
const WorldWorkflow = `on: push
jobs:
  a:
    runs-on: ubuntu-latest
    outputs:
      x: ${{ steps.set.outputs.x }}
    steps:
      - uses: actions/checkout@v4
        with:
          fetch-depth: 0
      - run: echo "commits=$(git rev-list --count HEAD)"
      - id: greet
        uses: ./.github/actions/greet
      - id: greet2
        uses: ./.github/actions/greet
        with:
          who: cikit
      - run: echo "said '${{ steps.greet.outputs.greeting }}' and '${{ steps.greet2.outputs.greeting }}'"
      - run: echo "STAGE=from-the-env-file" >> "$GITHUB_ENV"
      - run: echo "stage is $STAGE"
      - id: set
        run: echo "x=forty-two" >> "$GITHUB_OUTPUT"
      - run: echo "::error file=app.go,line=3::boom"
  b:
    needs: a
    runs-on: ubuntu-latest
    steps:
      - run: echo "x is ${{ needs.a.outputs.x }}"
`

// GreetAction is the workflow's local composite action.
const GreetAction = `name: greet
description: Greets someone.
inputs:
  who:
    description: Whom to greet.
    default: world
outputs:
  greeting:
    description: What it said.
    value: ${{ steps.g.outputs.greeting }}
runs:
  using: composite
  steps:
    - id: g
      shell: bash
      run: echo "greeting=hello ${{ inputs.who }}" >> "$GITHUB_OUTPUT"
    - shell: bash
      run: echo "greeting ${{ inputs.who }}"
`

// WorldGitLab runs three variants of one job, each printing its index and
// the commit.
const WorldGitLab = `test:
  parallel: 3
  script:
    - echo "node $CI_NODE_INDEX of $CI_NODE_TOTAL at $CI_COMMIT_SHA"
`

// WorldFiles are the files of a repository holding WorldWorkflow, its
// action and WorldGitLab. Pushed as the second commit of a repository,
// the workflow's job a prints "commits=2", "greeting world",
// "greeting cikit", "said 'hello world' and 'hello cikit'" and
// "stage is from-the-env-file", has the output x=forty-two and the error
// annotation "boom" at app.go line 3; job b prints "x is forty-two"; the
// GitLab job's variant i of 3 prints "node i of 3 at " and the commit.
var WorldFiles = map[string]string{
	".github/workflows/ci.yml":         WorldWorkflow,
	".github/actions/greet/action.yml": GreetAction,
	".gitlab-ci.yml":                   WorldGitLab,
	"app.go":                           "package app\n\nfunc boom() {}\n",
}
