// Package artifacts moves and keeps the files jobs produce: the artifacts
// that travel along a pipeline's DAG, the content-addressed caches jobs
// restore and save, and finished logs. It has four layers, each usable on
// its own:
//
//   - blob stores (BlobStore: FileStore, S3Store), where the bytes live;
//   - archives (Pack, Unpack), the streamed tar+zstd form of a job's paths;
//   - presigned transfers (Presigner: S3Store, SignedFileStore; Sender),
//     which let a runner send and fetch archives without the platform
//     carrying the bytes;
//   - the Service, which records artifacts in a Manifest and caches in a
//     CacheIndex (PostgreSQL or memory each), hands each job attempt a
//     Broker, and prunes what expired.
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
// # Archives
//
// Pack writes the paths PackOptions select (doublestar globs, exclusions,
// the literal list of GitLab's untracked files) as a tar stream compressed
// with zstd, streamed: no archive is ever whole in memory. Entries are
// sorted and carry permission bits and modification times but no owner,
// so the same tree packs to the same bytes and an unchanged cache path is
// recognised by its digest. Empty directories and symbolic links that
// stay inside the workspace are kept.
//
// Unpack treats every archive as hostile, since one job's archive is read
// by another: it extracts through an os.Root of the destination and stops
// with ErrUnsafeArchive at an entry whose name is absolute or climbs out
// with "..", a symbolic link whose target leaves the destination, an
// entry below a symbolic link, a hard link, a device or a FIFO, and with
// ErrUnpackLimit past UnpackOptions' bounds on bytes and entries.
// FuzzUnpack holds it to that.
//
// # Presigned transfers
//
// Runners send archives to the blob store directly, through short-lived
// requests a Broker presigns for one job attempt. S3Store and
// SignedFileStore are Presigners: S3Store with SigV4 presigned URLs whose
// signature covers the body's Content-Length and x-amz-checksum-sha256,
// so S3 refuses another body, in parts (multipart) for large archives;
// SignedFileStore with HMAC-SHA256 signed URLs, over the method, key,
// expiry, size and digest, to its own Handler, which refuses another
// body, an expired or replayed URL, and never overwrites a stored blob.
// Verify checks what arrived before anything is recorded. Sender is the
// runner's side: it sends the parts of an upload in parallel, aborts a
// failed upload, and checks the size and digest of every download.
//
// # Artifacts along the DAG
//
// A Service (NewService) is the platform's side; ForJob returns the
// Broker of one job attempt, identified by a JobRef (JobRefFor builds it
// from the run context and the job's spec). A job's upload is reserved
// (CreateUpload, its size and SHA-256 declared up front), sent through the
// presigned parts, then completed: the Service checks the blob's size and
// digest and only then records an immutable Artifact in the Manifest. A
// refused or abandoned upload leaves no row and no blob or S3 part
// behind. ListArtifacts gives a job the artifacts of the needs it may
// read (GitLab dependencies and needs:artifacts, GitHub download-artifact
// by name or all), each with a presigned download; RunArtifacts lists a
// run's for people. Errors a job caused match ErrRefused, which the
// runner protocol answers with a 4xx.
//
// # Caches
//
// A cache entry is an archive of a job's cache paths saved under a
// rendered key (CacheIndex, with its size and when it was last hit),
// stored content-addressed at CacheBlobKey(repo, scope, sha256).
// LookupCache tries the exact key, then the fallback keys in order, then
// the longest restore-key prefix that matches (its most recently saved
// entry), in each scope the job may read. Scopes says which: a branch
// reads its own scope, then the default branch's; a pull request its own,
// its head branch's, then its base's; each writes only its own, and a
// pull request from a fork writes a fork scope no trusted branch reads.
// Two jobs saving one key at once: one entry wins and the other's save
// ends with ErrCacheExists.
//
// # Retention
//
// Artifacts expire (ServiceConfig.ExpireIn unless the job says, capped by
// MaxExpireIn; KeepLatestDefault keeps each repository's latest default-
// branch artifacts); cache entries go when nobody hit them for
// CacheMaxAge, or beyond a repository's CacheBudget, least recently hit
// first. Prune deletes them, blobs and rows, in batches, and abandoned
// uploads with their parts; several servers may prune at once. It says
// what it freed in PruneStats.
//
// # Stability
//
// The BlobStore interface and its semantics, as artifactstest defines
// them, and the Broker contract are the stable part; the configuration
// of the stores and the Service may still grow before cikit 1.0.
package artifacts
