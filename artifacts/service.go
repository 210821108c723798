package artifacts

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/cikit/cikit"
)

// Defaults of ServiceConfig.
const (
	// DefaultMaxArchiveBytes bounds one archive, artifact or cache
	// entry: S3's limit for one object is 5 TiB, GitHub's for a cache
	// 10 GiB; 5 GiB keeps a job's upload within an hour on a slow link.
	DefaultMaxArchiveBytes = 5 << 30
	// DefaultCacheBudget is how many bytes of caches a repository keeps
	// (GitHub's 10 GB) before the least recently hit are evicted.
	DefaultCacheBudget = 10 << 30
	// DefaultCacheMaxAge is how long an entry nobody hits is kept
	// (GitHub's 7 days).
	DefaultCacheMaxAge = 7 * 24 * time.Hour
	// DefaultPruneBatch is how many rows one pruning step deletes.
	DefaultPruneBatch = 500
)

// ServiceConfig configures a Service. Blobs, Manifest and Index are
// required; the zero value of every other field is a sensible default.
type ServiceConfig struct {
	// Blobs stores the archives and presigns the transfers: an S3Store,
	// or a SignedFileStore.
	Blobs Presigner
	// Manifest records uploads and artifacts; Index the cache entries.
	Manifest Manifest
	Index    CacheIndex
	// UploadTTL is how long a reserved upload stays valid (default
	// DefaultUploadTTL); DownloadTTL how long a presigned download does
	// (default DefaultDownloadTTL).
	UploadTTL   time.Duration
	DownloadTTL time.Duration
	// ExpireIn is how long an artifact is kept when its job says nothing
	// (default DefaultExpireIn). MaxExpireIn, when set, caps what a job
	// asks for, "never" included; without it a job may keep its
	// artifacts until they are deleted.
	ExpireIn    time.Duration
	MaxExpireIn time.Duration
	// KeepLatestDefault keeps the artifacts of each repository's latest
	// run of its default branch, whatever their expiry: they stay listed
	// and downloadable.
	KeepLatestDefault bool
	// MaxArchiveBytes bounds one archive (default DefaultMaxArchiveBytes).
	MaxArchiveBytes int64
	// CacheBudget is how many bytes of caches a repository keeps
	// (default DefaultCacheBudget; negative: no budget); CacheMaxAge how
	// long an entry that is not hit is kept (default DefaultCacheMaxAge;
	// negative: for ever).
	CacheBudget int64
	CacheMaxAge time.Duration
	// PruneBatch is how many rows one pruning step deletes (default
	// DefaultPruneBatch).
	PruneBatch int
	// Now is the clock. Default: time.Now.
	Now func() time.Time
	// Logger receives what the service could not do on its own, such as
	// a blob it could not delete. Default: slog.Default().
	Logger *slog.Logger
}

// Service is the platform's side of artifacts and caches: it reserves
// uploads, presigns their requests, checks what arrived before recording
// it, looks caches up in the scopes a job may read, and prunes what has
// expired. ForJob gives the Broker of one job attempt. It is safe for
// concurrent use, and several services (one per server) may share the
// same stores.
type Service struct {
	cfg ServiceConfig
	log *slog.Logger
}

// NewService validates cfg and returns a Service.
func NewService(cfg ServiceConfig) (*Service, error) {
	switch {
	case cfg.Blobs == nil:
		return nil, errors.New("artifacts: ServiceConfig.Blobs is required")
	case cfg.Manifest == nil:
		return nil, errors.New("artifacts: ServiceConfig.Manifest is required")
	case cfg.Index == nil:
		return nil, errors.New("artifacts: ServiceConfig.Index is required")
	case cfg.UploadTTL < 0 || cfg.DownloadTTL < 0 || cfg.ExpireIn < 0 || cfg.MaxExpireIn < 0 || cfg.MaxArchiveBytes < 0 || cfg.PruneBatch < 0:
		return nil, errors.New("artifacts: ServiceConfig durations and sizes must not be negative (but CacheBudget and CacheMaxAge)")
	}
	cfg.UploadTTL = cmp.Or(cfg.UploadTTL, DefaultUploadTTL)
	cfg.DownloadTTL = cmp.Or(cfg.DownloadTTL, DefaultDownloadTTL)
	cfg.ExpireIn = cmp.Or(cfg.ExpireIn, DefaultExpireIn)
	if cfg.MaxExpireIn > 0 {
		cfg.ExpireIn = min(cfg.ExpireIn, cfg.MaxExpireIn)
	}
	cfg.MaxArchiveBytes = cmp.Or(cfg.MaxArchiveBytes, DefaultMaxArchiveBytes)
	cfg.CacheBudget = cmp.Or(cfg.CacheBudget, DefaultCacheBudget)
	cfg.CacheMaxAge = cmp.Or(cfg.CacheMaxAge, DefaultCacheMaxAge)
	cfg.PruneBatch = cmp.Or(cfg.PruneBatch, DefaultPruneBatch)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Service{cfg: cfg, log: cfg.Logger}, nil
}

// ForJob returns the Broker of one job attempt. It is cheap: make one
// per request.
func (s *Service) ForJob(ref JobRef) Broker { return &jobBroker{s: s, ref: ref} }

// RunArtifacts returns the finalized artifacts of a run that have not
// expired, for display, each with a presigned Download request.
func (s *Service) RunArtifacts(ctx context.Context, runID string) ([]Artifact, error) {
	if runID == "" {
		return nil, fmt.Errorf("%w: a run ID is required", ErrRefused)
	}
	list, err := s.cfg.Manifest.ArtifactsList(ctx, ArtifactFilter{RunID: runID})
	if err != nil {
		return nil, err
	}
	return s.downloads(ctx, s.live(list))
}

// shownName is an artifact's name as its job gave it: without the
// "JOB/" the manifest puts before a native or GitLab job's (see
// JobRef.Needs). GitHub's artifact names hold no slash.
func shownName(a Artifact) string {
	name, _ := strings.CutPrefix(a.Name, a.JobID+"/")
	return name
}

// live drops the artifacts that have expired, but those of default-branch
// runs with KeepLatestDefault: Prune keeps the latest of them, which stay
// downloadable, and deletes the others on its next pass.
func (s *Service) live(list []Artifact) []Artifact {
	now := s.cfg.Now()
	return slices.DeleteFunc(list, func(a Artifact) bool {
		return !a.ExpiresAt.IsZero() && !a.ExpiresAt.After(now) && !(s.cfg.KeepLatestDefault && a.DefaultBranch)
	})
}

// downloads presigns a download of each artifact, and shows its name as
// its job gave it.
func (s *Service) downloads(ctx context.Context, list []Artifact) ([]Artifact, error) {
	for i := range list {
		list[i].Name = shownName(list[i])
		r, err := s.cfg.Blobs.PresignGet(ctx, list[i].BlobKey, s.cfg.DownloadTTL)
		if err != nil {
			return nil, fmt.Errorf("presigning the download of artifact %q: %w", list[i].Name, err)
		}
		list[i].Download = &r
	}
	return list, nil
}

// Scopes returns the cache scope a run of rc writes and the scopes it
// reads, in order, its own first:
//
//   - a branch writes and reads "branch/NAME", then reads the default
//     branch's;
//   - a tag writes "tag/NAME" and reads it, then the default branch's;
//   - a pull request writes "pr/N" and reads it, its head branch's and
//     then its base branch's;
//   - a pull request from a fork (rc.Fork) writes "fork/pr-N", which no
//     other run ever reads, and reads it, then its base branch's: a
//     stranger's code can never put a cache where a trusted branch
//     restores from.
//
// A run that knows no ref (a local run of a work tree) writes and reads
// "local".
func Scopes(rc *cikit.RunContext) (write string, read []string) {
	if rc == nil {
		return "local", []string{"local"}
	}
	branch := func(name string) string {
		if name == "" {
			return ""
		}
		return "branch/" + name
	}
	var scopes []string
	switch {
	case rc.PRNumber > 0 && rc.Fork:
		scopes = []string{"fork/pr-" + strconv.Itoa(rc.PRNumber), branch(rc.BaseRef)}
	case rc.PRNumber > 0:
		scopes = []string{"pr/" + strconv.Itoa(rc.PRNumber), branch(rc.HeadRef), branch(rc.BaseRef)}
	case rc.RefType == "tag" && rc.RefName != "":
		scopes = []string{"tag/" + rc.RefName, branch(rc.DefaultBranch)}
	case rc.RefName != "":
		scopes = []string{branch(rc.RefName), branch(rc.DefaultBranch)}
	default:
		return "local", []string{"local"}
	}
	read = make([]string, 0, len(scopes))
	for _, sc := range scopes {
		if sc != "" && !slices.Contains(read, sc) {
			read = append(read, sc)
		}
	}
	return read[0], read
}

// CacheBlobKey is where a cache entry's archive is stored: content
// addressed, cache/{repo}/{scope}/{sha256}, each part escaped so that it
// is one segment of a valid key.
func CacheBlobKey(repo, scope, sha256 string) string {
	return "cache/" + segment(repo) + "/" + segment(scope) + "/" + sha256
}

// artifactBlobKey is where an artifact's archive is stored:
// artifacts/{repo}/{run}/{job}/{attempt}/{upload}.
func artifactBlobKey(ref JobRef, uploadID string) string {
	return "artifacts/" + segment(ref.Repo) + "/" + segment(ref.RunID) + "/" + segment(ref.JobID) + "/" + strconv.Itoa(ref.Attempt) + "/" + uploadID
}

// segment escapes s into one segment of a blob key.
func segment(s string) string {
	switch e := url.PathEscape(s); e {
	case "":
		return "%00"
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	default:
		return e
	}
}

// newID returns a random identifier.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// refused returns an error matching ErrRefused that says why.
func refused(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, args...))
}

// checkRequestName checks an artifact's name or a cache key a job
// sends: what the stores keep (checkName), and no control characters.
func checkRequestName(what, name string) error {
	if err := checkName(what, name); err != nil {
		return err
	}
	if strings.ContainsFunc(name, unicode.IsControl) {
		return refused("the %s %q holds a control character", what, name)
	}
	return nil
}

// checkDigest checks a SHA-256 in lowercase hex.
func checkDigest(sum string) error {
	if len(sum) != 64 || strings.Trim(sum, "0123456789abcdef") != "" {
		return refused("the SHA-256 must be 64 lowercase hex digits, got %q", cut(sum, 80))
	}
	return nil
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// jobBroker is the Broker of one job attempt.
type jobBroker struct {
	s   *Service
	ref JobRef
}

var _ Broker = (*jobBroker)(nil)

// CreateUpload implements Broker.
func (b *jobBroker) CreateUpload(ctx context.Context, req UploadRequest) (*Upload, error) {
	s, ref := b.s, b.ref
	what := "artifact name"
	if req.Cache {
		what = "cache key"
	}
	if err := checkRequestName(what, req.Name); err != nil {
		return nil, err
	}
	if err := checkDigest(req.SHA256); err != nil {
		return nil, err
	}
	switch {
	case req.Size < 0:
		return nil, refused("the size must not be negative, got %d", req.Size)
	case req.Size > s.cfg.MaxArchiveBytes:
		return nil, refused("the archive is %s; at most %s are allowed", cikit.FormatBytes(req.Size), cikit.FormatBytes(s.cfg.MaxArchiveBytes))
	case req.Files < 0:
		return nil, refused("the file count must not be negative, got %d", req.Files)
	case req.Cache && (req.Type != "" || req.Report != "" || req.Overwrite || req.ExpireIn != 0):
		return nil, refused("a cache entry has no type, report, overwrite or expiry")
	}
	switch req.Type {
	case "", TypeArchive:
		if req.Report != "" {
			return nil, refused("only an artifact of type %q names a report", TypeReport)
		}
		req.Type = TypeArchive
	case TypeReport:
		if err := checkRequestName("report type", req.Report); err != nil {
			return nil, err
		}
	default:
		return nil, refused("the artifact type must be %q or %q, got %q", TypeArchive, TypeReport, cut(req.Type, 40))
	}
	if req.Cache {
		req.Type = ""
	}
	now := s.cfg.Now()
	u := &PendingUpload{ID: newID(), Repo: ref.Repo, RunID: ref.RunID, JobID: ref.JobID, Attempt: ref.Attempt,
		Cache: req.Cache, Name: req.Name, Type: req.Type, Report: req.Report, Size: req.Size, SHA256: req.SHA256,
		Files: req.Files, ExpireIn: req.ExpireIn, Overwrite: req.Overwrite, CreatedAt: now, ExpiresAt: now.Add(s.cfg.UploadTTL)}
	if !req.Cache && ref.Needs != nil {
		// A native or GitLab job's artifacts are its own: their names
		// are the job's (GitLab's default "artifacts" in every job), and
		// a retried attempt's replace the earlier one's. A GitHub job's
		// (Needs nil) belong to the run, whose names they share.
		u.Name, u.Overwrite = ref.JobID+"/"+req.Name, true
	}
	up := &Upload{ID: u.ID, ExpiresAt: u.ExpiresAt}
	if req.Cache {
		u.Scope = ref.Scope
		u.BlobKey = CacheBlobKey(ref.Repo, ref.Scope, req.SHA256)
	} else {
		u.BlobKey = artifactBlobKey(ref, u.ID)
	}
	if err := ValidateKey(u.BlobKey); err != nil {
		return nil, refused("the archive's blob key: %v", err)
	}
	if req.Cache {
		stored, err := s.cfg.Index.CacheHasDigest(ctx, ref.Repo, ref.Scope, req.SHA256)
		if err != nil {
			return nil, err
		}
		if !stored {
			// Another job's save of the same content may be under way,
			// its archive sent: sending it again would be refused (a
			// SignedFileStore's blobs are immutable), and dropping this
			// save would delete the other's archive. CompleteUpload
			// verifies what is there.
			switch _, err := s.cfg.Blobs.Stat(ctx, u.BlobKey); {
			case err == nil:
				stored = true
			case !errors.Is(err, cikit.ErrNotFound):
				return nil, err
			}
		}
		u.Stored, up.Stored = stored, stored
	}
	if !u.Stored {
		if err := b.presignUpload(ctx, u, up, req); err != nil {
			return nil, err
		}
	}
	if err := s.cfg.Manifest.UploadCreate(ctx, u); err != nil {
		if u.MultipartID != "" {
			b.drop(ctx, u)
		}
		return nil, err
	}
	return up, nil
}

// presignUpload presigns the requests of u: the parts req hashed (a
// multipart upload), where the store takes u's size in parts, or else one
// PUT.
func (b *jobBroker) presignUpload(ctx context.Context, u *PendingUpload, up *Upload, req UploadRequest) error {
	s := b.s
	ttl := s.cfg.UploadTTL
	if threshold := s.cfg.Blobs.MultipartMin(); threshold > 0 && u.Size >= threshold && len(req.PartSHA256) > 1 {
		if req.PartSize < MinPartSize || int64(len(req.PartSHA256)) != (u.Size+req.PartSize-1)/req.PartSize {
			return refused("%d part digests of %d bytes do not cut an archive of %d bytes (parts are at least %d bytes)", len(req.PartSHA256), req.PartSize, u.Size, MinPartSize)
		}
		for _, sum := range req.PartSHA256 {
			if err := checkDigest(sum); err != nil {
				return err
			}
		}
		sizes := make([]int64, 0, len(req.PartSHA256))
		for left := u.Size; left > 0; left -= req.PartSize {
			sizes = append(sizes, min(req.PartSize, left))
		}
		id, parts, err := s.cfg.Blobs.CreateMultipart(ctx, u.BlobKey, sizes, req.PartSHA256, ttl)
		if err != nil {
			return fmt.Errorf("starting a multipart upload: %w", err)
		}
		u.MultipartID, up.Parts, up.PartSize = id, parts, req.PartSize
		return nil
	}
	r, err := s.cfg.Blobs.PresignPut(ctx, u.BlobKey, u.Size, u.SHA256, ttl)
	if err != nil {
		return fmt.Errorf("presigning the upload: %w", err)
	}
	up.Parts, up.PartSize = []Request{r}, u.Size
	return nil
}

// Errors of jobBroker.upload, both matching ErrRefused.
var (
	errNoUpload = fmt.Errorf("%w: unknown upload", ErrRefused)
	errOtherJob = fmt.Errorf("%w: another job's upload", ErrRefused)
)

// upload returns the upload id of this job attempt.
func (b *jobBroker) upload(ctx context.Context, id string) (*PendingUpload, error) {
	if id == "" || len(id) > 64 {
		return nil, refused("the upload ID %q is not one", cut(id, 70))
	}
	u, err := b.s.cfg.Manifest.UploadGet(ctx, id)
	if errors.Is(err, cikit.ErrNotFound) {
		return nil, fmt.Errorf("%w: no upload %s is in progress: it was completed, aborted, or never reserved", errNoUpload, id)
	}
	if err != nil {
		return nil, err
	}
	if u.RunID != b.ref.RunID || u.JobID != b.ref.JobID || u.Attempt != b.ref.Attempt {
		return nil, fmt.Errorf("%w: upload %s belongs to another job attempt", errOtherJob, id)
	}
	if u.Aborted {
		return nil, fmt.Errorf("%w: upload %s was aborted or refused", errNoUpload, id)
	}
	return u, nil
}

// CompleteUpload implements Broker. A runner that sends a completion
// again, not knowing whether the first arrived (its answer was lost), is
// answered as the first was: the artifact recorded from the upload,
// whose ID is the upload's.
func (b *jobBroker) CompleteUpload(ctx context.Context, req CompleteRequest) (*Artifact, error) {
	s := b.s
	u, err := b.upload(ctx, req.UploadID)
	if errors.Is(err, errNoUpload) {
		if a, ferr := b.completed(ctx, req.UploadID); a != nil || ferr != nil {
			return a, ferr
		}
	}
	if err != nil {
		return nil, err
	}
	now := s.cfg.Now()
	if !now.Before(u.ExpiresAt) {
		b.drop(ctx, u)
		return nil, refused("upload %s expired at %s", u.ID, u.ExpiresAt.UTC().Format(time.RFC3339))
	}
	verified := false
	if u.MultipartID != "" {
		if len(req.ETags) == 0 || len(req.ETags) > MaxParts {
			return nil, refused("upload %s is in parts: give 1 to %d ETags, got %d", u.ID, MaxParts, len(req.ETags))
		}
		// A completion sent again finds the parts joined already: what
		// they made is then verified as any archive is.
		if err := s.cfg.Blobs.CompleteMultipart(ctx, u.BlobKey, u.MultipartID, req.ETags); err != nil {
			if verr := s.cfg.Blobs.Verify(ctx, u.BlobKey, u.Size, u.SHA256); verr != nil {
				b.drop(ctx, u)
				return nil, refused("joining the parts of upload %s: %v", u.ID, err)
			}
			verified = true
		}
	}
	if !verified {
		err = s.cfg.Blobs.Verify(ctx, u.BlobKey, u.Size, u.SHA256)
	}
	if err != nil {
		b.drop(ctx, u)
		if errors.Is(err, cikit.ErrNotFound) {
			return nil, refused("nothing was uploaded for upload %s", u.ID)
		}
		if errors.Is(err, ErrRefused) {
			return nil, fmt.Errorf("upload %s: %w", u.ID, err)
		}
		return nil, err
	}
	if u.Cache {
		return b.completeCache(ctx, u, now)
	}
	a := &Artifact{ID: u.ID, Repo: u.Repo, DefaultBranch: b.ref.DefaultBranch, RunID: u.RunID, JobID: u.JobID, Attempt: u.Attempt,
		Name: u.Name, Type: u.Type, Report: u.Report, Size: u.Size, SHA256: u.SHA256, Files: u.Files, BlobKey: u.BlobKey, CreatedAt: now}
	if exp := s.expiry(u.ExpireIn); exp > 0 {
		a.ExpiresAt = now.Add(exp)
	}
	// As the manifest keeps them, so that a completion sent again is
	// answered the same.
	a.CreatedAt, a.ExpiresAt = storedTime(a.CreatedAt), storedTime(a.ExpiresAt)
	replaced, err := s.cfg.Manifest.UploadFinish(ctx, u.ID, a, u.Overwrite)
	if err != nil {
		if errors.Is(err, cikit.ErrNotFound) {
			if a, ferr := b.completed(ctx, u.ID); a != nil || ferr != nil {
				return a, ferr
			}
			return nil, refused("upload %s was aborted meanwhile", u.ID)
		}
		if errors.Is(err, ErrRefused) {
			b.drop(ctx, u)
		}
		return nil, err
	}
	if replaced != nil {
		s.deleteBlob(ctx, replaced.BlobKey)
	}
	shown := *a
	shown.Name = shownName(shown)
	return &shown, nil
}

// completed returns what this job attempt recorded from upload id, as
// CompleteUpload answered it: the artifact, or the cache entry in the
// job's scope; nil when there is none (or no longer: an entry evicted
// since).
func (b *jobBroker) completed(ctx context.Context, id string) (*Artifact, error) {
	ref := b.ref
	list, err := b.s.cfg.Manifest.ArtifactsList(ctx, ArtifactFilter{RunID: ref.RunID, JobIDs: []string{ref.JobID}, Attempt: ref.Attempt})
	if err != nil {
		return nil, err
	}
	for _, a := range list {
		if a.ID == id {
			a.Name = shownName(a)
			return &a, nil
		}
	}
	entries, err := b.s.cfg.Index.CacheList(ctx, ref.Repo)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.UploadID == id && e.Scope == ref.Scope {
			return cacheArtifact(ref, &e), nil
		}
	}
	return nil, nil
}

// cacheArtifact is what CompleteUpload answers for cache entry e that
// job ref saved.
func cacheArtifact(ref JobRef, e *CacheEntry) *Artifact {
	return &Artifact{ID: e.UploadID, Repo: e.Repo, RunID: ref.RunID, JobID: ref.JobID, Attempt: ref.Attempt, Name: e.Key,
		Size: e.Size, SHA256: e.SHA256, BlobKey: e.BlobKey, CreatedAt: storedTime(e.CreatedAt)}
}

// completeCache records the cache entry of upload u, whose archive was
// verified. The archive is content addressed and may be another entry's:
// a pruner evicting that entry, finding no other that uses the archive,
// may delete it as this entry is recorded. The archive is therefore
// looked for again once the entry is (see Service.deleteCacheBlob for
// the pruner's side).
func (b *jobBroker) completeCache(ctx context.Context, u *PendingUpload, now time.Time) (*Artifact, error) {
	s := b.s
	e := &CacheEntry{Repo: u.Repo, Scope: u.Scope, Key: u.Name, SHA256: u.SHA256, Size: u.Size, BlobKey: u.BlobKey, CreatedAt: now, UploadID: u.ID}
	if err := s.cfg.Index.CacheInsert(ctx, e); err != nil {
		if errors.Is(err, ErrCacheExists) {
			b.drop(ctx, u)
		}
		return nil, err
	}
	if _, err := s.cfg.Blobs.Stat(ctx, u.BlobKey); err != nil {
		if !errors.Is(err, cikit.ErrNotFound) {
			return nil, err
		}
		if _, err := s.cfg.Index.CacheDeleteBlob(ctx, u.BlobKey); err != nil {
			return nil, err
		}
		b.drop(ctx, u)
		return nil, refused("the archive of upload %s was deleted as the cache entry was saved: a pruner found no entry using it", u.ID)
	}
	if _, err := s.cfg.Manifest.UploadDelete(ctx, u.ID); err != nil {
		s.log.Warn("artifacts: forgetting a completed cache upload", "upload", u.ID, "err", err)
	}
	return cacheArtifact(b.ref, e), nil
}

// expiry is how long an artifact asking for asked is kept; 0 for ever.
func (s *Service) expiry(asked time.Duration) time.Duration {
	switch {
	case asked == 0:
		return s.cfg.ExpireIn
	case asked < 0 && s.cfg.MaxExpireIn > 0:
		return s.cfg.MaxExpireIn
	case asked < 0:
		return 0
	case s.cfg.MaxExpireIn > 0:
		return min(asked, s.cfg.MaxExpireIn)
	}
	return asked
}

// drop forgets upload u and deletes what it stored, on a context of its
// own: the request's may be what failed.
func (b *jobBroker) drop(ctx context.Context, u *PendingUpload) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
	defer cancel()
	b.s.discard(ctx, u)
	// The upload's presigned requests stay valid until they expire: one
	// sent again would store its blob anew. The upload is kept, aborted,
	// until then, for the pruner to delete that blob (dropUpload).
	if _, err := b.s.cfg.Manifest.UploadAbort(ctx, u.ID); err != nil {
		b.s.log.Warn("artifacts: marking an upload aborted", "upload", u.ID, "err", err)
	}
}

// discard aborts a multipart upload and deletes the blob an upload
// stored, unless it was there before (Stored) or a cache entry shares it.
func (s *Service) discard(ctx context.Context, u *PendingUpload) {
	if u.MultipartID != "" {
		if err := s.cfg.Blobs.AbortMultipart(ctx, u.BlobKey, u.MultipartID); err != nil {
			s.log.Warn("artifacts: aborting a multipart upload", "upload", u.ID, "err", err)
		}
	}
	switch {
	case u.Stored:
	case u.Cache:
		shared, err := s.cfg.Index.CacheHasDigest(ctx, u.Repo, u.Scope, u.SHA256)
		if err == nil && !shared {
			if _, err := s.deleteCacheBlob(ctx, u.BlobKey); err != nil {
				s.log.Warn("artifacts: deleting the archive of a dropped cache upload", "upload", u.ID, "err", err)
			}
		}
	default:
		s.deleteBlob(ctx, u.BlobKey)
	}
}

// dropUpload discards an upload whose requests have expired, abandoned
// or aborted, and forgets it. It reports whether this call forgot it: of
// two pruners dropping one upload at once, one does.
func (s *Service) dropUpload(ctx context.Context, u *PendingUpload) bool {
	s.discard(ctx, u)
	deleted, err := s.cfg.Manifest.UploadDelete(ctx, u.ID)
	if err != nil {
		s.log.Warn("artifacts: forgetting an upload", "upload", u.ID, "err", err)
	}
	return deleted
}

// deleteCacheBlob deletes a cache archive that no entry was found to
// use, then the entries saved over it meanwhile, which it returns: such
// an entry's save found the archive before it was deleted (see
// jobBroker.completeCache).
func (s *Service) deleteCacheBlob(ctx context.Context, key string) ([]CacheEntry, error) {
	if err := s.cfg.Blobs.Delete(ctx, key); err != nil {
		return nil, err
	}
	return s.cfg.Index.CacheDeleteBlob(ctx, key)
}

func (s *Service) deleteBlob(ctx context.Context, key string) {
	if err := s.cfg.Blobs.Delete(ctx, key); err != nil {
		s.log.Warn("artifacts: deleting a blob", "key", key, "err", err)
	}
}

// AbortUpload implements Broker.
func (b *jobBroker) AbortUpload(ctx context.Context, uploadID string) error {
	u, err := b.upload(ctx, uploadID)
	if errors.Is(err, errNoUpload) {
		return nil // unknown or completed: nothing to abort
	}
	if err != nil {
		return err
	}
	b.drop(ctx, u)
	return nil
}

// ListArtifacts implements Broker.
func (b *jobBroker) ListArtifacts(ctx context.Context, req ListRequest) ([]Artifact, error) {
	s, ref := b.s, b.ref
	if req.Name != "" {
		if err := checkRequestName("artifact name", req.Name); err != nil {
			return nil, err
		}
	}
	if len(req.Jobs) > 1000 {
		return nil, refused("at most 1000 jobs may be listed at once, got %d", len(req.Jobs))
	}
	jobs := req.Jobs
	if ref.Needs != nil {
		for _, j := range jobs {
			if !slices.Contains(ref.Needs, j) {
				return nil, refused("job %q is not one this job needs: it may download the artifacts of %s only", cut(j, 100), needList(ref.Needs))
			}
		}
		if len(jobs) == 0 {
			if len(ref.Needs) == 0 {
				return nil, nil
			}
			jobs = ref.Needs
		}
	}
	f := ArtifactFilter{RunID: ref.RunID, JobIDs: jobs, Name: req.Name, Type: req.Type}
	if ref.Needs != nil {
		// The manifest names a native or GitLab job's artifacts
		// "JOB/NAME", a GitHub job's NAME: the name asked for is the
		// name shown.
		f.Name = ""
	}
	list, err := s.cfg.Manifest.ArtifactsList(ctx, f)
	if err != nil {
		return nil, err
	}
	if req.Name != "" && f.Name == "" {
		list = slices.DeleteFunc(list, func(a Artifact) bool { return shownName(a) != req.Name })
	}
	return s.downloads(ctx, latestAttempts(s.live(list)))
}

func needList(needs []string) string {
	if len(needs) == 0 {
		return "no job (it needs none)"
	}
	q := make([]string, len(needs))
	for i, n := range needs {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}

// latestAttempts keeps, of each job's artifacts, those of its latest
// attempt that has any: a retried job's dependents get what the attempt
// that ended it made. list is ordered by job, attempt and name.
func latestAttempts(list []Artifact) []Artifact {
	latest := map[string]int{}
	for _, a := range list {
		latest[a.JobID] = max(latest[a.JobID], a.Attempt)
	}
	return slices.DeleteFunc(list, func(a Artifact) bool { return a.Attempt != latest[a.JobID] })
}

// LookupCache implements Broker.
func (b *jobBroker) LookupCache(ctx context.Context, q CacheQuery) (*CacheHit, error) {
	s, ref := b.s, b.ref
	if err := checkRequestName("cache key", q.Key); err != nil {
		return nil, err
	}
	if n := len(q.FallbackKeys) + len(q.RestoreKeys); n > MaxRestoreKeys {
		return nil, refused("a lookup may try at most %d fallback and restore keys, got %d", MaxRestoreKeys, n)
	}
	for _, k := range q.FallbackKeys {
		if err := checkRequestName("fallback key", k); err != nil {
			return nil, err
		}
	}
	for _, k := range q.RestoreKeys {
		if err := checkRequestName("restore key", k); err != nil {
			return nil, err
		}
	}
	e, err := s.cfg.Index.CacheLookup(ctx, IndexQuery{Repo: ref.Repo, Scopes: ref.ReadScopes, CacheQuery: q}, s.cfg.Now())
	if err != nil || e == nil {
		return nil, err
	}
	r, err := s.cfg.Blobs.PresignGet(ctx, e.BlobKey, s.cfg.DownloadTTL)
	if err != nil {
		return nil, fmt.Errorf("presigning the download of cache %q: %w", e.Key, err)
	}
	return &CacheHit{Key: e.Key, Exact: e.Key == q.Key, Scope: e.Scope, Size: e.Size, SHA256: e.SHA256, Download: r}, nil
}

// requestSkew is how long after an upload's expiry its presigned
// requests may still be taken, by a blob store whose clock is behind:
// the pruner waits that long before it deletes what they stored.
const requestSkew = time.Minute

// PruneStats says what one Prune removed.
type PruneStats struct {
	// Artifacts and ArtifactBytes count the expired artifacts deleted.
	Artifacts     int
	ArtifactBytes int64
	// CacheEntries and CacheBytes count the cache entries evicted.
	CacheEntries int
	CacheBytes   int64
	// Uploads counts the uploads cleaned up once their requests expired,
	// abandoned or aborted (their parts aborted, what they stored
	// deleted).
	Uploads int
	// Blobs counts the blobs deleted.
	Blobs int
}

// Prune deletes what has expired: artifacts past their expiry (but the
// latest of each default branch, with KeepLatestDefault), uploads
// reserved and never completed (their parts aborted), and cache entries
// not hit for CacheMaxAge or beyond each repository's CacheBudget, least
// recently hit first, in batches of PruneBatch. It deletes an artifact's
// blob before its row, so that a pruner that dies leaves nothing a later
// one cannot finish, and several servers may prune at once; an evicted
// cache entry's row goes first, then the blob once no entry refers to
// it (a blob whose delete failed stays, and a later save of the same
// content reuses it), then any entry saved over that blob meanwhile,
// which would refer to nothing. Its counts are of what this call
// removed: of several pruners at once, each removal is counted by one.
// It returns what it removed, also when it fails part way.
func (s *Service) Prune(ctx context.Context) (PruneStats, error) {
	var st PruneStats
	now := s.cfg.Now()
	for {
		list, err := s.cfg.Manifest.ArtifactsExpired(ctx, now, s.cfg.PruneBatch, s.cfg.KeepLatestDefault)
		if err != nil {
			return st, fmt.Errorf("listing expired artifacts: %w", err)
		}
		if len(list) == 0 {
			break
		}
		ids := make([]string, len(list))
		sizes := make(map[string]int64, len(list))
		for i, a := range list {
			if err := s.cfg.Blobs.Delete(ctx, a.BlobKey); err != nil {
				return st, fmt.Errorf("deleting the archive of artifact %s: %w", a.ID, err)
			}
			ids[i], sizes[a.ID] = a.ID, a.Size
		}
		// Of several pruners deleting one artifact, the one whose delete
		// removed its row counts it.
		deleted, err := s.cfg.Manifest.ArtifactsDelete(ctx, ids)
		if err != nil {
			return st, fmt.Errorf("deleting expired artifacts: %w", err)
		}
		for _, id := range deleted {
			st.Artifacts++
			st.ArtifactBytes += sizes[id]
			st.Blobs++
		}
		if len(list) < s.cfg.PruneBatch {
			break
		}
	}
	for {
		list, err := s.cfg.Manifest.UploadsExpired(ctx, now.Add(-requestSkew), s.cfg.PruneBatch)
		if err != nil {
			return st, fmt.Errorf("listing abandoned uploads: %w", err)
		}
		for i := range list {
			if s.dropUpload(ctx, &list[i]) {
				st.Uploads++
			}
		}
		if len(list) < s.cfg.PruneBatch {
			break
		}
	}
	budget, olderThan := s.cfg.CacheBudget, now.Add(-s.cfg.CacheMaxAge)
	if budget < 0 {
		budget = 0
	}
	if s.cfg.CacheMaxAge < 0 {
		olderThan = time.Time{}
	}
	for {
		removed, orphans, err := s.cfg.Index.CacheEvict(ctx, budget, olderThan, s.cfg.PruneBatch)
		if err != nil {
			return st, fmt.Errorf("evicting cache entries: %w", err)
		}
		for _, e := range removed {
			st.CacheEntries++
			st.CacheBytes += e.Size
		}
		for _, key := range orphans {
			saved, err := s.deleteCacheBlob(ctx, key)
			if err != nil {
				return st, fmt.Errorf("deleting an evicted cache archive: %w", err)
			}
			st.Blobs++
			for _, e := range saved {
				st.CacheEntries++
				st.CacheBytes += e.Size
			}
		}
		if len(removed) < s.cfg.PruneBatch {
			break
		}
	}
	return st, nil
}

// JobScopes returns the cache scopes of a job of spec in a run of rc
// whose scopes are otherwise write and read (as Scopes returns them).
// When the job's Admission sets a CacheScope (the platform's policy
// decided it), the job writes that scope whatever rc says, and reads it
// first, then its base branch's, as a fork's pull request does: a pull
// request's base branch, else rc's default branch. Otherwise write and
// read are returned as they are.
func JobScopes(rc *cikit.RunContext, spec *cikit.JobSpec, write string, read []string) (string, []string) {
	if spec == nil || spec.Admission == nil || spec.Admission.CacheScope == "" {
		return write, read
	}
	scope := spec.Admission.CacheScope
	read = []string{scope}
	if rc != nil {
		base := rc.DefaultBranch
		if rc.PRNumber > 0 {
			base = rc.BaseRef
		}
		if b := "branch/" + base; base != "" && b != scope {
			read = append(read, b)
		}
	}
	return scope, read
}

// JobRefFor returns the JobRef of attempt attempt of job spec in run
// runID, whose context is rc: its repository, the cache scopes rc gives
// (Scopes) or its Admission sets (JobScopes), and the jobs whose artifacts it may download — those it
// needs, but GitLab's needs:artifacts:false and dependencies (NoArtifactsFrom),
// or, for a GitHub job, every job of the run, GitHub's artifacts
// belonging to the run.
func JobRefFor(rc *cikit.RunContext, runID string, spec *cikit.JobSpec, attempt int) JobRef {
	ref := JobRef{RunID: runID, JobID: spec.ID, Attempt: attempt}
	write, read := Scopes(rc)
	ref.Scope, ref.ReadScopes = JobScopes(rc, spec, write, read)
	if rc != nil {
		ref.Repo = rc.Repository
		ref.DefaultBranch = rc.RefType == "branch" && rc.RefName != "" && rc.RefName == rc.DefaultBranch && rc.PRNumber == 0
	}
	if spec.Format != "github" {
		ref.Needs = make([]string, 0, len(spec.Needs))
		for _, n := range spec.Needs {
			if !slices.Contains(spec.NoArtifactsFrom, n) {
				ref.Needs = append(ref.Needs, n)
			}
		}
	}
	return ref
}
