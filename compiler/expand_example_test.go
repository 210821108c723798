package compiler_test

import (
	"context"
	"fmt"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/compiler"
	"github.com/cikit/cikit/dag"
)

// A matrix read from the outputs of a job it needs is computed at run
// time: the plan holds one placeholder job, and once setup is done, the
// scheduler's Expander (ExpandJob) turns it into its variants.
func ExampleExpandJob() {
	src := []byte(`
on: push
jobs:
  setup:
    runs-on: ubuntu-latest
    outputs:
      matrix: ${{ steps.m.outputs.matrix }}
    steps:
      - id: m
        run: echo 'matrix={"go":["1.25","1.26"]}' >> "$GITHUB_OUTPUT"
  test:
    needs: setup
    strategy:
      matrix: ${{ fromJSON(needs.setup.outputs.matrix) }}
    runs-on: ubuntu-latest
    steps:
      - run: go${{ matrix.go }} test ./...
`)
	plan, _, err := compiler.CompileBytes(".github/workflows/ci.yml", src, compiler.Options{})
	if err != nil {
		panic(err)
	}
	test := plan.Job("test")
	fmt.Printf("%s: placeholder %t, matrix %s\n", test.ID, test.Expand != nil, test.Matrix["*"])

	variants, err := compiler.ExpandJob(context.Background(), &dag.ExpandRequest{
		Job: test,
		Needs: map[string]cikit.NeedResult{"setup": {Result: cikit.JobSucceeded,
			Outputs: map[string]string{"matrix": `{"go":["1.25","1.26"]}`}}},
	})
	if err != nil {
		panic(err)
	}
	for _, v := range variants {
		fmt.Println(v.ID, v.Needs, v.Steps[0].Run)
	}

	_, err = compiler.ExpandJob(context.Background(), &dag.ExpandRequest{
		Job:   test,
		Needs: map[string]cikit.NeedResult{"setup": {Result: cikit.JobSucceeded, Outputs: map[string]string{"matrix": `["1.26"]`}}},
	})
	fmt.Println(err)
	// Output:
	// test: placeholder true, matrix ${{ fromJSON(needs.setup.outputs.matrix) }}
	// test (1.25) [setup] go${{ matrix.go }} test ./...
	// test (1.26) [setup] go${{ matrix.go }} test ./...
	// cannot expand the matrix of job "test": .github/workflows/ci.yml:14:15: the matrix of job "test" must evaluate to an object of axes, got ["1.26"]
}
