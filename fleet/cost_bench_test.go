package fleet_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

// BenchmarkRunCost measures, on PostgreSQL and Redis, the three things
// a run of many jobs costs the platform as a whole, in runs of 1,000 and
// of 10,000 jobs that need nothing: creating the run, dispatching its jobs
// (queueing each READY job and offering it to runners) and cancelling it,
// until a runner asking for work finds none of its jobs left to claim.
// Each is reported per job: proportional costs read the same for both
// sizes.
func BenchmarkRunCost(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			bd := setupOn(b, postgresStores)
			ctx := context.Background()
			specs := make([]*cikit.JobSpec, n)
			for i := range specs {
				specs[i] = &cikit.JobSpec{ID: fmt.Sprintf("j%d", i), Steps: []cikit.Step{{Run: "true"}}}
			}
			runner := bd.register(b)
			var create, dispatch, cancel time.Duration
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				run, err := bd.jobs.RunCreate(ctx, &dag.RunCreateParams{Jobs: specs})
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := bd.server.DispatchRun(ctx, run.ID); err != nil {
					b.Fatal(err)
				}
				if got := bd.server.Dispatcher().Len(); got != n {
					b.Fatalf("%d offers after dispatch, want %d", got, n)
				}
				t2 := time.Now()
				res, err := bd.jobs.RunCancel(ctx, run.ID)
				if err != nil {
					b.Fatal(err)
				}
				bd.server.Dispatch(ctx, res)
				// A runner asking for work claims what is still offered;
				// every claim of a cancelled job is refused, until none
				// is left.
				for claims := 0; ; claims++ {
					status, out := bd.call(b, http.MethodGet, "/v1/jobs/claim?wait=0", runner, nil)
					if status == http.StatusNoContent {
						break
					}
					if status != http.StatusNoContent && claims > n {
						b.Fatalf("claim %d of a cancelled run: %d %v", claims, status, out)
					}
				}
				cancel += time.Since(t2)
				create, dispatch = create+t1.Sub(t0), dispatch+t2.Sub(t1)
			}
			per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N*n) }
			b.ReportMetric(per(create), "create-ns/job")
			b.ReportMetric(per(dispatch), "dispatch-ns/job")
			b.ReportMetric(per(cancel), "cancel-ns/job")
		})
	}
}
