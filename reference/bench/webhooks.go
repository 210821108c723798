package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
)

// oneJob is a pipeline of one job, which the webhook scenarios' platforms
// never run (they have no runners): it only has to be read and compiled.
const oneJob = `jobs:
  build:
    steps:
      - "true"
`

// webhookToRun sends pushes from concurrent senders, each on a branch of
// its own (a sender's pushes are in order, so none is dropped as out of
// order), and times each from the request to its run being committed.
func webhookToRun(ctx context.Context, b *bencher) (_ *Result, err error) {
	e, err := b.newEnv(ctx, "webhook-to-run", envOptions{pipeline: oneJob})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, e.close()) }()
	n, senders := b.sizes.webhookRuns, b.sizes.webhookConcurrency
	const interval = time.Millisecond
	// A first delivery warms the consumers up.
	if err := e.deliver(ctx, "warm-up", pushBody("warm-up", e.fakeBefore(), e.sha)); err != nil {
		return nil, err
	}
	if _, err := e.waitRuns(ctx, "warm-up", interval); err != nil {
		return nil, err
	}
	lat := make([]time.Duration, n)
	evals0, evalTime0 := e.p.PolicyEvaluations()
	var next atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	start := time.Now()
	for w := range senders {
		g.Go(func() error {
			branch := "sender-" + strconv.Itoa(w)
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return nil
				}
				id := "push-" + strconv.Itoa(i)
				t0 := time.Now()
				if err := e.deliver(gctx, id, pushBody(branch, e.fakeBefore(), e.sha)); err != nil {
					return err
				}
				if _, err := e.waitRuns(gctx, id, interval); err != nil {
					return err
				}
				lat[i] = time.Since(t0)
			}
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	elapsed := time.Since(start)
	evals, evalTime := e.p.PolicyEvaluations()
	evals, evalTime = evals-evals0, evalTime-evalTime0
	var total time.Duration
	for _, l := range lat {
		total += l
	}
	share := ""
	if evals > 0 && total > 0 {
		share = fmt.Sprintf("; the policy decided %d jobs in %.1f µs each on average, %.2f%% of webhook → run committed",
			evals, float64(evalTime.Microseconds())/float64(evals), 100*float64(evalTime)/float64(total))
	}
	return result(n, elapsed, "runs/s", lat, fmt.Sprintf("webhook sent → run committed (store polled every %s); %d concurrent senders%s", interval, senders, share)), nil
}

// duplicateStorm sends one delivery many times at once and distinct
// deliveries each several times, all shuffled and concurrent, then checks
// that each delivery created exactly one run and no copy created another:
// the platform's count of created runs and the jobs waiting in its queue
// (its platform has no runners) must both equal the distinct deliveries.
func duplicateStorm(ctx context.Context, b *bencher) (_ *Result, err error) {
	e, err := b.newEnv(ctx, "duplicate-storm", envOptions{pipeline: oneJob})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, e.close()) }()
	type send struct {
		id   string
		body []byte
	}
	var (
		sends []send
		ids   []string
	)
	same := pushBody("same", e.fakeBefore(), e.sha)
	ids = append(ids, "same")
	for range b.sizes.stormCopies {
		sends = append(sends, send{"same", same})
	}
	for d := range b.sizes.stormDistinct {
		id := "distinct-" + strconv.Itoa(d)
		body := pushBody(id, e.fakeBefore(), e.sha)
		ids = append(ids, id)
		for range b.sizes.stormK {
			sends = append(sends, send{id, body})
		}
	}
	rand.Shuffle(len(sends), func(i, j int) { sends[i], sends[j] = sends[j], sends[i] })

	const senders = 32
	lat := make([]time.Duration, len(sends))
	var next atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	start := time.Now()
	for range senders {
		g.Go(func() error {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(sends) {
					return nil
				}
				t0 := time.Now()
				if err := e.deliver(gctx, sends[i].id, sends[i].body); err != nil {
					return err
				}
				lat[i] = time.Since(t0)
			}
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for _, id := range ids {
		if _, err := e.waitRuns(ctx, id, 5*time.Millisecond); err != nil {
			return nil, err
		}
	}
	elapsed := time.Since(start)

	// Copies may still be on their way through Kafka: wait until the
	// count of created runs has not moved for a second.
	var created, queued float64
	stableSince, last := time.Now(), -1.0
	err = poll(ctx, 60*time.Second, 100*time.Millisecond, "the count of created runs to settle", func() (bool, error) {
		m, err := e.metrics(ctx)
		if err != nil {
			return false, err
		}
		created, queued = m["cikit_runs_created_total"], m["cikit_queue_depth"]
		if created != last {
			last, stableSince = created, time.Now()
		}
		return time.Since(stableSince) >= time.Second, nil
	})
	if err != nil {
		return nil, err
	}
	r := result(len(sends), elapsed, "deliveries/s", lat,
		fmt.Sprintf("%d copies of 1 delivery + %d deliveries × %d, %d senders; latency: the webhook's 202; runs created %.0f, jobs queued %.0f, want %d",
			b.sizes.stormCopies, b.sizes.stormDistinct, b.sizes.stormK, senders, created, queued, len(ids)))
	for _, id := range ids {
		d, err := e.seen(ctx, id)
		if err != nil {
			return r, err
		}
		if len(d.RunIDs) != 1 {
			return r, fmt.Errorf("delivery %s has %d runs, want 1", id, len(d.RunIDs))
		}
	}
	if int(created) != len(ids) || int(queued) != len(ids) {
		return r, fmt.Errorf("duplicates created runs: %.0f runs created and %.0f jobs queued for %d distinct deliveries", created, queued, len(ids))
	}
	return r, nil
}

// metrics reads the platform's Prometheus metrics, summing the series of
// each name.
func (e *env) metrics(ctx context.Context) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.url+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		sep := strings.LastIndexByte(line, ' ')
		if sep < 0 {
			continue
		}
		name := line[:sep]
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name = name[:i]
		}
		v, err := strconv.ParseFloat(line[sep+1:], 64)
		if err != nil {
			continue
		}
		out[name] += v
	}
	return out, sc.Err()
}
