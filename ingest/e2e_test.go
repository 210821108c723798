package ingest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/ingest"
	"github.com/cikit/cikit/internal/kafkatest"
	"github.com/cikit/cikit/vcs"
)

const e2eSecret = "It's a Secret to Everybody"

// platform is the ingest path end to end: a Receiver publishing to Kafka,
// a Consumer ingesting into PostgreSQL.
type platform struct {
	srv      *httptest.Server
	client   *http.Client
	runs     *ingest.PostgresRunStore
	dag      *dag.PostgresStore
	handled  atomic.Int64 // records the consumer ingested
	accepted atomic.Int64 // 202 answers published, not duplicates
	stop     func()
	vcs      *vcs.Memory
	consumer *ingest.Consumer
}

func newPlatform(t testing.TB, debounce time.Duration, remember int) *platform {
	t.Helper()
	cluster := kafkatest.New(t, ingest.TopicVCSEvents, ingest.TopicVCSEventsDLQ)
	pub, err := ingest.NewKafkaPublisher(ingest.KafkaPublisherConfig{Client: cluster.Client(t, kgo.ProducerLinger(0))})
	require.NoError(t, err)
	recv, err := ingest.NewReceiver(ingest.ReceiverConfig{GitHubSecrets: []string{e2eSecret}, Publisher: pub, Remember: remember})
	require.NoError(t, err)
	p := &platform{srv: httptest.NewServer(recv), vcs: &vcs.Memory{}}
	t.Cleanup(p.srv.Close)
	// Providers keep connections open; so do the test's clients.
	tr := p.srv.Client().Transport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	p.client = &http.Client{Transport: tr}
	t.Cleanup(tr.CloseIdleConnections)
	p.runs, p.dag = newPostgresRunStore(t, nil)
	in, err := ingest.NewIngester(ingest.IngesterConfig{Runs: p.runs, VCS: p.vcs, Debounce: debounce})
	require.NoError(t, err)
	p.consumer, err = ingest.NewConsumer(ingest.ConsumerConfig{Brokers: cluster.Addrs(), Group: "ingest",
		CommitInterval: 100 * time.Millisecond,
		Handler: func(ctx context.Context, rec *kgo.Record) error {
			err := in.HandleRecord(ctx, rec)
			if err == nil {
				p.handled.Add(1)
			}
			return err
		}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.consumer.Run(ctx) }()
	p.stop = func() {
		cancel()
		require.NoError(t, <-done)
	}
	t.Cleanup(func() {
		if ctx.Err() == nil {
			p.stop()
		}
	})
	return p
}

// pushBody is a GitHub push of acme/api's main branch to sha.
func pushBody(before, sha string) []byte { return repoPush("api", before, sha) }

// repoPush is a GitHub push of the main branch of acme's repo to sha.
func repoPush(repo, before, sha string) []byte {
	return fmt.Appendf(nil, `{"ref": "refs/heads/main", "before": %q, "after": %q, "created": false, "deleted": false,
		"head_commit": {"id": %q, "timestamp": "2026-11-30T09:00:00Z", "added": [], "removed": [], "modified": ["main.go"]},
		"commits": [{"id": %q, "timestamp": "2026-11-30T09:00:00Z", "added": [], "removed": [], "modified": ["main.go"]}],
		"repository": {"name": %q, "full_name": "acme/%s", "default_branch": "main", "owner": {"login": "acme"}},
		"pusher": {"name": "alice"}, "sender": {"login": "alice"}}`, before, sha, sha, sha, repo, repo)
}

func (p *platform) deliver(t testing.TB, delivery string, body []byte) int {
	req, err := http.NewRequest(http.MethodPost, p.srv.URL, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-GitHub-Hook-ID", "42")
	req.Header.Set("X-Hub-Signature-256", ingest.SignGitHub(e2eSecret, body))
	resp, err := p.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var answer struct {
		Duplicate bool `json:"duplicate"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&answer))
	_, _ = io.Copy(io.Discard, resp.Body) // read to the end, so the connection is reused
	if resp.StatusCode == http.StatusAccepted && !answer.Duplicate {
		p.accepted.Add(1)
	}
	return resp.StatusCode
}

// waitIngested waits until the consumer has ingested every record the
// receiver published.
func (p *platform) waitIngested(t testing.TB) {
	t.Helper()
	require.Eventually(t, func() bool { return p.handled.Load() == p.accepted.Load() }, 30*time.Second, 5*time.Millisecond,
		"the consumer ingests every record published")
}

func (p *platform) countRuns(t testing.TB) int {
	var n int
	require.NoError(t, p.dag.Pool().QueryRow(context.Background(), `SELECT count(*) FROM pipeline_runs`).Scan(&n))
	return n
}

// TestEndToEndOneRunPerDelivery sends one push 50 times at once with one
// delivery id, and once more later: every request is accepted, and
// exactly one run exists, with one set of outbox events — whether the
// Receiver remembers what it published (copies joined at the edge) or not
// (every copy published, the consumer drops them).
func TestEndToEndOneRunPerDelivery(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		remember  int
		published int64 // of the 50 copies
	}{
		{"receiver remembers", 0, 1},
		{"receiver forgets", -1, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testOneRunPerDelivery(t, tc.remember, tc.published)
		})
	}
}

func testOneRunPerDelivery(t *testing.T, remember int, published int64) {
	p := newPlatform(t, 0, remember)
	sha := "2222222222222222222222222222222222222222"
	p.vcs.AddCommit("acme/api", sha, map[string]string{".cikit.yml": native})
	body := pushBody("1111111111111111111111111111111111111111", sha)
	var wg sync.WaitGroup
	statuses := make([]int, 50)
	for i := range statuses {
		wg.Go(func() { statuses[i] = p.deliver(t, "delivery-1", body) })
	}
	wg.Wait()
	for i, s := range statuses {
		require.Equal(t, http.StatusAccepted, s, "request %d", i)
	}
	require.Equal(t, published, p.accepted.Load(), "copies published")
	p.waitIngested(t)
	require.Equal(t, 1, p.countRuns(t), "one run for 50 deliveries of one id")

	require.Equal(t, http.StatusAccepted, p.deliver(t, "delivery-1", body), "a redelivery later")
	p.waitIngested(t)
	require.Equal(t, http.StatusAccepted, p.deliver(t, "forged-id", body), "the same body under another id")
	want := published + 1 // the forged id
	if remember < 0 {
		want++ // the redelivery, forgotten
	}
	require.Equal(t, want, p.accepted.Load(), "records published")
	p.waitIngested(t)
	require.Equal(t, 1, p.countRuns(t), "still one run")

	evs, err := p.dag.OutboxPending(context.Background(), 1000)
	require.NoError(t, err)
	created := 0
	for _, e := range evs {
		if e.Type == dag.EventPipelineCreated {
			created++
		}
	}
	require.Equal(t, 1, created, "one set of outbox rows")
}

// benchPipeline runs on pushes of every branch.
const benchPipeline = `on: [push]
jobs:
  build:
    steps: [make]
  test:
    needs: [build]
    steps: [make test]
`

// benchmarkEndToEnd measures signed deliveries per second from the HTTP
// request to the committed run: 32 clients post pushes of the default
// branches of repos repositories (so without debounce or superseding) to
// the Receiver, which publishes to Kafka; the Consumer ingests them into
// PostgreSQL. With dupEvery > 0 all but one in dupEvery deliveries
// repeat the one before. remember is the Receiver's Remember.
func benchmarkEndToEnd(b *testing.B, dupEvery, repos, remember int) {
	p := newPlatform(b, -1, remember)
	type delivery struct {
		id   string
		body []byte
	}
	ds := make([]delivery, b.N)
	originals := 0
	for i := range ds {
		if dupEvery > 0 && i%dupEvery != 0 {
			ds[i] = ds[i-1]
			continue
		}
		sha, repo := fmt.Sprintf("%040x", i+1), fmt.Sprintf("api-%d", i%repos)
		p.vcs.AddCommit("acme/"+repo, sha, map[string]string{".cikit.yml": benchPipeline})
		ds[i] = delivery{id: fmt.Sprintf("d%d", i), body: repoPush(repo, fmt.Sprintf("%040x", i), sha)}
		originals++
	}
	const clients = 32
	var next atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(len(ds)) {
					return
				}
				if s := p.deliver(b, ds[i].id, ds[i].body); s != http.StatusAccepted {
					b.Errorf("delivery %d: status %d", i, s)
					return
				}
			}
		})
	}
	wg.Wait()
	accepted := time.Since(start)
	deadline := time.Now().Add(2 * time.Minute)
	for p.handled.Load() < p.accepted.Load() {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d records published ingested", p.handled.Load(), p.accepted.Load())
		}
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if n := p.countRuns(b); n != originals {
		b.Fatalf("%d runs for %d distinct deliveries", n, originals)
	}
	b.ReportMetric(float64(len(ds))/accepted.Seconds(), "accepted/s")
	b.ReportMetric(float64(len(ds))/elapsed.Seconds(), "deliveries/s")
	b.ReportMetric(float64(originals)/elapsed.Seconds(), "runs/s")
}

// BenchmarkEndToEnd: every delivery distinct, each committing a run. The
// number of repositories bounds the deliveries in flight, as those of
// one branch are ingested in order, and so the size of the group commits.
func BenchmarkEndToEnd(b *testing.B) {
	for _, repos := range []int{64, 1024} {
		b.Run(fmt.Sprintf("repos=%d", repos), func(b *testing.B) { benchmarkEndToEnd(b, 0, repos, 0) })
	}
}

// BenchmarkEndToEndDuplicateStorm: 99% of deliveries are redeliveries,
// absorbed by the Receiver's memory, or with none by the consumer.
func BenchmarkEndToEndDuplicateStorm(b *testing.B) {
	b.Run("receiver=remembers", func(b *testing.B) { benchmarkEndToEnd(b, 100, 64, 0) })
	b.Run("receiver=forgets", func(b *testing.B) { benchmarkEndToEnd(b, 100, 64, -1) })
}
