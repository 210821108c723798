package artifacts_test

import (
	"archive/tar"
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/cikit/cikit/artifacts"
)

// zstdMagic starts every zstd frame.
var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// FuzzUnpack extracts arbitrary bytes into a root next to a sentinel
// file. Bytes that are not zstd are compressed first, so that the fuzzer
// mutates tar structure as well as zstd frames.
//
// Invariant: Unpack never panics, and whatever it returns, the root's
// parent holds only the root and the unchanged sentinel, and every
// symlink under the root leads inside it.
func FuzzUnpack(f *testing.F) {
	src := f.TempDir()
	writeTree(f, src, sampleTree...)
	for _, paths := range [][]string{{"."}, {"dist/"}, {"bin/app", "dist/up"}} {
		archive, _ := pack(f, src, artifacts.PackOptions{Paths: paths})
		f.Add(archive)
	}
	for _, tc := range hostileCases() {
		tarball := rawTar(f, tc.entries("/tmp/fuzz-parent")...)
		f.Add(tarball)
		f.Add(compress(f, tarball))
	}
	f.Add(rawTar(f,
		rawEntry{name: "d/", typ: tar.TypeDir, mode: 0o500},
		rawEntry{name: "d/f", typ: tar.TypeReg, body: "f", mode: 0o4777},
		rawEntry{name: "d/l", typ: tar.TypeSymlink, link: "../d/f"},
		rawEntry{name: "d/l", typ: tar.TypeReg, body: "over the link"},
		rawEntry{name: "e", typ: tar.TypeSymlink, link: "d"},
		rawEntry{name: "e/", typ: tar.TypeDir},
	))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		parent, root := jail(t)
		archive := data
		if !bytes.HasPrefix(data, zstdMagic) {
			archive = compress(t, data)
		}
		opts := artifacts.UnpackOptions{MaxBytes: 1 << 20, MaxFiles: 256}
		_, _ = artifacts.Unpack(context.Background(), bytes.NewReader(archive), root, opts)
		if why := confined(parent, root); why != "" {
			t.Fatalf("extraction reached outside the root %s: %s", filepath.Base(root), why)
		}
	})
}
