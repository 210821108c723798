package ingest_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/ingest"
)

// TestReceiverRemembers: a verified redelivery of a published event is
// answered 202 as a duplicate and not published again; another delivery
// key (provider, hook, delivery id) is another delivery, published.
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

	// The same delivery id from another hook is another delivery (with
	// another body, see TestReceiverRefusesConflictingRedelivery).
	req := gitHubRequest("push", "gh-1", testPushBody, testGitHubSecret)
	req.Header.Set("X-GitHub-Hook-ID", "43")
	require.Equal(t, published, deliver(req))
	require.Len(t, b.publisher.published(), 2)

	// Each provider's delivery id is its own.
	require.Equal(t, map[string]string{"delivery_id": "gl-1"}, deliver(gitLabRequest("gl-1", testGitLabPushBody, testGitLabToken)))
	require.Equal(t, map[string]string{"delivery_id": "gl-1", "duplicate": "true"}, deliver(gitLabRequest("gl-1", testGitLabPushBody, testGitLabToken)))
	require.Equal(t, map[string]string{"delivery_id": "msg_1"}, deliver(standardRequest(t, "msg_1", testDispatchBody, testStandardSecret, receiverNow)))
	require.Equal(t, map[string]string{"delivery_id": "msg_1", "duplicate": "true"}, deliver(standardRequest(t, "msg_1", testDispatchBody, testStandardSecret, receiverNow)))
	require.Len(t, b.publisher.published(), 4)

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

// TestReceiverRefusesConflictingRedelivery: a delivery with the key of
// one published before (provider, hook, delivery id) and another body is
// answered 409, not published, and logged as a warning with the delivery
// id, the source and both digests; the same body again is still a
// duplicate, and the key of a GitLab delivery includes its object kind,
// which two webhooks of one chain of events (one X-Gitlab-Event-UUID)
// differ in. (Before, the conflicting delivery was answered 202 and
// published, for the consumer to drop without a trace.)
func TestReceiverRefusesConflictingRedelivery(t *testing.T) {
	t.Parallel()
	b := setupReceiver(t, nil)
	status, body, _ := serveDelivery(t, b.receiver, gitHubRequest("push", "gh-1", testPushBody, testGitHubSecret))
	require.Equal(t, http.StatusAccepted, status, "%v", body)

	other := `{"ref":"refs/heads/dev","after":"3333333333333333333333333333333333333333","repository":{"name":"api","owner":{"login":"acme"}}}`
	status, body, _ = serveDelivery(t, b.receiver, gitHubRequest("push", "gh-1", other, testGitHubSecret))
	require.Equal(t, http.StatusConflict, status, "%v", body)
	require.Equal(t, "gh-1", body["delivery_id"])
	require.Contains(t, body["error"], "another body")
	require.Len(t, b.publisher.published(), 1, "the conflicting delivery is not published")
	logs := b.logs.String()
	line := logLine(t, logs, "conflicting redelivery")
	require.Contains(t, line, "level=WARN")
	require.Contains(t, line, "delivery_id=gh-1")
	require.Contains(t, line, "source=GitHub")
	require.Contains(t, line, "digest_published="+sha256Hex(testPushBody))
	require.Contains(t, line, "digest="+sha256Hex(other))

	status, body, _ = serveDelivery(t, b.receiver, gitHubRequest("push", "gh-1", testPushBody, testGitHubSecret))
	require.Equal(t, http.StatusAccepted, status)
	require.Equal(t, "true", body["duplicate"], "the same body is still a redelivery")

	// GitLab: a push and a merge request of one chain share the event
	// UUID, and are two deliveries; another push under it conflicts.
	gl := func(body string) *http.Request {
		req := gitLabRequest("", body, testGitLabToken)
		req.Header.Del("Idempotency-Key")
		req.Header.Set("X-Gitlab-Event-UUID", "chain-1")
		return req
	}
	status, body, _ = serveDelivery(t, b.receiver, gl(testGitLabPushBody))
	require.Equal(t, http.StatusAccepted, status, "%v", body)
	mr := `{"object_kind":"merge_request","project":{"path_with_namespace":"acme/platform/api"},"object_attributes":{"iid":7,` +
		`"action":"update","state":"opened","source_branch":"dev","target_branch":"main","updated_at":"2026-03-02T10:00:00Z",` +
		`"last_commit":{"id":"2222222222222222222222222222222222222222"}}}`
	status, body, _ = serveDelivery(t, b.receiver, gl(mr))
	require.Equal(t, http.StatusAccepted, status, "another object kind is another delivery: %v", body)
	require.Empty(t, body["duplicate"])
	status, body, _ = serveDelivery(t, b.receiver, gl(strings.Replace(testGitLabPushBody, "2222", "3333", 2)))
	require.Equal(t, http.StatusConflict, status, "%v", body)
}

// TestReceiverConflictInFlight: a copy with another body that arrives
// while the first delivery of its key is being published waits for it,
// then is refused as a conflict.
func TestReceiverConflictInFlight(t *testing.T) {
	t.Parallel()
	pub := &gatePublisher{release: make(chan struct{})}
	b := setupReceiver(t, func(c *ingest.ReceiverConfig) { c.Publisher = pub })
	first := make(chan int)
	go func() {
		status, _, _ := serveDelivery(t, b.receiver, gitHubRequest("push", "gh-1", testPushBody, testGitHubSecret))
		first <- status
	}()
	require.Eventually(t, func() bool { return pub.calls.Load() == 1 }, 10*time.Second, time.Millisecond, "the first copy publishes")
	second := make(chan int)
	other := `{"ref":"refs/heads/dev","after":"3333333333333333333333333333333333333333","repository":{"name":"api","owner":{"login":"acme"}}}`
	go func() {
		status, _, _ := serveDelivery(t, b.receiver, gitHubRequest("push", "gh-1", other, testGitHubSecret))
		second <- status
	}()
	close(pub.release)
	require.Equal(t, http.StatusAccepted, <-first)
	require.Equal(t, http.StatusConflict, <-second)
	require.EqualValues(t, 1, pub.calls.Load(), "the conflicting copy is not published")
}

// logLine returns the line of logs that contains msg.
func logLine(t *testing.T, logs, msg string) string {
	t.Helper()
	for l := range strings.SplitSeq(logs, "\n") {
		if strings.Contains(l, msg) {
			return l
		}
	}
	t.Fatalf("no log line says %q in:\n%s", msg, logs)
	return ""
}

// sha256Hex is the digest of a body as deliveries are told apart by.
func sha256Hex(body string) string {
	sum := sha256.Sum256([]byte(body))
	return "sha256:" + hex.EncodeToString(sum[:])
}
