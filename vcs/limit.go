package vcs

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// FileTooLargeError is the error of ReadFileMax for a file larger than
// its bound.
type FileTooLargeError struct {
	Path string
	// Size is the file's size in bytes; Max the bound it exceeds.
	Size, Max int64
}

func (e *FileTooLargeError) Error() string {
	return fmt.Sprintf("vcs: %s is %d bytes, more than the %d read", e.Path, e.Size, e.Max)
}

// MaxReader is a Provider that can refuse a file larger than a bound
// before reading it, from the size its store or forge tells: reading a
// pipeline file costs no more than its bound whatever a repository holds.
type MaxReader interface {
	// ReadFileMax is ReadFile for a file of at most max bytes; a larger
	// one is a *FileTooLargeError.
	ReadFileMax(ctx context.Context, repo, sha, path string, max int64) ([]byte, error)
}

// ReadFileMax reads a file of repo at commit sha, refusing one larger
// than max bytes with a *FileTooLargeError: before reading it when p is a
// MaxReader, after reading it otherwise.
func ReadFileMax(ctx context.Context, p Provider, repo, sha, path string, max int64) ([]byte, error) {
	if m, ok := p.(MaxReader); ok {
		return m.ReadFileMax(ctx, repo, sha, path, max)
	}
	data, err := p.ReadFile(ctx, repo, sha, path)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, &FileTooLargeError{Path: path, Size: int64(len(data)), Max: max}
	}
	return data, nil
}

// ReadFileMax is ReadFile of a file of at most max bytes: a cached
// answer is checked against max, and an answer not cached is read with
// max (from a MaxReader, without reading a larger file) and kept.
func (c *cached) ReadFileMax(ctx context.Context, repo, sha, path string, max int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	key := cacheKey{repo: repo, sha: sha, path: path}
	if isCommitSHA(sha) {
		if e, ok := c.lookup(key); ok {
			switch {
			case e.err != nil:
				return nil, e.err
			case int64(len(e.data)) > max:
				return nil, &FileTooLargeError{Path: path, Size: int64(len(e.data)), Max: max}
			}
			return slices.Clone(e.data), nil
		}
	}
	data, err := ReadFileMax(ctx, c.Provider, repo, sha, path, max)
	if isCommitSHA(sha) && (err == nil || IsNotFound(err)) {
		c.add(&cacheEntry{key: key, data: slices.Clone(data), err: err})
	}
	return data, err
}

// FileLister is a Provider that can list every file below a directory of
// a commit, at any depth, as GitLab's rules:exists globs need.
type FileLister interface {
	// ListFiles returns the slash-separated paths, relative to the
	// repository root, of the files below dir ("" for the root) of repo
	// at commit sha, sorted. A dir that does not exist is an error
	// matching ErrNotFound; more than max files is ErrTooManyFiles.
	ListFiles(ctx context.Context, repo, sha, dir string, max int) ([]string, error)
}

// ErrTooManyFiles is a FileLister refusing to list more files than it
// was asked for.
var ErrTooManyFiles = errors.New("vcs: too many files")

// ListFiles lists the files below dir of repo at sha when p is a
// FileLister, and fails with an error matching errors.ErrUnsupported
// otherwise.
func ListFiles(ctx context.Context, p Provider, repo, sha, dir string, max int) ([]string, error) {
	if l, ok := p.(FileLister); ok {
		return l.ListFiles(ctx, repo, sha, dir, max)
	}
	return nil, fmt.Errorf("vcs: listing the files of %s: %w", repo, errors.ErrUnsupported)
}
