// Package artifactstest holds the conformance suites of the package's
// seams: Exercise for artifacts.BlobStore, ExerciseManifest for
// artifacts.Manifest and ExerciseCacheIndex for artifacts.CacheIndex.
// Every implementation runs its suite, so that a blob is stored, an
// artifact recorded and a cache entry found the same on a developer's
// disk, in memory, in PostgreSQL and in S3 — and in a store a platform
// team writes itself.
//
//	func TestMyStore(t *testing.T) {
//		artifactstest.Exercise(t, func(t *testing.T) artifacts.BlobStore {
//			return newMyStore(t)
//		})
//	}
//
// The manifest and index suites give times to the microsecond and compare
// them with time.Time.Equal: a store may keep them in UTC, to the
// microsecond, as PostgreSQL does.
package artifactstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/artifacts"
)

// Factory returns a new, empty store. Each call must return a store that
// shares nothing with the others.
type Factory func(t *testing.T) artifacts.BlobStore

// LargeSize is the length of the suite's large blobs. A store that
// uploads large blobs differently, such as in parts, should be made by
// its Factory with a threshold below it (and parts smaller than it), so
// that the suite covers that path too.
const LargeSize = 3<<20 + 12345

// Exercise runs the BlobStore conformance suite.
func Exercise(t *testing.T, factory Factory) {
	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		ctx := context.Background()
		for _, key := range []string{"a", "run-1/build/1/0.log", "with space/ümlaut%20+?#&=.log", ".hidden/x"} {
			requireMissing(t, s, key)
			data := []byte("blob " + key)
			require.NoError(t, s.Put(ctx, key, bytes.NewReader(data), int64(len(data))), key)
			require.Equal(t, data, get(t, s, key), key)
			info, err := s.Stat(ctx, key)
			require.NoError(t, err, key)
			require.Equal(t, int64(len(data)), info.Size, key)
			require.False(t, info.ModTime.IsZero(), "%s: a modification time", key)
		}
	})

	t.Run("Empty", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		ctx := context.Background()
		require.NoError(t, s.Put(ctx, "empty", strings.NewReader(""), 0))
		require.Empty(t, get(t, s, "empty"))
		info, err := s.Stat(ctx, "empty")
		require.NoError(t, err)
		require.Zero(t, info.Size)
	})

	t.Run("Large", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		ctx := context.Background()
		data := randomBytes(LargeSize, 1)
		// Hidden behind a plain reader: stores must not rely on seeking.
		require.NoError(t, s.Put(ctx, "big/blob", plainReader{bytes.NewReader(data)}, LargeSize))
		require.True(t, bytes.Equal(data, get(t, s, "big/blob")), "the large blob comes back as it was put")
		info, err := s.Stat(ctx, "big/blob")
		require.NoError(t, err)
		require.Equal(t, int64(LargeSize), info.Size)
	})

	t.Run("Replace", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		ctx := context.Background()
		require.NoError(t, s.Put(ctx, "k", strings.NewReader("first"), 5))
		require.NoError(t, s.Put(ctx, "k", strings.NewReader("second"), 6))
		require.Equal(t, "second", string(get(t, s, "k")))
		info, err := s.Stat(ctx, "k")
		require.NoError(t, err)
		require.Equal(t, int64(6), info.Size)
		require.NoError(t, s.Put(ctx, "k", strings.NewReader(""), 0), "replaced by an empty blob")
		require.Empty(t, get(t, s, "k"))
	})

	t.Run("ReplaceIsAtomic", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		ctx := context.Background()
		const n = 256 << 10
		blobs := [][]byte{bytes.Repeat([]byte("a"), n), bytes.Repeat([]byte("b"), n)}
		require.NoError(t, s.Put(ctx, "k", bytes.NewReader(blobs[0]), n))
		var wg sync.WaitGroup
		var putErr error
		wg.Go(func() {
			for i := range 20 {
				if putErr = s.Put(ctx, "k", bytes.NewReader(blobs[(i+1)%2]), n); putErr != nil {
					return
				}
			}
		})
		reads := make([][]byte, 20)
		readErrs := make([]error, len(reads))
		for i := range reads {
			wg.Go(func() { reads[i], readErrs[i] = read(ctx, s, "k") })
		}
		wg.Wait()
		require.NoError(t, putErr)
		for i, b := range reads {
			require.NoError(t, readErrs[i])
			require.True(t, bytes.Equal(b, blobs[0]) || bytes.Equal(b, blobs[1]),
				"read %d is one whole blob, not %d bytes beginning %q", i, len(b), b[:min(len(b), 8)])
		}
		require.Equal(t, blobs[0], get(t, s, "k"), "the last put wins")
	})

	t.Run("Missing", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		ctx := context.Background()
		requireMissing(t, s, "nothing/here")
		require.NoError(t, s.Put(ctx, "dir/blob", strings.NewReader("x"), 1))
		// A blob's parent is no blob, whatever the store makes of it.
		requireMissing(t, s, "dir")
		require.NoError(t, s.Delete(ctx, "dir"), "deleting a blob's parent deletes nothing")
		requireMissing(t, s, "dir/blob/child")
		require.Equal(t, "x", string(get(t, s, "dir/blob")))
	})

	t.Run("Delete", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		ctx := context.Background()
		require.NoError(t, s.Put(ctx, "a/b/c", strings.NewReader("c"), 1))
		require.NoError(t, s.Put(ctx, "a/d", strings.NewReader("d"), 1))
		require.NoError(t, s.Delete(ctx, "a/b/c"))
		requireMissing(t, s, "a/b/c")
		require.NoError(t, s.Delete(ctx, "a/b/c"), "deleting twice")
		require.NoError(t, s.Delete(ctx, "never/put"), "deleting what never was")
		require.Equal(t, "d", string(get(t, s, "a/d")), "other blobs stay")
		require.NoError(t, s.Put(ctx, "a/b/c", strings.NewReader("new"), 3), "a deleted blob can be put anew")
		require.Equal(t, "new", string(get(t, s, "a/b/c")))
	})

	t.Run("WrongSize", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		ctx := context.Background()
		large := randomBytes(LargeSize, 2)
		for _, tc := range []struct {
			name string
			data []byte
			size int64
		}{
			{"short", []byte("abc"), 10},
			{"long", []byte("abcdef"), 3},
			{"long, empty expected", []byte("x"), 0},
			{"short, large", large[:LargeSize-1], LargeSize},
			{"long, large", append(large, 'x'), LargeSize},
			{"long by a part, large", append(large, large...), LargeSize},
		} {
			for _, key := range []string{"new", "old"} {
				if key == "old" {
					require.NoError(t, s.Put(ctx, key, strings.NewReader("before"), 6))
				}
				err := s.Put(ctx, key, plainReader{bytes.NewReader(tc.data)}, tc.size)
				require.ErrorIs(t, err, artifacts.ErrWrongSize, "%s, %s", tc.name, key)
				if key == "new" {
					requireMissing(t, s, key)
				} else {
					require.Equal(t, "before", string(get(t, s, key)), "%s: a failed put leaves the old blob", tc.name)
				}
			}
		}
	})

	t.Run("ReaderError", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		ctx := context.Background()
		boom := errors.New("boom")
		for _, size := range []int64{100, LargeSize} {
			r := io.MultiReader(bytes.NewReader(randomBytes(int(size)/2, 3)), errReader{boom})
			err := s.Put(ctx, "k", r, size)
			require.ErrorIs(t, err, boom, "size %d: the reader's error", size)
			requireMissing(t, s, "k")
		}
	})

	t.Run("InvalidKeys", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		ctx := context.Background()
		for _, key := range []string{
			"", "/a", "a/", "a//b", ".", "..", "a/../b", "../a", "a/./b", "a\x00b", `a\b`, "\xff",
			strings.Repeat("k", artifacts.MaxKeyLen+1),
		} {
			require.ErrorIs(t, s.Put(ctx, key, strings.NewReader("x"), 1), artifacts.ErrInvalidKey, "Put %q", key)
			_, err := s.Get(ctx, key)
			require.ErrorIs(t, err, artifacts.ErrInvalidKey, "Get %q", key)
			_, err = s.Stat(ctx, key)
			require.ErrorIs(t, err, artifacts.ErrInvalidKey, "Stat %q", key)
			require.ErrorIs(t, s.Delete(ctx, key), artifacts.ErrInvalidKey, "Delete %q", key)
		}
		require.Error(t, s.Put(ctx, "k", strings.NewReader(""), -1), "a negative size")
		requireMissing(t, s, "k")
	})

	t.Run("ConcurrentPuts", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		ctx := context.Background()
		const n = 16
		key := func(i int) string { return fmt.Sprintf("run/%d/job-%d.log", i%3, i) }
		data := func(i int) []byte { return randomBytes(1000+i*997, uint64(i)) }
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() { errs[i] = s.Put(ctx, key(i), bytes.NewReader(data(i)), int64(len(data(i)))) })
		}
		wg.Wait()
		for i := range n {
			require.NoError(t, errs[i], key(i))
			require.Equal(t, data(i), get(t, s, key(i)), key(i))
		}
	})

	t.Run("CancelledContext", func(t *testing.T) {
		t.Parallel()
		s := factory(t)
		ctx := context.Background()
		require.NoError(t, s.Put(ctx, "k", strings.NewReader("before"), 6))
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		require.ErrorIs(t, s.Put(cancelled, "k", strings.NewReader("after"), 5), context.Canceled, "Put")
		require.ErrorIs(t, s.Put(cancelled, "new", strings.NewReader("x"), 1), context.Canceled, "Put of a new blob")
		_, err := s.Get(cancelled, "k")
		require.ErrorIs(t, err, context.Canceled, "Get")
		_, err = s.Stat(cancelled, "k")
		require.ErrorIs(t, err, context.Canceled, "Stat")
		require.ErrorIs(t, s.Delete(cancelled, "k"), context.Canceled, "Delete")
		require.Equal(t, "before", string(get(t, s, "k")), "nothing changed")
		requireMissing(t, s, "new")

		// Cancelled while the blob is read: half of it has been given.
		for _, size := range []int{100, LargeSize} {
			mid, cancel := context.WithCancel(ctx)
			r := io.MultiReader(bytes.NewReader(randomBytes(size/2, 4)), cancelReader{cancel},
				bytes.NewReader(randomBytes(size-size/2, 5)))
			err := s.Put(mid, "k", r, int64(size))
			require.ErrorIs(t, err, context.Canceled, "size %d", size)
			require.Equal(t, "before", string(get(t, s, "k")), "size %d: a cancelled put leaves the old blob", size)
		}
	})
}

func requireMissing(t *testing.T, s artifacts.BlobStore, key string) {
	t.Helper()
	_, err := s.Get(context.Background(), key)
	require.ErrorIs(t, err, cikit.ErrNotFound, "Get %q", key)
	_, err = s.Stat(context.Background(), key)
	require.ErrorIs(t, err, cikit.ErrNotFound, "Stat %q", key)
}

func get(t *testing.T, s artifacts.BlobStore, key string) []byte {
	t.Helper()
	b, err := read(context.Background(), s, key)
	require.NoError(t, err, "Get %q", key)
	return b
}

func read(ctx context.Context, s artifacts.BlobStore, key string) ([]byte, error) {
	rc, err := s.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)})
	_, _ = r.Read(b)
	return b
}

// plainReader hides every method of its reader but Read.
type plainReader struct{ r io.Reader }

func (p plainReader) Read(b []byte) (int, error) { return p.r.Read(b) }

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// cancelReader cancels a context when it is read, and gives nothing.
type cancelReader struct{ cancel context.CancelFunc }

func (c cancelReader) Read([]byte) (int, error) {
	c.cancel()
	return 0, io.EOF
}
