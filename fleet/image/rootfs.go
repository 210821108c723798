package image

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// tmpPrefix starts the names of the trees being built or removed under
// a Rootfs's directory; no digest starts with a dot.
const tmpPrefix = ".tmp-"

// RootfsConfig configures a Rootfs.
type RootfsConfig struct {
	// Dir is the runner's image directory; root filesystems live in
	// Dir/rootfs. One Rootfs owns it: NewRootfs removes what a process
	// that stopped mid-unpack left there.
	Dir string
	// Limits bound each unpack. With Limits.Owner, root filesystems
	// live in Dir/rootfs-<uid>-<gid> instead, so that a runner whose
	// sandbox user changed never shares a tree owned by the old one.
	Limits Limits
}

// Rootfs keeps the root filesystems of images, unpacked once per image
// digest into Dir/rootfs/<digest hex> (see RootfsConfig.Limits) and shared read-only by every job
// on that image: jobs write to a View of one, never to it.
//
// A root filesystem is unpacked into a temporary directory beside its
// place and renamed into place once complete, so a path Unpack returns
// always holds a whole image: a stop mid-unpack leaves only a temporary
// directory, which the next NewRootfs removes. The tree is not synced
// before the rename; it is marked as unsynced, in Dir/unsynced/rootfs,
// until a background syncfs(2) covers it, and NewRootfs removes a tree
// marked in an earlier boot, which a crash may have left with empty or
// missing files, to be unpacked again (see the reasoning in
// durable.go). Concurrent Unpack calls for one digest unpack it once;
// the others wait for it.
type Rootfs struct {
	dir   string
	lim   Limits
	marks markers
	sync  *syncer

	mu       sync.Mutex
	inflight map[string]*unpackCall
	// unsynced maps the digest hex of each tree marked as unsynced to
	// the count of unpacks when it was made.
	unsynced map[string]uint64
	unpacks  uint64
}

// unpackCall is one unpack in flight, which callers for the same digest
// wait on.
type unpackCall struct {
	done chan struct{}
	err  error
}

// NewRootfs returns the Rootfs of cfg.Dir, making its directory and
// removing the temporary trees a previous process left, and the trees
// unpacked before a crash whose sync it did not see.
func NewRootfs(cfg RootfsConfig) (*Rootfs, error) {
	return newRootfs(cfg, readBootID())
}

// newRootfs is NewRootfs with the kernel's boot ID, or "" to sync each
// tree as it is unpacked.
func newRootfs(cfg RootfsConfig, boot string) (*Rootfs, error) {
	if cfg.Dir == "" {
		return nil, errors.New("RootfsConfig.Dir must be set: the directory where root filesystems are kept")
	}
	if _, err := cfg.Limits.withDefaults(); err != nil {
		return nil, err
	}
	dir := filepath.Join(cfg.Dir, "rootfs")
	if o := cfg.Limits.Owner; o != nil {
		dir += fmt.Sprintf("-%d-%d", o.UID, o.GID)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("make the root filesystem directory: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read the root filesystem directory: %w", err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			if err := removeTree(filepath.Join(dir, e.Name())); err != nil {
				return nil, fmt.Errorf("remove an unfinished root filesystem: %w", err)
			}
		}
	}
	r := &Rootfs{dir: dir, lim: cfg.Limits, inflight: map[string]*unpackCall{}, unsynced: map[string]uint64{}}
	r.sync = newSyncer(dir, r.beginSync)
	if r.marks, err = openMarkers(filepath.Join(cfg.Dir, "unsynced", filepath.Base(dir)), boot); err != nil {
		return nil, err
	}
	current, earlier, err := r.marks.list()
	if err != nil {
		return nil, fmt.Errorf("read the marks of unsynced root filesystems: %w", err)
	}
	for n := range earlier {
		if err := r.Remove(v1.Hash{Algorithm: "sha256", Hex: n}); err != nil && !errors.Is(err, ErrConfig) {
			return nil, fmt.Errorf("remove a root filesystem unpacked before a crash: %w", err)
		}
	}
	if err := r.marks.dropEarlier(); err != nil {
		return nil, fmt.Errorf("remove the marks of root filesystems unpacked before a crash: %w", err)
	}
	// A tree this boot unpacked, before this process, is whole in the
	// kernel's cache: it is kept and synced.
	for _, n := range current {
		if info, err := os.Lstat(filepath.Join(dir, n)); err == nil && info.IsDir() {
			r.unsynced[n] = 0
			continue
		}
		r.marks.unmark(n)
	}
	if len(current) > 0 {
		r.sync.request()
	}
	return r, nil
}

// beginSync is the syncer's begin: it notes the trees unsynced so far,
// whose marks the returned commit removes.
func (r *Rootfs) beginSync() (commit func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	trees := maps.Clone(r.unsynced)
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		for hex, n := range trees {
			// A tree removed and unpacked again since is a new write.
			if now, ok := r.unsynced[hex]; ok && now == n {
				delete(r.unsynced, hex)
				r.marks.unmark(hex)
			}
		}
	}
}

// Path returns where the root filesystem of the image digest is kept,
// whether or not it is there yet.
func (r *Rootfs) Path(digest v1.Hash) (string, error) {
	if err := checkDigest(digest); err != nil {
		return "", err
	}
	return filepath.Join(r.dir, digest.Hex), nil
}

// Unpack returns the root filesystem of the image digest, whose layers,
// the base first, are layers, unpacking them when it is not there yet.
// The caller vouches that layers are the image's. Errors are those of
// the package Unpack; when the unpack another caller waits on fails
// because that caller's ctx ended, the waiting caller unpacks itself.
func (r *Rootfs) Unpack(ctx context.Context, digest v1.Hash, layers []v1.Layer) (string, error) {
	final, err := r.Path(digest)
	if err != nil {
		return "", err
	}
	for {
		if info, err := os.Lstat(final); err == nil && info.IsDir() {
			return final, nil
		}
		r.mu.Lock()
		c, ok := r.inflight[digest.Hex]
		if !ok {
			c = &unpackCall{done: make(chan struct{})}
			r.inflight[digest.Hex] = c
			r.mu.Unlock()
			c.err = r.unpack(ctx, final, digest, layers)
			r.mu.Lock()
			delete(r.inflight, digest.Hex)
			r.mu.Unlock()
			close(c.done)
			if c.err != nil {
				return "", c.err
			}
			return final, nil
		}
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return "", context.Cause(ctx)
		case <-c.done:
		}
		isCtx := errors.Is(c.err, context.Canceled) || errors.Is(c.err, context.DeadlineExceeded)
		if c.err != nil && !isCtx {
			return "", c.err
		}
	}
}

// unpack builds the root filesystem in a temporary directory and renames
// it to final.
func (r *Rootfs) unpack(ctx context.Context, final string, digest v1.Hash, layers []v1.Layer) error {
	tmp, err := os.MkdirTemp(r.dir, tmpPrefix+digest.Hex+"-")
	if err != nil {
		return fmt.Errorf("make a directory to unpack %s in: %w", digest, err)
	}
	if err := r.build(ctx, tmp, layers); err != nil {
		if rerr := removeTree(tmp); rerr != nil {
			return errors.Join(fmt.Errorf("unpack %s: %w", digest, err), rerr)
		}
		return fmt.Errorf("unpack %s: %w", digest, err)
	}
	if err := r.place(tmp, final, digest); err != nil {
		return errors.Join(fmt.Errorf("move the root filesystem of %s into place: %w", digest, err), removeTree(tmp))
	}
	return nil
}

// place renames the tree tmp to final, marked as unsynced first, so
// that a crash that loses its content also finds its mark; or, when the
// boot ID is unknown, synced first.
func (r *Rootfs) place(tmp, final string, digest v1.Hash) error {
	if !r.marks.enabled() {
		if err := syncfs(tmp); err != nil {
			return err
		}
		return os.Rename(tmp, final)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.marks.mark(digest.Hex); err != nil {
		return err
	}
	if err := os.Rename(tmp, final); err != nil {
		return err
	}
	r.unpacks++
	r.unsynced[digest.Hex] = r.unpacks
	r.sync.request()
	return nil
}

// build unpacks layers into tmp.
func (r *Rootfs) build(ctx context.Context, tmp string, layers []v1.Layer) error {
	// MkdirTemp made tmp 0700; a root filesystem's root is 0755.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	_, err := Unpack(ctx, layers, tmp, r.lim)
	return err
}

// Remove removes the root filesystem of the image digest; no View of it
// may be open. It is first renamed out of place, so that a crash midway
// leaves no partial tree under the digest's name.
func (r *Rootfs) Remove(digest v1.Hash) error {
	final, err := r.Path(digest)
	if err != nil {
		return err
	}
	tmp := filepath.Join(r.dir, tmpPrefix+"remove-"+digest.Hex)
	if err := os.Rename(final, tmp); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("remove the root filesystem of %s: %w", digest, err)
	}
	return removeTree(tmp)
}

// checkDigest refuses a digest whose hex could name anything but one
// entry of the directory.
func checkDigest(h v1.Hash) error {
	if h.Algorithm == "" || len(h.Hex) < 32 || strings.Trim(h.Hex, "0123456789abcdef") != "" {
		return fmt.Errorf("%w: %q is not an image digest", ErrConfig, h.String())
	}
	return nil
}

// removeTree removes dir and everything below it. When the process is
// not root it first makes each directory writable by its owner, as an
// image's read-only directories would stop the removal.
func removeTree(dir string) error {
	if os.Geteuid() != 0 {
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				if info, err := d.Info(); err == nil && info.Mode().Perm()&0o700 != 0o700 {
					_ = os.Chmod(p, info.Mode().Perm()|0o700)
				}
			}
			return nil
		})
	}
	return os.RemoveAll(dir)
}
