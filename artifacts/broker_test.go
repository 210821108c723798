package artifacts_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/artifacts"
)

// testBroker is a Broker over a Presigner for the transfer tests: it
// reserves a blob key per upload, presigns its requests, and verifies
// what arrived on completion. Cache entries are stored by content
// ("cache/<sha256>"): an entry whose content is stored already is
// Stored, a key saved already is ErrCacheExists.
type testBroker struct {
	p   artifacts.Presigner
	ttl time.Duration
	// partSums gives the digests of the parts of a multipart upload,
	// which an UploadRequest does not carry: the tests know the bytes.
	partSums func(req artifacts.UploadRequest, sizes []int64) []string

	mu      sync.Mutex
	n       int
	uploads map[string]*reservation
	saved   map[string]bool // cache keys
	aborted []string
}

type reservation struct {
	key       string
	req       artifacts.UploadRequest
	multipart string
	done      bool
}

var _ artifacts.Broker = (*testBroker)(nil)

func newTestBroker(p artifacts.Presigner, partSums func(artifacts.UploadRequest, []int64) []string) *testBroker {
	return &testBroker{
		p:        p,
		ttl:      artifacts.DefaultUploadTTL,
		partSums: partSums,
		uploads:  make(map[string]*reservation),
		saved:    make(map[string]bool),
	}
}

func (b *testBroker) CreateUpload(ctx context.Context, req artifacts.UploadRequest) (*artifacts.Upload, error) {
	b.mu.Lock()
	b.n++
	id := fmt.Sprintf("up-%d", b.n)
	saved := b.saved[req.Name]
	b.mu.Unlock()
	res := &reservation{key: "artifacts/" + id, req: req}
	if req.Cache {
		if saved {
			return nil, fmt.Errorf("cache key %s: %w", req.Name, artifacts.ErrCacheExists)
		}
		res.key = "cache/" + req.SHA256
	}
	up := &artifacts.Upload{ID: id, ExpiresAt: time.Now().Add(b.ttl)}
	_, err := b.p.Stat(ctx, res.key)
	switch {
	case req.Cache && err == nil:
		up.Stored = true
	case err != nil && !errors.Is(err, cikit.ErrNotFound):
		return nil, err
	case b.p.MultipartMin() > 0 && req.Size >= b.p.MultipartMin():
		up.PartSize = b.p.PartSize()
		var sizes []int64
		for left := req.Size; left > 0; left -= up.PartSize {
			sizes = append(sizes, min(left, up.PartSize))
		}
		mp, parts, err := b.p.CreateMultipart(ctx, res.key, sizes, b.partSums(req, sizes), b.ttl)
		if err != nil {
			return nil, err
		}
		res.multipart, up.Parts = mp, parts
	default:
		put, err := b.p.PresignPut(ctx, res.key, req.Size, req.SHA256, b.ttl)
		if err != nil {
			return nil, err
		}
		up.Parts = []artifacts.Request{put}
	}
	b.mu.Lock()
	b.uploads[id] = res
	b.mu.Unlock()
	return up, nil
}

func (b *testBroker) CompleteUpload(ctx context.Context, req artifacts.CompleteRequest) (*artifacts.Artifact, error) {
	b.mu.Lock()
	res, ok := b.uploads[req.UploadID]
	if ok && res.done {
		ok = false
	}
	if ok {
		res.done = true
	}
	b.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("upload %s: %w: unknown or completed", req.UploadID, artifacts.ErrRefused)
	}
	if res.multipart != "" {
		if err := b.p.CompleteMultipart(ctx, res.key, res.multipart, req.ETags); err != nil {
			return nil, err
		}
	}
	if err := b.p.Verify(ctx, res.key, res.req.Size, res.req.SHA256); err != nil {
		if !res.req.Cache {
			_ = b.p.Delete(ctx, res.key)
		}
		return nil, err
	}
	if res.req.Cache {
		b.mu.Lock()
		b.saved[res.req.Name] = true
		b.mu.Unlock()
	}
	return &artifacts.Artifact{
		ID: req.UploadID, Name: res.req.Name, Type: artifacts.TypeArchive,
		Size: res.req.Size, SHA256: res.req.SHA256, BlobKey: res.key,
	}, nil
}

func (b *testBroker) AbortUpload(ctx context.Context, uploadID string) error {
	b.mu.Lock()
	res, ok := b.uploads[uploadID]
	delete(b.uploads, uploadID)
	b.aborted = append(b.aborted, uploadID)
	b.mu.Unlock()
	if !ok || res.done {
		return nil
	}
	if res.multipart != "" {
		return b.p.AbortMultipart(ctx, res.key, res.multipart)
	}
	if res.req.Cache {
		return nil
	}
	return b.p.Delete(ctx, res.key)
}

func (b *testBroker) abortedUploads() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.aborted)
}

func (b *testBroker) ListArtifacts(context.Context, artifacts.ListRequest) ([]artifacts.Artifact, error) {
	return nil, errors.New("the test broker lists no artifacts")
}

func (b *testBroker) LookupCache(context.Context, artifacts.CacheQuery) (*artifacts.CacheHit, error) {
	return nil, nil
}
