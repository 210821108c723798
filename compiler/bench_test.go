package compiler_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cikit/cikit/compiler"
	"github.com/cikit/cikit/internal/testenv"
)

// pipeline50 is a 50-job pipeline shaped like a real monorepo's: five
// stages of ten jobs, env at both levels, string and mapping steps, and
// some explicit needs across the barrier.
func pipeline50() []byte {
	var b strings.Builder
	b.WriteString("stages: [s0, s1, s2, s3, s4]\nenv: {GOFLAGS: -mod=mod, CI: true, N: 3}\njobs:\n")
	for s := range 5 {
		for j := range 10 {
			fmt.Fprintf(&b, "  job-%d-%d:\n    stage: s%d\n    image: golang:1.26\n", s, j, s)
			fmt.Fprintf(&b, "    env: {PKG: ./pkg%d/..., SHARD: %d}\n", j, j)
			if s > 1 && j%3 == 0 {
				fmt.Fprintf(&b, "    needs: [job-%d-%d, job-0-%d]\n", s-1, j, j)
			}
			b.WriteString("    timeout: 10m\n    steps:\n      - go mod download\n")
			b.WriteString("      - name: test\n        run: |\n          go test $PKG\n          go vet $PKG\n        env: {CGO_ENABLED: 0}\n")
		}
	}
	return []byte(b.String())
}

func BenchmarkCompileNative50(b *testing.B) {
	data := pipeline50()
	plan, diags, err := compiler.CompileBytes(".cikit.yml", data, compiler.Options{})
	if err != nil || compiler.HasErrors(diags) || len(plan.Jobs) != 50 {
		b.Fatalf("bad benchmark pipeline: %v %v", err, diags)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		_, _, _ = compiler.CompileBytes(".cikit.yml", data, compiler.Options{})
	}
}

// pipelineGitLab50 is a 50-job .gitlab-ci.yml shaped like the real ones
// of testdata: five stages, hidden templates reached through extends and
// anchors, default keys, rules on variables, a parallel job and needs
// across the stage barrier.
func pipelineGitLab50() []byte {
	var b strings.Builder
	b.WriteString(`stages: [prepare, build, test, package, deploy]
variables: {GOFLAGS: -mod=mod, CI_DEBUG: "false"}
default:
  image: golang:1.26
  tags: [docker]
  retry: {max: 1, when: [runner_system_failure]}
.build: &build
  before_script: [go version, go env]
  script:
    - go build ./...
    - |
      go vet ./...
      go test -short ./...
  cache: {key: {files: [go.sum]}, paths: [.go/]}
  artifacts: {paths: [bin/], expire_in: 1 week}
.rules:
  rules:
    - if: $CI_PIPELINE_SOURCE == "merge_request_event"
    - if: $CI_COMMIT_BRANCH == $CI_DEFAULT_BRANCH
    - if: $CI_COMMIT_TAG
      when: manual
`)
	stages := []string{"prepare", "build", "test", "package", "deploy"}
	for s, stage := range stages {
		for j := range 10 {
			fmt.Fprintf(&b, "%s-%d:\n  stage: %s\n", stage, j, stage)
			switch {
			case j%3 == 0:
				b.WriteString("  <<: *build\n")
			case j%3 == 1:
				b.WriteString("  extends: [.build, .rules]\n")
			default:
				fmt.Fprintf(&b, "  script: [make %s-%d]\n  rules: !reference [.rules, rules]\n", stage, j)
			}
			fmt.Fprintf(&b, "  variables: {SHARD: \"%d\"}\n", j)
			if s > 1 && j == 9 {
				fmt.Fprintf(&b, "  needs: [%s-0, {job: %s-1, artifacts: false}]\n", stages[s-1], stages[s-1])
			}
			if s == 2 && j == 8 {
				b.WriteString("  parallel: 1\n")
			}
		}
	}
	return []byte(b.String())
}

func BenchmarkCompileGitLab50(b *testing.B) {
	data := pipelineGitLab50()
	event := &compiler.Event{Name: "push", Branch: "main", DefaultBranch: "main"}
	for _, bc := range []struct {
		name  string
		event *compiler.Event
	}{{"lint", nil}, {"push", event}} {
		b.Run(bc.name, func(b *testing.B) {
			opts := compiler.Options{Event: bc.event}
			plan, diags, err := compiler.CompileBytes(".gitlab-ci.yml", data, opts)
			if err != nil || compiler.HasErrors(diags) || len(plan.Jobs) != 50 {
				b.Fatalf("bad benchmark pipeline: %v %v", err, diags)
			}
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				_, _, _ = compiler.CompileBytes(".gitlab-ci.yml", data, opts)
			}
		})
	}
}

// matrixPipeline is a pipeline whose matrix job expands to axes[0] ×
// axes[1] jobs, between a build job and a report job that needs them all.
func matrixPipeline(a, b int) []byte {
	var s strings.Builder
	s.WriteString("env: {GOFLAGS: -mod=mod}\njobs:\n  build:\n    image: golang:1.26\n    steps: [go build ./...]\n")
	s.WriteString("  test:\n    needs: [build]\n    image: 'golang:{{ matrix.go }}'\n    runs_on: ['{{ matrix.os }}']\n    matrix:\n      os: [")
	for i := range a {
		if i > 0 {
			s.WriteString(", ")
		}
		fmt.Fprintf(&s, "os%d", i)
	}
	s.WriteString("]\n      go: [")
	for i := range b {
		if i > 0 {
			s.WriteString(", ")
		}
		fmt.Fprintf(&s, "'1.%d'", 20+i)
	}
	s.WriteString("]\n    cache: {key: 'mod-{{ matrix.os }}-{{ hash(\"go.sum\") }}', paths: [/go/pkg/mod]}\n")
	s.WriteString("    steps:\n      - go test -race ./...\n  report:\n    needs: [test]\n    steps: [make report]\n")
	return []byte(s.String())
}

func benchmarkMatrix(b *testing.B, x, y, jobs int) {
	data := matrixPipeline(x, y)
	plan, diags, err := compiler.CompileBytes(".cikit.yml", data, compiler.Options{})
	if err != nil || len(diags) > 0 || len(plan.Jobs) != jobs {
		b.Fatalf("bad benchmark pipeline: %v %v %d jobs", err, diags, len(plan.Jobs))
	}
	b.ReportAllocs()
	for b.Loop() {
		_, _, _ = compiler.CompileBytes(".cikit.yml", data, compiler.Options{})
	}
}

// BenchmarkCompileNativeMatrix50 compiles a pipeline of 50 jobs, 48 of
// them a 6 × 8 matrix.
func BenchmarkCompileNativeMatrix50(b *testing.B) { benchmarkMatrix(b, 6, 8, 50) }

// BenchmarkCompileNativeMatrix256 compiles a matrix at the default limit:
// 16 × 16 variants plus two jobs.
func BenchmarkCompileNativeMatrix256(b *testing.B) { benchmarkMatrix(b, 16, 16, 258) }

// BenchmarkCorpus compiles every real file of the shared collection — the
// GitHub workflows (with the workflows they call) and the GitLab files
// (with their local includes) — once per iteration, and reports files and
// jobs compiled per second.
func BenchmarkCorpus(b *testing.B) {
	type input struct {
		src  compiler.FileSource
		path string
		opts compiler.Options
	}
	var inputs []input
	gha := testenv.SharedTestdata(b, "gha")
	for _, ext := range []string{"*.yml", "*.yaml"} {
		files, _ := filepath.Glob(filepath.Join(gha, ext))
		for _, f := range files {
			parts := strings.SplitN(filepath.Base(f), "__", 3)
			inputs = append(inputs, input{realWorkflows{dir: gha, repo: parts[0] + "__" + parts[1]}, ".github/workflows/" + parts[2], compiler.Options{}})
		}
	}
	gitlab := testenv.SharedTestdata(b, "gitlab")
	files, _ := filepath.Glob(filepath.Join(gitlab, "*.yml"))
	for _, f := range files {
		inputs = append(inputs, input{compiler.DirSource(gitlab), filepath.Base(f), compiler.Options{Format: compiler.FormatGitLab}})
	}
	ctx := context.Background()
	jobs := 0
	for _, in := range inputs {
		plan, _, err := compiler.Compile(ctx, in.src, in.path, in.opts)
		if err != nil {
			b.Fatal(err)
		}
		if plan != nil {
			jobs += len(plan.Jobs)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, in := range inputs {
			_, _, _ = compiler.Compile(ctx, in.src, in.path, in.opts)
		}
	}
	perOp := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(len(inputs))/perOp, "files/s")
	b.ReportMetric(float64(jobs)/perOp, "jobs/s")
}
