package artifacts_test

import (
	"bytes"
	"io"
	"maps"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/artifacts"
	"github.com/cikit/cikit/artifacts/artifactstest"
	"github.com/cikit/cikit/internal/s3test"
)

// Small parts, so that the suite's large blobs are uploaded in several;
// gofakes3 does not hold them to S3's 5 MiB minimum.
const (
	testPartSize  = 1 << 20
	testThreshold = 2 << 20
)

func TestFileStore(t *testing.T) {
	t.Parallel()
	artifactstest.Exercise(t, func(t *testing.T) artifacts.BlobStore {
		s, err := artifacts.NewFileStore(filepath.Join(t.TempDir(), "blobs"))
		require.NoError(t, err)
		return s
	})
}

func TestS3Store(t *testing.T) {
	t.Parallel()
	artifactstest.Exercise(t, func(t *testing.T) artifacts.BlobStore {
		return newS3Store(t, s3test.New(t, "blobs"), "")
	})
}

func TestS3StoreWithPrefix(t *testing.T) {
	t.Parallel()
	artifactstest.Exercise(t, func(t *testing.T) artifacts.BlobStore {
		return newS3Store(t, s3test.New(t, "blobs"), "ci/blobs")
	})
}

func newS3Store(t *testing.T, srv *s3test.Server, prefix string) *artifacts.S3Store {
	t.Helper()
	cfg := srv.Config("blobs")
	cfg.Prefix = prefix
	cfg.PartSize = testPartSize
	cfg.MultipartThreshold = testThreshold
	s, err := artifacts.NewS3Store(t.Context(), cfg)
	require.NoError(t, err)
	return s
}

func TestS3StoreObjects(t *testing.T) {
	t.Parallel()
	srv := s3test.New(t, "blobs")
	cfg := srv.Config("blobs")
	cfg.Prefix = "ci/blobs"
	cfg.PartSize = testPartSize
	cfg.MultipartThreshold = testThreshold
	rec := &recorder{base: cfg.HTTPClient.Transport}
	cfg.HTTPClient = &http.Client{Transport: rec}
	s, err := artifacts.NewS3Store(t.Context(), cfg)
	require.NoError(t, err)
	ctx := t.Context()

	require.NoError(t, s.Put(ctx, "run-1/small", strings.NewReader("small"), 5))
	require.Equal(t, []string{"PUT /blobs/ci/blobs/run-1/small PutObject"}, rec.take(), "a small blob is one request")

	large := bytes.Repeat([]byte("0123456789abcdef"), artifactstest.LargeSize/16)
	require.NoError(t, s.Put(ctx, "run-1/large", bytes.NewReader(large), int64(len(large))))
	require.Equal(t, []string{
		"POST /blobs/ci/blobs/run-1/large ?uploads",
		"PUT /blobs/ci/blobs/run-1/large UploadPart",
		"PUT /blobs/ci/blobs/run-1/large UploadPart",
		"PUT /blobs/ci/blobs/run-1/large UploadPart",
		"PUT /blobs/ci/blobs/run-1/large UploadPart",
		"POST /blobs/ci/blobs/run-1/large ?uploadId",
	}, rec.take(), "a large blob is a multipart upload of %d-byte parts", testPartSize)
	require.Equal(t, large, mustGet(t, s, "run-1/large"))

	require.ErrorIs(t, s.Put(ctx, "run-1/failed", bytes.NewReader(large[1:]), int64(len(large))), artifacts.ErrWrongSize)
	require.Contains(t, rec.take(), "DELETE /blobs/ci/blobs/run-1/failed AbortMultipartUpload", "a failed multipart upload is aborted")

	client := srv.Client()
	list, err := client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("blobs")})
	require.NoError(t, err)
	var keys []string
	for _, o := range list.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	require.ElementsMatch(t, []string{"ci/blobs/run-1/small", "ci/blobs/run-1/large"}, keys, "objects are under the prefix")
	uploads, err := client.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String("blobs")})
	require.NoError(t, err)
	require.Empty(t, uploads.Uploads, "no multipart upload is left unfinished")
}

// recorder records the requests it sends as "METHOD path operation", the
// operation as the SDK names it in the query where it does, else the
// query's parameter names.
type recorder struct {
	base http.RoundTripper
	mu   sync.Mutex
	reqs []string
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	q := req.URL.Query()
	line := req.Method + " " + req.URL.Path
	if op := q.Get("x-id"); op != "" {
		line += " " + op
	} else if len(q) > 0 {
		line += " ?" + strings.Join(slices.Sorted(maps.Keys(q)), "&")
	}
	r.mu.Lock()
	r.reqs = append(r.reqs, line)
	r.mu.Unlock()
	return r.base.RoundTrip(req)
}

// take returns the requests recorded since the last call, sorted (parts
// are sent in parallel) but for the last one.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	reqs := r.reqs
	r.reqs = nil
	if len(reqs) > 1 {
		slices.Sort(reqs[:len(reqs)-1])
	}
	return reqs
}

func TestS3StoreMissingBucket(t *testing.T) {
	t.Parallel()
	srv := s3test.New(t, "blobs")
	cfg := srv.Config("other")
	s, err := artifacts.NewS3Store(t.Context(), cfg)
	require.NoError(t, err)
	_, err = s.Get(t.Context(), "k")
	require.Error(t, err)
	require.NotErrorIs(t, err, cikit.ErrNotFound, "a missing bucket is a configuration error, not a missing blob")
	require.ErrorContains(t, err, "NoSuchBucket")
	require.Error(t, s.Put(t.Context(), "k", strings.NewReader("x"), 1))
}

func TestNewS3StoreInvalid(t *testing.T) {
	t.Parallel()
	srv := s3test.New(t)
	for name, edit := range map[string]func(*artifacts.S3Config){
		"no bucket":         func(c *artifacts.S3Config) { c.Bucket = "" },
		"prefix with slash": func(c *artifacts.S3Config) { c.Prefix = "logs/" },
		"prefix with ..":    func(c *artifacts.S3Config) { c.Prefix = "a/../b" },
		"half credentials":  func(c *artifacts.S3Config) { c.SecretAccessKey = "" },
		"negative part":     func(c *artifacts.S3Config) { c.PartSize = -1 },
	} {
		cfg := srv.Config("blobs")
		edit(&cfg)
		_, err := artifacts.NewS3Store(t.Context(), cfg)
		require.Error(t, err, name)
	}
}

func TestS3StorePrefixCountsAgainstKeyLength(t *testing.T) {
	t.Parallel()
	s := newS3Store(t, s3test.New(t, "blobs"), "prefix")
	ctx := t.Context()
	longest := strings.Repeat("k", artifacts.MaxKeyLen-len("prefix/"))
	require.NoError(t, s.Put(ctx, longest, strings.NewReader("x"), 1))
	require.ErrorIs(t, s.Put(ctx, longest+"k", strings.NewReader("x"), 1), artifacts.ErrInvalidKey)
}

func TestFileStoreLayout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := artifacts.NewFileStore(dir)
	require.NoError(t, err)
	ctx := t.Context()
	require.NoError(t, s.Put(ctx, "run-1/build/0.log", strings.NewReader("log"), 3))
	b, err := os.ReadFile(filepath.Join(dir, "run-1", "build", "0.log"))
	require.NoError(t, err)
	require.Equal(t, "log", string(b), "the blob is the file Dir/key")

	// A blob cannot also be a directory: the put fails, the blob stays.
	require.Error(t, s.Put(ctx, "run-1/build/0.log/x", strings.NewReader("x"), 1))
	require.Equal(t, "log", string(mustGet(t, s, "run-1/build/0.log")))

	require.NoError(t, s.Delete(ctx, "run-1/build/0.log"))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "directories left empty are removed, not temporary files left behind")
	_, err = os.Stat(dir)
	require.NoError(t, err, "the store's own directory stays")
}

func mustGet(t *testing.T, s artifacts.BlobStore, key string) []byte {
	t.Helper()
	rc, err := s.Get(t.Context(), key)
	require.NoError(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	return b
}

func TestValidateKey(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"a", "a/b/c.log", "%2E%2E/x", "...", ".a/b.", "ü/€"} {
		require.NoError(t, artifacts.ValidateKey(key), key)
	}
	err := artifacts.ValidateKey("a//b")
	require.ErrorIs(t, err, artifacts.ErrInvalidKey)
	require.ErrorContains(t, err, `"a//b": it has an empty segment`)
}

// FuzzValidateKey: an accepted key is a clean, local, slash-separated
// path, the same on every system: it cannot leave a FileStore's directory
// nor name one file in two ways.
func FuzzValidateKey(f *testing.F) {
	for _, seed := range []string{"a/b", "../a", "a/./b", `a\b`, "/a", "a/", "a//b", "\x00", "ü", "...", ""} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, key string) {
		if artifacts.ValidateKey(key) != nil {
			return
		}
		if path.Clean(key) != key || !filepath.IsLocal(filepath.FromSlash(key)) || strings.ContainsAny(key, "\x00\\") {
			t.Fatalf("accepted %q", key)
		}
	})
}
