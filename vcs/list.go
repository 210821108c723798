package vcs

import (
	"context"
	"errors"
	"fmt"
)

// FileLister is a Provider that lists, in one call, every file below a
// directory of a repository at a commit, at any depth: what GitLab's
// rules:exists glob patterns ("docs/**/*.md") need, which ReadDir, one
// directory's files, cannot answer.
type FileLister interface {
	// ListFiles returns the slash-separated paths, relative to the
	// repository's root, of the files (symbolic links included,
	// submodules not) below dir of repo at commit sha ("" is the root),
	// at any depth, sorted. A dir that does not exist at sha, or is not
	// a directory, is an error matching ErrNotFound. When there are more
	// than max files (max > 0) it returns max of them and an error
	// matching ErrTooManyFiles.
	ListFiles(ctx context.Context, repo, sha, dir string, max int) ([]string, error)
}

// ErrTooManyFiles is matched by the error of FileLister.ListFiles for a
// directory holding more files than it was asked to list.
var ErrTooManyFiles = errors.New("vcs: too many files")

// ErrCannotList is matched by the error of ListFiles for a Provider that
// is not a FileLister.
var ErrCannotList = fmt.Errorf("vcs: the provider cannot list a directory's files at every depth: %w", errors.ErrUnsupported)

// ListFiles lists the files below dir of repo at sha with p's ListFiles
// (see FileLister), or fails with ErrCannotList when p has none.
func ListFiles(ctx context.Context, p Provider, repo, sha, dir string, max int) ([]string, error) {
	l, ok := p.(FileLister)
	if !ok {
		return nil, fmt.Errorf("%w (%T)", ErrCannotList, p)
	}
	return l.ListFiles(ctx, repo, sha, dir, max)
}

// CapFiles returns the first max of a sorted listing and an error
// matching ErrTooManyFiles when it has more than max (max > 0), and the
// listing as it is otherwise: how a FileLister keeps to its max.
func CapFiles(files []string, max int) ([]string, error) {
	if max > 0 && len(files) > max {
		return files[:max], fmt.Errorf("%w: more than %d", ErrTooManyFiles, max)
	}
	return files, nil
}
