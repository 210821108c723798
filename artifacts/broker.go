package artifacts

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// Broker is what one job attempt may do with artifacts and caches: the
// runner's side of the transfers, scoped to the attempt it was made for.
// Bytes never pass through a Broker: it hands out short-lived presigned
// requests (Request) that the runner sends to the blob store itself,
// and it checks and records what arrived.
//
// Service.ForJob makes one over the stores, for a platform's server and
// for `cikit run`; the runner protocol carries the same calls over HTTP
// (fleet.Server serves them, the agent's client is a Broker).
//
// Errors a runner can act on match ErrRefused (the request is wrong and
// will stay wrong: a mismatch, a limit, an unknown upload, a name in
// use), ErrCacheExists (another job saved the key first) or
// cikit.ErrNotFound.
type Broker interface {
	// CreateUpload reserves the upload of one archive (an artifact, or a
	// cache entry when req.Cache is set) of req.Size bytes whose SHA-256
	// is req.SHA256, and returns the presigned requests that upload it:
	// one PUT, or the parts of a multipart upload. A cache entry whose
	// key the job's scope already holds is ErrCacheExists: nothing to
	// upload.
	CreateUpload(ctx context.Context, req UploadRequest) (*Upload, error)
	// CompleteUpload checks what arrived (its size and SHA-256 must be
	// those reserved) and records it: the artifact joins the run's
	// manifest, immutable, or the cache entry the index. The artifact's
	// ID is the upload's. A mismatch is ErrRefused: nothing is recorded,
	// what was stored is deleted, and the upload is over. A call for an
	// upload the attempt completed already (a runner that sends it again,
	// its answer lost) returns what the first returned, while the
	// artifact or entry is kept; another attempt's upload is ErrRefused.
	// A cache entry another job saved under the same key meanwhile is
	// ErrCacheExists: this save is dropped and its blob deleted, unless
	// the other entry's content is the same.
	CompleteUpload(ctx context.Context, req CompleteRequest) (*Artifact, error)
	// AbortUpload gives up an upload: nothing is recorded, and the parts
	// uploaded so far are deleted. The upload's requests stay valid until
	// they expire (presigned requests cannot be revoked); what one sent
	// again stores is deleted by the pruner then. Aborting an unknown,
	// aborted or completed upload is not an error.
	AbortUpload(ctx context.Context, uploadID string) error
	// ListArtifacts returns the finalized artifacts of the job's run that
	// req selects, each with a presigned Download request.
	ListArtifacts(ctx context.Context, req ListRequest) ([]Artifact, error)
	// LookupCache looks a cache key up in the scopes the job reads: the
	// exact key first, then the fallback keys, then the most recent entry
	// under the longest matching restore-key prefix. A miss is nil and no
	// error. A hit counts as a use of the entry (its LastHitAt).
	LookupCache(ctx context.Context, q CacheQuery) (*CacheHit, error)
}

// Errors of a Broker. Callers test with errors.Is.
var (
	// ErrRefused: the broker refuses the request, and would refuse it
	// again (a wrong size or SHA-256, an expired or unknown upload, a
	// limit passed, a name already used). The HTTP form is a 4xx.
	ErrRefused = errors.New("refused")
	// ErrCacheExists: the cache key is already saved in the job's scope,
	// by this job's run or another; the save is dropped. The HTTP form is
	// 409.
	ErrCacheExists = errors.New("the cache key is already saved")
)

// Limits of a Broker's requests.
const (
	// MaxNameLen bounds an artifact's name and a cache key, in bytes.
	MaxNameLen = 512
	// MaxRestoreKeys bounds the restore-key prefixes and fallback keys of
	// one CacheQuery, together.
	MaxRestoreKeys = 32
	// DefaultUploadTTL is how long a reserved upload and its presigned
	// requests stay valid.
	DefaultUploadTTL = time.Hour
	// DefaultDownloadTTL is how long a presigned download stays valid.
	DefaultDownloadTTL = 15 * time.Minute
	// DefaultExpireIn is how long an artifact is kept when its job says
	// nothing.
	DefaultExpireIn = 30 * 24 * time.Hour
)

// Artifact types (Artifact.Type, UploadRequest.Type).
const (
	// TypeArchive is an archive of workspace paths (the default).
	TypeArchive = "archive"
	// TypeReport is a GitLab artifacts:reports file kept as it is, named
	// by its report type ("junit", "coverage_report" …), for the reports
	// work that follows.
	TypeReport = "report"
)

// UploadRequest asks a Broker for the upload of one archive.
type UploadRequest struct {
	// Name is the artifact's name ("dist"; GitLab's artifacts:name, or
	// "artifacts"); for a cache entry, its rendered key. At most
	// MaxNameLen bytes.
	Name string `json:"name"`
	// Cache, when set, uploads a cache entry of key Name rather than an
	// artifact.
	Cache bool `json:"cache,omitempty"`
	// Type is TypeArchive (the default) or TypeReport; Report names the
	// report type of a TypeReport.
	Type   string `json:"type,omitempty"`
	Report string `json:"report,omitempty"`
	// Size is the archive's length in bytes, SHA256 its digest in
	// lowercase hex: what CompleteUpload checks.
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// PartSize and PartSHA256, when set, cut the archive into parts of
	// PartSize bytes (the last one the rest) and give each part's digest:
	// a store that uploads in parts (S3) then takes it in those parts,
	// each checked on its own. At most MaxParts parts; every part but
	// the last at least MinPartSize bytes. Sender sets them.
	PartSize   int64    `json:"part_size,omitempty"`
	PartSHA256 []string `json:"part_sha256,omitempty"`
	// Files counts the files in the archive, for display.
	Files int `json:"files,omitempty"`
	// ExpireIn is how long the artifact is kept from its completion:
	// zero for the platform's default, negative to keep it until it is
	// deleted (GitLab's expire_in: never), where the platform allows it.
	ExpireIn time.Duration `json:"expire_in,omitempty"`
	// Overwrite replaces an artifact of the run with the same name
	// (GitHub's upload-artifact overwrite); otherwise such a name is
	// ErrRefused.
	Overwrite bool `json:"overwrite,omitempty"`
}

// Upload is a reserved upload: the requests that send the archive, in
// order. One request sends it whole; several send the parts of a
// multipart upload, Parts[i] the PartSize bytes from offset i*PartSize
// (the last part the rest).
type Upload struct {
	ID        string    `json:"id"`
	Parts     []Request `json:"parts"`
	PartSize  int64     `json:"part_size"`
	ExpiresAt time.Time `json:"expires_at"`
	// Stored says the blob is already in the store (a cache entry with
	// the same content in the same scope): there is nothing to send, and
	// CompleteUpload records the entry.
	Stored bool `json:"stored,omitempty"`
}

// Request is one presigned HTTP request: send Method to URL with Header
// (and, for an upload, the part's bytes as the body, with its exact
// Content-Length). It is a credential until it expires: never log its
// URL.
type Request struct {
	Method string      `json:"method"`
	URL    string      `json:"url"`
	Header http.Header `json:"header,omitempty"`
	// Size and SHA256 are the body's length and digest, for a part of an
	// upload; zero and "" for a download.
	Size   int64  `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
}

// CompleteRequest completes an upload. ETags are the ETag headers the
// store answered each part with, in order: required for a multipart
// upload, ignored otherwise.
type CompleteRequest struct {
	UploadID string   `json:"upload_id"`
	ETags    []string `json:"etags,omitempty"`
}

// ListRequest selects artifacts of the job's run.
type ListRequest struct {
	// Jobs names the jobs whose artifacts are listed (the job's needs);
	// each job's are those of its latest attempt that has any. Empty
	// lists the whole run's (GitHub's download-artifact, whose artifacts
	// belong to the run).
	Jobs []string `json:"jobs,omitempty"`
	// Name, when set, keeps the artifacts of that name only.
	Name string `json:"name,omitempty"`
	// Type, when set, keeps the artifacts of that type only.
	Type string `json:"type,omitempty"`
}

// Artifact is a finalized artifact of a job attempt, as the manifest
// records it.
type Artifact struct {
	ID string `json:"id"`
	// Repo is the run's repository; DefaultBranch says the run built the
	// repository's default branch (for the retention option that keeps
	// the latest of those).
	Repo          string `json:"repo,omitempty"`
	DefaultBranch bool   `json:"default_branch,omitempty"`
	RunID         string `json:"run_id"`
	JobID         string `json:"job_id"`
	Attempt       int    `json:"attempt"`
	Name          string `json:"name"`
	Type          string `json:"type"`
	Report        string `json:"report,omitempty"`
	Size          int64  `json:"size"`
	SHA256        string `json:"sha256"`
	Files         int    `json:"files,omitempty"`
	// BlobKey is where the archive is in the blob store; never shown to
	// users, who download through presigned requests.
	BlobKey   string    `json:"-"`
	CreatedAt time.Time `json:"created_at"`
	// ExpiresAt is when the pruner deletes it; zero for never.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// Download, in ListArtifacts' answer, is a presigned GET of the
	// archive.
	Download *Request `json:"download,omitempty"`
}

// CacheQuery is a cache lookup.
type CacheQuery struct {
	// Key is the rendered cache key, at most MaxNameLen bytes.
	Key string `json:"key"`
	// FallbackKeys are exact keys tried in order when Key misses
	// (GitLab's fallback_keys).
	FallbackKeys []string `json:"fallback_keys,omitempty"`
	// RestoreKeys are prefixes tried when Key and FallbackKeys miss
	// (GitHub's restore-keys, native restore_keys): the longest prefix
	// that matches an entry wins, and among its entries the most recently
	// saved.
	RestoreKeys []string `json:"restore_keys,omitempty"`
}

// CacheHit is the entry a lookup found.
type CacheHit struct {
	// Key is the entry's key; Exact says it is the key looked up.
	Key   string `json:"key"`
	Exact bool   `json:"exact"`
	// Scope is the scope it was found in.
	Scope  string `json:"scope"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// Download is a presigned GET of the entry's archive.
	Download Request `json:"download"`
}

// JobRef names the job attempt a Broker works for, and what it may read.
type JobRef struct {
	// Repo is the run's repository ("acme/api"): caches are kept per
	// repository.
	Repo  string
	RunID string
	JobID string
	// Attempt is the attempt, from 1.
	Attempt int
	// Scope is the cache scope the job writes; ReadScopes the scopes it
	// reads, in order, Scope first (see Scopes).
	Scope      string
	ReadScopes []string
	// Needs are the jobs whose artifacts ListArtifacts may name in
	// ListRequest.Jobs; nil allows every job of the run (a GitHub job's,
	// whose artifacts belong to the run and share its names). With Needs
	// set, the job's artifacts are named "JOB/NAME" in the manifest, so
	// that every job may use the same name and a retry replaces its
	// earlier attempt's.
	Needs []string
	// DefaultBranch says the run builds the repository's default branch
	// (Artifact.DefaultBranch).
	DefaultBranch bool
}
