package runtime_test

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet/runtime"
)

// BenchmarkCommandWriter measures the cost every byte of a job's output
// pays: typical build output (lines of 80 bytes, one command in 50) through
// a writer with 0 and 20 masks.
func BenchmarkCommandWriter(b *testing.B) {
	var out strings.Builder
	for i := range 1000 {
		if i%50 == 0 {
			fmt.Fprintf(&out, "::group::step %d\n", i)
			continue
		}
		fmt.Fprintf(&out, "ok  \tgithub.com/acme/api/internal/pkg%03d\t0.%03ds\tcoverage: 81.2%% of statements....\n", i, i)
	}
	data := []byte(out.String())
	for _, masks := range []int{0, 20} {
		b.Run(fmt.Sprintf("masks=%d", masks), func(b *testing.B) {
			w := runtime.NewCommandWriter(io.Discard, runtime.CommandOptions{})
			for i := range masks {
				w.AddMask(fmt.Sprintf("secret-value-%02d", i))
			}
			w.BeginStep("s")
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				for p := data; len(p) > 0; {
					n := min(4096, len(p)) // the pipe's reads
					if _, err := w.Write(p[:n]); err != nil {
						b.Fatal(err)
					}
					p = p[n:]
				}
			}
		})
	}
}

// BenchmarkParseEnvFile reads a GITHUB_OUTPUT of 100 variables, one in ten
// multi-line.
func BenchmarkParseEnvFile(b *testing.B) {
	var f strings.Builder
	for i := range 100 {
		if i%10 == 0 {
			fmt.Fprintf(&f, "MULTI_%d<<EOF\nline one\nline two\nline three\nEOF\n", i)
			continue
		}
		fmt.Fprintf(&f, "VAR_%d=value number %d\n", i, i)
	}
	data := f.String()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := runtime.ParseEnvFile(strings.NewReader(data), runtime.DefaultEnvFileBytes); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGitHubExpand evaluates a typical step script's expressions.
func BenchmarkGitHubExpand(b *testing.B) {
	g, err := runtime.NewGitHub(runtime.Params{Spec: &cikit.JobSpec{Format: "github", Matrix: map[string]string{"go": "1.26"}, Env: map[string]string{"A": "1"}},
		Context: &cikit.JobContext{RunContext: cikit.RunContext{SHA: "abc", Repository: "acme/api"}, RunID: "1"}})
	if err != nil {
		b.Fatal(err)
	}
	script := "go test -run ${{ matrix.go }} ./... # ${{ github.sha }} ${{ env.A }} ${{ github.repository }}"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.Expand(script); err != nil {
			b.Fatal(err)
		}
	}
}
