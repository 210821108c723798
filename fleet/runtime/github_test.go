package runtime_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/compiler/expr"
	"github.com/cikit/cikit/fleet/runtime"
)

func newGitHub(t *testing.T, spec *cikit.JobSpec, jc *cikit.JobContext) *runtime.GitHub {
	t.Helper()
	spec.Format = "github"
	g, err := runtime.NewGitHub(runtime.Params{Spec: spec, Context: jc, Workspace: "/ws", Temp: "/tmp/j",
		Runner: runtime.Runner{Name: "r1", OS: "Linux", Arch: "X64"}, Vars: map[string]string{"REGION": "eu"}})
	require.NoError(t, err)
	return g
}

func expand(t *testing.T, g *runtime.GitHub, s string) string {
	t.Helper()
	v, err := g.Expand(s)
	require.NoError(t, err, s)
	return v
}

func TestGitHubContexts(t *testing.T) {
	t.Parallel()
	jc := pushContext()
	jc.Payload = json.RawMessage(`{"head_commit":{"message":"fix it"},"commits":[{"id":"a"},{"id":"b"}]}`)
	jc.Inputs = map[string]string{"level": "debug"}
	jc.Needs = map[string]cikit.NeedResult{
		"build": {Result: cikit.JobSucceeded, Outputs: map[string]string{"version": "1.2.3"}},
		"lint":  {Result: cikit.JobFailed},
	}
	spec := &cikit.JobSpec{ID: "test (x)", MatrixOf: "test",
		Matrix:     map[string]string{"os": "linux", "cfg": `{"go":"1.26","race":true}`},
		MatrixJSON: map[string]json.RawMessage{"cfg": json.RawMessage(`{"go":"1.26","race":true}`)},
		Env:        map[string]string{"GOFLAGS": "-mod=${{ matrix.os == 'linux' && 'vendor' || 'mod' }}", "PLAIN": "p"},
	}
	g := newGitHub(t, spec, jc)
	for src, want := range map[string]string{
		"${{ github.sha }}":                                  jc.SHA,
		"${{ github.ref_name }}/${{ github.ref_type }}":      "feature/Login-Page/branch",
		"${{ github.repository_owner }}":                     "acme",
		"${{ github.actor }}":                                "octocat",
		"${{ github.event_name }}":                           "push",
		"${{ github.event.head_commit.message }}":            "fix it",
		"${{ join(github.event.commits.*.id, ',') }}":        "a,b",
		"${{ github.run_id }}-${{ github.run_attempt }}":     "r-42-2",
		"${{ github.run_number }}":                           "7",
		"${{ github.job }}":                                  "test",
		"${{ github.workspace }}":                            "/ws",
		"${{ github.server_url }}":                           "https://github.com",
		"${{ github.repositoryUrl }}":                        "git://github.com/acme/api.git",
		"${{ github.event_path }}":                           "/tmp/j/event.json",
		"${{ github.head_ref }}":                             "",
		"${{ matrix.os }}":                                   "linux",
		"${{ matrix.cfg.go }}":                               "1.26",
		"${{ matrix.cfg.race && 'race' }}":                   "race",
		"${{ needs.build.outputs.version }}":                 "1.2.3",
		"${{ needs.build.result }}/${{ needs.lint.result }}": "success/failure",
		"${{ inputs.level }}":                                "debug",
		"${{ vars.REGION }}":                                 "eu",
		"${{ secrets.NOPE }}":                                "",
		"${{ runner.os }}/${{ runner.temp }}":                "Linux//tmp/j",
		"${{ job.status }}":                                  "success",
		"${{ env.GOFLAGS }}":                                 "-mod=vendor",
		"no expressions ${ here }":                           "no expressions ${ here }",
	} {
		require.Equal(t, want, expand(t, g, src), src)
	}
	require.Equal(t, map[string]string{"GOFLAGS": "-mod=vendor", "PLAIN": "p"}, g.JobEnv())

	_, err := g.Expand("${{ jobs.build }}")
	require.ErrorContains(t, err, "jobs", "a context a job does not have fails")
	_, err = g.Expand("${{ github.sha")
	require.Error(t, err)

	v, err := g.Eval("${{ matrix.cfg }}")
	require.NoError(t, err)
	require.Equal(t, map[string]any{"go": "1.26", "race": true}, v, "matrix objects stay objects")
}

// TestGitHubServicesContext: job.services names each service's ports as
// the job reaches them, in its network: the container's port.
func TestGitHubServicesContext(t *testing.T) {
	t.Parallel()
	spec := &cikit.JobSpec{ID: "test", Services: []cikit.Service{
		{Name: "postgres", Image: "postgres:16", Ports: []string{"5432"}},
		{Name: "web", Image: "nginx", Ports: []string{"8080:80/tcp"}},
	}}
	g := newGitHub(t, spec, &cikit.JobContext{})
	for src, want := range map[string]string{
		"${{ job.services.postgres.ports[5432] }}":   "5432",
		"${{ job.services.postgres.ports['5432'] }}": "5432",
		"${{ job.services.web.ports['80'] }}":        "80",
		"${{ job.services.web.id }}":                 "web",
		"${{ job.services.nope.ports[1] }}":          "",
	} {
		require.Equal(t, want, expand(t, g, src), src)
	}
}

func TestGitHubStrategyContext(t *testing.T) {
	t.Parallel()
	const src = "${{ strategy.job-index }}/${{ strategy.job-total }} ${{ strategy.fail-fast }} ${{ strategy.max-parallel }}"
	for _, c := range []struct {
		name     string
		strategy *cikit.Strategy
		want     string
	}{
		{"no matrix", nil, "0/1 true 1"},
		{"variant", &cikit.Strategy{Index: 2, Total: 3, FailFast: true}, "2/3 true 3"},
		{"written", &cikit.Strategy{Index: 0, Total: 4, MaxParallel: 2}, "0/4 false 2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			g := newGitHub(t, &cikit.JobSpec{ID: "test", Strategy: c.strategy}, pushContext())
			require.Equal(t, c.want, expand(t, g, src))
		})
	}
}

func TestGitHubTypedInputs(t *testing.T) {
	t.Parallel()
	jc := pushContext()
	jc.Event = "workflow_dispatch"
	jc.Inputs = map[string]string{"flag": "false", "n": "2.50", "level": "low", "odd": "yes"}
	jc.InputTypes = map[string]string{"flag": "boolean", "n": "number", "odd": "boolean"}
	g := newGitHub(t, &cikit.JobSpec{ID: "deploy"}, jc)
	for src, want := range map[string]string{
		"${{ inputs.flag && 'truthy' || 'falsy' }}": "falsy",
		"${{ inputs.flag == false }}":               "true",
		"${{ toJSON(inputs.n) }}":                   "2.5",
		"${{ inputs.n == 2.5 }}":                    "true",
		"${{ inputs.level }}":                       "low",
		"${{ inputs.odd }}":                         "yes",
	} {
		require.Equal(t, want, expand(t, g, src), src)
	}
}

func TestGitHubJobEnvError(t *testing.T) {
	t.Parallel()
	_, err := runtime.NewGitHub(runtime.Params{Spec: &cikit.JobSpec{Env: map[string]string{"A": "${{ nope.x }}"}}})
	require.ErrorContains(t, err, "env A:")
	_, err = runtime.NewGitHub(runtime.Params{})
	require.ErrorContains(t, err, "Spec is required")
}

func TestGitHubEnvAcrossSteps(t *testing.T) {
	t.Parallel()
	g := newGitHub(t, &cikit.JobSpec{Env: map[string]string{"A": "job", "B": "job"}}, pushContext())
	step1 := &cikit.Step{Env: map[string]string{"B": "step ${{ env.B }}", "C": "${{ env.A }}-c"}}
	env, err := g.StepEnv(step1)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"A": "job", "B": "step job", "C": "job-c"}, env)
	require.Equal(t, "step job", expand(t, g, "${{ env.B }}"), "the step's run reads its own env")

	require.NoError(t, g.AddEnv([]runtime.KV{{Name: "A", Value: "file"}, {Name: "D", Value: "d"}}))
	require.Equal(t, "file d job", expand(t, g, "${{ env.A }} ${{ env.D }} ${{ env.B }}"), "GITHUB_ENV overrides the job's env; the step's env is over")
	env, err = g.StepEnv(&cikit.Step{Env: map[string]string{"D": "own"}})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"A": "file", "B": "job", "D": "own"}, env)
	require.Equal(t, map[string]string{"A": "file", "D": "d"}, g.FileEnv())

	_, err = g.StepEnv(&cikit.Step{Env: map[string]string{"X": "${{ fromJSON('{') }}"}})
	require.ErrorContains(t, err, "env X:")

	// As on GitHub, NODE_OPTIONS cannot come from GITHUB_ENV; the rest of
	// the file still applies.
	err = g.AddEnv([]runtime.KV{{Name: "node_options", Value: "--require=/tmp/x.js"}, {Name: "E", Value: "e"}})
	require.ErrorContains(t, err, "node_options cannot be set through GITHUB_ENV")
	require.Equal(t, map[string]string{"A": "file", "D": "d", "E": "e"}, g.FileEnv())
}

func TestGitHubStepRuns(t *testing.T) {
	t.Parallel()
	g := newGitHub(t, &cikit.JobSpec{Env: map[string]string{"DEPLOY": "yes"}}, pushContext())
	ok := expr.Status{}
	failed := expr.Status{Failed: true}
	cancelled := expr.Status{Cancelled: true}
	cond := func(s string) *cikit.Step {
		return &cikit.Step{If: &cikit.Condition{Lang: cikit.LangGitHub, Expr: s}}
	}
	for _, tt := range []struct {
		step *cikit.Step
		st   expr.Status
		want bool
	}{
		{&cikit.Step{}, ok, true},
		{&cikit.Step{}, failed, false},
		{&cikit.Step{}, cancelled, false},
		{cond("success()"), failed, false},
		{cond("failure()"), failed, true},
		{cond("failure()"), ok, false},
		{cond("always()"), cancelled, true},
		{cond("cancelled()"), cancelled, true},
		{cond("cancelled()"), ok, false},
		{cond("env.DEPLOY == 'yes'"), ok, true},
		{cond("env.DEPLOY == 'yes'"), failed, false},
		{cond("${{ github.ref == 'refs/heads/feature/Login-Page' }}"), ok, true},
		{cond("  ${{ github.event_name == 'pull_request' }} "), ok, false},
		{cond("failure() && job.status == 'failure'"), failed, true},
		{cond("${{ always() }} text"), failed, false},
		{cond(""), failed, false},
	} {
		got, err := g.StepRuns(tt.step, tt.st)
		require.NoError(t, err)
		expr := "<none>"
		if tt.step.If != nil {
			expr = tt.step.If.Expr
		}
		require.Equal(t, tt.want, got, "%s with %+v", expr, tt.st)
	}
	_, err := g.StepRuns(cond("github.sha =="), ok)
	require.ErrorContains(t, err, "if:")
	_, err = g.StepRuns(&cikit.Step{If: &cikit.Condition{Lang: cikit.LangGitLab, Expr: "$X"}}, ok)
	require.ErrorContains(t, err, "gitlab condition")
}

func TestGitHubSteps(t *testing.T) {
	t.Parallel()
	g := newGitHub(t, &cikit.JobSpec{ID: "build", Outputs: map[string]string{
		"version": "${{ steps.v.outputs.version }}",
		"tested":  "${{ steps.t.conclusion }}/${{ steps.t.outcome }}",
		"none":    "${{ steps.missing.outputs.x }}",
	}}, pushContext())
	g.SetStep("v", runtime.Success, runtime.Success, map[string]string{"version": "2.0"})
	g.SetStep("t", runtime.Failure, runtime.Success, nil)
	g.SetStep("", runtime.Success, runtime.Success, map[string]string{"x": "y"})
	require.Equal(t, "2.0", expand(t, g, "${{ steps.v.outputs.version }}"))
	out, err := g.JobOutputs()
	require.NoError(t, err)
	require.Equal(t, map[string]string{"version": "2.0", "tested": "success/failure", "none": ""}, out)
}

func TestGitHubJobOutputLimits(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", cikit.MaxOutputValueBytes)
	g := newGitHub(t, &cikit.JobSpec{ID: "build", Outputs: map[string]string{"v": "${{ steps.s.outputs.v }}"}}, nil)
	g.SetStep("s", runtime.Success, runtime.Success, map[string]string{"v": big})
	_, err := g.JobOutputs()
	require.ErrorContains(t, err, `output "v" of job "build" is 131073 bytes, more than the 128 KiB an output may hold`)

	outputs := map[string]string{}
	for i := range 9 {
		outputs[string(rune('a'+i))] = "${{ steps.s.outputs.v }}"
	}
	g = newGitHub(t, &cikit.JobSpec{ID: "build", Outputs: outputs}, nil)
	g.SetStep("s", runtime.Success, runtime.Success, map[string]string{"v": big[:cikit.MaxOutputValueBytes-1]})
	_, err = g.JobOutputs()
	require.ErrorContains(t, err, `the outputs of job "build" are more than the 1 MiB the outputs of a job may hold`)
	require.ErrorContains(t, err, `up to output "i"`)
}

func TestGitHubHashFiles(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	write := func(name, data string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(ws, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(ws, name), []byte(data), 0o644))
	}
	write("go.sum", "sum")
	write("a/go.sum", "a")
	write("a/b/go.sum", "b")
	write("vendor/go.sum", "v")
	g, err := runtime.NewGitHub(runtime.Params{Spec: &cikit.JobSpec{}, Workspace: ws})
	require.NoError(t, err)

	want := func(contents ...string) string {
		all := sha256.New()
		for _, c := range contents {
			h := sha256.Sum256([]byte(c))
			all.Write(h[:])
		}
		return hex.EncodeToString(all.Sum(nil))
	}
	require.Equal(t, want("b", "a", "sum", "v"), expand(t, g, "${{ hashFiles('**/go.sum') }}"), "walk order: a/b/go.sum before a/go.sum")
	require.Equal(t, want("b", "a", "sum"), expand(t, g, "${{ hashFiles('**/go.sum', '!vendor/**') }}"))
	require.Equal(t, want("sum"), expand(t, g, "${{ hashFiles('go.sum') }}"))
	require.Equal(t, want("sum"), expand(t, g, "${{ hashFiles('"+ws+"/go.sum') }}"))
	require.Equal(t, "", expand(t, g, "${{ hashFiles('*.lock') }}"))
	_, err = g.Expand("${{ hashFiles('/etc/passwd') }}")
	require.ErrorContains(t, err, "outside the workspace")
	_, err = g.Expand("${{ hashFiles('[') }}")
	require.ErrorContains(t, err, "bad pattern")
}

func TestGitHubMatrixNeeds(t *testing.T) {
	t.Parallel()
	jc := pushContext()
	jc.Needs = map[string]cikit.NeedResult{
		"test (linux, 20)": {Result: cikit.JobSucceeded, Outputs: map[string]string{"os": "linux", "a": "1"}},
		"test (mac, 20)":   {Result: cikit.JobFailed, Outputs: map[string]string{"os": "mac"}},
		"lint (x)":         {Result: cikit.JobSucceeded},
		"lint (y)":         {Result: cikit.JobSkipped},
		"doc (a)":          {Result: cikit.JobCancelled},
		"doc (b)":          {Result: cikit.JobSucceeded},
		"pkg (a)":          {Result: cikit.JobSkipped},
	}
	g := newGitHub(t, &cikit.JobSpec{}, jc)
	for src, want := range map[string]string{
		"${{ needs.test.result }}":                                 "failure",
		"${{ needs.test.outputs.os }}/${{ needs.test.outputs.a }}": "mac/1",
		"${{ needs.lint.result }}":                                 "success",
		"${{ needs.doc.result }}":                                  "cancelled",
		"${{ needs.pkg.result }}":                                  "skipped",
		"${{ needs['test (linux, 20)'].outputs.os }}":              "linux",
	} {
		require.Equal(t, want, expand(t, g, src), src)
	}
}

func TestGitHubHashFilesPatterns(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	for _, name := range []string{"src/a.go", "src/deep/b.go", "other/c.go"} {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(ws, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(ws, name), []byte(name), 0o644))
	}
	g, err := runtime.NewGitHub(runtime.Params{Spec: &cikit.JobSpec{}, Workspace: ws})
	require.NoError(t, err)
	one := expand(t, g, "${{ hashFiles('src/*.go') }}")
	require.NotEmpty(t, one)
	require.NotEqual(t, one, expand(t, g, "${{ hashFiles('src/**/*.go') }}"))
	require.Equal(t, expand(t, g, "${{ hashFiles('src/**') }}"), expand(t, g, "${{ hashFiles('src/**/*.go') }}"))
	require.Equal(t, expand(t, g, "${{ hashFiles('src/deep/b.go') }}"), expand(t, g, "${{ hashFiles('*/deep/*.go') }}"))
}

// FuzzGitHubExpand evaluates arbitrary templates against a job whose
// event payload and matrix values are arbitrary too.
//
// Invariant: NewGitHub, Expand and StepRuns never panic; a payload that is
// not a JSON object reads as an empty event; a template without "${{"
// expands to itself.
func FuzzGitHubExpand(f *testing.F) {
	f.Add(`{"a":{"b":[1,2]}}`, `${{ github.event.a.b[1] }} ${{ toJSON(matrix) }}`, `{"x":1}`)
	f.Add(`[`, `${{ fromJSON(github.event) }}`, `[1`)
	f.Add(`null`, `plain`, `null`)
	f.Fuzz(func(t *testing.T, payload, tmpl, matrix string) {
		spec := &cikit.JobSpec{Format: "github", MatrixJSON: map[string]json.RawMessage{"m": json.RawMessage(matrix)}}
		jc := &cikit.JobContext{RunContext: cikit.RunContext{Payload: json.RawMessage(payload)}}
		g, err := runtime.NewGitHub(runtime.Params{Spec: spec, Context: jc})
		if err != nil {
			if json.Valid([]byte(matrix)) {
				t.Fatalf("valid matrix JSON refused: %v", err)
			}
			return
		}
		got, err := g.Expand(tmpl)
		if !strings.Contains(tmpl, "${{") && (err != nil || got != tmpl) {
			t.Fatalf("%q expanded to %q, %v", tmpl, got, err)
		}
		_, _ = g.StepRuns(&cikit.Step{If: &cikit.Condition{Lang: cikit.LangGitHub, Expr: tmpl}}, expr.Status{})
		var obj map[string]any
		if json.Unmarshal([]byte(payload), &obj) != nil || obj == nil {
			if ev, err := g.Expand("${{ toJSON(github.event) }}"); err != nil || ev != "{}" {
				t.Fatalf("payload %q reads as %q, %v", payload, ev, err)
			}
		}
	})
}

func TestGitHubMatrixScalarsFromJSON(t *testing.T) {
	t.Parallel()
	spec := &cikit.JobSpec{
		Matrix:     map[string]string{"experimental": "false", "node": "20", "os": "linux"},
		MatrixJSON: map[string]json.RawMessage{"experimental": json.RawMessage(`false`), "node": json.RawMessage(`20`)},
	}
	g := newGitHub(t, spec, nil)
	require.Equal(t, "true", expand(t, g, "${{ !matrix.experimental }}"), "a boolean in MatrixJSON stays a boolean")
	require.Equal(t, "true", expand(t, g, "${{ matrix.node > 18 }}"))
	require.Equal(t, "linux", expand(t, g, "${{ matrix.os }}"))

	text := newGitHub(t, &cikit.JobSpec{Matrix: map[string]string{"experimental": "false"}}, nil)
	require.Equal(t, "false", expand(t, text, "${{ !matrix.experimental }}"), "without MatrixJSON the value is the string \"false\", which is truthy")
}
