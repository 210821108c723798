package ingest_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cikit/cikit/ingest"
	"github.com/cikit/cikit/internal/kafkatest"
)

func testEvent() *ingest.Event {
	return &ingest.Event{
		Provider:   ingest.GitHub,
		DeliveryID: "72d3162e-cc78-11e3-81ab-4c9367dc0958",
		Kind:       ingest.KindPush,
		Org:        "acme",
		Repo:       "api",
		RefType:    ingest.RefBranch,
		RefName:    "main",
		SHA:        "9f2c1e0d5b7a4c3e8f6d2a1b0c9e8d7f6a5b4c3d",
		EventTime:  time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC),
		Raw:        json.RawMessage(`{"ref":"refs/heads/main"}`),
	}
}

// headerMap returns a record's headers by key.
func headerMap(rec *kgo.Record) map[string]string {
	m := make(map[string]string, len(rec.Headers))
	for _, h := range rec.Headers {
		m[h.Key] = string(h.Value)
	}
	return m
}

// total sums offsets over partitions: end offsets add up to the records
// of a topic.
func total(offsets map[int32]int64) int64 {
	var n int64
	for _, o := range offsets {
		n += o
	}
	return n
}

func TestKafkaPublisherPublishes(t *testing.T) {
	t.Parallel()
	kc := kafkatest.New(t, ingest.TopicVCSEvents)
	pub, err := ingest.NewKafkaPublisher(ingest.KafkaPublisherConfig{Client: kc.Client(t)})
	require.NoError(t, err)

	ev := testEvent()
	require.NoError(t, pub.Publish(t.Context(), ev))

	// Publish returned after the ack: the record is there without waiting.
	require.EqualValues(t, 1, total(kc.EndOffsets(t, ingest.TopicVCSEvents)))
	rec := kc.Consume(t, ingest.TopicVCSEvents, 1)[0]
	require.Equal(t, "acme/api/branch/main", string(rec.Key))
	require.Equal(t, map[string]string{
		ingest.RecordHeaderProvider:   "github",
		ingest.RecordHeaderDeliveryID: ev.DeliveryID,
		ingest.RecordHeaderKind:       "push",
	}, headerMap(rec))
	var got ingest.Event
	require.NoError(t, json.Unmarshal(rec.Value, &got))
	require.Equal(t, *ev, got)
}

func TestKafkaPublisherTopic(t *testing.T) {
	t.Parallel()
	kc := kafkatest.New(t, "custom")
	pub, err := ingest.NewKafkaPublisher(ingest.KafkaPublisherConfig{Client: kc.Client(t), Topic: "custom"})
	require.NoError(t, err)
	require.NoError(t, pub.Publish(t.Context(), testEvent()))
	require.EqualValues(t, 1, total(kc.EndOffsets(t, "custom")))
}

// TestKafkaPublisherBrokerDown publishes to a cluster that is gone: the
// event is not stored, so Publish must say so rather than succeed.
func TestKafkaPublisherBrokerDown(t *testing.T) {
	t.Parallel()
	kc := kafkatest.New(t, ingest.TopicVCSEvents)
	cl := kc.Client(t)
	pub, err := ingest.NewKafkaPublisher(ingest.KafkaPublisherConfig{Client: cl})
	require.NoError(t, err)
	require.NoError(t, pub.Publish(t.Context(), testEvent())) // connected and warm
	kc.Close()

	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	err = pub.Publish(ctx, testEvent())
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "publish delivery 72d3162e-cc78-11e3-81ab-4c9367dc0958 to cikit.vcs-events")
}

func TestNewKafkaPublisherNeedsClient(t *testing.T) {
	t.Parallel()
	_, err := ingest.NewKafkaPublisher(ingest.KafkaPublisherConfig{})
	require.ErrorContains(t, err, "Client is required")
}

// TestKafkaPublisherFeedsConsumer publishes events and consumes them with
// the Consumer, as the platform does: the events of one ref arrive in
// order.
func TestKafkaPublisherFeedsConsumer(t *testing.T) {
	t.Parallel()
	kc := kafkatest.New(t, ingest.TopicVCSEvents, ingest.TopicVCSEventsDLQ)
	pub, err := ingest.NewKafkaPublisher(ingest.KafkaPublisherConfig{Client: kc.Client(t)})
	require.NoError(t, err)
	var want []string
	for _, sha := range []string{"a1", "b2", "c3", "d4"} {
		ev := testEvent()
		ev.SHA, ev.DeliveryID = sha, "delivery-"+sha
		require.NoError(t, pub.Publish(t.Context(), ev))
		want = append(want, sha)
	}

	got := make(chan string, len(want))
	cfg := consumerConfig(t, kc, func(_ context.Context, rec *kgo.Record) error {
		var ev ingest.Event
		if err := json.Unmarshal(rec.Value, &ev); err != nil {
			return ingest.Permanent(err)
		}
		got <- ev.SHA
		return nil
	})
	cfg.Topic, cfg.DLQTopic = "", ""
	startConsumer(t, cfg)
	for _, sha := range want {
		select {
		case g := <-got:
			require.Equal(t, sha, g)
		case <-time.After(kafkatest.WaitTimeout):
			t.Fatalf("event %s not consumed", sha)
		}
	}
}
