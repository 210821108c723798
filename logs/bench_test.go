package logs_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cikit/cikit/logs"
)

// BenchmarkIngestHTTP measures log ingest over HTTP on real TCP: 100
// runners stream a log each in 64 KiB chunks while 50 SSE followers tail
// the first 50 logs. One op is one chunk, so MB/s is the ingest rate.
// follow-p99-ms is the 99th percentile of the time from a chunk's 202 at
// its runner to the arrival of its last byte at the follower (0 when the
// follower had it first).
func BenchmarkIngestHTTP(b *testing.B) {
	const (
		streams   = 100
		followers = 50
		chunkSize = 64 << 10
	)
	hub, err := logs.NewHub(logs.Config{
		Sink:     &logs.FileSink{Dir: b.TempDir()},
		Segments: &logs.MemorySegmentStore{},
		Logger:   slog.New(slog.DiscardHandler),
		// The logs grow with b.N and are finished only at the end.
		MaxLiveBytes: 1 << 40,
	})
	if err != nil {
		b.Fatal(err)
	}
	h, err := logs.NewHandler(logs.HandlerConfig{Hub: hub, AuthorizeWrite: logs.AllowAll, AuthorizeFollow: logs.AllowAll, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 2 * streams, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	chunk := []byte(testLog(chunkSize))
	counts := make([]int, streams)
	for i := range b.N {
		counts[i%streams]++
	}
	// The log of each stream is chunk repeated; its digest is known ahead.
	digests := make([]string, streams)
	for i, n := range counts {
		d := sha256.New()
		for range n {
			d.Write(chunk)
		}
		digests[i] = hex.EncodeToString(d.Sum(nil))
	}
	acked := make([][]time.Time, streams)    // when each chunk's 202 arrived
	received := make([][]time.Time, streams) // when a follower had each chunk
	ready := make([]chan struct{}, streams)  // closed when the stream's follower listens
	for i := range streams {
		acked[i] = make([]time.Time, counts[i])
		received[i] = make([]time.Time, counts[i])
		ready[i] = make(chan struct{})
		if i >= followers || counts[i] < 2 {
			close(ready[i])
		}
	}
	started := make([]chan struct{}, streams)
	for i := range started {
		started[i] = make(chan struct{})
	}
	url := func(i int) string { return fmt.Sprintf("%s/v1/jobs/bench/job-%d/log", srv.URL, i) }

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var fwg sync.WaitGroup
	for i := range min(followers, streams) {
		if counts[i] < 2 {
			continue
		}
		fwg.Go(func() {
			<-started[i]
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url(i)+"/follow?attempt=1", nil)
			res, err := client.Do(req)
			if err != nil {
				b.Error(err)
				close(ready[i])
				return
			}
			defer res.Body.Close()
			close(ready[i])
			r := bufio.NewReaderSize(res.Body, 256<<10)
			next := 0 // the first chunk not yet received
			for {
				line, err := r.ReadSlice('\n')
				if err != nil {
					b.Errorf("follower %d: %v", i, err)
					return
				}
				if bytes.HasPrefix(line, []byte("event: end")) {
					return
				}
				if !bytes.HasPrefix(line, []byte("id: ")) {
					continue
				}
				end, _ := strconv.ParseInt(string(bytes.TrimSpace(line[4:])), 10, 64)
				now := time.Now()
				for next < counts[i] && int64(next+1)*chunkSize <= end {
					received[i][next] = now
					next++
				}
			}
		})
	}

	b.SetBytes(chunkSize)
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for i := range streams {
		if counts[i] == 0 {
			continue
		}
		wg.Go(func() {
			for k := range counts[i] {
				if k == 1 {
					<-ready[i]
				}
				req, _ := http.NewRequest(http.MethodPatch, fmt.Sprintf("%s?attempt=1&step=%d&seq=%d", url(i), k/16, k), bytes.NewReader(chunk))
				req.Header.Set("Content-Range", fmt.Sprintf("bytes %d-%d", k*chunkSize, (k+1)*chunkSize-1))
				res, err := client.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				acked[i][k] = time.Now()
				if res.StatusCode != http.StatusAccepted {
					b.Errorf("stream %d chunk %d: %s", i, k, res.Status)
					return
				}
				if k == 0 {
					close(started[i])
				}
			}
			body := fmt.Sprintf(`{"total_bytes":%d,"sha256":%q}`, counts[i]*chunkSize, digests[i])
			res, err := client.Post(url(i)+"/finish?attempt=1", "application/json", bytes.NewReader([]byte(body)))
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				b.Errorf("stream %d finish: %s", i, res.Status)
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	fwg.Wait()

	var lat []time.Duration
	for i := range min(followers, streams) {
		for k := 1; k < counts[i]; k++ { // chunk 0 was sent before the follower listened
			if received[i][k].IsZero() {
				continue
			}
			lat = append(lat, max(0, received[i][k].Sub(acked[i][k])))
		}
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		p := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))]) / float64(time.Millisecond) }
		b.ReportMetric(p(0.50), "follow-p50-ms")
		b.ReportMetric(p(0.99), "follow-p99-ms")
	}
}

// discardSink stores nothing: the benchmarks measure the Hub.
type discardSink struct{ logs.MemorySink }

func (*discardSink) StepPut(ctx context.Context, key logs.Key, step int, r io.Reader, size int64) (string, error) {
	_, err := io.Copy(io.Discard, r)
	return logs.BlobKey(key, step), err
}

// BenchmarkAppend measures the Hub alone: one 64 KiB chunk per op to
// parallel logs, each finished after 16 MiB.
func BenchmarkAppend(b *testing.B) {
	hub, err := logs.NewHub(logs.Config{Sink: &discardSink{}, Segments: &logs.MemorySegmentStore{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	chunk := []byte(testLog(64 << 10))
	const perLog = 256
	sum := sha256.New()
	for range perLog {
		sum.Write(chunk)
	}
	digest := hex.EncodeToString(sum.Sum(nil))
	var mu sync.Mutex
	stream := 0
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		mu.Lock()
		key := logs.Key{RunID: "bench", JobID: "job-" + strconv.Itoa(stream), Attempt: 1}
		stream++
		mu.Unlock()
		c := &logs.Chunk{Key: key, Data: chunk}
		for pb.Next() {
			if _, err := hub.Append(ctx, c); err != nil {
				b.Fatal(err)
			}
			c.Offset += int64(len(chunk))
			c.Seq++
			if c.Seq%16 == 0 {
				c.Step++
			}
			if c.Seq == perLog {
				if _, err := hub.Finish(ctx, c.Key, logs.FinishParams{TotalBytes: c.Offset, SHA256: digest}); err != nil {
					b.Fatal(err)
				}
				c.Key.Attempt++
				c.Offset, c.Seq, c.Step = 0, 0, 0
			}
		}
	})
}

// BenchmarkDecodeChunk measures the parsing of a chunk request.
func BenchmarkDecodeChunk(b *testing.B) {
	query := map[string][]string{"attempt": {"1"}, "step": {"3"}, "seq": {"17"}}
	header := http.Header{"Content-Range": {"bytes 65536-131071"}}
	body := make([]byte, 64<<10)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := logs.DecodeChunk("run-1", "build", query, header, body); err != nil {
			b.Fatal(err)
		}
	}
}
