package kafkatest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Partitions is the partition count of the topics [New] creates: more than
// one, so that tests see records of different keys processed in parallel.
const Partitions = 4

// WaitTimeout bounds how long a helper waits for records or offsets before
// it fails the test.
const WaitTimeout = 30 * time.Second

// Cluster is one test's Kafka cluster.
type Cluster struct {
	// Fake is the in-process cluster, for fault injection and group
	// inspection.
	Fake *kfake.Cluster

	// cl produces for Produce and carries admin requests; consumers are
	// clients of their own so that their offsets never mix.
	cl    *kgo.Client
	admin *kadm.Client
}

// New starts a cluster with the given topics, each of [Partitions]
// partitions. The cluster is closed when t ends.
func New(t testing.TB, topics ...string) *Cluster {
	t.Helper()
	opts := []kfake.Opt{kfake.NumBrokers(1)}
	if len(topics) > 0 {
		opts = append(opts, kfake.SeedTopics(Partitions, topics...))
	}
	fake, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("kafkatest: start cluster: %v", err)
	}
	c := &Cluster{Fake: fake}
	// Registered before any client's cleanup, so it runs after them:
	// clients leave their groups while the broker is still there.
	t.Cleanup(c.Close)
	c.cl = c.Client(t)
	c.admin = kadm.NewClient(c.cl)
	return c
}

// Close shuts the cluster down; clients pointed at it get errors from then
// on. It is safe to call more than once.
func (c *Cluster) Close() {
	c.Fake.Close()
}

// Addrs returns the addresses of the cluster's brokers, for
// kgo.SeedBrokers.
func (c *Cluster) Addrs() []string {
	return c.Fake.ListenAddrs()
}

// Client returns a client of the cluster configured with opts; the seed
// brokers are set already. The client is closed when t ends.
func (c *Cluster) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Addrs()...)}, opts...)...)
	if err != nil {
		t.Fatalf("kafkatest: new client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// CreateTopic creates topic with the given number of partitions.
func (c *Cluster) CreateTopic(t testing.TB, topic string, partitions int32) {
	t.Helper()
	if err := c.Fake.CreateTopic(topic, partitions, nil); err != nil {
		t.Fatalf("kafkatest: create topic %s: %v", topic, err)
	}
}

// Produce writes recs and returns once the broker has acknowledged all of
// them; each record's Partition and Offset are then set. Records without a
// topic fail the test.
func (c *Cluster) Produce(t testing.TB, recs ...*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), WaitTimeout)
	defer cancel()
	if err := c.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("kafkatest: produce %d records: %v", len(recs), err)
	}
}

// Consume reads topic from its start, outside any consumer group, until it
// has n records, and returns them: in offset order within a partition, in
// no particular order across partitions. It fails the test when fewer than
// n records arrive within [WaitTimeout].
func (c *Cluster) Consume(t testing.TB, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(c.Addrs()...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	if err != nil {
		t.Fatalf("kafkatest: new consumer: %v", err)
	}
	defer cl.Close()

	ctx, cancel := context.WithTimeout(t.Context(), WaitTimeout)
	defer cancel()
	recs := make([]*kgo.Record, 0, n)
	for len(recs) < n {
		fetches := cl.PollRecords(ctx, n-len(recs))
		if ctx.Err() != nil {
			t.Fatalf("kafkatest: consume %s: %d of %d records within %v", topic, len(recs), n, WaitTimeout)
		}
		if err := fetches.Err(); err != nil {
			t.Fatalf("kafkatest: consume %s: %v", topic, err)
		}
		recs = append(recs, fetches.Records()...)
	}
	return recs
}

// Committed returns the offsets group has committed for the partitions of
// topic: the offset of the next record the group will read. Partitions
// without a commit are absent, as are all of them when the group does not
// exist.
func (c *Cluster) Committed(t testing.TB, group, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), WaitTimeout)
	defer cancel()
	committed := make(map[int32]int64)
	resps, err := c.admin.FetchOffsetsForTopics(ctx, group, topic)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return committed // a group that never committed
	}
	if err != nil {
		t.Fatalf("kafkatest: fetch offsets of group %s: %v", group, err)
	}
	if err := resps.Error(); err != nil {
		t.Fatalf("kafkatest: fetch offsets of group %s: %v", group, err)
	}
	for p, resp := range resps[topic] {
		if resp.At >= 0 {
			committed[p] = resp.At
		}
	}
	return committed
}

// EndOffsets returns, for every partition of topic, the offset the next
// record written to it will get: its record count, while nothing is
// deleted.
func (c *Cluster) EndOffsets(t testing.TB, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), WaitTimeout)
	defer cancel()
	listed, err := c.admin.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("kafkatest: list end offsets of %s: %v", topic, err)
	}
	if err := listed.Error(); err != nil {
		t.Fatalf("kafkatest: list end offsets of %s: %v", topic, err)
	}
	ends := make(map[int32]int64)
	for p, o := range listed[topic] {
		ends[p] = o.Offset
	}
	return ends
}
