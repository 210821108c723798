package artifacts_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/artifacts"
	"github.com/cikit/cikit/internal/pgtest"
	"github.com/cikit/cikit/internal/s3test"
)

// Multipart uploads of the service tests: S3's smallest parts, from a
// little more than one.
const (
	svcPartSize  = artifacts.MinPartSize
	svcThreshold = artifacts.MinPartSize + 1
)

// svcBundle is a Service over a blob store behind presigned requests and
// manifest and cache index stores, with the clock of all three.
type svcBundle struct {
	svc      *artifacts.Service
	tr       *transfer
	manifest artifacts.Manifest
	index    artifacts.CacheIndex
	sender   *artifacts.Sender
}

// svcStores says which Manifest and CacheIndex a bundle runs on.
type svcStores int

const (
	postgresStores svcStores = iota
	memoryStores
)

func (s svcStores) String() string { return [...]string{"postgres", "memory"}[s] }

// setupService returns a Service over the blob store of tr and stores
// st, configured by mod (nil for the defaults).
func setupService(t *testing.T, tr *transfer, st svcStores, mod func(*artifacts.ServiceConfig)) *svcBundle {
	t.Helper()
	b := &svcBundle{tr: tr, sender: &artifacts.Sender{HTTP: tr.client, PartSize: svcPartSize, Parallel: 2}}
	switch st {
	case postgresStores:
		b.manifest, b.index = newPostgresStores(t)
	case memoryStores:
		b.manifest, b.index = artifacts.NewMemoryManifest(), artifacts.NewMemoryCacheIndex()
	}
	b.svc = b.newService(t, mod)
	return b
}

// newService returns another Service over b's stores.
func (b *svcBundle) newService(t *testing.T, mod func(*artifacts.ServiceConfig)) *artifacts.Service {
	t.Helper()
	cfg := artifacts.ServiceConfig{Blobs: b.tr.store, Manifest: b.manifest, Index: b.index, Now: b.tr.clock.Now}
	if mod != nil {
		mod(&cfg)
	}
	svc, err := artifacts.NewService(cfg)
	require.NoError(t, err)
	return svc
}

// newPostgresStores returns a manifest and a cache index in one new
// schema.
func newPostgresStores(t *testing.T) (*artifacts.PostgresManifest, *artifacts.PostgresCacheIndex) {
	t.Helper()
	db := pgtest.New(t)
	m, err := artifacts.NewPostgresManifest(db.Pool)
	require.NoError(t, err)
	require.NoError(t, m.Migrate(t.Context()))
	c, err := artifacts.NewPostgresCacheIndex(db.Pool)
	require.NoError(t, err)
	return m, c
}

// setupS3Service is setupService over s3test, uploading in parts from
// svcThreshold.
func setupS3Service(t *testing.T, st svcStores, mod func(*artifacts.ServiceConfig)) *svcBundle {
	t.Helper()
	c := newClock()
	srv := s3test.NewWith(t, s3test.Options{Buckets: []string{"blobs"}, Now: c.Now})
	cfg := srv.Config("blobs")
	cfg.PartSize = svcPartSize
	cfg.MultipartThreshold = svcThreshold
	store, err := artifacts.NewS3Store(t.Context(), cfg)
	require.NoError(t, err)
	return setupService(t, &transfer{store: store, client: cfg.HTTPClient, clock: c, s3: srv}, st, mod)
}

var serviceSetups = []struct {
	name  string
	setup func(t *testing.T, st svcStores, mod func(*artifacts.ServiceConfig)) *svcBundle
}{
	{"s3", setupS3Service},
	{"file", func(t *testing.T, st svcStores, mod func(*artifacts.ServiceConfig)) *svcBundle {
		return setupService(t, setupFileTransfer(t), st, mod)
	}},
}

// ref is the JobRef of attempt 1 of job in run, of repository acme/api,
// saving caches in the main branch's scope.
func ref(run, job string) artifacts.JobRef {
	return artifacts.JobRef{Repo: "acme/api", RunID: run, JobID: job, Attempt: 1, Scope: "branch/main", ReadScopes: []string{"branch/main"}}
}

// pending returns the manifest's record of upload id.
func (b *svcBundle) pending(t *testing.T, id string) *artifacts.PendingUpload {
	t.Helper()
	u, err := b.manifest.UploadGet(t.Context(), id)
	require.NoError(t, err)
	return u
}

// put sends the one request of up with body and returns its status.
func (b *svcBundle) put(t *testing.T, up *artifacts.Upload, body []byte) int {
	t.Helper()
	require.Len(t, up.Parts, 1)
	status, _ := send(t, b.tr.client, up.Parts[0], body)
	return status
}

// upload uploads data as req (its Size and SHA256 set from data) for
// job ref, through the Sender.
func (b *svcBundle) upload(t *testing.T, r artifacts.JobRef, req artifacts.UploadRequest, data []byte) (*artifacts.Artifact, error) {
	t.Helper()
	req.Size, req.SHA256 = int64(len(data)), sha(data)
	return b.sender.Upload(t.Context(), b.svc.ForJob(r), req, bytes.NewReader(data))
}

// requireNothing checks that nothing of run's, of repository acme/api
// or of upload id is recorded (but the upload, aborted), and that blob
// key and any multipart upload are gone.
func (b *svcBundle) requireNothing(t *testing.T, run, id, key string) {
	t.Helper()
	ctx := t.Context()
	list, err := b.manifest.ArtifactsList(ctx, artifacts.ArtifactFilter{RunID: run})
	require.NoError(t, err)
	require.Empty(t, list, "no artifact is recorded")
	if u, err := b.manifest.UploadGet(ctx, id); err == nil {
		require.True(t, u.Aborted, "the upload is kept only aborted, for the pruner to sweep once its requests expire")
	} else {
		require.ErrorIs(t, err, cikit.ErrNotFound, "the upload is forgotten")
	}
	entries, err := b.index.CacheList(ctx, "acme/api")
	require.NoError(t, err)
	require.Empty(t, entries, "no cache entry is recorded")
	b.requireNoBlob(t, key)
}

// requireNoBlob checks that blob key and any multipart upload are gone.
func (b *svcBundle) requireNoBlob(t *testing.T, key string) {
	t.Helper()
	_, err := b.tr.store.Stat(t.Context(), key)
	require.ErrorIs(t, err, cikit.ErrNotFound, "blob %s is deleted", key)
	if b.tr.s3 != nil {
		require.Empty(t, listUploads(t, b.tr.s3), "no multipart upload is left")
	}
}

// requireDownload checks that artifact name of job r downloads as data
// for a job that needs r's.
func (b *svcBundle) requireDownload(t *testing.T, r artifacts.JobRef, name string, data []byte) {
	t.Helper()
	next := ref(r.RunID, "next")
	next.Needs = []string{r.JobID}
	list, err := b.svc.ForJob(next).ListArtifacts(t.Context(), artifacts.ListRequest{Jobs: next.Needs, Name: name})
	require.NoError(t, err)
	require.Len(t, list, 1, "artifact %s", name)
	var out bytes.Buffer
	require.NoError(t, b.sender.Download(t.Context(), *list[0].Download, list[0].Size, list[0].SHA256, &out))
	require.True(t, bytes.Equal(data, out.Bytes()), "artifact %s downloads as it was uploaded", name)
	require.Equal(t, sha(data), list[0].SHA256)
}

// TestServiceRefusesTampering: a job's upload that is not what it
// reserved, or that it sends or completes past its time, is refused
// with ErrRefused; the refusal records nothing and deletes what was
// stored. Each case runs for an artifact and for a cache entry, on
// both blob stores.
func TestServiceRefusesTampering(t *testing.T) {
	t.Parallel()
	data, _ := blob(1, 3000)
	other, _ := blob(2, 3000)
	cases := []struct {
		name string
		// tamper does something else than send data through up, the
		// upload of u, and returns the status of what it sent (0 for
		// nothing sent through up).
		tamper func(t *testing.T, b *svcBundle, up *artifacts.Upload, u *artifacts.PendingUpload) int
		// status is what the store answers tamper's request.
		s3, file int
		// errHas is in the refusal of the completion.
		errHas string
	}{
		{
			name: "never sent",
			tamper: func(*testing.T, *svcBundle, *artifacts.Upload, *artifacts.PendingUpload) int {
				return 0
			},
			errHas: "nothing was uploaded",
		},
		{
			name: "other bytes through the request",
			tamper: func(t *testing.T, b *svcBundle, up *artifacts.Upload, _ *artifacts.PendingUpload) int {
				return b.put(t, up, other)
			},
			s3: http.StatusBadRequest, file: http.StatusBadRequest, errHas: "nothing was uploaded",
		},
		{
			name: "fewer bytes through the request",
			tamper: func(t *testing.T, b *svcBundle, up *artifacts.Upload, _ *artifacts.PendingUpload) int {
				return b.put(t, up, data[:len(data)-1])
			},
			s3: http.StatusBadRequest, file: http.StatusBadRequest, errHas: "nothing was uploaded",
		},
		{
			// What a store that checks nothing, or a writer of the
			// bucket's, would take.
			name: "wrong size stored",
			tamper: func(t *testing.T, b *svcBundle, _ *artifacts.Upload, u *artifacts.PendingUpload) int {
				require.NoError(t, b.tr.store.Put(t.Context(), u.BlobKey, bytes.NewReader(data[1:]), int64(len(data)-1)))
				return 0
			},
			errHas: "2999 bytes long, expected 3000",
		},
		{
			name: "wrong SHA-256 stored",
			tamper: func(t *testing.T, b *svcBundle, _ *artifacts.Upload, u *artifacts.PendingUpload) int {
				require.NoError(t, b.tr.store.Put(t.Context(), u.BlobKey, bytes.NewReader(other), int64(len(other))))
				return 0
			},
			errHas: "SHA-256",
		},
		{
			name: "sent after the request expired",
			tamper: func(t *testing.T, b *svcBundle, up *artifacts.Upload, _ *artifacts.PendingUpload) int {
				b.tr.clock.Advance(artifacts.DefaultUploadTTL + time.Minute)
				return b.put(t, up, data)
			},
			s3: http.StatusForbidden, file: http.StatusForbidden, errHas: "expired",
		},
		{
			name: "completed after the upload expired",
			tamper: func(t *testing.T, b *svcBundle, up *artifacts.Upload, _ *artifacts.PendingUpload) int {
				status := b.put(t, up, data)
				b.tr.clock.Advance(artifacts.DefaultUploadTTL)
				return status
			},
			s3: http.StatusOK, file: http.StatusOK, errHas: "expired",
		},
		{
			// Another job's request, given this job's bytes.
			name: "sent through another job's request",
			tamper: func(t *testing.T, b *svcBundle, _ *artifacts.Upload, u *artifacts.PendingUpload) int {
				otherUp, err := b.svc.ForJob(ref("run-2", "lint")).CreateUpload(t.Context(),
					artifacts.UploadRequest{Name: "lint", Cache: u.Cache, Size: int64(len(other)), SHA256: sha(other)})
				require.NoError(t, err)
				return b.put(t, otherUp, data)
			},
			s3: http.StatusBadRequest, file: http.StatusBadRequest, errHas: "nothing was uploaded",
		},
	}
	for _, ss := range serviceSetups {
		for _, cache := range []bool{false, true} {
			kind := map[bool]string{false: "artifact", true: "cache"}[cache]
			for _, tc := range cases {
				t.Run(ss.name+"/"+kind+"/"+tc.name, func(t *testing.T) {
					t.Parallel()
					b := ss.setup(t, memoryStores, nil)
					ctx := t.Context()
					broker := b.svc.ForJob(ref("run-1", "build"))
					up, err := broker.CreateUpload(ctx, artifacts.UploadRequest{Name: "dist", Cache: cache, Size: int64(len(data)), SHA256: sha(data)})
					require.NoError(t, err)
					require.False(t, up.Stored)
					u := b.pending(t, up.ID)
					status := tc.tamper(t, b, up, u)
					want := map[bool]int{true: tc.s3, false: tc.file}[b.tr.s3 != nil]
					require.Equal(t, want, status, "the store's answer")

					_, err = broker.CompleteUpload(ctx, artifacts.CompleteRequest{UploadID: up.ID})
					require.ErrorIs(t, err, artifacts.ErrRefused)
					require.ErrorContains(t, err, tc.errHas)
					b.requireNothing(t, "run-1", up.ID, u.BlobKey)
					_, err = broker.CompleteUpload(ctx, artifacts.CompleteRequest{UploadID: up.ID})
					require.ErrorIs(t, err, artifacts.ErrRefused, "completing again")
					b.requireNothing(t, "run-1", up.ID, u.BlobKey)
				})
			}
		}
	}
}

// TestServiceRefusesAnotherJob: an attempt can neither complete nor
// abort another's upload (another job's, or an earlier attempt of its
// own job's); the refusal leaves the upload to its attempt, which then
// completes it.
func TestServiceRefusesAnotherJob(t *testing.T) {
	t.Parallel()
	data, _ := blob(1, 3000)
	retry := ref("run-1", "build")
	retry.Attempt = 2
	others := map[string]artifacts.JobRef{
		"another job":                ref("run-1", "test"),
		"another run's job":          ref("run-2", "build"),
		"a later attempt of the job": retry,
	}
	for _, ss := range serviceSetups {
		for name, other := range others {
			t.Run(ss.name+"/"+name, func(t *testing.T) {
				t.Parallel()
				b := ss.setup(t, postgresStores, nil)
				ctx := t.Context()
				owner := b.svc.ForJob(ref("run-1", "build"))
				up, err := owner.CreateUpload(ctx, artifacts.UploadRequest{Name: "dist", Size: int64(len(data)), SHA256: sha(data)})
				require.NoError(t, err)
				require.Equal(t, http.StatusOK, b.put(t, up, data))

				thief := b.svc.ForJob(other)
				_, err = thief.CompleteUpload(ctx, artifacts.CompleteRequest{UploadID: up.ID})
				require.ErrorIs(t, err, artifacts.ErrRefused)
				require.ErrorContains(t, err, "belongs to another job attempt")
				require.ErrorIs(t, thief.AbortUpload(ctx, up.ID), artifacts.ErrRefused)
				list, err := b.manifest.ArtifactsList(ctx, artifacts.ArtifactFilter{RunID: other.RunID})
				require.NoError(t, err)
				require.Empty(t, list, "nothing is recorded for the other job")

				a, err := owner.CompleteUpload(ctx, artifacts.CompleteRequest{UploadID: up.ID})
				require.NoError(t, err, "the upload is still its owner's")
				b.requireDownload(t, ref("run-1", "build"), "dist", data)

				_, err = thief.CompleteUpload(ctx, artifacts.CompleteRequest{UploadID: up.ID})
				require.ErrorIs(t, err, artifacts.ErrRefused, "a completed upload is not another job's to complete either")
				require.NoError(t, thief.AbortUpload(ctx, up.ID), "a completed upload is nobody's to abort")
				got, err := owner.CompleteUpload(ctx, artifacts.CompleteRequest{UploadID: up.ID})
				require.NoError(t, err)
				require.Equal(t, a.ID, got.ID)
			})
		}
	}
}

// TestServiceRefusesReplay: an upload's request sent again, after the
// upload completed, is refused by the store and changes nothing.
func TestServiceRefusesReplay(t *testing.T) {
	t.Parallel()
	data, _ := blob(1, 3000)
	for _, ss := range serviceSetups {
		t.Run(ss.name, func(t *testing.T) {
			t.Parallel()
			b := ss.setup(t, memoryStores, nil)
			ctx := t.Context()
			broker := b.svc.ForJob(ref("run-1", "build"))
			up, err := broker.CreateUpload(ctx, artifacts.UploadRequest{Name: "dist", Size: int64(len(data)), SHA256: sha(data)})
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, b.put(t, up, data))
			_, err = broker.CompleteUpload(ctx, artifacts.CompleteRequest{UploadID: up.ID})
			require.NoError(t, err)

			status := b.put(t, up, data)
			require.Contains(t, []int{http.StatusConflict, http.StatusPreconditionFailed}, status, "the same request again")
			b.requireDownload(t, ref("run-1", "build"), "dist", data)
		})
	}
}

// TestServiceSweepsReplaysAfterAbort: presigned requests cannot be
// revoked, so a request sent again after its upload was aborted or
// refused stores its blob anew. The upload is kept, aborted and not
// completable, until its requests expire; the pruner then deletes that
// blob and forgets the upload.
func TestServiceSweepsReplaysAfterAbort(t *testing.T) {
	t.Parallel()
	data, _ := blob(1, 3000)
	for _, ss := range serviceSetups {
		for _, how := range []string{"aborted", "refused"} {
			for _, st := range []svcStores{memoryStores, postgresStores} {
				t.Run(ss.name+"/"+how+"/"+st.String(), func(t *testing.T) {
					t.Parallel()
					b := ss.setup(t, st, nil)
					ctx := t.Context()
					broker := b.svc.ForJob(ref("run-1", "build"))
					up, err := broker.CreateUpload(ctx, artifacts.UploadRequest{Name: "dist", Size: int64(len(data)), SHA256: sha(data)})
					require.NoError(t, err)
					key := b.pending(t, up.ID).BlobKey
					if how == "aborted" {
						require.Equal(t, http.StatusOK, b.put(t, up, data))
						require.NoError(t, broker.AbortUpload(ctx, up.ID))
					} else {
						_, err = broker.CompleteUpload(ctx, artifacts.CompleteRequest{UploadID: up.ID})
						require.ErrorIs(t, err, artifacts.ErrRefused, "completed before its bytes were sent")
					}
					b.requireNothing(t, "run-1", up.ID, key)
					require.True(t, b.pending(t, up.ID).Aborted)

					require.Equal(t, http.StatusOK, b.put(t, up, data), "the request sent again is taken: it is still valid")
					_, err = broker.CompleteUpload(ctx, artifacts.CompleteRequest{UploadID: up.ID})
					require.ErrorIs(t, err, artifacts.ErrRefused, "an aborted upload is not completed")
					require.NoError(t, broker.AbortUpload(ctx, up.ID), "aborting again")
					got, err := b.svc.Prune(ctx)
					require.NoError(t, err)
					require.Equal(t, artifacts.PruneStats{}, got, "the requests are still valid")

					b.tr.clock.Advance(artifacts.DefaultUploadTTL + 2*time.Minute)
					got, err = b.svc.Prune(ctx)
					require.NoError(t, err)
					require.Equal(t, artifacts.PruneStats{Uploads: 1}, got)
					b.requireNothing(t, "run-1", up.ID, key)
					_, err = b.manifest.UploadGet(ctx, up.ID)
					require.ErrorIs(t, err, cikit.ErrNotFound, "the upload is forgotten")
				})
			}
		}
	}
}

// TestServiceCompleteIsIdempotent: a runner that sends a completion
// again, its first answer lost, gets the same artifact or cache entry
// back, whether the first completion finished or died after joining the
// parts.
func TestServiceCompleteIsIdempotent(t *testing.T) {
	t.Parallel()
	small, _ := blob(1, 3000)
	large, _ := blob(2, 2*svcPartSize+1000)
	for _, ss := range serviceSetups {
		for _, st := range []svcStores{memoryStores, postgresStores} {
			t.Run(ss.name+"/"+st.String(), func(t *testing.T) {
				t.Parallel()
				b := ss.setup(t, st, nil)
				ctx := t.Context()
				r := ref("run-1", "build")
				r.Needs = []string{}
				broker := b.svc.ForJob(r)
				a, err := b.upload(t, r, artifacts.UploadRequest{Name: "dist"}, small)
				require.NoError(t, err)
				require.Equal(t, "dist", a.Name)
				again, err := broker.CompleteUpload(ctx, artifacts.CompleteRequest{UploadID: a.ID})
				require.NoError(t, err, "a completion sent again")
				require.Empty(t, cmp.Diff(a, again))
				b.requireDownload(t, r, "dist", small)

				_, err = b.svc.ForJob(ref("run-1", "test")).CompleteUpload(ctx, artifacts.CompleteRequest{UploadID: a.ID})
				require.ErrorIs(t, err, artifacts.ErrRefused, "another job's completion is not this one's")

				saved, err := b.upload(t, r, artifacts.UploadRequest{Name: "go-mod", Cache: true}, small)
				require.NoError(t, err)
				again, err = broker.CompleteUpload(ctx, artifacts.CompleteRequest{UploadID: saved.ID})
				require.NoError(t, err, "a cache completion sent again")
				require.Empty(t, cmp.Diff(saved, again))
				other := ref("run-2", "build")
				other.Scope = "branch/other"
				_, err = b.svc.ForJob(other).CompleteUpload(ctx, artifacts.CompleteRequest{UploadID: saved.ID})
				require.ErrorIs(t, err, artifacts.ErrRefused, "another job's cache completion is not this one's")

				if b.tr.s3 == nil {
					return
				}
				// Parts joined by a completion that died before recording.
				req := artifacts.UploadRequest{Name: "large", Size: int64(len(large)), SHA256: sha(large), PartSize: svcPartSize}
				for off := 0; off < len(large); off += svcPartSize {
					req.PartSHA256 = append(req.PartSHA256, sha(large[off:min(off+svcPartSize, len(large))]))
				}
				up, err := broker.CreateUpload(ctx, req)
				require.NoError(t, err)
				require.Len(t, up.Parts, 3)
				var etags []string
				for i, p := range up.Parts {
					hreq, err := http.NewRequestWithContext(ctx, p.Method, p.URL, bytes.NewReader(large[i*svcPartSize:i*svcPartSize+int(p.Size)]))
					require.NoError(t, err)
					for k, v := range p.Header {
						hreq.Header[k] = v
					}
					resp, err := b.tr.client.Do(hreq)
					require.NoError(t, err)
					resp.Body.Close()
					require.Equal(t, http.StatusOK, resp.StatusCode)
					etags = append(etags, resp.Header.Get("ETag"))
				}
				u := b.pending(t, up.ID)
				require.NoError(t, b.tr.store.CompleteMultipart(ctx, u.BlobKey, u.MultipartID, etags))
				first, err := broker.CompleteUpload(ctx, artifacts.CompleteRequest{UploadID: up.ID, ETags: etags})
				require.NoError(t, err, "the parts are joined already")
				again, err = broker.CompleteUpload(ctx, artifacts.CompleteRequest{UploadID: up.ID, ETags: etags})
				require.NoError(t, err)
				require.Empty(t, cmp.Diff(first, again))
				b.requireDownload(t, r, "large", large)
			})
		}
	}
}

// TestServiceMultipart: an archive larger than the threshold goes in
// parts through the Service and downloads as it was; one interrupted,
// or abandoned until the pruner finds it, leaves nothing: no artifact,
// no object, no multipart upload and no part.
func TestServiceMultipart(t *testing.T) {
	t.Parallel()
	data, _ := blob(3, 2*svcPartSize+12345)
	t.Run("complete", func(t *testing.T) {
		t.Parallel()
		b := setupS3Service(t, postgresStores, nil)
		r := ref("run-1", "build")
		a, err := b.upload(t, r, artifacts.UploadRequest{Name: "dist"}, data)
		require.NoError(t, err)
		require.Equal(t, int64(len(data)), a.Size)
		b.requireDownload(t, r, "dist", data)
		require.Empty(t, listUploads(t, b.tr.s3))
	})
	t.Run("interrupted", func(t *testing.T) {
		t.Parallel()
		b := setupS3Service(t, postgresStores, nil)
		r := ref("run-1", "build")
		req := artifacts.UploadRequest{Name: "dist", Size: int64(len(data)), SHA256: sha(data)}
		_, err := b.sender.Upload(t.Context(), b.svc.ForJob(r), req, failingReaderAt{r: bytes.NewReader(data), failAt: 2 * svcPartSize})
		require.ErrorContains(t, err, "the disk is gone")
		list, err := b.manifest.UploadsExpired(t.Context(), b.tr.clock.Now().Add(24*time.Hour), 10)
		require.NoError(t, err)
		require.Empty(t, list, "the upload was aborted")
		artifactsList, err := b.manifest.ArtifactsList(t.Context(), artifacts.ArtifactFilter{RunID: "run-1"})
		require.NoError(t, err)
		require.Empty(t, artifactsList, "no artifact is recorded")
		require.Empty(t, listUploads(t, b.tr.s3), "no multipart upload is left")
		requireNoObjects(t, b)
	})
	t.Run("tampered", func(t *testing.T) {
		t.Parallel()
		b := setupS3Service(t, postgresStores, nil)
		ctx := t.Context()
		broker := b.svc.ForJob(ref("run-1", "build"))
		req := artifacts.UploadRequest{Name: "dist", Size: int64(len(data)), SHA256: sha(data), PartSize: svcPartSize}
		for off := 0; off < len(data); off += svcPartSize {
			req.PartSHA256 = append(req.PartSHA256, sha(data[off:min(off+svcPartSize, len(data))]))
		}
		up, err := broker.CreateUpload(ctx, req)
		require.NoError(t, err)
		require.Len(t, up.Parts, 3)
		var etags []string
		for i, p := range up.Parts {
			part := data[i*svcPartSize : i*svcPartSize+int(p.Size)]
			if i == 1 {
				part = bytes.Clone(part)
				part[0] ^= 1
			}
			hreq, err := http.NewRequestWithContext(ctx, p.Method, p.URL, bytes.NewReader(part))
			require.NoError(t, err)
			for k, v := range p.Header {
				hreq.Header[k] = v
			}
			resp, err := b.tr.client.Do(hreq)
			require.NoError(t, err)
			resp.Body.Close()
			etags = append(etags, resp.Header.Get("ETag"))
			if i == 1 {
				require.Equal(t, http.StatusBadRequest, resp.StatusCode, "S3 refuses a part that is not its checksum's")
				etags[i] = `"made-up"`
			}
		}
		u := b.pending(t, up.ID)
		_, err = broker.CompleteUpload(ctx, artifacts.CompleteRequest{UploadID: up.ID, ETags: etags})
		require.ErrorIs(t, err, artifacts.ErrRefused)
		require.ErrorContains(t, err, "joining the parts")
		b.requireNothing(t, "run-1", up.ID, u.BlobKey)
		_, err = b.tr.s3.Client().ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String("blobs"), Key: aws.String(u.BlobKey), UploadId: aws.String(u.MultipartID)})
		require.ErrorContains(t, err, "NoSuchUpload", "no part is left")
		requireNoObjects(t, b)
	})
	t.Run("abandoned", func(t *testing.T) {
		t.Parallel()
		b := setupS3Service(t, postgresStores, nil)
		ctx := t.Context()
		r := ref("run-1", "build")
		req := artifacts.UploadRequest{Name: "dist", Size: int64(len(data)), SHA256: sha(data), PartSize: svcPartSize}
		for off := 0; off < len(data); off += svcPartSize {
			req.PartSHA256 = append(req.PartSHA256, sha(data[off:min(off+svcPartSize, len(data))]))
		}
		up, err := b.svc.ForJob(r).CreateUpload(ctx, req)
		require.NoError(t, err)
		require.Len(t, up.Parts, 3)
		status, answer := send(t, b.tr.client, up.Parts[0], data[:svcPartSize])
		require.Equal(t, http.StatusOK, status, answer)
		u := b.pending(t, up.ID)
		parts, err := b.tr.s3.Client().ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String("blobs"), Key: aws.String(u.BlobKey), UploadId: aws.String(u.MultipartID)})
		require.NoError(t, err)
		require.Len(t, parts.Parts, 1, "the part sent is in S3")

		st, err := b.svc.Prune(ctx)
		require.NoError(t, err)
		require.Equal(t, artifacts.PruneStats{}, st, "an upload in progress is not abandoned")
		b.tr.clock.Advance(artifacts.DefaultUploadTTL + 2*time.Minute) // past the requests' expiry and the skew the pruner allows
		st, err = b.svc.Prune(ctx)
		require.NoError(t, err)
		require.Equal(t, artifacts.PruneStats{Uploads: 1}, st)
		b.requireNothing(t, "run-1", up.ID, u.BlobKey)
		_, err = b.tr.s3.Client().ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String("blobs"), Key: aws.String(u.BlobKey), UploadId: aws.String(u.MultipartID)})
		require.ErrorContains(t, err, "NoSuchUpload", "no part is left")
		requireNoObjects(t, b)
	})
}

// requireNoObjects checks that b's bucket is empty.
func requireNoObjects(t *testing.T, b *svcBundle) {
	t.Helper()
	objects, err := b.tr.s3.Client().ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String("blobs")})
	require.NoError(t, err)
	require.Empty(t, objects.Contents, "no object")
}

// TestServicePrune: Prune deletes expired artifacts, blob and row, but
// those kept for ever and the latest default-branch run's; cache entries
// not hit for CacheMaxAge; and, over a repository's budget, the least
// recently hit first. Its counts are what it removed.
func TestServicePrune(t *testing.T) {
	t.Parallel()
	for _, st := range []svcStores{memoryStores, postgresStores} {
		t.Run(st.String(), func(t *testing.T) {
			t.Parallel()
			b := setupService(t, setupFileTransfer(t), st, func(c *artifacts.ServiceConfig) {
				c.KeepLatestDefault = true
				c.CacheBudget = 2500
				c.CacheMaxAge = 48 * time.Hour
			})
			ctx := t.Context()
			clk := b.tr.clock
			main1, main2, pr := ref("main-1", "build"), ref("main-2", "build"), ref("pr-1", "build")
			main1.DefaultBranch, main2.DefaultBranch = true, true
			blobs := map[string][]byte{}
			keys := map[string]string{}
			upload := func(r artifacts.JobRef, name string, expireIn time.Duration, size int) {
				t.Helper()
				data, _ := blob(uint64(len(blobs)+10), size)
				blobs[r.RunID+"/"+name] = data
				a, err := b.upload(t, r, artifacts.UploadRequest{Name: name, ExpireIn: expireIn}, data)
				require.NoError(t, err)
				keys[r.RunID+"/"+name] = a.BlobKey
			}
			upload(main1, "hour", time.Hour, 100)
			upload(main1, "never", -1, 200)
			upload(pr, "hour", time.Hour, 300)
			upload(pr, "default", 0, 400)
			clk.Advance(time.Minute)
			upload(main2, "hour", time.Hour, 500)

			save := func(key string, size int) {
				t.Helper()
				data, _ := blob(uint64(len(blobs)+10), size)
				blobs["cache/"+key] = data
				_, err := b.upload(t, ref("pr-1", "build"), artifacts.UploadRequest{Name: key, Cache: true}, data)
				require.NoError(t, err)
			}
			save("ancient", 1000)
			clk.Advance(25 * time.Hour)
			save("old-hit", 1000)
			clk.Advance(time.Hour)
			save("old-never-hit", 1000)
			clk.Advance(time.Hour)
			save("new", 1000)
			clk.Advance(time.Hour)
			hit, err := b.svc.ForJob(pr).LookupCache(ctx, artifacts.CacheQuery{Key: "old-hit"})
			require.NoError(t, err)
			require.NotNil(t, hit)
			clk.Advance(22 * time.Hour) // ancient is 50 hours old, the others at most 26

			got, err := b.svc.Prune(ctx)
			require.NoError(t, err)
			require.Equal(t, artifacts.PruneStats{Artifacts: 2, ArtifactBytes: 100 + 300, CacheEntries: 2, CacheBytes: 2000, Blobs: 4}, got,
				"main-1's and pr-1's hour; ancient, by age; old-never-hit, over the budget")

			for _, kept := range []string{"main-1/never", "pr-1/default", "main-2/hour"} {
				run, name, _ := strings.Cut(kept, "/")
				list, err := b.manifest.ArtifactsList(ctx, artifacts.ArtifactFilter{RunID: run, Name: name})
				require.NoError(t, err)
				require.Len(t, list, 1, "%s is kept", kept)
				require.NoError(t, b.tr.store.Verify(ctx, keys[kept], int64(len(blobs[kept])), sha(blobs[kept])), "%s's blob is kept", kept)
			}
			// main-2's hour expired but is the latest of the default
			// branch: it is still listed, with a download.
			listed, err := b.svc.RunArtifacts(ctx, "main-2")
			require.NoError(t, err)
			require.Len(t, listed, 1, "the latest default-branch artifact stays downloadable")
			require.NotNil(t, listed[0].Download)
			listed, err = b.svc.RunArtifacts(ctx, "pr-1")
			require.NoError(t, err)
			require.Len(t, listed, 1, "pr-1's default is listed, its expired hour is not")
			for _, gone := range []string{"main-1/hour", "pr-1/hour"} {
				run, name, _ := strings.Cut(gone, "/")
				list, err := b.manifest.ArtifactsList(ctx, artifacts.ArtifactFilter{RunID: run, Name: name})
				require.NoError(t, err)
				require.Empty(t, list, "%s is deleted", gone)
				b.requireNoBlob(t, keys[gone])
			}
			entries, err := b.index.CacheList(ctx, "acme/api")
			require.NoError(t, err)
			var saved []string
			for _, e := range entries {
				saved = append(saved, e.Key)
			}
			require.Equal(t, []string{"old-hit", "new"}, saved, "the entry hit stays, the one never hit went")
			for _, gone := range []string{"ancient", "old-never-hit"} {
				b.requireNoBlob(t, artifacts.CacheBlobKey("acme/api", "branch/main", sha(blobs["cache/"+gone])))
			}

			got, err = b.svc.Prune(ctx)
			require.NoError(t, err)
			require.Equal(t, artifacts.PruneStats{}, got, "nothing more")
		})
	}
}

// TestServicePruneConcurrently: two Services over the same stores prune
// at once, in small batches: neither fails, everything expired goes,
// and each artifact and entry is counted by one of them.
func TestServicePruneConcurrently(t *testing.T) {
	t.Parallel()
	b := setupService(t, setupFileTransfer(t), postgresStores, func(c *artifacts.ServiceConfig) {
		c.PruneBatch = 3
		c.CacheMaxAge = time.Hour
	})
	ctx := t.Context()
	const n = 20
	var want artifacts.PruneStats
	for i := range n {
		data, _ := blob(uint64(i), 100+i)
		r := ref("run-"+string(rune('a'+i)), "build")
		_, err := b.upload(t, r, artifacts.UploadRequest{Name: "dist", ExpireIn: time.Minute}, data)
		require.NoError(t, err)
		want.Artifacts++
		want.ArtifactBytes += int64(len(data))
		_, err = b.upload(t, r, artifacts.UploadRequest{Name: "key-" + r.RunID, Cache: true}, data)
		require.NoError(t, err)
		want.CacheEntries++
		want.CacheBytes += int64(len(data))
		_, err = b.svc.ForJob(r).CreateUpload(ctx, artifacts.UploadRequest{Name: "abandoned", Size: 1, SHA256: sha([]byte("x"))})
		require.NoError(t, err)
		want.Uploads++
	}
	want.Blobs = want.Artifacts + want.CacheEntries
	b.tr.clock.Advance(2 * time.Hour)
	// Both pruners list the same first batches.
	m := &meetingManifest{Manifest: b.manifest, artifacts: newMeeting(2), uploads: newMeeting(2)}
	var svcs []*artifacts.Service
	for range 2 {
		svcs = append(svcs, b.newService(t, func(c *artifacts.ServiceConfig) {
			c.Manifest = m
			c.PruneBatch = 3
			c.CacheMaxAge = time.Hour
		}))
	}

	var wg sync.WaitGroup
	stats := make([]artifacts.PruneStats, 2)
	errs := make([]error, 2)
	for i, svc := range svcs {
		wg.Go(func() { stats[i], errs[i] = svc.Prune(ctx) })
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	sum := artifacts.PruneStats{
		Artifacts: stats[0].Artifacts + stats[1].Artifacts, ArtifactBytes: stats[0].ArtifactBytes + stats[1].ArtifactBytes,
		CacheEntries: stats[0].CacheEntries + stats[1].CacheEntries, CacheBytes: stats[0].CacheBytes + stats[1].CacheBytes,
		Uploads: stats[0].Uploads + stats[1].Uploads, Blobs: stats[0].Blobs + stats[1].Blobs,
	}
	require.Equal(t, want, sum, "each removal counted once: %+v", stats)

	left, err := b.manifest.ArtifactsExpired(ctx, b.tr.clock.Now().Add(time.Hour), 100, false)
	require.NoError(t, err)
	require.Empty(t, left, "no artifact is left")
	uploads, err := b.manifest.UploadsExpired(ctx, b.tr.clock.Now().Add(time.Hour), 100)
	require.NoError(t, err)
	require.Empty(t, uploads, "no upload is left")
	entries, err := b.index.CacheList(ctx, "acme/api")
	require.NoError(t, err)
	require.Empty(t, entries, "no cache entry is left")
}

// meetingManifest is a Manifest whose first calls listing expired
// artifacts and uploads wait for each other: callers that list at once.
type meetingManifest struct {
	artifacts.Manifest
	artifacts, uploads *meeting
}

func (m *meetingManifest) ArtifactsExpired(ctx context.Context, t time.Time, limit int, keep bool) ([]artifacts.Artifact, error) {
	m.artifacts.meet()
	return m.Manifest.ArtifactsExpired(ctx, t, limit, keep)
}

func (m *meetingManifest) UploadsExpired(ctx context.Context, t time.Time, limit int) ([]artifacts.PendingUpload, error) {
	m.uploads.meet()
	return m.Manifest.UploadsExpired(ctx, t, limit)
}

// meeting holds its first n callers until all have come.
type meeting struct {
	mu   sync.Mutex
	left int
	all  chan struct{}
}

func newMeeting(n int) *meeting { return &meeting{left: n, all: make(chan struct{})} }

func (m *meeting) meet() {
	m.mu.Lock()
	if m.left--; m.left == 0 {
		close(m.all)
	}
	m.mu.Unlock()
	<-m.all
}

// TestServiceSameCacheKeyAtOnce: two jobs save one cache key at once;
// one entry wins, the other save is ErrCacheExists, and its archive is
// deleted unless it is the winner's (same content).
func TestServiceSameCacheKeyAtOnce(t *testing.T) {
	t.Parallel()
	mine, _ := blob(1, 3000)
	theirs, _ := blob(2, 3000)
	for _, ss := range serviceSetups {
		t.Run(ss.name+"/other content", func(t *testing.T) {
			t.Parallel()
			b := ss.setup(t, postgresStores, nil)
			ctx := t.Context()
			r1, r2 := ref("run-1", "build"), ref("run-2", "build")
			req := func(data []byte) artifacts.UploadRequest {
				return artifacts.UploadRequest{Name: "go-mod", Cache: true, Size: int64(len(data)), SHA256: sha(data)}
			}
			up1, err := b.svc.ForJob(r1).CreateUpload(ctx, req(mine))
			require.NoError(t, err)
			up2, err := b.svc.ForJob(r2).CreateUpload(ctx, req(theirs))
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, b.put(t, up1, mine))
			require.Equal(t, http.StatusOK, b.put(t, up2, theirs))
			loserKey := b.pending(t, up2.ID).BlobKey
			_, err = b.svc.ForJob(r1).CompleteUpload(ctx, artifacts.CompleteRequest{UploadID: up1.ID})
			require.NoError(t, err)
			_, err = b.svc.ForJob(r2).CompleteUpload(ctx, artifacts.CompleteRequest{UploadID: up2.ID})
			require.ErrorIs(t, err, artifacts.ErrCacheExists)
			b.requireNoBlob(t, loserKey)
			requireCache(t, b, r2, "go-mod", mine)
		})
		t.Run(ss.name+"/same content", func(t *testing.T) {
			t.Parallel()
			b := ss.setup(t, postgresStores, nil)
			ctx := t.Context()
			r1, r2 := ref("run-1", "build"), ref("run-2", "build")
			req := artifacts.UploadRequest{Name: "go-mod", Cache: true, Size: int64(len(mine)), SHA256: sha(mine)}
			up1, err := b.svc.ForJob(r1).CreateUpload(ctx, req)
			require.NoError(t, err)
			up2, err := b.svc.ForJob(r2).CreateUpload(ctx, req)
			require.NoError(t, err)
			require.False(t, up2.Stored, "nothing is stored yet")
			require.Equal(t, http.StatusOK, b.put(t, up1, mine))
			require.Contains(t, []int{http.StatusConflict, http.StatusPreconditionFailed}, b.put(t, up2, mine), "the blob is there already")
			_, err = b.svc.ForJob(r2).CompleteUpload(ctx, artifacts.CompleteRequest{UploadID: up2.ID})
			require.NoError(t, err, "the second job's completion verifies the first's archive, and wins")
			_, err = b.svc.ForJob(r1).CompleteUpload(ctx, artifacts.CompleteRequest{UploadID: up1.ID})
			require.ErrorIs(t, err, artifacts.ErrCacheExists)
			requireCache(t, b, r1, "go-mod", mine)

			up3, err := b.svc.ForJob(ref("run-3", "build")).CreateUpload(ctx, artifacts.UploadRequest{Name: "go-sum", Cache: true, Size: int64(len(mine)), SHA256: sha(mine)})
			require.NoError(t, err)
			require.True(t, up3.Stored, "a third save of the content has nothing to send")
		})
		t.Run(ss.name+"/same content through the Sender", func(t *testing.T) {
			t.Parallel()
			b := ss.setup(t, postgresStores, nil)
			ctx := t.Context()
			r1 := ref("run-1", "build")
			req := artifacts.UploadRequest{Name: "go-mod", Cache: true, Size: int64(len(mine)), SHA256: sha(mine)}
			up1, err := b.svc.ForJob(r1).CreateUpload(ctx, req)
			require.NoError(t, err)
			// The first job sends its archive once the second reserved.
			second := &reservedBroker{Broker: b.svc.ForJob(ref("run-2", "build")), reserved: func() {
				require.Equal(t, http.StatusOK, b.put(t, up1, mine))
			}}
			_, err = b.sender.Upload(ctx, second, req, bytes.NewReader(mine))
			require.NoError(t, err, "the store holds the archive: the completion verifies it, and the second job wins")
			_, err = b.svc.ForJob(r1).CompleteUpload(ctx, artifacts.CompleteRequest{UploadID: up1.ID})
			require.ErrorIs(t, err, artifacts.ErrCacheExists)
			requireCache(t, b, r1, "go-mod", mine)
		})
		t.Run(ss.name+"/senders", func(t *testing.T) {
			t.Parallel()
			b := ss.setup(t, postgresStores, nil)
			var wg sync.WaitGroup
			errs := make([]error, 4)
			contents := map[string][]byte{}
			for i := range errs {
				data, sum := blob(uint64(10+i), 3000)
				contents[sum] = data
				wg.Go(func() {
					_, errs[i] = b.upload(t, ref("run-"+string(rune('a'+i)), "build"), artifacts.UploadRequest{Name: "go-mod", Cache: true}, data)
				})
			}
			wg.Wait()
			won := 0
			for _, err := range errs {
				if err == nil {
					won++
					continue
				}
				require.ErrorIs(t, err, artifacts.ErrCacheExists)
			}
			require.Equal(t, 1, won, "%v", errs)
			entries, err := b.index.CacheList(t.Context(), "acme/api")
			require.NoError(t, err)
			require.Len(t, entries, 1)
			requireCache(t, b, ref("run-x", "build"), "go-mod", contents[entries[0].SHA256])
			for sum := range contents {
				if sum != entries[0].SHA256 {
					b.requireNoBlob(t, artifacts.CacheBlobKey("acme/api", "branch/main", sum))
				}
			}
		})
	}
}

// reservedBroker is a Broker that calls reserved once an upload is
// reserved.
type reservedBroker struct {
	artifacts.Broker
	reserved func()
}

func (b *reservedBroker) CreateUpload(ctx context.Context, req artifacts.UploadRequest) (*artifacts.Upload, error) {
	up, err := b.Broker.CreateUpload(ctx, req)
	if err == nil {
		b.reserved()
	}
	return up, err
}

// requireCache checks that key is saved in r's scope as data.
func requireCache(t *testing.T, b *svcBundle, r artifacts.JobRef, key string, data []byte) {
	t.Helper()
	hit, err := b.svc.ForJob(r).LookupCache(t.Context(), artifacts.CacheQuery{Key: key})
	require.NoError(t, err)
	require.NotNil(t, hit, "cache %s is saved", key)
	var out bytes.Buffer
	require.NoError(t, b.sender.Download(t.Context(), hit.Download, hit.Size, hit.SHA256, &out))
	require.True(t, bytes.Equal(data, out.Bytes()), "cache %s downloads as it was saved", key)
}

// hookedStore is a Presigner that runs a hook after each Verify and
// before each Delete of a blob key, once: the moments the pruner and a
// save race at.
type hookedStore struct {
	artifacts.Presigner
	mu           sync.Mutex
	afterVerify  map[string]func()
	beforeDelete map[string]func()
}

func (h *hookedStore) take(hooks map[string]func(), key string) func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := hooks[key]
	delete(hooks, key)
	return f
}

func (h *hookedStore) Verify(ctx context.Context, key string, size int64, sha string) error {
	err := h.Presigner.Verify(ctx, key, size, sha)
	if f := h.take(h.afterVerify, key); f != nil {
		f()
	}
	return err
}

func (h *hookedStore) Delete(ctx context.Context, key string) error {
	if f := h.take(h.beforeDelete, key); f != nil {
		f()
	}
	return h.Presigner.Delete(ctx, key)
}

// TestServiceEvictionRacesSave: a pruner evicts the last entry of a
// content-addressed archive while another key's save reuses it. Whatever
// the order, no entry is left that refers to a deleted archive: either
// the save finds the archive gone after recording its entry and takes
// the entry back (refused), or the pruner finds the entry saved over the
// archive it deleted and removes it too.
func TestServiceEvictionRacesSave(t *testing.T) {
	t.Parallel()
	data, _ := blob(1, 3000)
	for _, tc := range []struct {
		name string
		// hook sets the moment the save runs at: save is the second
		// job's completion.
		hook    func(h *hookedStore, key string, prune, complete func())
		saveErr bool
		stats   artifacts.PruneStats
	}{
		{
			// The pruner evicts and deletes the archive after the save
			// verified it, before the save records its entry.
			name: "pruned after the save verified",
			hook: func(h *hookedStore, key string, prune, _ func()) {
				h.afterVerify[key] = prune
			},
			saveErr: true,
			stats:   artifacts.PruneStats{CacheEntries: 1, CacheBytes: 3000, Blobs: 1},
		},
		{
			// The save verifies and records its entry after the pruner
			// found the archive unused, before it deletes it.
			name: "saved before the pruner deleted",
			hook: func(h *hookedStore, key string, _, complete func()) {
				h.beforeDelete[key] = complete
			},
			stats: artifacts.PruneStats{CacheEntries: 2, CacheBytes: 6000, Blobs: 1},
		},
	} {
		for _, st := range []svcStores{memoryStores, postgresStores} {
			t.Run(tc.name+"/"+st.String(), func(t *testing.T) {
				t.Parallel()
				tr := setupFileTransfer(t)
				h := &hookedStore{Presigner: tr.store, afterVerify: map[string]func(){}, beforeDelete: map[string]func(){}}
				tr.store = h
				b := setupService(t, tr, st, func(c *artifacts.ServiceConfig) { c.CacheMaxAge = time.Hour })
				ctx := t.Context()
				_, err := b.upload(t, ref("run-1", "build"), artifacts.UploadRequest{Name: "old", Cache: true}, data)
				require.NoError(t, err)
				b.tr.clock.Advance(2 * time.Hour)
				r2 := ref("run-2", "build")
				up, err := b.svc.ForJob(r2).CreateUpload(ctx, artifacts.UploadRequest{Name: "new", Cache: true, Size: int64(len(data)), SHA256: sha(data)})
				require.NoError(t, err)
				require.True(t, up.Stored, "the archive is old's")
				key := artifacts.CacheBlobKey("acme/api", "branch/main", sha(data))

				var stats artifacts.PruneStats
				var pruneErr, saveErr error
				prune := func() { stats, pruneErr = b.svc.Prune(ctx) }
				complete := func() {
					_, saveErr = b.svc.ForJob(r2).CompleteUpload(ctx, artifacts.CompleteRequest{UploadID: up.ID})
				}
				tc.hook(h, key, prune, complete)
				if tc.saveErr {
					complete()
				} else {
					prune()
				}
				require.NoError(t, pruneErr)
				require.Equal(t, tc.stats, stats)
				if tc.saveErr {
					require.ErrorIs(t, saveErr, artifacts.ErrRefused)
				} else {
					require.NoError(t, saveErr)
				}
				entries, err := b.index.CacheList(ctx, "acme/api")
				require.NoError(t, err)
				require.Empty(t, entries, "no entry refers to the deleted archive")
				b.requireNothing(t, "run-2", up.ID, key)
			})
		}
	}
}
