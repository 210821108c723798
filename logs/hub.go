package logs

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cikit/cikit"
)

// Defaults of Config.
const (
	// DefaultMaxLogBytes is where a Hub cuts a log:
	// cikit.DefaultMaxLogBytes, 4 MiB (GitLab Runner's default
	// output_limit).
	DefaultMaxLogBytes = cikit.DefaultMaxLogBytes
	// DefaultMaxLiveBytes is the most bytes all live logs of a Hub hold
	// together: 2 GiB.
	DefaultMaxLiveBytes = 2 << 30
	// DefaultMaxEventBytes is the most bytes one follower Event carries:
	// 64 KiB.
	DefaultMaxEventBytes = 64 << 10
	// DefaultIdleTimeout is how long a live log may go without new bytes
	// before Run abandons it: 6 hours.
	DefaultIdleTimeout = 6 * time.Hour
	// DefaultRememberFinished is how many finished logs a Hub remembers
	// the runner's totals of.
	DefaultRememberFinished = 10_000
)

// Config configures a Hub. Sink and Segments are required; the zero value
// of everything else is a sensible default.
type Config struct {
	// Sink receives each step of a finished log. Required.
	Sink Sink
	// Segments records where the steps of finished logs are. Required.
	Segments SegmentStore
	// MaxLogBytes is how much of a job's output a log keeps. Past it the
	// log holds cikit.LogTruncatedLine(MaxLogBytes), and the rest of the
	// output is taken, discarded and counted (FinishResult.DroppedBytes).
	// Default: DefaultMaxLogBytes.
	MaxLogBytes int64
	// MaxLiveBytes is the most bytes all live logs hold together; a chunk
	// that would take them beyond it is refused with ErrBusy until
	// finished logs make room. Default: DefaultMaxLiveBytes.
	MaxLiveBytes int64
	// MaxEventBytes is the most bytes one Event of a Follower carries.
	// Default: DefaultMaxEventBytes.
	MaxEventBytes int
	// RememberFinished is how many finished logs the Hub remembers the
	// runner's totals of, so that a repeated Finish with other totals is
	// refused rather than answered with the verdict (see Finish). The
	// memory is a few hundred bytes a log.
	// Default: DefaultRememberFinished.
	RememberFinished int
	// IdleTimeout is how long a live log may go without new bytes before
	// Run abandons it (see Abandon): a safety net for runners that vanish
	// without the platform calling Abandon. Default: DefaultIdleTimeout.
	IdleTimeout time.Duration
	// Now stamps the segments of finished logs and tells idle logs.
	// Default: time.Now.
	Now func() time.Time
	// Logger receives a record of every finished log (Info when
	// complete, Warn when not) and of failed assemblies (Error).
	// Default: slog.Default().
	Logger *slog.Logger
}

// Hub holds the live logs of running job attempts and fans them out to
// followers; see the package documentation for the rules it enforces.
// It is safe for concurrent use. Logs do not share locks: appends to
// different logs do not wait for each other.
type Hub struct {
	sink     Sink
	segments SegmentStore
	maxLog   int64
	marker   []byte // cikit.LogTruncatedLine(maxLog)
	maxLive  int64
	liveSize atomic.Int64 // bytes held by live logs
	maxEvent int
	idle     time.Duration
	now      func() time.Time
	log      *slog.Logger
	live     sync.Map // Key -> *liveLog

	// The most recently finished logs, whose tombstones stay in live.
	recentMu sync.Mutex
	recent   []Key // a ring
	next     int
}

// NewHub validates cfg and returns a Hub.
func NewHub(cfg Config) (*Hub, error) {
	if cfg.Sink == nil || cfg.Segments == nil {
		return nil, errors.New("logs: Config.Sink and Config.Segments are required")
	}
	if cfg.MaxLogBytes < 0 {
		return nil, fmt.Errorf("logs: Config.MaxLogBytes must not be negative, got %d", cfg.MaxLogBytes)
	}
	if cfg.MaxLiveBytes < 0 {
		return nil, fmt.Errorf("logs: Config.MaxLiveBytes must not be negative, got %d", cfg.MaxLiveBytes)
	}
	if cfg.MaxEventBytes < 0 {
		return nil, fmt.Errorf("logs: Config.MaxEventBytes must not be negative, got %d", cfg.MaxEventBytes)
	}
	if cfg.IdleTimeout < 0 {
		return nil, fmt.Errorf("logs: Config.IdleTimeout must not be negative, got %s", cfg.IdleTimeout)
	}
	if cfg.RememberFinished < 0 {
		return nil, fmt.Errorf("logs: Config.RememberFinished must not be negative, got %d", cfg.RememberFinished)
	}
	h := &Hub{
		sink:     cfg.Sink,
		segments: cfg.Segments,
		maxLog:   cmp.Or(cfg.MaxLogBytes, DefaultMaxLogBytes),
		maxLive:  cmp.Or(cfg.MaxLiveBytes, DefaultMaxLiveBytes),
		maxEvent: cmp.Or(cfg.MaxEventBytes, DefaultMaxEventBytes),
		idle:     cmp.Or(cfg.IdleTimeout, DefaultIdleTimeout),
		recent:   make([]Key, cmp.Or(cfg.RememberFinished, DefaultRememberFinished)),
		now:      cfg.Now,
		log:      cfg.Logger,
	}
	h.marker = []byte(cikit.LogTruncatedLine(h.maxLog))
	if h.now == nil {
		h.now = time.Now
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	return h, nil
}

// MaxLogBytes is where the Hub cuts a log (Config.MaxLogBytes).
func (h *Hub) MaxLogBytes() int64 { return h.maxLog }

// AppendResult is what Append did with a chunk.
type AppendResult struct {
	// NextOffset is the end of the log after the chunk: where the next
	// chunk starts.
	NextOffset int64
	// Appended is how many of the chunk's bytes were new; 0 for a
	// duplicate.
	Appended int
}

// Append adds a chunk to its log. It is idempotent: a chunk whose bytes
// the log already holds, identically and in the same step, changes
// nothing and succeeds, and a chunk that overlaps the end of the log
// appends only its new tail. It refuses, changing nothing:
//
//   - a chunk starting after the end of the log with a *GapError whose
//     Expected is the end;
//   - different bytes for a range already written, or a step lower than
//     the step of the bytes before, with a *ConflictError (matching
//     cikit.ErrConflict);
//   - any chunk of a log Finish was called for with ErrFinished
//     (matching cikit.ErrConflict);
//   - new bytes beyond Config.MaxLiveBytes of all live logs with ErrBusy,
//     to be sent again later.
//
// A chunk that takes the log past Config.MaxLogBytes appends its bytes up
// to the limit and the truncation line (cikit.LogTruncatedLine); bytes a
// runner sends after that, at any offset past the limit, are answered as
// taken and discarded. A runner that cut its log itself sends the same
// truncation line, which the log takes as it is.
//
// A log starts with its first chunk at offset 0. Append copies c.Data.
func (h *Hub) Append(ctx context.Context, c *Chunk) (*AppendResult, error) {
	if err := c.Key.Validate(); err != nil {
		return nil, fmt.Errorf("logs: %w", err)
	}
	if c.Offset < 0 || c.Step < 0 || c.Seq < 0 {
		return nil, fmt.Errorf("logs: log %s: offset, step and seq must not be negative, got %d, %d and %d", c.Key, c.Offset, c.Step, c.Seq)
	}
	l, err := h.open(ctx, c)
	if err != nil {
		return nil, err
	}
	if l == nil { // an empty chunk at 0 of a log not started
		return &AppendResult{}, nil
	}
	l.mu.Lock()
	res, err := l.append(c, h)
	l.mu.Unlock()
	return res, err
}

// open returns the live log c goes to, starting it when c is its first
// chunk.
func (h *Hub) open(ctx context.Context, c *Chunk) (*liveLog, error) {
	if v, ok := h.live.Load(c.Key); ok {
		return v.(*liveLog), nil
	}
	if c.Offset > 0 {
		return nil, &GapError{Key: c.Key, Seq: c.Seq, Offset: c.Offset}
	}
	if len(c.Data) == 0 {
		return nil, nil
	}
	// A log leaves the map only after its segments are recorded, so a
	// finished log is found here and not started again by a late copy of
	// one of its chunks.
	segs, err := h.segments.SegmentsList(ctx, c.Key)
	if err != nil {
		return nil, fmt.Errorf("logs: log %s: %w", c.Key, err)
	}
	if len(segs) > 0 {
		return nil, fmt.Errorf("logs: log %s: %w", c.Key, ErrFinished)
	}
	v, _ := h.live.LoadOrStore(c.Key, &liveLog{key: c.Key, hash: sha256.New(), lastWrite: h.now()})
	return v.(*liveLog), nil
}

// FinishParams are what the runner says the whole log was.
type FinishParams struct {
	// TotalBytes is the length of the whole log.
	TotalBytes int64
	// SHA256 is the hex SHA-256 digest of the whole log.
	SHA256 string
	// DroppedBytes is how much output a runner that cut the log itself
	// discarded after the truncation line (see Config.MaxLogBytes).
	DroppedBytes int64
}

// FinishResult is the verdict on a finished log.
type FinishResult struct {
	// Complete is true when the log holds TotalBytes bytes with the
	// digest SHA256: every byte the runner sent arrived.
	Complete bool
	// Bytes is the length of the log as stored.
	Bytes int64
	// Truncated is true when the log was cut at Config.MaxLogBytes;
	// DroppedBytes is then how much output was discarded, as far as
	// the runner told or sent.
	Truncated    bool
	DroppedBytes int64
}

// emptySHA256 is the digest of no bytes: a log that never received a
// chunk.
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// Finish ends a log: no new bytes are taken after it. It compares the
// log with p — a difference in length or digest makes the log incomplete,
// which is recorded and returned, not an error — stores each step's bytes
// in the Sink, records the segments, wakes the followers, which read to
// the end and stop, and releases the live buffer.
//
// Finish is idempotent: calling it again with the same p returns the same
// result; with a different p it returns ErrFinished. When storing fails
// it returns the error and may be called again. A log that never received
// a byte can be finished only with TotalBytes 0, which stores nothing;
// otherwise a key the Hub has no log of is cikit.ErrNotFound.
func (h *Hub) Finish(ctx context.Context, key Key, p FinishParams) (*FinishResult, error) {
	if err := key.Validate(); err != nil {
		return nil, fmt.Errorf("logs: %w", err)
	}
	if p.TotalBytes < 0 {
		return nil, fmt.Errorf("logs: log %s: the total must not be negative, got %d", key, p.TotalBytes)
	}
	p.SHA256 = strings.ToLower(p.SHA256)
	if !validSHA256(p.SHA256) {
		return nil, fmt.Errorf("logs: log %s: the digest must be 64 hex digits, got %q", key, p.SHA256)
	}
	return h.end(ctx, key, &p)
}

// Abandon ends a log whose runner is gone: the platform calls it when it
// gives up on the attempt (a lost lease), and Run when the log has been
// idle for Config.IdleTimeout. The bytes that arrived are stored as
// Finish stores them, marked incomplete, and a later Finish of the log
// is refused with ErrFinished. Abandoning a finished log returns its
// verdict; a log that never received a byte is cikit.ErrNotFound.
func (h *Hub) Abandon(ctx context.Context, key Key) (*FinishResult, error) {
	if err := key.Validate(); err != nil {
		return nil, fmt.Errorf("logs: %w", err)
	}
	return h.end(ctx, key, nil)
}

// end is Finish with p, and Abandon with p nil.
func (h *Hub) end(ctx context.Context, key Key, p *FinishParams) (*FinishResult, error) {
	v, ok := h.live.Load(key)
	if !ok {
		return h.finished(ctx, key, p)
	}
	l := v.(*liveLog)
	l.finishMu.Lock()
	defer l.finishMu.Unlock()

	l.mu.Lock()
	if l.fin != nil && p != nil && (l.fin.abandoned || l.fin.params != *p) {
		l.mu.Unlock()
		if l.fin.abandoned {
			return nil, fmt.Errorf("logs: log %s was abandoned: %w", key, ErrFinished)
		}
		return nil, fmt.Errorf("logs: log %s was finished with %d bytes and digest %s: %w", key, l.fin.params.TotalBytes, l.fin.params.SHA256, ErrFinished)
	}
	switch {
	case l.fin != nil:
	case p == nil:
		l.fin = &finish{abandoned: true, result: FinishResult{Bytes: l.end}}
		l.fin.result.Truncated, l.fin.result.DroppedBytes = l.truncation(h, nil)
	default:
		digest := hex.EncodeToString(l.hash.Sum(nil))
		l.fin = &finish{params: *p, result: FinishResult{Complete: l.end == p.TotalBytes && digest == p.SHA256, Bytes: l.end}}
		l.fin.result.Truncated, l.fin.result.DroppedBytes = l.truncation(h, p)
	}
	res := l.fin.result
	if l.done {
		l.mu.Unlock()
		return &res, nil
	}
	// Sealed: the log's bytes and steps change no more, so they are read
	// without the lock from here.
	l.mu.Unlock()

	segs := make([]Segment, 0, len(l.steps))
	now := h.now().UTC()
	for i, st := range l.steps {
		stop := l.end
		if i+1 < len(l.steps) {
			stop = l.steps[i+1].start
		}
		digest := sha256.New()
		r := &blockReader{l: l, pos: st.start, end: stop, sum: digest}
		blob, err := h.sink.StepPut(ctx, key, st.step, r, stop-st.start)
		if err != nil {
			h.log.LogAttrs(ctx, slog.LevelError, "log not stored", slog.String("log", key.String()), slog.Int("step", st.step), slog.String("error", err.Error()))
			return nil, fmt.Errorf("logs: log %s: storing step %d: %w", key, st.step, err)
		}
		segs = append(segs, Segment{
			Key: key, Step: st.step, Offset: st.start, Bytes: stop - st.start,
			SHA256: hex.EncodeToString(digest.Sum(nil)), BlobKey: blob, Complete: res.Complete, CreatedAt: now,
		})
	}
	if err := h.segments.SegmentsPut(ctx, key, segs); err != nil {
		h.log.LogAttrs(ctx, slog.LevelError, "log not stored", slog.String("log", key.String()), slog.String("error", err.Error()))
		return nil, fmt.Errorf("logs: log %s: recording segments: %w", key, err)
	}
	l.mu.Lock()
	l.done = true
	l.wakeAll()
	l.mu.Unlock()
	h.release(l)

	switch {
	case p == nil:
		h.log.LogAttrs(ctx, slog.LevelWarn, "log abandoned", slog.String("log", key.String()), slog.Int64("bytes", res.Bytes), slog.Int("steps", len(segs)))
	case res.Complete:
		h.log.LogAttrs(ctx, slog.LevelInfo, "log finished", slog.String("log", key.String()), slog.Bool("complete", true),
			slog.Int64("bytes", res.Bytes), slog.Int("steps", len(segs)))
	default:
		h.log.LogAttrs(ctx, slog.LevelWarn, "log finished", slog.String("log", key.String()), slog.Bool("complete", false),
			slog.Int64("bytes", res.Bytes), slog.Int64("total_bytes", p.TotalBytes), slog.Int("steps", len(segs)))
	}
	return &res, nil
}

// release replaces a finished log by a tombstone without its bytes, which
// stays until RememberFinished later logs are finished. Followers reading
// the log keep its bytes until they are done.
func (h *Hub) release(l *liveLog) {
	tomb := &liveLog{key: l.key, end: l.end, fin: l.fin, done: true, released: true}
	if h.live.CompareAndSwap(l.key, l, tomb) {
		h.liveSize.Add(-l.end)
	}
	h.recentMu.Lock()
	defer h.recentMu.Unlock()
	if old := h.recent[h.next]; old != (Key{}) {
		if v, ok := h.live.Load(old); ok && v.(*liveLog).released {
			h.live.CompareAndDelete(old, v)
		}
	}
	h.recent[h.next] = l.key
	h.next = (h.next + 1) % len(h.recent)
}

// finished answers Finish (p) or Abandon (p nil) for a log that is not
// live: finished before, or never started.
func (h *Hub) finished(ctx context.Context, key Key, p *FinishParams) (*FinishResult, error) {
	segs, err := h.segments.SegmentsList(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("logs: log %s: %w", key, err)
	}
	if len(segs) == 0 {
		if p != nil && p.TotalBytes == 0 {
			return &FinishResult{Complete: p.SHA256 == emptySHA256}, nil
		}
		return nil, fmt.Errorf("logs: log %s has no bytes here; send it again from offset 0: %w", key, cikit.ErrNotFound)
	}
	// The runner's totals are not kept past the live log; a finished log
	// answers a repeated Finish with its verdict.
	res := &FinishResult{Complete: segs[0].Complete}
	for _, s := range segs {
		res.Bytes += s.Bytes
	}
	return res, nil
}

func validSHA256(s string) bool {
	if len(s) != sha256.Size*2 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// Blocks of a live log grow from minBlock to maxBlock bytes, so a short
// log stays small and a long one is not copied as it grows.
const (
	minBlock = 4 << 10
	maxBlock = 1 << 20
)

// liveLog is one log being written. Its bytes live in blocks that are
// only ever appended to: a byte below end never changes, so slices of it
// handed to followers stay valid without the lock.
type liveLog struct {
	key Key

	mu     sync.Mutex
	blocks [][]byte
	starts []int64 // offset of each block's first byte
	end    int64
	steps  []stepStart
	hash   hash.Hash // of bytes [0, end)
	// lastWrite is when bytes were last appended, for AbandonIdle.
	lastWrite time.Time
	// wake is closed when bytes are appended or the log is done; nil
	// while no follower waits.
	wake chan struct{}
	fin  *finish // set by the first Finish: no new bytes after it
	done bool    // stored in the sink; followers read to end and stop
	// released: a finished log's tombstone, without bytes or steps.
	released bool
	// truncated: the log holds Config.MaxLogBytes of output and the
	// truncation line; selfCut: the runner sent that line itself.
	// runnerEnd is the furthest offset the runner sent.
	truncated, selfCut bool
	runnerEnd          int64

	finishMu sync.Mutex // one Finish at a time
}

type stepStart struct {
	step  int
	start int64
}

type finish struct {
	params    FinishParams
	abandoned bool // by Abandon: params are empty
	result    FinishResult
}

// AbandonIdle abandons the live logs that have had no new bytes for
// Config.IdleTimeout, once, and returns how many it abandoned.
func (h *Hub) AbandonIdle(ctx context.Context) (int, error) {
	now := h.now()
	var idle []Key
	h.live.Range(func(k, v any) bool {
		l := v.(*liveLog)
		l.mu.Lock()
		if l.fin == nil && now.Sub(l.lastWrite) >= h.idle {
			idle = append(idle, l.key)
		}
		l.mu.Unlock()
		return true
	})
	var errs []error
	n := 0
	for _, key := range idle {
		if _, err := h.Abandon(ctx, key); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// Run abandons idle logs (AbandonIdle) every quarter of
// Config.IdleTimeout until ctx ends; a failure is logged and tried again
// at the next round. It returns nil when ctx ends.
func (h *Hub) Run(ctx context.Context) error {
	t := time.NewTicker(h.idle / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if _, err := h.AbandonIdle(ctx); err != nil && ctx.Err() == nil {
			h.log.LogAttrs(ctx, slog.LevelError, "abandoning idle logs failed", slog.String("error", err.Error()))
		}
	}
}

func (l *liveLog) append(c *Chunk, h *Hub) (*AppendResult, error) {
	// Once finished, every chunk is refused, copies of ones taken before
	// included: the runner has had them all acknowledged, and the answer
	// does not depend on whether the bytes are still in memory.
	if l.fin != nil {
		return nil, fmt.Errorf("logs: log %s: %w", l.key, ErrFinished)
	}
	if l.truncated {
		return l.discard(c, h)
	}
	end := l.end
	if c.Offset > end {
		return nil, &GapError{Key: l.key, Seq: c.Seq, Offset: c.Offset, Expected: end}
	}
	if overlap := min(c.End(), end); c.Offset < overlap {
		if at := l.mismatch(c.Offset, c.Data[:overlap-c.Offset]); at >= 0 {
			return nil, &ConflictError{Key: l.key, Seq: c.Seq, Offset: at, Reason: "the chunk's bytes differ from those the log holds"}
		}
		if at, step := l.otherStep(c.Offset, overlap, c.Step); at >= 0 {
			return nil, &ConflictError{Key: l.key, Seq: c.Seq, Offset: at, Reason: fmt.Sprintf("the bytes there belong to step %d, not step %d", step, c.Step)}
		}
	}
	if c.End() <= end {
		return &AppendResult{NextOffset: end}, nil
	}
	tail := c.Data[end-c.Offset:]
	if n := len(l.steps); n > 0 && c.Step < l.steps[n-1].step {
		return nil, &ConflictError{Key: l.key, Seq: c.Seq, Offset: end, Reason: fmt.Sprintf("step %d comes after step %d", c.Step, l.steps[n-1].step)}
	}
	var truncated, selfCut bool
	if end+int64(len(tail)) > h.maxLog {
		tail, truncated, selfCut = h.cut(tail, end)
	}
	if h.liveSize.Add(int64(len(tail))) > h.maxLive {
		h.liveSize.Add(-int64(len(tail)))
		return nil, fmt.Errorf("logs: log %s: the live logs hold %d bytes: %w", l.key, h.maxLive, ErrBusy)
	}
	if n := len(l.steps); n == 0 || l.steps[n-1].step != c.Step {
		l.steps = append(l.steps, stepStart{step: c.Step, start: end})
	}
	l.write(tail)
	l.hash.Write(tail)
	l.lastWrite = h.now()
	l.wakeAll()
	if truncated {
		// The runner's offsets go on past the truncation line.
		l.truncated, l.selfCut, l.runnerEnd = true, selfCut, c.End()
		return &AppendResult{NextOffset: max(l.end, c.End()), Appended: len(tail)}, nil
	}
	return &AppendResult{NextOffset: l.end, Appended: len(tail)}, nil
}

// cut returns what of tail, the new bytes of a chunk from offset end,
// the log keeps when they go past Config.MaxLogBytes: the bytes up to the
// limit, then the truncation line; and whether the log is truncated with
// them. Bytes past the limit that are (the start of) the truncation line
// come from a runner that cut its log itself (selfCut), and are kept as
// they are.
func (h *Hub) cut(tail []byte, end int64) (kept []byte, truncated, selfCut bool) {
	keep := max(h.maxLog-end, 0)
	rest := tail[keep:]
	pos := int(max(end, h.maxLog) - h.maxLog) // where rest starts in the line
	if pos+len(rest) <= len(h.marker) && bytes.Equal(rest, h.marker[pos:pos+len(rest)]) {
		done := pos+len(rest) == len(h.marker)
		return tail, done, done
	}
	return append(tail[:keep:keep], h.marker[pos:]...), true, false
}

// discard takes a chunk of a truncated log: its bytes below the limit
// must match those the log holds, the rest is counted and dropped.
func (l *liveLog) discard(c *Chunk, h *Hub) (*AppendResult, error) {
	if below := min(c.End(), h.maxLog, l.end); c.Offset < below {
		if at := l.mismatch(c.Offset, c.Data[:below-c.Offset]); at >= 0 {
			return nil, &ConflictError{Key: l.key, Seq: c.Seq, Offset: at, Reason: "the chunk's bytes differ from those the log holds"}
		}
	}
	l.runnerEnd = max(l.runnerEnd, c.End())
	l.lastWrite = h.now()
	return &AppendResult{NextOffset: max(c.End(), l.end)}, nil
}

// truncation says whether the log was cut and how much output was
// discarded: what a runner that cut it says (p), or what a runner that
// did not sent and said past the limit.
func (l *liveLog) truncation(h *Hub, p *FinishParams) (bool, int64) {
	switch {
	case !l.truncated:
		return false, 0
	case l.selfCut:
		if p == nil {
			return true, 0
		}
		return true, p.DroppedBytes
	}
	sent := l.runnerEnd
	if p != nil {
		sent = max(sent, p.TotalBytes)
	}
	return true, max(sent-h.maxLog, 0)
}

// Truncated reports whether the log of key was cut at Config.MaxLogBytes
// and how much output was discarded, as far as the Hub knows; false for a
// log it has no memory of (see Config.RememberFinished).
func (h *Hub) Truncated(key Key) (dropped int64, truncated bool) {
	v, ok := h.live.Load(key)
	if !ok {
		return 0, false
	}
	l := v.(*liveLog)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fin != nil {
		return l.fin.result.DroppedBytes, l.fin.result.Truncated
	}
	t, d := l.truncation(h, nil)
	return d, t
}

func (l *liveLog) write(p []byte) {
	for len(p) > 0 {
		n := len(l.blocks)
		if n == 0 || len(l.blocks[n-1]) == cap(l.blocks[n-1]) {
			size := maxBlock
			if n < 8 { // 4 KiB doubling to 512 KiB, then 1 MiB
				size = minBlock << n
			}
			l.blocks = append(l.blocks, make([]byte, 0, size))
			l.starts = append(l.starts, l.end)
			n++
		}
		b := l.blocks[n-1]
		k := min(len(p), cap(b)-len(b))
		l.blocks[n-1] = append(b, p[:k]...)
		p = p[k:]
		l.end += int64(k)
	}
}

// slice returns the bytes from pos up to at most limit, within one block;
// pos must be below end.
func (l *liveLog) slice(pos, limit int64) []byte {
	i, found := slices.BinarySearch(l.starts, pos)
	if !found {
		i--
	}
	b := l.blocks[i][pos-l.starts[i]:]
	if int64(len(b)) > limit-pos {
		b = b[:limit-pos]
	}
	return b
}

// mismatch returns the first offset from pos where p differs from the
// log, or -1. p must lie below end.
func (l *liveLog) mismatch(pos int64, p []byte) int64 {
	for len(p) > 0 {
		b := l.slice(pos, pos+int64(len(p)))
		for i := range b {
			if b[i] != p[i] {
				return pos + int64(i)
			}
		}
		pos += int64(len(b))
		p = p[len(b):]
	}
	return -1
}

// otherStep returns the first offset in [from, to) whose byte belongs to
// a step other than step, and that step; or -1.
func (l *liveLog) otherStep(from, to int64, step int) (int64, int) {
	for i, st := range l.steps {
		stop := l.end
		if i+1 < len(l.steps) {
			stop = l.steps[i+1].start
		}
		if stop <= from || st.start >= to || st.step == step {
			continue
		}
		return max(from, st.start), st.step
	}
	return -1, 0
}

// stepAt returns the step of the byte at pos and where that step's bytes
// end.
func (l *liveLog) stepAt(pos int64) (step int, stop int64) {
	i, found := slices.BinarySearchFunc(l.steps, pos, func(s stepStart, pos int64) int { return cmp.Compare(s.start, pos) })
	if !found {
		i--
	}
	stop = l.end
	if i+1 < len(l.steps) {
		stop = l.steps[i+1].start
	}
	return l.steps[i].step, stop
}

func (l *liveLog) wakeAll() {
	if l.wake != nil {
		close(l.wake)
		l.wake = nil
	}
}

// blockReader reads [pos, end) of a sealed log.
type blockReader struct {
	l        *liveLog
	pos, end int64
	sum      hash.Hash // sees every byte read
}

func (r *blockReader) Read(p []byte) (int, error) {
	if r.pos >= r.end {
		return 0, io.EOF
	}
	n := copy(p, r.l.slice(r.pos, r.end))
	r.sum.Write(p[:n])
	r.pos += int64(n)
	return n, nil
}

// WriteTo spares a copy for sinks that read with io.Copy.
func (r *blockReader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for r.pos < r.end {
		b := r.l.slice(r.pos, r.end)
		n, err := w.Write(b)
		r.sum.Write(b[:n])
		total += int64(n)
		r.pos += int64(n)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}
