package kafkatest_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/cikit/cikit/internal/kafkatest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestProduceConsume(t *testing.T) {
	t.Parallel()
	kc := kafkatest.New(t, "events")

	var recs []*kgo.Record
	for i := range 20 {
		recs = append(recs, &kgo.Record{Topic: "events", Key: []byte("k" + strconv.Itoa(i%5)), Value: []byte(strconv.Itoa(i))})
	}
	kc.Produce(t, recs...)
	var total int64
	for _, r := range recs {
		require.GreaterOrEqual(t, r.Offset, int64(0))
		require.Less(t, r.Partition, int32(kafkatest.Partitions))
	}
	ends := kc.EndOffsets(t, "events")
	require.Len(t, ends, kafkatest.Partitions)
	for _, end := range ends {
		total += end
	}
	require.Equal(t, int64(len(recs)), total)

	got := kc.Consume(t, "events", len(recs))
	require.Len(t, got, len(recs))
	seen := make(map[string]bool)
	for _, r := range got {
		seen[string(r.Value)] = true
	}
	require.Len(t, seen, len(recs))
}

func TestCreateTopic(t *testing.T) {
	t.Parallel()
	kc := kafkatest.New(t)
	kc.CreateTopic(t, "one", 1)
	kc.Produce(t, &kgo.Record{Topic: "one", Value: []byte("a")}, &kgo.Record{Topic: "one", Value: []byte("b")})
	require.Equal(t, map[int32]int64{0: 2}, kc.EndOffsets(t, "one"))
}

func TestCommitted(t *testing.T) {
	t.Parallel()
	kc := kafkatest.New(t)
	kc.CreateTopic(t, "events", 2)
	require.Empty(t, kc.Committed(t, "g", "events"))

	cl := kc.Client(t, kgo.ConsumerGroup("g"), kgo.ConsumeTopics("events"))
	kc.Produce(t, &kgo.Record{Topic: "events", Partition: 0, Value: []byte("a")})
	var polled []*kgo.Record
	for len(polled) == 0 {
		fetches := cl.PollFetches(t.Context())
		require.NoError(t, fetches.Err())
		polled = fetches.Records()
	}
	require.NoError(t, cl.CommitRecords(t.Context(), polled...))
	committed := kc.Committed(t, "g", "events")
	require.Len(t, committed, 1)
	require.Equal(t, polled[0].Offset+1, committed[polled[0].Partition])
}

// TestCleanupClosesClientsAndCluster watches a sub-test's cleanups from
// the parent: they have run when t.Run returns.
func TestCleanupClosesClientsAndCluster(t *testing.T) {
	t.Parallel()
	var cl *kgo.Client
	var addrs []string
	t.Run("user", func(t *testing.T) {
		kc := kafkatest.New(t, "events")
		addrs = kc.Addrs()
		cl = kc.Client(t)
		require.NoError(t, cl.Ping(t.Context()))
	})

	err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "events"}).FirstErr()
	require.ErrorIs(t, err, kgo.ErrClientClosed)

	fresh, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RequestRetries(0))
	require.NoError(t, err)
	defer fresh.Close()
	ctx, cancel := context.WithTimeout(t.Context(), kafkatest.WaitTimeout)
	defer cancel()
	err = fresh.Ping(ctx)
	require.Error(t, err)
	require.False(t, errors.Is(err, context.DeadlineExceeded), "the closed cluster should refuse connections, not hang: %v", err)
}

func TestCloseTwice(t *testing.T) {
	t.Parallel()
	kc := kafkatest.New(t)
	kc.Close()
	kc.Close() // and once more in cleanup
}
