package logs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/cikit/cikit"
)

// Event is a piece of a log as a follower receives it: bytes of one step.
type Event struct {
	Step   int
	Offset int64 // of Data's first byte in the whole log
	// Data is valid until the next call to Next and must not be
	// modified.
	Data []byte
}

// End is the offset just after the event's last byte: where a follower
// resumes.
func (e Event) End() int64 { return e.Offset + int64(len(e.Data)) }

// Follower reads one log in order from an offset, first from the live
// buffer and, once the log is finished, from the Sink. It is not safe for
// concurrent use; any number of followers may read one log.
//
// A follower never holds the writer up: it reads the bytes the log holds
// when it asks, so a slow follower is behind, not lossy, and catches up
// from the log at its own pace. It buffers at most Config.MaxEventBytes
// of its own.
type Follower struct {
	h   *Hub
	key Key
	pos int64

	live *liveLog // nil once finished

	segs   []Segment // of a finished log
	seg    int       // the segment being read
	rc     io.ReadCloser
	buf    []byte
	result *FinishResult
}

// Follow returns a Follower of key's log from offset from. The log must
// have begun (received its first chunk) or be finished; otherwise the
// error matches cikit.ErrNotFound and the caller asks again later.
func (h *Hub) Follow(ctx context.Context, key Key, from int64) (*Follower, error) {
	if err := key.Validate(); err != nil {
		return nil, fmt.Errorf("logs: %w", err)
	}
	if from < 0 {
		return nil, fmt.Errorf("logs: log %s: the offset must not be negative, got %d", key, from)
	}
	f := &Follower{h: h, key: key, pos: from}
	if v, ok := h.live.Load(key); ok && !v.(*liveLog).released {
		f.live = v.(*liveLog)
		return f, nil
	}
	segs, err := h.segments.SegmentsList(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("logs: log %s: %w", key, err)
	}
	if len(segs) == 0 {
		return nil, fmt.Errorf("logs: log %s has not begun: %w", key, cikit.ErrNotFound)
	}
	f.finishedFrom(segs)
	return f, nil
}

func (f *Follower) finishedFrom(segs []Segment) {
	f.live = nil
	f.segs = segs
	f.result = &FinishResult{Complete: segs[0].Complete}
	for _, s := range segs {
		f.result.Bytes += s.Bytes
	}
}

// Offset is where the next event starts.
func (f *Follower) Offset() int64 { return f.pos }

// Result is the verdict on the log once Next has returned io.EOF; nil
// before.
func (f *Follower) Result() *FinishResult {
	if f.live != nil {
		return nil
	}
	return f.result
}

// Next returns the next bytes of the log, waiting for them while the log
// is live. It returns io.EOF after the last byte of a finished log (at
// once when the follower started at or beyond it), and ctx's error when
// ctx ends first.
func (f *Follower) Next(ctx context.Context) (Event, error) {
	ev, _, err := f.next(ctx, nil)
	return ev, err
}

// TryNext is Next without the wait: it returns the next bytes the log
// holds now with ok true, or, when the log is live and the follower has
// read every byte it holds, ok false and no error at once. After the last
// byte of a finished log it returns io.EOF, as Next does. Reading with
// TryNext until ok is false reads the log as far as it exists.
func (f *Follower) TryNext(ctx context.Context) (ev Event, ok bool, err error) {
	return f.next(ctx, fired)
}

// fired is a channel that is always ready: a tick for next that has come.
var fired = func() <-chan time.Time {
	c := make(chan time.Time)
	close(c)
	return c
}()

// next is Next that also returns, with ok false, when tick fires before
// there are bytes.
func (f *Follower) next(ctx context.Context, tick <-chan time.Time) (ev Event, ok bool, err error) {
	for f.live != nil {
		l := f.live
		l.mu.Lock()
		if f.pos < l.end {
			step, stop := l.stepAt(f.pos)
			b := l.slice(f.pos, min(stop, f.pos+int64(f.h.maxEvent)))
			l.mu.Unlock()
			ev = Event{Step: step, Offset: f.pos, Data: b}
			f.pos += int64(len(b))
			return ev, true, nil
		}
		if l.done {
			res := l.fin.result
			l.mu.Unlock()
			f.live = nil
			f.result = &res
			return Event{}, false, io.EOF
		}
		if l.wake == nil {
			l.wake = make(chan struct{})
		}
		wake := l.wake
		l.mu.Unlock()
		select {
		case <-wake:
		case <-tick:
			return Event{}, false, nil
		case <-ctx.Done():
			return Event{}, false, ctx.Err()
		}
	}
	ev, err = f.nextStored(ctx)
	return ev, err == nil, err
}

// nextStored reads the next bytes of a finished log from the Sink.
func (f *Follower) nextStored(ctx context.Context) (Event, error) {
	if f.result == nil { // the live log ended: its bytes are in no segment list yet
		return Event{}, io.EOF
	}
	for f.seg < len(f.segs) {
		s := f.segs[f.seg]
		if f.pos >= s.Offset+s.Bytes {
			f.closeStep()
			f.seg++
			continue
		}
		if f.rc == nil {
			rc, err := f.h.sink.StepGet(ctx, f.key, s.Step)
			if err != nil {
				return Event{}, fmt.Errorf("logs: log %s: reading step %d: %w", f.key, s.Step, err)
			}
			f.rc = rc
			if skip := f.pos - s.Offset; skip > 0 {
				if _, err := io.CopyN(io.Discard, rc, skip); err != nil {
					return Event{}, fmt.Errorf("logs: log %s: reading step %d: %w", f.key, s.Step, err)
				}
			}
			if f.buf == nil {
				f.buf = make([]byte, f.h.maxEvent)
			}
		}
		want := min(int64(len(f.buf)), s.Offset+s.Bytes-f.pos)
		n, err := io.ReadFull(f.rc, f.buf[:want])
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				err = fmt.Errorf("the stored step is shorter than its segment's %d bytes", s.Bytes)
			}
			return Event{}, fmt.Errorf("logs: log %s: reading step %d: %w", f.key, s.Step, err)
		}
		ev := Event{Step: s.Step, Offset: f.pos, Data: f.buf[:n]}
		f.pos += int64(n)
		return ev, nil
	}
	f.closeStep()
	return Event{}, io.EOF
}

func (f *Follower) closeStep() {
	if f.rc != nil {
		_ = f.rc.Close()
		f.rc = nil
	}
}

// Close releases what the follower holds. It is safe to call twice.
func (f *Follower) Close() error {
	f.closeStep()
	return nil
}
