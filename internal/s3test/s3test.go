package s3test

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/cikit/cikit/artifacts"
)

// Credentials and region of every server: gofakes3 checks no signature,
// but the SDK signs every request.
const (
	AccessKeyID     = "cikit-test"
	SecretAccessKey = "cikit-test-secret"
	Region          = "us-east-1"
)

// Server is one test's S3 server.
type Server struct {
	// URL is the server's base URL, for S3Config.Endpoint.
	URL string

	srv *httptest.Server
}

// Options configure a server of NewWith.
type Options struct {
	// Buckets are the empty buckets the server starts with.
	Buckets []string
	// Now is the server's clock, by which presigned requests expire;
	// nil is time.Now.
	Now func() time.Time
}

// New starts a server holding the given empty buckets. It is closed when
// t ends.
func New(t testing.TB, buckets ...string) *Server {
	t.Helper()
	return NewWith(t, Options{Buckets: buckets})
}

// NewWith starts a server configured by opts. It is closed when t ends.
func NewWith(t testing.TB, opts Options) *Server {
	t.Helper()
	backend := s3mem.New()
	for _, b := range opts.Buckets {
		if err := backend.CreateBucket(b); err != nil {
			t.Fatalf("s3test: create bucket %s: %v", b, err)
		}
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	handler := &checks{
		next: gofakes3.New(backend).Server(),
		now:  now,
		sums: make(map[string]objectSum),
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return &Server{URL: srv.URL, srv: srv}
}

// Config returns the configuration of a store of bucket on the server,
// with static credentials and an HTTP client closed with the server.
func (s *Server) Config(bucket string) artifacts.S3Config {
	return artifacts.S3Config{
		Bucket:          bucket,
		Region:          Region,
		Endpoint:        s.URL,
		AccessKeyID:     AccessKeyID,
		SecretAccessKey: SecretAccessKey,
		HTTPClient:      s.srv.Client(),
	}
}

// Client returns an SDK client of the server.
func (s *Server) Client() *s3.Client {
	return s3.New(s3.Options{
		Region:       Region,
		BaseEndpoint: aws.String(s.URL),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, ""),
		HTTPClient:   s.srv.Client(),
	})
}
