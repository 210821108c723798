package logs

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/internal/httpguard"
)

// The routes of a Handler, as http.ServeMux patterns. A server mounts the
// Handler at "/v1/jobs/" or registers the handler methods under these.
const (
	PatternAppend = "PATCH /v1/jobs/{run_id}/{job_id}/log"
	PatternFinish = "POST /v1/jobs/{run_id}/{job_id}/log/finish"
	PatternFollow = "GET /v1/jobs/{run_id}/{job_id}/log/follow"
)

// Defaults of HandlerConfig.
const (
	// DefaultMaxChunkBytes is the largest chunk body accepted: 1 MiB.
	DefaultMaxChunkBytes = 1 << 20
	// DefaultHeartbeat is how often a quiet follow stream gets a comment
	// line, so proxies keep it open: 15 seconds.
	DefaultHeartbeat = 15 * time.Second
)

// Errors an AuthorizeFunc returns (wrapped or not) to choose the answer.
var (
	// ErrUnauthenticated: the request carries no valid credentials; 401.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrForbidden: the credentials do not allow this log; 403.
	ErrForbidden = errors.New("forbidden")
	// ErrStale: the writer's job attempt is no longer the current one
	// (its lease was lost); 409 with "stale": true, which tells a runner
	// to stop the job rather than to fix its request. It matches
	// cikit.ErrConflict.
	ErrStale = fmt.Errorf("%w: the attempt is no longer current", cikit.ErrConflict)
)

// AuthorizeFunc decides whether r may act on key's log. It returns nil to
// allow, or an error matching ErrUnauthenticated (401), ErrForbidden
// (403), cikit.ErrConflict (409: the attempt is no longer the runner's,
// for fencing) or cikit.ErrNotFound (404). Any other error is answered
// 503, as a failure to decide.
type AuthorizeFunc func(r *http.Request, key Key) error

// AllowAll is an AuthorizeFunc that allows everything, for tests and
// single-user setups.
func AllowAll(*http.Request, Key) error { return nil }

// HandlerConfig configures a Handler. Hub and both Authorize functions
// are required; the zero value of everything else is a sensible default.
type HandlerConfig struct {
	Hub *Hub
	// AuthorizeWrite guards appends and finishes: the runner's side.
	AuthorizeWrite AuthorizeFunc
	// AuthorizeFollow guards the follow stream: the readers' side.
	AuthorizeFollow AuthorizeFunc
	// MaxChunkBytes is the largest chunk body; a larger one is answered
	// 413. Default: DefaultMaxChunkBytes.
	MaxChunkBytes int
	// Heartbeat is how often a quiet follow stream gets a comment line.
	// Default: DefaultHeartbeat.
	Heartbeat time.Duration
	// Logger receives a record of every failed request (Warn for the
	// client's, Error for the server's). Default: slog.Default().
	Logger *slog.Logger
}

// Handler is the HTTP face of a Hub: the runner's chunk protocol and the
// follow stream. Its wire format is in the package's README; its answers
// are JSON except the follow stream.
type Handler struct {
	hub        *Hub
	authWrite  AuthorizeFunc
	authFollow AuthorizeFunc
	maxChunk   int
	heartbeat  time.Duration
	log        *slog.Logger
	mux        *http.ServeMux
	bodies     sync.Pool // *[]byte of cap maxChunk
	// closing ends the follow streams when canceled.
	closing context.Context
	close   context.CancelFunc
}

// NewHandler validates cfg and returns a Handler.
func NewHandler(cfg HandlerConfig) (*Handler, error) {
	if cfg.Hub == nil {
		return nil, errors.New("logs: HandlerConfig.Hub is required")
	}
	if cfg.AuthorizeWrite == nil || cfg.AuthorizeFollow == nil {
		return nil, errors.New("logs: HandlerConfig.AuthorizeWrite and AuthorizeFollow are required; use AllowAll to allow everything")
	}
	if cfg.MaxChunkBytes < 0 || cfg.Heartbeat < 0 {
		return nil, errors.New("logs: HandlerConfig.MaxChunkBytes and Heartbeat must not be negative")
	}
	h := &Handler{
		hub:        cfg.Hub,
		authWrite:  cfg.AuthorizeWrite,
		authFollow: cfg.AuthorizeFollow,
		maxChunk:   cmp.Or(cfg.MaxChunkBytes, DefaultMaxChunkBytes),
		heartbeat:  cmp.Or(cfg.Heartbeat, DefaultHeartbeat),
		log:        cmp.Or(cfg.Logger, slog.Default()),
		mux:        http.NewServeMux(),
	}
	h.closing, h.close = context.WithCancel(context.Background())
	h.mux.HandleFunc(PatternAppend, h.Append)
	h.mux.HandleFunc(PatternFinish, h.Finish)
	h.mux.HandleFunc(PatternFollow, h.Follow)
	return h, nil
}

// CloseFollowers ends the follow streams being served and makes new ones
// end at once, so that a server shutting down gracefully does not wait for
// them (register it with http.Server.RegisterOnShutdown). Their clients
// reconnect, with Last-Event-ID, to another server. Safe to call twice.
func (h *Handler) CloseFollowers() { h.close() }

// ServeHTTP routes to Append, Finish and Follow by the Pattern constants.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// DecodeChunk reads a chunk request: the run and job ids of its path, its
// query (attempt, step, seq), its Content-Range header and its body. It
// checks everything the Hub relies on and returns an error, written for
// the runner, for anything malformed. The chunk's Data is body.
func DecodeChunk(runID, jobID string, query url.Values, header http.Header, body []byte) (*Chunk, error) {
	key, err := decodeKey(runID, jobID, query)
	if err != nil {
		return nil, err
	}
	step, err := queryInt(query, "step", 1<<31-1)
	if err != nil {
		return nil, err
	}
	seq, err := queryInt(query, "seq", 1<<63-1)
	if err != nil {
		return nil, err
	}
	start, end, err := parseContentRange(header.Get("Content-Range"))
	if err != nil {
		return nil, err
	}
	if int64(len(body))-1 != end-start {
		return nil, fmt.Errorf("the body has %d bytes but Content-Range names %d", len(body), end-start+1)
	}
	return &Chunk{Key: key, Step: int(step), Seq: seq, Offset: start, Data: body}, nil
}

func decodeKey(runID, jobID string, query url.Values) (Key, error) {
	attempt, err := queryInt(query, "attempt", 1<<31-1)
	if err != nil {
		return Key{}, err
	}
	key := Key{RunID: runID, JobID: jobID, Attempt: int(attempt)}
	return key, key.Validate()
}

// queryInt reads a required decimal parameter in [0, max].
func queryInt(query url.Values, name string, max uint64) (int64, error) {
	vs := query[name]
	if len(vs) != 1 {
		return 0, fmt.Errorf("the query needs one %s parameter, got %d", name, len(vs))
	}
	n, err := strconv.ParseUint(vs[0], 10, 64)
	if err != nil || n > max {
		return 0, fmt.Errorf("the %s parameter %q is not a whole number from 0 to %d", name, vs[0], max)
	}
	return int64(n), nil
}

// parseContentRange reads "bytes <start>-<end>", optionally followed by
// "/<total>" or "/*", or the bare "<start>-<end>" GitLab runners send.
// end is inclusive.
func parseContentRange(s string) (start, end int64, err error) {
	bad := func() (int64, int64, error) {
		return 0, 0, fmt.Errorf("the Content-Range header %q is not \"bytes <start>-<end>\"", s)
	}
	if s == "" {
		return 0, 0, errors.New("the Content-Range header is required: \"bytes <start>-<end>\"")
	}
	r := strings.TrimPrefix(s, "bytes ")
	if rng, total, ok := strings.Cut(r, "/"); ok {
		if _, err := strconv.ParseUint(total, 10, 63); err != nil && total != "*" {
			return bad()
		}
		r = rng
	}
	a, b, ok := strings.Cut(r, "-")
	if !ok {
		return bad()
	}
	x, err1 := strconv.ParseUint(a, 10, 63)
	y, err2 := strconv.ParseUint(b, 10, 63)
	// y is below MaxInt64 so that the end after it, y+1, is an offset too.
	if err1 != nil || err2 != nil || y < x || y == math.MaxInt64 {
		return bad()
	}
	return int64(x), int64(y), nil
}

// Append takes one chunk: PATCH with the raw bytes as the body.
func (h *Handler) Append(w http.ResponseWriter, r *http.Request) {
	query := r.URL.Query()
	key, ok := h.authorizeQuery(w, r, query, h.authWrite)
	if !ok {
		return
	}
	if r.ContentLength > int64(h.maxChunk) {
		h.refuse(w, r, key, http.StatusRequestEntityTooLarge, fmt.Sprintf("the chunk is larger than %d bytes", h.maxChunk))
		return
	}
	bp := h.body()
	defer h.bodies.Put(bp)
	body, err := readBody(r.Body, *bp, h.maxChunk)
	if err != nil {
		if errors.Is(err, errTooLarge) {
			h.refuse(w, r, key, http.StatusRequestEntityTooLarge, fmt.Sprintf("the chunk is larger than %d bytes", h.maxChunk))
		} else if status, retryAfter := httpguard.Status(err); status != 0 {
			// Cut by the server's body guard: too slow (408) or the
			// budget of bytes in flight spent (503). Neither is about
			// the log: the runner sends the chunk again.
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
			h.refuse(w, r, key, status, "reading the body: "+err.Error())
		} else {
			h.refuse(w, r, key, http.StatusBadRequest, "reading the body: "+err.Error())
		}
		return
	}
	c, err := DecodeChunk(key.RunID, key.JobID, query, r.Header, body)
	if err != nil {
		h.refuse(w, r, key, http.StatusBadRequest, err.Error())
		return
	}
	res, err := h.hub.Append(r.Context(), c)
	if err != nil {
		h.fail(w, r, key, err)
		return
	}
	// The answer is written by hand: it is the hot path.
	out := (*bp)[:0] // the body is copied by now
	out = append(out, `{"next_offset":`...)
	out = strconv.AppendInt(out, res.NextOffset, 10)
	out = append(out, "}\n"...)
	hd := w.Header()
	hd["Content-Type"] = jsonType
	hd["X-Content-Type-Options"] = nosniff
	w.WriteHeader(http.StatusAccepted)
	_, _ = w.Write(out)
}

var (
	jsonType = []string{"application/json"}
	nosniff  = []string{"nosniff"}
)

func (h *Handler) body() *[]byte {
	if bp, ok := h.bodies.Get().(*[]byte); ok {
		return bp
	}
	b := make([]byte, 0, h.maxChunk)
	return &b
}

var errTooLarge = errors.New("too large")

// readBody reads r into buf (of cap max), refusing more than max bytes.
func readBody(r io.Reader, buf []byte, max int) ([]byte, error) {
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			var one [1]byte
			n, err := r.Read(one[:])
			if n > 0 {
				return nil, errTooLarge
			}
			if err == io.EOF {
				return buf, nil
			}
			if err != nil {
				return nil, err
			}
			continue
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

type finishRequest struct {
	TotalBytes   *int64 `json:"total_bytes"`
	SHA256       string `json:"sha256"`
	DroppedBytes int64  `json:"dropped_bytes"`
}

type finishAnswer struct {
	Complete     bool  `json:"complete"`
	Bytes        int64 `json:"bytes"`
	Truncated    bool  `json:"truncated,omitempty"`
	DroppedBytes int64 `json:"dropped_bytes,omitempty"`
}

// Finish ends the log: POST a JSON {"total_bytes", "sha256"}, and
// "dropped_bytes" from a runner that cut the log itself.
func (h *Handler) Finish(w http.ResponseWriter, r *http.Request) {
	key, ok := h.authorize(w, r, h.authWrite)
	if !ok {
		return
	}
	var req finishRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<10)).Decode(&req); err != nil {
		h.refuse(w, r, key, http.StatusBadRequest, "the body is not a JSON object {\"total_bytes\": n, \"sha256\": hex}: "+err.Error())
		return
	}
	if req.TotalBytes == nil || *req.TotalBytes < 0 || !validSHA256(strings.ToLower(req.SHA256)) || req.DroppedBytes < 0 {
		h.refuse(w, r, key, http.StatusBadRequest, "the body needs total_bytes, a number from 0, and sha256, 64 hex digits; dropped_bytes, when given, is a number from 0")
		return
	}
	res, err := h.hub.Finish(r.Context(), key, FinishParams{TotalBytes: *req.TotalBytes, SHA256: req.SHA256, DroppedBytes: req.DroppedBytes})
	if err != nil {
		h.fail(w, r, key, err)
		return
	}
	writeJSON(w, http.StatusOK, finishAnswer{Complete: res.Complete, Bytes: res.Bytes, Truncated: res.Truncated, DroppedBytes: res.DroppedBytes})
}

// Follow streams the log as Server-Sent Events from ?offset= or the
// Last-Event-ID header.
func (h *Handler) Follow(w http.ResponseWriter, r *http.Request) {
	key, ok := h.authorize(w, r, h.authFollow)
	if !ok {
		return
	}
	var from int64
	if v := r.URL.Query().Get("offset"); v != "" {
		n, err := strconv.ParseUint(v, 10, 63)
		if err != nil {
			h.refuse(w, r, key, http.StatusBadRequest, fmt.Sprintf("the offset parameter %q is not a whole number from 0", v))
			return
		}
		from = int64(n)
	}
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseUint(v, 10, 63)
		if err != nil {
			h.refuse(w, r, key, http.StatusBadRequest, fmt.Sprintf("the Last-Event-ID header %q is not a byte offset", v))
			return
		}
		from = int64(n)
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(h.closing, cancel)()
	f, err := h.hub.Follow(ctx, key, from)
	if err != nil {
		h.fail(w, r, key, err)
		return
	}
	defer f.Close()

	rc := http.NewResponseController(w)
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	buf := make([]byte, 0, 512)
	buf = append(buf, "retry: 1000\n\n"...)
	if _, err := w.Write(buf); err != nil {
		return
	}
	_ = rc.Flush()

	tick := time.NewTicker(h.heartbeat)
	defer tick.Stop()
	for {
		ev, ok, err := f.next(ctx, tick.C)
		switch {
		case err == io.EOF:
			res := f.Result()
			buf = appendEnd(buf[:0], res)
		case err != nil:
			if ctx.Err() == nil { // not the client leaving nor CloseFollowers
				h.log.LogAttrs(ctx, slog.LevelError, "log follow failed", slog.String("log", key.String()), slog.String("error", err.Error()))
			}
			return
		case !ok:
			buf = append(buf[:0], ": ping\n\n"...)
		default:
			buf = appendEvent(buf[:0], ev)
		}
		if _, werr := w.Write(buf); werr != nil {
			return
		}
		if rc.Flush() != nil || err == io.EOF {
			return
		}
	}
}

// appendEvent formats a "log" event; see the README for the format.
func appendEvent(buf []byte, ev Event) []byte {
	buf = append(buf, "id: "...)
	buf = strconv.AppendInt(buf, ev.End(), 10)
	buf = append(buf, "\nevent: log\ndata: {\"step\":"...)
	buf = strconv.AppendInt(buf, int64(ev.Step), 10)
	buf = append(buf, ",\"offset\":"...)
	buf = strconv.AppendInt(buf, ev.Offset, 10)
	buf = append(buf, ",\"data\":\""...)
	buf = base64.StdEncoding.AppendEncode(buf, ev.Data)
	return append(buf, "\"}\n\n"...)
}

// appendEnd formats the "end" event.
func appendEnd(buf []byte, res *FinishResult) []byte {
	buf = append(buf, "id: "...)
	buf = strconv.AppendInt(buf, res.Bytes, 10)
	buf = append(buf, "\nevent: end\ndata: {\"complete\":"...)
	buf = strconv.AppendBool(buf, res.Complete)
	buf = append(buf, ",\"bytes\":"...)
	buf = strconv.AppendInt(buf, res.Bytes, 10)
	return append(buf, "}\n\n"...)
}

// authorize reads the key of r's path and query and asks auth; it answers
// r and returns false when either fails.
func (h *Handler) authorize(w http.ResponseWriter, r *http.Request, auth AuthorizeFunc) (Key, bool) {
	return h.authorizeQuery(w, r, r.URL.Query(), auth)
}

func (h *Handler) authorizeQuery(w http.ResponseWriter, r *http.Request, query url.Values, auth AuthorizeFunc) (Key, bool) {
	key, err := decodeKey(r.PathValue("run_id"), r.PathValue("job_id"), query)
	if err != nil {
		h.refuse(w, r, key, http.StatusBadRequest, err.Error())
		return key, false
	}
	if err := auth(r, key); err != nil {
		status, msg := http.StatusServiceUnavailable, "authorization could not be decided; retry later"
		switch {
		case errors.Is(err, ErrStale):
			h.log.LogAttrs(r.Context(), slog.LevelWarn, "log request refused", slog.String("log", key.String()), slog.Int("status", http.StatusConflict), slog.String("error", err.Error()))
			writeJSON(w, http.StatusConflict, errorAnswer{Error: err.Error(), Stale: true})
			return key, false
		case errors.Is(err, ErrUnauthenticated):
			status, msg = http.StatusUnauthorized, err.Error()
		case errors.Is(err, ErrForbidden):
			status, msg = http.StatusForbidden, err.Error()
		case errors.Is(err, cikit.ErrConflict):
			status, msg = http.StatusConflict, err.Error()
		case errors.Is(err, cikit.ErrNotFound):
			status, msg = http.StatusNotFound, err.Error()
		default:
			h.log.LogAttrs(r.Context(), slog.LevelError, "log authorization failed", slog.String("log", key.String()), slog.String("error", err.Error()))
			w.Header().Set("Retry-After", "5")
		}
		h.refuse(w, r, key, status, msg)
		return key, false
	}
	return key, true
}

type errorAnswer struct {
	Error          string `json:"error"`
	ExpectedOffset *int64 `json:"expected_offset,omitempty"`
	Stale          bool   `json:"stale,omitempty"`
}

// fail answers a Hub error.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, key Key, err error) {
	if gap, ok := errors.AsType[*GapError](err); ok {
		w.Header().Set("Range", "0-"+strconv.FormatInt(gap.Expected, 10))
		h.log.LogAttrs(r.Context(), slog.LevelDebug, "log chunk refused", slog.String("log", key.String()), slog.Int("status", http.StatusRequestedRangeNotSatisfiable), slog.String("error", err.Error()))
		writeJSON(w, http.StatusRequestedRangeNotSatisfiable, errorAnswer{Error: err.Error(), ExpectedOffset: &gap.Expected})
		return
	}
	switch {
	case errors.Is(err, ErrBusy):
		w.Header().Set("Retry-After", "5")
		h.refuse(w, r, key, http.StatusServiceUnavailable, ErrBusy.Error())
	case errors.Is(err, cikit.ErrConflict):
		h.refuse(w, r, key, http.StatusConflict, err.Error())
	case errors.Is(err, cikit.ErrNotFound):
		h.refuse(w, r, key, http.StatusNotFound, err.Error())
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client left; nobody reads an answer.
	default:
		h.log.LogAttrs(r.Context(), slog.LevelError, "log request failed", slog.String("log", key.String()), slog.String("error", err.Error()))
		w.Header().Set("Retry-After", "5")
		writeJSON(w, http.StatusServiceUnavailable, errorAnswer{Error: "the log could not be stored; retry later"})
	}
}

func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, key Key, status int, msg string) {
	h.log.LogAttrs(r.Context(), slog.LevelWarn, "log request refused", slog.String("log", key.String()), slog.Int("status", status), slog.String("error", msg))
	writeJSON(w, status, errorAnswer{Error: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
