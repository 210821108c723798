package dag_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/internal/pgtest"
)

// benchmarkJobCycles measures jobs driven through queue -> start ->
// complete per second: runs of a build job fanning out to width jobs that
// a report job needs, so completions also make jobs READY.
func benchmarkJobCycles(b *testing.B, store dag.Store, width int) {
	ctx := context.Background()
	step := []cikit.Step{{Run: "true"}}
	specs := []*cikit.JobSpec{{ID: "build", Steps: step}}
	var fan []string
	for i := range width {
		id := fmt.Sprintf("test-%d", i)
		fan = append(fan, id)
		specs = append(specs, &cikit.JobSpec{ID: id, Needs: []string{"build"}, Steps: step})
	}
	specs = append(specs, &cikit.JobSpec{ID: "report", Needs: fan, Steps: step})
	order := append(append([]string{"build"}, fan...), "report")
	jobs := 0
	start := time.Now()
	for b.Loop() {
		run, err := store.RunCreate(ctx, &dag.RunCreateParams{Jobs: specs})
		if err != nil {
			b.Fatal(err)
		}
		for _, id := range order {
			p := &dag.JobTransitionParams{RunID: run.ID, JobID: id, Attempt: 1}
			if _, err := store.JobQueue(ctx, p); err != nil {
				b.Fatal(err)
			}
			if _, err := store.JobStart(ctx, p); err != nil {
				b.Fatal(err)
			}
			if _, err := store.JobComplete(ctx, &dag.JobCompleteParams{RunID: run.ID, JobID: id, Attempt: 1, Outcome: cikit.JobSucceeded}); err != nil {
				b.Fatal(err)
			}
			jobs++
		}
	}
	b.ReportMetric(float64(jobs)/time.Since(start).Seconds(), "jobs/s")
}

func BenchmarkJobCyclesMemory(b *testing.B) {
	benchmarkJobCycles(b, dag.NewMemoryStore(dag.MemoryConfig{}), 20)
}

func BenchmarkJobCyclesPostgres(b *testing.B) {
	db := pgtest.New(b)
	s, err := dag.NewPostgresStore(dag.PostgresConfig{Pool: db.Pool})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Migrate(b.Context()); err != nil {
		b.Fatal(err)
	}
	benchmarkJobCycles(b, s, 20)
}
