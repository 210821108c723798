package logs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/cikit/cikit"
)

// Sink stores the finished logs of steps: the blob store seam of the
// package. A Hub puts each step of a log once it is finished, and
// followers of a finished log get them back.
//
// Implementations must be safe for concurrent use. FileSink, MemorySink
// and BlobSink (over an artifacts.BlobStore, such as S3) are in this
// package; logstest.ExerciseSink checks an implementation.
type Sink interface {
	// StepPut stores the bytes read from r, which are size bytes, as the
	// log of key's step and returns the blob key it is stored under (for
	// the segment index). Putting a step again replaces it: a Hub puts
	// again only after a failure, with the same bytes. A reader that
	// gives other than size bytes is an error, and nothing is stored.
	StepPut(ctx context.Context, key Key, step int, r io.Reader, size int64) (blob string, err error)
	// StepGet returns the stored log of key's step. A step never put is
	// cikit.ErrNotFound.
	StepGet(ctx context.Context, key Key, step int) (io.ReadCloser, error)
}

// BlobKey is the blob key of a step's log: "<run_id>/<job_id>/<attempt>/<step>.log",
// the IDs escaped as URL path segments ("test 1/3" is "test%201%2F3"; "."
// and ".." are "%2E" and "%2E%2E"), so that every valid Key is a safe
// relative path of its own.
func BlobKey(key Key, step int) string {
	return path.Join(escapeID(key.RunID), escapeID(key.JobID), strconv.Itoa(key.Attempt), strconv.Itoa(step)+".log")
}

func escapeID(s string) string {
	switch e := url.PathEscape(s); e {
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	default:
		return e
	}
}

// FileSink is a Sink in a directory: each step's log is the file
// Dir/BlobKey, written to a temporary file first and renamed, so a reader
// never sees part of one.
type FileSink struct {
	Dir string
}

var _ Sink = (*FileSink)(nil)

// StepPut implements Sink.
func (s *FileSink) StepPut(ctx context.Context, key Key, step int, r io.Reader, size int64) (string, error) {
	if err := key.Validate(); err != nil {
		return "", err
	}
	if step < 0 {
		return "", fmt.Errorf("the step must not be negative, got %d", step)
	}
	blob := BlobKey(key, step)
	name := filepath.Join(s.Dir, filepath.FromSlash(blob))
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(filepath.Dir(name), ".put-*")
	if err != nil {
		return "", err
	}
	// Not limited to size: io.Copy then uses the Hub's reader's WriteTo,
	// which spares a copy of every byte.
	n, err := io.Copy(f, r)
	if err == nil && n != size {
		err = fmt.Errorf("the reader gave %d bytes, not %d", n, size)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), name)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", err
	}
	return blob, nil
}

// StepGet implements Sink.
func (s *FileSink) StepGet(ctx context.Context, key Key, step int) (io.ReadCloser, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(s.Dir, filepath.FromSlash(BlobKey(key, step))))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("step %d of log %s: %w", step, key, cikit.ErrNotFound)
	}
	return f, err
}

// MemorySink is a Sink in process memory, for tests and the embedded
// platform. The zero value is ready to use.
type MemorySink struct {
	mu    sync.Mutex
	blobs map[string][]byte
}

var _ Sink = (*MemorySink)(nil)

// StepPut implements Sink.
func (s *MemorySink) StepPut(ctx context.Context, key Key, step int, r io.Reader, size int64) (string, error) {
	if err := key.Validate(); err != nil {
		return "", err
	}
	if step < 0 {
		return "", fmt.Errorf("the step must not be negative, got %d", step)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", fmt.Errorf("reading %d bytes: %w", size, err)
	}
	if n, _ := r.Read(make([]byte, 1)); n > 0 {
		return "", fmt.Errorf("the reader gave more than %d bytes", size)
	}
	blob := BlobKey(key, step)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.blobs == nil {
		s.blobs = make(map[string][]byte)
	}
	s.blobs[blob] = b
	return blob, nil
}

// StepGet implements Sink.
func (s *MemorySink) StepGet(ctx context.Context, key Key, step int) (io.ReadCloser, error) {
	s.mu.Lock()
	b, ok := s.blobs[BlobKey(key, step)]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("step %d of log %s: %w", step, key, cikit.ErrNotFound)
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}
