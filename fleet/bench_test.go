package fleet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
)

// BenchmarkClaimComplete measures claim + complete cycles per second over
// the HTTP runner API with work waiting: runners goroutines each claim a
// job and complete it, over and over, on the memory stores (the embedded
// platform) and on PostgreSQL and Redis (production); the claims' latency
// percentiles are reported too.
func BenchmarkClaimComplete(b *testing.B) {
	for _, st := range []struct {
		name string
		st   stores
	}{{"memory", memoryStores}, {"postgres+redis", postgresStores}} {
		for _, runners := range []int{8, 32, 48, 64} {
			b.Run(fmt.Sprintf("%s/runners=%d", st.name, runners), func(b *testing.B) { benchmarkClaimComplete(b, st.st, runners) })
		}
	}
}

func benchmarkClaimComplete(b *testing.B, st stores, runners int) {
	bd := setupOn(b, st)
	ctx := context.Background()
	const perRun = 100
	for n := 0; n < b.N; n += perRun {
		specs := make([]*cikit.JobSpec, min(perRun, b.N-n))
		for i := range specs {
			specs[i] = &cikit.JobSpec{ID: fmt.Sprintf("j%d", i), Steps: []cikit.Step{{Run: "true"}}}
		}
		run, err := bd.jobs.RunCreate(ctx, &dag.RunCreateParams{Jobs: specs})
		if err != nil {
			b.Fatal(err)
		}
		if err := bd.server.DispatchRun(ctx, run.ID); err != nil {
			b.Fatal(err)
		}
	}
	tokens := make([]string, runners)
	for i := range tokens {
		tokens[i] = bd.register(b)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: runners * 2}}
	defer client.CloseIdleConnections()
	var left atomic.Int64
	left.Store(int64(b.N))
	latencies := make([][]time.Duration, runners)
	done := []byte(`{"result":"succeeded","exit_code":0}`)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for r := range runners {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				t0 := time.Now()
				req, _ := http.NewRequest(http.MethodGet, bd.srv.URL+"/v1/jobs/claim?wait=5", nil)
				req.Header.Set("Authorization", "Bearer "+tokens[r])
				resp, err := client.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				var c struct {
					RunID    string `json:"run_id"`
					JobID    string `json:"job_id"`
					JobToken string `json:"job_token"`
				}
				err = json.NewDecoder(resp.Body).Decode(&c)
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Errorf("claim: %d %v", resp.StatusCode, err)
					return
				}
				latencies[r] = append(latencies[r], time.Since(t0))
				req, _ = http.NewRequest(http.MethodPost, bd.srv.URL+"/v1/jobs/"+c.RunID+"/"+c.JobID+"/complete", bytes.NewReader(done))
				req.Header.Set("Authorization", "Bearer "+c.JobToken)
				resp, err = client.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Errorf("complete: %d", resp.StatusCode)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	all := slices.Concat(latencies...)
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)*50/100].Microseconds())/1000, "claim-p50-ms")
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "claim-p99-ms")
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "cycles/s")
}
