package compiler_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cikit/cikit/compiler"
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
	if err != nil || len(diags) > 0 || len(plan.Jobs) != 50 {
		b.Fatalf("bad benchmark pipeline: %v %v", err, diags)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		_, _, _ = compiler.CompileBytes(".cikit.yml", data, compiler.Options{})
	}
}
