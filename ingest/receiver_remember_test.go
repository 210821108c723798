package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/ingest"
)

// TestReceiverRemembers: a verified redelivery of a published event is
// answered 202 as a duplicate and not published again; what differs in
// anything the event is made of is published.
func TestReceiverRemembers(t *testing.T) {
	t.Parallel()
	b := setupReceiver(t, nil)
	deliver := func(req *http.Request) map[string]string {
		t.Helper()
		status, body, _ := serveDelivery(t, b.receiver, req)
		require.Equal(t, http.StatusAccepted, status, "%v", body)
		return body
	}
	published := map[string]string{"delivery_id": "gh-1"}
	duplicate := map[string]string{"delivery_id": "gh-1", "duplicate": "true"}
	require.Equal(t, published, deliver(gitHubRequest("push", "gh-1", testPushBody, testGitHubSecret)))
	require.Equal(t, duplicate, deliver(gitHubRequest("push", "gh-1", testPushBody, testGitHubSecret)))
	require.Len(t, b.publisher.published(), 1)

	// The same delivery id with another body, hook or event is another
	// event (a forgery, or a provider's bug): the consumer decides.
	other := `{"ref":"refs/heads/dev","after":"3333333333333333333333333333333333333333","repository":{"name":"api","owner":{"login":"acme"}}}`
	require.Equal(t, published, deliver(gitHubRequest("push", "gh-1", other, testGitHubSecret)))
	req := gitHubRequest("push", "gh-1", testPushBody, testGitHubSecret)
	req.Header.Set("X-GitHub-Hook-ID", "43")
	require.Equal(t, published, deliver(req))
	require.Len(t, b.publisher.published(), 3)

	// Each provider's delivery id is its own.
	require.Equal(t, map[string]string{"delivery_id": "gl-1"}, deliver(gitLabRequest("gl-1", testGitLabPushBody, testGitLabToken)))
	require.Equal(t, map[string]string{"delivery_id": "gl-1", "duplicate": "true"}, deliver(gitLabRequest("gl-1", testGitLabPushBody, testGitLabToken)))
	require.Equal(t, map[string]string{"delivery_id": "msg_1"}, deliver(standardRequest(t, "msg_1", testDispatchBody, testStandardSecret, receiverNow)))
	require.Equal(t, map[string]string{"delivery_id": "msg_1", "duplicate": "true"}, deliver(standardRequest(t, "msg_1", testDispatchBody, testStandardSecret, receiverNow)))
	require.Len(t, b.publisher.published(), 5)

	// A redelivery is verified first: a forged copy of a remembered
	// delivery is refused.
	status, _, _ := serveDelivery(t, b.receiver, gitHubRequest("push", "gh-1", testPushBody, "a guess"))
	require.Equal(t, http.StatusUnauthorized, status)
}

// TestReceiverForgets: what was not published is not remembered, the
// oldest delivery is forgotten past Remember, and a negative Remember
// publishes every copy.
func TestReceiverForgets(t *testing.T) {
	t.Parallel()
	t.Run("refused, ignored or failed", func(t *testing.T) {
		t.Parallel()
		fail := &switchPublisher{}
		fail.fail.Store(true)
		b := setupReceiver(t, func(c *ingest.ReceiverConfig) { c.Publisher = fail })
		push := func() int {
			status, _, _ := serveDelivery(t, b.receiver, gitHubRequest("push", "gh-1", testPushBody, testGitHubSecret))
			return status
		}
		require.Equal(t, http.StatusServiceUnavailable, push())
		fail.fail.Store(false)
		require.Equal(t, http.StatusAccepted, push(), "the redelivery after a failure is published")
		require.EqualValues(t, 1, fail.published.Load())

		for range 2 {
			status, body, _ := serveDelivery(t, b.receiver, gitHubRequest("ping", "gh-2", `{"zen":"x"}`, testGitHubSecret))
			require.Equal(t, http.StatusOK, status)
			require.NotContains(t, body, "duplicate")
			status, _, _ = serveDelivery(t, b.receiver, gitHubRequest("push", "gh-3", `{"ref":"refs/heads/main"}`, testGitHubSecret))
			require.Equal(t, http.StatusBadRequest, status)
		}
	})
	t.Run("oldest first", func(t *testing.T) {
		t.Parallel()
		b := setupReceiver(t, func(c *ingest.ReceiverConfig) { c.Remember = 2 })
		for _, id := range []string{"gh-1", "gh-2", "gh-3", "gh-3", "gh-2", "gh-1"} {
			status, _, _ := serveDelivery(t, b.receiver, gitHubRequest("push", id, testPushBody, testGitHubSecret))
			require.Equal(t, http.StatusAccepted, status)
		}
		var ids []string
		for _, ev := range b.publisher.published() {
			ids = append(ids, ev.DeliveryID)
		}
		require.Equal(t, []string{"gh-1", "gh-2", "gh-3", "gh-1"}, ids)
	})
	t.Run("negative", func(t *testing.T) {
		t.Parallel()
		b := setupReceiver(t, func(c *ingest.ReceiverConfig) { c.Remember = -1 })
		for range 3 {
			status, body, _ := serveDelivery(t, b.receiver, gitHubRequest("push", "gh-1", testPushBody, testGitHubSecret))
			require.Equal(t, http.StatusAccepted, status)
			require.Equal(t, map[string]string{"delivery_id": "gh-1"}, body)
		}
		require.Len(t, b.publisher.published(), 3)
	})
}

// switchPublisher fails while fail is set, and counts what it publishes.
type switchPublisher struct {
	fail      atomic.Bool
	published atomic.Int64
}

func (p *switchPublisher) Publish(ctx context.Context, ev *ingest.Event) error {
	if p.fail.Load() {
		return errors.New("kafka: broker down")
	}
	p.published.Add(1)
	return nil
}

// gatePublisher holds every Publish until released, then fails the first
// failures calls and publishes the rest.
type gatePublisher struct {
	release  chan struct{}
	calls    atomic.Int64
	failures int64
}

func (p *gatePublisher) Publish(ctx context.Context, ev *ingest.Event) error {
	n := p.calls.Add(1)
	<-p.release
	if n <= p.failures {
		return errors.New("kafka: broker down")
	}
	return nil
}

// TestReceiverJoinsCopiesInFlight: copies of a delivery arriving while it
// is being published wait for that publication; when it fails, they make
// their own attempt instead of failing with it.
func TestReceiverJoinsCopiesInFlight(t *testing.T) {
	t.Parallel()
	for _, failures := range []int64{0, 1} {
		t.Run(fmt.Sprintf("failures=%d", failures), func(t *testing.T) {
			t.Parallel()
			pub := &gatePublisher{release: make(chan struct{}), failures: failures}
			b := setupReceiver(t, func(c *ingest.ReceiverConfig) { c.Publisher = pub })
			const n = 20
			answers := make([]map[string]string, n)
			statuses := make([]int, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					statuses[i], answers[i], _ = serveDelivery(t, b.receiver, gitHubRequest("push", "gh-1", testPushBody, testGitHubSecret))
				})
			}
			require.Eventually(t, func() bool { return pub.calls.Load() == 1 }, time.Minute, time.Millisecond, "one copy publishes")
			// Give the other copies time to arrive and wait. One arriving
			// later finds the delivery published, so the counts below
			// hold either way; only a copy that publishes while another
			// is in flight breaks them.
			time.Sleep(50 * time.Millisecond)
			require.EqualValues(t, 1, pub.calls.Load(), "copies in flight wait")
			close(pub.release)
			wg.Wait()
			// The copies waiting when the first attempt failed retry one
			// at a time; the first success makes the rest duplicates.
			require.EqualValues(t, failures+1, pub.calls.Load(), "Publish calls")
			count := map[string]int{}
			for i := range n {
				switch {
				case statuses[i] == http.StatusServiceUnavailable:
					count["failed"]++
				case statuses[i] == http.StatusAccepted && answers[i]["duplicate"] == "true":
					count["duplicate"]++
				case statuses[i] == http.StatusAccepted:
					count["published"]++
				default:
					t.Fatalf("copy %d: %d %v", i, statuses[i], answers[i])
				}
			}
			want := map[string]int{"published": 1, "duplicate": n - 1 - int(failures)}
			if failures > 0 {
				want["failed"] = int(failures)
			}
			require.Equal(t, want, count)
		})
	}
}
