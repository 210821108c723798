package image

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ViewOptions configure NewView.
type ViewOptions struct {
	// Copy makes a copy even where an overlay mount is allowed.
	Copy bool
	// Owner, when set, owns the view's own directories, which are
	// root's otherwise: its root (the upper directory of an overlay)
	// and the directory holding it, which its owner can then reach.
	// Give it the Limits.Owner of the root filesystem, so that the
	// user that owns the image's files can also reach and bind them.
	// Setting an Owner other than the process's own needs root.
	Owner *Owner
}

// View is one job's writable view of a root filesystem, thrown away at
// Close. What the job writes lands in the view only: the root
// filesystem and every other view stay as they were.
//
// A view is a kernel overlayfs mount (the root filesystem as its lower
// layer, an upper and a work directory of the view's own) where the
// runner may mount, which needs root: it costs nothing up front, and a
// file is copied up only when the job writes to it. Elsewhere, or with
// ViewOptions.Copy, a view is a plain copy of the whole tree, which
// costs the image's size in time and disk for each job. A farm of hard
// links would be cheaper, but a job writing through a link would change
// the shared inode, so the copy duplicates every file.
type View struct {
	dir     string
	root    string
	overlay bool
	// fallback is why an overlay was not mounted, when it was tried.
	fallback error
	closed   bool
	owner    *Owner
}

// own gives path to the view's Owner, if it has one.
func (v *View) own(path string) error {
	if v.owner == nil {
		return nil
	}
	return os.Lchown(path, v.owner.UID, v.owner.GID)
}

// NewView makes a view of the root filesystem rootfs in dir, a directory
// NewView makes (its parent must exist, dir itself must not), and
// returns it. The view's root is View.Root.
func NewView(ctx context.Context, rootfs, dir string, opts ViewOptions) (*View, error) {
	rootfs, err := filepath.Abs(rootfs)
	if err != nil {
		return nil, err
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := opts.Owner.check(); err != nil {
		return nil, fmt.Errorf("ViewOptions.%w", err)
	}
	if info, err := os.Stat(rootfs); err != nil {
		return nil, fmt.Errorf("open the root filesystem of a view: %w", err)
	} else if !info.IsDir() {
		return nil, fmt.Errorf("the root filesystem of a view, %s, is not a directory", rootfs)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("make the directory of a view: %w", err)
	}
	v := &View{dir: dir, root: filepath.Join(dir, "root"), owner: opts.Owner}
	err = v.own(dir)
	if err == nil && !opts.Copy {
		v.fallback = v.mount(rootfs)
		v.overlay = v.fallback == nil
	}
	if err == nil && !v.overlay {
		if err = copyTree(ctx, rootfs, v.root); err == nil {
			err = v.own(v.root)
		}
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("make a view of %s: %w", rootfs, err), removeTree(dir))
	}
	return v, nil
}

// mount mounts the overlay, leaving dir as it found it when it cannot.
func (v *View) mount(rootfs string) error {
	upper, work := filepath.Join(v.dir, "upper"), filepath.Join(v.dir, "work")
	// The mount options separate fields with commas and lower layers
	// with colons; a path holding either cannot be said in them.
	for _, p := range []string{rootfs, upper, work, v.root} {
		if strings.ContainsAny(p, ",:\\") {
			return fmt.Errorf("the path %q cannot be given to an overlay mount", p)
		}
	}
	for _, d := range []string{upper, work, v.root} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	// The upper directory's mode is the view root's.
	if info, err := os.Stat(rootfs); err == nil {
		_ = os.Chmod(upper, info.Mode().Perm())
	}
	if err := v.own(upper); err != nil {
		for _, d := range []string{upper, work, v.root} {
			_ = os.Remove(d)
		}
		return err
	}
	data := "lowerdir=" + rootfs + ",upperdir=" + upper + ",workdir=" + work
	if err := unix.Mount("overlay", v.root, "overlay", 0, data); err != nil {
		for _, d := range []string{upper, work, v.root} {
			_ = os.Remove(d)
		}
		return fmt.Errorf("mount an overlay: %w", err)
	}
	return nil
}

// Root returns the directory that is the job's "/".
func (v *View) Root() string { return v.root }

// Overlay reports whether the view is an overlay mount rather than a
// copy.
func (v *View) Overlay() bool { return v.overlay }

// Fallback returns why the view is a copy although an overlay was
// tried (the mount's error), or nil.
func (v *View) Fallback() error { return v.fallback }

// Close unmounts the view, detaching it lazily when a process still
// uses it, and removes its directory with what the job wrote. It is
// safe to call twice.
func (v *View) Close() error {
	if v.closed {
		return nil
	}
	if v.overlay {
		err := unix.Unmount(v.root, 0)
		if errors.Is(err, syscall.EBUSY) {
			err = unix.Unmount(v.root, unix.MNT_DETACH)
		}
		if err != nil {
			// Removing the directory of a view still mounted would
			// remove the root filesystem's files through it.
			return fmt.Errorf("unmount the view %s: %w", v.root, err)
		}
	}
	v.closed = true
	if err := removeTree(v.dir); err != nil {
		return fmt.Errorf("remove the view %s: %w", v.dir, err)
	}
	return nil
}

// copyTree copies the tree src into dst, which it makes: files, symlinks
// (as they are, never followed), directories, with modes, times and,
// when the process is root, owners. Directory modes and times are set
// last, so that read-only directories can be filled first.
func copyTree(ctx context.Context, src, dst string) error {
	if err := os.Mkdir(dst, 0o700); err != nil {
		return err
	}
	out, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer out.Close()
	chown := os.Geteuid() == 0
	type dirMeta struct {
		name  string
		mode  fs.FileMode
		mtime time.Time
	}
	var dirs []dirMeta
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if rel != "." {
				if err := out.Mkdir(rel, 0o700); err != nil {
					return err
				}
			}
			dirs = append(dirs, dirMeta{rel, info.Mode() & (fs.ModePerm | fs.ModeSticky | fs.ModeSetgid | fs.ModeSetuid), info.ModTime()})
		case info.Mode().IsRegular():
			return copyFile(out, p, rel, info, chown)
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := out.Symlink(target, rel); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s is a %v, which a root filesystem does not hold", p, info.Mode().Type())
		}
		if chown {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				if err := out.Lchown(rel, int(st.Uid), int(st.Gid)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortStableFunc(dirs, func(a, b dirMeta) int {
		return cmp.Compare(strings.Count(b.name, "/"), strings.Count(a.name, "/"))
	})
	for _, d := range dirs {
		if err := out.Chmod(d.name, d.mode); err != nil {
			return err
		}
		if err := out.Chtimes(d.name, d.mtime, d.mtime); err != nil {
			return err
		}
	}
	return nil
}

// copyFile copies the regular file src to rel in out, with its mode,
// time and, with chown, owner.
func copyFile(out *os.Root, src, rel string, info fs.FileInfo, chown bool) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	f, err := out.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	// io.Copy from one file to another uses copy_file_range, which
	// shares blocks on file systems that can.
	_, err = io.Copy(f, in)
	if st, ok := info.Sys().(*syscall.Stat_t); ok && chown && err == nil {
		err = f.Chown(int(st.Uid), int(st.Gid))
	}
	if err == nil {
		// After the chown, which clears the setuid bits.
		err = f.Chmod(info.Mode() & (fs.ModePerm | fs.ModeSticky | fs.ModeSetgid | fs.ModeSetuid))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return out.Chtimes(rel, info.ModTime(), info.ModTime())
}
