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
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/cikit/cikit"
)

// logStream sends a job's output to the server in chunks: every interval,
// or as soon as size bytes wait. The output is spooled to a file as it is
// written, until the log is finished, so that any part of it can be sent
// again: a chunk the server has not acknowledged, or everything from the
// offset the server expects after a gap (it restarted, a chunk was lost).
// Chunks are sent one at a time, in order, and never span two steps.
//
// The log is cut where the server said (job.MaxLogBytes): the output up
// to there, then cikit.LogTruncatedLine, which the server keeps as it is;
// the rest is neither spooled nor sent, only counted, and the totals say
// how much was dropped.
type logStream struct {
	c        *client
	j        *job
	interval time.Duration
	size     int
	log      *slog.Logger
	onStale  func()
	buf      []byte // a chunk being sent; used by the sending goroutine only

	mu      sync.Mutex
	spool   *os.File // the log so far; nil when it could not be created
	written int64    // bytes in the spool
	marks   []stepMark
	acked   int64 // bytes the server has
	seq     int64
	digest  hash.Hash
	total   int64 // bytes of the log, lost ones included
	lost    bool  // output could not be spooled or sent: the log is incomplete
	cut     bool  // the log reached j.MaxLogBytes and holds the truncation line
	dropped int64 // output discarded after the cut
	stale   bool
	kick    chan struct{}
	done    chan struct{}
	stop    context.CancelFunc
}

// stepMark says that the bytes from offset on belong to step.
type stepMark struct {
	offset int64
	step   int
}

func newLogStream(ctx context.Context, c *client, j *job, interval time.Duration, size int, log *slog.Logger, onStale func()) *logStream {
	ctx, stop := context.WithCancel(ctx)
	s := &logStream{c: c, j: j, interval: interval, size: size, log: log, onStale: onStale, buf: make([]byte, size),
		digest: sha256.New(), kick: make(chan struct{}, 1), done: make(chan struct{}), stop: stop,
		marks: []stepMark{{0, 0}}}
	f, err := os.CreateTemp("", "cikit-log-")
	if err != nil {
		log.Error("agent: cannot spool the job's output; it is not sent", "error", err)
		s.lost = true
	} else {
		s.spool = f
	}
	go s.run(ctx)
	return s
}

// Write takes output of the job; it never blocks on the network.
func (s *logStream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(p)
	if limit := s.j.MaxLogBytes; limit > 0 && s.total+int64(n) > limit {
		if s.cut {
			s.dropped += int64(n)
			return n, nil
		}
		keep := limit - s.total
		s.dropped += int64(n) - keep
		p = append(p[:keep:keep], cikit.LogTruncatedLine(limit)...)
		s.cut = true
	}
	s.total += int64(len(p))
	s.digest.Write(p)
	if s.spool == nil || s.lost {
		return n, nil
	}
	if _, err := s.spool.WriteAt(p, s.written); err != nil {
		s.log.Error("agent: spooling the job's output failed; the log will be incomplete", "error", err)
		s.lost = true
		return n, nil
	}
	s.written += int64(len(p))
	if s.written-s.acked >= int64(s.size) || s.cut {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
	return n, nil
}

// setStep tags the output written from now on with step.
func (s *logStream) setStep(step int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if last := &s.marks[len(s.marks)-1]; last.offset == s.written {
		last.step = step
		return
	}
	s.marks = append(s.marks, stepMark{s.written, step})
}

// next returns the chunk to send from offset: its step and length, at
// most size bytes and within one step. s.mu is held.
func (s *logStream) next(offset int64) (step int, n int64) {
	end := min(s.written, offset+int64(s.size))
	for i, m := range s.marks {
		if m.offset > offset {
			end = min(end, m.offset)
			break
		}
		step = s.marks[i].step
	}
	return step, end - offset
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

// flush sends everything not acknowledged; false once the stream is
// fenced or ctx ends.
func (s *logStream) flush(ctx context.Context) bool {
	backoff := 100 * time.Millisecond
	for {
		s.mu.Lock()
		if s.stale {
			s.mu.Unlock()
			return false
		}
		offset := s.acked
		step, n := s.next(offset)
		seq := s.seq
		if n == 0 || s.spool == nil {
			s.mu.Unlock()
			return true
		}
		s.mu.Unlock()
		// The spool only grows, and only this goroutine reads it.
		chunk := s.buf[:n]
		if _, err := s.spool.ReadAt(chunk, offset); err != nil {
			s.mu.Lock()
			s.log.Error("agent: reading the spooled output failed; the log will be incomplete", "error", err)
			s.lost, s.acked = true, s.written
			s.mu.Unlock()
			return true
		}

		next, err := s.send(ctx, chunk, offset, step, seq)
		s.mu.Lock()
		var gap *gapError
		var ae *apiError
		switch {
		case err == nil:
			s.acked = max(s.acked, min(next, s.written))
			s.seq++
			backoff = 100 * time.Millisecond
		case errors.Is(err, ErrStale):
			s.stale = true
			s.mu.Unlock()
			s.onStale()
			return false
		case errors.As(err, &gap) && gap.expected >= 0 && gap.expected <= s.written:
			// The server has less (it restarted, a chunk was lost) or
			// more (an answer was lost) than we knew: go on from there.
			s.acked = gap.expected
			s.seq++
		case errors.As(err, &ae) && ae.Status >= 400 && !ae.transient():
			// The server will not take this log (too large, or bytes it
			// holds otherwise): nothing more is sent, and the totals
			// tell the server the log is incomplete.
			s.log.Error("agent: the server refuses the log; output is no longer sent", "job", s.j.JobID, "offset", offset, "error", err)
			s.lost, s.acked = true, s.written
			s.mu.Unlock()
			return true
		default:
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
	return &logTotals{TotalBytes: s.total, SHA256: hex.EncodeToString(s.digest.Sum(nil)), DroppedBytes: s.dropped}
}

// resend sends the whole log again from its start, after close.
func (s *logStream) resend(ctx context.Context) {
	s.mu.Lock()
	s.acked = 0
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, closeTimeout)
	defer cancel()
	s.flush(ctx)
}

// remove deletes the spool; the log can no longer be sent again.
func (s *logStream) remove() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.spool != nil {
		_ = s.spool.Close()
		_ = os.Remove(s.spool.Name())
		s.spool = nil
	}
}
