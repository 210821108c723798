package mask_test

import (
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cikit/cikit/secrets/mask"
)

// logText returns n bytes of build-log-like text.
func logText(r *rand.Rand, n int) []byte {
	words := []string{"Compiling", "Downloading", "github.com/acme/api", "v1.2.3", "ok", "PASS", "--- FAIL:",
		"TestHandler", "(0.01s)", "npm", "WARN", "deprecated", "error:", "src/main.rs:42:7", "warning:",
		"unused", "variable", "Step", "3/12", ":", "RUN", "apt-get", "install", "-y", "libssl-dev", "=>",
		"sha256:9f86d081884c7d659a2feaa0c55ad015", "100%", "|", "#####", "the", "a", "of", "to", "in"}
	var b strings.Builder
	for b.Len() < n {
		fmt.Fprintf(&b, "2026-12-03T08:%02d:%02d.%03dZ ", r.IntN(60), r.IntN(60), r.IntN(1000))
		for k := 3 + r.IntN(12); k > 0; k-- {
			b.WriteString(words[r.IntN(len(words))])
			b.WriteByte(' ')
		}
		b.WriteByte('\n')
	}
	return []byte(b.String()[:n])
}

func randomSecret(r *rand.Rand) string {
	const chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.+/"
	b := make([]byte, 16+r.IntN(25))
	for i := range b {
		b[i] = chars[r.IntN(len(chars))]
	}
	return string(b)
}

// BenchmarkMasker masks 4 MiB of log text in 32 KiB writes (what a job's
// output pipe is read in) with 0, 1 and 100 secrets registered, with
// none of them in the text, and with one every 64 KiB.
func BenchmarkMasker(b *testing.B) {
	for _, n := range []int{0, 1, 100} {
		for _, present := range []bool{false, true} {
			if n == 0 && present {
				continue
			}
			b.Run(fmt.Sprintf("secrets=%d/present=%t", n, present), func(b *testing.B) {
				r := rand.New(rand.NewPCG(1, 2))
				m := mask.New()
				var values []string
				for range n {
					v := randomSecret(r)
					values = append(values, v)
					if err := m.Add(v); err != nil {
						b.Fatal(err)
					}
				}
				text := logText(r, 4<<20)
				if present {
					for i := 1000; i+64 < len(text); i += 64 << 10 {
						copy(text[i:], values[r.IntN(len(values))])
					}
				}
				b.SetBytes(int64(len(text)))
				b.ReportAllocs()
				w := m.Writer(io.Discard)
				for b.Loop() {
					for i := 0; i < len(text); i += 32 << 10 {
						_, _ = w.Write(text[i:min(i+32<<10, len(text))])
					}
					_ = w.Flush()
				}
				b.ReportMetric(float64(m.Len()), "patterns")
			})
		}
	}
}
