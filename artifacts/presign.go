package artifacts

import (
	"context"
	"errors"
	"time"
)

// Presigner hands out presigned requests for a blob store's blobs: the
// runner sends them to the store itself, so that archives never pass
// through the platform's API. S3Store presigns with S3's own signatures
// (aws-sdk-go-v2's presign client); a SignedFileStore signs requests to
// a FileStore that its handler serves.
//
// Every upload request binds the body's size and SHA-256: a store that
// checks them (S3 with x-amz-checksum-sha256, a SignedFileStore)
// refuses another body. Verify checks what arrived in any case, before
// anything is recorded.
type Presigner interface {
	BlobStore
	// PresignPut returns a request that stores size bytes of digest
	// sha256 (lowercase hex) as blob key, valid for ttl.
	PresignPut(ctx context.Context, key string, size int64, sha256 string, ttl time.Duration) (Request, error)
	// PresignGet returns a request that reads blob key, valid for ttl.
	PresignGet(ctx context.Context, key string, ttl time.Duration) (Request, error)
	// CreateMultipart starts a multipart upload of blob key and returns
	// its ID and the requests of its parts: parts[i] stores sizes[i]
	// bytes of digest sums[i]. A store without multipart uploads returns
	// an error matching ErrNoMultipart.
	CreateMultipart(ctx context.Context, key string, sizes []int64, sums []string, ttl time.Duration) (uploadID string, parts []Request, err error)
	// CompleteMultipart joins the parts of upload uploadID, given the
	// ETags their requests were answered with, into blob key.
	CompleteMultipart(ctx context.Context, key, uploadID string, etags []string) error
	// AbortMultipart ends upload uploadID and deletes its parts. An
	// unknown upload is no error.
	AbortMultipart(ctx context.Context, key, uploadID string) error
	// Verify checks that blob key holds size bytes of digest sha256,
	// with an error matching ErrRefused and saying what differs
	// otherwise, and cikit.ErrNotFound when there is no such blob.
	Verify(ctx context.Context, key string, size int64, sha256 string) error
	// MultipartMin is the size from which uploads go in parts, and
	// PartSize the size of a part; zero MultipartMin: never.
	MultipartMin() int64
	PartSize() int64
}

// ErrNoMultipart: the store does not upload in parts.
var ErrNoMultipart = errors.New("the blob store has no multipart uploads")
