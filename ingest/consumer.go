package ingest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Consumer defaults.
const (
	DefaultConsumerMaxAttempts             = 5
	DefaultConsumerMaxInFlight             = 1024
	DefaultConsumerMaxInFlightPerPartition = 64
	DefaultConsumerCommitInterval          = 5 * time.Second
	// DefaultConsumerFetchMaxWait is how long a fetch waits at the broker
	// for records, unless ClientOptions say otherwise (kgo.FetchMaxWait;
	// the client's own default is 5s). A partition resumed after
	// backpressure is fetched only once the fetch in flight returns, so a
	// long wait there stalls every resumed partition: with the client's
	// default, a loaded consumer ran ten times slower.
	DefaultConsumerFetchMaxWait = 100 * time.Millisecond
)

// minCommitInterval is the shortest commit interval franz-go accepts.
const minCommitInterval = 100 * time.Millisecond

// shutdownCommitTimeout bounds the final commit when Run ends, which runs
// after Run's context is done and so needs a deadline of its own.
const shutdownCommitTimeout = 10 * time.Second

// Causes of a partition context's cancellation in a rebalance, for
// context.Cause.
var (
	errPartitionRevoked = errors.New("ingest: partition revoked")
	errPartitionLost    = errors.New("ingest: partition lost")
)

// A RecordHandler processes one record for a Consumer.
//
// Records of one key (one partition and key) are handled one at a time in
// offset order; records of different keys are handled concurrently, up to
// the Consumer's in-flight limits.
//
// Returning nil marks the record done. An error is retried, up to
// ConsumerConfig.MaxAttempts runs in all, unless it is marked with
// Permanent; then, or when the attempts are used up, the record goes to
// the dead-letter topic and counts as done. A panic is recovered and
// counts as a failed attempt.
//
// ctx is canceled when the record's partition is revoked or lost in a
// rebalance, or when Run's context ends; its cause (context.Cause) names
// the reason. The handler should then return promptly: the record is not
// committed and is delivered again to the partition's next owner, but a
// revocation waits for the handler, and a handler that outlives the
// group's rebalance timeout gets its member expelled and may run at the
// same time as the next owner's. Returning nil after the cancellation
// still counts as done.
//
// Delivery is at least once: after a crash, or a rebalance that
// interrupted work, records are delivered again, so the effects of a
// handler must be idempotent (for events, keyed by Event.DeliveryID).
type RecordHandler func(ctx context.Context, rec *kgo.Record) error

// PermanentError marks an error that retrying cannot fix, such as a
// record that does not parse. See Permanent.
type PermanentError struct {
	Err error
}

func (e *PermanentError) Error() string { return e.Err.Error() }

func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent marks err as permanent: a Consumer sends the record whose
// handler returned it to the dead-letter topic at once instead of
// retrying. errors.As finds the mark through further wrapping. Permanent
// returns nil for a nil err.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// ConsumerConfig configures a Consumer. Group and Handler are required;
// the zero value of every other field is a sensible default.
type ConsumerConfig struct {
	// Brokers are the seed brokers, host:port. When empty they must come
	// from ClientOptions (kgo.SeedBrokers); without either the client
	// tries localhost:9092.
	Brokers []string
	// ClientOptions configure the consumer's client: TLS, SASL, timeouts,
	// a kgo logger. The Consumer sets the group, the topic, the partition
	// callbacks and the commit options itself, over any given here, and
	// also produces dead-lettered records with this client. Its fetches
	// wait at most DefaultConsumerFetchMaxWait unless these say otherwise.
	ClientOptions []kgo.Opt
	// Group is the consumer group. Members of one group share the topic's
	// partitions. Required.
	Group string
	// Topic is consumed. Default: TopicVCSEvents.
	Topic string
	// Handler processes each record. Required.
	Handler RecordHandler

	// DLQTopic receives the records that failed: the original key, value
	// and headers, and the headers RecordHeaderOriginTopic,
	// RecordHeaderOriginPartition, RecordHeaderOriginOffset,
	// RecordHeaderError and RecordHeaderAttempts. Default:
	// TopicVCSEventsDLQ. It must differ from Topic.
	DLQTopic string
	// MaxAttempts is how many times the handler runs for a record before
	// the record is dead-lettered. Default: DefaultConsumerMaxAttempts.
	MaxAttempts int
	// RetryBackoff says how long to wait after the handler's attempt-th
	// failure before the next attempt, and after the attempt-th failure to
	// write a record to DLQTopic before trying again. Default: 100ms after
	// the first failure, doubling up to 10s.
	RetryBackoff func(attempt int) time.Duration

	// MaxInFlight bounds the records taken from Kafka and not yet done,
	// over all partitions; it also bounds the handler calls running at
	// once. Default: DefaultConsumerMaxInFlight.
	MaxInFlight int
	// MaxInFlightPerPartition bounds the records of one partition taken
	// and not yet done. A partition that reaches it stops being fetched,
	// so that its backlog waits in Kafka rather than in memory while the
	// other partitions keep flowing; fetching resumes once half of them
	// are done. Default: DefaultConsumerMaxInFlightPerPartition, or
	// MaxInFlight if that is smaller. It must not exceed MaxInFlight.
	MaxInFlightPerPartition int

	// CommitInterval is how often finished work is committed. It is also
	// committed when partitions are revoked and when Run ends, so the
	// interval bounds only the work done again after a crash. At least
	// 100ms. Default: DefaultConsumerCommitInterval.
	CommitInterval time.Duration

	// Logger receives the consumer's diagnostics. Default: slog.Default().
	Logger *slog.Logger
}

// Consumer processes the records of a Kafka topic as a member of a
// consumer group, at least once, with per-key order, retries, a
// dead-letter topic and backpressure.
//
// # Processing
//
// Each assigned partition is processed on its own; within a partition,
// records of different keys run concurrently and records of one key run
// in offset order (see RecordHandler). Events are keyed by Event.Key,
// "org/repo/refType/refName", so the events of one ref are handled in
// the order they were published while other refs proceed.
//
// # Offsets
//
// A partition's offset is committed only up to the oldest record that is
// not done: when record 100 is still running and 101 and 102 are done,
// the commit stays at 100 until 100 is done, and then moves to 103. A
// crash therefore never skips a record; it redelivers the records from
// the oldest unfinished one on, some of which may have been done already.
// Commits happen every CommitInterval, when partitions are revoked, and
// when Run ends, and cover finished work only.
//
// # Rebalances
//
// When a partition is revoked, the handlers of its records are canceled
// and waited for, its finished work is committed, and it is released;
// what did not finish is delivered to the next owner, which starts only
// after that. With franz-go's default cooperative-sticky balancer only
// the partitions that move are revoked; the others are processed through
// the rebalance. A lost partition (the member was expelled from the
// group) is released the same way but not committed, since the group no
// longer accepts this member's commits.
//
// # Failures
//
// A record whose handler keeps failing, or fails with a Permanent error,
// is written to DLQTopic and then counts as done, so one poison record
// does not stall its partition. When the dead-letter write fails it is
// retried, and the partition's commit does not move past the record
// until it succeeds.
//
// # Example
//
//	c, err := ingest.NewConsumer(ingest.ConsumerConfig{
//		Brokers: []string{"kafka:9092"},
//		Group:   "cikit-scheduler",
//		Handler: func(ctx context.Context, rec *kgo.Record) error {
//			var ev ingest.Event
//			if err := json.Unmarshal(rec.Value, &ev); err != nil {
//				return ingest.Permanent(err)
//			}
//			return schedule(ctx, &ev)
//		},
//	})
//	if err != nil {
//		return err
//	}
//	return c.Run(ctx)
type Consumer struct {
	cfg ConsumerConfig
	// opts are the client options that do not depend on a run; Run adds
	// the partition callbacks.
	opts    []kgo.Opt
	running atomic.Bool
}

// NewConsumer validates cfg, applies its defaults and returns a Consumer;
// it does not connect. Run joins the group.
func NewConsumer(cfg ConsumerConfig) (*Consumer, error) {
	if cfg.Group == "" {
		return nil, errors.New("ingest: ConsumerConfig.Group is required")
	}
	if cfg.Handler == nil {
		return nil, errors.New("ingest: ConsumerConfig.Handler is required")
	}
	cfg.Topic = cmp.Or(cfg.Topic, TopicVCSEvents)
	cfg.DLQTopic = cmp.Or(cfg.DLQTopic, TopicVCSEventsDLQ)
	if cfg.DLQTopic == cfg.Topic {
		return nil, fmt.Errorf("ingest: ConsumerConfig.DLQTopic must differ from Topic (%s), or a failed record would come back forever", cfg.Topic)
	}
	if cfg.MaxAttempts < 0 || cfg.MaxInFlight < 0 || cfg.MaxInFlightPerPartition < 0 {
		return nil, errors.New("ingest: ConsumerConfig.MaxAttempts, MaxInFlight and MaxInFlightPerPartition must not be negative")
	}
	cfg.MaxAttempts = cmp.Or(cfg.MaxAttempts, DefaultConsumerMaxAttempts)
	cfg.MaxInFlight = cmp.Or(cfg.MaxInFlight, DefaultConsumerMaxInFlight)
	cfg.MaxInFlightPerPartition = cmp.Or(cfg.MaxInFlightPerPartition, min(DefaultConsumerMaxInFlightPerPartition, cfg.MaxInFlight))
	if cfg.MaxInFlightPerPartition > cfg.MaxInFlight {
		return nil, fmt.Errorf("ingest: ConsumerConfig.MaxInFlightPerPartition (%d) must not exceed MaxInFlight (%d)", cfg.MaxInFlightPerPartition, cfg.MaxInFlight)
	}
	cfg.CommitInterval = cmp.Or(cfg.CommitInterval, DefaultConsumerCommitInterval)
	if cfg.CommitInterval < minCommitInterval {
		return nil, fmt.Errorf("ingest: ConsumerConfig.CommitInterval (%v) must be at least %v", cfg.CommitInterval, minCommitInterval)
	}
	if cfg.RetryBackoff == nil {
		cfg.RetryBackoff = defaultRetryBackoff
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}

	opts := []kgo.Opt{kgo.FetchMaxWait(DefaultConsumerFetchMaxWait)}
	if len(cfg.Brokers) > 0 {
		opts = append(opts, kgo.SeedBrokers(cfg.Brokers...))
	}
	opts = append(opts, cfg.ClientOptions...) // over the defaults above
	opts = append(opts,
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topic),
		// Only offsets the consumer marks, the finished prefix of each
		// partition, are committed, never merely polled ones.
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(cfg.CommitInterval),
		// Rebalance callbacks run only between polls, so a poll's
		// records always find their partition assigned.
		kgo.BlockRebalanceOnPoll(),
	)
	if err := kgo.ValidateOpts(opts...); err != nil {
		return nil, fmt.Errorf("ingest: ConsumerConfig.ClientOptions: %w", err)
	}
	return &Consumer{cfg: cfg, opts: opts}, nil
}

// Run joins the group and processes records until ctx ends. It then
// cancels the handlers still running, commits the finished work, leaves
// the group and returns nil. It returns an error only when it cannot
// start: the consumer is running already, or its client cannot be made.
// Run may be called again after it returns.
func (c *Consumer) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return errors.New("ingest: Consumer.Run called while the consumer is running")
	}
	defer c.running.Store(false)

	r := &consumerRun{
		cfg:      &c.cfg,
		ctx:      ctx,
		log:      c.cfg.Logger.With("group", c.cfg.Group, "topic", c.cfg.Topic),
		freed:    make(chan struct{}, 1),
		parts:    make(map[int32]*partition),
		resumeAt: c.cfg.MaxInFlightPerPartition / 2,
	}
	cl, err := kgo.NewClient(slices.Concat(c.opts, []kgo.Opt{
		kgo.OnPartitionsAssigned(r.assigned),
		kgo.OnPartitionsRevoked(r.revoked),
		kgo.OnPartitionsLost(r.lost),
		kgo.AutoCommitCallback(r.committed),
	})...)
	if err != nil {
		return fmt.Errorf("ingest: consumer client: %w", err)
	}
	r.cl = cl

	r.poll(ctx)

	// Stop every partition first, so that nothing runs while the final
	// commit is taken. Closing the client then leaves the group, which
	// revokes the partitions (committing again, with nothing new).
	r.stop(cl, r.assignedIDs(), context.Cause(ctx))
	commitCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownCommitTimeout)
	if err := cl.CommitMarkedOffsets(commitCtx); err != nil {
		r.log.Error("ingest: final commit failed; records finished since the last commit will be processed again", "error", err)
	}
	cancel()
	cl.CloseAllowingRebalance()
	return nil
}

// consumerRun is the state of one Run.
type consumerRun struct {
	cfg *ConsumerConfig
	// ctx is Run's; partition contexts derive from it.
	ctx      context.Context
	cl       *kgo.Client
	log      *slog.Logger
	resumeAt int // a paused partition resumes at this many records in flight

	// freed is signaled when records are done or dropped, so that a poll
	// waiting for room looks again.
	freed chan struct{}

	mu        sync.Mutex
	parts     map[int32]*partition // the assigned partitions
	inFlight  int                  // records taken and not done, over all partitions
	interrupt context.CancelFunc   // cuts the current poll short; nil between polls
}

// poll takes records from the client as room allows and hands them to
// their partitions, until ctx ends.
//
// Fetching of partitions is paused and resumed only here, between polls,
// so that a poll never returns more records of a partition than it has
// room for. A partition that drains while a poll waits for records
// interrupts the poll, so that the next one includes it.
func (r *consumerRun) poll(ctx context.Context) {
	for {
		pollCtx, interrupt := context.WithCancel(ctx)
		n, ok := r.room(ctx, interrupt)
		if !ok {
			interrupt()
			return
		}
		fetches := r.cl.PollRecords(pollCtx, n)
		r.mu.Lock()
		r.interrupt = nil
		r.mu.Unlock()
		interrupt()
		if fetches.IsClientClosed() || ctx.Err() != nil {
			return
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			if !errors.Is(err, context.Canceled) { // an interrupted poll
				r.log.Error("ingest: fetch failed", "fetch_topic", topic, "partition", partition, "error", err)
			}
		})
		r.dispatch(fetches)
		r.cl.AllowRebalance()
	}
}

// room resumes fetching of the paused partitions that drained to
// resumeAt, then waits until more records may be taken and says how many:
// no more than fit in the overall limit or in any partition being
// fetched. Until the poll that follows returns, interrupt is the way to
// cut it short. room reports false when ctx ends first.
func (r *consumerRun) room(ctx context.Context, interrupt context.CancelFunc) (int, bool) {
	for {
		r.mu.Lock()
		var resume []int32
		// A poll may return records of a single partition, including
		// one assigned during the poll.
		n := min(r.cfg.MaxInFlight-r.inFlight, r.cfg.MaxInFlightPerPartition)
		for _, p := range r.parts {
			if p.paused && p.inFlight <= r.resumeAt {
				p.paused = false
				resume = append(resume, p.id)
			}
			if !p.paused {
				n = min(n, r.cfg.MaxInFlightPerPartition-p.inFlight)
			}
		}
		if len(resume) > 0 {
			r.cl.ResumeFetchPartitions(map[string][]int32{r.cfg.Topic: resume})
			r.log.Debug("ingest: partitions drained; fetching resumed", "partitions", resume)
		}
		if n > 0 {
			r.interrupt = interrupt
		}
		r.mu.Unlock()
		if n > 0 {
			return n, true
		}
		select {
		case <-r.freed:
		case <-ctx.Done():
			return 0, false
		}
	}
}

// dispatch hands polled records to their partitions and pauses fetching
// of the partitions that are full.
func (r *consumerRun) dispatch(fetches kgo.Fetches) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var full []int32
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
		if len(fp.Records) == 0 {
			// An error alone: a poll cut short to take in a drained
			// partition, a client closing. The client retries fetch
			// errors itself.
			if fp.Err != nil {
				r.log.Debug("ingest: fetch ended without records", "partition", fp.Partition, "err", fp.Err)
			}
			return
		}
		p := r.parts[fp.Partition]
		if p == nil {
			// BlockRebalanceOnPoll rules this out; dropping the records
			// would still be safe, as they are not committed.
			r.log.Error("ingest: records of an unassigned partition dropped", "partition", fp.Partition, "records", len(fp.Records))
			return
		}
		for _, rec := range fp.Records {
			r.enqueue(p, rec)
		}
		if !p.paused && p.inFlight >= r.cfg.MaxInFlightPerPartition {
			p.paused = true
			full = append(full, p.id)
		}
	})
	if len(full) > 0 {
		r.cl.PauseFetchPartitions(map[string][]int32{r.cfg.Topic: full})
		r.log.Debug("ingest: partitions full; fetching paused", "partitions", full)
	}
}

// assigned starts the partitions the group gave this member.
func (r *consumerRun) assigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	ids := assigned[r.cfg.Topic]
	r.mu.Lock()
	for _, id := range ids {
		r.parts[id] = newPartition(r.ctx, id)
	}
	r.mu.Unlock()
	r.log.Info("ingest: partitions assigned", "partitions", ids)
}

// revoked stops the partitions taken away in a rebalance and commits
// their finished work before the group hands them to another member.
func (r *consumerRun) revoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	ids := revoked[r.cfg.Topic]
	r.stop(cl, ids, errPartitionRevoked)
	if err := cl.CommitMarkedOffsets(ctx); err != nil {
		r.log.Error("ingest: commit on revoke failed; records finished since the last commit will be processed again", "partitions", ids, "error", err)
	}
	if len(ids) > 0 {
		r.log.Info("ingest: partitions revoked", "partitions", ids)
	}
}

// lost stops the partitions of a session that ended in error. Nothing is
// committed: the group rejects commits from a member it expelled.
func (r *consumerRun) lost(_ context.Context, cl *kgo.Client, lost map[string][]int32) {
	ids := lost[r.cfg.Topic]
	r.stop(cl, ids, errPartitionLost)
	if len(ids) > 0 {
		r.log.Warn("ingest: partitions lost; unfinished and uncommitted records will be processed again", "partitions", ids)
	}
}

// committed logs failed periodic commits, which cost only work done
// again: the next commit includes the same offsets.
func (r *consumerRun) committed(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
	if err != nil {
		r.log.Warn("ingest: commit failed", "error", err)
		return
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				r.log.Warn("ingest: commit failed", "partition", p.Partition, "error", err)
			}
		}
	}
}

// assignedIDs lists the partitions this member processes.
func (r *consumerRun) assignedIDs() []int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]int32, 0, len(r.parts))
	for id := range r.parts {
		ids = append(ids, id)
	}
	return ids
}

// stop cancels the handlers of the given partitions, waits for them and
// releases the partitions, resuming fetching of any that were paused so
// that they are fetched again if they come back. Partitions not assigned,
// or stopped already, are skipped.
func (r *consumerRun) stop(cl *kgo.Client, ids []int32, cause error) {
	r.mu.Lock()
	stopping := make([]*partition, 0, len(ids))
	for _, id := range ids {
		if p := r.parts[id]; p != nil {
			delete(r.parts, id)
			p.cancel(cause)
			stopping = append(stopping, p)
		}
	}
	r.mu.Unlock()
	if len(stopping) == 0 {
		return
	}

	var paused []int32
	for _, p := range stopping {
		p.lanes.Wait()
		r.mu.Lock()
		r.inFlight -= p.inFlight // records abandoned or never started
		p.inFlight = 0
		if p.paused {
			p.paused = false
			paused = append(paused, p.id)
		}
		r.mu.Unlock()
	}
	if len(paused) > 0 {
		cl.ResumeFetchPartitions(map[string][]int32{r.cfg.Topic: paused})
	}
	r.signalFreed()
}

func (r *consumerRun) signalFreed() {
	select {
	case r.freed <- struct{}{}:
	default:
	}
}

// defaultRetryBackoff waits 100ms after the first failure and doubles the
// wait after each further one, up to 10s.
func defaultRetryBackoff(attempt int) time.Duration {
	const first, most = 100 * time.Millisecond, 10 * time.Second
	if attempt < 1 {
		return first
	}
	return min(first<<min(attempt-1, 8), most)
}
