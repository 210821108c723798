package expr_test

import (
	"testing"

	"github.com/cikit/cikit/compiler/expr"
)

// BenchmarkGitHubIf parses and evaluates a typical job condition.
func BenchmarkGitHubIf(b *testing.B) {
	const src = "github.event_name == 'push' && startsWith(github.ref, 'refs/tags/')"
	env := testEnv()
	b.ReportAllocs()
	for b.Loop() {
		n, err := expr.ParseGitHub(src)
		if err != nil {
			b.Fatal(err)
		}
		v, err := expr.EvalGitHub(n, env)
		if err != nil || v != true {
			b.Fatalf("%v %v", v, err)
		}
	}
}

// BenchmarkGitHubIfEval evaluates the condition parsed once, as a
// scheduler holding compiled conditions does.
func BenchmarkGitHubIfEval(b *testing.B) {
	n, err := expr.ParseGitHub("github.event_name == 'push' && startsWith(github.ref, 'refs/tags/')")
	if err != nil {
		b.Fatal(err)
	}
	env := testEnv()
	b.ReportAllocs()
	for b.Loop() {
		if v, err := expr.EvalGitHub(n, env); err != nil || v != true {
			b.Fatalf("%v %v", v, err)
		}
	}
}

// BenchmarkGitHubTemplate splits, parses and evaluates a job name.
func BenchmarkGitHubTemplate(b *testing.B) {
	const s = "build-${{ matrix.os }}-node${{ matrix.node }}-${{ github.run_number }}"
	env := testEnv()
	b.ReportAllocs()
	for b.Loop() {
		v, err := expr.EvalTemplate(s, env)
		if err != nil || v != "build-ubuntu-latest-node20-42" {
			b.Fatalf("%v %v", v, err)
		}
	}
}

// BenchmarkGitLabIf parses and evaluates a typical rules:if.
func BenchmarkGitLabIf(b *testing.B) {
	const src = `$CI_PIPELINE_SOURCE == "merge_request_event" || $CI_COMMIT_BRANCH =~ /^release-\d+/`
	lookup := vars(map[string]string{"CI_PIPELINE_SOURCE": "push", "CI_COMMIT_BRANCH": "release-12"})
	b.ReportAllocs()
	for b.Loop() {
		n, err := expr.ParseGitLab(src)
		if err != nil {
			b.Fatal(err)
		}
		if v, err := expr.EvalGitLab(n, lookup); err != nil || v != expr.True {
			b.Fatalf("%v %v", v, err)
		}
	}
}
