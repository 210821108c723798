package compiler

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// FileSource reads the files of a repository at one commit. It is the
// compiler's only way to the outside world, which keeps compilation pure:
// the same source gives the same plan, so an old commit rebuilds with the
// pipeline it had.
//
// Paths are slash-separated and relative to the repository root, as in
// "ci/.cikit.yml". ReadFile returns the whole content of the file. A missing
// file returns an error matching fs.ErrNotExist, so that callers can tell
// "this commit has no pipeline" from a failure to read one. Implementations
// honour ctx cancellation where they block, and must be safe for
// concurrent use.
type FileSource interface {
	ReadFile(ctx context.Context, path string) ([]byte, error)
}

// MaxFileSource is a FileSource that can refuse a file larger than a
// bound before reading it, as a forge can from the size it tells. The
// compiler reads through ReadFileMax, with Options.MaxFileBytes, when its
// source is one, so that a huge file costs no more than the bound.
type MaxFileSource interface {
	FileSource
	// ReadFileMax is ReadFile for a file of at most max bytes; a larger
	// one is refused with an error matching *FileTooLargeError.
	ReadFileMax(ctx context.Context, path string, max int) ([]byte, error)
}

// FileTooLargeError is a MaxFileSource refusing a file of Size bytes, more
// than it was asked to read. The compiler reports it as a diagnostic.
type FileTooLargeError struct {
	Path string
	Size int64
}

func (e *FileTooLargeError) Error() string {
	return fmt.Sprintf("%s is %d bytes, more than the limit", e.Path, e.Size)
}

// readMax reads path from src, through ReadFileMax when src is a
// MaxFileSource.
func readMax(ctx context.Context, src FileSource, path string, max int) ([]byte, error) {
	if m, ok := src.(MaxFileSource); ok {
		return m.ReadFileMax(ctx, path, max)
	}
	return src.ReadFile(ctx, path)
}

// DirSource is a FileSource over a local directory: a checkout, or a test's
// fixture directory.
//
// A path must be local: slash-separated and relative, without "." or ".."
// elements. Other paths fail with an error matching fs.ErrInvalid before
// anything is read, because pipeline files will name paths (includes) that
// a repository's author controls. A symbolic link that leads out of the
// directory fails as well, with the error os.Root gives for it.
type DirSource string

// ReadFile reads the file at path below the directory.
func (d DirSource) ReadFile(ctx context.Context, path string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !fs.ValidPath(path) || path == "." {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fs.ErrInvalid}
	}
	local, err := filepath.Localize(path)
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fs.ErrInvalid}
	}
	// os.Root refuses symbolic links that lead out of the directory, which
	// a check of the path's text cannot see.
	root, err := os.OpenRoot(string(d))
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return root.ReadFile(local)
}

// FileLister is a FileSource that can also list the files below a
// directory, as GitLab's rules:exists needs for its glob patterns
// ("docs/**/*.md"). Without it, the compiler cannot decide such a
// pattern and keeps the job it guards.
type FileLister interface {
	FileSource
	// ListFiles returns the slash-separated paths, relative to the
	// repository root, of the files below dir ("" for the root) at any
	// depth, in any order. A dir that does not exist, or is not a
	// directory, returns an error matching fs.ErrNotExist. When there
	// are more than max files it returns max of them and ErrTooManyFiles.
	ListFiles(ctx context.Context, dir string, max int) ([]string, error)
}

// ErrTooManyFiles is returned by FileLister.ListFiles for a directory
// holding more files than it was asked to list.
var ErrTooManyFiles = errors.New("too many files")

// ListFiles lists the files below dir (see FileLister). Symbolic links
// are listed as files and not followed, so a listing never leaves the
// directory.
func (d DirSource) ListFiles(ctx context.Context, dir string, max int) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if dir == "" {
		dir = "."
	}
	if !fs.ValidPath(dir) {
		return nil, &fs.PathError{Op: "list", Path: dir, Err: fs.ErrInvalid}
	}
	root, err := os.OpenRoot(string(d))
	if err != nil {
		return nil, err
	}
	defer root.Close()
	fi, err := fs.Stat(root.FS(), dir)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, &fs.PathError{Op: "list", Path: dir, Err: fs.ErrNotExist}
	}
	var files []string
	err = fs.WalkDir(root.FS(), dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if e.IsDir() {
			if e.Name() == ".git" && p != dir {
				return fs.SkipDir
			}
			return nil
		}
		if len(files) == max {
			return ErrTooManyFiles
		}
		files = append(files, p)
		return nil
	})
	return files, err
}
