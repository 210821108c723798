// Package kafkatest starts an in-process Kafka cluster for each test
// (franz-go's kfake), so tests run real franz-go clients against a broker
// of their own: no shared topics, no offsets left over from another test,
// no service to install.
//
// # Use
//
//	func TestPublish(t *testing.T) {
//		t.Parallel()
//		kc := kafkatest.New(t, "events")
//		cl := kc.Client(t) // closed when the test ends
//		require.NoError(t, cl.ProduceSync(t.Context(), &kgo.Record{Topic: "events", Value: []byte("v")}).FirstErr())
//		recs := kc.Consume(t, "events", 1)
//		require.Equal(t, "v", string(recs[0].Value))
//	}
//
// Code under test takes its seed brokers as configuration and is given
// [Cluster.Addrs], or is handed a client made by [Cluster.Client].
//
// # Guarantees
//
//   - Every call to [New] starts a new single-broker cluster listening on a
//     free loopback port, with the given topics created with [Partitions]
//     partitions each; [Cluster.CreateTopic] adds topics of another size.
//   - When the test ends every client made by [Cluster.Client] is closed,
//     then the cluster. Closing the cluster earlier, to see what code does
//     when the broker is gone, is allowed: [Cluster.Close] may be called
//     more than once.
//   - Helpers that wait, such as [Cluster.Consume], give up after
//     [WaitTimeout] and fail the test; helpers that fail the test call
//     t.Fatal and so, like it, must be called from the test's goroutine.
//   - [Cluster.Fake] is the kfake cluster itself, for injecting faults
//     (kfake.Fault, ControlKey) and inspecting groups (GroupInfo).
//
// kfake implements the Kafka protocol, consumer groups included, in memory;
// it does not replicate, so acks=all is acknowledged by its one broker.
//
// # Stability
//
// Internal to cikit; changes with its callers.
package kafkatest
