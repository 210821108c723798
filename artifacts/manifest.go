package artifacts

import (
	"context"
	"time"
)

// Manifest records uploads in progress and finalized artifacts: the
// artifact manifest of the platform. MemoryManifest and PostgresManifest
// implement it; artifactstest.ExerciseManifest checks an implementation.
// Implementations must be safe for concurrent use.
type Manifest interface {
	// UploadCreate records an upload in progress. Its ID must be new.
	UploadCreate(ctx context.Context, u *PendingUpload) error
	// UploadGet returns an upload in progress or aborted (Aborted set);
	// an unknown, finished or deleted one is cikit.ErrNotFound.
	UploadGet(ctx context.Context, id string) (*PendingUpload, error)
	// UploadFinish ends upload id and records a as finalized, in one
	// step: once it returns, the upload is no longer in progress and the
	// artifact is listed. An upload that is not in progress (never
	// created, finished, aborted, deleted) is cikit.ErrNotFound and records
	// nothing, so an upload completes at most once. With replace, an
	// artifact of a's run with a's name is removed in the same step and
	// returned (its blob is the caller's to delete); without it, such an
	// artifact makes the call fail with an error matching ErrRefused.
	UploadFinish(ctx context.Context, id string, a *Artifact, replace bool) (replaced *Artifact, err error)
	// UploadDelete forgets an upload in progress and reports whether
	// this call removed it; an unknown one (never created, finished, or
	// deleted already, by this caller or another) is false and no error.
	UploadDelete(ctx context.Context, id string) (deleted bool, err error)
	// UploadAbort marks an upload in progress aborted: it can no longer
	// be finished, and is kept until it is deleted. It reports whether
	// this call aborted it; an unknown, finished or aborted one is false
	// and no error.
	UploadAbort(ctx context.Context, id string) (aborted bool, err error)
	// UploadsExpired returns up to limit uploads in progress or aborted
	// whose ExpiresAt is before t, oldest first.
	UploadsExpired(ctx context.Context, t time.Time, limit int) ([]PendingUpload, error)

	// ArtifactsList returns the finalized artifacts f selects, ordered by
	// job ID, attempt, then name.
	ArtifactsList(ctx context.Context, f ArtifactFilter) ([]Artifact, error)
	// ArtifactsExpired returns up to limit artifacts whose ExpiresAt is
	// set and before t, soonest first. With keepLatestDefault, the
	// artifacts of each repository's latest run of its default branch
	// (Artifact.DefaultBranch; the run whose artifacts were created last)
	// are left out, expired or not.
	ArtifactsExpired(ctx context.Context, t time.Time, limit int, keepLatestDefault bool) ([]Artifact, error)
	// ArtifactsDelete removes the artifacts of the given IDs and returns
	// the IDs this call removed, in no particular order: unknown IDs, and
	// those another caller removed first, are left out, so that callers
	// deleting at once count each artifact once.
	ArtifactsDelete(ctx context.Context, ids []string) (deleted []string, err error)
}

// PendingUpload is an upload a Broker reserved and that has not been
// completed or aborted.
type PendingUpload struct {
	ID string
	// Job is the attempt that reserved it: only that attempt completes
	// or aborts it.
	Repo, RunID, JobID string
	Attempt            int
	// Cache, Name, Type, Report, Size, SHA256, Files, ExpireIn and
	// Overwrite are the request's (UploadRequest).
	Cache     bool
	Name      string
	Type      string
	Report    string
	Size      int64
	SHA256    string
	Files     int
	ExpireIn  time.Duration
	Overwrite bool
	// Scope is the cache scope a cache entry is saved in.
	Scope string
	// BlobKey is where the archive goes; MultipartID the blob store's ID
	// of a multipart upload ("" for one PUT).
	BlobKey     string
	MultipartID string
	// Stored says the blob was already there (Upload.Stored).
	Stored bool
	// Aborted says the upload was aborted or refused. It is kept until
	// ExpiresAt, when its presigned requests have expired, so that the
	// pruner deletes what a request sent again after the abort stored.
	Aborted   bool
	CreatedAt time.Time
	ExpiresAt time.Time
}

// ArtifactFilter selects artifacts. RunID is required.
type ArtifactFilter struct {
	RunID string
	// JobIDs, when set, keeps those jobs' artifacts; Attempt, when
	// positive, those of that attempt only.
	JobIDs  []string
	Attempt int
	// Name and Type, when set, keep those of that name and type.
	Name string
	Type string
}

// CacheIndex records the cache entries of every repository: what
// cache_entries holds. MemoryCacheIndex and PostgresCacheIndex implement
// it; artifactstest.ExerciseCacheIndex checks an implementation.
// Implementations must be safe for concurrent use.
type CacheIndex interface {
	// CacheLookup finds the entry q asks for in repo, searching
	// q.Scopes in order for each candidate: the exact key in every scope,
	// then each fallback key in every scope, then, for the longest
	// restore-key prefix that any entry of the scopes matches, that
	// prefix's most recently created entry in the first scope holding
	// one. A hit's LastHitAt becomes now. A miss is nil and no error.
	CacheLookup(ctx context.Context, q IndexQuery, now time.Time) (*CacheEntry, error)
	// CacheInsert records e, unless its scope already holds its key:
	// that is an error matching ErrCacheExists, and e is not recorded.
	CacheInsert(ctx context.Context, e *CacheEntry) error
	// CacheHasDigest reports whether an entry of repo's scope has the
	// archive of digest sha256 (content addressing: the blob is there).
	CacheHasDigest(ctx context.Context, repo, scope, sha256 string) (bool, error)
	// CacheEvict removes up to limit entries: first those last hit (or,
	// never hit, created) before olderThan, then, for each repository
	// whose entries together pass budget bytes (budget > 0), its least
	// recently hit until it is within budget. It returns the removed
	// entries and the blob keys that no remaining entry refers to, which
	// the caller deletes.
	CacheEvict(ctx context.Context, budget int64, olderThan time.Time, limit int) (removed []CacheEntry, orphanBlobs []string, err error)
	// CacheDeleteBlob removes every entry whose archive is blobKey, and
	// returns them. Content-addressed entries share an archive, and an
	// entry saved over one while it is deleted (by a pruner that found no
	// entry left, or a save that was dropped) would refer to nothing:
	// whoever deletes such an archive, or finds it missing after saving
	// an entry over it, calls this.
	CacheDeleteBlob(ctx context.Context, blobKey string) (removed []CacheEntry, err error)
	// CacheList returns repo's entries, most recently hit first (an
	// entry never hit counts as hit when it was created, as in
	// CacheEvict).
	CacheList(ctx context.Context, repo string) ([]CacheEntry, error)
}

// IndexQuery is a CacheLookup: a CacheQuery in a repository's scopes.
type IndexQuery struct {
	Repo   string
	Scopes []string
	CacheQuery
}

// CacheEntry is one saved cache: the archive of key's paths in a scope
// of a repository, content-addressed by its SHA-256.
type CacheEntry struct {
	Repo   string
	Scope  string
	Key    string
	SHA256 string
	Size   int64
	// BlobKey is the archive's key in the blob store:
	// cache/{repo}/{scope}/{sha256}, escaped (CacheBlobKey).
	BlobKey   string
	CreatedAt time.Time
	// LastHitAt is when a lookup last found it; zero when none has.
	LastHitAt time.Time
	// UploadID is the upload that saved it ("" for an entry saved
	// otherwise): a completion of that upload sent again finds it.
	UploadID string
}
