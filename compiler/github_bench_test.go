package compiler_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cikit/cikit/compiler"
)

// githubMatrixWorkflow is a workflow shaped like a real test workflow:
// triggers with filters, env at two levels, a build job, a test job whose
// matrix of os × go expands to oses × gos variants, with a container, a
// service and steps using matrix values, and a report job that needs
// every variant. extra adds an exclude and two includes, one extending
// some variants and one adding the excluded variant back: work that does
// not change the count.
func githubMatrixWorkflow(oses, gos int, extra bool) []byte {
	var s strings.Builder
	s.WriteString(`name: CI
on:
  push:
    branches: [main, 'releases/**']
    paths-ignore: ['**.md']
  pull_request:
    types: [opened, synchronize]
env:
  GOFLAGS: -mod=mod
concurrency:
  group: ci-${{ github.ref }}
  cancel-in-progress: true
permissions:
  contents: read
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: go build ./...
  test:
    needs: build
    name: Test ${{ matrix.os }} go${{ matrix.go }}
    runs-on: ${{ matrix.os }}
    timeout-minutes: 30
    container: golang:${{ matrix.go }}
    services:
      redis:
        image: redis:7
        ports: [6379]
    strategy:
      fail-fast: false
      matrix:
        os: [`)
	for i := range oses {
		if i > 0 {
			s.WriteString(", ")
		}
		fmt.Fprintf(&s, "os-%d", i)
	}
	s.WriteString("]\n        go: [")
	for i := range gos {
		if i > 0 {
			s.WriteString(", ")
		}
		fmt.Fprintf(&s, "'1.%d'", 20+i)
	}
	s.WriteString("]\n")
	if extra {
		s.WriteString(`        include:
          - os: os-1
            coverage: true
          - os: os-0
            go: '1.20'
            coverage: true
        exclude:
          - os: os-0
            go: '1.20'
`)
	}
	s.WriteString(`    env:
      GOOS: linux
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-go@v5
        with:
          go-version: ${{ matrix.go }}
      - run: go test -race ./...
        env:
          COVER: ${{ matrix.os }}-cover
      - if: failure()
        run: echo failed
  report:
    needs: [test]
    if: always()
    runs-on: ubuntu-latest
    steps:
      - run: make report
`)
	return []byte(s.String())
}

func benchmarkGitHubMatrix(b *testing.B, oses, gos int, extra bool) {
	data := githubMatrixWorkflow(oses, gos, extra)
	jobs := oses*gos + 2
	const path = ".github/workflows/ci.yml"
	plan, diags, err := compiler.CompileBytes(path, data, compiler.Options{})
	if err != nil || compiler.HasErrors(diags) || plan == nil || len(plan.Jobs) != jobs {
		b.Fatalf("bad benchmark workflow: %v %v", err, diags)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		_, _, _ = compiler.CompileBytes(path, data, compiler.Options{})
	}
}

// BenchmarkCompileGitHubMatrix50 compiles a workflow whose matrix expands
// to 50 jobs (5 × 10, with an include and an exclude), and two more jobs.
func BenchmarkCompileGitHubMatrix50(b *testing.B) { benchmarkGitHubMatrix(b, 5, 10, true) }

// BenchmarkCompileGitHubMatrix256 compiles a matrix at the default limit:
// 16 × 16 jobs, and two more.
func BenchmarkCompileGitHubMatrix256(b *testing.B) { benchmarkGitHubMatrix(b, 16, 16, false) }
