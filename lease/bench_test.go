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
	for _, st := range []stack{{"Postgres+Redis", true, true}, {"Memory+Redis", false, true}} {
		b.Run(st.name, func(b *testing.B) {
			const perRun = 200
			bu := setup(b, st)
			ctx := b.Context()
			var as []lease.Attempt
			for len(as) < b.N {
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
