package ingest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cikit/cikit/ingest"
	"github.com/cikit/cikit/internal/kafkatest"
)

// TestReceiverEventTooLargeForKafkaIs413: a delivery under MaxBodyBytes
// whose event is larger than a Kafka record may be (the producer's and
// the brokers' default is about 1 MB) can never be published; it is
// answered 413 naming the limit, not 503 "deliver it again later" with a
// Retry-After, which a provider would follow forever. It failed before:
// the answer was 503 and the log an ERROR.
func TestReceiverEventTooLargeForKafkaIs413(t *testing.T) {
	t.Parallel()
	cluster := kafkatest.New(t, ingest.TopicVCSEvents)
	pub, err := ingest.NewKafkaPublisher(ingest.KafkaPublisherConfig{Client: cluster.Client(t, kgo.ProducerLinger(0))})
	require.NoError(t, err)
	recv, err := ingest.NewReceiver(ingest.ReceiverConfig{GitHubSecrets: []string{e2eSecret}, Publisher: pub})
	require.NoError(t, err)
	srv := httptest.NewServer(recv)
	t.Cleanup(srv.Close)

	// A push with a 2 MiB field the normalizer ignores: the event keeps
	// the body as Raw.
	push := repoPush("api", strings.Repeat("0", 40), strings.Repeat("a", 40))
	body := append(append([]byte(`{"padding": "`), bytes.Repeat([]byte("x"), 2<<20)...), append([]byte(`", `), push[1:]...)...)
	require.Less(t, int64(len(body)), int64(ingest.DefaultMaxBodyBytes))
	req, err := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", "d-too-large")
	req.Header.Set("X-GitHub-Hook-ID", "42")
	req.Header.Set("X-Hub-Signature-256", ingest.SignGitHub(e2eSecret, body))
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var answer struct {
		Error      string `json:"error"`
		DeliveryID string `json:"delivery_id"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&answer))
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, answer.Error)
	require.Empty(t, resp.Header.Get("Retry-After"))
	require.Contains(t, answer.Error, "larger than")
	require.Equal(t, "d-too-large", answer.DeliveryID)

	// Publish says so with a sentinel.
	ev := testEvent()
	ev.Raw = body
	require.True(t, errors.Is(pub.Publish(t.Context(), ev), ingest.ErrEventTooLarge))
}
