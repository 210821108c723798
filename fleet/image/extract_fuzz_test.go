package image_test

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/cikit/cikit/fleet/image"
	"github.com/cikit/cikit/internal/imagetest"
)

// FuzzUnpack unpacks two layers of arbitrary tar bytes, the second over
// the first, their header checksums mended first (a mutation would
// otherwise rarely get past the tar reader). Whatever they hold, Unpack does not panic, writes nothing
// outside its directory (a canary directory beside it stays empty),
// leaves no device, FIFO, whiteout marker or setuid file in it, and
// writes no more than its limits allow.
func FuzzUnpack(f *testing.F) {
	seeds := [][2][]imagetest.File{
		{{dir("usr/"), file("usr/a", "a"), symlink("bin", "usr"), hardlink("usr/b", "usr/a")}, {file("usr/.wh.a", ""), file("./d/.wh..wh..opq", "")}},
		{{dir("d/"), file("d/x", "x"), dir("d/sub/"), file("d/sub/y", "y")}, {file("d/z", "z"), file("d/.wh..wh..opq", ""), file(".wh.d", "")}},
		{{symlink("evil", "../canary")}, {file("evil/x", "x")}},
		{{symlink("evil", "/etc")}, {file("evil/passwd", "x"), hardlink("evil/h", "evil/passwd")}},
		{{file("../x", "x")}, {file("/etc/x", "x")}},
		{{hardlink("shadow", "/etc/shadow")}, {hardlink("x", "../canary/x")}},
		{{special("null", tar.TypeChar), special("fifo", tar.TypeFifo)}, {fileMode("su", "s", 0o6755)}},
		{{file("f", "old"), dir("l/"), hardlink("g", "f")}, {symlink("l", "f"), dir("f/"), file("f/x", "x"), file("g", "new")}},
	}
	for _, s := range seeds {
		f.Add(imagetest.Tar(f, s[0]), imagetest.Tar(f, s[1]))
	}
	const maxBytes, maxFiles = 1 << 20, 200
	f.Fuzz(func(t *testing.T, lower, upper []byte) {
		s := newSandbox(t)
		layers := []v1.Layer{
			static.NewLayer(mendChecksums(lower), types.OCIUncompressedLayer),
			static.NewLayer(mendChecksums(upper), types.OCIUncompressedLayer),
		}
		st, _ := image.Unpack(t.Context(), layers, s.root, image.Limits{MaxBytes: maxBytes, MaxFiles: maxFiles})
		s.checkCanary(t)
		if st.Bytes > maxBytes {
			t.Fatalf("wrote %d bytes, past the limit of %d", st.Bytes, maxBytes)
		}
		if n := st.Files + st.Dirs + st.Symlinks + st.HardLinks + st.Whiteouts; n > maxFiles {
			t.Fatalf("applied %d entries, past the limit of %d", n, maxFiles)
		}
		err := filepath.WalkDir(s.root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if strings.HasPrefix(d.Name(), ".wh.") {
				t.Errorf("the whiteout marker %s was written", p)
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			m := info.Mode()
			switch {
			case m.Type() != 0 && !m.IsDir() && m.Type() != fs.ModeSymlink:
				t.Errorf("%s is a %v", p, m.Type())
			case m.IsRegular() && m&(fs.ModeSetuid|fs.ModeSetgid) != 0:
				t.Errorf("%s kept its setuid or setgid bit", p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// mendChecksums returns a copy of the tar stream b with the checksum of
// each header block set to match the block, walking from header to
// header by the octal sizes they give.
func mendChecksums(b []byte) []byte {
	b = bytes.Clone(b)
	for off := 0; off+512 <= len(b); {
		blk := b[off : off+512]
		if bytes.Count(blk, []byte{0}) == 512 {
			off += 512
			continue
		}
		copy(blk[148:156], "        ")
		var sum int64
		for _, c := range blk {
			sum += int64(c)
		}
		copy(blk[148:156], fmt.Sprintf("%06o\x00 ", sum))
		size, err := strconv.ParseInt(strings.TrimRight(strings.TrimLeft(string(blk[124:136]), " "), " \x00"), 8, 64)
		if err != nil || size < 0 || size > int64(len(b)) {
			return b
		}
		off += 512 + int(size+511)/512*512
	}
	return b
}
