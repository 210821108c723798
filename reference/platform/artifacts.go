package platform

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"time"

	"github.com/cikit/cikit/artifacts"
)

// blobPrefix is where this server serves the blobs of its data directory,
// through URLs it signs, when no S3 bucket is configured.
const blobPrefix = "/v1/blobs/"

// defaultPruneInterval is how often the artifacts pruner runs when
// artifacts.prune-interval says nothing.
const defaultPruneInterval = 10 * time.Minute

// blobStore returns the store of finished logs, artifacts and caches: the
// S3 bucket, made once, or nil without one.
func (p *Platform) blobStore(ctx context.Context) (*artifacts.S3Store, error) {
	c := p.cfg.S3
	if c.Bucket == "" {
		return nil, nil
	}
	if p.s3 != nil {
		return p.s3, nil
	}
	store, err := artifacts.NewS3Store(ctx, artifacts.S3Config{
		Bucket: c.Bucket, Prefix: c.Prefix, Region: c.Region, Endpoint: c.Endpoint,
		AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey,
	})
	if err != nil {
		return nil, fmt.Errorf("platform: s3: %w", err)
	}
	p.s3 = store
	return store, nil
}

// buildArtifacts makes the service of artifacts and caches: blobs in the
// S3 bucket, or under the data directory served at blobPrefix; records
// in PostgreSQL, or in memory.
func (p *Platform) buildArtifacts(ctx context.Context) error {
	var blobs artifacts.Presigner
	s3, err := p.blobStore(ctx)
	if err != nil {
		return err
	}
	if s3 != nil {
		blobs = s3
	} else {
		fs, err := artifacts.NewFileStore(filepath.Join(p.cfg.DataDir, "blobs"))
		if err != nil {
			return fmt.Errorf("platform: artifacts: %w", err)
		}
		signed, err := artifacts.NewSignedFileStore(fs, blobSigningKey(p.cfg.Runners.SigningKeys[0]), p.url+blobPrefix[:len(blobPrefix)-1])
		if err != nil {
			return fmt.Errorf("platform: artifacts: %w", err)
		}
		blobs, p.blobs = signed, signed.Handler()
	}
	var (
		manifest artifacts.Manifest
		index    artifacts.CacheIndex
	)
	if p.pool == nil {
		manifest, index = artifacts.NewMemoryManifest(), artifacts.NewMemoryCacheIndex()
	} else {
		m, err := artifacts.NewPostgresManifest(p.pool)
		if err != nil {
			return err
		}
		ix, err := artifacts.NewPostgresCacheIndex(p.pool)
		if err != nil {
			return err
		}
		manifest, index = m, ix
	}
	a := p.cfg.Artifacts
	p.artifacts, err = artifacts.NewService(artifacts.ServiceConfig{
		Blobs: blobs, Manifest: manifest, Index: index,
		ExpireIn: a.ExpireIn, MaxExpireIn: a.MaxExpireIn, KeepLatestDefault: a.KeepLatestDefault,
		MaxArchiveBytes: a.MaxArchiveBytes, CacheBudget: a.CacheBudgetBytes, CacheMaxAge: a.CacheMaxAge,
		Now: p.now, Logger: p.log.With("component", "artifacts"),
	})
	return err
}

// blobSigningKey derives the key that signs the URLs of the data
// directory's blobs from the runners' signing key: servers sharing the
// work share it, and a blob URL's signature is never a token's.
func blobSigningKey(runnerKey string) []byte {
	m := hmac.New(sha256.New, []byte(runnerKey))
	m.Write([]byte("cikit blob URLs"))
	return m.Sum(nil)
}

// pruneArtifacts deletes expired artifacts, abandoned uploads and evicted
// caches every artifacts.prune-interval, and counts what it freed.
func (p *Platform) pruneArtifacts(ctx context.Context) error {
	t := time.NewTicker(cmp.Or(p.cfg.Artifacts.PruneInterval, defaultPruneInterval))
	defer t.Stop()
	for {
		st, err := p.artifacts.Prune(ctx)
		p.metrics.countPruned(st)
		if err != nil && ctx.Err() == nil {
			p.log.Warn("platform: pruning artifacts and caches", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
