package artifacts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cikit/cikit"
)

// FileStore is a BlobStore in a directory of the local file system, for
// the embedded platform and a single machine: the blob key is the file
// Dir/key.
//
// Put writes a temporary file in the blob's directory, syncs it and
// renames it over the blob, so a reader never sees part of a blob and a
// crash leaves the old blob or the new one. Directories are created as
// needed, and Delete removes those it leaves empty.
//
// Unlike S3, a directory holds either blobs or is one: a key cannot be a
// blob and the parent of another (Put of "a/b" fails while "a" is a blob,
// and the reverse). Files that are not blobs, such as the temporary
// files of an interrupted Put (".put-*"), are not cleaned up.
type FileStore struct {
	dir string
}

var _ BlobStore = (*FileStore)(nil)

// NewFileStore returns a store of the blobs in dir, creating the
// directory if it does not exist.
func NewFileStore(dir string) (*FileStore, error) {
	if dir == "" {
		return nil, errors.New("the directory of a FileStore must not be empty")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("blob directory %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("blob directory: %w", err)
	}
	return &FileStore{dir: abs}, nil
}

// Dir returns the store's directory, as an absolute path.
func (s *FileStore) Dir() string { return s.dir }

func (s *FileStore) path(key string) string {
	return filepath.Join(s.dir, filepath.FromSlash(key))
}

// Put implements BlobStore.
func (s *FileStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if err := checkSize(size); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	name := s.path(key)
	f, err := s.createTemp(filepath.Dir(name))
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	_, err = f.ReadFrom(newSizedReader(ctx, r, size))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// Last, so a Put cancelled while it wrote stores nothing.
		err = ctx.Err()
	}
	if err == nil {
		err = os.Rename(f.Name(), name)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

// createTemp creates a temporary file in dir, creating dir first. A
// concurrent Delete may remove a directory it left empty between the
// two; the file, once created, keeps it from doing so until the rename.
func (s *FileStore) createTemp(dir string) (*os.File, error) {
	for range 3 {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		f, err := os.CreateTemp(dir, ".put-*")
		if !errors.Is(err, fs.ErrNotExist) {
			return f, err
		}
	}
	return nil, fmt.Errorf("directory %s was removed three times while a blob was put in it", dir)
}

// Get implements BlobStore.
func (s *FileStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	f, err := os.Open(s.path(key))
	if err != nil {
		return nil, s.interpretError("get", key, err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fs.ErrNotExist
	}
	if err != nil {
		_ = f.Close()
		return nil, s.interpretError("get", key, err)
	}
	return f, nil
}

// Stat implements BlobStore.
func (s *FileStore) Stat(ctx context.Context, key string) (BlobInfo, error) {
	if err := ValidateKey(key); err != nil {
		return BlobInfo{}, err
	}
	if err := ctx.Err(); err != nil {
		return BlobInfo{}, fmt.Errorf("stat %s: %w", key, err)
	}
	fi, err := os.Stat(s.path(key))
	if err == nil && !fi.Mode().IsRegular() {
		err = fs.ErrNotExist
	}
	if err != nil {
		return BlobInfo{}, s.interpretError("stat", key, err)
	}
	return BlobInfo{Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// Delete implements BlobStore.
func (s *FileStore) Delete(ctx context.Context, key string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	name := s.path(key)
	fi, err := os.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || (err == nil && fi.IsDir()) {
		return nil
	}
	if err == nil {
		err = os.Remove(name)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	// Remove the directories the blob leaves empty, up to the store's
	// own; the first that is not empty (or is being put into) stops it.
	for dir := filepath.Dir(name); dir != s.dir && strings.HasPrefix(dir, s.dir); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil {
			break
		}
	}
	return nil
}

// interpretError converts a file system error about key into the
// sentinels of BlobStore.
func (s *FileStore) interpretError(op, key string, err error) error {
	// ENOTDIR: a segment of the key is a blob, so the key is none.
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("%s %s: %w", op, key, cikit.ErrNotFound)
	}
	return fmt.Errorf("%s %s: %w", op, key, err)
}
