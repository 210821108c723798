package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// partition is one assigned partition: its records in flight, queued per
// key, and how far it may be committed.
type partition struct {
	id     int32
	ctx    context.Context // canceled when the partition stops
	cancel context.CancelCauseFunc
	lanes  sync.WaitGroup // one goroutine per key with records in flight

	// Guarded by consumerRun.mu.
	keys     map[string][]*job // per key, its records in offset order; the first is running
	offsets  offsetTracker
	inFlight int
	paused   bool
}

// job is one record in flight.
type job struct {
	rec    *kgo.Record
	offset *trackedOffset
}

func newPartition(ctx context.Context, id int32) *partition {
	ctx, cancel := context.WithCancelCause(ctx)
	return &partition{id: id, ctx: ctx, cancel: cancel, keys: make(map[string][]*job)}
}

// enqueue adds rec to p: behind the records of its key already in flight,
// or in a new lane when there are none. r.mu must be held.
func (r *consumerRun) enqueue(p *partition, rec *kgo.Record) {
	j := &job{rec: rec, offset: p.offsets.add(rec)}
	p.inFlight++
	r.inFlight++
	key := string(rec.Key)
	queue, running := p.keys[key]
	p.keys[key] = append(queue, j)
	if !running {
		p.lanes.Add(1)
		go r.lane(p, key, j)
	}
}

// lane processes the records of one key of p in offset order, from j on,
// until none is left or the partition stops. A record abandoned because
// the partition stops ends the lane: the records behind it must not run
// before it.
func (r *consumerRun) lane(p *partition, key string, j *job) {
	defer p.lanes.Done()
	for j != nil && p.ctx.Err() == nil {
		if !r.process(p.ctx, j.rec) {
			return
		}
		j = r.finish(p, key, j)
	}
}

// finish records that j is done, marks the partition's new commit offset
// when j completed its finished prefix, has the poll loop resume fetching
// when the partition has drained enough, and returns the key's next
// record, if any.
func (r *consumerRun) finish(p *partition, key string, j *job) *job {
	r.mu.Lock()
	advanced := p.offsets.done(j.offset)
	commit := p.offsets.commit
	p.inFlight--
	r.inFlight--
	var next *job
	if queue := p.keys[key][1:]; len(queue) > 0 {
		p.keys[key] = queue
		next = queue[0]
	} else {
		delete(p.keys, key)
	}
	if p.paused && p.inFlight <= r.resumeAt && r.interrupt != nil {
		r.interrupt() // the poll loop resumes the partition
		r.interrupt = nil
	}
	r.mu.Unlock()

	// Marks from lanes of one partition may arrive out of order; the
	// client ignores a mark below one it has, so the highest one stands.
	if advanced {
		r.cl.MarkCommitOffsets(map[string]map[int32]kgo.EpochOffset{r.cfg.Topic: {p.id: commit}})
	}
	r.signalFreed()
	return next
}

// process runs the handler on rec until it succeeds, or the record is
// dead-lettered, and reports whether the record is done. It reports false
// when ctx ends first: the record is abandoned, for the partition's next
// owner.
func (r *consumerRun) process(ctx context.Context, rec *kgo.Record) bool {
	for attempt := 1; ; attempt++ {
		err := r.handle(ctx, rec)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		var permanent *PermanentError
		if errors.As(err, &permanent) || attempt >= r.cfg.MaxAttempts {
			return r.deadLetter(ctx, rec, err, attempt)
		}
		delay := r.cfg.RetryBackoff(attempt)
		r.log.Warn("ingest: handler failed; retrying", recordAttrs(rec), "attempt", attempt, "retry_in", delay, "error", err)
		if sleep(ctx, delay) != nil {
			return false
		}
	}
}

// handle runs the handler, turning a panic into an error.
func (r *consumerRun) handle(ctx context.Context, rec *kgo.Record) (err error) {
	defer func() {
		if v := recover(); v != nil {
			r.log.Error("ingest: handler panicked", recordAttrs(rec), "panic", v, "stack", string(debug.Stack()))
			err = fmt.Errorf("ingest: handler panicked: %v", v)
		}
	}()
	return r.cfg.Handler(ctx, rec)
}

// deadLetter writes rec to the dead-letter topic, retrying until the
// broker accepts it, and reports whether it did before ctx ended.
func (r *consumerRun) deadLetter(ctx context.Context, rec *kgo.Record, cause error, attempts int) bool {
	headers := append(slices.Clip(rec.Headers),
		kgo.RecordHeader{Key: RecordHeaderOriginTopic, Value: []byte(rec.Topic)},
		kgo.RecordHeader{Key: RecordHeaderOriginPartition, Value: strconv.AppendInt(nil, int64(rec.Partition), 10)},
		kgo.RecordHeader{Key: RecordHeaderOriginOffset, Value: strconv.AppendInt(nil, rec.Offset, 10)},
		kgo.RecordHeader{Key: RecordHeaderError, Value: []byte(cause.Error())},
		kgo.RecordHeader{Key: RecordHeaderAttempts, Value: strconv.AppendInt(nil, int64(attempts), 10)},
	)
	for try := 1; ; try++ {
		dead := &kgo.Record{Topic: r.cfg.DLQTopic, Key: rec.Key, Value: rec.Value, Headers: headers}
		err := produce(ctx, r.cl, dead)
		if err == nil {
			r.log.Error("ingest: record dead-lettered", recordAttrs(rec), "attempts", attempts, "dlq_topic", r.cfg.DLQTopic, "error", cause)
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		delay := r.cfg.RetryBackoff(try)
		r.log.Error("ingest: dead-letter write failed; retrying", recordAttrs(rec), "dlq_topic", r.cfg.DLQTopic, "retry_in", delay, "error", err)
		if sleep(ctx, delay) != nil {
			return false
		}
	}
}

func recordAttrs(rec *kgo.Record) slog.Attr {
	return slog.Group("record",
		"partition", rec.Partition,
		"offset", rec.Offset,
		"key", string(rec.Key),
	)
}

// offsetTracker follows the records of one partition from hand-off to
// done and gives the offset the partition may be committed to: just past
// the records that are done together with every record before them. It is
// Spring Kafka's asyncAcks: with 100 running and 101 and 102 done, the
// commit stays at 100.
type offsetTracker struct {
	pending []*trackedOffset // in offset order, from the oldest not done
	// commit is the offset to commit, with the epoch of the record before
	// it; zero until a record is done.
	commit kgo.EpochOffset
}

// trackedOffset is one record in an offsetTracker.
type trackedOffset struct {
	next kgo.EpochOffset // the commit that covers the record: its offset + 1
	done bool
}

// add tracks rec; records must be added in offset order.
func (t *offsetTracker) add(rec *kgo.Record) *trackedOffset {
	o := &trackedOffset{next: kgo.EpochOffset{Epoch: rec.LeaderEpoch, Offset: rec.Offset + 1}}
	t.pending = append(t.pending, o)
	return o
}

// done marks o done and reports whether that moved the commit offset.
func (t *offsetTracker) done(o *trackedOffset) bool {
	o.done = true
	n := 0
	for n < len(t.pending) && t.pending[n].done {
		n++
	}
	if n == 0 {
		return false
	}
	t.commit = t.pending[n-1].next
	clear(t.pending[:n]) // the backing array outlives the prefix
	t.pending = t.pending[n:]
	return true
}
