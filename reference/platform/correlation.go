package platform

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/cikit/cikit/ingest"
	"github.com/cikit/cikit/reference/config"
)

// A correlation id follows a push from its webhook to its commit statuses
// through the log. It is a W3C trace context trace id (32 hex digits), so
// tracing systems can join the platform's records with their spans:
//
//   - a webhook's trace id is derived from its delivery (provider, hook and
//     delivery id, as the receiver normalized them: traceID), so the
//     receiver, the ingester that creates the runs and the consumer that
//     reports their statuses, in whichever process, all log the same id
//     without passing it along;
//   - any other request keeps the trace id of its traceparent header, or
//     gets a new one;
//   - every answer carries a traceparent header with the trace id.
//
// Records carry it as the attribute trace_id.

// traceID derives the trace id of a delivery.
func traceID(provider, hook, delivery string) string {
	sum := sha256.Sum256([]byte(provider + "/" + hook + "/" + delivery))
	return hex.EncodeToString(sum[:16])
}

// runTraceID is the trace id of the delivery that created a run, from the
// run's idempotency key ("provider/hook/delivery#i"); "" for runs made
// otherwise.
func runTraceID(idempotencyKey string) string {
	i := strings.LastIndexByte(idempotencyKey, '#')
	if i < 0 {
		return ""
	}
	parts := strings.SplitN(idempotencyKey[:i], "/", 3)
	if len(parts) != 3 {
		return ""
	}
	return traceID(parts[0], parts[1], parts[2])
}

var traceparentRE = regexp.MustCompile(`^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$`)

// requestTraceID is the trace id a request brings in its traceparent
// header, or a new one.
func requestTraceID(r *http.Request) string {
	if m := traceparentRE.FindStringSubmatch(r.Header.Get("Traceparent")); m != nil && m[1] != strings.Repeat("0", 32) {
		return m[1]
	}
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// trace is the trace of a request or of a record being handled. A
// webhook's changes once the receiver has normalized the delivery.
type trace struct {
	mu     sync.Mutex
	id     string
	header http.Header // the answer's, for its traceparent; nil outside requests
}

func (t *trace) get() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.id
}

// set changes the trace id, and the answer's traceparent header if the
// answer has not been sent yet.
func (t *trace) set(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.id = id
	if t.header != nil {
		span := make([]byte, 8)
		rand.Read(span)
		t.header.Set("Traceparent", "00-"+id+"-"+hex.EncodeToString(span)+"-01")
	}
}

type traceKey struct{}

// withTrace returns ctx carrying a trace id.
func withTrace(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, traceKey{}, &trace{id: id})
}

// traceOf returns the trace ctx carries, or nil.
func traceOf(ctx context.Context) *trace {
	t, _ := ctx.Value(traceKey{}).(*trace)
	return t
}

// traced is the publisher of verified deliveries: it gives the request the
// trace id of the delivery.
func traced(pub ingest.Publisher) ingest.Publisher {
	return publisherFunc(func(ctx context.Context, ev *ingest.Event) error {
		if t := traceOf(ctx); t != nil {
			t.set(traceID(string(ev.Provider), ev.HookID, ev.DeliveryID))
		}
		return pub.Publish(ctx, ev)
	})
}

// traceHandler adds the trace id in a record's context to the record.
type traceHandler struct{ slog.Handler }

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if t := traceOf(ctx); t != nil {
		r.AddAttrs(slog.String("trace_id", t.get()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h traceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return traceHandler{h.Handler.WithAttrs(as)}
}

func (h traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{h.Handler.WithGroup(name)}
}

// NewLogger returns the platform's logger: text or JSON records at the
// configured level, with the trace id of their context.
func NewLogger(w io.Writer, c config.Log) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if c.Format == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(traceHandler{h})
}

// withCorrelation gives every request its trace, answers its id in a
// traceparent header and logs the request.
func withCorrelation(log *slog.Logger, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := &trace{header: w.Header()}
		t.set(requestTraceID(r))
		ctx := context.WithValue(r.Context(), traceKey{}, t)
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(sw, r.WithContext(ctx))
		level := slog.LevelDebug
		if strings.HasPrefix(r.URL.Path, "/webhooks/") || sw.code >= 500 {
			level = slog.LevelInfo
		}
		log.Log(ctx, level, "http", "method", r.Method, "path", r.URL.Path, "status", sw.code, "duration", time.Since(start))
	})
}
