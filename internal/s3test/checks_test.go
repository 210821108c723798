package s3test_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/internal/s3test"
)

type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type bundle struct {
	srv     *s3test.Server
	client  *s3.Client
	presign *s3.PresignClient
	http    *http.Client
	clock   *testClock
}

func setup(t *testing.T) *bundle {
	t.Helper()
	c := &testClock{t: time.Now()}
	srv := s3test.NewWith(t, s3test.Options{Buckets: []string{"b"}, Now: c.Now})
	client := srv.Client()
	return &bundle{srv: srv, client: client, presign: s3.NewPresignClient(client), http: srv.Config("b").HTTPClient, clock: c}
}

func checksum(b []byte) string {
	s := sha256.Sum256(b)
	return base64.StdEncoding.EncodeToString(s[:])
}

// do sends a presigned request with body and returns its status and
// answer.
func (b *bundle) do(t *testing.T, req *v4.PresignedHTTPRequest, body []byte) (int, string) {
	t.Helper()
	r, err := http.NewRequestWithContext(t.Context(), req.Method, req.URL, bytes.NewReader(body))
	require.NoError(t, err)
	for k, v := range req.SignedHeader {
		if k != "Host" && k != "Content-Length" {
			r.Header[k] = v
		}
	}
	resp, err := b.http.Do(r)
	require.NoError(t, err)
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(answer)
}

func (b *bundle) presignPut(t *testing.T, key string, body []byte, sum string) *v4.PresignedHTTPRequest {
	t.Helper()
	req, err := b.presign.PresignPutObject(t.Context(), &s3.PutObjectInput{
		Bucket: aws.String("b"), Key: aws.String(key),
		ContentLength: aws.Int64(int64(len(body))), ChecksumSHA256: aws.String(sum),
	}, s3.WithPresignExpires(time.Minute))
	require.NoError(t, err)
	return req
}

// headSum returns the object's checksum as HEAD and GET with the checksum
// mode tell it, or "" without one; found is false for a missing object.
func (b *bundle) headSum(t *testing.T, key string) (sum string, found bool) {
	t.Helper()
	out, err := b.client.HeadObject(t.Context(), &s3.HeadObjectInput{
		Bucket: aws.String("b"), Key: aws.String(key), ChecksumMode: types.ChecksumModeEnabled,
	})
	if err != nil {
		_, notFound := errors.AsType[*types.NotFound](err)
		require.True(t, notFound, "HEAD: %v", err)
		return "", false
	}
	plain, err := b.client.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String("b"), Key: aws.String(key)})
	require.NoError(t, err)
	require.Empty(t, aws.ToString(plain.ChecksumSHA256), "no checksum without the checksum mode")
	return aws.ToString(out.ChecksumSHA256), true
}

func TestChecksumOfPut(t *testing.T) {
	t.Parallel()
	body, other := []byte("the body"), []byte("another!")
	cases := []struct {
		name      string
		sum       string
		send      []byte
		status    int
		want      string
		storedSum string // "" for no object
	}{
		{"matching", checksum(body), body, 200, "", checksum(body)},
		{"other bytes", checksum(body), other, 400, "<Code>BadDigest</Code>", ""},
		{"not base64", "!!", body, 400, "<Code>InvalidRequest</Code>", ""},
		{"too short", base64.StdEncoding.EncodeToString([]byte("x")), body, 400, "<Code>InvalidRequest</Code>", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			status, answer := b.do(t, b.presignPut(t, "k", body, tc.sum), tc.send)
			require.Equal(t, tc.status, status, answer)
			require.Contains(t, answer, tc.want)
			sum, found := b.headSum(t, "k")
			require.Equal(t, tc.storedSum != "", found, "an object is stored")
			require.Equal(t, tc.storedSum, sum)
		})
	}
}

func TestChecksumForgotten(t *testing.T) {
	t.Parallel()
	body := []byte("the body")
	cases := []struct {
		name  string
		after func(t *testing.T, b *bundle)
	}{
		{"overwritten without a checksum", func(t *testing.T, b *bundle) {
			_, err := b.client.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("b"), Key: aws.String("k"), Body: bytes.NewReader([]byte("other"))})
			require.NoError(t, err)
		}},
		{"deleted and put again", func(t *testing.T, b *bundle) {
			_, err := b.client.DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String("b"), Key: aws.String("k")})
			require.NoError(t, err)
			_, found := b.headSum(t, "k")
			require.False(t, found)
			_, err = b.client.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("b"), Key: aws.String("k"), Body: bytes.NewReader(body)})
			require.NoError(t, err)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			status, answer := b.do(t, b.presignPut(t, "k", body, checksum(body)), body)
			require.Equal(t, 200, status, answer)
			tc.after(t, b)
			sum, found := b.headSum(t, "k")
			require.True(t, found)
			require.Empty(t, sum, "the checksum is forgotten")
		})
	}
}

func TestChecksumOfUploadPart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	up, err := b.client.CreateMultipartUpload(t.Context(), &s3.CreateMultipartUploadInput{
		Bucket: aws.String("b"), Key: aws.String("k"), ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
	})
	require.NoError(t, err)
	part := []byte("a part")
	req, err := b.presign.PresignUploadPart(t.Context(), &s3.UploadPartInput{
		Bucket: aws.String("b"), Key: aws.String("k"), UploadId: up.UploadId, PartNumber: aws.Int32(1),
		ContentLength: aws.Int64(int64(len(part))), ChecksumSHA256: aws.String(checksum(part)),
	}, s3.WithPresignExpires(time.Minute))
	require.NoError(t, err)

	status, answer := b.do(t, req, []byte("b part"))
	require.Equal(t, 400, status, answer)
	require.Contains(t, answer, "BadDigest")
	parts, err := b.client.ListParts(t.Context(), &s3.ListPartsInput{Bucket: aws.String("b"), Key: aws.String("k"), UploadId: up.UploadId})
	require.NoError(t, err)
	require.Empty(t, parts.Parts, "the part was not stored")

	status, answer = b.do(t, req, part)
	require.Equal(t, 200, status, answer)
}

func TestPresignedExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := []byte("the body")
	put := b.presignPut(t, "k", body, checksum(body))
	b.clock.Advance(59 * time.Second)
	status, answer := b.do(t, put, body)
	require.Equal(t, 200, status, "still valid: %s", answer)

	get, err := b.presign.PresignGetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String("k")}, s3.WithPresignExpires(time.Minute))
	require.NoError(t, err)
	b.clock.Advance(2 * time.Minute)
	for _, req := range []*v4.PresignedHTTPRequest{put, get} {
		status, answer = b.do(t, req, body)
		require.Equal(t, 403, status, answer)
		require.Contains(t, answer, "<Code>AccessDenied</Code>")
		require.Contains(t, answer, "Request has expired")
	}
	_, err = b.client.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String("b"), Key: aws.String("k")})
	require.NoError(t, err, "requests signed in headers do not expire")
}
