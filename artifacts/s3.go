package artifacts

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/cikit/cikit"
)

// Defaults of S3Config.
const (
	// DefaultPartSize is the size of the parts of a multipart upload.
	DefaultPartSize = 8 << 20
	// DefaultMultipartThreshold is the size from which a blob is uploaded
	// in parts rather than with one request.
	DefaultMultipartThreshold = 16 << 20
	// DefaultRegion is the region of an S3Config with an Endpoint but
	// neither a Region nor one in the environment: S3-compatible servers
	// usually accept any.
	DefaultRegion = "us-east-1"
)

// abortTimeout bounds the request that aborts a failed multipart upload,
// which runs on a context of its own: the upload may have failed because
// its context was cancelled.
const abortTimeout = 30 * time.Second

// S3Config configures an S3Store. Only Bucket is required; the zero value
// of every other field is a sensible default.
type S3Config struct {
	// Bucket holds the blobs. It must exist.
	Bucket string
	// Prefix, when set, is put with a slash before every key, so that a
	// store can share its bucket: with Prefix "ci/logs" the key
	// "run-1/build/1/0.log" is the object "ci/logs/run-1/build/1/0.log".
	// It must be a valid key itself (see ValidateKey): no leading or
	// trailing slash.
	Prefix string
	// Region of the bucket. Empty takes it from the environment (AWS_REGION,
	// the shared config file), and, with an Endpoint, DefaultRegion
	// failing that.
	Region string
	// Endpoint is the base URL of an S3-compatible server or a local one,
	// such as "http://127.0.0.1:9000". Objects are then addressed by path
	// (http://host/bucket/key) rather than by virtual host. Empty is AWS.
	Endpoint string
	// AccessKeyID and SecretAccessKey are static credentials, both or
	// neither. Empty takes credentials from the SDK's default chain
	// (environment, shared files, web identity, container and instance
	// roles).
	AccessKeyID     string
	SecretAccessKey string
	// PartSize is the size of the parts of a multipart upload (default
	// DefaultPartSize). A multipart upload holds up to six parts in
	// memory, five of them being sent, besides the MultipartThreshold
	// bytes it reads first. AWS refuses parts under 5 MiB but the last;
	// blobs larger than 10,000 parts get larger parts.
	PartSize int64
	// MultipartThreshold is the size from which a blob is uploaded in
	// parts (default DefaultMultipartThreshold). A smaller blob is sent in
	// one request, which holds it in memory first: request signing and
	// retries need to read it again. S3 takes at most 5 GiB in one
	// request.
	MultipartThreshold int64
	// HTTPClient sends the requests to S3 (not those of credential
	// providers); nil is the SDK's default client.
	HTTPClient *http.Client
}

// S3Store is a BlobStore in an Amazon S3 bucket or an S3-compatible one,
// through the AWS SDK for Go v2: the blob key is the object Prefix/key.
//
// Put sends a blob in one request, or from MultipartThreshold bytes as a
// multipart upload of parts sent in parallel; either way the object
// appears whole when the upload completes, and a failed multipart upload
// is aborted. S3 gives read-after-write consistency, so a Get after a
// successful Put returns the new blob.
//
// Get maps a missing object to cikit.ErrNotFound. Stat, which asks with
// HEAD, cannot tell a missing object from a missing bucket: both are
// cikit.ErrNotFound. S3 answers a missing object with 404 only to
// credentials allowed s3:ListBucket on the bucket, and with 403 (an error
// that is not cikit.ErrNotFound) to others. Delete needs s3:DeleteObject,
// Put s3:PutObject and, for failed multipart uploads, s3:AbortMultipartUpload.
type S3Store struct {
	client    *s3.Client
	presign   *s3.PresignClient
	transfer  *transfermanager.Client
	bucket    string
	prefix    string
	partSize  int64
	threshold int64

	// partSums holds the part digests of the multipart uploads that
	// CreateMultipart started, for CompleteMultipart (see there).
	partSums sync.Map // upload ID → []string
}

var _ BlobStore = (*S3Store)(nil)

// NewS3Store returns a store of the blobs in cfg.Bucket. It loads the
// default AWS configuration (with ctx) but sends no request: a missing
// bucket or wrong credentials show in the first call.
func NewS3Store(ctx context.Context, cfg S3Config) (*S3Store, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("S3Config.Bucket must not be empty")
	}
	if cfg.Prefix != "" {
		if err := ValidateKey(cfg.Prefix); err != nil {
			return nil, fmt.Errorf("S3Config.Prefix: %w", err)
		}
	}
	if (cfg.AccessKeyID == "") != (cfg.SecretAccessKey == "") {
		return nil, errors.New("S3Config.AccessKeyID and SecretAccessKey must be set together")
	}
	if cfg.PartSize < 0 || cfg.MultipartThreshold < 0 {
		return nil, fmt.Errorf("S3Config.PartSize (%d) and MultipartThreshold (%d) must not be negative", cfg.PartSize, cfg.MultipartThreshold)
	}

	var opts []func(*config.LoadOptions) error
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.AccessKeyID != "" {
		opts = append(opts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, "")))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		if cfg.Endpoint == "" {
			return nil, errors.New("S3Config.Region is empty and the environment names no region (AWS_REGION)")
		}
		awsCfg.Region = DefaultRegion
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		// Set here rather than in the AWS configuration, which would also
		// give it to credential providers and refuse it when the
		// environment names a CA bundle (AWS_CA_BUNDLE).
		if cfg.HTTPClient != nil {
			o.HTTPClient = cfg.HTTPClient
		}
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
			o.UsePathStyle = true
		}
		// The SDK logs to stderr, past the caller's logger, each object
		// read without a checksum to validate; the digest of what is read
		// is checked here anyway (Verify, Sender.Download).
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	transfer := transfermanager.New(client, func(o *transfermanager.Options) {
		o.PartSizeBytes = cmp.Or(cfg.PartSize, DefaultPartSize)
		o.MultipartUploadThreshold = cmp.Or(cfg.MultipartThreshold, DefaultMultipartThreshold)
		o.FailTimeout = abortTimeout
	})
	return &S3Store{
		client:    client,
		presign:   s3.NewPresignClient(client),
		transfer:  transfer,
		bucket:    cfg.Bucket,
		prefix:    cfg.Prefix,
		partSize:  cmp.Or(cfg.PartSize, DefaultPartSize),
		threshold: cmp.Or(cfg.MultipartThreshold, DefaultMultipartThreshold),
	}, nil
}

// object returns the object key of a blob key.
func (s *S3Store) object(key string) (string, error) {
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	if s.prefix == "" {
		return key, nil
	}
	obj := s.prefix + "/" + key
	if len(obj) > MaxKeyLen {
		return "", fmt.Errorf("%w %q: with the prefix it is %d bytes long, more than %d", ErrInvalidKey, key, len(obj), MaxKeyLen)
	}
	return obj, nil
}

// Put implements BlobStore.
func (s *S3Store) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	obj, err := s.object(key)
	if err != nil {
		return err
	}
	if err := checkSize(size); err != nil {
		return err
	}
	_, err = s.transfer.UploadObject(ctx, &transfermanager.UploadObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(obj),
		Body:          newSizedReader(ctx, r, size),
		ContentLength: aws.Int64(size),
	})
	if err != nil {
		return s.interpretError("put", key, err)
	}
	return nil
}

// Get implements BlobStore.
func (s *S3Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	obj, err := s.object(key)
	if err != nil {
		return nil, err
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(obj)})
	if err != nil {
		return nil, s.interpretError("get", key, err)
	}
	return out.Body, nil
}

// Stat implements BlobStore.
func (s *S3Store) Stat(ctx context.Context, key string) (BlobInfo, error) {
	obj, err := s.object(key)
	if err != nil {
		return BlobInfo{}, err
	}
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(obj)})
	if err != nil {
		return BlobInfo{}, s.interpretError("stat", key, err)
	}
	return BlobInfo{Size: aws.ToInt64(out.ContentLength), ModTime: aws.ToTime(out.LastModified)}, nil
}

// Delete implements BlobStore.
func (s *S3Store) Delete(ctx context.Context, key string) error {
	obj, err := s.object(key)
	if err != nil {
		return err
	}
	_, err = s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(obj)})
	if err != nil {
		return s.interpretError("delete", key, err)
	}
	return nil
}

// interpretError converts an error of the SDK about key into the
// sentinels of BlobStore.
func (s *S3Store) interpretError(op, key string, err error) error {
	if notFound(err) {
		return fmt.Errorf("%s %s: %w", op, key, cikit.ErrNotFound)
	}
	return fmt.Errorf("%s %s in bucket %s: %w", op, key, s.bucket, err)
}

// notFound reports whether err says the object does not exist: S3's
// NoSuchKey, the bodiless 404 of HEAD, or a 404 of an S3-compatible
// server with a code of its own, but not a missing bucket.
func notFound(err error) bool {
	var noKey *types.NoSuchKey
	var notFound *types.NotFound
	if errors.As(err, &noKey) || errors.As(err, &notFound) {
		return true
	}
	if apiErr, ok := errors.AsType[smithy.APIError](err); ok && apiErr.ErrorCode() == "NoSuchBucket" {
		return false
	}
	respErr, ok := errors.AsType[*awshttp.ResponseError](err)
	return ok && respErr.HTTPStatusCode() == http.StatusNotFound
}
