package artifacts_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/cikit/cikit/artifacts"
	"github.com/cikit/cikit/internal/s3test"
)

// benchSize is the archive of the transfer benchmarks.
const benchSize = 32 << 20

// benchS3 is one in-process S3 server for both sides of a comparison,
// with a store that sends the benchmark's archive in one request.
func benchS3(b *testing.B) (*s3test.Server, *artifacts.S3Store, *http.Client) {
	b.Helper()
	srv := s3test.New(b, "blobs")
	cfg := srv.Config("blobs")
	cfg.MultipartThreshold = 2 * benchSize
	store, err := artifacts.NewS3Store(b.Context(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	return srv, store, cfg.HTTPClient
}

func BenchmarkUpload(b *testing.B) {
	data, sum := blob(1, benchSize)
	srv, store, client := benchS3(b)
	sender := &artifacts.Sender{HTTP: client}

	b.Run("presigned", func(b *testing.B) {
		b.SetBytes(benchSize)
		b.ReportAllocs()
		for b.Loop() {
			put, err := store.PresignPut(b.Context(), "p", benchSize, sum, time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			up := &artifacts.Upload{ID: "bench", Parts: []artifacts.Request{put}}
			if _, err := sender.Upload(b.Context(), fixedBroker{up}, artifacts.UploadRequest{Name: "a", Size: benchSize, SHA256: sum}, bytes.NewReader(data)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sdk-put", func(b *testing.B) {
		b.SetBytes(benchSize)
		b.ReportAllocs()
		for b.Loop() {
			_, err := srv.Client().PutObject(b.Context(), &s3.PutObjectInput{
				Bucket: aws.String("blobs"), Key: aws.String("s"),
				Body: bytes.NewReader(data), ContentLength: aws.Int64(benchSize),
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkDownload(b *testing.B) {
	data, sum := blob(1, benchSize)
	srv, store, client := benchS3(b)
	if err := store.Put(b.Context(), "a", bytes.NewReader(data), benchSize); err != nil {
		b.Fatal(err)
	}
	sender := &artifacts.Sender{HTTP: client}

	b.Run("presigned", func(b *testing.B) {
		b.SetBytes(benchSize)
		b.ReportAllocs()
		for b.Loop() {
			get, err := store.PresignGet(b.Context(), "a", time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			if err := sender.Download(b.Context(), get, benchSize, sum, io.Discard); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The same request without the Sender's check: what the SHA-256 of
	// the check costs.
	b.Run("presigned-unchecked", func(b *testing.B) {
		b.SetBytes(benchSize)
		b.ReportAllocs()
		for b.Loop() {
			get, err := store.PresignGet(b.Context(), "a", time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			req, err := http.NewRequestWithContext(b.Context(), get.Method, get.URL, nil)
			if err != nil {
				b.Fatal(err)
			}
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	// SHA-256 of the archive in memory, on one goroutine: a bound on any
	// checked download, since one digest of a stream is computed in order.
	b.Run("sha256-only", func(b *testing.B) {
		b.SetBytes(benchSize)
		b.ReportAllocs()
		for b.Loop() {
			if got := sha256.Sum256(data); hex.EncodeToString(got[:]) != sum {
				b.Fatal("the archive's digest changed")
			}
		}
	})
	b.Run("sdk-get", func(b *testing.B) {
		b.SetBytes(benchSize)
		b.ReportAllocs()
		for b.Loop() {
			out, err := srv.Client().GetObject(b.Context(), &s3.GetObjectInput{Bucket: aws.String("blobs"), Key: aws.String("a")})
			if err != nil {
				b.Fatal(err)
			}
			_, err = io.Copy(io.Discard, out.Body)
			out.Body.Close()
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSignedFileStore is the SignedFileStore's path: presigned PUT
// (hashed and synced to disk) and GET (hashed by the Sender) over
// loopback HTTP.
func BenchmarkSignedFileStore(b *testing.B) {
	data, sum := blob(1, benchSize)
	fs, err := artifacts.NewFileStore(filepath.Join(b.TempDir(), "blobs"))
	if err != nil {
		b.Fatal(err)
	}
	mux := http.NewServeMux()
	hs := httptest.NewServer(mux)
	b.Cleanup(hs.Close)
	store, err := artifacts.NewSignedFileStore(fs, bytes.Repeat([]byte("k"), 32), hs.URL+"/blobs")
	if err != nil {
		b.Fatal(err)
	}
	mux.Handle("/blobs/", store.Handler())
	sender := &artifacts.Sender{HTTP: hs.Client()}

	b.Run("upload", func(b *testing.B) {
		b.SetBytes(benchSize)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			put, err := store.PresignPut(b.Context(), fmt.Sprintf("u/%d", i), benchSize, sum, time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			up := &artifacts.Upload{ID: "bench", Parts: []artifacts.Request{put}}
			if _, err := sender.Upload(b.Context(), fixedBroker{up}, artifacts.UploadRequest{Name: "a", Size: benchSize, SHA256: sum}, bytes.NewReader(data)); err != nil {
				b.Fatal(err)
			}
			if err := fs.Delete(b.Context(), fmt.Sprintf("u/%d", i)); err != nil {
				b.Fatal(err)
			}
		}
	})
	if err := fs.Put(b.Context(), "a", bytes.NewReader(data), benchSize); err != nil {
		b.Fatal(err)
	}
	b.Run("download", func(b *testing.B) {
		b.SetBytes(benchSize)
		b.ReportAllocs()
		for b.Loop() {
			get, err := store.PresignGet(b.Context(), "a", time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			if err := sender.Download(b.Context(), get, benchSize, sum, io.Discard); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// fixedBroker hands out one upload and records nothing: the benchmarks
// measure the transfer, not a broker.
type fixedBroker struct{ up *artifacts.Upload }

func (f fixedBroker) CreateUpload(_ context.Context, _ artifacts.UploadRequest) (*artifacts.Upload, error) {
	return f.up, nil
}

func (f fixedBroker) CompleteUpload(context.Context, artifacts.CompleteRequest) (*artifacts.Artifact, error) {
	return &artifacts.Artifact{}, nil
}

func (f fixedBroker) AbortUpload(context.Context, string) error { return nil }

func (f fixedBroker) ListArtifacts(context.Context, artifacts.ListRequest) ([]artifacts.Artifact, error) {
	return nil, nil
}

func (f fixedBroker) LookupCache(context.Context, artifacts.CacheQuery) (*artifacts.CacheHit, error) {
	return nil, nil
}
