// Package artifacts stores the files jobs produce and keep: artifacts,
// caches and finished logs. This first part is the storage seam, the
// BlobStore, with a store in a local directory (FileStore) and one in
// Amazon S3 or an S3-compatible server (S3Store). Manifests, the
// content-addressed cache and presigned transfers will build on it.
//
// # Blobs and keys
//
// A blob is an immutable byte string named by a key, a slash-separated
// relative path like "logs/run-1/build/1/0.log". ValidateKey says which
// keys are valid: segments that are neither empty nor "." or "..", no
// backslash or NUL, at most MaxKeyLen bytes of UTF-8. A valid key names
// the same blob in every store and cannot leave a FileStore's directory;
// callers that build keys from names people chose, like job IDs, escape
// them first (logs.BlobKey does).
//
// # Guarantees
//
// Every BlobStore, as artifactstest.Exercise checks:
//
//   - Put stores exactly the size bytes it was given or nothing: a reader
//     that gives fewer or more (ErrWrongSize), a reader's error or a
//     cancelled context leave no blob and leave an earlier blob under the
//     key as it was.
//   - A blob appears whole: Put replaces a blob atomically, and a Get
//     reads the old blob or the new one, never part of one.
//   - A missing blob is cikit.ErrNotFound for Get and Stat; Delete of a
//     missing blob succeeds. A blob's parent ("a" of "a/b") is no blob.
//   - Invalid keys are refused with ErrInvalidKey before anything is done.
//   - A store is safe for concurrent use.
//
// FileStore syncs each blob before it renames it into place. S3Store
// uploads blobs from S3Config.MultipartThreshold bytes in parts, in
// parallel, and aborts a multipart upload that fails.
//
// # Presigned transfers
//
// Runners send archives to the blob store directly, through short-lived
// requests a Broker presigns for one job attempt; the platform's API
// never carries the bytes. S3Store and SignedFileStore are Presigners:
// S3Store with SigV4 presigned URLs whose signature covers the body's
// Content-Length and x-amz-checksum-sha256, so S3 refuses another body,
// in parts from S3Config.MultipartThreshold; SignedFileStore with
// HMAC-SHA256 signed URLs to its own Handler, which refuses another body
// and never overwrites a stored blob. Verify checks what arrived before
// anything is recorded. Sender is the runner's side: it sends the parts
// of an upload in parallel, aborts a failed upload, and checks the size
// and digest of a download.
//
// # Stability
//
// The BlobStore interface and its semantics, as artifactstest defines
// them, are the stable part; the configuration of the stores may still
// grow before cikit 1.0.
package artifacts
