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
	"time"

	"github.com/cikit/cikit/reference/config"
)

// A correlation id follows a push from its webhook to its commit statuses
// through the log. It is a W3C trace context trace id (32 hex digits), so
// tracing systems can join the platform's records with their spans:
//
//   - a webhook's trace id is derived from its delivery (provider, hook and
//     delivery id: traceID), so the receiver, the ingester that creates the
//     runs and the consumer that reports their statuses, in whichever
//     process, all log the same id without passing it along;
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
	key, _, ok := strings.Cut(idempotencyKey, "#")
	parts := strings.SplitN(key, "/", 3)
	if !ok || len(parts) != 3 {
		return ""
	}
	return traceID(parts[0], parts[1], parts[2])
}

var traceparentRE = regexp.MustCompile(`^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$`)

// requestTraceID is the trace id of a request.
func requestTraceID(r *http.Request) string {
	h := r.Header
	switch {
	case h.Get("X-GitHub-Delivery") != "":
		return traceID("github", h.Get("X-GitHub-Hook-ID"), h.Get("X-GitHub-Delivery"))
	case h.Get("X-Gitlab-Event-UUID") != "":
		return traceID("gitlab", h.Get("X-Gitlab-Webhook-UUID"), h.Get("X-Gitlab-Event-UUID"))
	}
	if m := traceparentRE.FindStringSubmatch(h.Get("Traceparent")); m != nil && m[1] != strings.Repeat("0", 32) {
		return m[1]
	}
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

type traceKey struct{}

// withTrace returns ctx carrying a trace id.
func withTrace(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, traceKey{}, id)
}

// traceHandler adds the trace id in a record's context to the record.
type traceHandler struct{ slog.Handler }

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if id, ok := ctx.Value(traceKey{}).(string); ok {
		r.AddAttrs(slog.String("trace_id", id))
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

// withCorrelation gives every request its trace id, answers it in a
// traceparent header and logs the request.
func withCorrelation(log *slog.Logger, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := requestTraceID(r)
		span := make([]byte, 8)
		rand.Read(span)
		w.Header().Set("Traceparent", "00-"+id+"-"+hex.EncodeToString(span)+"-01")
		ctx := withTrace(r.Context(), id)
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
