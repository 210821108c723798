package logs_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/logs"
)

type server struct {
	*bundle
	srv  *httptest.Server
	base string // the log's URL
}

func newServer(t *testing.T, cfg logs.HandlerConfig, hubCfg ...logs.Config) *server {
	t.Helper()
	b := setup(t, append(hubCfg, logs.Config{})[0])
	cfg.Hub = b.hub
	if cfg.AuthorizeWrite == nil {
		cfg.AuthorizeWrite = logs.AllowAll
	}
	if cfg.AuthorizeFollow == nil {
		cfg.AuthorizeFollow = logs.AllowAll
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	h, err := logs.NewHandler(cfg)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/v1/jobs/", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &server{bundle: b, srv: srv, base: srv.URL + "/v1/jobs/run-1/build/log"}
}

type answer struct {
	status int
	header http.Header
	body   map[string]any
}

func do(t *testing.T, req *http.Request) answer {
	t.Helper()
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	a := answer{status: res.StatusCode, header: res.Header}
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	if len(raw) > 0 {
		require.NoError(t, json.Unmarshal(raw, &a.body), "%s", raw)
	}
	return a
}

func (s *server) patch(t *testing.T, query, contentRange, body string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPatch, s.base+"?"+query, strings.NewReader(body))
	require.NoError(t, err)
	if contentRange != "" {
		req.Header.Set("Content-Range", contentRange)
	}
	return do(t, req)
}

// send appends data at off over HTTP and requires 202.
func (s *server) send(t *testing.T, step int, seq, off int64, data string) {
	t.Helper()
	a := s.patch(t, fmt.Sprintf("attempt=1&step=%d&seq=%d", step, seq), fmt.Sprintf("bytes %d-%d", off, off+int64(len(data))-1), data)
	require.Equal(t, http.StatusAccepted, a.status, "%v", a.body)
	require.Equal(t, float64(off+int64(len(data))), a.body["next_offset"])
}

func (s *server) finishHTTP(t *testing.T, total int64, sha string) answer {
	t.Helper()
	body := fmt.Sprintf(`{"total_bytes":%d,"sha256":%q}`, total, sha)
	req, err := http.NewRequest(http.MethodPost, s.base+"/finish?attempt=1", strings.NewReader(body))
	require.NoError(t, err)
	return do(t, req)
}

func TestHTTPAppend(t *testing.T) {
	t.Parallel()
	s := newServer(t, logs.HandlerConfig{MaxChunkBytes: 16})
	s.send(t, 0, 0, 0, "hello")

	a := s.patch(t, "attempt=1&step=0&seq=1", "bytes 0-4", "hello")
	require.Equal(t, http.StatusAccepted, a.status, "a duplicate")
	require.Equal(t, map[string]any{"next_offset": 5.0}, a.body)

	a = s.patch(t, "attempt=1&step=0&seq=2", "7-9", "abc")
	require.Equal(t, http.StatusRequestedRangeNotSatisfiable, a.status, "a gap")
	require.Equal(t, "0-5", a.header.Get("Range"))
	require.Equal(t, 5.0, a.body["expected_offset"])
	require.Contains(t, a.body["error"], "send again from 5")

	a = s.patch(t, "attempt=1&step=0&seq=1", "bytes 0-4/*", "HELLO")
	require.Equal(t, http.StatusConflict, a.status)
	require.Contains(t, a.body["error"], "differ")

	a = s.patch(t, "attempt=1&step=0&seq=1", "bytes 5-21", strings.Repeat("x", 17))
	require.Equal(t, http.StatusRequestEntityTooLarge, a.status)

	req, err := http.NewRequest(http.MethodPatch, s.base+"?attempt=1&step=0&seq=1", io.MultiReader(strings.NewReader(strings.Repeat("y", 17))))
	require.NoError(t, err)
	req.Header.Set("Content-Range", "bytes 5-21")
	req.ContentLength = -1 // chunked: the limit applies while reading
	require.Equal(t, http.StatusRequestEntityTooLarge, do(t, req).status)

	for name, c := range map[string]struct{ query, contentRange, body string }{
		"no Content-Range":     {"attempt=1&step=0&seq=1", "", "x"},
		"bad Content-Range":    {"attempt=1&step=0&seq=1", "bytes 5-", "x"},
		"reversed range":       {"attempt=1&step=0&seq=1", "bytes 6-5", "x"},
		"length mismatch":      {"attempt=1&step=0&seq=1", "bytes 5-9", "x"},
		"empty body":           {"attempt=1&step=0&seq=1", "bytes 5-4", ""},
		"no attempt":           {"step=0&seq=1", "bytes 5-5", "x"},
		"attempt 0":            {"attempt=0&step=0&seq=1", "bytes 5-5", "x"},
		"negative step":        {"attempt=1&step=-1&seq=1", "bytes 5-5", "x"},
		"no seq":               {"attempt=1&step=0", "bytes 5-5", "x"},
		"two steps":            {"attempt=1&step=0&step=1&seq=1", "bytes 5-5", "x"},
		"signed range":         {"attempt=1&step=0&seq=1", "bytes +5-5", "x"},
		"start beyond int64":   {"attempt=1&step=0&seq=1", "bytes 9223372036854775808-9223372036854775808", "x"},
		"end at the int64 cap": {"attempt=1&step=0&seq=1", "bytes 9223372036854775807-9223372036854775807", "x"},
	} {
		a := s.patch(t, c.query, c.contentRange, c.body)
		require.Equal(t, http.StatusBadRequest, a.status, name)
		require.NotEmpty(t, a.body["error"], name)
	}

	req = mustRequest(t, http.MethodPatch, s.srv.URL+"/v1/jobs/run-1/a%00b/log?attempt=1&step=0&seq=0", "x")
	req.Header.Set("Content-Range", "bytes 0-0")
	a = do(t, req)
	require.Equal(t, http.StatusBadRequest, a.status, "a job id with a control character")
	require.Contains(t, a.body["error"], "job id")

	s.send(t, 1, 1, 5, " world")
	res := s.finishHTTP(t, 11, digest("hello world"))
	require.Equal(t, http.StatusOK, res.status)
	require.Equal(t, map[string]any{"complete": true, "bytes": 11.0}, res.body)
	a = s.patch(t, "attempt=1&step=1&seq=3", "bytes 11-11", "!")
	require.Equal(t, http.StatusConflict, a.status, "after finish")
}

func mustRequest(t *testing.T, method, url, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	return req
}

func TestHTTPFinish(t *testing.T) {
	t.Parallel()
	s := newServer(t, logs.HandlerConfig{})
	s.send(t, 0, 0, 0, "abc")
	for name, body := range map[string]string{
		"not JSON":       "total_bytes=3",
		"no total":       `{"sha256":"` + digest("abc") + `"}`,
		"negative total": `{"total_bytes":-1,"sha256":"` + digest("abc") + `"}`,
		"short digest":   `{"total_bytes":3,"sha256":"abc"}`,
	} {
		a := do(t, mustRequest(t, http.MethodPost, s.base+"/finish?attempt=1", body))
		require.Equal(t, http.StatusBadRequest, a.status, name)
	}
	a := s.finishHTTP(t, 4, digest("abcd"))
	require.Equal(t, http.StatusOK, a.status)
	require.Equal(t, map[string]any{"complete": false, "bytes": 3.0}, a.body, "the runner sent a byte that did not arrive")
	a = s.finishHTTP(t, 4, digest("abcd"))
	require.Equal(t, http.StatusOK, a.status, "finish again")
	a = s.finishHTTP(t, 3, digest("abc"))
	require.Equal(t, http.StatusConflict, a.status, "finish again with other totals")
	a = do(t, mustRequest(t, http.MethodPost, s.srv.URL+"/v1/jobs/run-1/other/log/finish?attempt=1", `{"total_bytes":3,"sha256":"`+digest("abc")+`"}`))
	require.Equal(t, http.StatusNotFound, a.status, "a log never sent")
}

func TestHTTPAuthorize(t *testing.T) {
	t.Parallel()
	deny := func(r *http.Request, key logs.Key) error {
		switch r.Header.Get("Authorization") {
		case "":
			return logs.ErrUnauthenticated
		case "Bearer other-job":
			return fmt.Errorf("the token is for another job: %w", logs.ErrForbidden)
		case "Bearer old-attempt":
			return fmt.Errorf("attempt %d is no longer this runner's: %w", key.Attempt, cikit.ErrConflict)
		case "Bearer broken":
			return fmt.Errorf("the token store is down")
		}
		return nil
	}
	s := newServer(t, logs.HandlerConfig{AuthorizeWrite: deny, AuthorizeFollow: func(r *http.Request, key logs.Key) error {
		if r.Header.Get("Authorization") != "Bearer reader" {
			return logs.ErrForbidden
		}
		return nil
	}})
	for token, status := range map[string]int{
		"":                   http.StatusUnauthorized,
		"Bearer other-job":   http.StatusForbidden,
		"Bearer old-attempt": http.StatusConflict,
		"Bearer broken":      http.StatusServiceUnavailable,
		"Bearer runner":      http.StatusAccepted,
	} {
		req := mustRequest(t, http.MethodPatch, s.base+"?attempt=1&step=0&seq=0", "x")
		req.Header.Set("Content-Range", "bytes 0-0")
		req.Header.Set("Authorization", token)
		a := do(t, req)
		require.Equal(t, status, a.status, token)
		if status != http.StatusAccepted {
			require.NotEmpty(t, a.body["error"])
		}
	}
	req := mustRequest(t, http.MethodGet, s.base+"/follow?attempt=1", "")
	req.Header.Set("Authorization", "Bearer runner")
	require.Equal(t, http.StatusForbidden, do(t, req).status, "followers are authorized on their own")
}

// sseEvent is one Server-Sent Event of a follow stream.
type sseEvent struct {
	id, event string
	step      int
	offset    int64
	data      []byte
	complete  bool
	bytes     int64
}

// sseReader parses a follow stream.
type sseReader struct {
	r *bufio.Reader
}

func (s *sseReader) next() (sseEvent, error) {
	var ev sseEvent
	var data string
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if ev.event == "" {
				continue // a retry field or a comment
			}
			var payload struct {
				Step     int    `json:"step"`
				Offset   int64  `json:"offset"`
				Data     []byte `json:"data"`
				Complete bool   `json:"complete"`
				Bytes    int64  `json:"bytes"`
			}
			if err := json.Unmarshal([]byte(data), &payload); err != nil {
				return ev, err
			}
			ev.step, ev.offset, ev.data, ev.complete, ev.bytes = payload.Step, payload.Offset, payload.Data, payload.Complete, payload.Bytes
			return ev, nil
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			ev.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			data = line[6:]
		}
	}
}

func (s *server) followHTTP(t *testing.T, ctx context.Context, query, lastEventID string) (*http.Response, *sseReader) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/follow?"+query, nil)
	require.NoError(t, err)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { res.Body.Close() })
	return res, &sseReader{r: bufio.NewReader(res.Body)}
}

// readStream reads a follow stream to its end event.
func readStream(t *testing.T, r *sseReader, from int64) (string, sseEvent) {
	t.Helper()
	var buf bytes.Buffer
	next := from
	for {
		ev, err := r.next()
		require.NoError(t, err)
		if ev.event == "end" {
			require.Equal(t, strconv.FormatInt(ev.bytes, 10), ev.id)
			return buf.String(), ev
		}
		require.Equal(t, "log", ev.event)
		require.Equal(t, next, ev.offset)
		next = ev.offset + int64(len(ev.data))
		require.Equal(t, strconv.FormatInt(next, 10), ev.id, "the id is the offset after the event")
		buf.Write(ev.data)
	}
}

func TestHTTPFollow(t *testing.T) {
	t.Parallel()
	s := newServer(t, logs.HandlerConfig{Heartbeat: 10 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	res, _ := s.followHTTP(t, ctx, "attempt=1", "")
	require.Equal(t, http.StatusNotFound, res.StatusCode, "a log not begun")

	log := testLog(200_000)
	for off := 0; off < 50_000; off += 10_000 {
		s.send(t, off/100_000, int64(off/10_000), int64(off), log[off:off+10_000])
	}
	res, live := s.followHTTP(t, ctx, "attempt=1&offset=0", "")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "text/event-stream", res.Header.Get("Content-Type"))
	_, resumed := s.followHTTP(t, ctx, "attempt=1&offset=0", "123456") // Last-Event-ID wins over offset

	type result struct {
		log string
		end sseEvent
	}
	results := make(chan result, 2)
	go func() { l, e := readStream(t, live, 0); results <- result{l, e} }()
	go func() { l, e := readStream(t, resumed, 123456); results <- result{l, e} }()

	for off := 50_000; off < len(log); off += 10_000 {
		time.Sleep(time.Millisecond) // followers see the log grow, and heartbeats
		s.send(t, off/100_000, int64(off/10_000), int64(off), log[off:off+10_000])
	}
	a := s.finishHTTP(t, int64(len(log)), digest(log))
	require.Equal(t, http.StatusOK, a.status)
	for range 2 {
		r := <-results
		require.True(t, r.end.complete)
		require.Equal(t, int64(len(log)), r.end.bytes)
		if len(r.log) == len(log) {
			require.Equal(t, log, r.log)
		} else {
			require.Equal(t, log[123456:], r.log)
		}
	}

	// After Finish, from the sink.
	_, after := s.followHTTP(t, ctx, "attempt=1&offset=99990", "")
	got, end := readStream(t, after, 99990)
	require.Equal(t, log[99990:], got)
	require.True(t, end.complete)
	_, atEnd := s.followHTTP(t, ctx, "attempt=1", strconv.Itoa(len(log)))
	got, _ = readStream(t, atEnd, int64(len(log)))
	require.Empty(t, got, "resuming after the last event gets only the end")

	res, _ = s.followHTTP(t, ctx, "attempt=1", "x")
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
}

func TestHTTPFollowDisconnect(t *testing.T) {
	t.Parallel()
	s := newServer(t, logs.HandlerConfig{})
	s.send(t, 0, 0, 0, "hello")
	ctx, cancel := context.WithCancel(context.Background())
	_, r := s.followHTTP(t, ctx, "attempt=1", "")
	ev, err := r.next()
	require.NoError(t, err)
	require.Equal(t, "hello", string(ev.data))
	cancel() // the handler's goroutine ends: goleak checks at the end
}

func TestHTTPCloseFollowers(t *testing.T) {
	t.Parallel()
	b := setup(t, logs.Config{})
	h, err := logs.NewHandler(logs.HandlerConfig{Hub: b.hub, AuthorizeWrite: logs.AllowAll, AuthorizeFollow: logs.AllowAll, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(h)
	srv.Config.RegisterOnShutdown(h.CloseFollowers)
	srv.Start()
	defer srv.Close()
	b.append(t, 0, 0, 0, "hello")

	res, err := http.Get(srv.URL + "/v1/jobs/run-1/build/log/follow?attempt=1")
	require.NoError(t, err)
	defer res.Body.Close()
	r := &sseReader{r: bufio.NewReader(res.Body)}
	ev, err := r.next()
	require.NoError(t, err)
	require.Equal(t, "5", ev.id)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, srv.Config.Shutdown(ctx), "shutdown does not wait for the live log to finish")
	_, err = r.next()
	require.ErrorIs(t, err, io.EOF, "the stream ended; the client reconnects with Last-Event-ID 5")
}

func TestHTTPBusy(t *testing.T) {
	t.Parallel()
	s := newServer(t, logs.HandlerConfig{}, logs.Config{MaxLiveBytes: 8})
	s.send(t, 0, 0, 0, "12345")
	a := s.patch(t, "attempt=1&step=0&seq=1", "bytes 5-9", "67890")
	require.Equal(t, http.StatusServiceUnavailable, a.status)
	require.Equal(t, "5", a.header.Get("Retry-After"))
	require.Contains(t, a.body["error"], "send the chunk again later")
}
