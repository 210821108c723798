package runtime_test

import (
	"fmt"
	"os"
	"strings"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/compiler/expr"
	"github.com/cikit/cikit/fleet/runtime"
)

// A step's output goes through a CommandWriter: masks hold from the
// ::add-mask:: on, annotations are recorded, groups stay as markers.
func ExampleCommandWriter() {
	w := runtime.NewCommandWriter(os.Stdout, runtime.CommandOptions{})
	w.BeginStep("test")
	fmt.Fprint(w, "::group::Run tests\n::add-mask::hunter2\nlogging in with hunter2\n::error file=main_test.go,line=12::expected 3, got 4\n::endgroup::\n")
	if err := w.Flush(); err != nil {
		panic(err)
	}
	anns, _ := w.Annotations()
	fmt.Printf("%s %s:%d %q\n", anns[0].Level, anns[0].File, anns[0].Line, anns[0].Message)
	// Output:
	// ##[group]Run tests
	// logging in with ***
	// ##[error]expected 3, got 4
	// ##[endgroup]
	// error main_test.go:12 "expected 3, got 4"
}

// The contexts of a job: a step writes GITHUB_ENV and GITHUB_OUTPUT, and
// the later steps and the job's outputs read them.
func ExampleGitHub() {
	spec := &cikit.JobSpec{ID: "build", Format: "github",
		Env:     map[string]string{"TARGET": "linux-${{ github.ref_name }}"},
		Outputs: map[string]string{"version": "${{ steps.v.outputs.version }}"}}
	jc := &cikit.JobContext{RunContext: cikit.RunContext{Repository: "acme/api", RefName: "main", SHA: "0123abc"}, RunID: "7", Attempt: 1}
	g, err := runtime.NewGitHub(runtime.Params{Spec: spec, Context: jc, Workspace: "/ws"})
	if err != nil {
		panic(err)
	}
	step := &cikit.Step{ID: "v", Run: "echo version=1.4.${{ github.run_id }} >> $GITHUB_OUTPUT"}
	runs, _ := g.StepRuns(step, expr.Status{})
	script, _ := g.Expand(step.Run)
	fmt.Println(runs, script)

	// The step ran and wrote its files.
	env, _ := runtime.ParseEnvFile(strings.NewReader("CGO_ENABLED=0\n"), runtime.DefaultEnvFileBytes)
	out, _ := runtime.ParseEnvFile(strings.NewReader("version=1.4.7\n"), runtime.DefaultEnvFileBytes)
	_ = g.AddEnv(env)
	g.SetStep("v", runtime.Success, runtime.Success, map[string]string{out[0].Name: out[0].Value})

	next, _ := g.StepEnv(&cikit.Step{})
	fmt.Println(next["TARGET"], next["CGO_ENABLED"])
	outputs, _ := g.JobOutputs()
	fmt.Println(outputs["version"])
	// Output:
	// true echo version=1.4.7 >> $GITHUB_OUTPUT
	// linux-main 0
	// 1.4.7
}
