package ingest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cikit/cikit/ingest"
)

// A receiver publishes webhook events and a scheduler consumes them: the
// events of one branch in order, a record that is not an event in the
// dead-letter topic. The cluster is franz-go's in-process kfake; a real
// one differs only in its addresses.
func ExampleConsumer() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, ingest.TopicVCSEvents, ingest.TopicVCSEventsDLQ))
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	ctx := context.Background()

	producer, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	if err != nil {
		log.Fatal(err)
	}
	defer producer.Close()
	// Something wrote a broken record for acme/api's main branch …
	broken := &kgo.Record{Topic: ingest.TopicVCSEvents, Key: []byte("acme/api/branch/main"), Value: []byte("{")}
	if err := producer.ProduceSync(ctx, broken).FirstErr(); err != nil {
		log.Fatal(err)
	}
	// … before the receiver published three pushes to it.
	pub, err := ingest.NewKafkaPublisher(ingest.KafkaPublisherConfig{Client: producer})
	if err != nil {
		log.Fatal(err)
	}
	for _, sha := range []string{"1a2b3c", "4d5e6f", "7a8b9c"} {
		ev := &ingest.Event{Provider: ingest.GitHub, DeliveryID: "delivery-" + sha, Kind: ingest.KindPush,
			Org: "acme", Repo: "api", RefType: ingest.RefBranch, RefName: "main", SHA: sha}
		if err := pub.Publish(ctx, ev); err != nil {
			log.Fatal(err)
		}
	}

	runCtx, stop := context.WithCancel(ctx)
	consumer, err := ingest.NewConsumer(ingest.ConsumerConfig{
		Brokers: cluster.ListenAddrs(),
		Group:   "scheduler",
		Logger:  slog.New(slog.DiscardHandler),
		Handler: func(_ context.Context, rec *kgo.Record) error {
			var ev ingest.Event
			if err := json.Unmarshal(rec.Value, &ev); err != nil {
				return ingest.Permanent(fmt.Errorf("decode event: %w", err))
			}
			fmt.Println("schedule", ev.Key(), ev.SHA)
			if ev.SHA == "7a8b9c" {
				stop() // the last one; the broken record came first
			}
			return nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := consumer.Run(runCtx); err != nil {
		log.Fatal(err)
	}

	// The dead-letter topic says where the broken record came from.
	dlq, err := kgo.NewClient(
		kgo.SeedBrokers(cluster.ListenAddrs()...),
		kgo.ConsumeTopics(ingest.TopicVCSEventsDLQ),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer dlq.Close()
	rec := dlq.PollRecords(ctx, 1).Records()[0]
	for _, h := range rec.Headers {
		fmt.Printf("%s: %s\n", h.Key, h.Value)
	}

	// Output:
	// schedule acme/api/branch/main 1a2b3c
	// schedule acme/api/branch/main 4d5e6f
	// schedule acme/api/branch/main 7a8b9c
	// cikit-origin-topic: cikit.vcs-events
	// cikit-origin-partition: 2
	// cikit-origin-offset: 0
	// cikit-error: decode event: unexpected end of JSON input
	// cikit-attempts: 1
}
