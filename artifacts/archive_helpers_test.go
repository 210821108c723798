package artifacts_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/cikit/cikit/artifacts"
)

// fixedTime is the modification time the trees of the tests carry, with
// nanoseconds so that their precision is tested too.
var fixedTime = time.Date(2026, 3, 14, 15, 9, 26, 535897932, time.UTC)

// treeEntry is a path of a tree the tests build: a file (content), a
// directory (dir) or a symlink (link).
type treeEntry struct {
	name    string
	content string
	dir     bool
	link    string
	perm    fs.FileMode
}

// writeTree builds entries under root, with explicit modes (the umask
// plays no part) and fixedTime as every file's and directory's mtime.
func writeTree(t testing.TB, root string, entries ...treeEntry) {
	t.Helper()
	var dirs []treeEntry
	for _, e := range entries {
		p := filepath.Join(root, filepath.FromSlash(e.name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		switch {
		case e.link != "":
			if err := os.Symlink(e.link, p); err != nil {
				t.Fatal(err)
			}
			continue
		case e.dir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			dirs = append(dirs, e)
			continue
		default:
			if err := os.WriteFile(p, []byte(e.content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(p, cmpPerm(e.perm, 0o644)); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, fixedTime, fixedTime); err != nil {
			t.Fatal(err)
		}
	}
	// Directories last, deepest first: writing into them changes their
	// mtime, and a mode without w would stop the writes. Every directory
	// gets fixedTime, so that two trees built alike are alike.
	perms := map[string]fs.FileMode{}
	for _, e := range dirs {
		perms[filepath.Join(root, filepath.FromSlash(e.name))] = e.perm
	}
	var all []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && p != root {
			all = append(all, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(all)))
	for _, p := range all {
		if err := os.Chmod(p, cmpPerm(perms[p], 0o755)); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, fixedTime, fixedTime); err != nil {
			t.Fatal(err)
		}
	}
}

func cmpPerm(p, def fs.FileMode) fs.FileMode {
	if p == 0 {
		return def
	}
	return p
}

// node is what snapshot records of one path.
type node struct {
	Type    string
	Perm    fs.FileMode
	ModTime time.Time
	Content string
	Target  string
}

// snapshot records every path under root: its kind, mode, mtime
// (symlinks: none), content and target.
func snapshot(t testing.TB, root string) map[string]node {
	t.Helper()
	out := map[string]node{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		n := node{Perm: info.Mode().Perm(), ModTime: info.ModTime().UTC()}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			n.Type, n.Perm, n.ModTime = "symlink", 0, time.Time{}
			if n.Target, err = os.Readlink(p); err != nil {
				return err
			}
		case info.IsDir():
			n.Type = "dir"
		default:
			n.Type = "file"
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			n.Content = string(b)
		}
		out[filepath.ToSlash(rel)] = n
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// pack archives opts from root into memory.
func pack(t testing.TB, root string, opts artifacts.PackOptions) ([]byte, artifacts.PackStats) {
	t.Helper()
	opts.Root = root
	var buf bytes.Buffer
	stats, err := artifacts.Pack(context.Background(), &buf, opts)
	if err != nil {
		t.Fatalf("Pack: %v", err)
	}
	if stats.Size != int64(buf.Len()) {
		t.Fatalf("Pack says it wrote %d bytes, the buffer holds %d", stats.Size, buf.Len())
	}
	return buf.Bytes(), stats
}

// entryNames lists the names of the entries of an archive Pack wrote, in
// order.
func entryNames(t testing.TB, archive []byte) []string {
	t.Helper()
	dec, err := zstd.NewReader(bytes.NewReader(archive), zstd.WithDecoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	tr := tar.NewReader(dec)
	names := []string{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
	}
}

// rawEntry is one entry of a hand-built (possibly hostile) tar.
type rawEntry struct {
	name string
	typ  byte
	body string
	link string
	mode int64
}

// rawTar builds a tar from entries exactly as given.
func rawTar(t testing.TB, entries ...rawEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{
			Name:     e.name,
			Typeflag: e.typ,
			Linkname: e.link,
			Mode:     cmpMode(e.mode),
			Size:     int64(len(e.body)),
			ModTime:  fixedTime,
			Format:   tar.FormatPAX,
		}
		if e.typ != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func cmpMode(m int64) int64 {
	if m == 0 {
		return 0o644
	}
	return m
}

// encoder compresses the hand-built archives; EncodeAll is safe for
// concurrent use.
var encoder = func() *zstd.Encoder {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		panic(err)
	}
	return enc
}()

// compress wraps a tar in zstd, as Pack does.
func compress(t testing.TB, tarball []byte) []byte {
	t.Helper()
	return encoder.EncodeAll(tarball, nil)
}

// sentinelContent is what the file next to an extraction root holds.
const sentinelContent = "sentinel"

// jail makes a directory holding an empty extraction root and a sentinel
// file, and returns both paths.
func jail(t testing.TB) (parent, root string) {
	t.Helper()
	parent = t.TempDir()
	root = filepath.Join(parent, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(parent, "sentinel"), []byte(sentinelContent), 0o644); err != nil {
		t.Fatal(err)
	}
	// Before TempDir removes the tree (cleanups run last first): an
	// archive may have made directories the owner cannot write.
	t.Cleanup(func() { unlock(root) })
	return parent, root
}

// unlock makes every directory under root readable and writable by its
// owner, so that it can be walked and removed.
func unlock(root string) {
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
}

// confined reports how an extraction into jail's root reached outside
// it, or "" when it did not: the parent must hold only the root and the
// unchanged sentinel, and every symlink under the root must lead inside
// it.
func confined(parent, root string) string {
	unlock(root)
	entries, err := os.ReadDir(parent)
	if err != nil {
		return err.Error()
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "root,sentinel" {
		return "the parent holds " + strings.Join(names, ",")
	}
	if info, err := os.Lstat(filepath.Join(parent, "sentinel")); err != nil || !info.Mode().IsRegular() {
		return "the sentinel is no longer a regular file"
	}
	if b, err := os.ReadFile(filepath.Join(parent, "sentinel")); err != nil || string(b) != sentinelContent {
		return "the sentinel changed"
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return err.Error()
	}
	inside := func(p string) bool {
		rel, err := filepath.Rel(realRoot, p)
		return err == nil && (rel == "." || filepath.IsLocal(rel))
	}
	var escaped string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		target, err := os.Readlink(p)
		if err != nil {
			escaped = err.Error()
			return fs.SkipAll
		}
		if filepath.IsAbs(target) {
			escaped = "symlink " + p + " has the absolute target " + target
			return fs.SkipAll
		}
		dir, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			escaped = err.Error()
			return fs.SkipAll
		}
		lexical := filepath.Join(realRoot, dir, target)
		if !inside(lexical) {
			escaped = "symlink " + p + " points to " + target + ", outside the root"
			return fs.SkipAll
		}
		if resolved, err := filepath.EvalSymlinks(p); err == nil && !inside(resolved) {
			escaped = "symlink " + p + " resolves to " + resolved + ", outside the root"
			return fs.SkipAll
		}
		return nil
	})
	return escaped
}
