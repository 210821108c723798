package dag_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/internal/redistest"
)

// fanSpecs is a run of a build job fanning out to width test jobs that a
// report job needs, so completions both make jobs READY one by one and
// count down a job with many needs.
func fanSpecs(width int) []*cikit.JobSpec {
	step := []cikit.Step{{Run: "true"}}
	specs := []*cikit.JobSpec{{ID: "build", Steps: step}}
	var fan []string
	for i := range width {
		id := fmt.Sprintf("test-%d", i)
		fan = append(fan, id)
		specs = append(specs, &cikit.JobSpec{ID: id, Needs: []string{"build"}, Steps: step})
	}
	return append(specs, &cikit.JobSpec{ID: "report", Needs: fan, Steps: step})
}

// schedule drives runs to their end the way scheduler workers do:
// workers take up to batch events at a time from a shared queue, apply
// them with JobApply, and queue what follows from the results (a queued
// job is started, a started one completed, a READY one queued). It
// returns how many jobs completed.
func schedule(b *testing.B, store dag.Store, runs []*dag.Run, jobsPerRun, workers, batch int) (jobs, batches int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	queue := make(chan *dag.JobEvent, len(runs)*jobsPerRun*3)
	for _, r := range runs {
		queue <- &dag.JobEvent{Kind: dag.EventQueue, RunID: r.ID, JobID: "build", Attempt: 1}
	}
	remaining := atomic.Int64{}
	remaining.Store(int64(len(runs) * jobsPerRun))
	var wg sync.WaitGroup
	var failure atomic.Value
	var calls atomic.Int64
	for range workers {
		wg.Go(func() {
			evs := make([]*dag.JobEvent, 0, batch)
			for {
				evs = evs[:0]
				select {
				case <-ctx.Done():
					return
				case e := <-queue:
					evs = append(evs, e)
				}
			drain:
				for len(evs) < batch {
					select {
					case e := <-queue:
						evs = append(evs, e)
					default:
						break drain
					}
				}
				calls.Add(1)
				results, err := store.JobApply(ctx, evs)
				if err != nil {
					failure.Store(err)
					cancel()
					return
				}
				for i, r := range results {
					e := evs[i]
					if r.Err != nil {
						failure.Store(fmt.Errorf("%v %s: %w", e.Kind, e.JobID, r.Err))
						cancel()
						return
					}
					switch e.Kind {
					case dag.EventQueue:
						queue <- &dag.JobEvent{Kind: dag.EventStart, RunID: e.RunID, JobID: e.JobID, Attempt: e.Attempt, Runner: "bench"}
					case dag.EventStart:
						queue <- &dag.JobEvent{Kind: dag.EventComplete, RunID: e.RunID, JobID: e.JobID, Attempt: e.Attempt, Outcome: cikit.JobSucceeded}
					case dag.EventComplete:
						for _, c := range r.Changed[1:] {
							if c.State == cikit.JobReady {
								queue <- &dag.JobEvent{Kind: dag.EventQueue, RunID: c.RunID, JobID: c.ID(), Attempt: c.Attempt}
							}
						}
						if remaining.Add(-1) == 0 {
							cancel()
						}
					}
				}
			}
		})
	}
	wg.Wait()
	if err, ok := failure.Load().(error); ok {
		b.Fatal(err)
	}
	if n := remaining.Load(); n != 0 {
		b.Fatalf("%d jobs did not complete", n)
	}
	return len(runs) * jobsPerRun, int(calls.Load())
}

// benchmarkScheduler measures completed jobs per second: each iteration
// creates 20 runs of 22 jobs and drives them to their end with 4
// workers applying events in batches of up to batch.
func benchmarkScheduler(b *testing.B, store dag.Store, batch int) {
	const runsPer, width, workers = 20, 20, 4
	specs := fanSpecs(width)
	ctx := context.Background()
	jobs, batches := 0, 0
	var elapsed time.Duration
	for b.Loop() {
		runs := make([]*dag.Run, runsPer)
		for i := range runs {
			r, err := store.RunCreate(ctx, &dag.RunCreateParams{Jobs: specs})
			if err != nil {
				b.Fatal(err)
			}
			runs[i] = r
		}
		start := time.Now()
		j, n := schedule(b, store, runs, len(specs), workers, batch)
		jobs, batches = jobs+j, batches+n
		elapsed += time.Since(start)
		for _, r := range runs {
			if got, err := store.RunGet(ctx, r.ID); err != nil || got.State != cikit.RunSucceeded {
				b.Fatalf("run %s ended %v (%v)", r.ID, got, err)
			}
		}
	}
	b.ReportMetric(float64(jobs)/elapsed.Seconds(), "jobs/s")
	b.ReportMetric(float64(jobs*3)/float64(batches), "events/batch")
}

// BenchmarkScheduler compares the stores, and the PostgreSQL store with
// and without Redis counters, one event per write and in batches.
func BenchmarkScheduler(b *testing.B) {
	for _, batch := range []int{1, 64} {
		b.Run(fmt.Sprintf("Memory/batch=%d", batch), func(b *testing.B) {
			benchmarkScheduler(b, dag.NewMemoryStore(dag.MemoryConfig{}), batch)
		})
		b.Run(fmt.Sprintf("Postgres/batch=%d", batch), func(b *testing.B) {
			benchmarkScheduler(b, newPostgresStore(b, nil, nil), batch)
		})
		b.Run(fmt.Sprintf("PostgresRedis/batch=%d", batch), func(b *testing.B) {
			benchmarkScheduler(b, newPostgresStore(b, nil, redistest.New(b)), batch)
		})
	}
}

// BenchmarkInitial times the states of a new run (dag.Initial), which
// every RunCreate works out: a build, a fan of width tests and a report.
func BenchmarkInitial(b *testing.B) {
	for _, width := range []int{20, 1000} {
		b.Run(fmt.Sprintf("jobs=%d", width+2), func(b *testing.B) {
			g, err := dag.FromSpecs(fanSpecs(width))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				dag.Initial(g)
			}
		})
	}
}
