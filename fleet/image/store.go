package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Store is what a runner needs of images: a Puller and a Rootfs over one
// directory. Prepare gives a job its image as a writable root
// filesystem. It is safe for concurrent use. One Store owns its
// directory, which it locks (flock(2)) until Close: a second Store over
// it, in this process or another runner's, is refused, since each would
// take the other's unfinished downloads and unpacks for leftovers.
type Store struct {
	puller *Puller
	rootfs *Rootfs
	lock   *os.File
	owner  *Owner
}

// RemoveView removes the view in dir (a viewDir given to NewView or
// Prepare) that a process which stopped without closing it left: it
// detaches its overlay mount, if it has one, and removes the tree. A dir
// that does not exist is not an error.
func RemoveView(dir string) error {
	// Removing through the mount would only fill its upper directory
	// with whiteouts, and the mount itself would stay.
	if err := unix.Unmount(filepath.Join(dir, "root"), unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("unmount the view %s: %w", dir, err)
	}
	if err := removeTree(dir); err != nil {
		return fmt.Errorf("remove the view %s: %w", dir, err)
	}
	return nil
}

// NewStore locks and opens the image directory cfg.Dir: layers pulled
// with cfg, root filesystems unpacked within lim.
func NewStore(cfg Config, lim Limits) (*Store, error) {
	if cfg.Dir == "" {
		return nil, errors.New("image: Dir is required")
	}
	if lim.MaxLayers == 0 {
		lim.MaxLayers = cfg.MaxLayers
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(cfg.Dir, "store.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("image: the image directory %s is in use by another Store (another runner?): give each runner its own", cfg.Dir)
		}
		return nil, fmt.Errorf("image: locking %s: %w", cfg.Dir, err)
	}
	p, err := New(cfg)
	if err != nil {
		lock.Close()
		return nil, err
	}
	r, err := NewRootfs(RootfsConfig{Dir: cfg.Dir, Limits: lim})
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("image: %w", err)
	}
	return &Store{puller: p, rootfs: r, lock: lock, owner: lim.Owner}, nil
}

// Close waits for the background sync of the blobs and root filesystems
// the Store wrote, so that a clean stop leaves none to check or unpack
// again after a reboot, and releases the image directory; the Store
// must not be used after. The jobs' views are theirs to close
// (Prepared.Close).
func (s *Store) Close() error {
	err := errors.Join(s.puller.cache.sync.wait(), s.rootfs.sync.wait())
	return errors.Join(err, s.lock.Close())
}

// Prepared is a job's image: what it resolved to and the job's own view
// of its root filesystem. Close throws the view away and lets the cache
// evict the image's layers again.
type Prepared struct {
	Image
	// View is the job's writable root filesystem (View.Root).
	View   *View
	pulled *Pulled
}

// Close removes the job's view and unpins the image's layers. It is safe
// to call twice.
func (p *Prepared) Close() error {
	err := p.View.Close()
	p.pulled.Release()
	return err
}

// Prepare pulls ref as opts say, unpacks its root filesystem unless a
// job on the same digest did already, and makes the job's view of it in
// viewDir (a directory Prepare makes; its parent must exist). Errors
// carry the package's failure classes: ErrConfig (ErrUnsafeLayer among
// them), ErrRegistry, ErrBudget. A view without an Owner of its own
// gets the Store's Limits.Owner.
func (s *Store) Prepare(ctx context.Context, ref string, opts PullOptions, viewDir string, vo ViewOptions) (*Prepared, error) {
	if vo.Owner == nil {
		vo.Owner = s.owner
	}
	pulled, err := s.puller.Pull(ctx, ref, opts)
	if err != nil {
		return nil, err
	}
	layers := make([]v1.Layer, len(pulled.Layers))
	for i, l := range pulled.Layers {
		if layers[i], err = partial.CompressedToLayer(localLayer{l}); err != nil {
			pulled.Release()
			return nil, fmt.Errorf("image %s: layer %s: %w", ref, l.Digest, err)
		}
	}
	root, err := s.rootfs.Unpack(ctx, pulled.Digest, layers)
	if err != nil {
		pulled.Release()
		return nil, fmt.Errorf("image %s (%s): %w", ref, pulled.Digest, err)
	}
	view, err := NewView(ctx, root, viewDir, vo)
	if err != nil {
		pulled.Release()
		return nil, fmt.Errorf("image %s (%s): %w", ref, pulled.Digest, err)
	}
	return &Prepared{Image: pulled.Image, View: view, pulled: pulled}, nil
}

// localLayer is a layer the Puller keeps, as go-containerregistry reads
// layers: its compressed blob is the cache's file, verified when it was
// stored.
type localLayer struct{ l Layer }

func (x localLayer) Digest() (v1.Hash, error)            { return x.l.Digest, nil }
func (x localLayer) DiffID() (v1.Hash, error)            { return x.l.DiffID, nil }
func (x localLayer) Size() (int64, error)                { return x.l.Size, nil }
func (x localLayer) MediaType() (types.MediaType, error) { return x.l.MediaType, nil }

func (x localLayer) Compressed() (io.ReadCloser, error) {
	f, err := os.Open(x.l.Path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("the cache lost layer %s: %w", x.l.Digest, err)
	}
	return f, err
}
