package logs_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/internal/clocktest"
	"github.com/cikit/cikit/logs"
)

type bundle struct {
	hub      *logs.Hub
	sink     logs.Sink
	segments *logs.MemorySegmentStore
	key      logs.Key
}

func setup(t *testing.T, cfg logs.Config) *bundle {
	t.Helper()
	b := &bundle{
		sink:     cmpOr[logs.Sink](cfg.Sink, &logs.MemorySink{}),
		segments: &logs.MemorySegmentStore{},
		key:      logs.Key{RunID: "run-1", JobID: "build", Attempt: 1},
	}
	cfg.Sink = b.sink
	if cfg.Segments == nil {
		cfg.Segments = b.segments
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.Now = func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	hub, err := logs.NewHub(cfg)
	require.NoError(t, err)
	b.hub = hub
	return b
}

func cmpOr[T comparable](a, b T) T {
	var zero T
	if a != zero {
		return a
	}
	return b
}

// append sends a chunk of key's log and requires success.
func (b *bundle) append(t *testing.T, step int, seq, off int64, data string) *logs.AppendResult {
	t.Helper()
	res, err := b.try(step, seq, off, data)
	require.NoError(t, err)
	return res
}

func (b *bundle) try(step int, seq, off int64, data string) (*logs.AppendResult, error) {
	return b.hub.Append(context.Background(), &logs.Chunk{Key: b.key, Step: step, Seq: seq, Offset: off, Data: []byte(data)})
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func (b *bundle) finish(t *testing.T, log string) *logs.FinishResult {
	t.Helper()
	res, err := b.hub.Finish(context.Background(), b.key, logs.FinishParams{TotalBytes: int64(len(log)), SHA256: digest(log)})
	require.NoError(t, err)
	return res
}

// follow reads key's log from offset from until the end.
func follow(t *testing.T, hub *logs.Hub, key logs.Key, from int64) (string, []logs.Event, *logs.FinishResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f, err := hub.Follow(ctx, key, from)
	require.NoError(t, err)
	defer f.Close()
	var buf bytes.Buffer
	var events []logs.Event
	next := from
	for {
		ev, err := f.Next(ctx)
		if err == io.EOF {
			return buf.String(), events, f.Result()
		}
		require.NoError(t, err)
		require.Equal(t, next, ev.Offset, "events are in order, without gaps")
		next = ev.End()
		buf.Write(ev.Data)
		events = append(events, logs.Event{Step: ev.Step, Offset: ev.Offset, Data: bytes.Clone(ev.Data)})
	}
}

func TestAppendGap(t *testing.T) {
	t.Parallel()
	b := setup(t, logs.Config{})
	_, err := b.try(0, 0, 5, "late")
	gap, ok := errors.AsType[*logs.GapError](err)
	require.True(t, ok, "a first chunk after offset 0: %v", err)
	require.Equal(t, int64(0), gap.Expected)

	b.append(t, 0, 0, 0, "hello")
	_, err = b.try(0, 2, 7, "lost one")
	gap, ok = errors.AsType[*logs.GapError](err)
	require.True(t, ok, "%v", err)
	require.Equal(t, int64(5), gap.Expected)
	require.Equal(t, int64(7), gap.Offset)

	res := b.append(t, 0, 1, 5, " world")
	require.Equal(t, int64(11), res.NextOffset, "the runner rewound to the expected offset")
	require.Equal(t, "hello world", b.finishAndRead(t, "hello world"))
}

func (b *bundle) finishAndRead(t *testing.T, log string) string {
	t.Helper()
	require.True(t, b.finish(t, log).Complete)
	got, _, _ := follow(t, b.hub, b.key, 0)
	return got
}

func TestAppendDuplicate(t *testing.T) {
	t.Parallel()
	b := setup(t, logs.Config{})
	b.append(t, 0, 0, 0, "hello ")
	b.append(t, 0, 1, 6, "world")
	for _, c := range []struct {
		off  int64
		data string
	}{{0, "hello "}, {6, "world"}, {2, "llo wo"}, {10, "d"}, {0, "hello world"}} {
		res := b.append(t, 0, 1, c.off, c.data)
		require.Equal(t, &logs.AppendResult{NextOffset: 11}, res, "a duplicate of %q at %d changes nothing", c.data, c.off)
	}
	require.Equal(t, "hello world", b.finishAndRead(t, "hello world"))
}

func TestAppendConflict(t *testing.T) {
	t.Parallel()
	b := setup(t, logs.Config{})
	b.append(t, 0, 0, 0, "hello ")
	b.append(t, 1, 1, 6, "world")

	_, err := b.try(0, 0, 0, "HELLO ")
	require.ErrorIs(t, err, cikit.ErrConflict, "other bytes for a written range")
	ce, ok := errors.AsType[*logs.ConflictError](err)
	require.True(t, ok)
	require.Equal(t, int64(0), ce.Offset)

	_, err = b.try(1, 2, 8, "rLD and more")
	require.ErrorIs(t, err, cikit.ErrConflict, "an overlap that differs appends nothing")
	ce, _ = errors.AsType[*logs.ConflictError](err)
	require.Equal(t, int64(9), ce.Offset, "the first differing byte")

	_, err = b.try(0, 2, 6, "world")
	require.ErrorIs(t, err, cikit.ErrConflict, "the same bytes in another step")

	_, err = b.try(0, 2, 11, "!")
	require.ErrorIs(t, err, cikit.ErrConflict, "a step going backwards")

	require.Equal(t, "hello world", b.finishAndRead(t, "hello world"), "refused chunks left no trace")
}

func TestAppendPartialOverlap(t *testing.T) {
	t.Parallel()
	b := setup(t, logs.Config{})
	b.append(t, 0, 0, 0, "hello")
	res := b.append(t, 0, 1, 3, "lo world")
	require.Equal(t, &logs.AppendResult{NextOffset: 11, Appended: 6}, res, "only the new tail is appended")
	_, err := b.try(2, 2, 8, "rld\nstep two")
	require.ErrorIs(t, err, cikit.ErrConflict, "a chunk is of one step: its overlap cannot be of another")
	res = b.append(t, 0, 2, 8, "rld\n")
	require.Equal(t, &logs.AppendResult{NextOffset: 12, Appended: 1}, res)
	res = b.append(t, 2, 3, 12, "step two")
	require.Equal(t, &logs.AppendResult{NextOffset: 20, Appended: 8}, res)
	log := "hello world\nstep two"
	require.True(t, b.finish(t, log).Complete)
	got, events, _ := follow(t, b.hub, b.key, 0)
	require.Equal(t, log, got)
	require.Equal(t, 0, events[0].Step)
	require.Equal(t, 2, events[len(events)-1].Step)
}

// TestAppendTruncates: a runner that sends more than MaxLogBytes (it
// ignores the limit) gets a log cut at the limit with a visible line, the
// rest taken, discarded and counted.
func TestAppendTruncates(t *testing.T) {
	t.Parallel()
	b := setup(t, logs.Config{MaxLogBytes: 10 << 10})
	ctx := context.Background()
	full := testLog(25 << 10)
	b.append(t, 0, 0, 0, full[:8<<10])
	live, err := b.hub.Follow(ctx, b.key, 0)
	require.NoError(t, err)
	defer live.Close()
	res := b.append(t, 1, 1, 8<<10, full[8<<10:12<<10])
	require.Equal(t, int64(12<<10), res.NextOffset, "the runner goes on from where it is")
	res = b.append(t, 1, 2, 12<<10, full[12<<10:])
	require.Equal(t, int64(25<<10), res.NextOffset)
	b.append(t, 1, 1, 8<<10, full[8<<10:12<<10]) // a repeated chunk is fine
	_, err = b.try(0, 0, 0, "X"+full[1:8<<10])
	require.ErrorIs(t, err, cikit.ErrConflict, "bytes below the limit are still checked")
	marker := cikit.LogTruncatedLine(10 << 10)
	require.Equal(t, "\n[cikit] log truncated at 10 KiB: the rest of the output is discarded\n", marker)
	dropped, truncated := b.hub.Truncated(b.key)
	require.True(t, truncated)
	require.Equal(t, int64(15<<10), dropped)

	// The live tail shows the line.
	var tail strings.Builder
	for !strings.HasSuffix(tail.String(), marker) {
		ev, err := live.Next(ctx)
		require.NoError(t, err)
		tail.Write(ev.Data)
	}
	require.Equal(t, full[:10<<10]+marker, tail.String())

	fin := b.finish(t, full)
	require.False(t, fin.Complete, "the runner's bytes did not all arrive")
	require.True(t, fin.Truncated)
	require.Equal(t, int64(15<<10), fin.DroppedBytes)
	require.Equal(t, int64(10<<10+len(marker)), fin.Bytes)
	got, _, _ := follow(t, b.hub, b.key, 0)
	require.Equal(t, full[:10<<10]+marker, got)
}

// TestAppendRunnerCut: a runner that cut its log itself sends the bytes
// up to the limit and the truncation line, in chunks split anywhere;
// the log keeps them as they are and is complete.
func TestAppendRunnerCut(t *testing.T) {
	t.Parallel()
	b := setup(t, logs.Config{MaxLogBytes: 100})
	log := testLog(100) + cikit.LogTruncatedLine(100)
	for off := 0; off < len(log); off += 7 {
		b.append(t, 0, int64(off/7), int64(off), log[off:min(off+7, len(log))])
	}
	res, err := b.hub.Finish(context.Background(), b.key, logs.FinishParams{TotalBytes: int64(len(log)), SHA256: digest(log), DroppedBytes: 5000})
	require.NoError(t, err)
	require.Equal(t, &logs.FinishResult{Complete: true, Bytes: int64(len(log)), Truncated: true, DroppedBytes: 5000}, res)
	dropped, truncated := b.hub.Truncated(b.key)
	require.True(t, truncated)
	require.Equal(t, int64(5000), dropped)
	got, _, _ := follow(t, b.hub, b.key, 0)
	require.Equal(t, log, got)
}

func TestAppendInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t, logs.Config{})
	for _, c := range []*logs.Chunk{
		{Key: logs.Key{RunID: "", JobID: "j", Attempt: 1}, Data: []byte("x")},
		{Key: logs.Key{RunID: "r", JobID: "j\x00", Attempt: 1}, Data: []byte("x")},
		{Key: b.key, Offset: -1, Data: []byte("x")},
		{Key: b.key, Step: -1, Data: []byte("x")},
		{Key: b.key, Seq: -1, Data: []byte("x")},
	} {
		_, err := b.hub.Append(context.Background(), c)
		require.Error(t, err, "%+v", c)
	}
}

// writeLog appends log in chunks of n bytes, changing step every stepLen
// bytes: the test's runner.
func writeLog(t *testing.T, b *bundle, log string, n, stepLen int) {
	t.Helper()
	var seq int64
	for off := 0; off < len(log); {
		step := off / stepLen
		end := min(off+n, len(log), (step+1)*stepLen)
		b.append(t, step, seq, int64(off), log[off:end])
		seq++
		off = end
	}
}

func testLog(n int) string {
	var buf bytes.Buffer
	for i := 0; buf.Len() < n; i++ {
		fmt.Fprintf(&buf, "line %d of the log\n", i)
	}
	return buf.String()[:n]
}

func TestFollowMidStream(t *testing.T) {
	t.Parallel()
	b := setup(t, logs.Config{MaxEventBytes: 1000})
	log := testLog(300_000)
	writeLog(t, b, log[:50_000], 4096, 100_000)

	const followers = 8
	var wg sync.WaitGroup
	got := make([]string, followers)
	events := make([][]logs.Event, followers)
	for i := range followers {
		wg.Go(func() { got[i], events[i], _ = follow(t, b.hub, b.key, 0) })
	}
	rest := log[50_000:]
	var seq int64 = 1000
	for off := 0; off < len(rest); off += 7000 {
		abs := 50_000 + off
		end := min(off+7000, len(rest), ((abs/100_000)+1)*100_000-50_000)
		b.append(t, abs/100_000, seq, int64(abs), rest[off:end])
		seq++
		off = end - 7000
	}
	require.True(t, b.finish(t, log).Complete)
	wg.Wait()
	for i := range followers {
		require.Equal(t, len(log), len(got[i]))
		require.Equal(t, log, got[i], "follower %d got the whole log in order", i)
		for _, ev := range events[i] {
			require.LessOrEqual(t, len(ev.Data), 1000, "MaxEventBytes")
			require.Equal(t, int(ev.Offset)/100_000, ev.Step, "events do not cross steps")
			require.Equal(t, int(ev.End()-1)/100_000, ev.Step, "events do not cross steps")
		}
	}
}

func TestFollowResume(t *testing.T) {
	t.Parallel()
	b := setup(t, logs.Config{})
	log := testLog(10_000)
	writeLog(t, b, log[:6000], 1000, 2500)

	ctx := context.Background()
	f, err := b.hub.Follow(ctx, b.key, 5500)
	require.NoError(t, err)
	ev, err := f.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, logs.Event{Step: 2, Offset: 5500, Data: []byte(log[5500:6000])}, ev)
	require.Nil(t, f.Result())
	require.NoError(t, f.Close())

	done := make(chan string)
	go func() {
		got, _, _ := follow(t, b.hub, b.key, 7000) // beyond the end: waits for the bytes
		done <- got
	}()
	writeLogFrom(t, b, log, 6000, 1000, 2500)
	require.True(t, b.finish(t, log).Complete)
	require.Equal(t, log[7000:], <-done)
}

func writeLogFrom(t *testing.T, b *bundle, log string, from, n, stepLen int) {
	t.Helper()
	for off := from; off < len(log); {
		step := off / stepLen
		end := min(off+n, len(log), (step+1)*stepLen)
		b.append(t, step, int64(off/n), int64(off), log[off:end])
		off = end
	}
}

func TestSlowFollowerDoesNotBlock(t *testing.T) {
	t.Parallel()
	b := setup(t, logs.Config{MaxLogBytes: 8 << 20})
	ctx := context.Background()
	b.append(t, 0, 0, 0, "x")
	idle, err := b.hub.Follow(ctx, b.key, 0) // never reads until the end
	require.NoError(t, err)
	defer idle.Close()
	log := "x" + testLog(4<<20)
	writeLogFrom(t, b, log, 1, 64<<10, 1<<20)
	require.True(t, b.finish(t, log).Complete)

	var buf bytes.Buffer
	for {
		ev, err := idle.Next(ctx)
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		buf.Write(ev.Data)
	}
	require.Equal(t, log, buf.String(), "the slow follower catches up without losing bytes")
	require.Equal(t, &logs.FinishResult{Complete: true, Bytes: int64(len(log))}, idle.Result())
}

func TestFollowNotBegun(t *testing.T) {
	t.Parallel()
	b := setup(t, logs.Config{})
	_, err := b.hub.Follow(context.Background(), b.key, 0)
	require.ErrorIs(t, err, cikit.ErrNotFound)
}

func TestFollowCanceled(t *testing.T) {
	t.Parallel()
	b := setup(t, logs.Config{})
	b.append(t, 0, 0, 0, "x")
	ctx, cancel := context.WithCancel(context.Background())
	f, err := b.hub.Follow(ctx, b.key, 1)
	require.NoError(t, err)
	go cancel()
	_, err = f.Next(ctx)
	require.ErrorIs(t, err, context.Canceled)
}

// tryAll reads f with TryNext until it has nothing more now, and returns
// the bytes and the last error (nil or io.EOF).
func tryAll(t *testing.T, f *logs.Follower) (string, error) {
	t.Helper()
	var buf bytes.Buffer
	for {
		at := f.Offset()
		ev, ok, err := f.TryNext(context.Background())
		if !ok {
			return buf.String(), err
		}
		require.NoError(t, err)
		require.Equal(t, at, ev.Offset, "in order, without gaps")
		buf.Write(ev.Data)
	}
}

func TestFollowTryNext(t *testing.T) {
	t.Parallel()
	b := setup(t, logs.Config{MaxEventBytes: 4})
	b.append(t, 0, 0, 0, "hello ")
	f, err := b.hub.Follow(context.Background(), b.key, 0)
	require.NoError(t, err)
	defer f.Close()
	got, err := tryAll(t, f)
	require.NoError(t, err, "a live log: what it holds, then nothing without waiting")
	require.Equal(t, "hello ", got)
	require.Nil(t, f.Result())

	b.append(t, 1, 1, 6, "world")
	got, err = tryAll(t, f)
	require.NoError(t, err)
	require.Equal(t, "world", got, "the bytes appended since")

	b.finish(t, "hello world")
	got, err = tryAll(t, f)
	require.Equal(t, io.EOF, err, "a finished log ends")
	require.Empty(t, got)
	require.Equal(t, &logs.FinishResult{Complete: true, Bytes: 11}, f.Result())

	stored, err := b.hub.Follow(context.Background(), b.key, 0)
	require.NoError(t, err)
	defer stored.Close()
	got, err = tryAll(t, stored)
	require.Equal(t, io.EOF, err)
	require.Equal(t, "hello world", got, "a stored log is read whole")
}

func TestFinish(t *testing.T) {
	t.Parallel()
	const log = "step zero\nstep one\n"
	for _, c := range []struct {
		name     string
		params   logs.FinishParams
		complete bool
	}{
		{"right", logs.FinishParams{TotalBytes: int64(len(log)), SHA256: digest(log)}, true},
		{"upper case digest", logs.FinishParams{TotalBytes: int64(len(log)), SHA256: fmt.Sprintf("%X", sha256.Sum256([]byte(log)))}, true},
		{"more bytes sent", logs.FinishParams{TotalBytes: int64(len(log)) + 5, SHA256: digest(log + "lost!")}, false},
		{"other digest", logs.FinishParams{TotalBytes: int64(len(log)), SHA256: digest("step zero\nstep 0ne\n")}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, logs.Config{})
			ctx := context.Background()
			b.append(t, 0, 0, 0, "step zero\n")
			b.append(t, 1, 1, 10, "step one\n")
			res, err := b.hub.Finish(ctx, b.key, c.params)
			require.NoError(t, err)
			require.Equal(t, &logs.FinishResult{Complete: c.complete, Bytes: int64(len(log))}, res)

			again, err := b.hub.Finish(ctx, b.key, c.params)
			require.NoError(t, err, "Finish again")
			require.Equal(t, res, again)
			_, err = b.hub.Finish(ctx, b.key, logs.FinishParams{TotalBytes: 1, SHA256: digest("x")})
			require.ErrorIs(t, err, cikit.ErrConflict, "finishing with other totals")

			segs, err := b.segments.SegmentsList(ctx, b.key)
			require.NoError(t, err)
			require.Len(t, segs, 2)
			for i, want := range []string{"step zero\n", "step one\n"} {
				require.Equal(t, i, segs[i].Step)
				require.Equal(t, int64(len(want)), segs[i].Bytes)
				require.Equal(t, digest(want), segs[i].SHA256)
				require.Equal(t, c.complete, segs[i].Complete)
			}
			_, err = b.try(1, 2, int64(len(log)), "more")
			require.ErrorIs(t, err, logs.ErrFinished, "new bytes after Finish")
			_, err = b.try(0, 0, 0, "step zero\n")
			require.ErrorIs(t, err, cikit.ErrConflict, "a late copy of the first chunk does not start the log again")

			got, _, fin := follow(t, b.hub, b.key, 0)
			require.Equal(t, log, got)
			require.Equal(t, res, fin)
		})
	}
}

func TestFinishWhileLive(t *testing.T) {
	t.Parallel()
	b := setup(t, logs.Config{})
	ctx := context.Background()
	b.append(t, 0, 0, 0, "abc")
	f, err := b.hub.Follow(ctx, b.key, 0)
	require.NoError(t, err)
	defer f.Close()
	_, err = b.hub.Finish(ctx, b.key, logs.FinishParams{TotalBytes: 3, SHA256: digest("abc")})
	require.NoError(t, err)
	_, err = b.try(0, 1, 3, "d")
	require.ErrorIs(t, err, logs.ErrFinished)
	ev, err := f.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, "abc", string(ev.Data), "a follower of the live log reads it to the end")
	_, err = f.Next(ctx)
	require.Equal(t, io.EOF, err)
}

func TestFinishEmpty(t *testing.T) {
	t.Parallel()
	b := setup(t, logs.Config{})
	ctx := context.Background()
	res, err := b.hub.Finish(ctx, b.key, logs.FinishParams{TotalBytes: 0, SHA256: digest("")})
	require.NoError(t, err)
	require.Equal(t, &logs.FinishResult{Complete: true}, res)
	_, err = b.hub.Finish(ctx, b.key, logs.FinishParams{TotalBytes: 10, SHA256: digest("0123456789")})
	require.ErrorIs(t, err, cikit.ErrNotFound, "a log the hub never received")
	_, err = b.hub.Finish(ctx, b.key, logs.FinishParams{TotalBytes: 0, SHA256: "xyz"})
	require.Error(t, err)
}

func TestFinishIntoFileSink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := setup(t, logs.Config{Sink: &logs.FileSink{Dir: dir}})
	log := testLog(250_000)
	writeLog(t, b, log, 64<<10, 100_000)
	require.True(t, b.finish(t, log).Complete)
	for step := range 3 {
		got, err := os.ReadFile(filepath.Join(dir, "run-1", "build", "1", fmt.Sprintf("%d.log", step)))
		require.NoError(t, err)
		require.Equal(t, log[step*100_000:min(len(log), (step+1)*100_000)], string(got), "step %d", step)
	}
	for _, from := range []int64{0, 1, 99_999, 100_000, 123_456, 249_999, 250_000, 300_000} {
		got, _, res := follow(t, b.hub, b.key, from)
		require.Equal(t, log[min(int(from), len(log)):], got, "following the finished log from %d", from)
		require.Equal(t, &logs.FinishResult{Complete: true, Bytes: int64(len(log))}, res)
	}
}

// failingSink fails its first put.
type failingSink struct {
	logs.MemorySink
	mu     sync.Mutex
	failed bool
}

func (s *failingSink) StepPut(ctx context.Context, key logs.Key, step int, r io.Reader, size int64) (string, error) {
	s.mu.Lock()
	fail := !s.failed
	s.failed = true
	s.mu.Unlock()
	if fail {
		return "", errors.New("the disk is full")
	}
	return s.MemorySink.StepPut(ctx, key, step, r, size)
}

func TestFinishRetriedAfterSinkFailure(t *testing.T) {
	t.Parallel()
	b := setup(t, logs.Config{Sink: &failingSink{}})
	b.append(t, 0, 0, 0, "abc")
	_, err := b.hub.Finish(context.Background(), b.key, logs.FinishParams{TotalBytes: 3, SHA256: digest("abc")})
	require.ErrorContains(t, err, "the disk is full")
	_, err = b.try(0, 1, 3, "d")
	require.ErrorIs(t, err, logs.ErrFinished, "sealed by the first Finish")
	require.Equal(t, "abc", b.finishAndRead(t, "abc"))
}

func TestConcurrentLogs(t *testing.T) {
	t.Parallel()
	b := setup(t, logs.Config{})
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			key := logs.Key{RunID: "run-1", JobID: fmt.Sprintf("job-%d", i), Attempt: 1}
			mine := &bundle{hub: b.hub, key: key, segments: b.segments}
			log := testLog(100_000 + i)
			writeLog(t, mine, log, 3000+i, 40_000)
			got := make(chan string)
			go func() { s, _, _ := follow(t, b.hub, key, 0); got <- s }()
			require.True(t, mine.finish(t, log).Complete)
			require.Equal(t, log, <-got)
		})
	}
	wg.Wait()
}

func TestFinishedLogsForgotten(t *testing.T) {
	t.Parallel()
	b := setup(t, logs.Config{RememberFinished: 1})
	ctx := context.Background()
	b.append(t, 0, 0, 0, "first")
	b.finish(t, "first")
	other := &bundle{hub: b.hub, key: logs.Key{RunID: "run-1", JobID: "test", Attempt: 1}}
	other.append(t, 0, 0, 0, "second")
	other.finish(t, "second") // the first log's totals are forgotten now

	res, err := b.hub.Finish(ctx, b.key, logs.FinishParams{TotalBytes: 1, SHA256: digest("x")})
	require.NoError(t, err, "a forgotten log answers a repeated Finish with its verdict")
	require.Equal(t, &logs.FinishResult{Complete: true, Bytes: 5}, res)
	_, err = other.hub.Finish(ctx, other.key, logs.FinishParams{TotalBytes: 1, SHA256: digest("x")})
	require.ErrorIs(t, err, logs.ErrFinished, "a remembered one refuses other totals")

	_, err = b.try(0, 0, 0, "first")
	require.ErrorIs(t, err, logs.ErrFinished)
	got, _, _ := follow(t, b.hub, b.key, 0)
	require.Equal(t, "first", got)
}

func TestAbandon(t *testing.T) {
	t.Parallel()
	b := setup(t, logs.Config{})
	ctx := context.Background()
	_, err := b.hub.Abandon(ctx, b.key)
	require.ErrorIs(t, err, cikit.ErrNotFound, "a log never begun")

	b.append(t, 0, 0, 0, "half a")
	f, err := b.hub.Follow(ctx, b.key, 0)
	require.NoError(t, err)
	defer f.Close()
	res, err := b.hub.Abandon(ctx, b.key)
	require.NoError(t, err)
	require.Equal(t, &logs.FinishResult{Complete: false, Bytes: 6}, res)
	again, err := b.hub.Abandon(ctx, b.key)
	require.NoError(t, err)
	require.Equal(t, res, again)
	_, err = b.hub.Finish(ctx, b.key, logs.FinishParams{TotalBytes: 6, SHA256: digest("half a")})
	require.ErrorIs(t, err, logs.ErrFinished, "the runner comes back too late")

	ev, err := f.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, "half a", string(ev.Data))
	_, err = f.Next(ctx)
	require.Equal(t, io.EOF, err)
	require.Equal(t, res, f.Result())
	segs, err := b.segments.SegmentsList(ctx, b.key)
	require.NoError(t, err)
	require.Len(t, segs, 1)
	require.False(t, segs[0].Complete)
}

func TestAbandonIdle(t *testing.T) {
	t.Parallel()
	clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	hub, err := logs.NewHub(logs.Config{
		Sink: &logs.MemorySink{}, Segments: &logs.MemorySegmentStore{},
		IdleTimeout: 20 * time.Millisecond, Now: clock.Now, Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	quiet := &bundle{hub: hub, key: logs.Key{RunID: "run-1", JobID: "quiet", Attempt: 1}}
	busy := &bundle{hub: hub, key: logs.Key{RunID: "run-1", JobID: "busy", Attempt: 1}}
	ctx := context.Background()
	quiet.append(t, 0, 0, 0, "hello")
	busy.append(t, 0, 0, 0, "hello")

	clock.Advance(15 * time.Millisecond)
	busy.append(t, 0, 1, 5, " again")
	n, err := hub.AbandonIdle(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "nobody idle yet")

	clock.Advance(10 * time.Millisecond)
	n, err = hub.AbandonIdle(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the quiet log")
	_, err = quiet.try(0, 1, 5, "!")
	require.ErrorIs(t, err, logs.ErrFinished)
	busy.append(t, 0, 2, 11, "!")

	// Run does the same in the background.
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- hub.Run(runCtx) }()
	clock.Advance(time.Hour)
	require.Eventually(t, func() bool {
		_, err := busy.try(0, 0, 0, "hello") // a copy: it does not count as activity
		return errors.Is(err, logs.ErrFinished)
	}, time.Minute, 5*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
}

func TestMaxLiveBytes(t *testing.T) {
	t.Parallel()
	b := setup(t, logs.Config{MaxLiveBytes: 10})
	other := &bundle{hub: b.hub, key: logs.Key{RunID: "run-1", JobID: "test", Attempt: 1}}
	b.append(t, 0, 0, 0, "123456")
	_, err := other.try(0, 0, 0, "12345")
	require.ErrorIs(t, err, logs.ErrBusy, "the two logs would hold 11 bytes")
	other.append(t, 0, 0, 0, "1234")
	b.finish(t, "123456") // makes room
	other.append(t, 0, 1, 4, "56789")
}
