package image_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/fleet/image"
	"github.com/cikit/cikit/internal/imagetest"
)

// The entries of hand-made layers, for imagetest.Layer.

func file(name, body string) imagetest.File {
	return imagetest.File{Name: name, Body: []byte(body)}
}

func fileMode(name, body string, mode int64) imagetest.File {
	f := file(name, body)
	f.Mode = mode
	return f
}

func dir(name string) imagetest.File { return imagetest.File{Name: name, Dir: true} }

func dirMode(name string, mode int64) imagetest.File {
	d := dir(name)
	d.Mode = mode
	return d
}

func symlink(name, target string) imagetest.File { return imagetest.File{Name: name, Link: target} }

func hardlink(name, target string) imagetest.File {
	return imagetest.File{Name: name, HardLink: target}
}

// special is a device node or FIFO, of tar type typ: no image builder
// makes one, so it is a raw header.
func special(name string, typ byte) imagetest.File {
	return imagetest.File{Header: &tar.Header{Typeflag: typ, Name: name, Mode: 0o600, Devmajor: 1, Devminor: 3, ModTime: imagetest.ModTime}}
}

// sandbox is a root filesystem directory with an empty canary directory
// beside it, which nothing an unpack does may touch.
type sandbox struct {
	root, canary string
}

func newSandbox(t *testing.T) sandbox {
	t.Helper()
	parent := t.TempDir()
	s := sandbox{root: filepath.Join(parent, "root"), canary: filepath.Join(parent, "canary")}
	require.NoError(t, os.Mkdir(s.root, 0o755))
	require.NoError(t, os.Mkdir(s.canary, 0o755))
	return s
}

// checkCanary fails the test when anything landed in the canary or
// beside the root.
func (s sandbox) checkCanary(t testing.TB) {
	t.Helper()
	names, err := os.ReadDir(s.canary)
	require.NoError(t, err)
	require.Empty(t, names, "something landed outside the root filesystem")
	siblings, err := os.ReadDir(filepath.Dir(s.root))
	require.NoError(t, err)
	require.Len(t, siblings, 2, "something landed beside the root filesystem")
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	return string(b)
}

func requireMissing(t *testing.T, name string) {
	t.Helper()
	_, err := os.Lstat(name)
	require.ErrorIs(t, err, fs.ErrNotExist, "%s should not exist", name)
}

func TestUnpackLayers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		layers func(t *testing.T) []v1.Layer
		lim    image.Limits
		check  func(t *testing.T, root string, st image.Stats)
	}{{
		name: "files, directories, modes and times",
		layers: func(t *testing.T) []v1.Layer {
			return []v1.Layer{imagetest.Layer(t, []imagetest.File{dir("usr/"), dir("usr/bin/"), fileMode("usr/bin/tool", "#!/bin/sh\n", 0o755),
				dirMode("tmp/", 0o1777), file("./etc/os-release", "ID=test\n"), dirMode("ro/", 0o555), file("ro/f", "x")})}
		},
		check: func(t *testing.T, root string, st image.Stats) {
			require.Equal(t, "#!/bin/sh\n", readFile(t, filepath.Join(root, "usr/bin/tool")))
			require.Equal(t, "ID=test\n", readFile(t, filepath.Join(root, "etc/os-release")))
			info, err := os.Stat(filepath.Join(root, "usr/bin/tool"))
			require.NoError(t, err)
			require.Equal(t, fs.FileMode(0o755), info.Mode())
			require.True(t, info.ModTime().Equal(imagetest.ModTime), "mtime %v", info.ModTime())
			info, err = os.Stat(filepath.Join(root, "tmp"))
			require.NoError(t, err)
			require.Equal(t, fs.ModeDir|fs.ModeSticky|0o777, info.Mode())
			info, err = os.Stat(filepath.Join(root, "ro"))
			require.NoError(t, err)
			require.Equal(t, fs.ModeDir|0o555, info.Mode())
			require.True(t, info.ModTime().Equal(imagetest.ModTime), "directory mtime %v", info.ModTime())
			require.Equal(t, image.Stats{Layers: 1, Files: 3, Dirs: 4, Bytes: 19}, st)
		},
	}, {
		name: "symlinks are stored as they are, absolute ones and chains included",
		layers: func(t *testing.T) []v1.Layer {
			return []v1.Layer{imagetest.Layer(t, []imagetest.File{dir("usr/bin/"), file("usr/bin/busybox", "bb"), symlink("bin", "usr/bin"),
				symlink("usr/bin/sh", "/bin/busybox"), symlink("a", "b"), symlink("b", "c"), symlink("c", "/etc"),
				symlink("dangling", "/nowhere/at/all")})}
		},
		check: func(t *testing.T, root string, st image.Stats) {
			for name, want := range map[string]string{"bin": "usr/bin", "usr/bin/sh": "/bin/busybox", "a": "b", "b": "c", "c": "/etc", "dangling": "/nowhere/at/all"} {
				got, err := os.Readlink(filepath.Join(root, name))
				require.NoError(t, err)
				require.Equal(t, want, got, name)
			}
			require.Equal(t, "bb", readFile(t, filepath.Join(root, "bin/busybox")))
			require.Equal(t, 6, st.Symlinks)
		},
	}, {
		name: "a whiteout removes the lower file and directory",
		layers: func(t *testing.T) []v1.Layer {
			return []v1.Layer{
				imagetest.Layer(t, []imagetest.File{dir("a/"), file("a/x", "x"), file("a/y", "y"), dir("a/d/"), file("a/d/z", "z")}),
				imagetest.Layer(t, []imagetest.File{dir("a/"), file("a/.wh.x", ""), file("a/.wh.d", "")}),
			}
		},
		check: func(t *testing.T, root string, st image.Stats) {
			requireMissing(t, filepath.Join(root, "a/x"))
			requireMissing(t, filepath.Join(root, "a/d"))
			requireMissing(t, filepath.Join(root, "a/.wh.x"))
			require.Equal(t, "y", readFile(t, filepath.Join(root, "a/y")))
			require.Equal(t, 2, st.Whiteouts)
		},
	}, {
		name: "a whiteout spares an entry of its own layer",
		layers: func(t *testing.T) []v1.Layer {
			return []v1.Layer{
				imagetest.Layer(t, []imagetest.File{file("x", "lower")}),
				imagetest.Layer(t, []imagetest.File{file("x", "upper"), file(".wh.x", "")}),
			}
		},
		check: func(t *testing.T, root string, st image.Stats) {
			require.Equal(t, "upper", readFile(t, filepath.Join(root, "x")))
		},
	}, {
		name: "an opaque directory clears the lower content only",
		layers: func(t *testing.T) []v1.Layer {
			return []v1.Layer{
				imagetest.Layer(t, []imagetest.File{dir("d/"), file("d/old", "o"), dir("d/sub/"), file("d/sub/old2", "o"), file("keep", "k")}),
				imagetest.Layer(t, []imagetest.File{dir("d/"), file("d/new", "n"), file("d/sub/f", "f"), file("d/.wh..wh..opq", "")}),
			}
		},
		check: func(t *testing.T, root string, st image.Stats) {
			requireMissing(t, filepath.Join(root, "d/old"))
			requireMissing(t, filepath.Join(root, "d/sub/old2"))
			requireMissing(t, filepath.Join(root, "d/.wh..wh..opq"))
			require.Equal(t, "n", readFile(t, filepath.Join(root, "d/new")))
			require.Equal(t, "f", readFile(t, filepath.Join(root, "d/sub/f")))
			require.Equal(t, "k", readFile(t, filepath.Join(root, "keep")))
		},
	}, {
		name: "a hard link shares the inode of an earlier entry, also of a lower layer",
		layers: func(t *testing.T) []v1.Layer {
			return []v1.Layer{
				imagetest.Layer(t, []imagetest.File{file("bin/gzip", "gz"), hardlink("bin/gunzip", "bin/gzip")}),
				imagetest.Layer(t, []imagetest.File{hardlink("usr/zcat", "./bin/gzip")}),
			}
		},
		check: func(t *testing.T, root string, st image.Stats) {
			a, err := os.Stat(filepath.Join(root, "bin/gzip"))
			require.NoError(t, err)
			for _, n := range []string{"bin/gunzip", "usr/zcat"} {
				b, err := os.Stat(filepath.Join(root, n))
				require.NoError(t, err)
				require.True(t, os.SameFile(a, b), n)
			}
			require.Equal(t, 2, st.HardLinks)
		},
	}, {
		name: "setuid and setgid bits are dropped",
		layers: func(t *testing.T) []v1.Layer {
			return []v1.Layer{imagetest.Layer(t, []imagetest.File{fileMode("su", "s", 0o4755), fileMode("wall", "w", 0o2755), dirMode("mail/", 0o2775)})}
		},
		check: func(t *testing.T, root string, st image.Stats) {
			for _, n := range []string{"su", "wall"} {
				info, err := os.Stat(filepath.Join(root, n))
				require.NoError(t, err)
				require.Equal(t, fs.FileMode(0o755), info.Mode(), n)
			}
			info, err := os.Stat(filepath.Join(root, "mail"))
			require.NoError(t, err)
			require.Equal(t, fs.ModeDir|fs.ModeSetgid|0o775, info.Mode())
			require.Equal(t, 2, st.SetuidDropped)
		},
	}, {
		name: "setuid bits are kept when asked",
		lim:  image.Limits{KeepSetuid: true},
		layers: func(t *testing.T) []v1.Layer {
			return []v1.Layer{imagetest.Layer(t, []imagetest.File{fileMode("su", "s", 0o4755)})}
		},
		check: func(t *testing.T, root string, st image.Stats) {
			info, err := os.Stat(filepath.Join(root, "su"))
			require.NoError(t, err)
			require.Equal(t, fs.ModeSetuid|0o755, info.Mode())
		},
	}, {
		name: "an upper layer replaces files, symlinks and directories",
		layers: func(t *testing.T) []v1.Layer {
			return []v1.Layer{
				imagetest.Layer(t, []imagetest.File{file("f", "old"), symlink("l", "f"), dir("d/"), file("d/x", "x"), file("g", "g"), hardlink("h", "g")}),
				imagetest.Layer(t, []imagetest.File{file("f", "new"), dir("l/"), file("l/y", "y"), file("d", "now a file"), file("g", "new g")}),
			}
		},
		check: func(t *testing.T, root string, st image.Stats) {
			require.Equal(t, "new", readFile(t, filepath.Join(root, "f")))
			require.Equal(t, "y", readFile(t, filepath.Join(root, "l/y")))
			require.Equal(t, "now a file", readFile(t, filepath.Join(root, "d")))
			// The link of the lower layer keeps the content it had.
			require.Equal(t, "g", readFile(t, filepath.Join(root, "h")))
		},
	}, {
		name: "zstd layers",
		layers: func(t *testing.T) []v1.Layer {
			zw, err := zstd.NewWriter(nil)
			require.NoError(t, err)
			b := zw.EncodeAll(imagetest.Tar(t, []imagetest.File{file("z", "zstd")}), nil)
			require.NoError(t, zw.Close())
			l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
				return io.NopCloser(bytes.NewReader(b)), nil
			})
			require.NoError(t, err)
			return []v1.Layer{l}
		},
		check: func(t *testing.T, root string, st image.Stats) {
			require.Equal(t, "zstd", readFile(t, filepath.Join(root, "z")))
		},
	}, {
		name: "uncompressed layers",
		layers: func(t *testing.T) []v1.Layer {
			return []v1.Layer{imagetest.UncompressedLayer(t, []imagetest.File{file("a", "raw")})}
		},
		check: func(t *testing.T, root string, st image.Stats) {
			require.Equal(t, "raw", readFile(t, filepath.Join(root, "a")))
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newSandbox(t)
			st, err := image.Unpack(t.Context(), tt.layers(t), s.root, tt.lim)
			require.NoError(t, err)
			tt.check(t, s.root, st)
			s.checkCanary(t)
		})
	}
}

func TestUnpackOwnersAsRoot(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		// Without root the files belong to the process, as documented;
		// what the test checks is the chown of a root runner.
		require.NotEqual(t, "true", os.Getenv("CI"), "the ownership test runs as root under CI")
		return
	}
	s := newSandbox(t)
	f := file("owned", "x")
	f.UID, f.GID = 1234, 5678
	l := symlink("link", "/owned")
	l.UID, l.GID = 42, 43
	_, err := image.Unpack(t.Context(), []v1.Layer{imagetest.Layer(t, []imagetest.File{f, l})}, s.root, image.Limits{})
	require.NoError(t, err)
	for name, want := range map[string][2]uint32{"owned": {1234, 5678}, "link": {42, 43}} {
		info, err := os.Lstat(filepath.Join(s.root, name))
		require.NoError(t, err)
		st := info.Sys().(*syscall.Stat_t)
		require.Equal(t, want, [2]uint32{st.Uid, st.Gid}, name)
	}
}

func TestUnpackRefusesHostileLayers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		layers func(t *testing.T, s sandbox) []v1.Layer
		lim    image.Limits
	}{
		{name: "a parent reference", layers: one(file("../x", "x"))},
		{name: "a parent reference inside the name", layers: one(dir("a/"), file("a/../../x", "x"))},
		{name: "an absolute name", layers: one(file("/etc/x", "x"))},
		{name: "a write through a symlink to /etc", layers: one(symlink("evil", "/etc"), file("evil/passwd", "root::0:0::/:/bin/sh\n"))},
		{name: "a write through a relative symlink out", layers: one(symlink("evil", "../canary"), file("evil/x", "x"))},
		{name: "a write through a symlink of a lower layer", layers: func(t *testing.T, s sandbox) []v1.Layer {
			return []v1.Layer{imagetest.Layer(t, []imagetest.File{symlink("evil", s.canary)}), imagetest.Layer(t, []imagetest.File{file("evil/x", "x")})}
		}},
		{name: "a directory entry replaces a symlink, and is not written through it", layers: func(t *testing.T, s sandbox) []v1.Layer {
			return []v1.Layer{imagetest.Layer(t, []imagetest.File{symlink("evil", s.canary)}), imagetest.Layer(t, []imagetest.File{dir("evil/"), file("evil/x", "x"), file("../x", "x")})}
		}},
		{name: "a directory through a symlink", layers: one(symlink("evil", "../canary"), dir("evil/sub/"))},
		{name: "a whiteout through a symlink", layers: one(symlink("evil", "../canary"), file("evil/.wh.x", ""))},
		{name: "an opaque marker through a symlink", layers: one(symlink("evil", "../canary"), file("evil/.wh..wh..opq", ""))},
		{name: "a hard link to /etc/shadow", layers: one(hardlink("shadow", "/etc/shadow"))},
		{name: "a hard link out by a parent reference", layers: one(hardlink("x", "../canary/x"))},
		{name: "a hard link through a symlink", layers: one(symlink("evil", "/etc"), hardlink("shadow", "evil/shadow"))},
		{name: "a hard link to nothing", layers: one(hardlink("x", "missing"))},
		{name: "a hard link to a directory", layers: one(dir("d/"), hardlink("x", "d"))},
		{name: "a character device", layers: one(special("dev/null", tar.TypeChar))},
		{name: "a block device", layers: one(special("dev/sda", tar.TypeBlock))},
		{name: "a FIFO", layers: one(special("fifo", tar.TypeFifo))},
		{name: "a whiteout of the parent", layers: one(file("a/.wh..", ""))},
		{name: "too many files", lim: image.Limits{MaxFiles: 3}, layers: func(t *testing.T, s sandbox) []v1.Layer {
			return []v1.Layer{imagetest.Layer(t, []imagetest.File{file("a", ""), file("b", "")}), imagetest.Layer(t, []imagetest.File{file("c", ""), file("d", "")})}
		}},
		{name: "too many layers", lim: image.Limits{MaxLayers: 1}, layers: func(t *testing.T, s sandbox) []v1.Layer {
			return []v1.Layer{imagetest.Layer(t, []imagetest.File{file("a", "")}), imagetest.Layer(t, []imagetest.File{file("b", "")})}
		}},
		{name: "one file over the byte limit", lim: image.Limits{MaxBytes: 10}, layers: one(file("big", "0123456789x"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newSandbox(t)
			_, err := image.Unpack(t.Context(), tt.layers(t, s), s.root, tt.lim)
			require.ErrorIs(t, err, image.ErrUnsafeLayer)
			require.ErrorIs(t, err, image.ErrConfig)
			var ue *image.UnsafeLayerError
			require.ErrorAs(t, err, &ue)
			s.checkCanary(t)
		})
	}
}

// one is a layers func of one gzip layer of files.
func one(files ...imagetest.File) func(t *testing.T, s sandbox) []v1.Layer {
	return func(t *testing.T, s sandbox) []v1.Layer { return []v1.Layer{imagetest.Layer(t, files)} }
}

// compressedLayer is a gzip layer as a registry gives it: the digest of
// its compressed bytes, without its uncompressed digest computed up
// front (tarball.LayerFromOpener would read a bomb whole to compute it).
type compressedLayer struct {
	b    []byte
	read *int64
}

func (l compressedLayer) Digest() (v1.Hash, error) {
	sum := sha256.Sum256(l.b)
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}, nil
}

func (l compressedLayer) Compressed() (io.ReadCloser, error) {
	return io.NopCloser(&countingReader{r: bytes.NewReader(l.b), n: l.read}), nil
}

func (l compressedLayer) Size() (int64, error)                { return int64(len(l.b)), nil }
func (l compressedLayer) MediaType() (types.MediaType, error) { return types.DockerLayer, nil }

type countingReader struct {
	r io.Reader
	n *int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	*c.n += int64(n)
	return n, err
}

// bomb returns a gzip stream of a tar holding files of size bytes each,
// all zeros: the compressed zeros are one gzip member, repeated (a gzip
// stream may be a sequence of members), so gigabytes take kilobytes.
func bomb(t testing.TB, files int, size int64) []byte {
	t.Helper()
	const chunk = 16 << 20
	member := func(b []byte) []byte {
		var buf bytes.Buffer
		zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		require.NoError(t, err)
		_, err = zw.Write(b)
		require.NoError(t, err)
		require.NoError(t, zw.Close())
		return buf.Bytes()
	}
	require.Zero(t, size%chunk)
	zeros := member(make([]byte, chunk))
	var out bytes.Buffer
	for i := range files {
		var hdr bytes.Buffer
		tw := tar.NewWriter(&hdr)
		require.NoError(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "zero" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Mode: 0o644, Size: size}))
		// WriteHeader writes the header blocks at once; the zeros of
		// the body follow in members of their own.
		out.Write(member(hdr.Bytes()))
		for range size / chunk {
			out.Write(zeros)
		}
	}
	out.Write(member(make([]byte, 1024)))
	return out.Bytes()
}

func TestUnpackRefusesDecompressionBombs(t *testing.T) {
	t.Parallel()
	t.Run("one file of 8 GiB", func(t *testing.T) {
		t.Parallel()
		s := newSandbox(t)
		b := bomb(t, 1, 8<<30)
		var read int64
		l, err := partial.CompressedToLayer(compressedLayer{b: b, read: &read})
		require.NoError(t, err)
		st, err := image.Unpack(t.Context(), []v1.Layer{l}, s.root, image.Limits{MaxBytes: 64 << 20})
		require.ErrorIs(t, err, image.ErrUnsafeLayer)
		require.Zero(t, st.Bytes)
		// The file's header says its size: nothing past it is read.
		require.Less(t, read, int64(1<<20), "compressed bytes read of %d", len(b))
		s.checkCanary(t)
	})
	t.Run("files under the limit one by one", func(t *testing.T) {
		t.Parallel()
		s := newSandbox(t)
		b := bomb(t, 64, 16<<20)
		t.Logf("%d compressed bytes hold %d MiB", len(b), 64*16)
		var read int64
		l, err := partial.CompressedToLayer(compressedLayer{b: b, read: &read})
		require.NoError(t, err)
		const limit = 100 << 20
		st, err := image.Unpack(t.Context(), []v1.Layer{l}, s.root, image.Limits{MaxBytes: limit})
		require.ErrorIs(t, err, image.ErrUnsafeLayer)
		require.LessOrEqual(t, st.Bytes, int64(limit))
		require.Equal(t, 6, st.Files)
		require.Less(t, read, int64(len(b)), "Unpack should stop reading at the limit")
		var onDisk int64
		require.NoError(t, filepath.WalkDir(s.root, func(p string, d fs.DirEntry, err error) error {
			require.NoError(t, err)
			if d.Type().IsRegular() {
				info, err := d.Info()
				require.NoError(t, err)
				onDisk += info.Size()
			}
			return nil
		}))
		require.LessOrEqual(t, onDisk, int64(limit))
		s.checkCanary(t)
	})
}

func TestUnpackNeedsAnEmptyDirectory(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	require.NoError(t, os.WriteFile(filepath.Join(s.root, "x"), nil, 0o644))
	_, err := image.Unpack(t.Context(), []v1.Layer{imagetest.Layer(t, []imagetest.File{file("a", "")})}, s.root, image.Limits{})
	require.ErrorContains(t, err, "needs an empty one")
}

func TestUnpackStopsWhenCanceled(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := image.Unpack(ctx, []v1.Layer{imagetest.Layer(t, []imagetest.File{file("a", "x")})}, s.root, image.Limits{})
	require.ErrorIs(t, err, context.Canceled)
}

func TestUnpackLayerReadErrorIsNotUnsafe(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	broken := errors.New("connection reset")
	l, err := partial.CompressedToLayer(failingLayer{err: broken})
	require.NoError(t, err)
	_, err = image.Unpack(t.Context(), []v1.Layer{l}, s.root, image.Limits{})
	require.ErrorIs(t, err, broken)
	require.NotErrorIs(t, err, image.ErrConfig)
}

// failingLayer is a layer whose download fails.
type failingLayer struct{ err error }

func (l failingLayer) Digest() (v1.Hash, error) {
	return v1.Hash{Algorithm: "sha256", Hex: "00"}, nil
}
func (l failingLayer) Compressed() (io.ReadCloser, error)  { return nil, l.err }
func (l failingLayer) Size() (int64, error)                { return 0, nil }
func (l failingLayer) MediaType() (types.MediaType, error) { return types.DockerLayer, nil }
