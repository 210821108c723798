package logs

import (
	"context"
	"fmt"
	"io"

	"github.com/cikit/cikit/artifacts"
)

// BlobSink is a Sink in an artifacts.BlobStore: each step's log is the
// blob prefix/BlobKey. Over an artifacts.S3Store it keeps finished logs in
// S3, which production does; over an artifacts.FileStore, in a directory.
//
// The store's guarantees carry over: a step's log appears whole or not at
// all, and a failed put leaves nothing.
type BlobSink struct {
	store  artifacts.BlobStore
	prefix string
}

var _ Sink = (*BlobSink)(nil)

// NewBlobSink returns a sink that stores each step's log in store under
// prefix, a key prefix without a trailing slash such as "logs" (empty
// for none), so that logs can share a store with other blobs. The blob
// keys StepPut returns include the prefix. A prefix the store refuses
// (see artifacts.ValidateKey) makes every call fail with
// artifacts.ErrInvalidKey.
func NewBlobSink(store artifacts.BlobStore, prefix string) *BlobSink {
	return &BlobSink{store: store, prefix: prefix}
}

func (s *BlobSink) blob(key Key, step int) string {
	if s.prefix == "" {
		return BlobKey(key, step)
	}
	return s.prefix + "/" + BlobKey(key, step)
}

// StepPut implements Sink.
func (s *BlobSink) StepPut(ctx context.Context, key Key, step int, r io.Reader, size int64) (string, error) {
	if err := key.Validate(); err != nil {
		return "", err
	}
	if step < 0 {
		return "", fmt.Errorf("the step must not be negative, got %d", step)
	}
	blob := s.blob(key, step)
	if err := s.store.Put(ctx, blob, r, size); err != nil {
		return "", fmt.Errorf("step %d of log %s: %w", step, key, err)
	}
	return blob, nil
}

// StepGet implements Sink.
func (s *BlobSink) StepGet(ctx context.Context, key Key, step int) (io.ReadCloser, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	rc, err := s.store.Get(ctx, s.blob(key, step))
	if err != nil {
		return nil, fmt.Errorf("step %d of log %s: %w", step, key, err)
	}
	return rc, nil
}
