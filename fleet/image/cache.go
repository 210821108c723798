package image

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// cache is the content-addressed store of blobs (manifests, configs and
// compressed layers) under Dir/blobs/sha256, with the budget, the pins
// of images in use and the ref→digest records of PullIfNotPresent.
//
// Its in-memory index is the truth while the process runs; it is
// rebuilt from the files at start, the time of last use being the
// file's mtime.
//
// Blobs and refs.json are written without fsync and marked as unsynced
// until a background sync (see durable.go): at open, a blob marked in
// an earlier boot is hashed again and removed if it no longer matches
// its digest, and a refs.json so marked that cannot be parsed is
// dropped, since a crash may have emptied it.
type cache struct {
	dir    string
	budget int64
	now    func() time.Time
	marks  markers
	sync   *syncer

	mu       sync.Mutex
	blobs    map[v1.Hash]*blobEntry
	pins     map[v1.Hash]int
	reserved map[v1.Hash]*reservation
	refs     map[string]v1.Hash
	flights  map[v1.Hash]*flight
	// refsWrites counts the writes of refs.json; refsMarked says that
	// the last is not known to be synced.
	refsWrites uint64
	refsMarked bool
}

type blobEntry struct {
	size int64
	used time.Time
	// unsynced says the blob is marked as written without sync.
	unsynced bool
}

// A reservation holds budget for a blob being downloaded, so that two
// pulls under way cannot together exceed the budget. Every pull that
// needs the blob counts; the blob's arrival ends it.
type reservation struct {
	size  int64
	count int
}

const refsFile = "refs.json"

// openCache opens the cache in dir; boot is the kernel's boot ID, or ""
// to sync each write as it is made.
func openCache(dir string, budget int64, now func() time.Time, boot string) (*cache, error) {
	c := &cache{
		dir:      dir,
		budget:   budget,
		now:      now,
		blobs:    map[v1.Hash]*blobEntry{},
		pins:     map[v1.Hash]int{},
		reserved: map[v1.Hash]*reservation{},
		refs:     map[string]v1.Hash{},
		flights:  map[v1.Hash]*flight{},
	}
	c.sync = newSyncer(dir, c.beginSync)
	// Temporary files are those of downloads a previous process left
	// unfinished.
	if err := os.RemoveAll(c.tmpDir()); err != nil {
		return nil, err
	}
	for _, d := range []string{c.blobDir(), c.tmpDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	entries, err := os.ReadDir(c.blobDir())
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		h, err := v1.NewHash("sha256:" + e.Name())
		if err != nil || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return nil, err
		}
		c.blobs[h] = &blobEntry{size: info.Size(), used: info.ModTime()}
	}
	if c.marks, err = openMarkers(filepath.Join(dir, "unsynced", "blobs"), boot); err != nil {
		return nil, err
	}
	current, earlier, err := c.marks.list()
	if err != nil {
		return nil, fmt.Errorf("read the marks of unsynced writes: %w", err)
	}
	if err := c.checkEarlier(earlier); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, refsFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		if err := json.Unmarshal(b, &c.refs); err != nil {
			if !earlier[refsFile] {
				return nil, fmt.Errorf("the cache's %s is damaged: %w; remove it to start without the records of resolved references", refsFile, err)
			}
			// A crash emptied or cut it: the references will be
			// resolved again.
			c.refs = map[string]v1.Hash{}
		}
	}
	if err := c.marks.dropEarlier(); err != nil {
		return nil, fmt.Errorf("remove the marks of unsynced writes of an earlier boot: %w", err)
	}
	// What this boot wrote unsynced, before this process, is whole in
	// the kernel's cache: it is kept and synced.
	for _, n := range current {
		if n == refsFile {
			c.refsMarked = true
			continue
		}
		if h, err := v1.NewHash("sha256:" + n); err == nil && c.blobs[h] != nil {
			c.blobs[h].unsynced = true
			continue
		}
		c.marks.unmark(n)
	}
	if len(current) > 0 {
		c.sync.request()
	}
	return c, nil
}

// checkEarlier hashes again each blob marked as unsynced in an earlier
// boot, removing those that no longer match their digest.
func (c *cache) checkEarlier(earlier map[string]bool) error {
	for n := range earlier {
		h, err := v1.NewHash("sha256:" + n)
		if err != nil || c.blobs[h] == nil {
			continue
		}
		ok, err := fileHasDigest(c.path(h), h)
		if err != nil {
			return fmt.Errorf("check blob %s, written before a crash: %w", h, err)
		}
		if !ok {
			if err := os.Remove(c.path(h)); err != nil {
				return fmt.Errorf("remove blob %s, damaged by a crash: %w", h, err)
			}
			delete(c.blobs, h)
		}
	}
	return nil
}

// fileHasDigest reports whether the file at path has the sha256 digest
// h.
func fileHasDigest(path string, h v1.Hash) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	sum := sha256.New()
	if _, err := io.Copy(sum, f); err != nil {
		return false, err
	}
	return hex.EncodeToString(sum.Sum(nil)) == h.Hex, nil
}

// beginSync is the syncer's begin: it notes the unsynced writes made so
// far, whose marks the returned commit removes.
func (c *cache) beginSync() (commit func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	blobs := map[v1.Hash]*blobEntry{}
	for h, b := range c.blobs {
		if b.unsynced {
			blobs[h] = b
		}
	}
	refs := c.refsWrites
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for h, b := range blobs {
			// A blob evicted and stored again since is a new write.
			if c.blobs[h] == b {
				b.unsynced = false
				c.marks.unmark(h.Hex)
			}
		}
		if c.refsMarked && c.refsWrites == refs {
			c.refsMarked = false
			c.marks.unmark(refsFile)
		}
	}
}

func (c *cache) blobDir() string { return filepath.Join(c.dir, "blobs", "sha256") }
func (c *cache) tmpDir() string  { return filepath.Join(c.dir, "tmp") }

func (c *cache) path(h v1.Hash) string { return filepath.Join(c.blobDir(), h.Hex) }

// lookup returns the manifest digest recorded for key.
func (c *cache) lookup(key string) (v1.Hash, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.refs[key]
	return h, ok
}

// record keeps key→manifest, whose blob the cache holds, and writes the
// records atomically.
func (c *cache) record(key string, h v1.Hash) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refs[key] == h {
		return nil
	}
	c.refs[key] = h
	// Records of evicted manifests go with this write, so that the
	// file holds no more than the cache does.
	for k, d := range c.refs {
		if c.blobs[d] == nil {
			delete(c.refs, k)
		}
	}
	b, err := json.MarshalIndent(c.refs, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(c.tmpDir(), "write-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := c.syncOrMark(f, refsFile); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), filepath.Join(c.dir, refsFile)); err != nil {
		return err
	}
	c.refsWrites++
	if c.marks.enabled() {
		c.refsMarked = true
		c.sync.request()
	}
	return nil
}

// syncOrMark makes the write of f, about to be renamed to name,
// durable: marked as unsynced, for the background sync, or synced now
// when the boot ID is unknown.
func (c *cache) syncOrMark(f *os.File, name string) error {
	if !c.marks.enabled() {
		return f.Sync()
	}
	return c.marks.mark(name)
}

// pinPresent pins hs and marks them used if every one is in the cache,
// and pins nothing otherwise.
func (c *cache) pinPresent(hs []v1.Hash) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range hs {
		if c.blobs[h] == nil {
			return false
		}
	}
	for _, h := range hs {
		c.pins[h]++
		c.touchLocked(h)
	}
	return true
}

func (c *cache) pin(hs []v1.Hash) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range hs {
		c.pins[h]++
	}
}

func (c *cache) unpin(hs []v1.Hash) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range hs {
		if c.pins[h]--; c.pins[h] <= 0 {
			delete(c.pins, h)
		}
	}
}

func (c *cache) touchLocked(h v1.Hash) {
	now := c.now()
	c.blobs[h].used = now
	// The mtime carries the time of last use across restarts; failing
	// to set it only makes the blob look older to the next process.
	_ = os.Chtimes(c.path(h), now, now)
}

// reserve makes room for the blobs of sizes that the cache does not
// hold, evicting the least recently used blobs no pin holds, and holds
// that room until release. The caller has pinned every blob of sizes,
// so that none is evicted to make room for the others.
func (c *cache) reserve(sizes map[v1.Hash]int64) (release func(), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var need int64
	var mine []v1.Hash
	for h, size := range sizes {
		if c.blobs[h] != nil {
			continue
		}
		mine = append(mine, h)
		if c.reserved[h] == nil {
			need += size
		}
	}
	if over := c.usedLocked() + need - c.budget; over > 0 {
		if freed := c.evictLocked(over); freed < over {
			return nil, fmt.Errorf("%w: %d bytes more are needed and every cached image over the budget of %d bytes is in use", ErrBudget, over-freed, c.budget)
		}
	}
	for _, h := range mine {
		r := c.reserved[h]
		if r == nil {
			r = &reservation{size: sizes[h]}
			c.reserved[h] = r
		}
		r.count++
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, h := range mine {
				if r := c.reserved[h]; r != nil {
					if r.count--; r.count == 0 {
						delete(c.reserved, h)
					}
				}
			}
		})
	}, nil
}

func (c *cache) usedLocked() int64 {
	var n int64
	for _, b := range c.blobs {
		n += b.size
	}
	for _, r := range c.reserved {
		n += r.size
	}
	return n
}

// evictLocked removes unpinned blobs, least recently used first, until
// at least want bytes are freed or none is left to remove.
func (c *cache) evictLocked(want int64) (freed int64) {
	var victims []v1.Hash
	for h := range c.blobs {
		if c.pins[h] == 0 {
			victims = append(victims, h)
		}
	}
	slices.SortFunc(victims, func(a, b v1.Hash) int {
		return cmp.Or(c.blobs[a].used.Compare(c.blobs[b].used), cmp.Compare(a.Hex, b.Hex))
	})
	for _, h := range victims {
		if freed >= want {
			break
		}
		if err := os.Remove(c.path(h)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if c.blobs[h].unsynced {
			c.marks.unmark(h.Hex)
		}
		freed += c.blobs[h].size
		delete(c.blobs, h)
	}
	return freed
}

// usage reports the bytes the cache's blobs take.
func (c *cache) usage() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, b := range c.blobs {
		n += b.size
	}
	return n
}

// errDigest marks content that does not match its digest.
var errDigest = errors.New("content does not match its digest")

// fetch stores the blob h of the given size, calling open for its
// content unless the cache holds it. Concurrent fetches of one blob
// share a single download, run by the first caller on its own
// goroutine; the others wait for it, and one whose context is alive
// takes over if the download ended by its caller's cancellation.
func (c *cache) fetch(ctx context.Context, h v1.Hash, size int64, open func(context.Context) (io.ReadCloser, error)) error {
	for {
		c.mu.Lock()
		f := c.flights[h]
		if f == nil {
			f = &flight{done: make(chan struct{})}
			c.flights[h] = f
			c.mu.Unlock()
			f.err = c.download(ctx, h, size, open)
			c.mu.Lock()
			delete(c.flights, h)
			c.mu.Unlock()
			close(f.done)
			return f.err
		}
		c.mu.Unlock()
		select {
		case <-f.done:
			if f.err != nil && ctx.Err() == nil && (errors.Is(f.err, context.Canceled) || errors.Is(f.err, context.DeadlineExceeded)) {
				continue
			}
			return f.err
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// A flight is a download under way, which other fetches of its blob
// wait for.
type flight struct {
	done chan struct{}
	err  error // set before done is closed
}

func (c *cache) download(ctx context.Context, h v1.Hash, size int64, open func(context.Context) (io.ReadCloser, error)) error {
	c.mu.Lock()
	if c.blobs[h] != nil {
		c.touchLocked(h)
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()
	rc, err := open(ctx)
	if err != nil {
		return err
	}
	defer rc.Close()
	return c.write(h, size, rc)
}

// put stores b as the blob h.
func (c *cache) put(h v1.Hash, b []byte) error {
	c.mu.Lock()
	present := c.blobs[h] != nil
	if present {
		c.touchLocked(h)
	}
	c.mu.Unlock()
	if present {
		return nil
	}
	return c.write(h, int64(len(b)), bytes.NewReader(b))
}

// write copies r into a temporary file and renames it into place if it
// is size bytes with digest h; more bytes than size are not read.
func (c *cache) write(h v1.Hash, size int64, r io.Reader) error {
	if h.Algorithm != "sha256" {
		return fmt.Errorf("%w: %s is not a sha256 digest", ErrConfig, h)
	}
	f, err := os.CreateTemp(c.tmpDir(), h.Hex+"-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	sum := sha256.New()
	n, copyErr := io.Copy(io.MultiWriter(f, sum), io.LimitReader(r, size+1))
	got := hex.EncodeToString(sum.Sum(nil))
	switch {
	case n > size:
		return fmt.Errorf("%w: %w: blob %s is longer than its %d bytes", ErrConfig, errDigest, h, size)
	case n == size && got != h.Hex:
		return fmt.Errorf("%w: %w: blob %s has digest sha256:%s", ErrConfig, errDigest, h, got)
	case copyErr != nil:
		return copyErr
	case n < size:
		return fmt.Errorf("%w: blob %s ended after %d of its %d bytes", ErrRegistry, h, n, size)
	}
	if !c.marks.enabled() {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	// The mark, rename and entry go together, so that the background
	// sync's commit sees either none or all of them.
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.marks.enabled() {
		if err := c.marks.mark(h.Hex); err != nil {
			return err
		}
	}
	if err := os.Rename(f.Name(), c.path(h)); err != nil {
		return err
	}
	c.blobs[h] = &blobEntry{size: size, unsynced: c.marks.enabled()}
	c.touchLocked(h)
	delete(c.reserved, h)
	if c.marks.enabled() {
		c.sync.request()
	}
	return nil
}

// readFileLimit reads a file of at most limit bytes.
func readFileLimit(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is more than %d bytes", path, limit)
	}
	return b, nil
}
