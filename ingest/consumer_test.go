package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cikit/cikit/ingest"
	"github.com/cikit/cikit/internal/kafkatest"
)

// Test topics, created by each test's own cluster.
const (
	testTopic = "events"
	testDLQ   = "events.dlq"
	testGroup = "scheduler"
)

// consumerConfig is a configuration for tests: quick commits, retries and
// rebalances, and logs in the test's output.
func consumerConfig(t *testing.T, kc *kafkatest.Cluster, handler ingest.RecordHandler) ingest.ConsumerConfig {
	return ingest.ConsumerConfig{
		Brokers: kc.Addrs(),
		ClientOptions: []kgo.Opt{
			// Notice rebalances and resumed partitions quickly.
			kgo.HeartbeatInterval(50 * time.Millisecond),
			kgo.FetchMaxWait(50 * time.Millisecond),
		},
		Group:          testGroup,
		Topic:          testTopic,
		DLQTopic:       testDLQ,
		Handler:        handler,
		RetryBackoff:   func(int) time.Duration { return time.Millisecond },
		CommitInterval: 100 * time.Millisecond,
		Logger:         slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
}

// startConsumer runs a consumer built from cfg until the returned stop is called,
// or the test ends. stop returns once Run has.
func startConsumer(t *testing.T, cfg ingest.ConsumerConfig) (stop func()) {
	t.Helper()
	c, err := ingest.NewConsumer(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// waitUntil polls cond until it holds, failing the test after
// kafkatest.WaitTimeout.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, kafkatest.WaitTimeout, 5*time.Millisecond, "waiting for %s", what)
}

// waitCommitted waits until group's commits on topic equal want. It polls
// on the test's goroutine, as kafkatest's helpers fail the test.
func waitCommitted(t *testing.T, kc *kafkatest.Cluster, want map[int32]int64) {
	t.Helper()
	deadline := time.Now().Add(kafkatest.WaitTimeout)
	for {
		got := kc.Committed(t, testGroup, testTopic)
		if maps.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("committed offsets: got %v, want %v", got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// produceKeys writes perKey records for each of keys keys, interleaved,
// with values "key/seq", and returns them with partitions and offsets
// set.
func produceKeys(t *testing.T, kc *kafkatest.Cluster, keys, perKey int) []*kgo.Record {
	t.Helper()
	var recs []*kgo.Record
	for seq := range perKey {
		for k := range keys {
			key := "acme/repo" + strconv.Itoa(k) + "/branch/main"
			recs = append(recs, &kgo.Record{Topic: testTopic, Key: []byte(key), Value: []byte(key + "/" + strconv.Itoa(seq))})
		}
	}
	kc.Produce(t, recs...)
	return recs
}

// pos names a record by partition and offset.
type pos struct {
	partition int32
	offset    int64
}

func posOf(rec *kgo.Record) pos { return pos{rec.Partition, rec.Offset} }

func (p pos) String() string { return fmt.Sprintf("%d@%d", p.partition, p.offset) }

// seqOf returns the sequence number in a value written by produceKeys,
// or -1, which no order check accepts.
func seqOf(rec *kgo.Record) int {
	v := string(rec.Value)
	n, err := strconv.Atoi(v[strings.LastIndexByte(v, '/')+1:])
	if err != nil {
		return -1
	}
	return n
}

func TestConsumerOrderPerKey(t *testing.T) {
	t.Parallel()
	kc := kafkatest.New(t, testTopic, testDLQ)
	recs := produceKeys(t, kc, 40, 25)

	// The first record of every partition waits until the first records
	// of all of them have arrived: partitions must run in parallel.
	var (
		mu       sync.Mutex
		seen     = make(map[string][]int) // key -> seqs in handling order
		started  = make(map[int32]bool)
		allStart = make(chan struct{})
		handled  atomic.Int64
	)
	handler := func(ctx context.Context, rec *kgo.Record) error {
		mu.Lock()
		first := !started[rec.Partition]
		if first {
			started[rec.Partition] = true
			if len(started) == kafkatest.Partitions {
				close(allStart)
			}
		}
		mu.Unlock()
		if first {
			select {
			case <-allStart:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		mu.Lock()
		seen[string(rec.Key)] = append(seen[string(rec.Key)], seqOf(rec))
		mu.Unlock()
		handled.Add(1)
		return nil
	}
	startConsumer(t, consumerConfig(t, kc, handler))

	waitUntil(t, "every record handled", func() bool { return handled.Load() == int64(len(recs)) })
	mu.Lock()
	require.Len(t, seen, 40)
	for key, seqs := range seen {
		want := make([]int, 25)
		for i := range want {
			want[i] = i
		}
		require.Equal(t, want, seqs, "key %s", key)
	}
	mu.Unlock()
	waitCommitted(t, kc, kc.EndOffsets(t, testTopic))
}

// ledger records what handlers did, for tests to assert on.
type ledger struct {
	mu      sync.Mutex
	done    map[pos]int // handler returned nil, and how often
	blocked map[pos]bool
}

func newLedger() *ledger {
	return &ledger{done: make(map[pos]int), blocked: make(map[pos]bool)}
}

func (l *ledger) markDone(rec *kgo.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done[posOf(rec)]++
}

func (l *ledger) markBlocked(rec *kgo.Record, blocked bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if blocked {
		l.blocked[posOf(rec)] = true
	} else {
		delete(l.blocked, posOf(rec))
	}
}

func (l *ledger) counts() (done, blocked int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.done), len(l.blocked)
}

func (l *ledger) doneSet() map[pos]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[pos]int, len(l.done))
	for p, n := range l.done {
		out[p] = n
	}
	return out
}

// blockAt returns, for produceKeys' records, the record at offset 5 of
// every partition, which tests block on, and how many records can finish
// while they are blocked: all but them and the later records of their
// keys.
func blockAt(t *testing.T, recs []*kgo.Record) (blocked map[pos]bool, finishable int) {
	t.Helper()
	blocked = make(map[pos]bool)
	blockedKeys := make(map[string]int64) // key -> blocked offset
	for _, rec := range recs {
		if rec.Offset == 5 {
			blocked[posOf(rec)] = true
			blockedKeys[string(rec.Key)] = rec.Offset
		}
	}
	require.Len(t, blocked, kafkatest.Partitions, "every partition needs more than 5 records")
	for _, rec := range recs {
		if at, ok := blockedKeys[string(rec.Key)]; !ok || rec.Offset < at {
			finishable++
		}
	}
	return blocked, finishable
}

// unfinishedFrom returns, per partition, the offset of the first record
// not in done, or the partition's end.
func unfinishedFrom(recs []*kgo.Record, done map[pos]int, ends map[int32]int64) map[int32]int64 {
	first := make(map[int32]int64, len(ends))
	for p, end := range ends {
		first[p] = end
	}
	for _, rec := range recs {
		if done[posOf(rec)] == 0 && rec.Offset < first[rec.Partition] {
			first[rec.Partition] = rec.Offset
		}
	}
	return first
}

// rangesFrom returns every position from the given offsets to the ends.
func rangesFrom(from, ends map[int32]int64) map[pos]int {
	out := make(map[pos]int)
	for p, end := range ends {
		for o := from[p]; o < end; o++ {
			out[pos{p, o}] = 1
		}
	}
	return out
}

// TestConsumerStopRedeliversUnfinished stops a consumer in the middle of
// its work: the next member of the group gets exactly the records from
// the first unfinished one of each partition on, so nothing is lost and
// the duplicates are the finished records that could not be committed.
func TestConsumerStopRedeliversUnfinished(t *testing.T) {
	t.Parallel()
	kc := kafkatest.New(t, testTopic, testDLQ)
	recs := produceKeys(t, kc, 24, 10)
	ends := kc.EndOffsets(t, testTopic)
	blocked, finishable := blockAt(t, recs)

	first := newLedger()
	stop := startConsumer(t, consumerConfig(t, kc, func(ctx context.Context, rec *kgo.Record) error {
		if blocked[posOf(rec)] {
			first.markBlocked(rec, true)
			<-ctx.Done()
			first.markBlocked(rec, false)
			return ctx.Err()
		}
		first.markDone(rec)
		return nil
	}))
	waitUntil(t, "the first consumer to finish what it can", func() bool {
		done, blocked := first.counts()
		return done == finishable && blocked == kafkatest.Partitions
	})
	stop()

	// Everything before offset 5 finished, and nothing from 5 on was
	// committed, though most of it finished too.
	want := make(map[int32]int64)
	for p := range ends {
		want[p] = 5
	}
	require.Equal(t, want, unfinishedFrom(recs, first.doneSet(), ends))
	require.Equal(t, want, kc.Committed(t, testGroup, testTopic))

	second := newLedger()
	startConsumer(t, consumerConfig(t, kc, func(_ context.Context, rec *kgo.Record) error {
		second.markDone(rec)
		return nil
	}))
	waitCommitted(t, kc, ends)
	require.Equal(t, rangesFrom(want, ends), second.doneSet())
}

// TestConsumerCrashRedeliversUncommitted makes every commit fail, as if
// the consumer died without committing: the next member gets every record
// after the last commit that landed, finished or not.
func TestConsumerCrashRedeliversUncommitted(t *testing.T) {
	t.Parallel()
	kc := kafkatest.New(t, testTopic, testDLQ)
	recs := produceKeys(t, kc, 24, 10)
	ends := kc.EndOffsets(t, testTopic)
	blocked, _ := blockAt(t, recs)

	release := make(chan struct{})
	first := newLedger()
	stop := startConsumer(t, consumerConfig(t, kc, func(ctx context.Context, rec *kgo.Record) error {
		if blocked[posOf(rec)] {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		first.markDone(rec)
		return nil
	}))
	committed := make(map[int32]int64)
	for p := range ends {
		committed[p] = 5
	}
	waitCommitted(t, kc, committed)

	// From now on the broker refuses the group's commits; then the
	// blocked records finish and the consumer finishes everything.
	refuse := kc.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetCommit}, Group: testGroup, Count: -1})
	close(release)
	waitUntil(t, "the first consumer to finish every record", func() bool {
		done, _ := first.counts()
		return done == len(recs)
	})
	stop()
	require.Positive(t, refuse.Hits())
	refuse.Remove()
	require.Equal(t, committed, kc.Committed(t, testGroup, testTopic))

	second := newLedger()
	startConsumer(t, consumerConfig(t, kc, func(_ context.Context, rec *kgo.Record) error {
		second.markDone(rec)
		return nil
	}))
	waitCommitted(t, kc, ends)
	require.Equal(t, rangesFrom(committed, ends), second.doneSet())
}

// TestConsumerCommitWaitsForUnfinished blocks one record while every
// later one finishes: no commit passes the blocked record until it is
// done.
func TestConsumerCommitWaitsForUnfinished(t *testing.T) {
	t.Parallel()
	kc := kafkatest.New(t, testDLQ)
	kc.CreateTopic(t, testTopic, 1)
	recs := produceKeys(t, kc, 20, 1) // distinct keys: nothing waits behind the blocked record
	const k = 7

	// Every commit the group sends, in order.
	var commitsMu sync.Mutex
	var commits []int64
	observe := kc.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetCommit}, Group: testGroup, Count: -1, When: func(req kmsg.Request) bool {
		commitsMu.Lock()
		defer commitsMu.Unlock()
		for _, ct := range req.(*kmsg.OffsetCommitRequest).Topics {
			for _, p := range ct.Partitions {
				commits = append(commits, p.Offset)
			}
		}
		return false // observe, do not fail
	}})
	defer observe.Remove()

	release := make(chan struct{})
	var done atomic.Int64
	startConsumer(t, consumerConfig(t, kc, func(ctx context.Context, rec *kgo.Record) error {
		if rec.Offset == k {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		done.Add(1)
		return nil
	}))

	waitUntil(t, "every record but the blocked one to finish", func() bool { return done.Load() == int64(len(recs)-1) })
	waitCommitted(t, kc, map[int32]int64{0: k})
	commitsMu.Lock()
	require.NotEmpty(t, commits)
	for _, c := range commits {
		require.LessOrEqual(t, c, int64(k), "commit %d passed the unfinished record at offset %d", c, k)
	}
	commitsMu.Unlock()

	close(release)
	waitCommitted(t, kc, map[int32]int64{0: int64(len(recs))})
}

func TestConsumerDeadLettersPermanentFailures(t *testing.T) {
	t.Parallel()
	kc := kafkatest.New(t, testDLQ)
	kc.CreateTopic(t, testTopic, 1)
	key := []byte("acme/api/branch/main")
	kc.Produce(t,
		&kgo.Record{Topic: testTopic, Key: key, Value: []byte("ok-1")},
		&kgo.Record{Topic: testTopic, Key: key, Value: []byte("{malformed"), Headers: []kgo.RecordHeader{{Key: ingest.RecordHeaderDeliveryID, Value: []byte("d-1")}}},
		&kgo.Record{Topic: testTopic, Key: key, Value: []byte("ok-2")},
	)

	var mu sync.Mutex
	var handled []string
	calls := make(map[string]int)
	startConsumer(t, consumerConfig(t, kc, func(_ context.Context, rec *kgo.Record) error {
		mu.Lock()
		defer mu.Unlock()
		calls[string(rec.Value)]++
		if strings.HasPrefix(string(rec.Value), "{") {
			return fmt.Errorf("decode event: %w", ingest.Permanent(errors.New("unexpected end of JSON input")))
		}
		handled = append(handled, string(rec.Value))
		return nil
	}))

	dead := kc.Consume(t, testDLQ, 1)[0]
	require.Equal(t, key, dead.Key)
	require.Equal(t, "{malformed", string(dead.Value))
	require.Equal(t, map[string]string{
		ingest.RecordHeaderDeliveryID:      "d-1",
		ingest.RecordHeaderOriginTopic:     testTopic,
		ingest.RecordHeaderOriginPartition: "0",
		ingest.RecordHeaderOriginOffset:    "1",
		ingest.RecordHeaderError:           "decode event: unexpected end of JSON input",
		ingest.RecordHeaderAttempts:        "1",
	}, headerMap(dead))

	waitCommitted(t, kc, map[int32]int64{0: 3})
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"ok-1", "ok-2"}, handled)
	require.Equal(t, 1, calls["{malformed"], "a permanent error is not retried")
	require.EqualValues(t, 1, total(kc.EndOffsets(t, testDLQ)), "records in the dead-letter topic")
}

func TestConsumerDeadLettersAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	kc := kafkatest.New(t, testDLQ)
	kc.CreateTopic(t, testTopic, 1)
	kc.Produce(t, &kgo.Record{Topic: testTopic, Key: []byte("k"), Value: []byte("always fails")})

	var calls atomic.Int64
	var backoffs []int
	var backoffMu sync.Mutex
	cfg := consumerConfig(t, kc, func(context.Context, *kgo.Record) error {
		calls.Add(1)
		return errors.New("database unavailable")
	})
	cfg.MaxAttempts = 3
	cfg.RetryBackoff = func(attempt int) time.Duration {
		backoffMu.Lock()
		defer backoffMu.Unlock()
		backoffs = append(backoffs, attempt)
		return time.Millisecond
	}
	startConsumer(t, cfg)

	dead := kc.Consume(t, testDLQ, 1)[0]
	require.Equal(t, "3", headerMap(dead)[ingest.RecordHeaderAttempts])
	require.Equal(t, "database unavailable", headerMap(dead)[ingest.RecordHeaderError])
	waitCommitted(t, kc, map[int32]int64{0: 1})
	require.EqualValues(t, 3, calls.Load())
	backoffMu.Lock()
	defer backoffMu.Unlock()
	require.Equal(t, []int{1, 2}, backoffs)
}

func TestConsumerRetriesTransientFailures(t *testing.T) {
	t.Parallel()
	kc := kafkatest.New(t, testDLQ)
	kc.CreateTopic(t, testTopic, 1)
	kc.Produce(t, &kgo.Record{Topic: testTopic, Key: []byte("k"), Value: []byte("flaky")})

	var calls atomic.Int64
	startConsumer(t, consumerConfig(t, kc, func(context.Context, *kgo.Record) error {
		if calls.Add(1) <= 2 {
			return errors.New("connection reset")
		}
		return nil
	}))

	waitCommitted(t, kc, map[int32]int64{0: 1})
	require.EqualValues(t, 3, calls.Load())
	require.Zero(t, total(kc.EndOffsets(t, testDLQ)), "records in the dead-letter topic")
}

func TestConsumerRecoversHandlerPanics(t *testing.T) {
	t.Parallel()
	kc := kafkatest.New(t, testDLQ)
	kc.CreateTopic(t, testTopic, 1)
	kc.Produce(t,
		&kgo.Record{Topic: testTopic, Key: []byte("k"), Value: []byte("poison")},
		&kgo.Record{Topic: testTopic, Key: []byte("k"), Value: []byte("fine")},
	)

	var fine atomic.Bool
	cfg := consumerConfig(t, kc, func(_ context.Context, rec *kgo.Record) error {
		if string(rec.Value) == "poison" {
			var m map[string]int
			m["boom"]++ // a nil map write panics
		}
		fine.Store(true)
		return nil
	})
	cfg.MaxAttempts = 2
	startConsumer(t, cfg)

	dead := kc.Consume(t, testDLQ, 1)[0]
	require.Equal(t, "poison", string(dead.Value))
	require.Contains(t, headerMap(dead)[ingest.RecordHeaderError], "handler panicked")
	require.Equal(t, "2", headerMap(dead)[ingest.RecordHeaderAttempts])
	waitCommitted(t, kc, map[int32]int64{0: 2})
	require.True(t, fine.Load())
}

// TestConsumerDeadLetterWriteFailureHoldsCommit makes the dead-letter
// topic refuse writes: the poisoned record is not counted done, so even
// the commit when Run ends stays before it, and the next member of the
// group dead-letters it once writes succeed.
func TestConsumerDeadLetterWriteFailureHoldsCommit(t *testing.T) {
	t.Parallel()
	kc := kafkatest.New(t, testDLQ)
	kc.CreateTopic(t, testTopic, 1)
	kc.Produce(t,
		&kgo.Record{Topic: testTopic, Key: []byte("a"), Value: []byte("ok")},
		&kgo.Record{Topic: testTopic, Key: []byte("b"), Value: []byte("poison")},
		&kgo.Record{Topic: testTopic, Key: []byte("c"), Value: []byte("ok")},
	)
	handler := func(ok *atomic.Int64) ingest.RecordHandler {
		return func(_ context.Context, rec *kgo.Record) error {
			if string(rec.Value) == "poison" {
				return ingest.Permanent(errors.New("malformed"))
			}
			ok.Add(1)
			return nil
		}
	}

	refuse := kc.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: testDLQ, Count: -1})
	var firstOK atomic.Int64
	stop := startConsumer(t, consumerConfig(t, kc, handler(&firstOK)))
	waitUntil(t, "the other records to finish and the dead-letter write to be retried", func() bool {
		return firstOK.Load() == 2 && refuse.Hits() >= 2
	})
	stop()
	require.Equal(t, map[int32]int64{0: 1}, kc.Committed(t, testGroup, testTopic))
	refuse.Remove()

	var secondOK atomic.Int64
	startConsumer(t, consumerConfig(t, kc, handler(&secondOK)))
	require.Equal(t, "poison", string(kc.Consume(t, testDLQ, 1)[0].Value))
	waitCommitted(t, kc, map[int32]int64{0: 3})
	require.EqualValues(t, 1, secondOK.Load(), "the record after the poisoned one, again")
}

// gauge counts handlers running at once and remembers the most.
type gauge struct {
	mu        sync.Mutex
	now, most int
}

func (g *gauge) enter() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.now++
	g.most = max(g.most, g.now)
}

func (g *gauge) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.now--
}

func (g *gauge) read() (now, most int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.now, g.most
}

// releaseEach lets n handlers waiting on release go, one at a time.
func releaseEach(t *testing.T, release chan<- struct{}, n int) {
	t.Helper()
	deadline := time.NewTimer(kafkatest.WaitTimeout)
	defer deadline.Stop()
	for i := range n {
		select {
		case release <- struct{}{}:
		case <-deadline.C:
			t.Fatalf("released %d of %d handlers; the others never started", i, n)
		}
	}
}

// produceTo writes n records with distinct keys to one partition of
// topic.
func produceTo(t *testing.T, kc *kafkatest.Cluster, partition int32, n int) {
	t.Helper()
	cl := kc.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	recs := make([]*kgo.Record, n)
	for i := range recs {
		key := fmt.Sprintf("p%d-k%d", partition, i)
		recs[i] = &kgo.Record{Topic: testTopic, Partition: partition, Key: []byte(key), Value: []byte(key)}
	}
	require.NoError(t, cl.ProduceSync(t.Context(), recs...).FirstErr())
}

// TestConsumerBackpressurePausesFullPartitions fills partition 0 with
// handlers that do not return: the partition holds no more than its
// limit in flight and stops being fetched, and partition 1 keeps flowing.
func TestConsumerBackpressurePausesFullPartitions(t *testing.T) {
	t.Parallel()
	kc := kafkatest.New(t, testDLQ)
	kc.CreateTopic(t, testTopic, 2)
	const perPartition, n = 4, 40
	produceTo(t, kc, 0, n)
	produceTo(t, kc, 1, n)

	var running gauge // handlers of partition 0
	release := make(chan struct{})
	var done [2]atomic.Int64
	cfg := consumerConfig(t, kc, func(ctx context.Context, rec *kgo.Record) error {
		if rec.Partition == 0 {
			running.enter()
			defer running.leave()
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		done[rec.Partition].Add(1)
		return nil
	})
	// Distinct keys: every record in flight is a handler running.
	cfg.MaxInFlightPerPartition = perPartition
	startConsumer(t, cfg)

	waitUntil(t, "partition 0 full and partition 1 done", func() bool {
		now, _ := running.read()
		return now == perPartition && done[1].Load() == n
	})
	// One at a time, through several rounds of pausing and resuming.
	releaseEach(t, release, n)
	waitUntil(t, "partition 0 done", func() bool { return done[0].Load() == n })
	_, most := running.read()
	require.Equal(t, perPartition, most, "records of partition 0 in flight at once")
	waitCommitted(t, kc, map[int32]int64{0: n, 1: n})
}

// TestConsumerBackpressureBoundsTotal blocks every handler: no more than
// MaxInFlight records are taken over all partitions.
func TestConsumerBackpressureBoundsTotal(t *testing.T) {
	t.Parallel()
	kc := kafkatest.New(t, testDLQ)
	kc.CreateTopic(t, testTopic, 4)
	const limit, n = 6, 20
	for p := range int32(4) {
		produceTo(t, kc, p, n)
	}

	var running gauge
	release := make(chan struct{})
	var done atomic.Int64
	cfg := consumerConfig(t, kc, func(ctx context.Context, _ *kgo.Record) error {
		running.enter()
		defer running.leave()
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		done.Add(1)
		return nil
	})
	cfg.MaxInFlight = limit
	cfg.MaxInFlightPerPartition = 4
	startConsumer(t, cfg)

	waitUntil(t, "the limit reached", func() bool {
		now, _ := running.read()
		return now == limit
	})
	releaseEach(t, release, 4*n)
	waitUntil(t, "every record done", func() bool { return done.Load() == 4*n })
	_, most := running.read()
	require.Equal(t, limit, most, "records in flight at once")
}

// TestConsumerRebalance runs two members of a group over one topic, the
// second joining while the first is busy and the first leaving before the
// end: no key is ever handled by both at once and no record is lost.
func TestConsumerRebalance(t *testing.T) {
	t.Parallel()
	kc := kafkatest.New(t, testTopic, testDLQ)
	recs := produceKeys(t, kc, 40, 10)
	ends := kc.EndOffsets(t, testTopic)

	var (
		mu      sync.Mutex
		active  = make(map[string]string) // key -> member handling it
		overlap []string
		handled = make(map[pos]map[string]bool) // record -> members that finished it
	)
	gate := make(chan struct{}) // holds the first member's handlers once it is busy
	var firstDone atomic.Int64
	handler := func(member string) ingest.RecordHandler {
		return func(ctx context.Context, rec *kgo.Record) error {
			key := string(rec.Key)
			mu.Lock()
			if other, ok := active[key]; ok {
				overlap = append(overlap, fmt.Sprintf("%s: %s and %s", key, other, member))
			}
			active[key] = member
			mu.Unlock()
			defer func() {
				mu.Lock()
				delete(active, key)
				mu.Unlock()
			}()

			if member == "first" && firstDone.Load() >= int64(len(recs)/4) {
				select {
				case <-gate:
				case <-ctx.Done():
					// Revoked: wind down for a while (roll back,
					// say); the partition's next owner must wait.
					time.Sleep(200 * time.Millisecond)
					return ctx.Err()
				}
			}
			mu.Lock()
			if handled[posOf(rec)] == nil {
				handled[posOf(rec)] = make(map[string]bool)
			}
			handled[posOf(rec)][member] = true
			mu.Unlock()
			if member == "first" {
				firstDone.Add(1)
			}
			return nil
		}
	}

	stopFirst := startConsumer(t, consumerConfig(t, kc, handler("first")))
	waitUntil(t, "the first member busy", func() bool { return firstDone.Load() >= int64(len(recs)/4) })

	startConsumer(t, consumerConfig(t, kc, handler("second")))
	waitUntil(t, "the group to share the partitions", func() bool {
		info := kc.Fake.GroupInfo(testGroup)
		if info == nil || info.State != "Stable" || len(info.Members) != 2 {
			return false
		}
		for _, m := range info.Members {
			if len(m.Assignment[testTopic]) == 0 {
				return false
			}
		}
		return true
	})
	close(gate)
	waitUntil(t, "some records handled by each member", func() bool {
		mu.Lock()
		defer mu.Unlock()
		var byFirst, bySecond bool
		for _, members := range handled {
			byFirst = byFirst || members["first"]
			bySecond = bySecond || members["second"]
		}
		return byFirst && bySecond
	})
	stopFirst()

	waitCommitted(t, kc, ends)
	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, overlap, "keys handled by both members at once")
	for _, rec := range recs {
		require.NotEmpty(t, handled[posOf(rec)], "record %v lost", posOf(rec))
	}
}

// TestConsumerStopsWhenBrokerGone ends Run after the cluster went away:
// the final commit fails, and Run still returns.
func TestConsumerStopsWhenBrokerGone(t *testing.T) {
	t.Parallel()
	kc := kafkatest.New(t, testTopic, testDLQ)
	produceKeys(t, kc, 4, 1)
	var handled atomic.Int64
	stop := startConsumer(t, consumerConfig(t, kc, func(context.Context, *kgo.Record) error {
		handled.Add(1)
		return nil
	}))
	waitUntil(t, "every record handled", func() bool { return handled.Load() == 4 })
	kc.Close()
	stop()
}

func TestConsumerRunOnce(t *testing.T) {
	t.Parallel()
	kc := kafkatest.New(t, testTopic, testDLQ)
	c, err := ingest.NewConsumer(consumerConfig(t, kc, func(context.Context, *kgo.Record) error { return nil }))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()

	waitUntil(t, "the first Run to join the group", func() bool {
		info := kc.Fake.GroupInfo(testGroup)
		return info != nil && len(info.Members) == 1
	})
	require.ErrorContains(t, c.Run(ctx), "while the consumer is running")
	cancel()
	require.NoError(t, <-done)

	// Once it has returned, the consumer runs again.
	ctx, cancel = context.WithCancel(t.Context())
	cancel()
	require.NoError(t, c.Run(ctx))
}

func TestNewConsumerValidates(t *testing.T) {
	t.Parallel()
	handler := func(context.Context, *kgo.Record) error { return nil }
	valid := func() ingest.ConsumerConfig {
		return ingest.ConsumerConfig{Brokers: []string{"127.0.0.1:9092"}, Group: "g", Handler: handler}
	}
	for name, tc := range map[string]struct {
		change func(*ingest.ConsumerConfig)
		err    string
	}{
		"no group":     {func(c *ingest.ConsumerConfig) { c.Group = "" }, "Group is required"},
		"no handler":   {func(c *ingest.ConsumerConfig) { c.Handler = nil }, "Handler is required"},
		"dlq is topic": {func(c *ingest.ConsumerConfig) { c.DLQTopic = ingest.TopicVCSEvents }, "DLQTopic must differ from Topic (cikit.vcs-events)"},
		"negative":     {func(c *ingest.ConsumerConfig) { c.MaxAttempts = -1 }, "must not be negative"},
		"partition over total": {func(c *ingest.ConsumerConfig) { c.MaxInFlight, c.MaxInFlightPerPartition = 10, 20 },
			"MaxInFlightPerPartition (20) must not exceed MaxInFlight (10)"},
		"commit interval": {func(c *ingest.ConsumerConfig) { c.CommitInterval = time.Millisecond }, "CommitInterval (1ms) must be at least 100ms"},
		"client options":  {func(c *ingest.ConsumerConfig) { c.ClientOptions = []kgo.Opt{kgo.DisableAutoCommit()} }, "ClientOptions"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := valid()
			tc.change(&cfg)
			_, err := ingest.NewConsumer(cfg)
			require.ErrorContains(t, err, tc.err)
		})
	}

	t.Run("defaults", func(t *testing.T) {
		t.Parallel()
		_, err := ingest.NewConsumer(valid())
		require.NoError(t, err)
		// A small MaxInFlight caps the per-partition default.
		cfg := valid()
		cfg.MaxInFlight = 8
		_, err = ingest.NewConsumer(cfg)
		require.NoError(t, err)
	})
}

func TestPermanent(t *testing.T) {
	t.Parallel()
	require.NoError(t, ingest.Permanent(nil))

	cause := errors.New("unexpected end of JSON input")
	err := fmt.Errorf("decode delivery d-1: %w", ingest.Permanent(cause))
	var permanent *ingest.PermanentError
	require.ErrorAs(t, err, &permanent)
	require.Same(t, cause, permanent.Err)
	require.ErrorIs(t, err, cause)
	require.Equal(t, "decode delivery d-1: unexpected end of JSON input", err.Error())

	require.False(t, errors.As(cause, &permanent))
}
