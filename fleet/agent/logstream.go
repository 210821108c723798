package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// maxPending bounds the output a job may hold unsent while the server is
// unreachable; what comes beyond is dropped, and the log's totals then
// tell the server it is incomplete.
const maxPending = 64 << 20

// logStream sends a job's output to the server in chunks: every interval,
// or as soon as size bytes wait. Chunks are sent one at a time, in order;
// a chunk the server has not acknowledged is sent again, and a gap the
// server reports rewinds the stream to the offset it expects.
type logStream struct {
	c        *client
	j        *job
	interval time.Duration
	size     int
	log      *slog.Logger
	onStale  func()

	mu      sync.Mutex
	pending []byte // written and not acknowledged; begins at acked
	acked   int64  // bytes the server has
	step    int
	seq     int64
	total   int64 // bytes written, dropped ones included
	digest  hash.Hash
	dropped bool
	stale   bool
	kick    chan struct{}
	done    chan struct{}
	stop    context.CancelFunc
}

func newLogStream(ctx context.Context, c *client, j *job, interval time.Duration, size int, log *slog.Logger, onStale func()) *logStream {
	ctx, stop := context.WithCancel(ctx)
	s := &logStream{c: c, j: j, interval: interval, size: size, log: log, onStale: onStale,
		digest: sha256.New(), kick: make(chan struct{}, 1), done: make(chan struct{}), stop: stop}
	go s.run(ctx)
	return s
}

// Write takes output of the job; it never blocks on the network.
func (s *logStream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total += int64(len(p))
	s.digest.Write(p)
	if s.dropped || len(s.pending)+len(p) > maxPending {
		s.dropped = true
		return len(p), nil
	}
	s.pending = append(s.pending, p...)
	if len(s.pending) >= s.size {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
	return len(p), nil
}

// setStep tags the output written from now on with step.
func (s *logStream) setStep(step int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.step = step
}

func (s *logStream) run(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.kick:
		}
		if !s.flush(ctx) {
			return
		}
	}
}

// flush sends everything pending; false once the stream is fenced.
func (s *logStream) flush(ctx context.Context) bool {
	backoff := 100 * time.Millisecond
	for {
		s.mu.Lock()
		if s.stale {
			s.mu.Unlock()
			return false
		}
		n := min(len(s.pending), s.size)
		if n == 0 {
			s.mu.Unlock()
			return true
		}
		chunk := bytes.Clone(s.pending[:n])
		offset, step, seq := s.acked, s.step, s.seq
		s.mu.Unlock()

		next, err := s.send(ctx, chunk, offset, step, seq)
		s.mu.Lock()
		switch {
		case err == nil:
			if adv := next - s.acked; adv > 0 && adv <= int64(len(s.pending)) {
				s.pending = s.pending[adv:]
				s.acked = next
			}
			s.seq++
			backoff = 100 * time.Millisecond
		case errors.Is(err, ErrStale):
			s.stale = true
			s.mu.Unlock()
			s.onStale()
			return false
		default:
			var gap *gapError
			if errors.As(err, &gap) && gap.expected >= s.acked && gap.expected-s.acked <= int64(len(s.pending)) {
				// The server has more than we knew (an answer was lost):
				// skip what it has.
				s.pending = s.pending[gap.expected-s.acked:]
				s.acked = gap.expected
				s.mu.Unlock()
				continue
			}
			var ae *apiError
			if errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500 {
				// The server will not take this log: what is pending is
				// dropped, and the totals tell the server so.
				s.log.Error("agent: the server refuses the log; output is dropped", "job", s.j.JobID, "offset", offset, "error", err)
				s.pending, s.dropped = nil, true
				s.mu.Unlock()
				return true
			}
			s.mu.Unlock()
			s.log.Warn("agent: sending a log chunk failed; retrying", "job", s.j.JobID, "offset", offset, "error", err)
			select {
			case <-ctx.Done():
				return false
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 5*time.Second)
			continue
		}
		s.mu.Unlock()
	}
}

type gapError struct{ expected int64 }

func (e *gapError) Error() string { return fmt.Sprintf("the server expects offset %d", e.expected) }

// send sends one chunk and returns the offset the server has after it.
func (s *logStream) send(ctx context.Context, data []byte, offset int64, step int, seq int64) (int64, error) {
	q := url.Values{"attempt": {strconv.Itoa(s.j.Attempt)}, "step": {strconv.Itoa(step)}, "seq": {strconv.FormatInt(seq, 10)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPatch, s.c.url(jobPath(s.j, "log"), q), bytes.NewReader(data))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+s.j.JobToken)
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Content-Range", fmt.Sprintf("bytes %d-%d", offset, offset+int64(len(data))-1))
	resp, err := s.c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var body struct {
		NextOffset     int64  `json:"next_offset"`
		ExpectedOffset int64  `json:"expected_offset"`
		Error          string `json:"error"`
		Stale          bool   `json:"stale"`
	}
	_ = json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 1<<20)).Decode(&body)
	switch resp.StatusCode {
	case http.StatusAccepted, http.StatusOK:
		return body.NextOffset, nil
	case http.StatusRequestedRangeNotSatisfiable:
		return 0, &gapError{expected: body.ExpectedOffset}
	case http.StatusConflict:
		if body.Stale {
			return 0, fmt.Errorf("%w: %s", ErrStale, body.Error)
		}
	}
	return 0, &apiError{Status: resp.StatusCode, Msg: body.Error}
}

// closeTimeout bounds how long a finished job's last output may take to
// send.
const closeTimeout = 30 * time.Second

// close sends what is pending, stops, and returns the log's totals.
func (s *logStream) close(ctx context.Context) *logTotals {
	s.stop()
	<-s.done
	ctx, cancel := context.WithTimeout(ctx, closeTimeout)
	defer cancel()
	s.flush(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	return &logTotals{TotalBytes: s.total, SHA256: hex.EncodeToString(s.digest.Sum(nil))}
}
