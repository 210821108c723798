package cli

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/artifacts"
	"github.com/cikit/cikit/fleet/process"
)

// stateDir is where `cikit run` keeps what outlives a run in the work
// tree: the blobs of its artifacts and caches, and the cache index. The
// process executor never copies it into a workspace.
const stateDir = ".cikit"

// cacheIndexFile is the cache index of local runs, in stateDir.
const cacheIndexFile = "cache-index.json"

// localFiles are the artifacts and caches of `cikit run`: the same
// Service, Broker and presigned transfers as the platform's, over a
// file store in the work tree's .cikit directory, served on a loopback
// port through URLs it signs. Artifacts live for the run; the cache index
// is saved when the run ends, so that the next run restores from it.
type localFiles struct {
	svc   *artifacts.Service
	index *artifacts.MemoryCacheIndex
	repo  string
	path  string // of the saved cache index
	srv   *http.Server
	ln    net.Listener
}

// openLocalFiles opens the state directory under dir for runs of repo.
func openLocalFiles(dir, repo string) (*localFiles, error) {
	root := filepath.Join(dir, stateDir)
	// The artifacts of the last run stay until the next one starts.
	if err := os.RemoveAll(filepath.Join(root, "blobs", "artifacts")); err != nil {
		return nil, err
	}
	fs, err := artifacts.NewFileStore(filepath.Join(root, "blobs"))
	if err != nil {
		return nil, err
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("serving the local blobs: %w", err)
	}
	signed, err := artifacts.NewSignedFileStore(fs, key, "http://"+ln.Addr().String()+"/blobs")
	if err != nil {
		ln.Close()
		return nil, err
	}
	lf := &localFiles{index: artifacts.NewMemoryCacheIndex(), repo: repo, path: filepath.Join(root, cacheIndexFile), ln: ln}
	if err := lf.load(); err != nil {
		ln.Close()
		return nil, err
	}
	lf.svc, err = artifacts.NewService(artifacts.ServiceConfig{Blobs: signed, Manifest: artifacts.NewMemoryManifest(), Index: lf.index,
		// A local run's artifacts live as long as the run; its caches
		// as long as the default budget and age allow.
		ExpireIn: 24 * time.Hour})
	if err != nil {
		ln.Close()
		return nil, err
	}
	lf.srv = &http.Server{Handler: signed.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = lf.srv.Serve(ln) }()
	return lf, nil
}

// broker returns the Broker of attempt attempt of job spec in run runID.
// Its repository is the one the saved cache index is kept for, also
// when the run context names none (a directory outside git).
func (lf *localFiles) broker(rc *cikit.RunContext, runID string, spec *cikit.JobSpec, attempt int) artifacts.Broker {
	ref := artifacts.JobRefFor(rc, runID, spec, attempt)
	ref.Repo = lf.repo
	return lf.svc.ForJob(ref)
}

// savedEntry is a cache entry in the saved index.
type savedEntry struct {
	Scope     string    `json:"scope"`
	Key       string    `json:"key"`
	SHA256    string    `json:"sha256"`
	Size      int64     `json:"size"`
	BlobKey   string    `json:"blob_key"`
	CreatedAt time.Time `json:"created_at"`
	LastHitAt time.Time `json:"last_hit_at,omitzero"`
}

// load reads the saved cache index, if there is one.
func (lf *localFiles) load() error {
	b, err := os.ReadFile(lf.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var saved []savedEntry
	if err := json.Unmarshal(b, &saved); err != nil {
		// A damaged index only loses the caches: say so, start afresh.
		fmt.Fprintf(os.Stderr, "cikit run: %s is not a cache index (%v); the caches start empty\n", lf.path, err)
		return nil
	}
	ctx := context.Background()
	for _, e := range saved {
		err := lf.index.CacheInsert(ctx, &artifacts.CacheEntry{Repo: lf.repo, Scope: e.Scope, Key: e.Key, SHA256: e.SHA256,
			Size: e.Size, BlobKey: e.BlobKey, CreatedAt: e.CreatedAt, LastHitAt: e.LastHitAt})
		if err != nil && !errors.Is(err, artifacts.ErrCacheExists) {
			return fmt.Errorf("loading the cache index: %w", err)
		}
	}
	return nil
}

// close evicts what is past the caches' budget and age, saves the cache
// index and stops serving.
func (lf *localFiles) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, perr := lf.svc.Prune(ctx)
	entries, err := lf.index.CacheList(ctx, lf.repo)
	if err == nil {
		saved := make([]savedEntry, len(entries))
		for i, e := range entries {
			saved[i] = savedEntry{Scope: e.Scope, Key: e.Key, SHA256: e.SHA256, Size: e.Size, BlobKey: e.BlobKey, CreatedAt: e.CreatedAt, LastHitAt: e.LastHitAt}
		}
		var b []byte
		if b, err = json.MarshalIndent(saved, "", "  "); err == nil {
			tmp := lf.path + ".tmp"
			if err = os.WriteFile(tmp, b, 0o644); err == nil {
				err = os.Rename(tmp, lf.path)
			}
		}
	}
	lf.srv.Close()
	return errors.Join(perr, err)
}

// repo names the work tree's repository for its caches: the run
// context's, or the directory's name.
func (lp *localPlan) repo() string {
	if lp.rc.Repository != "" {
		return lp.rc.Repository
	}
	return filepath.Base(lp.dir)
}

// usesFiles reports whether a job of jobs may keep or read artifacts or
// caches (process.UsesFiles), runs a local action that might, or has a
// matrix only the run expands.
func usesFiles(jobs []*cikit.JobSpec) bool {
	for _, j := range jobs {
		if process.UsesFiles(j) || len(j.Expand) > 0 {
			return true
		}
		for _, st := range slices.Concat(j.Steps, j.AfterSteps) {
			if strings.HasPrefix(st.Uses, "./") {
				return true
			}
		}
	}
	return false
}
