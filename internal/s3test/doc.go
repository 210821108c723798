// Package s3test starts an in-process S3 server for each test (gofakes3
// with its in-memory backend, over HTTP on loopback), so tests run the
// real AWS SDK client against a bucket of their own: no service to
// install, nothing left over from another test.
//
// # Use
//
//	func TestS3Store(t *testing.T) {
//		t.Parallel()
//		srv := s3test.New(t, "blobs")
//		store, err := artifacts.NewS3Store(t.Context(), srv.Config("blobs"))
//		require.NoError(t, err)
//		...
//	}
//
// # Guarantees
//
//   - Every call to [New] starts a new server with the given buckets,
//     listening on a free loopback port; it is closed when the test ends.
//   - [Server.Config] points an artifacts.S3Config at the server: its
//     Endpoint, static credentials and an HTTP client whose connections
//     are closed with the server, so goleak finds no leftover goroutine.
//   - [Server.Client] is a plain SDK client of the server, for looking
//     behind a store: its objects and unfinished multipart uploads.
//
// gofakes3 speaks the S3 REST API (signatures are not checked) including
// multipart uploads; it does not require S3's 5 MiB minimum part size, so
// tests can send multipart uploads of small blobs.
//
// # What AWS checks and gofakes3 does not
//
// A middleware in front of gofakes3 holds requests to more of what AWS
// checks, so that presigned transfers can be tested:
//
//   - A PUT of an object or an UploadPart carrying x-amz-checksum-sha256
//     has its body hashed as gofakes3 reads it; a body of another digest
//     is answered 400 BadDigest and nothing is stored. A header that is
//     not the base64 of 32 bytes is 400 InvalidRequest. Bodies in
//     aws-chunked encoding (x-amz-content-sha256 STREAMING-…), whose
//     checksums travel in trailers, are not checked.
//   - The checksum of an object put in one request with
//     x-amz-checksum-sha256 is remembered and returned, as
//     x-amz-checksum-sha256 with x-amz-checksum-type FULL_OBJECT, by HEAD
//     and GET (without Range) with x-amz-checksum-mode ENABLED. It is
//     forgotten when the object changes (its ETag is no longer the one
//     the PUT was answered with) or is put again without one. Multipart
//     uploads get no checksum of the object, and checksum headers are
//     never stored as metadata.
//   - A presigned request (X-Amz-Date and X-Amz-Expires in the query)
//     past its expiry by the server's clock (Options.Now) is answered
//     403 AccessDenied, "Request has expired".
//
// Signatures are still not checked: a request signed for another key, or
// with another Content-Length, is served.
//
// # Stability
//
// Internal to cikit; changes with its callers.
package s3test
