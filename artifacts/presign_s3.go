package artifacts

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// MinPartSize is the smallest part S3 takes in a multipart upload, but
// for the last part.
const MinPartSize = 5 << 20

// MaxParts is the most parts S3 takes in one multipart upload.
const MaxParts = 10000

// maxPresignTTL is the longest validity of an S3 presigned request
// (SigV4's limit).
const maxPresignTTL = 7 * 24 * time.Hour

var _ Presigner = (*S3Store)(nil)

// MultipartMin implements Presigner: S3Config.MultipartThreshold.
func (s *S3Store) MultipartMin() int64 { return s.threshold }

// PartSize implements Presigner: S3Config.PartSize, and at least
// MinPartSize, which AWS requires of every part but the last.
func (s *S3Store) PartSize() int64 { return max(s.partSize, MinPartSize) }

// PresignPut implements Presigner. The request's signature covers its
// Content-Length and its x-amz-checksum-sha256 header, which S3 checks
// against the body: another body is refused with 400 BadDigest. It also
// covers If-None-Match: *, S3's conditional write: a key that holds an
// object is refused with 412, so that a request sent again never
// replaces a blob, as a SignedFileStore's never does.
func (s *S3Store) PresignPut(ctx context.Context, key string, size int64, sha string, ttl time.Duration) (Request, error) {
	obj, err := s.object(key)
	if err != nil {
		return Request{}, err
	}
	sum, err := checksumOf(size, sha)
	if err != nil {
		return Request{}, fmt.Errorf("presign put %s: %w", key, err)
	}
	if err := checkTTL(ttl); err != nil {
		return Request{}, fmt.Errorf("presign put %s: %w", key, err)
	}
	req, err := s.presign.PresignPutObject(ctx, &s3.PutObjectInput{
		Bucket:         aws.String(s.bucket),
		Key:            aws.String(obj),
		ContentLength:  aws.Int64(size),
		ChecksumSHA256: aws.String(sum),
		IfNoneMatch:    aws.String("*"),
	}, s3.WithPresignExpires(ttl))
	if err != nil {
		return Request{}, s.interpretError("presign put", key, err)
	}
	return presigned(req, size, sha), nil
}

// PresignGet implements Presigner.
func (s *S3Store) PresignGet(ctx context.Context, key string, ttl time.Duration) (Request, error) {
	obj, err := s.object(key)
	if err != nil {
		return Request{}, err
	}
	if err := checkTTL(ttl); err != nil {
		return Request{}, fmt.Errorf("presign get %s: %w", key, err)
	}
	req, err := s.presign.PresignGetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(obj),
	}, s3.WithPresignExpires(ttl))
	if err != nil {
		return Request{}, s.interpretError("presign get", key, err)
	}
	return presigned(req, 0, ""), nil
}

// CreateMultipart implements Presigner. The upload is created with
// ChecksumAlgorithm SHA256, and the signature of each part's request
// covers its Content-Length and x-amz-checksum-sha256 header. Every part
// but the last must be at least MinPartSize bytes.
//
// The part digests are kept in memory for CompleteMultipart, which
// otherwise asks S3 for them (ListParts) when the upload was created by
// another S3Store, such as one of a process that restarted.
func (s *S3Store) CreateMultipart(ctx context.Context, key string, sizes []int64, sums []string, ttl time.Duration) (string, []Request, error) {
	obj, err := s.object(key)
	if err != nil {
		return "", nil, err
	}
	if err := checkParts(sizes, sums); err != nil {
		return "", nil, fmt.Errorf("create multipart %s: %w", key, err)
	}
	b64 := make([]string, len(sums))
	for i := range sums {
		if b64[i], err = checksumOf(sizes[i], sums[i]); err != nil {
			return "", nil, fmt.Errorf("create multipart %s: part %d: %w", key, i+1, err)
		}
	}
	if err := checkTTL(ttl); err != nil {
		return "", nil, fmt.Errorf("create multipart %s: %w", key, err)
	}
	out, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket:            aws.String(s.bucket),
		Key:               aws.String(obj),
		ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
	})
	if err != nil {
		return "", nil, s.interpretError("create multipart", key, err)
	}
	id := aws.ToString(out.UploadId)
	parts := make([]Request, len(sizes))
	for i := range sizes {
		req, err := s.presign.PresignUploadPart(ctx, &s3.UploadPartInput{
			Bucket:         aws.String(s.bucket),
			Key:            aws.String(obj),
			UploadId:       aws.String(id),
			PartNumber:     aws.Int32(int32(i + 1)),
			ContentLength:  aws.Int64(sizes[i]),
			ChecksumSHA256: aws.String(b64[i]),
		}, s3.WithPresignExpires(ttl))
		if err != nil {
			err = s.interpretError("presign part of", key, err)
			if aerr := s.AbortMultipart(context.WithoutCancel(ctx), key, id); aerr != nil {
				err = errors.Join(err, aerr)
			}
			return "", nil, err
		}
		parts[i] = presigned(req, sizes[i], sums[i])
	}
	s.partSums.Store(id, b64)
	return id, parts, nil
}

// CompleteMultipart implements Presigner.
func (s *S3Store) CompleteMultipart(ctx context.Context, key, uploadID string, etags []string) error {
	obj, err := s.object(key)
	if err != nil {
		return err
	}
	if len(etags) == 0 || len(etags) > MaxParts {
		return fmt.Errorf("complete multipart %s: %w: %d ETags, expected 1 to %d", key, ErrRefused, len(etags), MaxParts)
	}
	var sums []string
	if v, ok := s.partSums.Load(uploadID); ok {
		sums = v.([]string)
	} else if sums, err = s.listPartSums(ctx, obj, uploadID); err != nil {
		return s.interpretError("complete multipart", key, err)
	}
	if len(sums) != len(etags) {
		return fmt.Errorf("complete multipart %s: %w: %d ETags for an upload of %d parts", key, ErrRefused, len(etags), len(sums))
	}
	parts := make([]types.CompletedPart, len(etags))
	for i, etag := range etags {
		parts[i] = types.CompletedPart{ETag: aws.String(etag), PartNumber: aws.Int32(int32(i + 1))}
		if sums[i] != "" {
			parts[i].ChecksumSHA256 = aws.String(sums[i])
		}
	}
	_, err = s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket:          aws.String(s.bucket),
		Key:             aws.String(obj),
		UploadId:        aws.String(uploadID),
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	if err != nil {
		return s.interpretError("complete multipart", key, err)
	}
	s.partSums.Delete(uploadID)
	return nil
}

// listPartSums asks S3 for the parts of an upload and returns their
// SHA-256 checksums by part number ("" for a part S3 has no checksum of,
// or that is missing).
func (s *S3Store) listPartSums(ctx context.Context, obj, uploadID string) ([]string, error) {
	var sums []string
	p := s3.NewListPartsPaginator(s.client, &s3.ListPartsInput{
		Bucket:   aws.String(s.bucket),
		Key:      aws.String(obj),
		UploadId: aws.String(uploadID),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, part := range page.Parts {
			n := int(aws.ToInt32(part.PartNumber))
			if n < 1 || n > MaxParts {
				continue
			}
			for len(sums) < n {
				sums = append(sums, "")
			}
			sums[n-1] = aws.ToString(part.ChecksumSHA256)
		}
	}
	return sums, nil
}

// AbortMultipart implements Presigner.
func (s *S3Store) AbortMultipart(ctx context.Context, key, uploadID string) error {
	obj, err := s.object(key)
	if err != nil {
		return err
	}
	s.partSums.Delete(uploadID)
	_, err = s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
		Bucket:   aws.String(s.bucket),
		Key:      aws.String(obj),
		UploadId: aws.String(uploadID),
	})
	if _, ok := errors.AsType[*types.NoSuchUpload](err); ok {
		return nil
	}
	if err != nil {
		return s.interpretError("abort multipart", key, err)
	}
	return nil
}

// Verify implements Presigner. S3's full-object SHA-256 checksum settles
// it when there is one; otherwise (an object put without a checksum, or
// the composite checksum of a multipart upload) the object is read back
// and hashed.
func (s *S3Store) Verify(ctx context.Context, key string, size int64, sha string) error {
	obj, err := s.object(key)
	if err != nil {
		return err
	}
	want, err := checksumOf(size, sha)
	if err != nil {
		return fmt.Errorf("verify %s: %w", key, err)
	}
	head, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{
		Bucket:       aws.String(s.bucket),
		Key:          aws.String(obj),
		ChecksumMode: types.ChecksumModeEnabled,
	})
	if err != nil {
		return s.interpretError("verify", key, err)
	}
	if got := aws.ToInt64(head.ContentLength); got != size {
		return fmt.Errorf("verify %s: %w: the blob is %d bytes long, expected %d", key, ErrRefused, got, size)
	}
	if got := aws.ToString(head.ChecksumSHA256); got != "" && head.ChecksumType != types.ChecksumTypeComposite && !strings.Contains(got, "-") {
		if got != want {
			return fmt.Errorf("verify %s: %w: S3 has SHA-256 %s, expected %s", key, ErrRefused, hexOf(got), sha)
		}
		return nil
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(obj)})
	if err != nil {
		return s.interpretError("verify", key, err)
	}
	defer out.Body.Close()
	return checkBlob(key, out.Body, size, sha)
}

// checkBlob reads r to its end and checks that it is size bytes of
// digest sha, with an error matching ErrRefused otherwise.
func checkBlob(key string, r io.Reader, size int64, sha string) error {
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(r, size+1))
	if err != nil {
		return fmt.Errorf("verify %s: reading it: %w", key, err)
	}
	if n != size {
		if n > size {
			return fmt.Errorf("verify %s: %w: the blob is longer than the %d bytes expected", key, ErrRefused, size)
		}
		return fmt.Errorf("verify %s: %w: the blob is %d bytes long, expected %d", key, ErrRefused, n, size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sha {
		return fmt.Errorf("verify %s: %w: its SHA-256 is %s, expected %s", key, ErrRefused, got, sha)
	}
	return nil
}

// presigned converts a presigned request of the SDK. Host and
// Content-Length are left out of the headers: an HTTP client sets them
// itself (Request.Size is the Content-Length).
func presigned(req *v4.PresignedHTTPRequest, size int64, sha string) Request {
	h := req.SignedHeader.Clone()
	h.Del("Host")
	h.Del("Content-Length")
	if len(h) == 0 {
		h = nil
	}
	return Request{Method: req.Method, URL: req.URL, Header: h, Size: size, SHA256: sha}
}

// checksumOf checks a body's size and lowercase hex SHA-256 and returns
// the digest in base64, as x-amz-checksum-sha256 carries it.
func checksumOf(size int64, sha string) (string, error) {
	if err := checkSize(size); err != nil {
		return "", err
	}
	b, err := parseSHA256(sha)
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// parseSHA256 decodes a SHA-256 digest in lowercase hex.
func parseSHA256(sha string) ([]byte, error) {
	b, err := hex.DecodeString(sha)
	if err != nil || len(b) != sha256.Size || strings.ToLower(sha) != sha {
		return nil, fmt.Errorf("the SHA-256 %q is not 64 lowercase hex digits", sha)
	}
	return b, nil
}

// hexOf returns a base64 digest in hex, for messages, or the base64
// itself when it is not valid.
func hexOf(b64 string) string {
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return b64
	}
	return hex.EncodeToString(b)
}

// checkParts checks the sizes and digests given to CreateMultipart.
func checkParts(sizes []int64, sums []string) error {
	if len(sizes) == 0 || len(sizes) > MaxParts {
		return fmt.Errorf("%d parts, expected 1 to %d", len(sizes), MaxParts)
	}
	if len(sums) != len(sizes) {
		return fmt.Errorf("%d part sizes but %d digests", len(sizes), len(sums))
	}
	for i, n := range sizes[:len(sizes)-1] {
		if n < MinPartSize {
			return fmt.Errorf("part %d is %d bytes long, less than the %d of every part but the last", i+1, n, MinPartSize)
		}
	}
	return nil
}

// checkTTL checks the validity asked of a presigned request.
func checkTTL(ttl time.Duration) error {
	if ttl <= 0 || ttl > maxPresignTTL {
		return fmt.Errorf("the validity %v of a presigned request must be positive and at most %v", ttl, maxPresignTTL)
	}
	return nil
}
