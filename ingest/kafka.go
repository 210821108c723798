package ingest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Kafka topics of the platform.
const (
	// TopicVCSEvents carries verified webhook deliveries as JSON Events,
	// keyed by Event.Key so that the events of one ref stay in order.
	TopicVCSEvents = "cikit.vcs-events"
	// TopicVCSEventsDLQ receives the records of TopicVCSEvents that could
	// not be processed, with the record headers RecordHeaderOrigin*,
	// RecordHeaderError and RecordHeaderAttempts saying where they came
	// from and why they failed.
	TopicVCSEventsDLQ = "cikit.vcs-events.dlq"
	// TopicPipelineEvents carries pipeline run and job state changes from
	// the outbox.
	TopicPipelineEvents = "cikit.pipeline-events"
	// TopicDispatchP0, TopicDispatchP1 and TopicDispatchP2 carry jobs that
	// are ready to run, one topic per priority lane, P0 the most urgent.
	TopicDispatchP0 = "cikit.dispatch.p0"
	TopicDispatchP1 = "cikit.dispatch.p1"
	TopicDispatchP2 = "cikit.dispatch.p2"
)

// Record headers. The publisher sets the first three on every event so
// that tools can route and trace a record without parsing its value; the
// Consumer sets the others on the records it dead-letters, next to the
// original record's headers.
const (
	RecordHeaderProvider   = "cikit-provider"    // Event.Provider
	RecordHeaderDeliveryID = "cikit-delivery-id" // Event.DeliveryID
	RecordHeaderKind       = "cikit-kind"        // Event.Kind

	RecordHeaderOriginTopic     = "cikit-origin-topic"     // topic the record was read from
	RecordHeaderOriginPartition = "cikit-origin-partition" // its partition, in decimal
	RecordHeaderOriginOffset    = "cikit-origin-offset"    // its offset, in decimal
	RecordHeaderError           = "cikit-error"            // the last error of the handler
	RecordHeaderAttempts        = "cikit-attempts"         // how many times the handler ran, in decimal
)

// KafkaPublisherConfig configures a KafkaPublisher.
type KafkaPublisherConfig struct {
	// Client produces the records. Required. The publisher does not close
	// it. Its producer settings decide durability: franz-go's default,
	// acks from all in-sync replicas with idempotence, is what Publish's
	// guarantee assumes. They decide latency too: Publish waits for the
	// ack, and a Receiver answers after Publish, so the client's linger
	// (franz-go waits 10ms by default for a batch to fill) is added to
	// every answer and bounds a Receiver serving N requests at once to
	// N per linger. Give a Receiver's client kgo.ProducerLinger(0):
	// records still go out in batches, those buffered while a produce
	// request is in flight.
	Client *kgo.Client
	// Topic receives the events. Default: TopicVCSEvents.
	Topic string
}

// KafkaPublisher publishes events to a Kafka topic, one record per event:
// the Event as JSON, keyed by Event.Key, with the headers
// RecordHeaderProvider, RecordHeaderDeliveryID and RecordHeaderKind.
//
// It is safe for concurrent use.
type KafkaPublisher struct {
	client *kgo.Client
	topic  string
}

var _ Publisher = (*KafkaPublisher)(nil)

// NewKafkaPublisher returns a publisher that produces with cfg.Client.
func NewKafkaPublisher(cfg KafkaPublisherConfig) (*KafkaPublisher, error) {
	if cfg.Client == nil {
		return nil, errors.New("ingest: KafkaPublisherConfig.Client is required")
	}
	return &KafkaPublisher{client: cfg.Client, topic: cmp.Or(cfg.Topic, TopicVCSEvents)}, nil
}

// Publish produces ev and returns once the broker has acknowledged it.
// When the broker cannot be reached Publish keeps trying until ctx ends or
// the client's delivery timeout (kgo.RecordDeliveryTimeout) passes, and
// then returns an error, so that the provider delivers the event again.
// An event whose Publish ended with ctx may still be stored later, as
// the client keeps retrying a record it has sent; the redelivery is then
// a duplicate with the same DeliveryID, which consumers drop.
func (p *KafkaPublisher) Publish(ctx context.Context, ev *Event) error {
	value, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("ingest: encode delivery %s: %w", ev.DeliveryID, err)
	}
	rec := &kgo.Record{
		Topic: p.topic,
		Key:   []byte(ev.Key()),
		Value: value,
		Headers: []kgo.RecordHeader{
			{Key: RecordHeaderProvider, Value: []byte(ev.Provider)},
			{Key: RecordHeaderDeliveryID, Value: []byte(ev.DeliveryID)},
			{Key: RecordHeaderKind, Value: []byte(ev.Kind)},
		},
	}
	if err := produce(ctx, p.client, rec); err != nil {
		if errors.Is(err, kerr.MessageTooLarge) {
			return fmt.Errorf("ingest: publish delivery %s to %s: %w (%d bytes): %w", ev.DeliveryID, p.topic, ErrEventTooLarge, len(value), err)
		}
		return fmt.Errorf("ingest: publish delivery %s to %s: %w", ev.DeliveryID, p.topic, err)
	}
	return nil
}

// ErrEventTooLarge is a Publisher's refusal of an event larger than its
// log accepts in one record (a Kafka record is at most the producer's
// kgo.ProducerBatchMaxBytes and the brokers' message.max.bytes, about 1 MB
// by default). It is permanent: publishing the event again fails again,
// so a Receiver answers it 413, not 503.
var ErrEventTooLarge = errors.New("the event is larger than the event log accepts in one record")

// produce writes rec and waits for the broker's answer or for ctx to end,
// whichever comes first. kgo's ProduceSync can outlive ctx: an idempotent
// producer does not withdraw a record it has sent, and retries it for as
// long as the client's delivery timeout allows. So the record may still be
// stored after produce returned ctx's error.
func produce(ctx context.Context, cl *kgo.Client, rec *kgo.Record) error {
	result := make(chan error, 1)
	cl.Produce(ctx, rec, func(_ *kgo.Record, err error) { result <- err })
	select {
	case err := <-result:
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
