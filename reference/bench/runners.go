package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/cikit/cikit/secrets/mask"
)

// manyJobs is a pipeline of n independent jobs that nobody runs: the
// benchmark's own runners claim and complete them.
func manyJobs(n int) string {
	var b strings.Builder
	b.WriteString("jobs:\n")
	for i := range n {
		fmt.Fprintf(&b, "  j%d:\n    steps:\n      - \"true\"\n", i)
	}
	return b.String()
}

// pushRuns pushes n commits' worth of runs of the env's pipeline and waits
// until they are all committed (and so queued for runners).
func (e *env) pushRuns(ctx context.Context, n int) error {
	for i := range n {
		id := "runs-" + strconv.Itoa(i)
		if err := e.deliver(ctx, id, pushBody("branch-"+strconv.Itoa(i), e.fakeBefore(), e.sha)); err != nil {
			return err
		}
	}
	for i := range n {
		if _, err := e.waitRuns(ctx, "runs-"+strconv.Itoa(i), 5*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// claimComplete has concurrent runners claim a job and complete it over
// the platform's runner protocol, over and over, with work waiting: the
// approach of fleet's BenchmarkClaimComplete, but through the whole
// platform (its HTTP middleware, its fleet server, leases and stores).
// The jobs come from pushes of a pipeline of 100 jobs.
func claimComplete(ctx context.Context, b *bencher) (_ *Result, err error) {
	const perRun = 100
	e, err := b.newEnv(ctx, "claim-complete", envOptions{pipeline: manyJobs(perRun)})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, e.close()) }()
	runs := (b.sizes.cycles + perRun - 1) / perRun
	n := runs * perRun
	if err := e.pushRuns(ctx, runs); err != nil {
		return nil, err
	}
	tokens := make([]string, b.sizes.runners)
	for i := range tokens {
		if tokens[i], err = e.register(ctx, "bench-"+strconv.Itoa(i)); err != nil {
			return nil, err
		}
	}
	lat := make([][]time.Duration, len(tokens))
	var left atomic.Int64
	left.Store(int64(n))
	g, gctx := errgroup.WithContext(ctx)
	start := time.Now()
	for r, token := range tokens {
		g.Go(func() error {
			for left.Add(-1) >= 0 {
				t0 := time.Now()
				c, err := e.claim(gctx, token)
				if err != nil {
					return err
				}
				lat[r] = append(lat[r], time.Since(t0))
				if err := e.complete(gctx, c); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	elapsed := time.Since(start)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	return result(n, elapsed, "cycles/s", all, fmt.Sprintf("%d runners over HTTP, work waiting; latency: claim", len(tokens))), nil
}

// logIngest has runners stream their jobs' logs in 64 KiB chunks through
// the runner log API while followers tail some of the logs over SSE, as
// logs' BenchmarkIngestHTTP does, but through the platform: job tokens
// and leases are checked for every chunk, and finished logs go to its
// sink and segment store. Follower latency is from the runner's 202 for
// a chunk to a follower holding its bytes.
func logIngest(ctx context.Context, b *bencher) (*Result, error) {
	return logIngestMasked(ctx, b, "log-ingest", 0)
}

// maskedSecrets is how many secrets log-ingest-masked's runners mask.
const maskedSecrets = 100

// logIngestMasking is log-ingest with each runner masking its output
// with maskedSecrets registered secrets (and their encodings) before a
// chunk leaves it, as a runner does: what masking adds to log ingest.
func logIngestMasking(ctx context.Context, b *bencher) (*Result, error) {
	return logIngestMasked(ctx, b, "log-ingest-masked", maskedSecrets)
}

// logIngestMasked runs log-ingest as scenario name, each runner masking
// its chunks with a masker of n random secrets (none: n is 0).
func logIngestMasked(ctx context.Context, b *bencher, name string, n int) (_ *Result, err error) {
	streams, chunks, followers := b.sizes.logStreams, b.sizes.logChunks, b.sizes.logFollows
	const chunkSize = 64 << 10
	var masker *mask.Masker
	if n > 0 {
		masker = mask.New()
		for range n {
			if err := masker.Add("s3cr3t-" + rand.Text()); err != nil {
				return nil, err
			}
		}
	}
	e, err := b.newEnv(ctx, name, envOptions{pipeline: manyJobs(streams)})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, e.close()) }()
	if err := e.pushRuns(ctx, 1); err != nil {
		return nil, err
	}
	jobs := make([]*claimed, streams)
	for i := range jobs {
		token, err := e.register(ctx, "logger-"+strconv.Itoa(i))
		if err != nil {
			return nil, err
		}
		if jobs[i], err = e.claim(ctx, token); err != nil {
			return nil, err
		}
	}
	chunk := logChunk(chunkSize)
	sum := sha256.New()
	for range chunks {
		sum.Write(chunk)
	}
	digest := hex.EncodeToString(sum.Sum(nil))

	acked := make([][]time.Time, streams)    // when each chunk's 202 arrived
	received := make([][]time.Time, streams) // when the follower had it
	started := make([]chan struct{}, streams)
	listening := make([]chan struct{}, streams)
	for i := range streams {
		acked[i], received[i] = make([]time.Time, chunks), make([]time.Time, chunks)
		started[i], listening[i] = make(chan struct{}), make(chan struct{})
		if i >= followers {
			close(listening[i])
		}
	}
	followCtx, stopFollowing := context.WithCancel(ctx)
	defer stopFollowing()
	var fg errgroup.Group
	for i := range min(followers, streams) {
		fg.Go(func() error {
			select {
			case <-started[i]:
			case <-followCtx.Done():
				close(listening[i])
				return nil
			}
			c := jobs[i]
			req, err := e.followRequest(followCtx, c.RunID, c.JobID, c.Attempt)
			if err != nil {
				close(listening[i])
				return err
			}
			resp, err := e.client.Do(req)
			close(listening[i])
			if err != nil {
				return fmt.Errorf("follow: %w", err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("follow: %s", resp.Status)
			}
			r := bufio.NewReaderSize(resp.Body, 256<<10)
			next := 0
			for {
				line, err := r.ReadSlice('\n')
				if err != nil {
					return fmt.Errorf("follower %d: %w", i, err)
				}
				if bytes.HasPrefix(line, []byte("event: end")) {
					return nil
				}
				if !bytes.HasPrefix(line, []byte("id: ")) {
					continue
				}
				end, _ := strconv.ParseInt(string(bytes.TrimSpace(line[4:])), 10, 64)
				now := time.Now()
				for next < chunks && int64(next+1)*chunkSize <= end {
					received[i][next] = now
					next++
				}
			}
		})
	}

	g, gctx := errgroup.WithContext(ctx)
	start := time.Now()
	for i, c := range jobs {
		g.Go(func() error {
			url := e.logURL(c.RunID, c.JobID)
			// A runner masking its output: the chunk as it leaves the
			// masker, which holds back nothing at its end (Flush).
			var masked bytes.Buffer
			var mw *mask.Writer
			if masker != nil {
				mw = masker.Writer(&masked)
			}
			for k := range chunks {
				if k == 1 {
					<-listening[i]
				}
				body := chunk
				if mw != nil {
					masked.Reset()
					if _, err := mw.Write(chunk); err != nil {
						return err
					}
					if err := mw.Flush(); err != nil {
						return err
					}
					if body = masked.Bytes(); len(body) != chunkSize {
						return fmt.Errorf("masking changed a chunk without secrets: %d bytes", len(body))
					}
				}
				req, err := http.NewRequestWithContext(gctx, http.MethodPatch,
					fmt.Sprintf("%s?attempt=%d&step=%d&seq=%d", url, c.Attempt, k/16, k), bytes.NewReader(body))
				if err != nil {
					return err
				}
				req.Header.Set("Authorization", "Bearer "+c.JobToken)
				req.Header.Set("Content-Type", "application/octet-stream")
				req.Header.Set("Content-Range", fmt.Sprintf("bytes %d-%d", k*chunkSize, (k+1)*chunkSize-1))
				resp, err := e.client.Do(req)
				if err != nil {
					return fmt.Errorf("log chunk: %w", err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				acked[i][k] = time.Now()
				if resp.StatusCode != http.StatusAccepted {
					return fmt.Errorf("log chunk %d of %s: %s", k, c.JobID, resp.Status)
				}
				if k == 0 {
					close(started[i])
				}
			}
			body := map[string]any{"total_bytes": chunks * chunkSize, "sha256": digest}
			var fin struct {
				Complete bool `json:"complete"`
			}
			path := strings.TrimPrefix(url, e.url) + "/finish?attempt=" + strconv.Itoa(c.Attempt)
			if err := e.call(gctx, http.MethodPost, path, c.JobToken, body, http.StatusOK, &fin); err != nil {
				return err
			}
			if !fin.Complete {
				return fmt.Errorf("the log of %s was stored incomplete", c.JobID)
			}
			return e.complete(gctx, c)
		})
	}
	err = g.Wait()
	elapsed := time.Since(start)
	if err != nil {
		stopFollowing()
		return nil, errors.Join(err, fg.Wait())
	}
	if err := fg.Wait(); err != nil {
		return nil, err
	}
	var lat []time.Duration
	for i := range min(followers, streams) {
		for k := 1; k < chunks; k++ { // chunk 0 was sent before the follower listened
			if received[i][k].IsZero() {
				return nil, fmt.Errorf("follower %d never had chunk %d", i, k)
			}
			lat = append(lat, max(0, received[i][k].Sub(acked[i][k])))
		}
	}
	total := streams * chunks
	note := fmt.Sprintf("%d runners × %d chunks of 64 KiB, %d SSE followers; latency: chunk's 202 → follower has it", streams, chunks, followers)
	if masker != nil {
		note += fmt.Sprintf("; each runner masks %d secrets (%d patterns with their encodings)", n, masker.Len())
	}
	r := result(total, elapsed, "MB/s", lat, note)
	r.Throughput = float64(total*chunkSize) / 1e6 / elapsed.Seconds()
	return r, nil
}

// logChunk is size bytes of log lines.
func logChunk(size int) []byte {
	line := []byte("=== RUN   TestSomething/with_a_subtest  ok  github.com/cikit/cikit 0.042s\n")
	out := bytes.Repeat(line, size/len(line)+1)
	return out[:size]
}
