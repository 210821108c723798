package compiler_test

import (
	"fmt"

	"github.com/cikit/cikit/compiler"
)

// A GitHub workflow: its matrix expands into one job per variant, named
// as GitHub names them, and a need of the matrix job is a need of every
// variant.
func Example_gitHub() {
	src := []byte(`
on:
  push:
    branches: [main]
jobs:
  test:
    strategy:
      matrix:
        os: [ubuntu-latest, windows-latest]
        go: ['1.25', '1.26']
        exclude:
          - {os: windows-latest, go: '1.25'}
    runs-on: ${{ matrix.os }}
    steps:
      - uses: actions/checkout@v4
      - run: go test ./...
  release:
    needs: test
    if: github.ref == 'refs/heads/main'
    runs-on: ubuntu-latest
    steps:
      - run: make release
`)
	plan, diags, err := compiler.CompileBytes(".github/workflows/ci.yml", src, compiler.Options{})
	if err != nil {
		panic(err)
	}
	for _, d := range diags {
		fmt.Println(d)
	}
	for _, j := range plan.Jobs {
		fmt.Printf("%s on %v needs %v\n", j.ID, j.RunsOn, j.Needs)
	}
	fmt.Println("release if", plan.Job("release").If.Expr)
	ok, why := plan.Triggered(&compiler.Event{Name: "push", Ref: "refs/heads/dev"})
	fmt.Println(ok, why)
	// Output:
	// test (ubuntu-latest, 1.25) on [ubuntu-latest] needs []
	// test (ubuntu-latest, 1.26) on [ubuntu-latest] needs []
	// test (windows-latest, 1.26) on [windows-latest] needs []
	// release on [ubuntu-latest] needs [test (ubuntu-latest, 1.25) test (ubuntu-latest, 1.26) test (windows-latest, 1.26)]
	// release if github.ref == 'refs/heads/main'
	// false push to branch "dev": not matched by branches [main]
}

// Diagnostics point at the character where a mistake is, inside
// expressions too, and suggest what was probably meant.
func Example_gitHubDiagnostics() {
	src := []byte(`
on: push
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - run: make
  test:
    needs: biuld
    runs-on: ubuntu-latest
    steps:
      - run: echo ${{ github.ref == "main" }}
`)
	_, diags, _ := compiler.CompileBytes(".github/workflows/ci.yml", src, compiler.Options{})
	for _, d := range diags {
		fmt.Println(d)
	}
	// Output:
	// .github/workflows/ci.yml:9:12: job "test" needs unknown job "biuld"; did you mean "build"? [needs]
	// .github/workflows/ci.yml:12:37: invalid expression: unexpected '"': strings in expressions are in single quotes, as in 'text' [expression]
}
