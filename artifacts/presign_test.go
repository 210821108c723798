package artifacts_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/artifacts"
	"github.com/cikit/cikit/internal/s3test"
)

// Multipart uploads of the presigned tests: parts of S3's minimum size,
// from a little more than one part.
const (
	presignPartSize  = artifacts.MinPartSize
	presignThreshold = artifacts.MinPartSize + 1<<20
)

// clock is a settable clock for expiry tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Now()} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// transfer is one store behind presigned requests, and a client of its
// server.
type transfer struct {
	store  artifacts.Presigner
	client *http.Client
	clock  *clock
	s3     *s3test.Server // nil for a SignedFileStore
}

func setupS3Transfer(t *testing.T) *transfer {
	t.Helper()
	c := newClock()
	srv := s3test.NewWith(t, s3test.Options{Buckets: []string{"blobs"}, Now: c.Now})
	cfg := srv.Config("blobs")
	cfg.PartSize = presignPartSize
	cfg.MultipartThreshold = presignThreshold
	store, err := artifacts.NewS3Store(t.Context(), cfg)
	require.NoError(t, err)
	return &transfer{store: store, client: cfg.HTTPClient, clock: c, s3: srv}
}

func setupFileTransfer(t *testing.T) *transfer {
	t.Helper()
	fs, err := artifacts.NewFileStore(filepath.Join(t.TempDir(), "blobs"))
	require.NoError(t, err)
	mux := http.NewServeMux()
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	store, err := artifacts.NewSignedFileStore(fs, bytes.Repeat([]byte("k"), 32), hs.URL+"/v1/blobs")
	require.NoError(t, err)
	c := newClock()
	store.Now = c.Now
	mux.Handle("/v1/blobs/", store.Handler())
	return &transfer{store: store, client: hs.Client(), clock: c}
}

var transferSetups = []struct {
	name  string
	setup func(*testing.T) *transfer
}{
	{"s3", setupS3Transfer},
	{"file", setupFileTransfer},
}

// blob returns n random bytes and their SHA-256 in hex.
func blob(seed uint64, n int) ([]byte, string) {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)})
	_, _ = r.Read(b)
	return b, sha(b)
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// partSumsOf gives a test broker the part digests of data.
func partSumsOf(data []byte) func(artifacts.UploadRequest, []int64) []string {
	return func(_ artifacts.UploadRequest, sizes []int64) []string {
		var sums []string
		var off int64
		for _, n := range sizes {
			sums = append(sums, sha(data[off:off+n]))
			off += n
		}
		return sums
	}
}

// send sends a presigned request with body, and returns the status and
// the answer's body.
func send(t *testing.T, c *http.Client, r artifacts.Request, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), r.Method, r.URL, bytes.NewReader(body))
	require.NoError(t, err)
	for k, v := range r.Header {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestPresignedRoundTrip(t *testing.T) {
	t.Parallel()
	sizes := []struct {
		name string
		size int
	}{
		{"small", 1000},
		{"one byte under the threshold", presignThreshold - 1},
		{"multipart", 2*presignPartSize + 12345},
		{"multipart of exact parts", 2 * presignPartSize},
	}
	for _, ts := range transferSetups {
		for _, sz := range sizes {
			t.Run(ts.name+"/"+sz.name, func(t *testing.T) {
				t.Parallel()
				tr := ts.setup(t)
				data, sum := blob(uint64(sz.size), sz.size)
				b := newTestBroker(tr.store, partSumsOf(data))
				sender := &artifacts.Sender{HTTP: tr.client, Parallel: 2}
				art, err := sender.Upload(t.Context(), b, artifacts.UploadRequest{Name: "dist", Size: int64(len(data)), SHA256: sum}, bytes.NewReader(data))
				require.NoError(t, err)
				require.Equal(t, sum, art.SHA256)

				get, err := tr.store.PresignGet(t.Context(), art.BlobKey, time.Minute)
				require.NoError(t, err)
				var out bytes.Buffer
				require.NoError(t, sender.Download(t.Context(), get, int64(len(data)), sum, &out))
				require.True(t, bytes.Equal(data, out.Bytes()), "the downloaded blob is the uploaded one")
				require.NoError(t, tr.store.Verify(t.Context(), art.BlobKey, int64(len(data)), sum))
			})
		}
	}
}

func TestPresignedPutRefusesTampering(t *testing.T) {
	t.Parallel()
	good, goodSum := blob(1, 4000)
	other, _ := blob(2, 4000)
	short := good[:3999]
	cases := []struct {
		name string
		// tamper sends something else than good to the request that
		// stores it as key "a" (valid for a minute), and returns the
		// status it was answered with.
		tamper func(t *testing.T, tr *transfer, put artifacts.Request) (int, string)
		// s3 and file are the statuses wanted of each store.
		s3, file int
		want     string // in the answer
	}{
		{
			name: "other bytes",
			tamper: func(t *testing.T, tr *transfer, put artifacts.Request) (int, string) {
				return send(t, tr.client, put, other)
			},
			s3: 400, file: 400, want: "",
		},
		{
			name: "fewer bytes",
			tamper: func(t *testing.T, tr *transfer, put artifacts.Request) (int, string) {
				return send(t, tr.client, put, short)
			},
			s3: 400, file: 400,
		},
		{
			name: "expired",
			tamper: func(t *testing.T, tr *transfer, put artifacts.Request) (int, string) {
				tr.clock.Advance(2 * time.Minute)
				return send(t, tr.client, put, good)
			},
			s3: 403, file: 403, want: "xpired",
		},
		{
			name: "another key's request",
			tamper: func(t *testing.T, tr *transfer, _ artifacts.Request) (int, string) {
				b, sum := blob(3, 100)
				putB, err := tr.store.PresignPut(t.Context(), "b", int64(len(b)), sum, time.Minute)
				require.NoError(t, err)
				if tr.s3 == nil {
					// The file store's URL of "b", pointed at "a".
					putB.URL = strings.Replace(putB.URL, "/v1/blobs/b?", "/v1/blobs/a?", 1)
					return send(t, tr.client, putB, b)
				}
				// S3's request of "b" with the body of "a": its digest
				// is bound.
				return send(t, tr.client, putB, good)
			},
			s3: 400, file: 403,
		},
	}
	for _, ts := range transferSetups {
		for _, tc := range cases {
			t.Run(ts.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				tr := ts.setup(t)
				put, err := tr.store.PresignPut(t.Context(), "a", int64(len(good)), goodSum, time.Minute)
				require.NoError(t, err)
				status, answer := tc.tamper(t, tr, put)
				want := tc.file
				if tr.s3 != nil {
					want = tc.s3
				}
				require.Equal(t, want, status, "answer: %s", answer)
				require.Contains(t, answer, tc.want)
				_, err = tr.store.Stat(t.Context(), "a")
				require.ErrorIs(t, err, cikit.ErrNotFound, "nothing is stored")
				_, err = tr.store.Stat(t.Context(), "b")
				require.ErrorIs(t, err, cikit.ErrNotFound, "nothing is stored")
			})
		}
	}
}

func TestPresignedPutReplayed(t *testing.T) {
	t.Parallel()
	for _, ts := range transferSetups {
		t.Run(ts.name, func(t *testing.T) {
			t.Parallel()
			tr := ts.setup(t)
			data, sum := blob(1, 3000)
			other, _ := blob(2, 3000)
			put, err := tr.store.PresignPut(t.Context(), "a", int64(len(data)), sum, time.Minute)
			require.NoError(t, err)
			status, answer := send(t, tr.client, put, data)
			require.Equal(t, http.StatusOK, status, answer)

			status, answer = send(t, tr.client, put, other)
			if tr.s3 != nil {
				require.Equal(t, http.StatusBadRequest, status, answer)
				require.Contains(t, answer, "BadDigest")
				status, answer = send(t, tr.client, put, data)
				require.Equal(t, http.StatusPreconditionFailed, status, "even with the same bytes (If-None-Match): %s", answer)
			} else {
				require.Equal(t, http.StatusConflict, status, answer)
				require.Contains(t, answer, "immutable")
				status, answer = send(t, tr.client, put, data)
				require.Equal(t, http.StatusConflict, status, "even with the same bytes: %s", answer)
			}
			require.NoError(t, tr.store.Verify(t.Context(), "a", int64(len(data)), sum), "the blob is the first one")
		})
	}
}

func TestPresignedGet(t *testing.T) {
	t.Parallel()
	for _, ts := range transferSetups {
		t.Run(ts.name, func(t *testing.T) {
			t.Parallel()
			tr := ts.setup(t)
			data, sum := blob(1, 3000)
			require.NoError(t, tr.store.Put(t.Context(), "a", bytes.NewReader(data), int64(len(data))))
			get, err := tr.store.PresignGet(t.Context(), "a", time.Minute)
			require.NoError(t, err)
			sender := &artifacts.Sender{HTTP: tr.client}

			var out bytes.Buffer
			require.NoError(t, sender.Download(t.Context(), get, int64(len(data)), sum, &out))
			require.True(t, bytes.Equal(data, out.Bytes()))

			_, otherSum := blob(2, 3000)
			err = sender.Download(t.Context(), get, int64(len(data)), otherSum, io.Discard)
			require.ErrorIs(t, err, artifacts.ErrRefused)
			require.ErrorContains(t, err, "SHA-256 is "+sum)
			err = sender.Download(t.Context(), get, int64(len(data))+1, sum, io.Discard)
			require.ErrorIs(t, err, artifacts.ErrRefused)
			require.ErrorContains(t, err, "3000 bytes, expected 3001")

			missing, err := tr.store.PresignGet(t.Context(), "missing", time.Minute)
			require.NoError(t, err)
			err = sender.Download(t.Context(), missing, 1, sum, io.Discard)
			require.ErrorIs(t, err, cikit.ErrNotFound)

			tr.clock.Advance(2 * time.Minute)
			err = sender.Download(t.Context(), get, int64(len(data)), sum, io.Discard)
			require.ErrorIs(t, err, artifacts.ErrRefused)
			require.ErrorContains(t, err, "403")
		})
	}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	for _, ts := range transferSetups {
		t.Run(ts.name, func(t *testing.T) {
			t.Parallel()
			tr := ts.setup(t)
			data, sum := blob(1, 3000)
			put, err := tr.store.PresignPut(t.Context(), "a", int64(len(data)), sum, time.Minute)
			require.NoError(t, err)
			status, answer := send(t, tr.client, put, data)
			require.Equal(t, http.StatusOK, status, answer)

			require.NoError(t, tr.store.Verify(t.Context(), "a", int64(len(data)), sum))
			_, otherSum := blob(2, 3000)
			err = tr.store.Verify(t.Context(), "a", int64(len(data)), otherSum)
			require.ErrorIs(t, err, artifacts.ErrRefused)
			require.ErrorContains(t, err, "expected "+otherSum)
			err = tr.store.Verify(t.Context(), "a", 3001, sum)
			require.ErrorIs(t, err, artifacts.ErrRefused)
			require.ErrorContains(t, err, "3000 bytes long, expected 3001")
			err = tr.store.Verify(t.Context(), "missing", 1, sum)
			require.ErrorIs(t, err, cikit.ErrNotFound)
			err = tr.store.Verify(t.Context(), "a", int64(len(data)), "ABC")
			require.ErrorContains(t, err, "64 lowercase hex digits")
		})
	}
}

// TestS3VerifyWithoutChecksum: an object S3 took without a checksum (put
// through the SDK with other bytes than reserved) is read back.
func TestS3VerifyWithoutChecksum(t *testing.T) {
	t.Parallel()
	tr := setupS3Transfer(t)
	data, sum := blob(1, 3000)
	other, _ := blob(2, 3000)
	_, err := tr.store.PresignPut(t.Context(), "a", int64(len(data)), sum, time.Minute)
	require.NoError(t, err)
	_, err = tr.s3.Client().PutObject(t.Context(), &s3.PutObjectInput{
		Bucket: aws.String("blobs"), Key: aws.String("a"), Body: bytes.NewReader(other),
	})
	require.NoError(t, err)
	err = tr.store.Verify(t.Context(), "a", int64(len(data)), sum)
	require.ErrorIs(t, err, artifacts.ErrRefused)
	require.ErrorContains(t, err, "its SHA-256 is "+sha(other))

	// The same after a checksummed PUT of the right bytes, overwritten
	// without a checksum: the old checksum is forgotten.
	put, err := tr.store.PresignPut(t.Context(), "b", int64(len(data)), sum, time.Minute)
	require.NoError(t, err)
	status, answer := send(t, tr.client, put, data)
	require.Equal(t, http.StatusOK, status, answer)
	_, err = tr.s3.Client().PutObject(t.Context(), &s3.PutObjectInput{
		Bucket: aws.String("blobs"), Key: aws.String("b"), Body: bytes.NewReader(other),
	})
	require.NoError(t, err)
	require.ErrorIs(t, tr.store.Verify(t.Context(), "b", int64(len(data)), sum), artifacts.ErrRefused)
}

// TestS3MultipartPartTampered: a part's request binds its digest.
func TestS3MultipartPartTampered(t *testing.T) {
	t.Parallel()
	tr := setupS3Transfer(t)
	data, _ := blob(1, 2*presignPartSize)
	sizes := []int64{presignPartSize, presignPartSize}
	id, parts, err := tr.store.CreateMultipart(t.Context(), "a", sizes, partSumsOf(data)(artifacts.UploadRequest{}, sizes), time.Minute)
	require.NoError(t, err)
	require.Len(t, parts, 2)
	status, answer := send(t, tr.client, parts[0], data[presignPartSize:])
	require.Equal(t, http.StatusBadRequest, status, answer)
	require.Contains(t, answer, "BadDigest")
	require.NoError(t, tr.store.AbortMultipart(t.Context(), "a", id))
	require.NoError(t, tr.store.AbortMultipart(t.Context(), "a", id), "aborting twice")
}

func TestCreateMultipartRefusesBadParts(t *testing.T) {
	t.Parallel()
	tr := setupS3Transfer(t)
	_, sum := blob(1, 10)
	cases := []struct {
		name  string
		sizes []int64
		sums  []string
		want  string
	}{
		{"no parts", nil, nil, "0 parts"},
		{"a small part", []int64{10, 10}, []string{sum, sum}, "part 1 is 10 bytes long"},
		{"fewer digests", []int64{10}, nil, "1 part sizes but 0 digests"},
		{"bad digest", []int64{10}, []string{"x"}, "not 64 lowercase hex digits"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := tr.store.CreateMultipart(t.Context(), "a", tc.sizes, tc.sums, time.Minute)
			require.ErrorContains(t, err, tc.want)
		})
	}
	require.Empty(t, listUploads(t, tr.s3), "nothing was started")
}

// listUploads lists the unfinished multipart uploads of bucket "blobs".
func listUploads(t *testing.T, srv *s3test.Server) []types.MultipartUpload {
	t.Helper()
	out, err := srv.Client().ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: aws.String("blobs")})
	if apiErr, ok := errors.AsType[smithy.APIError](err); ok && apiErr.ErrorCode() == "NoSuchUpload" {
		// gofakes3's answer for a bucket that never had an upload.
		return nil
	}
	require.NoError(t, err)
	return out.Uploads
}

// failingReaderAt fails reads from offset failAt.
type failingReaderAt struct {
	r      io.ReaderAt
	failAt int64
}

func (f failingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > f.failAt {
		return 0, errors.New("the disk is gone")
	}
	return f.r.ReadAt(p, off)
}

func TestSenderAbortsInterruptedMultipart(t *testing.T) {
	t.Parallel()
	tr := setupS3Transfer(t)
	data, sum := blob(1, 2*presignPartSize+100)
	b := newTestBroker(tr.store, partSumsOf(data))
	sender := &artifacts.Sender{HTTP: tr.client, Parallel: 1}
	body := failingReaderAt{r: bytes.NewReader(data), failAt: 2 * presignPartSize}
	_, err := sender.Upload(t.Context(), b, artifacts.UploadRequest{Name: "dist", Size: int64(len(data)), SHA256: sum}, body)
	require.ErrorContains(t, err, "part 3 of 3")
	require.ErrorContains(t, err, "the disk is gone")
	require.Len(t, b.abortedUploads(), 1)

	require.Empty(t, listUploads(t, tr.s3), "the upload was aborted")
	objects, err := tr.s3.Client().ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String("blobs")})
	require.NoError(t, err)
	require.Empty(t, objects.Contents, "no object")
}

func TestSenderQuotesRefusal(t *testing.T) {
	t.Parallel()
	for _, ts := range transferSetups {
		t.Run(ts.name, func(t *testing.T) {
			t.Parallel()
			tr := ts.setup(t)
			data, _ := blob(1, 3000)
			_, otherSum := blob(2, 3000)
			b := newTestBroker(tr.store, partSumsOf(data))
			sender := &artifacts.Sender{HTTP: tr.client}
			_, err := sender.Upload(t.Context(), b, artifacts.UploadRequest{Name: "dist", Size: int64(len(data)), SHA256: otherSum}, bytes.NewReader(data))
			require.ErrorIs(t, err, artifacts.ErrRefused)
			require.ErrorContains(t, err, "part 1 of 1")
			require.ErrorContains(t, err, "400 Bad Request")
			if tr.s3 != nil {
				require.ErrorContains(t, err, "BadDigest")
			} else {
				require.ErrorContains(t, err, "expected the signed "+otherSum)
			}
			require.NotContains(t, err.Error(), "signature=", "no presigned URL in the error")
			require.NotContains(t, err.Error(), "X-Amz-Signature", "no presigned URL in the error")
			require.Len(t, b.abortedUploads(), 1)
		})
	}
}

func TestSenderCache(t *testing.T) {
	t.Parallel()
	for _, ts := range transferSetups {
		t.Run(ts.name, func(t *testing.T) {
			t.Parallel()
			tr := ts.setup(t)
			data, sum := blob(1, 3000)
			b := newTestBroker(tr.store, partSumsOf(data))
			sender := &artifacts.Sender{HTTP: tr.client}
			req := artifacts.UploadRequest{Name: "go-mod-1", Cache: true, Size: int64(len(data)), SHA256: sum}
			art, err := sender.Upload(t.Context(), b, req, bytes.NewReader(data))
			require.NoError(t, err)
			require.Equal(t, "cache/"+sum, art.BlobKey)

			_, err = sender.Upload(t.Context(), b, req, bytes.NewReader(data))
			require.ErrorIs(t, err, artifacts.ErrCacheExists)
			require.Empty(t, b.abortedUploads(), "nothing was reserved")

			// Another key of the same content: stored already, nothing
			// to send (a reader that fails proves it).
			req.Name = "go-mod-2"
			art, err = sender.Upload(t.Context(), b, req, failingReaderAt{failAt: 0})
			require.NoError(t, err)
			require.Equal(t, "cache/"+sum, art.BlobKey)
		})
	}
}

// countingTransport counts the requests in flight.
type countingTransport struct {
	base          http.RoundTripper
	mu            sync.Mutex
	inFlight, max int
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.inFlight++
	c.max = max(c.max, c.inFlight)
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.inFlight--
		c.mu.Unlock()
	}()
	return c.base.RoundTrip(r)
}

func TestSenderParallelBound(t *testing.T) {
	t.Parallel()
	tr := setupS3Transfer(t)
	data, sum := blob(1, 4*presignPartSize)
	b := newTestBroker(tr.store, partSumsOf(data))
	ct := &countingTransport{base: tr.client.Transport}
	sender := &artifacts.Sender{HTTP: &http.Client{Transport: ct}, Parallel: 2}
	_, err := sender.Upload(t.Context(), b, artifacts.UploadRequest{Name: "dist", Size: int64(len(data)), SHA256: sum}, bytes.NewReader(data))
	require.NoError(t, err)
	require.LessOrEqual(t, ct.max, 2, "at most Parallel parts at once")
}

func TestSignedFileStoreRefuses(t *testing.T) {
	t.Parallel()
	tr := setupFileTransfer(t)
	data, sum := blob(1, 3000)
	put, err := tr.store.PresignPut(t.Context(), "a", int64(len(data)), sum, time.Minute)
	require.NoError(t, err)
	get, err := tr.store.PresignGet(t.Context(), "a", time.Minute)
	require.NoError(t, err)
	base := put.URL[:strings.Index(put.URL, "/v1/blobs/")]

	withURL := func(r artifacts.Request, u string) artifacts.Request { r.URL = u; return r }
	cases := []struct {
		name   string
		req    artifacts.Request
		body   []byte
		status int
		want   string
	}{
		{"no signature", withURL(put, strings.Split(put.URL, "&signature=")[0]), data, 403, "no valid signature"},
		{"other signature", withURL(put, flipLast(put.URL)), data, 403, "signature does not match"},
		{"other size", withURL(put, strings.Replace(put.URL, "size=3000", "size=2999", 1)), data[:2999], 403, "signature does not match"},
		{"a GET's signature for a PUT", withURL(put, get.URL), data, 403, "no valid size"},
		{"a PUT's signature for a GET", withURL(get, put.URL), nil, 403, "signature does not match"},
		{"an invalid key", withURL(put, base+"/v1/blobs/a%5Cb"), data, 400, "backslash"},
		{"a DELETE", artifacts.Request{Method: http.MethodDelete, URL: put.URL}, nil, 405, "not allowed"},
		{"the GET of a missing blob", get, nil, 404, "no such blob"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, answer := send(t, tr.client, tc.req, tc.body)
			require.Equal(t, tc.status, status, answer)
			require.Contains(t, answer, tc.want)
		})
	}
	_, err = tr.store.Stat(t.Context(), "a")
	require.ErrorIs(t, err, cikit.ErrNotFound)
}

func TestSignedFileStoreWrongContentLength(t *testing.T) {
	t.Parallel()
	tr := setupFileTransfer(t)
	data, sum := blob(1, 3000)
	put, err := tr.store.PresignPut(t.Context(), "a", int64(len(data)), sum, time.Minute)
	require.NoError(t, err)
	for _, n := range []int{2999, 3001} {
		body := bytes.Repeat(data, 2)[:n]
		status, answer := send(t, tr.client, put, body)
		require.Equal(t, http.StatusBadRequest, status, answer)
		require.Contains(t, answer, fmt.Sprintf("Content-Length is %d, expected the signed size 3000", n))
	}
	_, err = tr.store.Stat(t.Context(), "a")
	require.ErrorIs(t, err, cikit.ErrNotFound)
}

// flipLast changes the last character of s, a hex digit.
func flipLast(s string) string {
	last := "0"
	if strings.HasSuffix(s, "0") {
		last = "1"
	}
	return s[:len(s)-1] + last
}

func TestNewSignedFileStore(t *testing.T) {
	t.Parallel()
	fs, err := artifacts.NewFileStore(t.TempDir())
	require.NoError(t, err)
	key := bytes.Repeat([]byte("k"), 32)
	cases := []struct {
		name  string
		store *artifacts.FileStore
		key   []byte
		base  string
		want  string
	}{
		{"no store", nil, key, "http://h/b", "must not be nil"},
		{"a short key", fs, key[:31], "http://h/b", "31 bytes long, expected at least 32"},
		{"a relative URL", fs, key, "/v1/blobs", "absolute http or https URL"},
		{"a query", fs, key, "http://h/b?x=1", "without query"},
		{"another scheme", fs, key, "ftp://h/b", "absolute http or https URL"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := artifacts.NewSignedFileStore(tc.store, tc.key, tc.base)
			require.ErrorContains(t, err, tc.want)
		})
	}
	s, err := artifacts.NewSignedFileStore(fs, key, "http://h/v1/blobs/")
	require.NoError(t, err)
	require.Zero(t, s.MultipartMin())
	_, _, err = s.CreateMultipart(t.Context(), "a", []int64{1}, []string{strings.Repeat("0", 64)}, time.Minute)
	require.ErrorIs(t, err, artifacts.ErrNoMultipart)
	put, err := s.PresignPut(t.Context(), "dir/a b", 1, strings.Repeat("0", 64), time.Minute)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(put.URL, "http://h/v1/blobs/dir/a%20b?"), put.URL)
}

func TestS3PresignPutBindsSizeAndChecksum(t *testing.T) {
	t.Parallel()
	tr := setupS3Transfer(t)
	data, sum := blob(1, 3000)
	put, err := tr.store.PresignPut(t.Context(), "a", int64(len(data)), sum, time.Minute)
	require.NoError(t, err)
	require.Equal(t, http.MethodPut, put.Method)
	require.Contains(t, put.URL, "X-Amz-SignedHeaders=content-length%3Bhost%3Bif-none-match%3Bx-amz-checksum-sha256")
	require.Equal(t, http.Header{"X-Amz-Checksum-Sha256": {base64.StdEncoding.EncodeToString(sum256(data))}, "If-None-Match": {"*"}}, put.Header)
	require.Equal(t, int64(3000), put.Size)
	require.Equal(t, sum, put.SHA256)

	_, err = tr.store.PresignPut(t.Context(), "a", 1, sum, 8*24*time.Hour)
	require.ErrorContains(t, err, "at most 168h0m0s")
	_, err = tr.store.PresignPut(t.Context(), "a", -1, sum, time.Minute)
	require.ErrorContains(t, err, "must not be negative")
	_, err = tr.store.PresignPut(t.Context(), "/a", 1, sum, time.Minute)
	require.ErrorIs(t, err, artifacts.ErrInvalidKey)
}

func sum256(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}

// TestS3CompleteMultipartOfAnotherStore: a store that did not create the
// upload (a restarted process) completes it, asking S3 for the parts.
func TestS3CompleteMultipartOfAnotherStore(t *testing.T) {
	t.Parallel()
	tr := setupS3Transfer(t)
	data, sum := blob(1, presignPartSize+10)
	sizes := []int64{presignPartSize, 10}
	id, parts, err := tr.store.CreateMultipart(t.Context(), "a", sizes, partSumsOf(data)(artifacts.UploadRequest{}, sizes), time.Minute)
	require.NoError(t, err)
	var etags []string
	var off int64
	for i, p := range parts {
		req, err := http.NewRequestWithContext(t.Context(), p.Method, p.URL, bytes.NewReader(data[off:off+sizes[i]]))
		require.NoError(t, err)
		for k, v := range p.Header {
			req.Header[k] = v
		}
		resp, err := tr.client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		etags = append(etags, resp.Header.Get("ETag"))
		off += sizes[i]
	}
	other := newS3Store(t, tr.s3, "")
	require.ErrorIs(t, other.CompleteMultipart(t.Context(), "a", id, etags[:1]), artifacts.ErrRefused, "fewer ETags than parts")
	require.NoError(t, other.CompleteMultipart(t.Context(), "a", id, etags))
	require.NoError(t, other.Verify(t.Context(), "a", int64(len(data)), sum), "a composite or no checksum: read back")
	require.Empty(t, listUploads(t, tr.s3))
}

func TestSenderNamesRefusedPart(t *testing.T) {
	t.Parallel()
	tr := setupS3Transfer(t)
	data, sum := blob(1, 2*presignPartSize+100)
	reserved := bytes.Clone(data)
	reserved[presignPartSize] ^= 1 // the broker reserved another second part
	b := newTestBroker(tr.store, partSumsOf(reserved))
	sender := &artifacts.Sender{HTTP: tr.client, Parallel: 1}
	_, err := sender.Upload(t.Context(), b, artifacts.UploadRequest{Name: "dist", Size: int64(len(data)), SHA256: sum}, bytes.NewReader(data))
	require.ErrorIs(t, err, artifacts.ErrRefused)
	require.ErrorContains(t, err, fmt.Sprintf("part 2 of 3 (%d bytes from offset %d)", presignPartSize, presignPartSize))
	require.ErrorContains(t, err, "BadDigest")
	require.Len(t, b.abortedUploads(), 1)
	require.Empty(t, listUploads(t, tr.s3), "the upload was aborted")
}
