package compiler_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/compiler"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/internal/testenv"
)

const expandWorkflow = ".github/workflows/ci.yml"

// expandEvent is a push to main: what ingest compiles a run with.
var expandEvent = &compiler.Event{Name: "push", Ref: "refs/heads/main", Branch: "main", SHA: "0123456789abcdef0123456789abcdef01234567", Actor: "octo",
	Payload: map[string]any{"ref": "refs/heads/main", "repository": map[string]any{"full_name": "acme/api"}}}

// expandCase is a workflow with a matrix (or part of one) that is
// written twice: computed from the outputs of the jobs it needs (the
// run-time form) and as the same value, constant.
type expandCase struct {
	name string
	// files are the workflow (expandWorkflow) and the workflows it
	// calls; "@M@" marks what differs between the two forms.
	files map[string]string
	// runtime replaces @M@ in the run-time form, constant in the
	// constant form, where it writes in what outputs (and results) are:
	// those of the jobs the placeholder needs, by job ID.
	runtime  string
	constant string
	outputs  map[string]map[string]string
	results  map[string]cikit.JobState // of the needs; succeeded when not given
	ids      []string                  // of the variants
}

func (c expandCase) source(form string) map[string]string {
	files := make(map[string]string, len(c.files))
	for p, s := range c.files {
		files[p] = strings.ReplaceAll(s, "@M@", form)
	}
	return files
}

func compileFiles(t *testing.T, files map[string]string, opts compiler.Options) *compiler.Plan {
	t.Helper()
	plan, diags, err := compiler.Compile(context.Background(), fstestSource(files), expandWorkflow, opts)
	require.NoError(t, err)
	require.False(t, compiler.HasErrors(diags), "%v", diags)
	return plan
}

// expandAll expands every placeholder of plan with needs that ended as
// c says, and returns the placeholder and its variants.
func expandAll(t *testing.T, plan *compiler.Plan, c expandCase) (*cikit.JobSpec, []*cikit.JobSpec) {
	t.Helper()
	var placeholder *cikit.JobSpec
	for _, j := range plan.Jobs {
		if j.Expand != nil {
			require.Nil(t, placeholder, "one placeholder: %s and %s", j.ID, placeholder)
			placeholder = j
		}
	}
	require.NotNil(t, placeholder, "the run-time form has a placeholder")
	require.Equal(t, placeholder.ID, placeholder.MatrixOf)
	require.Contains(t, placeholder.Matrix, "*")
	require.Nil(t, placeholder.Concurrency, "the placeholder holds no concurrency group")
	require.Zero(t, placeholder.Timeout)
	require.LessOrEqual(t, len(placeholder.Expand), cikit.MaxExpandBytes)
	needs := map[string]cikit.NeedResult{}
	for _, n := range placeholder.Needs {
		res := cikit.JobSucceeded
		if r, ok := c.results[n]; ok {
			res = r
		}
		needs[n] = cikit.NeedResult{Result: res, Outputs: c.outputs[n]}
	}
	vs, err := compiler.ExpandJob(context.Background(), &dag.ExpandRequest{Job: placeholder.Clone(), Needs: needs})
	require.NoError(t, err)
	return placeholder, vs
}

// variantsOf returns the jobs of plan that a matrix job id expanded to:
// "id (…)", and the jobs of a reusable workflow a matrix caller runs,
// "id (…)/job".
func variantsOf(plan *compiler.Plan, id string) []*cikit.JobSpec {
	var out []*cikit.JobSpec
	for _, j := range plan.Jobs {
		if strings.HasPrefix(j.ID, id+" (") {
			out = append(out, j)
		}
	}
	return out
}

var expandCases = []expandCase{
	{
		name: "whole matrix, every templated key",
		ids:  []string{"b (linux, 1)", "b (linux, 2)", "b (mac, 2)", "b (win, 3)"},
		files: map[string]string{expandWorkflow: `
on: push
jobs:
  a:
    runs-on: ubuntu-latest
    outputs:
      m: ${{ steps.s.outputs.m }}
    steps:
      - id: s
        run: echo 'm={"os":["linux","mac"],"v":[1,2]}' >> "$GITHUB_OUTPUT"
  b:
    needs: a
    env:
      OS: ${{ matrix.os }}
    strategy:
      matrix: @M@
    runs-on: ${{ matrix.os }}-latest
    container: node:${{ matrix.v }}
    services:
      db:
        image: postgres:1${{ matrix.v }}
    timeout-minutes: ${{ matrix.v }}
    continue-on-error: ${{ matrix.experimental == true }}
    concurrency:
      group: b-${{ matrix.os }}-${{ github.ref }}
      cancel-in-progress: ${{ matrix.v == 2 }}
    environment:
      name: env-${{ matrix.os }}
      url: https://${{ matrix.os }}.example.com
    outputs:
      seen: ${{ steps.t.outputs.seen }}
    steps:
      - id: t
        run: echo v=${{ matrix.v }} os=$OS ${{ toJSON(matrix) }}
        if: ${{ matrix.os != 'mac' }}
  c:
    needs: b
    runs-on: ubuntu-latest
    steps:
      - run: echo ${{ needs.b.outputs.seen }}
`},
		runtime:  "${{ fromJSON(needs.a.outputs.m) }}",
		constant: `${{ fromJSON('{"os":["linux","mac"],"v":[1,2],"include":[{"os":"linux","v":2,"experimental":true},{"os":"win","v":3}],"exclude":[{"os":"mac","v":1}]}') }}`,
		outputs: map[string]map[string]string{"a": {"m": `{"os":["linux","mac"],"v":[1,2],` +
			`"include":[{"os":"linux","v":2,"experimental":true},{"os":"win","v":3}],"exclude":[{"os":"mac","v":1}]}`}},
	},
	{
		name: "one axis from outputs, others literal",
		ids:  []string{"test (ubuntu, 18)", "test (ubuntu, 20)", "test (windows, 20)", "test (ubuntu, 22, yes)"},
		files: map[string]string{expandWorkflow: `
on: push
jobs:
  setup:
    runs-on: ubuntu-latest
    outputs:
      os: ${{ steps.s.outputs.os }}
    steps: [{id: s, run: echo}]
  test:
    needs: [setup]
    strategy:
      fail-fast: false
      matrix:
        os: @M@
        node: [18, 20]
        include:
          - {os: ubuntu, node: 22, extra: yes}
        exclude:
          - {os: windows, node: 18}
    name: test ${{ matrix.os }} on node ${{ matrix.node }}
    runs-on: ${{ matrix.os }}-latest
    steps:
      - run: npm test ${{ matrix.extra }}
`},
		runtime:  "${{ fromJSON(needs.setup.outputs.os) }}",
		constant: `${{ fromJSON('["ubuntu","windows"]') }}`,
		outputs:  map[string]map[string]string{"setup": {"os": `["ubuntu","windows"]`}},
	},
	{
		name: "include from outputs, a name without expressions",
		ids:  []string{"deploy (3, eu)", "deploy (5, us)"},
		files: map[string]string{expandWorkflow: `
on: push
jobs:
  plan:
    runs-on: ubuntu-latest
    outputs:
      targets: ${{ steps.s.outputs.t }}
    steps: [{id: s, run: echo}]
  deploy:
    needs: plan
    name: Deploy
    strategy:
      matrix:
        include: @M@
    runs-on: [self-hosted, "${{ matrix.region }}"]
    steps:
      - run: ./deploy ${{ matrix.region }} ${{ matrix.config.size }}
`},
		runtime:  "${{ fromJSON(needs.plan.outputs.targets) }}",
		constant: `${{ fromJSON('[{"region":"eu","config":{"size":3}},{"region":"us","config":{"size":5}}]') }}`,
		outputs:  map[string]map[string]string{"plan": {"targets": `[{"region":"eu","config":{"size":3}},{"region":"us","config":{"size":5}}]`}},
	},
	{
		name: "a value from the needs' results and a need that is a matrix",
		ids:  []string{"b (failure, y)", "b (failure, z)"},
		files: map[string]string{expandWorkflow: `
on: push
jobs:
  a:
    strategy:
      matrix:
        n: [1, 2]
    runs-on: ubuntu-latest
    outputs:
      more: ${{ steps.s.outputs.more }}
    steps: [{id: s, run: echo}]
  b:
    needs: a
    if: always()
    strategy:
      matrix: @M@
    runs-on: ubuntu-latest
    steps:
      - run: echo ${{ matrix.result }} ${{ matrix.more }}
`},
		runtime: `
        result: ["${{ needs.a.result }}"]
        more: ${{ fromJSON(needs.a.outputs.more) }}`,
		constant: `
        result: [failure]
        more: ${{ fromJSON('["y","z"]') }}`,
		// The variants of a are one need together: the outputs merge, a
		// later variant winning.
		outputs: map[string]map[string]string{"a (1)": {"more": `["x"]`}, "a (2)": {"more": `["y","z"]`}},
		results: map[string]cikit.JobState{"a (1)": cikit.JobFailed},
	},
	{
		name: "a matrix caller of a reusable workflow",
		ids:  []string{"b (amd64)/compile", "b (amd64)/pack", "b (arm64)/compile", "b (arm64)/pack"},
		files: map[string]string{
			expandWorkflow: `
on: push
jobs:
  a:
    runs-on: ubuntu-latest
    outputs:
      m: ${{ steps.s.outputs.m }}
    steps: [{id: s, run: echo}]
  b:
    needs: a
    name: B
    strategy:
      matrix: @M@
    uses: ./.github/workflows/build.yml
    with:
      target: ${{ matrix.target }}
  after:
    needs: b
    runs-on: ubuntu-latest
    steps:
      - run: echo ${{ needs.b.outputs.artifact }}
`,
			".github/workflows/build.yml": `
on:
  workflow_call:
    inputs:
      target: {type: string, required: true}
    outputs:
      artifact:
        value: ${{ jobs.pack.outputs.name }}
jobs:
  compile:
    runs-on: ubuntu-${{ inputs.target }}
    steps:
      - run: make ${{ inputs.target }}
  pack:
    needs: compile
    runs-on: ubuntu-latest
    outputs:
      name: ${{ steps.p.outputs.name }}
    steps:
      - id: p
        run: tar cf ${{ inputs.target }}.tar .
`,
		},
		runtime:  "${{ fromJSON(needs.a.outputs.m) }}",
		constant: `${{ fromJSON('{"target":["amd64","arm64"]}') }}`,
		outputs:  map[string]map[string]string{"a": {"m": `{"target":["amd64","arm64"]}`}},
	},
	{
		name: "a matrix of a called workflow from what its caller passes",
		ids:  []string{"call/test (3.11)", "call/test (3.12)"},
		files: map[string]string{
			expandWorkflow: `
on: push
jobs:
  versions:
    runs-on: ubuntu-latest
    outputs:
      list: ${{ steps.v.outputs.list }}
    steps: [{id: v, run: echo}]
  call:
    needs: versions
    uses: ./.github/workflows/test.yml
    with:
      versions: @M@
`,
			".github/workflows/test.yml": `
on:
  workflow_call:
    inputs:
      versions: {type: string, required: true}
jobs:
  prepare:
    runs-on: ubuntu-latest
    outputs:
      flags: ${{ steps.f.outputs.flags }}
    steps: [{id: f, run: echo}]
  test:
    needs: prepare
    strategy:
      matrix:
        python: ${{ fromJSON(inputs.versions) }}
    runs-on: ubuntu-latest
    steps:
      - run: pytest --python ${{ matrix.python }} ${{ needs.prepare.outputs.flags }}
`,
		},
		runtime:  "${{ needs.versions.outputs.list }}",
		constant: `'["3.11","3.12"]'`,
		outputs:  map[string]map[string]string{"versions": {"list": `["3.11","3.12"]`}},
	},
	{
		name: "a matrix of a called workflow from the outputs of another of its jobs",
		ids:  []string{"call/test (-x, 3)", "call/test (-v, 3)"},
		files: map[string]string{
			expandWorkflow: `
on: push
jobs:
  lint:
    runs-on: ubuntu-latest
    steps: [{run: make lint}]
  call:
    needs: lint
    uses: ./.github/workflows/test.yml
    with:
      level: 3
`,
			".github/workflows/test.yml": `
on:
  workflow_call:
    inputs:
      level: {type: number, default: 1}
jobs:
  prepare:
    runs-on: ubuntu-latest
    outputs:
      flags: ${{ steps.f.outputs.flags }}
    steps: [{id: f, run: echo}]
  test:
    needs: prepare
    name: test ${{ matrix.flag }} at ${{ inputs.level }}
    strategy:
      matrix:
        flag: @M@
        level: ["${{ inputs.level }}"]
    runs-on: ubuntu-latest
    steps:
      - run: pytest ${{ matrix.flag }} -l ${{ inputs.level }} ${{ needs.prepare.outputs.flags }}
`,
		},
		runtime:  "${{ fromJSON(needs.prepare.outputs.flags) }}",
		constant: `${{ fromJSON('["-x","-v"]') }}`,
		outputs:  map[string]map[string]string{"call/prepare": {"flags": `["-x","-v"]`}},
	},
	{
		name: "a variant of a matrix caller calls a workflow with a matrix from another of its jobs",
		ids:  []string{"call (1)/test (a)", "call (1)/test (b)"},
		files: map[string]string{
			expandWorkflow: `
on: push
jobs:
  call:
    strategy:
      matrix:
        n: [1]
    uses: ./.github/workflows/test.yml
    with:
      n: ${{ matrix.n }}
`,
			".github/workflows/test.yml": `
on:
  workflow_call:
    inputs:
      n: {type: number, required: true}
jobs:
  prepare:
    runs-on: ubuntu-latest
    outputs:
      flags: ${{ steps.f.outputs.flags }}
    steps: [{id: f, run: echo}]
  test:
    needs: prepare
    strategy:
      matrix:
        flag: @M@
    runs-on: ubuntu-${{ inputs.n }}
    steps:
      - run: pytest ${{ matrix.flag }}
`,
		},
		runtime:  "${{ fromJSON(needs.prepare.outputs.flags) }}",
		constant: `${{ fromJSON('["a","b"]') }}`,
		outputs:  map[string]map[string]string{"call (1)/prepare": {"flags": `["a","b"]`}},
	},
	{
		name: "a matrix from the outputs of a called workflow",
		ids:  []string{"b (x)", "b (y)"},
		files: map[string]string{
			expandWorkflow: `
on: push
jobs:
  c:
    uses: ./.github/workflows/list.yml
  b:
    needs: c
    strategy:
      matrix:
        t: @M@
    runs-on: ubuntu-latest
    steps:
      - run: echo ${{ matrix.t }} ${{ needs.c.outputs.list }}
`,
			".github/workflows/list.yml": `
on:
  workflow_call:
    outputs:
      list:
        value: ${{ jobs.pack.outputs.list }}
jobs:
  compile:
    runs-on: ubuntu-latest
    steps: [{run: make}]
  pack:
    needs: compile
    runs-on: ubuntu-latest
    outputs:
      list: ${{ steps.p.outputs.list }}
    steps: [{id: p, run: echo}]
`,
		},
		runtime:  "${{ fromJSON(needs.c.outputs.list) }}",
		constant: `${{ fromJSON('["x","y"]') }}`,
		outputs:  map[string]map[string]string{"c/pack": {"list": `["x","y"]`}},
	},
}

// TestExpandJobAgreesWithCompile checks that a matrix computed at run
// time expands to exactly the jobs the compiler makes of the same matrix
// when it is a constant. The constant form writes the needs' outputs
// in, so it differs from the run-time form only where the matrix is
// written, on the same line: no field is ignored in the comparison, the
// positions in the warnings included.
func TestExpandJobAgreesWithCompile(t *testing.T) {
	t.Parallel()
	for _, c := range expandCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			opts := compiler.Options{Event: expandEvent}
			runtime := compileFiles(t, c.source(c.runtime), opts)
			placeholder, got := expandAll(t, runtime, c)
			constant := compileFiles(t, c.source(c.constant), opts)
			want := variantsOf(constant, placeholder.ID)
			require.NotEmpty(t, want, "the constant form expands %s", placeholder.ID)
			require.Empty(t, gocmp.Diff(want, got), "the variants (-constant +run time)")
			ids := make([]string, len(got))
			for i, v := range got {
				ids[i] = v.ID
			}
			require.Equal(t, c.ids, ids)
			for _, v := range got {
				require.Nil(t, v.Expand, v.ID)
				for _, n := range placeholder.Needs {
					require.Contains(t, v.Needs, n, "variant %s keeps the placeholder's needs", v.ID)
				}
			}
			// A job that needs the matrix job needs the placeholder,
			// which ends when its variants have.
			for _, j := range runtime.Jobs {
				if j != placeholder && j.Expand == nil {
					require.NotContains(t, strings.Join(j.Needs, "\n"), placeholder.ID+" (", j.ID)
				}
			}
		})
	}
}

// expandPlaceholder compiles src (a workflow whose job b has a matrix
// computed from needs.a.outputs.m) and returns b.
func expandPlaceholder(t *testing.T, src string, opts compiler.Options) *cikit.JobSpec {
	t.Helper()
	plan := compileFiles(t, map[string]string{expandWorkflow: src}, opts)
	b := plan.Job("b")
	require.NotNil(t, b)
	require.NotNil(t, b.Expand)
	return b
}

const expandSimple = `
on: push
jobs:
  a:
    runs-on: ubuntu-latest
    outputs:
      m: ${{ steps.s.outputs.m }}
    steps: [{id: s, run: echo}]
  b:
    needs: a
    strategy:
      matrix: ${{ fromJSON(needs.a.outputs.m) }}
    runs-on: ubuntu-latest
    steps:
      - run: echo v=${{ matrix.v }}
`

// TestExpandJobErrors checks that outputs that make no matrix fail the
// expansion with a message naming the job and quoting the value, and
// that an Expand this compiler did not write is refused.
func TestExpandJobErrors(t *testing.T) {
	t.Parallel()
	b := expandPlaceholder(t, expandSimple, compiler.Options{Event: expandEvent, MaxMatrixJobs: 4})
	huge := strings.Repeat("x", 300_000)
	tests := []struct {
		name    string
		output  *string // nil: the need has no output m
		want    []string
		isMatch bool // an *ExpandError, the outputs' fault
	}{
		{name: "not JSON", output: ptr(`{"v": [1, 2`), want: []string{`job "b"`, `{\"v\": [1, 2`, "not valid JSON"}, isMatch: true},
		{name: "not an object", output: ptr(`[1, 2]`), want: []string{`job "b"`, "object of axes", "got [1,2]"}, isMatch: true},
		{name: "a string", output: ptr(`"linux"`), want: []string{`job "b"`, `got "linux"`}, isMatch: true},
		{name: "an axis not a list", output: ptr(`{"v": 3}`), want: []string{`axis "v" of job "b"`, "non-empty list, got 3"}, isMatch: true},
		{name: "an empty axis", output: ptr(`{"v": []}`), want: []string{`axis "v" of job "b"`, "got []"}, isMatch: true},
		{name: "no axes", output: ptr(`{}`), want: []string{`job "b"`, "neither axes nor include"}, isMatch: true},
		{name: "every variant excluded", output: ptr(`{"v":[1],"exclude":[{"v":1}]}`), want: []string{`job "b"`, "excludes every combination"}, isMatch: true},
		{name: "over the limit", output: ptr(`{"v":[1,2,3],"w":[1,2]}`), want: []string{`job "b"`, "up to 6 jobs", "limit of 4"}, isMatch: true},
		{name: "include not objects", output: ptr(`{"v":[1],"include":[1]}`), want: []string{`"include" of the matrix of job "b"`, "got an entry 1"}, isMatch: true},
		{name: "exclude not a list", output: ptr(`{"v":[1],"exclude":"v"}`), want: []string{`"exclude" of the matrix of job "b"`, `got "v"`}, isMatch: true},
		{name: "no output", output: nil, want: []string{`job "b"`, "empty"}, isMatch: true},
		{name: "a huge value is cut", output: &huge, want: []string{`job "b"`, "not valid JSON", "…"}, isMatch: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := cikit.NeedResult{Result: cikit.JobSucceeded}
			if tt.output != nil {
				res.Outputs = map[string]string{"m": *tt.output}
			}
			vs, err := compiler.ExpandJob(context.Background(), &dag.ExpandRequest{Job: b, Needs: map[string]cikit.NeedResult{"a": res}})
			require.Error(t, err)
			require.Nil(t, vs)
			for _, w := range tt.want {
				require.Contains(t, err.Error(), w)
			}
			require.Less(t, len(err.Error()), 2000, "the message quotes values short")
			_, isExpand := errors.AsType[*compiler.ExpandError](err)
			require.Equal(t, tt.isMatch, isExpand, "%v", err)
		})
	}

	broken := []struct {
		name   string
		expand string
		want   string
	}{
		{name: "empty", expand: "", want: "no matrix to expand"},
		{name: "not JSON", expand: "{", want: "not one this compiler writes"},
		{name: "unknown field", expand: `{"v":1,"job":"b","file":"x","files":{},"extra":1}`, want: "not one this compiler writes"},
		{name: "another version", expand: `{"v":9,"job":"b","file":"x","files":{}}`, want: "version 9"},
		{name: "another job", expand: `{"v":1,"job":"c","file":"x","files":{}}`, want: `written for job "c"`},
		{name: "no workflow", expand: `{"v":1,"job":"b","file":"x","files":{}}`, want: "does not hold its workflow"},
	}
	for _, tt := range broken {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			job := b.Clone()
			job.Expand = []byte(tt.expand)
			_, err := compiler.ExpandJob(context.Background(), &dag.ExpandRequest{Job: job, Needs: map[string]cikit.NeedResult{"a": {Result: cikit.JobSucceeded}}})
			require.ErrorContains(t, err, tt.want)
		})
	}
	// A job whose needs are not those its Expand was compiled with.
	other := b.Clone()
	other.Needs = append(other.Needs, "z")
	_, err := compiler.ExpandJob(context.Background(), &dag.ExpandRequest{Job: other,
		Needs: map[string]cikit.NeedResult{"a": {Result: cikit.JobSucceeded, Outputs: map[string]string{"m": `{"v":[1]}`}}}})
	require.ErrorContains(t, err, `does not need "z", which the job needs: the job's Expand does not match it`)
	_, err = compiler.ExpandJob(context.Background(), nil)
	require.Error(t, err)
}

func ptr[T any](v T) *T { return &v }

// TestRuntimeMatrixDiagnostics checks what the compiler says of matrices
// computed at run time: nothing when they read needs (also when linting,
// without an event), and an error for what is not known when they are
// expanded, for a nesting that cannot be expanded, and for a template
// over cikit.MaxExpandBytes.
func TestRuntimeMatrixDiagnostics(t *testing.T) {
	t.Parallel()
	nested := map[string]string{
		expandWorkflow: `
on: push
jobs:
  a:
    runs-on: ubuntu-latest
    outputs: {m: "${{ steps.s.outputs.m }}"}
    steps: [{id: s, run: echo}]
  b:
    needs: a
    strategy:
      matrix: ${{ fromJSON(needs.a.outputs.m) }}
    uses: ./.github/workflows/inner.yml
`,
		".github/workflows/inner.yml": `
on: workflow_call
jobs:
  x:
    runs-on: ubuntu-latest
    outputs: {m: "${{ steps.s.outputs.m }}"}
    steps: [{id: s, run: echo}]
  y:
    needs: x
    strategy:
      matrix: ${{ fromJSON(needs.x.outputs.m) }}
    runs-on: ubuntu-latest
    steps: [{run: echo}]
`,
	}
	big := map[string]string{expandWorkflow: expandSimple + "# " + strings.Repeat("x", cikit.MaxExpandBytes) + "\n"}
	tests := []struct {
		name  string
		files map[string]string
		opts  compiler.Options
		want  string // a substring of the one error; "" for none
	}{
		{name: "needs outputs", files: map[string]string{expandWorkflow: expandSimple}, opts: compiler.Options{Event: expandEvent}},
		{name: "needs outputs, linted", files: map[string]string{expandWorkflow: expandSimple}},
		{name: "inputs, linted", files: map[string]string{expandWorkflow: strings.Replace(expandSimple, "needs.a.outputs.m", "github.event.inputs.m", 1)}},
		{name: "the repository", files: map[string]string{expandWorkflow: strings.Replace(expandSimple, "needs.a.outputs.m", "github.repository", 1)},
			opts: compiler.Options{Event: expandEvent}, want: `the matrix of job "b" reads github.repository, which is not known before the job runs`},
		{name: "the run number, linted", files: map[string]string{expandWorkflow: strings.Replace(expandSimple, "needs.a.outputs.m", "github.run_number", 1)},
			want: `reads github.run_number`},
		{name: "vars without any", files: map[string]string{expandWorkflow: strings.Replace(expandSimple, "needs.a.outputs.m", "vars.M", 1)},
			opts: compiler.Options{Event: expandEvent}, want: `reads vars.m`},
		{name: "a run-time matrix in a run-time matrix", files: nested, opts: compiler.Options{Event: expandEvent}, want: `so is the matrix of job "b/y" of the workflow it calls`},
		{name: "too large to keep", files: big, opts: compiler.Options{Event: expandEvent, MaxFileBytes: 3 << 20}, want: "more than the 2 MiB a job may keep (cikit.MaxExpandBytes)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, diags, err := compiler.Compile(context.Background(), fstestSource(tt.files), expandWorkflow, tt.opts)
			require.NoError(t, err)
			var errs []string
			for _, d := range diags {
				if d.Severity == compiler.SeverityError {
					errs = append(errs, d.String())
				}
			}
			if tt.want == "" {
				require.Empty(t, errs)
				return
			}
			require.Len(t, errs, 1, "%v", errs)
			require.Contains(t, errs[0], tt.want)
		})
	}
}

// TestExpandJobUTF16 checks that a workflow in UTF-16, which YAML reads
// and a JSON string cannot hold as it is, expands.
func TestExpandJobUTF16(t *testing.T) {
	t.Parallel()
	var utf16 []byte
	for _, r := range "\ufeff" + expandSimple {
		utf16 = append(utf16, byte(r), byte(r>>8))
	}
	b := expandPlaceholder(t, string(utf16), compiler.Options{Event: expandEvent})
	vs, err := compiler.ExpandJob(context.Background(), &dag.ExpandRequest{Job: b,
		Needs: map[string]cikit.NeedResult{"a": {Result: cikit.JobSucceeded, Outputs: map[string]string{"m": `{"v":["é",2]}`}}}})
	require.NoError(t, err)
	require.Equal(t, "b (é)", vs[0].ID)
	require.Equal(t, "b (2)", vs[1].ID)
}

// TestExpandJobCancelled checks that an expansion stops with its context.
func TestExpandJobCancelled(t *testing.T) {
	t.Parallel()
	b := expandPlaceholder(t, expandSimple, compiler.Options{Event: expandEvent})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := compiler.ExpandJob(ctx, &dag.ExpandRequest{Job: b})
	require.ErrorIs(t, err, context.Canceled)
}

// TestExpandJobRealWorkflow expands the matrix of go-sql-driver/mysql's
// test workflow, which its job list computes in Python, with the value
// that script prints, and checks it against the same matrix written in.
func TestExpandJobRealWorkflow(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(testenv.SharedTestdata(t, "gha"), "go-sql-driver__mysql__test.yml"))
	require.NoError(t, err)
	const m = `{"os":["ubuntu-latest","macos-latest","windows-latest"],"go":["1.21"],` +
		`"mysql":["8.1","8.0","5.7","5.6","mariadb-10.11","mariadb-10.6","mariadb-10.5","mariadb-10.4","mariadb-10.3"],` +
		`"include":[{"os":"ubuntu-latest","go":"1.20","mysql":"8.1"},{"os":"ubuntu-latest","go":"1.19","mysql":"8.1"},{"os":"ubuntu-latest","go":"1.18","mysql":"8.1"}]}`
	const runtime = "${{ fromJSON(needs.list.outputs.matrix) }}"
	require.Contains(t, string(data), runtime)
	c := expandCase{
		files:   map[string]string{expandWorkflow: strings.Replace(string(data), runtime, "@M@", 1)},
		runtime: runtime, constant: "${{ fromJSON('" + m + "') }}",
		outputs: map[string]map[string]string{"list": {"matrix": m}},
	}
	opts := compiler.Options{Event: expandEvent}
	placeholder, got := expandAll(t, compileFiles(t, c.source(c.runtime), opts), c)
	want := variantsOf(compileFiles(t, c.source(c.constant), opts), placeholder.ID)
	require.Len(t, got, 30)
	require.Empty(t, gocmp.Diff(want, got), "the variants (-constant +run time)")
	// The axes of a matrix computed as an object are in the order of
	// their names, in either form (GitHub keeps the object's order).
	require.Equal(t, "test (1.21, 8.1, ubuntu-latest)", got[0].ID)
	require.Equal(t, "test (1.18, 8.1, ubuntu-latest)", got[29].ID)
	require.Equal(t, []string{"windows-latest"}, got[26].RunsOn)
	t.Logf("template: %d bytes for a workflow of %d bytes", len(placeholder.Expand), len(data))
}

// BenchmarkExpandJob measures an expansion: the workflow compiled again,
// its matrix computed from the outputs (4 variants of a job with every
// templated key).
func BenchmarkExpandJob(b *testing.B) {
	c := expandCases[0]
	plan, diags, err := compiler.Compile(context.Background(), fstestSource(c.source(c.runtime)), expandWorkflow, compiler.Options{Event: expandEvent})
	require.NoError(b, err)
	require.False(b, compiler.HasErrors(diags))
	job := plan.Job("b")
	req := &dag.ExpandRequest{Job: job, Needs: map[string]cikit.NeedResult{"a": {Result: cikit.JobSucceeded, Outputs: c.outputs["a"]}}}
	b.ReportAllocs()
	for b.Loop() {
		vs, err := compiler.ExpandJob(context.Background(), req)
		if err != nil || len(vs) != 4 {
			b.Fatalf("%d variants, %v", len(vs), err)
		}
	}
}
