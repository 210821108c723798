package process_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet/process"
	"github.com/cikit/cikit/internal/testenv"
)

// firstByte records when the first byte past skip is written to it.
type firstByte struct {
	skip, n int
	at      time.Time
}

func (f *firstByte) Write(p []byte) (int, error) {
	if f.at.IsZero() && f.n+len(p) > f.skip {
		f.at = time.Now()
	}
	f.n += len(p)
	return len(p), nil
}

// BenchmarkSandboxStart measures what starting a job costs: from calling
// RunOutput to the first step's onStep call, and to the first byte the
// step prints, for a one-step job on an empty source tree, with plain
// processes and in a bubblewrap sandbox. It reports the p50 and p95 of
// both.
func BenchmarkSandboxStart(b *testing.B) {
	for _, mode := range []struct {
		name    string
		sandbox *process.Sandbox
	}{
		{"plain", nil},
		{"bwrap", &process.Sandbox{}},
	} {
		b.Run(mode.name, func(b *testing.B) {
			e, err := process.New(process.Config{Source: b.TempDir(), WorkRoot: searchableDir(b), Env: []string{"PATH=" + os.Getenv("PATH")}, Sandbox: mode.sandbox})
			if errors.Is(err, process.ErrSandboxUnavailable) {
				testenv.ToolUnavailable(b, testenv.Bubblewrap, err)
			}
			if err != nil {
				b.Fatal(err)
			}
			spec := &cikit.JobSpec{ID: "bench", Steps: []cikit.Step{{Name: "hello", Run: "echo hello"}}}
			const header = "--- hello\n" // written by the executor before the step starts
			var toStep, toOutput []time.Duration
			for b.Loop() {
				out := &firstByte{skip: len(header)}
				var stepped time.Time
				start := time.Now()
				res := e.RunOutput(context.Background(), spec, out, func(int) { stepped = time.Now() })
				if res.State != cikit.JobSucceeded || out.at.IsZero() {
					b.Fatalf("the job did not print: %+v", res)
				}
				toStep = append(toStep, stepped.Sub(start))
				toOutput = append(toOutput, out.at.Sub(start))
			}
			for _, m := range []struct {
				name string
				d    []time.Duration
			}{{"onStep", toStep}, {"output", toOutput}} {
				slices.Sort(m.d)
				b.ReportMetric(ms(m.d[len(m.d)/2]), "ms-to-"+m.name+"-p50")
				b.ReportMetric(ms(m.d[min(len(m.d)-1, len(m.d)*95/100)]), "ms-to-"+m.name+"-p95")
			}
		})
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
