package image

import (
	"archive/tar"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/cikit/cikit/internal/rootdir"
)

// Defaults of Limits, used where a field is zero.
const (
	// DefaultMaxBytes bounds the file content an image unpacks to: 16 GiB.
	DefaultMaxBytes int64 = 16 << 30
	// DefaultMaxFiles bounds the entries of all an image's layers.
	DefaultMaxFiles = 1 << 20
)

// Limits bound what Unpack writes. The zero value means the defaults.
type Limits struct {
	// MaxBytes bounds the bytes of file content written, over all the
	// layers, counted as they are written: a small layer inflating to
	// more (a decompression bomb) stops at the first entry over it.
	MaxBytes int64
	// MaxFiles bounds the tar entries read, over all the layers,
	// whiteouts and directories included.
	MaxFiles int
	// MaxLayers bounds the number of layers.
	MaxLayers int
	// KeepSetuid keeps the setuid and setgid bits of regular files.
	// Without it they are dropped: a job's image cannot bring a program
	// that runs with its owner's rights.
	KeepSetuid bool
	// Owner, when set, owns every entry written, in place of the owners
	// the layers name. A runner whose jobs run as one unprivileged host
	// user, which each job's user namespace maps to the image's user,
	// unpacks its images owned by that user: the job's root then owns its
	// image's files and may change them in its view, as in a container,
	// while nothing on the host is root's. Without Owner, a root process
	// gives entries the layers' owners and any other process its own.
	// Setting an Owner other than the process's own needs root.
	Owner *Owner
}

// Owner is a host user and group that own the files of a root
// filesystem (Limits.Owner, ViewOptions.Owner).
type Owner struct{ UID, GID int }

// check returns why o cannot be given to files by this process, or nil.
func (o *Owner) check() error {
	switch {
	case o == nil:
		return nil
	case o.UID < 0 || o.GID < 0:
		return fmt.Errorf("Owner %d:%d must not be negative", o.UID, o.GID)
	case os.Geteuid() != 0 && (o.UID != os.Geteuid() || o.GID != os.Getegid()):
		return fmt.Errorf("Owner %d:%d differs from this process's user %d:%d, which only root may change", o.UID, o.GID, os.Geteuid(), os.Getegid())
	}
	return nil
}

// ids returns who owns an entry whose layer names uid and gid.
func (o *Owner) ids(uid, gid int) (int, int) {
	if o != nil {
		return o.UID, o.GID
	}
	return uid, gid
}

func (l Limits) withDefaults() (Limits, error) {
	if l.MaxBytes < 0 || l.MaxFiles < 0 || l.MaxLayers < 0 {
		return l, fmt.Errorf("Limits must not be negative (MaxBytes %d, MaxFiles %d, MaxLayers %d); 0 means the default", l.MaxBytes, l.MaxFiles, l.MaxLayers)
	}
	if err := l.Owner.check(); err != nil {
		return l, fmt.Errorf("Limits.%w", err)
	}
	l.MaxBytes = cmp.Or(l.MaxBytes, DefaultMaxBytes)
	l.MaxFiles = cmp.Or(l.MaxFiles, DefaultMaxFiles)
	l.MaxLayers = cmp.Or(l.MaxLayers, DefaultMaxLayers)
	return l, nil
}

// Stats counts what Unpack wrote. On an error it counts what was
// written before it.
type Stats struct {
	Layers    int
	Files     int
	Dirs      int
	Symlinks  int
	HardLinks int
	// Whiteouts counts the whiteout and opaque-directory markers applied.
	Whiteouts int
	// SetuidDropped counts the files whose setuid or setgid bit was
	// dropped.
	SetuidDropped int
	// Bytes is the file content written, in bytes.
	Bytes int64
}

// UnsafeLayerError is the error Unpack returns for a layer it refuses:
// an entry that would land outside the root filesystem, one of a type a
// root filesystem may not hold, or more than the Limits allow. It
// matches both ErrUnsafeLayer and ErrConfig: the image is at fault, and
// pulling it again cannot help.
type UnsafeLayerError struct {
	// Layer is the index of the layer in the image, from 0 at the base.
	Layer int
	// Entry is the name of the tar entry as the layer spells it; empty
	// when the refusal is about the layers as a whole.
	Entry string
	// Reason says what is wrong, as a sentence fragment.
	Reason string
}

func (e *UnsafeLayerError) Error() string {
	if e.Entry == "" {
		return fmt.Sprintf("%s: layer %d %s", ErrUnsafeLayer, e.Layer, e.Reason)
	}
	return fmt.Sprintf("%s: layer %d: entry %q %s", ErrUnsafeLayer, e.Layer, e.Entry, e.Reason)
}

// Is reports whether target is ErrUnsafeLayer or ErrConfig.
func (e *UnsafeLayerError) Is(target error) bool {
	return target == ErrUnsafeLayer || target == ErrConfig
}

// OCI whiteout markers: ".wh.<name>" removes name from the layers below;
// ".wh..wh..opq" in a directory removes everything the layers below put
// in it. Other names with the ".wh..wh." prefix are markers of aufs that
// say nothing about the root filesystem.
const (
	whiteoutPrefix = ".wh."
	whiteoutMeta   = ".wh..wh."
	whiteoutOpaque = ".wh..wh..opq"
)

// Unpack applies layers, the base first, into dir, an empty directory,
// the way a container engine builds an image's root filesystem, and
// reports what it wrote.
//
// It writes regular files, directories, symlinks and hard links, with
// their modes and modification times, and applies the OCI whiteouts and
// opaque directories of each layer to the layers below it (an entry of
// the same layer is kept, as the image specification says). The owners
// of the entries are kept when the process runs as root; otherwise the
// files belong to the process, since it could not give them away.
// Symlink times are not set (os.Root has no Lchtimes); directory modes
// and times are set last, once nothing more is written into them.
//
// Layers are untrusted. Every write goes through an os.Root of dir, and
// no write goes through a symlink, wherever it points: symlinks are
// stored as the layer spells them (a root filesystem holds absolute
// ones, /bin → usr/bin) and never followed while unpacking. Unpack
// refuses, with an *UnsafeLayerError, an entry with an absolute name or
// a ".." segment, one that would be written through a symlink, a hard
// link to anything but a file or symlink already in the root filesystem,
// device nodes, FIFOs and other types, more than Limits.MaxBytes of
// content, more than Limits.MaxFiles entries and more than
// Limits.MaxLayers layers. The setuid and setgid bits of files are
// dropped unless Limits.KeepSetuid (setgid directories keep theirs: it
// only makes new files inherit the group). On any error dir holds part
// of the image and should be thrown away.
//
// Compressed layers (gzip, zstd) are read through their Uncompressed
// stream; an error reading it is returned as it is, since a registry's
// failure is of another class than the image's.
func Unpack(ctx context.Context, layers []v1.Layer, dir string, lim Limits) (Stats, error) {
	var stats Stats
	lim, err := lim.withDefaults()
	if err != nil {
		return stats, err
	}
	if len(layers) > lim.MaxLayers {
		return stats, &UnsafeLayerError{Layer: lim.MaxLayers, Reason: fmt.Sprintf("is past the image's limit of %d layers (Limits.MaxLayers)", lim.MaxLayers)}
	}
	rt, err := os.OpenRoot(dir)
	if err != nil {
		return stats, fmt.Errorf("open the root filesystem directory: %w", err)
	}
	defer rt.Close()
	if err := checkEmpty(rt); err != nil {
		return stats, err
	}
	x := &extractor{
		ctx:   ctx,
		root:  rt,
		open:  rootdir.Open{Root: rt},
		lim:   lim,
		chown: os.Geteuid() == 0,
		known: map[string]bool{},
		dirs:  map[string]dirMeta{},
		buf:   make([]byte, 256<<10),
		stats: &stats,
	}
	defer x.open.Close()
	for i, l := range layers {
		if err := x.layer(i, l); err != nil {
			return stats, err
		}
		stats.Layers++
	}
	return stats, x.finishDirs()
}

// checkEmpty returns an error unless the root holds nothing.
func checkEmpty(rt *os.Root) error {
	d, err := rt.Open(".")
	if err != nil {
		return fmt.Errorf("open the root filesystem directory: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(1)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read the root filesystem directory: %w", err)
	}
	if len(names) > 0 {
		return fmt.Errorf("the root filesystem directory %s holds %q; Unpack needs an empty one", rt.Name(), names[0])
	}
	return nil
}

// extractor is the state of one Unpack.
type extractor struct {
	ctx   context.Context
	root  *os.Root
	lim   Limits
	chown bool
	// layerIdx is the layer being applied; entries counts the entries
	// of all layers so far.
	layerIdx int
	entries  int
	// known holds paths checked to be real directories (not symlinks).
	// Anything that removes a directory clears it, so that a path
	// whiteout removed and a later layer made a symlink is checked again.
	known map[string]bool
	// seen holds the paths the current layer wrote, and their parent
	// directories: whiteouts and opaque markers hide only what lower
	// layers wrote.
	seen map[string]bool
	// dirs holds the mode, owner and time of each directory, as the last
	// layer naming it said, for finishDirs.
	dirs map[string]dirMeta
	// open keeps the directory of the entries in hand open.
	open  rootdir.Open
	buf   []byte
	stats *Stats
}

// dirMeta is what a directory entry says of its directory.
type dirMeta struct {
	mode    fs.FileMode
	modTime time.Time
}

// unsafe is an *UnsafeLayerError for the entry named name.
func (x *extractor) unsafe(name, format string, args ...any) error {
	return &UnsafeLayerError{Layer: x.layerIdx, Entry: name, Reason: fmt.Sprintf(format, args...)}
}

// layer applies one layer.
func (x *extractor) layer(i int, l v1.Layer) error {
	x.layerIdx = i
	x.seen = map[string]bool{}
	rc, err := l.Uncompressed()
	if err != nil {
		return fmt.Errorf("read layer %d: %w", i, err)
	}
	defer rc.Close()
	ra := newReadAhead(rc)
	defer ra.Close()
	tr := tar.NewReader(ra)
	for {
		if err := x.ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read layer %d: %w", i, err)
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		x.entries++
		if x.entries > x.lim.MaxFiles {
			return x.unsafe(hdr.Name, "is past the image's limit of %d entries (Limits.MaxFiles)", x.lim.MaxFiles)
		}
		if err := x.entry(hdr, tr); err != nil {
			return err
		}
	}
}

// entry applies one tar entry.
func (x *extractor) entry(hdr *tar.Header, r io.Reader) error {
	name, err := x.cleanName(hdr.Name, hdr.Name)
	if err != nil {
		return err
	}
	if name == "." {
		if hdr.Typeflag != tar.TypeDir {
			return x.unsafe(hdr.Name, "names the root itself but is not a directory")
		}
		return nil
	}
	if base := path.Base(name); strings.HasPrefix(base, whiteoutPrefix) {
		return x.whiteout(hdr.Name, path.Dir(name), base)
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		return x.dir(name, hdr)
	case tar.TypeReg:
		return x.file(name, hdr, r)
	case tar.TypeSymlink:
		return x.symlink(name, hdr)
	case tar.TypeLink:
		return x.hardlink(name, hdr)
	case tar.TypeChar, tar.TypeBlock:
		return x.unsafe(hdr.Name, "is a device node; an image's root filesystem may not bring devices")
	case tar.TypeFifo:
		return x.unsafe(hdr.Name, "is a FIFO; an image's root filesystem holds only files, directories and links")
	default:
		return x.unsafe(hdr.Name, "has the tar type %q; an image's root filesystem holds only files, directories and links", string(hdr.Typeflag))
	}
}

// cleanName returns name, an entry's name or a hard link's target, as a
// clean path relative to the root ("." for the root itself), or an
// *UnsafeLayerError when it is absolute or has a ".." segment. Leading
// "./" and trailing slashes, which tar writers add, are accepted.
func (x *extractor) cleanName(entry, name string) (string, error) {
	switch {
	case name == "":
		return "", x.unsafe(entry, "has an empty name")
	case strings.HasPrefix(name, "/"):
		return "", x.unsafe(entry, "names the absolute path %q; a layer holds paths relative to the root", name)
	case strings.ContainsRune(name, 0):
		return "", x.unsafe(entry, "has a NUL byte in %q", name)
	}
	for seg := range strings.SplitSeq(name, "/") {
		if seg == ".." {
			return "", x.unsafe(entry, "has a \"..\" segment in %q; a layer holds paths inside the root", name)
		}
	}
	return path.Clean(name), nil
}

// parents makes sure every parent directory of name is a real
// directory, making the missing ones, and notes them as seen in this
// layer. A symlink among them is an *UnsafeLayerError: no write goes
// through one, wherever it points.
func (x *extractor) parents(entry, name string) error {
	x.markSeen(path.Dir(name))
	return x.realDir(entry, path.Dir(name))
}

// realDir makes sure dir and each of its parents is a real directory,
// making the missing ones.
func (x *extractor) realDir(entry, dir string) error {
	if dir == "." || x.known[dir] {
		return nil
	}
	for p := range parentsOf(dir) {
		if x.known[p] {
			continue
		}
		info, err := x.root.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := x.root.Mkdir(p, 0o755); err != nil {
				return fmt.Errorf("layer %d: extract %q: %w", x.layerIdx, entry, err)
			}
		case err != nil:
			return fmt.Errorf("layer %d: extract %q: %w", x.layerIdx, entry, err)
		case info.Mode()&fs.ModeSymlink != 0:
			return x.unsafe(entry, "would be written through the symlink %q", p)
		case !info.IsDir():
			return x.unsafe(entry, "would be written below %q, which is not a directory", p)
		}
		x.known[p] = true
	}
	return nil
}

// markSeen notes name and its parents as written by this layer.
func (x *extractor) markSeen(name string) {
	for name != "." && !x.seen[name] {
		x.seen[name] = true
		name = path.Dir(name)
	}
}

// removeAll removes name and what is below it, and forgets what was
// known of directories, which may have been among them.
func (x *extractor) removeAll(entry, name string) error {
	x.open.Close()
	clear(x.known)
	if err := x.root.RemoveAll(name); err != nil {
		return fmt.Errorf("layer %d: extract %q: %w", x.layerIdx, entry, err)
	}
	return nil
}

// replace makes room at name for an entry that is not a directory: what
// a lower layer put there goes; a directory this layer made stays and is
// an error.
func (x *extractor) replace(entry, name string) error {
	info, err := x.root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("layer %d: extract %q: %w", x.layerIdx, entry, err)
	case info.IsDir() && x.seen[name]:
		return x.unsafe(entry, "replaces a directory of the same layer")
	case info.IsDir():
		return x.removeAll(entry, name)
	}
	if err := x.root.Remove(name); err != nil {
		return fmt.Errorf("layer %d: extract %q: %w", x.layerIdx, entry, err)
	}
	return nil
}

// whiteout applies the marker base in dir.
func (x *extractor) whiteout(entry, dir, base string) error {
	switch {
	case base == whiteoutOpaque:
		if err := x.parents(entry, path.Join(dir, base)); err != nil {
			return err
		}
		x.stats.Whiteouts++
		return x.hideBelow(entry, dir)
	case strings.HasPrefix(base, whiteoutMeta):
		return nil
	}
	target := strings.TrimPrefix(base, whiteoutPrefix)
	if target == "" || target == "." || target == ".." {
		return x.unsafe(entry, "is a whiteout of %q, which names no entry", target)
	}
	if err := x.parents(entry, path.Join(dir, base)); err != nil {
		return err
	}
	x.stats.Whiteouts++
	return x.hide(entry, path.Join(dir, target))
}

// hide removes what lower layers put at name: all of it, unless this
// layer wrote name too, then what lower layers put below it.
func (x *extractor) hide(entry, name string) error {
	info, err := x.root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("layer %d: extract %q: %w", x.layerIdx, entry, err)
	case !x.seen[name]:
		return x.removeAll(entry, name)
	case info.IsDir():
		return x.hideBelow(entry, name)
	}
	return nil
}

// hideBelow removes what lower layers put in the directory dir.
func (x *extractor) hideBelow(entry, dir string) error {
	d, err := x.root.Open(dir)
	if err != nil {
		return fmt.Errorf("layer %d: extract %q: %w", x.layerIdx, entry, err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return fmt.Errorf("layer %d: extract %q: %w", x.layerIdx, entry, err)
	}
	for _, n := range names {
		if err := x.hide(entry, path.Join(dir, n)); err != nil {
			return err
		}
	}
	return nil
}

// mode returns the permission bits of hdr with the sticky bit, and the
// setuid and setgid bits when kept.
func (x *extractor) mode(hdr *tar.Header, isDir bool) fs.FileMode {
	m := fs.FileMode(hdr.Mode) & fs.ModePerm
	if hdr.Mode&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	if hdr.Mode&0o2000 != 0 && (isDir || x.lim.KeepSetuid) {
		m |= fs.ModeSetgid
	}
	if hdr.Mode&0o4000 != 0 && x.lim.KeepSetuid {
		m |= fs.ModeSetuid
	}
	if !isDir && !x.lim.KeepSetuid && hdr.Mode&0o6000 != 0 {
		x.stats.SetuidDropped++
	}
	return m
}

// file writes a regular file, into a new inode: a file already there is
// unlinked, not overwritten, so that a hard link to it keeps its
// content.
func (x *extractor) file(name string, hdr *tar.Header, r io.Reader) error {
	if hdr.Size > x.lim.MaxBytes-x.stats.Bytes {
		return x.unsafe(hdr.Name, "would take the image past its limit of %d bytes (Limits.MaxBytes)", x.lim.MaxBytes)
	}
	if err := x.parents(hdr.Name, name); err != nil {
		return err
	}
	if err := x.replace(hdr.Name, name); err != nil {
		return err
	}
	x.seen[name] = true
	dir, err := x.open.Dir(path.Dir(name))
	if err != nil {
		return fmt.Errorf("layer %d: extract %q: %w", x.layerIdx, hdr.Name, err)
	}
	base := path.Base(name)
	f, err := dir.OpenFile(base, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("layer %d: extract %q: %w", x.layerIdx, hdr.Name, err)
	}
	// The tar reader stops at hdr.Size, which the check above bounds;
	// the limit is applied again to what is written, whatever the
	// reader does.
	lr := io.LimitReader(ctxReader{x.ctx, r}, x.lim.MaxBytes-x.stats.Bytes+1)
	n, err := io.CopyBuffer(rootdir.WriterOnly{W: f}, lr, x.buf)
	x.stats.Bytes += n
	if err == nil && x.stats.Bytes > x.lim.MaxBytes {
		err = x.unsafe(hdr.Name, "would take the image past its limit of %d bytes (Limits.MaxBytes)", x.lim.MaxBytes)
	}
	if err == nil && x.chown {
		err = f.Chown(x.lim.Owner.ids(hdr.Uid, hdr.Gid))
	}
	if err == nil {
		// After the chown, which clears the setuid bits.
		err = f.Chmod(x.mode(hdr, false))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = dir.Chtimes(base, hdr.AccessTime, hdr.ModTime)
	}
	if err != nil {
		var ue *UnsafeLayerError
		if errors.As(err, &ue) {
			return err
		}
		return fmt.Errorf("layer %d: extract %q: %w", x.layerIdx, hdr.Name, err)
	}
	x.stats.Files++
	return nil
}

// symlink writes a symlink, its target as the layer spells it.
func (x *extractor) symlink(name string, hdr *tar.Header) error {
	if err := x.parents(hdr.Name, name); err != nil {
		return err
	}
	if err := x.replace(hdr.Name, name); err != nil {
		return err
	}
	x.seen[name] = true
	err := x.root.Symlink(hdr.Linkname, name)
	if err == nil && x.chown {
		uid, gid := x.lim.Owner.ids(hdr.Uid, hdr.Gid)
		err = x.root.Lchown(name, uid, gid)
	}
	if err != nil {
		return fmt.Errorf("layer %d: extract %q: %w", x.layerIdx, hdr.Name, err)
	}
	x.stats.Symlinks++
	return nil
}

// hardlink writes a hard link to a file or symlink already in the root
// filesystem, reached through real directories only.
func (x *extractor) hardlink(name string, hdr *tar.Header) error {
	target, err := x.cleanName(hdr.Name, hdr.Linkname)
	if err != nil {
		return err
	}
	if target == "." || target == name {
		return x.unsafe(hdr.Name, "is a hard link to %q; expected another entry", hdr.Linkname)
	}
	if err := x.existingDir(hdr.Name, path.Dir(target)); err != nil {
		return err
	}
	info, err := x.root.Lstat(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return x.unsafe(hdr.Name, "is a hard link to %q, which is not in the root filesystem", hdr.Linkname)
	case err != nil:
		return fmt.Errorf("layer %d: extract %q: %w", x.layerIdx, hdr.Name, err)
	case !info.Mode().IsRegular() && info.Mode()&fs.ModeSymlink == 0:
		return x.unsafe(hdr.Name, "is a hard link to %q, which is not a file or symlink", hdr.Linkname)
	}
	if err := x.parents(hdr.Name, name); err != nil {
		return err
	}
	if err := x.replace(hdr.Name, name); err != nil {
		return err
	}
	x.seen[name] = true
	if err := x.root.Link(target, name); err != nil {
		return fmt.Errorf("layer %d: extract %q: %w", x.layerIdx, hdr.Name, err)
	}
	x.stats.HardLinks++
	return nil
}

// existingDir checks that dir and its parents are real directories,
// without making any: a hard link's target must already be there.
func (x *extractor) existingDir(entry, dir string) error {
	for p := range parentsOf(dir) {
		if x.known[p] {
			continue
		}
		info, err := x.root.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return x.unsafe(entry, "is a hard link below %q, which is not in the root filesystem", p)
		case err != nil:
			return fmt.Errorf("layer %d: extract %q: %w", x.layerIdx, entry, err)
		case info.Mode()&fs.ModeSymlink != 0:
			return x.unsafe(entry, "is a hard link through the symlink %q", p)
		case !info.IsDir():
			return x.unsafe(entry, "is a hard link below %q, which is not a directory", p)
		}
		x.known[p] = true
	}
	return nil
}

// parentsOf yields dir's ancestors and dir, the shortest first; nothing
// for ".".
func parentsOf(dir string) func(func(string) bool) {
	return func(yield func(string) bool) {
		if dir == "." {
			return
		}
		for i := 1; i <= len(dir); i++ {
			if (i == len(dir) || dir[i] == '/') && !yield(dir[:i]) {
				return
			}
		}
	}
}

// dir makes a directory, keeping one already there (a symlink or file
// there goes), and notes its mode and time for finishDirs. Until then it
// stays writable by its owner, so that its entries can be written.
func (x *extractor) dir(name string, hdr *tar.Header) error {
	if err := x.parents(hdr.Name, name); err != nil {
		return err
	}
	x.seen[name] = true
	if !x.known[name] {
		info, err := x.root.Lstat(name)
		switch {
		case err == nil && info.IsDir():
			if info.Mode().Perm()&0o700 != 0o700 {
				err = x.root.Chmod(name, info.Mode().Perm()|0o700)
			}
		case err == nil:
			if err = x.root.Remove(name); err == nil {
				err = x.root.Mkdir(name, 0o700)
			}
		case errors.Is(err, fs.ErrNotExist):
			err = x.root.Mkdir(name, 0o700)
		}
		if err != nil {
			return fmt.Errorf("layer %d: extract %q: %w", x.layerIdx, hdr.Name, err)
		}
		x.known[name] = true
	}
	if x.chown {
		uid, gid := x.lim.Owner.ids(hdr.Uid, hdr.Gid)
		if err := x.root.Lchown(name, uid, gid); err != nil {
			return fmt.Errorf("layer %d: extract %q: %w", x.layerIdx, hdr.Name, err)
		}
	}
	x.dirs[name] = dirMeta{mode: x.mode(hdr, true), modTime: hdr.ModTime}
	x.stats.Dirs++
	return nil
}

// finishDirs gives the directories their modes and times, the deepest
// first, skipping those a later layer removed or replaced.
func (x *extractor) finishDirs() error {
	x.open.Close()
	names := make([]string, 0, len(x.dirs))
	for n := range x.dirs {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Compare(strings.Count(b, "/"), strings.Count(a, "/"))
	})
	for _, n := range names {
		if err := x.existingDir(n, n); err != nil {
			var ue *UnsafeLayerError
			if errors.As(err, &ue) {
				continue
			}
			return err
		}
		d := x.dirs[n]
		if err := x.root.Chmod(n, d.mode); err != nil {
			return fmt.Errorf("set the mode of %q: %w", n, err)
		}
		if err := x.root.Chtimes(n, d.modTime, d.modTime); err != nil {
			return fmt.Errorf("set the time of %q: %w", n, err)
		}
	}
	return nil
}

// ctxReader reads from r until ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// Read-ahead of a layer's stream, in chunks.
const (
	readAheadChunks    = 4
	readAheadChunkSize = 256 << 10
)

// readAhead reads r on a goroutine of its own, up to readAheadChunks
// chunks ahead of its reader, so that a layer's decompression runs
// beside the writes of its entries. r's error is returned as it is,
// after the bytes read before it.
type readAhead struct {
	full chan []byte // chunks read, in order; closed after err is set
	free chan []byte
	stop chan struct{}
	err  error
	cur  []byte // what is left of chunk
	// chunk is the chunk being read, given back when done.
	chunk []byte
}

func newReadAhead(r io.Reader) *readAhead {
	ra := &readAhead{
		full: make(chan []byte, readAheadChunks),
		free: make(chan []byte, readAheadChunks),
		stop: make(chan struct{}),
	}
	for range readAheadChunks {
		ra.free <- make([]byte, readAheadChunkSize)
	}
	go ra.fill(r)
	return ra
}

func (ra *readAhead) fill(r io.Reader) {
	defer close(ra.full)
	for {
		var b []byte
		select {
		case b = <-ra.free:
		case <-ra.stop:
			return
		}
		n := 0
		var err error
		for n < len(b) && err == nil {
			var m int
			m, err = r.Read(b[n:])
			n += m
		}
		if n > 0 {
			// Never blocks: full holds as many chunks as there are.
			ra.full <- b[:n]
		}
		if err != nil {
			ra.err = err
			return
		}
	}
}

func (ra *readAhead) Read(p []byte) (int, error) {
	for len(ra.cur) == 0 {
		if ra.chunk != nil {
			ra.free <- ra.chunk[:cap(ra.chunk)]
			ra.chunk = nil
		}
		b, ok := <-ra.full
		if !ok {
			return 0, ra.err
		}
		ra.chunk, ra.cur = b, b
	}
	n := copy(p, ra.cur)
	ra.cur = ra.cur[n:]
	return n, nil
}

// Close stops the reading and waits for its goroutine, after which r
// may be closed.
func (ra *readAhead) Close() {
	close(ra.stop)
	for range ra.full {
	}
}
