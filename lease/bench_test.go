package lease_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/lease"
)

// BenchmarkClaimComplete measures a job attempt's lease round trip on
// PostgreSQL and Redis: Claim, then Complete, of jobs queued beforehand.
func BenchmarkClaimComplete(b *testing.B) {
	for _, st := range []stack{{name: "Postgres+Redis", pg: true, redis: true}, {name: "Memory+Redis", redis: true}} {
		b.Run(st.name, func(b *testing.B) {
			bu := setup(b, st)
			ctx := b.Context()
			as := queued(b, bu, b.N)
			done := &dag.JobCompleteParams{Outcome: cikit.JobSucceeded}
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				l, err := bu.m.Claim(ctx, as[i], "bench")
				if err != nil {
					b.Fatal(err)
				}
				if _, err := bu.m.Complete(ctx, as[i], l.Token, done); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "attempts/s")
		})
	}
}

// queued returns n attempts of jobs queued in runs of 200.
func queued(b *testing.B, bu *bundle, n int) []lease.Attempt {
	const perRun = 200
	ctx := b.Context()
	var as []lease.Attempt
	for len(as) < n {
		var specs []*cikit.JobSpec
		for i := range perRun {
			specs = append(specs, &cikit.JobSpec{ID: fmt.Sprintf("j%d", i), Steps: []cikit.Step{{Run: "true"}}})
		}
		run, err := bu.jobs.RunCreate(ctx, &dag.RunCreateParams{Jobs: specs})
		require.NoError(b, err)
		var evs []*dag.JobEvent
		for _, s := range specs {
			evs = append(evs, &dag.JobEvent{Kind: dag.EventQueue, RunID: run.ID, JobID: s.ID, Attempt: 1})
			as = append(as, lease.Attempt{RunID: run.ID, JobID: s.ID, Attempt: 1})
		}
		_, err = bu.jobs.JobApply(ctx, evs)
		require.NoError(b, err)
	}
	return as
}

// BenchmarkClaimCompleteMany measures the same round trip in batches:
// ClaimMany, then CompleteMany, of 64 attempts at a time.
func BenchmarkClaimCompleteMany(b *testing.B) {
	const batch = 64
	for _, st := range []stack{{name: "Postgres+Redis", pg: true, redis: true}, {name: "Memory+Redis", redis: true}} {
		b.Run(st.name, func(b *testing.B) {
			bu := setup(b, st)
			ctx := b.Context()
			as := queued(b, bu, b.N)
			done := &dag.JobCompleteParams{Outcome: cikit.JobSucceeded}
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i += batch {
				var claims []lease.ClaimRequest
				for _, a := range as[i:min(i+batch, b.N)] {
					claims = append(claims, lease.ClaimRequest{Attempt: a, Runner: "bench"})
				}
				var completes []lease.CompleteRequest
				for _, r := range bu.m.ClaimMany(ctx, claims) {
					if r.Err != nil {
						b.Fatal(r.Err)
					}
					completes = append(completes, lease.CompleteRequest{Attempt: r.Lease.Attempt, Token: r.Lease.Token, Params: done})
				}
				for _, r := range bu.m.CompleteMany(ctx, completes) {
					if r.Err != nil {
						b.Fatal(r.Err)
					}
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "attempts/s")
		})
	}
}
