package ingest_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cikit/cikit/ingest"
	"github.com/cikit/cikit/vcs"
)

// benchmarkIngest measures deliveries ingested per second by workers
// goroutines on the PostgreSQL stores, each delivery a push of its own
// commit creating one run of a two-job pipeline; with dupEvery > 0, all
// but one in dupEvery deliveries repeat an earlier one.
func benchmarkIngest(b *testing.B, workers, dupEvery int) {
	ctx := context.Background()
	runs, _ := newPostgresRunStore(b, nil)
	p := &vcs.Memory{}
	in, err := ingest.NewIngester(ingest.IngesterConfig{Runs: runs, VCS: p, Debounce: -1})
	if err != nil {
		b.Fatal(err)
	}
	const commits = 64
	for i := range commits {
		p.AddCommit("acme/api", fmt.Sprintf("c%d", i), map[string]string{".cikit.yml": native})
	}
	var next, created atomic.Int64
	event := func(n int64) *ingest.Event {
		if dupEvery > 0 && n%int64(dupEvery) != 0 {
			n -= n % int64(dupEvery) // a repeat of the last original
		}
		sha := fmt.Sprintf("c%d", n%commits)
		return &ingest.Event{Provider: ingest.GitHub, HookID: "h", DeliveryID: fmt.Sprintf("d%d", n), Kind: ingest.KindPush,
			Org: "acme", Repo: "api", RefType: ingest.RefBranch, RefName: "main", DefaultBranch: "main",
			Before: fmt.Sprintf("b%d", n), SHA: sha, EventTime: time.Unix(1_800_000_000, 0)}
	}
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				n := next.Add(1) - 1
				if n >= int64(b.N) {
					return
				}
				_, ok, err := in.Ingest(ctx, event(n))
				if err != nil {
					b.Error(err)
					return
				}
				if ok {
					created.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "deliveries/s")
	b.ReportMetric(float64(created.Load())/elapsed.Seconds(), "runs/s")
}

// BenchmarkIngest: distinct deliveries, each committing a run.
func BenchmarkIngest(b *testing.B) {
	for _, workers := range []int{1, 8, 32, 128} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) { benchmarkIngest(b, workers, 0) })
	}
}

// BenchmarkIngestDuplicateStorm: 99% of deliveries repeat an earlier one.
func BenchmarkIngestDuplicateStorm(b *testing.B) {
	benchmarkIngest(b, 32, 100)
}
