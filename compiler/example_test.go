package compiler_test

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/cikit/cikit/compiler"
)

func Example() {
	src := []byte(`
stages: [build, test]
jobs:
  build:
    steps: [go build ./...]
  unit:
    stage: test
    steps: [go test ./...]
  lint:
    stage: test
    needs: []          # no need to wait for the build
    steps: [go vet ./...]
`)
	plan, diags, err := compiler.CompileBytes(".cikit.yml", src, compiler.Options{})
	if err != nil {
		panic(err)
	}
	for _, d := range diags {
		fmt.Println(d)
	}
	for _, j := range plan.Jobs {
		fmt.Printf("%s (stage %s) needs %v\n", j.ID, j.Stage, j.Needs)
	}
	// Output:
	// build (stage build) needs []
	// unit (stage test) needs [build]
	// lint (stage test) needs []
}

func Example_diagnostics() {
	src := []byte(`
jobs:
  build:
    steps: [make]
    allowed_failure: true
  test:
    needs: [biuld]
    steps: [make test]
`)
	plan, diags, err := compiler.CompileBytes("ci/.cikit.yml", src, compiler.Options{})
	if err != nil {
		panic(err)
	}
	fmt.Println("plan:", plan != nil)
	for _, d := range diags {
		fmt.Println(d)
	}
	// Output:
	// plan: false
	// ci/.cikit.yml:5:5: unknown key "allowed_failure" in job "build"; did you mean "allow_failure"? [key]
	// ci/.cikit.yml:7:13: job "test" needs unknown job "biuld"; did you mean "build"? [needs]
}

func ExampleCompile() {
	// A checkout on disk; in the platform, the FileSource reads the
	// repository at the commit being built.
	src := compiler.DirSource("testdata/native")
	plan, diags, err := compiler.Compile(context.Background(), src, "full.yml", compiler.Options{Format: compiler.FormatNative})
	if err != nil {
		panic(err)
	}
	// Warnings come with the plan: what the pipeline asks for that the
	// platform does not do yet.
	for _, d := range diags {
		fmt.Println(d)
	}
	g := plan.Graph()
	for _, i := range g.Order() {
		j := plan.Jobs[i]
		fmt.Printf("%s: %d steps, needs %v\n", j.DisplayName(), len(j.Steps), j.Needs)
	}
	// Output:
	// Build it: 2 steps, needs []
	// unit: 1 steps, needs [build]
	// lint: 1 steps, needs [build]
	// integration: 1 steps, needs [unit lint]
}

// A .gitlab-ci.yml compiles for the event that triggers the pipeline:
// rules and only/except decide which jobs it has. Without an event (a
// lint) every job that could run is kept.
func Example_gitLab() {
	src := []byte(`
stages: [build, deploy]
build:
  stage: build
  script: make
deploy:
  stage: deploy
  script: make deploy
  rules:
    - if: $CI_COMMIT_TAG
      when: manual
    - if: $CI_COMMIT_BRANCH == $CI_DEFAULT_BRANCH
`)
	for _, ev := range []*compiler.Event{
		nil,
		{Name: "push", Branch: "main", DefaultBranch: "main"},
		{Name: "push", Branch: "feature", DefaultBranch: "main"},
		{Name: "tag", Tag: "v1.0.0", DefaultBranch: "main"},
	} {
		plan, _, err := compiler.CompileBytes(".gitlab-ci.yml", src, compiler.Options{Event: ev})
		if err != nil {
			panic(err)
		}
		var jobs []string
		for _, j := range plan.Jobs {
			jobs = append(jobs, fmt.Sprintf("%s(%s)", j.ID, cmp.Or(string(j.When), "on_success")))
		}
		fmt.Println(strings.Join(jobs, " "))
	}
	// Output:
	// build(on_success) deploy(manual)
	// build(on_success) deploy(on_success)
	// build(on_success)
	// build(on_success) deploy(manual)
}
