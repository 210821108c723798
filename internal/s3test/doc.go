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
// # Stability
//
// Internal to cikit; changes with its callers.
package s3test
