package artifacts

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
	"path/filepath"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/cikit/cikit/internal/rootdir"
)

// PackOptions selects what Pack archives.
type PackOptions struct {
	// Root is the workspace, an absolute path; every other path is
	// relative to it, and nothing outside it is archived.
	Root string
	// Paths are globs relative to Root ("dist/", "bin/app", "**/*.log",
	// "node_modules"), with ** as in github.com/bmatcuk/doublestar. A
	// directory matched is archived whole, recursively; a symlink matched
	// is archived as a symlink. A path that matches nothing adds nothing.
	Paths []string
	// Exclude are globs whose matches are left out, like GitLab's
	// artifacts:exclude; a directory matched is left out whole.
	Exclude []string
	// Files are more paths relative to Root, taken literally (no glob),
	// archived as Paths are: the untracked files of GitLab's
	// untracked: true. Exclude applies to them too.
	Files []string
}

// PackStats says what an archive holds.
type PackStats struct {
	// Files, Dirs and Symlinks count the archive's entries by kind.
	Files, Dirs, Symlinks int
	// Bytes is the length of the files' content, uncompressed.
	Bytes int64
	// Size is the length of the archive: the bytes Pack wrote, or the
	// bytes Unpack read.
	Size int64
}

// UnpackOptions bound an extraction.
type UnpackOptions struct {
	// MaxBytes bounds the files' content, uncompressed, in bytes (0:
	// DefaultMaxUnpackBytes).
	MaxBytes int64
	// MaxFiles bounds the archive's entries, of every kind (0:
	// DefaultMaxUnpackFiles).
	MaxFiles int
}

// Default limits of Unpack.
const (
	// DefaultMaxUnpackBytes is UnpackOptions.MaxBytes when unset: 16 GiB.
	DefaultMaxUnpackBytes int64 = 16 << 30
	// DefaultMaxUnpackFiles is UnpackOptions.MaxFiles when unset.
	DefaultMaxUnpackFiles = 1_000_000
)

// Errors of Unpack. Callers test with errors.Is.
var (
	// ErrUnsafeArchive: an entry would land outside the root, would be
	// written through a symlink, is a symlink leading outside the root,
	// or is of a kind archives do not hold (a hard link, a device, a
	// FIFO). It is wrapped with the entry's name; Unpack extracts nothing
	// after it.
	ErrUnsafeArchive = errors.New("unsafe archive entry")
	// ErrUnpackLimit: the archive holds more than UnpackOptions allow;
	// the error says which limit. Unpack extracts nothing after it.
	ErrUnpackLimit = errors.New("archive exceeds an unpack limit")
)

// The archive's encoding. Pack's output is a function of the tree alone:
// the zstd level, window and single-threaded encoder are fixed, and so
// are the tar format and the owner fields.
const (
	zstdLevel  = zstd.SpeedDefault
	zstdWindow = 8 << 20
	// maxZstdWindow bounds the window a decoder accepts, and with it the
	// memory a hostile archive can make Unpack allocate.
	maxZstdWindow = 32 << 20
	copyBufSize   = 256 << 10
)

// Pack writes a tar archive compressed with zstd of the paths opts
// selects to w, streaming: files are read in chunks and nothing is held
// whole in memory.
//
// Entries are sorted by name and carry permission bits (never setuid,
// setgid or sticky), modification times with nanoseconds, and no owner,
// so the same tree always gives the same bytes: the SHA-256 of an
// archive tells whether the paths changed. Symlinks are archived as
// symlinks, never followed; their own times are not kept. A symlink
// whose target leaves Root, a path that leads outside Root or through a
// symlink, and a FIFO, socket or device are errors naming the path. An
// absolute symlink target inside Root is stored relative to the link.
//
// Paths that match nothing give an archive without entries and no
// error; the caller decides whether that is a failure. On an error, what
// was written to w is not a valid archive.
func Pack(ctx context.Context, w io.Writer, opts PackOptions) (PackStats, error) {
	var stats PackStats
	if !filepath.IsAbs(opts.Root) {
		return stats, fmt.Errorf("PackOptions.Root %q is not an absolute path; expected the workspace's absolute path", opts.Root)
	}
	root, err := os.OpenRoot(opts.Root)
	if err != nil {
		return stats, fmt.Errorf("open the workspace: %w", err)
	}
	defer root.Close()
	entries, err := selectPaths(ctx, root, opts)
	if err != nil {
		return stats, err
	}
	p := &packer{ctx: ctx, root: root, roots: workspaceRoots(opts.Root), buf: make([]byte, copyBufSize)}
	cw := &countWriter{w: w}
	enc, err := zstd.NewWriter(cw,
		zstd.WithEncoderLevel(zstdLevel),
		zstd.WithWindowSize(zstdWindow),
		zstd.WithEncoderConcurrency(1),
		zstd.WithEncoderCRC(true))
	if err != nil {
		return stats, fmt.Errorf("start the zstd encoder: %w", err)
	}
	defer enc.Close()
	tw := tar.NewWriter(enc)
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return stats, err
		}
		if err := p.entry(tw, e, &stats); err != nil {
			return stats, err
		}
	}
	if err := tw.Close(); err != nil {
		return stats, fmt.Errorf("write the archive: %w", err)
	}
	if err := enc.Close(); err != nil {
		return stats, fmt.Errorf("write the archive: %w", err)
	}
	stats.Size = cw.n
	return stats, nil
}

// workspaceRoots returns the workspace's path as given and with its
// symlinks resolved, the prefixes an absolute symlink target inside the
// workspace may start with.
func workspaceRoots(root string) []string {
	roots := []string{filepath.Clean(root)}
	if real, err := filepath.EvalSymlinks(root); err == nil && real != roots[0] {
		roots = append(roots, real)
	}
	return roots
}

// packer is the state of one Pack.
type packer struct {
	ctx   context.Context
	root  *os.Root
	roots []string
	buf   []byte
}

// entry writes one selected path.
func (p *packer) entry(tw *tar.Writer, e selected, stats *PackStats) error {
	hdr := &tar.Header{
		Name:    e.name,
		Mode:    int64(e.info.Mode().Perm()),
		ModTime: e.info.ModTime(),
		Format:  tar.FormatPAX,
	}
	switch m := e.info.Mode(); {
	case m.IsDir():
		hdr.Typeflag = tar.TypeDir
		hdr.Name += "/"
		stats.Dirs++
		return writeHeader(tw, hdr)
	case m&fs.ModeSymlink != 0:
		target, err := p.linkTarget(e.name)
		if err != nil {
			return err
		}
		hdr.Typeflag = tar.TypeSymlink
		hdr.Linkname = target
		hdr.Mode = 0o777
		hdr.ModTime = time.Unix(0, 0)
		stats.Symlinks++
		return writeHeader(tw, hdr)
	default:
		return p.file(tw, hdr, stats)
	}
}

// file writes a regular file: its header from the open file, so that
// size and content agree, then exactly that many bytes.
func (p *packer) file(tw *tar.Writer, hdr *tar.Header, stats *PackStats) error {
	f, err := p.root.Open(hdr.Name)
	if err != nil {
		return fmt.Errorf("archive %q: %w", hdr.Name, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("archive %q: %w", hdr.Name, err)
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("archive %q: it changed from a regular file to a %s while Pack ran", hdr.Name, info.Mode().Type())
	}
	hdr.Typeflag = tar.TypeReg
	hdr.Mode = int64(info.Mode().Perm())
	hdr.ModTime = info.ModTime()
	hdr.Size = info.Size()
	if err := writeHeader(tw, hdr); err != nil {
		return err
	}
	n, err := io.CopyBuffer(tw, io.LimitReader(ctxReader{p.ctx, f}, hdr.Size), p.buf)
	if err != nil {
		return fmt.Errorf("archive %q: %w", hdr.Name, err)
	}
	if n != hdr.Size {
		return fmt.Errorf("archive %q: it shrank from %d to %d bytes while Pack ran", hdr.Name, hdr.Size, n)
	}
	stats.Files++
	stats.Bytes += n
	return nil
}

// linkTarget returns the target to archive for the symlink name: its
// own when relative, relative to the link when absolute and inside the
// workspace. A target that leaves the workspace is an error.
func (p *packer) linkTarget(name string) (string, error) {
	target, err := p.root.Readlink(name)
	if err != nil {
		return "", fmt.Errorf("archive symlink %q: %w", name, err)
	}
	if filepath.IsAbs(target) {
		rel, ok := "", false
		for _, r := range p.roots {
			if in, err := filepath.Rel(r, target); err == nil && (in == "." || filepath.IsLocal(in)) {
				rel, err = filepath.Rel(filepath.Join(r, filepath.FromSlash(path.Dir(name))), target)
				ok = err == nil
				break
			}
		}
		if !ok {
			return "", fmt.Errorf("symlink %q points to %q, outside the workspace; archives hold only symlinks that stay inside it", name, target)
		}
		target = filepath.ToSlash(rel)
	}
	if !linkInside(path.Dir(name), target) {
		return "", fmt.Errorf("symlink %q points to %q, which leaves the workspace or climbs back up after descending; archives hold only symlinks that stay inside it", name, target)
	}
	return target, nil
}

// writeHeader writes hdr with the owner fields zeroed.
func writeHeader(tw *tar.Writer, hdr *tar.Header) error {
	hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("archive %q: %w", hdr.Name, err)
	}
	return nil
}

// linkInside reports whether a relative symlink target, followed from
// the directory dir (slash-separated, relative to the root, "." for the
// root), stays inside the root. Its ".." segments must all come first:
// after a name, ".." would climb out of whatever that name resolves to,
// a symlink perhaps, which the text alone cannot tell. Dir itself is a
// chain of real directories (Unpack never writes through a symlink), so
// the leading ".." climb exactly as the text says.
func linkInside(dir, target string) bool {
	if target == "" || strings.HasPrefix(target, "/") || strings.ContainsRune(target, 0) {
		return false
	}
	depth := 0
	if dir != "." {
		depth = strings.Count(dir, "/") + 1
	}
	descended := false
	for seg := range strings.SplitSeq(target, "/") {
		switch seg {
		case "", ".":
		case "..":
			if descended || depth == 0 {
				return false
			}
			depth--
		default:
			descended = true
		}
	}
	return true
}

// Unpack extracts an archive Pack wrote into root, a directory that
// exists, streaming, and says what it extracted.
//
// Nothing is ever created or written outside root, and no write follows
// a symlink: an entry with an absolute name, a ".." segment or a name
// not in clean form, a symlink whose target leaves root (absolute
// targets included), an entry below a symlink (whether the archive or
// root holds it), a hard link, a device or a FIFO is ErrUnsafeArchive,
// and Unpack stops there. Limits passed are ErrUnpackLimit.
//
// Files and symlinks replace what root holds at their paths (a file
// replaced is unlinked first, never written into); an existing directory
// is kept. Files get their permission bits (without setuid, setgid or
// sticky) and modification times, directories too once everything is
// extracted. Entries extracted before an error stay. Unpack does not
// sync the files it writes.
func Unpack(ctx context.Context, r io.Reader, root string, opts UnpackOptions) (PackStats, error) {
	var stats PackStats
	if opts.MaxBytes < 0 || opts.MaxFiles < 0 {
		return stats, fmt.Errorf("UnpackOptions limits must not be negative (MaxBytes %d, MaxFiles %d); 0 means the default", opts.MaxBytes, opts.MaxFiles)
	}
	rt, err := os.OpenRoot(root)
	if err != nil {
		return stats, fmt.Errorf("open the extraction root: %w", err)
	}
	defer rt.Close()
	cr := &countReader{r: r}
	dec, err := zstd.NewReader(cr,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxWindow(maxZstdWindow))
	if err != nil {
		return stats, fmt.Errorf("start the zstd decoder: %w", err)
	}
	defer dec.Close()
	u := &unpacker{
		ctx:      ctx,
		root:     rt,
		open:     rootdir.Open{Root: rt},
		maxBytes: cmp.Or(opts.MaxBytes, DefaultMaxUnpackBytes),
		maxFiles: cmp.Or(opts.MaxFiles, DefaultMaxUnpackFiles),
		known:    map[string]bool{},
		buf:      make([]byte, copyBufSize),
		stats:    &stats,
	}
	defer u.open.Close()
	tr := tar.NewReader(dec)
	for n := 1; ; n++ {
		if err := ctx.Err(); err != nil {
			return stats, err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return stats, fmt.Errorf("read the archive: %w", err)
		}
		if n > u.maxFiles {
			return stats, fmt.Errorf("%w: the archive holds more than %d entries (UnpackOptions.MaxFiles)", ErrUnpackLimit, u.maxFiles)
		}
		if err := u.entry(hdr, tr); err != nil {
			return stats, err
		}
	}
	if err := u.finishDirs(); err != nil {
		return stats, err
	}
	stats.Size = cr.n
	return stats, nil
}

// unpacker is the state of one Unpack.
type unpacker struct {
	ctx      context.Context
	root     *os.Root
	maxBytes int64
	maxFiles int
	// known holds the directories this extraction made or found to be
	// real directories (not symlinks). Nothing it does turns one into
	// anything else, so each path is checked once.
	known map[string]bool
	// dirs are the directory entries, whose modes and times are set last.
	dirs []dirMeta
	// open keeps the directory of the entries in hand open.
	open  rootdir.Open
	buf   []byte
	stats *PackStats
}

// dirMeta is what a directory entry says of its directory.
type dirMeta struct {
	name    string
	perm    fs.FileMode
	modTime time.Time
}

// unsafeEntry is ErrUnsafeArchive for the entry named name.
func unsafeEntry(name, format string, args ...any) error {
	return fmt.Errorf("entry %q %s: %w", name, fmt.Sprintf(format, args...), ErrUnsafeArchive)
}

// entry extracts one entry.
func (u *unpacker) entry(hdr *tar.Header, r io.Reader) error {
	name, err := entryName(hdr)
	if err != nil {
		return err
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		return u.dir(name, hdr)
	case tar.TypeReg:
		return u.file(name, hdr, r)
	case tar.TypeSymlink:
		return u.symlink(name, hdr)
	case tar.TypeLink:
		return unsafeEntry(hdr.Name, "is a hard link (to %q); archives hold none", hdr.Linkname)
	case tar.TypeChar, tar.TypeBlock:
		return unsafeEntry(hdr.Name, "is a device; archives hold only files, directories and symlinks")
	case tar.TypeFifo:
		return unsafeEntry(hdr.Name, "is a FIFO; archives hold only files, directories and symlinks")
	default:
		return unsafeEntry(hdr.Name, "has the tar type %q; archives hold only files, directories and symlinks", string(hdr.Typeflag))
	}
}

// entryName returns the path an entry names, relative to the root, or
// ErrUnsafeArchive when that path is not a clean relative one inside it.
// A directory's name may end in one slash.
func entryName(hdr *tar.Header) (string, error) {
	name := hdr.Name
	if hdr.Typeflag == tar.TypeDir {
		name = strings.TrimSuffix(name, "/")
	}
	switch {
	case name == "" || name == ".":
		return "", unsafeEntry(hdr.Name, "names the root itself; expected a path inside it")
	case strings.HasPrefix(name, "/"):
		return "", unsafeEntry(hdr.Name, "has an absolute name; expected a path relative to the root")
	case strings.ContainsRune(name, 0):
		return "", unsafeEntry(hdr.Name, "has a NUL byte in its name")
	}
	for seg := range strings.SplitSeq(name, "/") {
		if seg == ".." {
			return "", unsafeEntry(hdr.Name, "has a \"..\" segment; expected a path inside the root")
		}
	}
	if path.Clean(name) != name {
		return "", unsafeEntry(hdr.Name, "has a name not in clean form (empty or \".\" segments); expected a clean relative path")
	}
	return name, nil
}

// parents makes sure every parent directory of name is a real directory,
// making the missing ones. A symlink among them is ErrUnsafeArchive: no
// write goes through one, wherever it points.
func (u *unpacker) parents(entry, name string) error {
	dir := path.Dir(name)
	if dir == "." || u.known[dir] {
		return nil
	}
	for i := 1; i <= len(dir); i++ {
		if i < len(dir) && dir[i] != '/' {
			continue
		}
		p := dir[:i]
		if u.known[p] {
			continue
		}
		info, err := u.root.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := u.root.Mkdir(p, 0o755); err != nil {
				return fmt.Errorf("extract %q: %w", entry, err)
			}
		case err != nil:
			return fmt.Errorf("extract %q: %w", entry, err)
		case info.Mode()&fs.ModeSymlink != 0:
			return unsafeEntry(entry, "would be written through the symlink %q", p)
		case !info.IsDir():
			return fmt.Errorf("extract %q: %q is a file, not a directory", entry, p)
		}
		u.known[p] = true
	}
	return nil
}

// clear removes a file or symlink at name so that an entry can take its
// place; a directory there is an error.
func (u *unpacker) clear(entry, name string) error {
	info, err := u.root.Lstat(name)
	if err != nil {
		return fmt.Errorf("extract %q: %w", entry, err)
	}
	if info.IsDir() {
		return fmt.Errorf("extract %q: the root holds a directory at that path; expected a file or nothing", entry)
	}
	if err := u.root.Remove(name); err != nil {
		return fmt.Errorf("extract %q: %w", entry, err)
	}
	return nil
}

// file extracts a regular file, into a new inode: a file already there
// is unlinked, not overwritten, so a hard link elsewhere keeps its
// content.
func (u *unpacker) file(name string, hdr *tar.Header, r io.Reader) error {
	if hdr.Size > u.maxBytes-u.stats.Bytes {
		return fmt.Errorf("%w: the files hold more than %d bytes (UnpackOptions.MaxBytes), at entry %q", ErrUnpackLimit, u.maxBytes, hdr.Name)
	}
	if err := u.parents(hdr.Name, name); err != nil {
		return err
	}
	dir, err := u.open.Dir(path.Dir(name))
	if err != nil {
		return fmt.Errorf("extract %q: %w", hdr.Name, err)
	}
	base := path.Base(name)
	const flags = os.O_WRONLY | os.O_CREATE | os.O_EXCL
	f, err := dir.OpenFile(base, flags, 0o600)
	if errors.Is(err, fs.ErrExist) {
		if err := u.clear(hdr.Name, name); err != nil {
			return err
		}
		f, err = dir.OpenFile(base, flags, 0o600)
	}
	if err != nil {
		return fmt.Errorf("extract %q: %w", hdr.Name, err)
	}
	n, err := io.CopyBuffer(rootdir.WriterOnly{W: f}, ctxReader{u.ctx, r}, u.buf)
	u.stats.Bytes += n
	if err == nil {
		err = f.Chmod(fs.FileMode(hdr.Mode) & fs.ModePerm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = dir.Chtimes(base, hdr.ModTime, hdr.ModTime)
	}
	if err != nil {
		return fmt.Errorf("extract %q: %w", hdr.Name, err)
	}
	u.stats.Files++
	return nil
}

// symlink extracts a symlink whose target stays inside the root.
func (u *unpacker) symlink(name string, hdr *tar.Header) error {
	if !linkInside(path.Dir(name), hdr.Linkname) {
		return unsafeEntry(hdr.Name, "is a symlink to %q, which leaves the root or climbs back up after descending", hdr.Linkname)
	}
	if err := u.parents(hdr.Name, name); err != nil {
		return err
	}
	err := u.root.Symlink(hdr.Linkname, name)
	if errors.Is(err, fs.ErrExist) {
		if err := u.clear(hdr.Name, name); err != nil {
			return err
		}
		err = u.root.Symlink(hdr.Linkname, name)
	}
	if err != nil {
		return fmt.Errorf("extract %q: %w", hdr.Name, err)
	}
	u.stats.Symlinks++
	return nil
}

// dir extracts a directory, keeping one already there, and notes its
// mode and time for finishDirs. It stays writable by its owner until
// then, so that its entries can be written.
func (u *unpacker) dir(name string, hdr *tar.Header) error {
	if err := u.parents(hdr.Name, name); err != nil {
		return err
	}
	perm := fs.FileMode(hdr.Mode) & fs.ModePerm
	if !u.known[name] {
		info, err := u.root.Lstat(name)
		switch {
		case err == nil && info.IsDir():
			if info.Mode().Perm()&0o700 != 0o700 {
				err = u.root.Chmod(name, info.Mode().Perm()|0o700)
			}
		case err == nil:
			if err = u.root.Remove(name); err == nil {
				err = u.root.Mkdir(name, 0o700)
			}
		case errors.Is(err, fs.ErrNotExist):
			err = u.root.Mkdir(name, 0o700)
		}
		if err != nil {
			return fmt.Errorf("extract %q: %w", hdr.Name, err)
		}
		u.known[name] = true
	}
	u.dirs = append(u.dirs, dirMeta{name: name, perm: perm, modTime: hdr.ModTime})
	u.stats.Dirs++
	return nil
}

// finishDirs gives the directory entries their modes and times, deepest
// first, now that nothing more is written into them.
func (u *unpacker) finishDirs() error {
	for i := len(u.dirs) - 1; i >= 0; i-- {
		d := u.dirs[i]
		if err := u.root.Chmod(d.name, d.perm); err != nil {
			return fmt.Errorf("extract %q: %w", d.name, err)
		}
		if err := u.root.Chtimes(d.name, d.modTime, d.modTime); err != nil {
			return fmt.Errorf("extract %q: %w", d.name, err)
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

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// countReader counts the bytes read through it.
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
