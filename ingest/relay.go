package ingest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cikit/cikit/dag"
)

// dispatchTopics are the topics of the dispatch lanes.
var dispatchTopics = map[string]string{"p0": TopicDispatchP0, "p1": TopicDispatchP1, "p2": TopicDispatchP2}

// Defaults for RelayConfig.
const (
	DefaultRelayBatchSize       = 500
	DefaultRelayPollInterval    = 200 * time.Millisecond
	DefaultRelayProduceTimeout  = 30 * time.Second
	DefaultRelayRetryBackoff    = 100 * time.Millisecond
	DefaultRelayMaxRetryBackoff = 30 * time.Second
)

// OutboxSource is the outbox a Relay publishes. Every dag.Store is one;
// see dag.Store.OutboxPublish for the contract.
type OutboxSource interface {
	OutboxPublish(ctx context.Context, limit int, publish func(ctx context.Context, evs []*dag.OutboxEvent) error) (int, error)
}

// RelayConfig configures a Relay.
type RelayConfig struct {
	// Source holds the events to publish. Required.
	Source OutboxSource
	// Client produces the records. Required. The relay does not close
	// it. An idempotent producer (kgo's default) keeps the records of a
	// key in order across retries.
	Client *kgo.Client
	// BatchSize is the most events claimed and produced at once.
	// Default: DefaultRelayBatchSize.
	BatchSize int
	// PollInterval is how long the relay waits after it found fewer
	// events than BatchSize before it looks again. Default:
	// DefaultRelayPollInterval.
	PollInterval time.Duration
	// Notify, when set, wakes a waiting relay early. Signal it after
	// writes that record events (from a PostgreSQL LISTEN, an in-process
	// hook) without blocking: a channel with a buffer of one and a send
	// in a select with a default case. The relay receives only while it
	// waits and polls anyway, so a lost signal delays events by at most
	// PollInterval. Closing it turns it off.
	Notify <-chan struct{}
	// ProduceTimeout bounds how long a batch waits for the broker's
	// acknowledgements before the relay gives it back to the outbox and
	// retries. Records already sent by an idempotent producer are
	// waited for beyond it: kgo cannot know whether they were written.
	// Default: DefaultRelayProduceTimeout.
	ProduceTimeout time.Duration
	// RetryBackoff is the wait after the first failure to publish;
	// each further failure in a row doubles it, up to MaxRetryBackoff.
	// Waits are jittered between half and all of that. Defaults:
	// DefaultRelayRetryBackoff and DefaultRelayMaxRetryBackoff.
	RetryBackoff    time.Duration
	MaxRetryBackoff time.Duration
	// Lane chooses the dispatch lane of a "job.ready" event: "p0" (merge
	// queues, protected branches), "p1" (pushes and pull requests) or
	// "p2" (scheduled and nightly runs). Default: every job is on "p1".
	Lane func(*dag.OutboxEvent) string
	// Logger receives the relay's diagnostics. Default: slog.Default().
	Logger *slog.Logger
}

// Relay publishes a transactional outbox to Kafka: every event to topic
// cikit.pipeline-events as a PipelineEvent, and every "job.ready" event
// also to the dispatch topic of its lane, cikit.dispatch.p0, .p1 or .p2,
// as a DispatchEnvelope. Records are keyed by the event's repository (the
// part of dag.OutboxEvent.Pipeline before the colon, the run ID for runs
// without a pipeline) and carry the event ID in header "event-id".
//
// An event is marked published only once the broker acknowledged all of
// its records, and publication is at least once: a relay that dies after
// the acknowledgement and before the mark leaves the event to be published
// again, with the same ID. Consumers deduplicate by event ID.
//
// One relay produces the events of a key in outbox order. Any number of
// relays may share one outbox, each claiming other events; they may then
// produce events of one key out of order.
type Relay struct {
	cfg RelayConfig
}

// NewRelay validates cfg and returns a Relay.
func NewRelay(cfg RelayConfig) (*Relay, error) {
	if cfg.Source == nil {
		return nil, errors.New("ingest: RelayConfig.Source is required")
	}
	if cfg.Client == nil {
		return nil, errors.New("ingest: RelayConfig.Client is required")
	}
	if cfg.BatchSize < 0 {
		return nil, fmt.Errorf("ingest: RelayConfig.BatchSize must not be negative, got %d", cfg.BatchSize)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"PollInterval", cfg.PollInterval}, {"ProduceTimeout", cfg.ProduceTimeout}, {"RetryBackoff", cfg.RetryBackoff}, {"MaxRetryBackoff", cfg.MaxRetryBackoff}} {
		if d.v < 0 {
			return nil, fmt.Errorf("ingest: RelayConfig.%s must not be negative, got %s", d.name, d.v)
		}
	}
	cfg.BatchSize = cmp.Or(cfg.BatchSize, DefaultRelayBatchSize)
	cfg.PollInterval = cmp.Or(cfg.PollInterval, DefaultRelayPollInterval)
	cfg.ProduceTimeout = cmp.Or(cfg.ProduceTimeout, DefaultRelayProduceTimeout)
	cfg.RetryBackoff = cmp.Or(cfg.RetryBackoff, DefaultRelayRetryBackoff)
	cfg.MaxRetryBackoff = cmp.Or(cfg.MaxRetryBackoff, DefaultRelayMaxRetryBackoff)
	if cfg.RetryBackoff > cfg.MaxRetryBackoff {
		return nil, fmt.Errorf("ingest: RelayConfig.RetryBackoff (%s) must not exceed MaxRetryBackoff (%s)", cfg.RetryBackoff, cfg.MaxRetryBackoff)
	}
	if cfg.Lane == nil {
		cfg.Lane = func(*dag.OutboxEvent) string { return "p1" }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Relay{cfg: cfg}, nil
}

// Run publishes the outbox until ctx ends, then returns nil. A failure to
// publish (the broker down, the store unreachable) is logged and retried
// with backoff, as long as it lasts; the events stay in the outbox
// meanwhile. Run returns an error only when Lane names no lane: no retry
// can publish that event.
func (r *Relay) Run(ctx context.Context) error {
	notify := r.cfg.Notify
	failures := 0
	for {
		n, err := r.cfg.Source.OutboxPublish(ctx, r.cfg.BatchSize, r.publish)
		if ctx.Err() != nil {
			return nil
		}
		if lerr := (*laneError)(nil); errors.As(err, &lerr) {
			return err
		}
		wait, wake := r.cfg.PollInterval, notify
		if err != nil {
			failures++
			wait, wake = r.backoff(failures), nil
			r.cfg.Logger.WarnContext(ctx, "outbox relay failed to publish; retrying",
				"err", err, "failures", failures, "retry_in", wait)
		} else {
			if failures > 0 {
				r.cfg.Logger.InfoContext(ctx, "outbox relay publishes again", "failures", failures)
				failures = 0
			}
			if n == r.cfg.BatchSize {
				continue // more may be waiting
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		case _, ok := <-wake:
			if !ok {
				notify = nil
			}
		}
	}
}

// backoff is the jittered wait after the given number of failures in a
// row.
func (r *Relay) backoff(failures int) time.Duration {
	d := r.cfg.RetryBackoff
	for range failures - 1 {
		if d >= r.cfg.MaxRetryBackoff/2 {
			d = r.cfg.MaxRetryBackoff
			break
		}
		d *= 2
	}
	return d/2 + rand.N(d/2+1)
}

// publish produces the records of evs and waits for the broker's
// acknowledgement of every one.
func (r *Relay) publish(ctx context.Context, evs []*dag.OutboxEvent) error {
	recs, err := r.records(evs)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.ProduceTimeout)
	defer cancel()
	if err := r.cfg.Client.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("ingest: produce %d records of %d outbox events: %w", len(recs), len(evs), err)
	}
	return nil
}

// records builds the records of evs, in order.
func (r *Relay) records(evs []*dag.OutboxEvent) ([]*kgo.Record, error) {
	recs := make([]*kgo.Record, 0, len(evs))
	for _, ev := range evs {
		key := []byte(relayKey(ev))
		value, err := json.Marshal(newPipelineEvent(ev))
		if err != nil {
			return nil, fmt.Errorf("ingest: encode outbox event %s: %w", ev.ID, err)
		}
		recs = append(recs, relayRecord(TopicPipelineEvents, key, value, ev.ID))
		if ev.Type != dag.EventJobReady {
			continue
		}
		lane := r.cfg.Lane(ev)
		topic, ok := dispatchTopics[lane]
		if !ok {
			return nil, &laneError{lane: lane, ev: ev}
		}
		value, err = json.Marshal(&DispatchEnvelope{EventID: ev.ID, RunID: ev.RunID, JobID: ev.JobID,
			Attempt: ev.Attempt, Pipeline: ev.Pipeline, Lane: lane})
		if err != nil {
			return nil, fmt.Errorf("ingest: encode dispatch of outbox event %s: %w", ev.ID, err)
		}
		recs = append(recs, relayRecord(topic, key, value, ev.ID))
	}
	return recs, nil
}

func relayRecord(topic string, key, value []byte, eventID string) *kgo.Record {
	return &kgo.Record{Topic: topic, Key: key, Value: value,
		Headers: []kgo.RecordHeader{{Key: "event-id", Value: []byte(eventID)}}}
}

// relayKey is the partition key of ev's records: its repository, so that a
// repository's events stay in order, or its run for a run without a
// pipeline.
func relayKey(ev *dag.OutboxEvent) string {
	if ev.Pipeline == "" {
		return ev.RunID
	}
	repo, _, _ := strings.Cut(ev.Pipeline, ":")
	return repo
}

// laneError is RelayConfig.Lane naming no lane.
type laneError struct {
	lane string
	ev   *dag.OutboxEvent
}

func (e *laneError) Error() string {
	return fmt.Sprintf("ingest: RelayConfig.Lane returned %q for job %s of run %s (event %s): want p0, p1 or p2",
		e.lane, e.ev.JobID, e.ev.RunID, e.ev.ID)
}

// PipelineEvent is the value of a record on cikit.pipeline-events, as
// JSON: a dag.OutboxEvent.
type PipelineEvent struct {
	// EventID is unique per event; a redelivery repeats it.
	EventID string `json:"event_id"`
	// Type is one of the dag.Event… constants, such as "job.ready".
	Type     string `json:"type"`
	RunID    string `json:"run_id"`
	Pipeline string `json:"pipeline,omitempty"`
	// SHA is the commit the run builds, when it was created with one.
	SHA string `json:"sha,omitempty"`
	// JobID and Attempt are empty for pipeline events.
	JobID   string `json:"job_id,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	// State is the job's or the run's new state.
	State     string    `json:"state"`
	Reason    string    `json:"reason,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

func newPipelineEvent(ev *dag.OutboxEvent) *PipelineEvent {
	return &PipelineEvent{EventID: ev.ID, Type: ev.Type, RunID: ev.RunID, Pipeline: ev.Pipeline, SHA: ev.SHA, JobID: ev.JobID,
		Attempt: ev.Attempt, State: ev.State, Reason: ev.Reason, CreatedAt: ev.CreatedAt}
}

// DispatchEnvelope is the value of a record on a dispatch topic
// (cikit.dispatch.p0, .p1 or .p2), as JSON: a job attempt that became
// READY. EventID is the "job.ready" event's, so a dispatcher deduplicates
// redeliveries by it.
type DispatchEnvelope struct {
	EventID  string `json:"event_id"`
	RunID    string `json:"run_id"`
	JobID    string `json:"job_id"`
	Attempt  int    `json:"attempt"`
	Pipeline string `json:"pipeline,omitempty"`
	Lane     string `json:"lane"`
}
