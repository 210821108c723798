package ingest_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/ingest"
	"github.com/cikit/cikit/internal/pgtest"
)

const topicPipelineEvents = "cikit.pipeline-events"

var lanes = []string{"p0", "p1", "p2"}

// newKafka starts a one-broker cluster with the relay's topics and returns
// it with a client of it.
func newKafka(t *testing.T) (*kfake.Cluster, *kgo.Client) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1),
		kfake.SeedTopics(-1, topicPipelineEvents, "cikit.dispatch.p0", "cikit.dispatch.p1", "cikit.dispatch.p2"))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	// Retries after retriable errors wait for a metadata refresh, at
	// most every MetadataMinAge.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.MetadataMinAge(10*time.Millisecond),
		kgo.WithLogger(kgo.BasicLogger(t.Output(), kgo.LogLevelWarn, nil)))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return c, cl
}

// readAll returns every record of topic, each partition's in offset order.
func readAll(t *testing.T, c *kfake.Cluster, topic string) []*kgo.Record {
	t.Helper()
	ctx := t.Context()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	require.NoError(t, ends.Error())
	total := 0
	ends.Each(func(o kadm.ListedOffset) { total += int(o.Offset) })
	var recs []*kgo.Record
	for len(recs) < total {
		fs := cl.PollFetches(ctx)
		for _, e := range fs.Errors() {
			require.NoError(t, e.Err, "fetch %s/%d", e.Topic, e.Partition)
		}
		recs = append(recs, fs.Records()...)
	}
	require.Len(t, recs, total)
	return recs
}

func eventID(t *testing.T, r *kgo.Record) string {
	t.Helper()
	for _, h := range r.Headers {
		if h.Key == "event-id" {
			return string(h.Value)
		}
	}
	require.Fail(t, "record without an event-id header", "%s: %s", r.Topic, r.Value)
	return ""
}

// stores are the stores a relay is tested on.
var stores = []struct {
	name string
	new  func(t *testing.T) dag.Store
}{
	{"Memory", func(*testing.T) dag.Store { return dag.NewMemoryStore(dag.MemoryConfig{}) }},
	{"PostgreSQL", func(t *testing.T) dag.Store {
		db := pgtest.New(t)
		s, err := dag.NewPostgresStore(dag.PostgresConfig{Pool: db.Pool})
		require.NoError(t, err)
		require.NoError(t, s.Migrate(t.Context()))
		return s
	}},
}

// pipelines are those of the runs fill creates, in turn; the last run of
// each round has none.
var pipelines = []string{"acme/api:.cikit.yml", "acme/web:.github/workflows/ci.yml", ""}

// fill creates runs of pipelines, rounds times, and completes the build
// job of each: seven events per run, three of them "job.ready". It returns
// the outbox.
func fill(t *testing.T, s dag.Store, rounds int) []*dag.OutboxEvent {
	t.Helper()
	ctx := t.Context()
	step := []cikit.Step{{Run: "true"}}
	var runs []*dag.Run
	for range rounds {
		for _, p := range pipelines {
			run, err := s.RunCreate(ctx, &dag.RunCreateParams{Pipeline: p, Jobs: []*cikit.JobSpec{
				{ID: "build", Steps: step},
				{ID: "unit", Needs: []string{"build"}, Steps: step},
				{ID: "lint", Needs: []string{"build"}, Steps: step},
			}})
			require.NoError(t, err)
			runs = append(runs, run)
		}
	}
	for _, run := range runs {
		p := &dag.JobTransitionParams{RunID: run.ID, JobID: "build", Attempt: 1}
		_, err := s.JobQueue(ctx, p)
		require.NoError(t, err)
		_, err = s.JobStart(ctx, p)
		require.NoError(t, err)
		_, err = s.JobComplete(ctx, &dag.JobCompleteParams{RunID: run.ID, JobID: "build", Attempt: 1, Outcome: cikit.JobSucceeded})
		require.NoError(t, err)
	}
	evs, err := s.OutboxPending(ctx, 10_000)
	require.NoError(t, err)
	require.Len(t, evs, 7*len(runs))
	return evs
}

// repo is the key the relay should give ev's records.
func repo(ev *dag.OutboxEvent) string {
	if ev.Pipeline == "" {
		return ev.RunID
	}
	return strings.SplitN(ev.Pipeline, ":", 2)[0]
}

// counted is an OutboxSource whose done closes once want events were
// published through it.
type counted struct {
	ingest.OutboxSource
	mu   sync.Mutex
	n    int
	want int
	done chan struct{}
}

func count(src ingest.OutboxSource, want int) *counted {
	return &counted{OutboxSource: src, want: want, done: make(chan struct{})}
}

func (c *counted) OutboxPublish(ctx context.Context, limit int, publish func(context.Context, []*dag.OutboxEvent) error) (int, error) {
	n, err := c.OutboxSource.OutboxPublish(ctx, limit, publish)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n < c.want && c.n+n >= c.want {
		close(c.done)
	}
	c.n += n
	return n, err
}

// start runs a relay of cfg until the test ends or the returned stop is
// called; stop returns Run's result.
func start(t *testing.T, cfg ingest.RelayConfig) (stop func() error) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	r, err := ingest.NewRelay(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	stop = sync.OnceValue(func() error {
		cancel()
		return <-errc
	})
	t.Cleanup(func() { require.NoError(t, stop()) })
	return stop
}

// laneOf puts acme/api on p0 and acme/web on p2.
func laneOf(ev *dag.OutboxEvent) string {
	switch repo(ev) {
	case "acme/api":
		return "p0"
	case "acme/web":
		return "p2"
	}
	return "p1"
}

// byKey decodes the pipeline events of recs and groups them by key,
// keeping only the first record of each event ID as a consumer would.
func byKey(t *testing.T, recs []*kgo.Record) map[string][]ingest.PipelineEvent {
	t.Helper()
	seen := map[string][]byte{}
	out := map[string][]ingest.PipelineEvent{}
	for _, r := range recs {
		id := eventID(t, r)
		if first, ok := seen[id]; ok {
			require.Equal(t, string(first), string(r.Value), "a redelivery is the same event")
			continue
		}
		seen[id] = r.Value
		var ev ingest.PipelineEvent
		require.NoError(t, json.Unmarshal(r.Value, &ev))
		require.Equal(t, id, ev.EventID)
		out[string(r.Key)] = append(out[string(r.Key)], ev)
	}
	return out
}

// wantByKey is what byKey should find for the events evs.
func wantByKey(evs []*dag.OutboxEvent) map[string][]ingest.PipelineEvent {
	out := map[string][]ingest.PipelineEvent{}
	for _, e := range evs {
		out[repo(e)] = append(out[repo(e)], ingest.PipelineEvent{EventID: e.ID, Type: e.Type, RunID: e.RunID,
			Pipeline: e.Pipeline, JobID: e.JobID, Attempt: e.Attempt, State: e.State, Reason: e.Reason, CreatedAt: e.CreatedAt.UTC().Round(0)})
	}
	return out
}

func requirePublished(t *testing.T, s dag.Store) {
	t.Helper()
	pending, err := s.OutboxPending(t.Context(), 10_000)
	require.NoError(t, err)
	require.Empty(t, pending, "every event is marked published")
}

func TestRelay(t *testing.T) {
	t.Parallel()
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			testRelay(t, st.new)
		})
	}
}

func testRelay(t *testing.T, newStore func(t *testing.T) dag.Store) {
	t.Run("PublishesOnceInOrder", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		want := fill(t, s, 2)
		c, cl := newKafka(t)
		src := count(s, len(want))
		stop := start(t, ingest.RelayConfig{Source: src, Client: cl, BatchSize: 4, Lane: laneOf})
		<-src.done
		require.NoError(t, stop())
		requirePublished(t, s)

		recs := readAll(t, c, topicPipelineEvents)
		require.Len(t, recs, len(want), "each event once")
		require.Equal(t, wantByKey(want), byKey(t, recs), "each key's events in outbox order")

		for _, lane := range lanes {
			var wantDispatch []ingest.DispatchEnvelope
			for _, e := range want {
				if e.Type == dag.EventJobReady && laneOf(e) == lane {
					wantDispatch = append(wantDispatch, ingest.DispatchEnvelope{EventID: e.ID, RunID: e.RunID, JobID: e.JobID,
						Attempt: e.Attempt, Pipeline: e.Pipeline, Lane: lane})
				}
			}
			var got []ingest.DispatchEnvelope
			for _, r := range readAll(t, c, "cikit.dispatch."+lane) {
				var d ingest.DispatchEnvelope
				require.NoError(t, json.Unmarshal(r.Value, &d))
				require.Equal(t, d.EventID, eventID(t, r))
				require.Equal(t, repo(&dag.OutboxEvent{Pipeline: d.Pipeline, RunID: d.RunID}), string(r.Key))
				got = append(got, d)
			}
			require.ElementsMatch(t, wantDispatch, got, "lane %s", lane)
		}
	})

	t.Run("DefaultLane", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		want := fill(t, s, 1)
		c, cl := newKafka(t)
		src := count(s, len(want))
		stop := start(t, ingest.RelayConfig{Source: src, Client: cl})
		<-src.done
		require.NoError(t, stop())
		require.Len(t, readAll(t, c, "cikit.dispatch.p1"), 9, "every job.ready event")
		require.Empty(t, readAll(t, c, "cikit.dispatch.p0"))
		require.Empty(t, readAll(t, c, "cikit.dispatch.p2"))
	})

	t.Run("RepublishesAfterCrash", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		want := fill(t, s, 1)
		c, cl := newKafka(t)

		// The first relay dies after the broker acknowledged its first
		// batch and before the store marked it published.
		ctx, crash := context.WithCancel(t.Context())
		var first []*dag.OutboxEvent
		r, err := ingest.NewRelay(ingest.RelayConfig{Source: crashAfterAck{s, func(evs []*dag.OutboxEvent) {
			first = evs
			crash()
		}}, Client: cl, BatchSize: 5})
		require.NoError(t, err)
		require.NoError(t, r.Run(ctx))
		require.Len(t, first, 5)
		pending, err := s.OutboxPending(t.Context(), 10_000)
		require.NoError(t, err)
		require.Equal(t, want, pending, "nothing was marked published")

		src := count(s, len(want))
		stop := start(t, ingest.RelayConfig{Source: src, Client: cl, BatchSize: 5})
		<-src.done
		require.NoError(t, stop())
		requirePublished(t, s)

		recs := readAll(t, c, topicPipelineEvents)
		require.Len(t, recs, len(want)+len(first))
		times := map[string]int{}
		for _, r := range recs {
			times[eventID(t, r)]++
		}
		again := map[string]bool{}
		for _, e := range first {
			again[e.ID] = true
		}
		for _, e := range want {
			n := 1
			if again[e.ID] {
				n = 2
			}
			require.Equal(t, n, times[e.ID], "event %s (%s)", e.ID, e.Type)
		}
		require.Equal(t, wantByKey(want), byKey(t, recs), "deduplicated by event-id, each key's events are in order")
	})

	for _, outage := range []struct {
		name string
		err  *kerr.Error
	}{
		// The relay's batches fail and are retried by the relay.
		{"Rejected", kerr.TopicAuthorizationFailed},
		// The client retries its requests itself.
		{"Retriable", kerr.NotEnoughReplicas},
	} {
		t.Run("BrokerOutage"+outage.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			want := fill(t, s, 1)
			c, cl := newKafka(t)
			down := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: outage.err, Count: -1})
			src := count(s, len(want))
			start(t, ingest.RelayConfig{Source: src, Client: cl, BatchSize: 5,
				RetryBackoff: time.Millisecond, MaxRetryBackoff: 4 * time.Millisecond})
			require.NoError(t, down.Wait(t.Context(), 3))
			pending, err := s.OutboxPending(t.Context(), 10_000)
			require.NoError(t, err)
			require.Equal(t, want, pending, "nothing is marked published while the broker is down")

			down.Remove()
			<-src.done
			requirePublished(t, s)
			require.Equal(t, wantByKey(want), byKey(t, readAll(t, c, topicPipelineEvents)), "every event arrives")
		})
	}

	t.Run("RelaysShareTheOutbox", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		want := fill(t, s, 8)
		c, cl := newKafka(t)
		src := count(s, len(want))
		stops := []func() error{
			start(t, ingest.RelayConfig{Source: src, Client: cl, BatchSize: 3}),
			start(t, ingest.RelayConfig{Source: src, Client: cl, BatchSize: 3}),
		}
		<-src.done
		for _, stop := range stops {
			require.NoError(t, stop())
		}
		requirePublished(t, s)
		recs := readAll(t, c, topicPipelineEvents)
		require.Len(t, recs, len(want), "each event once")
		ids := map[string]bool{}
		for _, r := range recs {
			ids[eventID(t, r)] = true
		}
		for _, e := range want {
			require.True(t, ids[e.ID], "event %s", e.ID)
		}
		dispatched := 0
		for _, lane := range lanes {
			dispatched += len(readAll(t, c, "cikit.dispatch."+lane))
		}
		require.Equal(t, 3*len(want)/7, dispatched, "each job.ready event once")
	})

	t.Run("Notify", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		_, cl := newKafka(t)
		notify := make(chan struct{})
		calls := make(chan int)
		stop := start(t, ingest.RelayConfig{Source: observed{s, calls}, Client: cl, Notify: notify, PollInterval: time.Hour})
		require.Zero(t, <-calls, "the outbox is empty: the relay waits an hour")
		want := fill(t, s, 1)
		notify <- struct{}{}
		require.Equal(t, len(want), <-calls, "woken, it publishes at once")
		require.NoError(t, stop())
		requirePublished(t, s)
	})

	t.Run("InvalidLane", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		want := fill(t, s, 1)
		c, cl := newKafka(t)
		r, err := ingest.NewRelay(ingest.RelayConfig{Source: s, Client: cl,
			Lane: func(*dag.OutboxEvent) string { return "p3" }})
		require.NoError(t, err)
		err = r.Run(t.Context())
		require.ErrorContains(t, err, `RelayConfig.Lane returned "p3"`)
		require.ErrorContains(t, err, "want p0, p1 or p2")
		pending, err := s.OutboxPending(t.Context(), 10_000)
		require.NoError(t, err)
		require.Equal(t, want, pending)
		require.Empty(t, readAll(t, c, topicPipelineEvents), "nothing of the batch is produced")
	})
}

// crashAfterAck publishes through its store, then acts as if the relay
// died before the store marked the events published.
type crashAfterAck struct {
	ingest.OutboxSource
	crash func(evs []*dag.OutboxEvent)
}

func (c crashAfterAck) OutboxPublish(ctx context.Context, limit int, publish func(context.Context, []*dag.OutboxEvent) error) (int, error) {
	return c.OutboxSource.OutboxPublish(ctx, limit, func(ctx context.Context, evs []*dag.OutboxEvent) error {
		if err := publish(ctx, evs); err != nil {
			return err
		}
		c.crash(evs)
		return errors.New("the relay died")
	})
}

// observed sends the result of each OutboxPublish on calls.
type observed struct {
	ingest.OutboxSource
	calls chan<- int
}

func (o observed) OutboxPublish(ctx context.Context, limit int, publish func(context.Context, []*dag.OutboxEvent) error) (int, error) {
	n, err := o.OutboxSource.OutboxPublish(ctx, limit, publish)
	if err != nil {
		n = -1
	}
	select {
	case o.calls <- n:
	case <-ctx.Done():
	}
	return n, err
}

func TestNewRelayValidates(t *testing.T) {
	t.Parallel()
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:9"))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	src := dag.NewMemoryStore(dag.MemoryConfig{})
	for _, tc := range []struct {
		cfg  ingest.RelayConfig
		want string
	}{
		{ingest.RelayConfig{Client: cl}, "RelayConfig.Source is required"},
		{ingest.RelayConfig{Source: src}, "RelayConfig.Client is required"},
		{ingest.RelayConfig{Source: src, Client: cl, BatchSize: -1}, "BatchSize must not be negative, got -1"},
		{ingest.RelayConfig{Source: src, Client: cl, PollInterval: -time.Second}, "PollInterval must not be negative, got -1s"},
		{ingest.RelayConfig{Source: src, Client: cl, ProduceTimeout: -time.Second}, "ProduceTimeout must not be negative"},
		{ingest.RelayConfig{Source: src, Client: cl, RetryBackoff: -time.Second}, "RetryBackoff must not be negative"},
		{ingest.RelayConfig{Source: src, Client: cl, MaxRetryBackoff: -time.Second}, "MaxRetryBackoff must not be negative"},
		{ingest.RelayConfig{Source: src, Client: cl, RetryBackoff: time.Minute}, "RetryBackoff (1m0s) must not exceed MaxRetryBackoff (30s)"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			_, err := ingest.NewRelay(tc.cfg)
			require.ErrorContains(t, err, tc.want)
		})
	}
	r, err := ingest.NewRelay(ingest.RelayConfig{Source: src, Client: cl})
	require.NoError(t, err)
	require.NotNil(t, r, "the zero values are defaults")
}
