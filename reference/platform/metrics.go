package platform

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/artifacts"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/ingest"
	"github.com/cikit/cikit/internal/httpguard"
)

// maxReady bounds the ready times kept to measure queue waits.
const maxReady = 100_000

// metrics are the platform's Prometheus metrics, in a registry of its own
// (so that several platforms in one process, as in tests, do not collide).
type metrics struct {
	reg *prometheus.Registry

	webhookRequests *prometheus.CounterVec
	webhookLatency  *prometheus.HistogramVec
	webhooksPublish prometheus.Histogram
	runsCreated     prometheus.Counter
	policyEval      prometheus.Histogram
	policyDecisions *prometheus.CounterVec
	queueWait       *prometheus.HistogramVec
	leaseExpiries   prometheus.Counter
	logBytes        prometheus.Counter
	jobsFinished    *prometheus.CounterVec
	// pruned counts what the artifacts pruner deleted, by kind
	// ("artifacts", "cache", "uploads"), in items and bytes.
	pruned      *prometheus.CounterVec
	prunedBytes *prometheus.CounterVec

	mu    sync.Mutex
	ready map[string]time.Time // "run/job/attempt" → when it became ready
}

// latencyBuckets are the histograms' buckets, in seconds.
var latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry(), ready: map[string]time.Time{}}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f := promauto.With(m.reg)
	latency := func(name, help string) prometheus.HistogramOpts {
		return prometheus.HistogramOpts{Name: name, Help: help, Buckets: latencyBuckets}
	}
	m.webhookRequests = f.NewCounterVec(prometheus.CounterOpts{Name: "cikit_webhook_requests_total", Help: "Webhook deliveries received, by provider and HTTP status."}, []string{"provider", "code"})
	m.webhookLatency = f.NewHistogramVec(latency("cikit_webhook_duration_seconds", "Time to verify and publish a webhook delivery, by provider."), []string{"provider"})
	m.webhooksPublish = f.NewHistogram(latency("cikit_webhook_publish_duration_seconds", "Time for Kafka to acknowledge a verified delivery."))
	m.runsCreated = f.NewCounter(prometheus.CounterOpts{Name: "cikit_runs_created_total", Help: "Pipeline runs created from deliveries."})
	m.policyEval = f.NewHistogram(prometheus.HistogramOpts{Name: "cikit_policy_evaluation_seconds", Help: "Time the policy took to decide one job of a run being created.",
		Buckets: []float64{10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 5e-3, 25e-3, 100e-3}})
	m.policyDecisions = f.NewCounterVec(prometheus.CounterOpts{Name: "cikit_policy_decisions_total", Help: "The policy's decisions about jobs, by decision (a failed evaluation counts as deny)."}, []string{"decision"})
	m.queueWait = f.NewHistogramVec(latency("cikit_job_queue_wait_seconds", "Time from a job becoming ready to its start (dispatch latency), by lane and tenant."), []string{"lane", "tenant"})
	m.leaseExpiries = f.NewCounter(prometheus.CounterOpts{Name: "cikit_lease_expiries_total", Help: "Job attempts whose lease expired and that the reaper ended."})
	m.logBytes = f.NewCounter(prometheus.CounterOpts{Name: "cikit_log_bytes_total", Help: "Bytes of job logs received from runners."})
	m.jobsFinished = f.NewCounterVec(prometheus.CounterOpts{Name: "cikit_jobs_finished_total", Help: "Jobs that reached a terminal state, by state."}, []string{"state"})
	m.pruned = f.NewCounterVec(prometheus.CounterOpts{Name: "cikit_pruned_total", Help: "What the pruner deleted: expired artifacts, evicted cache entries, abandoned uploads and blobs, by kind."}, []string{"kind"})
	m.prunedBytes = f.NewCounterVec(prometheus.CounterOpts{Name: "cikit_pruned_bytes_total", Help: "Bytes the pruner freed in blob storage, by kind (artifacts, cache)."}, []string{"kind"})
	return m
}

// countPruned counts what one pruning deleted.
func (m *metrics) countPruned(st artifacts.PruneStats) {
	m.pruned.WithLabelValues("artifacts").Add(float64(st.Artifacts))
	m.pruned.WithLabelValues("cache").Add(float64(st.CacheEntries))
	m.pruned.WithLabelValues("uploads").Add(float64(st.Uploads))
	m.pruned.WithLabelValues("blobs").Add(float64(st.Blobs))
	m.prunedBytes.WithLabelValues("artifacts").Add(float64(st.ArtifactBytes))
	m.prunedBytes.WithLabelValues("cache").Add(float64(st.CacheBytes))
}

// gauges registers the metrics read from the platform's parts when
// scraped: queue depths, outbox lag and consumer lag.
func (p *Platform) gauges() {
	m := p.metrics
	m.reg.MustRegister(&queueCollector{p: p,
		depth: prometheus.NewDesc("cikit_queue_depth", "Jobs waiting for a runner in this server, by runs_on labels.", []string{"labels"}, nil),
		held:  prometheus.NewDesc("cikit_queue_held", "Jobs held back by their tenant's limit, by runs_on labels.", []string{"labels"}, nil),
	})
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "cikit_outbox_lag_seconds", Help: "Age of the oldest event not yet published to Kafka (0 when none waits).",
	}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		evs, err := p.jobs.OutboxPending(ctx, 1)
		if err != nil || len(evs) == 0 {
			return 0
		}
		return p.now().Sub(evs[0].CreatedAt).Seconds()
	}))
	m.reg.MustRegister(&lagCollector{p: p, desc: prometheus.NewDesc("cikit_consumer_lag", "Records not yet consumed, by consumer group and topic.", []string{"group", "topic"}, nil)})
}

// bodyGauge registers the request-body bytes the guard holds.
func (p *Platform) bodyGauge(b *httpguard.Bodies) {
	p.metrics.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "cikit_http_body_bytes_in_flight", Help: "Request-body bytes reserved now, of http.max-body-bytes-in-flight.",
	}, func() float64 { return float64(b.InFlight()) }))
}

type queueCollector struct {
	p           *Platform
	depth, held *prometheus.Desc
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.depth; ch <- c.held }

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	for _, q := range c.p.fleet.Dispatcher().Queues() {
		labels := strings.Join(q.Labels, ",")
		ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(q.Len), labels)
		ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(q.Held), labels)
	}
}

// webhooks wraps the receiver with the webhook metrics.
func (m *metrics) webhooks(h http.Handler) func(provider string) http.Handler {
	return func(provider string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
			h.ServeHTTP(sw, r)
			m.webhookRequests.WithLabelValues(provider, strconv.Itoa(sw.code)).Inc()
			m.webhookLatency.WithLabelValues(provider).Observe(time.Since(start).Seconds())
		})
	}
}

// publisher times the Kafka acknowledgements of verified deliveries.
func (m *metrics) publisher(pub ingest.Publisher) ingest.Publisher {
	return publisherFunc(func(ctx context.Context, ev *ingest.Event) error {
		start := time.Now()
		err := pub.Publish(ctx, ev)
		if err == nil {
			m.webhooksPublish.Observe(time.Since(start).Seconds())
		}
		return err
	})
}

type publisherFunc func(ctx context.Context, ev *ingest.Event) error

func (f publisherFunc) Publish(ctx context.Context, ev *ingest.Event) error { return f(ctx, ev) }

// runnerAPI counts the log bytes runners send and the server takes.
func (m *metrics) runnerAPI(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPatch && strings.HasSuffix(r.URL.Path, "/log") {
			body := &countingReader{r: r.Body}
			r.Body = body
			sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
			h.ServeHTTP(sw, r)
			if sw.code < 300 {
				m.logBytes.Add(float64(body.n))
			}
			return
		}
		h.ServeHTTP(w, r)
	})
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.ReadCloser
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) Close() error { return c.r.Close() }

// observeEvent measures queue waits from the pipeline events: a job's
// "job.ready" and then its "job.started".
func (m *metrics) observeEvent(ev *dag.OutboxEvent) {
	key := ev.RunID + "/" + ev.JobID + "/" + strconv.Itoa(ev.Attempt)
	m.mu.Lock()
	defer m.mu.Unlock()
	switch ev.Type {
	case dag.EventJobReady:
		if len(m.ready) >= maxReady {
			// Starts this server never saw (another server's consumer
			// took them) leave entries behind: forget them all rather
			// than stop measuring.
			clear(m.ready)
		}
		m.ready[key] = ev.CreatedAt
	case dag.EventJobStarted:
		if at, ok := m.ready[key]; ok {
			delete(m.ready, key)
			tenant, _, _ := strings.Cut(ev.Pipeline, "/")
			m.queueWait.WithLabelValues("p1", tenant).Observe(ev.CreatedAt.Sub(at).Seconds())
		}
	case dag.EventJobCompleted:
		delete(m.ready, key)
		m.jobsFinished.WithLabelValues(ev.State).Inc()
	}
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// statusWriter records the status code of an answer.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the writer's Flush.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// lagCollector reports the consumer groups' lag, asked of Kafka when
// scraped.
type lagCollector struct {
	p    *Platform
	desc *prometheus.Desc
}

func (c *lagCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *lagCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	g := c.p.cfg.Kafka.Group
	groups := []string{g + "-ingest", g + "-events"}
	for _, topic := range []string{ingest.TopicDispatchP0, ingest.TopicDispatchP1, ingest.TopicDispatchP2} {
		groups = append(groups, g+"-"+topic+"-"+c.p.instance())
	}
	lags, err := kadm.NewClient(c.p.producer).Lag(ctx, groups...)
	if err != nil {
		return
	}
	for _, l := range lags.Sorted() {
		if l.Error() != nil {
			continue
		}
		for topic, total := range l.Lag.TotalByTopic() {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(total.Lag), l.Group, topic)
		}
	}
}

// policyObserved records one policy evaluation.
func (m *metrics) policyObserved(d time.Duration, decision cikit.Decision) {
	m.policyEval.Observe(d.Seconds())
	m.policyDecisions.WithLabelValues(string(decision)).Inc()
}
