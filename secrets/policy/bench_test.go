package policy_test

import (
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/cikit/cikit/secrets/policy"
)

// BenchmarkEvalDefault evaluates the default policy for a fork's pull
// request and a push, reporting the 99th percentile of one evaluation's
// wall time (p99-µs) and the process's CPU time per evaluation
// (cpu-µs/op, which a busy machine inflates less than wall time).
func BenchmarkEvalDefault(b *testing.B) {
	e, err := policy.New(policy.Config{})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		in   *policy.Input
	}{
		{"fork-pr", input(forkPR("FIRST_TIME_CONTRIBUTOR"))},
		{"push", input(nil)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			ctx := b.Context()
			took := make([]time.Duration, 0, 1<<16)
			cpu0 := cpuTime(b)
			for b.Loop() {
				start := time.Now()
				if _, err := e.Eval(ctx, bc.in); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(start))
			}
			b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/1e3/float64(len(took)), "cpu-µs/op")
			slices.Sort(took)
			p99 := took[len(took)*99/100]
			b.ReportMetric(float64(p99.Nanoseconds())/1e3, "p99-µs")
		})
	}
}

// cpuTime is the user and system CPU time of the process so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
