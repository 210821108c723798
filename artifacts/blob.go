package artifacts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// BlobStore stores blobs, immutable byte strings named by keys: the
// storage seam of artifacts, caches and finished logs.
//
// A key is a slash-separated relative path such as "logs/run-1/build/1/0.log"
// (see ValidateKey). Every method refuses an invalid key with an error
// matching ErrInvalidKey before it does anything else.
//
// Implementations must be safe for concurrent use. FileStore and S3Store
// are in this package; artifactstest.Exercise checks an implementation.
type BlobStore interface {
	// Put stores the bytes read from r, which must be exactly size bytes,
	// as the blob key. A blob already stored under key is replaced
	// atomically: a concurrent Get returns the old blob or the new one,
	// never a mix. A reader that gives other than size bytes fails with
	// an error matching ErrWrongSize, and a failed Put (a reader's error,
	// a cancelled ctx) stores nothing and leaves an earlier blob as it
	// was.
	Put(ctx context.Context, key string, r io.Reader, size int64) error
	// Get returns the blob key for reading; the caller closes it. A key
	// never put, or deleted, is an error matching cikit.ErrNotFound.
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// Delete removes the blob key. Deleting a missing blob is not an
	// error.
	Delete(ctx context.Context, key string) error
	// Stat describes the blob key; a missing one is an error matching
	// cikit.ErrNotFound.
	Stat(ctx context.Context, key string) (BlobInfo, error)
}

// BlobInfo describes a stored blob.
type BlobInfo struct {
	Size    int64     // length in bytes
	ModTime time.Time // when it was last put, as the store records it
}

// Errors of every BlobStore. Callers test with errors.Is.
var (
	// ErrInvalidKey: the key is not a valid blob key (see ValidateKey).
	ErrInvalidKey = errors.New("invalid blob key")
	// ErrWrongSize: the reader given to Put gave fewer or more bytes
	// than the size it was given with.
	ErrWrongSize = errors.New("the reader gave other than size bytes")
)

// MaxKeyLen is the longest valid key in bytes, S3's limit for object
// keys. An S3Store's Prefix counts against it too.
const MaxKeyLen = 1024

// ValidateKey reports whether key is a valid blob key: valid UTF-8 of 1
// to MaxKeyLen bytes, slash-separated segments that are neither empty nor
// "." or "..", so no leading, trailing or doubled slash, and neither NUL
// nor backslash. Such a key means the same path in every store, and
// cannot leave a FileStore's directory. The error matches ErrInvalidKey
// and says what is wrong.
func ValidateKey(key string) error {
	bad := func(why string) error { return fmt.Errorf("%w %q: %s", ErrInvalidKey, key, why) }
	switch {
	case key == "":
		return bad("it is empty")
	case len(key) > MaxKeyLen:
		return bad(fmt.Sprintf("it is %d bytes long, more than %d", len(key), MaxKeyLen))
	case !utf8.ValidString(key):
		return bad("it is not valid UTF-8")
	case strings.ContainsRune(key, 0):
		return bad("it contains NUL")
	case strings.ContainsRune(key, '\\'):
		return bad("it contains a backslash; segments are separated by slashes")
	case key[0] == '/':
		return bad("it begins with a slash; keys are relative")
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch seg {
		case "":
			return bad("it has an empty segment (a doubled or trailing slash)")
		case ".", "..":
			return bad(fmt.Sprintf("it has a %q segment", seg))
		}
	}
	return nil
}

// sizedReader reads exactly size bytes from r or fails: with ErrWrongSize
// when r ends early or has more, with ctx's error once ctx is done. Stores
// read the bodies given to Put through it, so a wrong size fails before
// the blob is committed.
type sizedReader struct {
	ctx  context.Context
	r    io.Reader
	size int64
	left int64
}

func newSizedReader(ctx context.Context, r io.Reader, size int64) *sizedReader {
	return &sizedReader{ctx: ctx, r: r, size: size, left: size}
}

func (s *sizedReader) Read(p []byte) (int, error) {
	if err := s.ctx.Err(); err != nil {
		return 0, err
	}
	if s.left == 0 {
		// One byte more tells a reader of exactly size bytes from a longer
		// one.
		var one [1]byte
		n, err := io.ReadFull(s.r, one[:])
		switch {
		case n > 0:
			return 0, fmt.Errorf("%w: more than %d", ErrWrongSize, s.size)
		case err == io.EOF:
			return 0, io.EOF
		default:
			return 0, err
		}
	}
	if int64(len(p)) > s.left {
		p = p[:s.left]
	}
	n, err := s.r.Read(p)
	s.left -= int64(n)
	switch {
	case err == io.EOF && s.left > 0:
		return n, fmt.Errorf("%w: %d, not %d", ErrWrongSize, s.size-s.left, s.size)
	case err == io.EOF:
		// The next Read checks that r is really at its end.
		return n, nil
	}
	return n, err
}

func checkSize(size int64) error {
	if size < 0 {
		return fmt.Errorf("the size must not be negative, got %d", size)
	}
	return nil
}
