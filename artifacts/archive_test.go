package artifacts_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/cikit/cikit/artifacts"
)

// sampleTree has every kind of path Pack keeps: modes, an empty
// directory, a read-only directory, symlinks to a file and a directory.
var sampleTree = []treeEntry{
	{name: "bin/app", content: "#!/bin/sh\necho app\n", perm: 0o755},
	{name: "bin/secret", content: "s3cr3t", perm: 0o600},
	{name: "dist/index.html", content: "<html></html>"},
	{name: "dist/assets/app.js", content: "console.log(1)", perm: 0o640},
	{name: "dist/empty", dir: true, perm: 0o750},
	{name: "dist/ro", dir: true, perm: 0o555},
	{name: "dist/latest.js", link: "assets/app.js"},
	{name: "dist/up", link: "../bin"},
	{name: "dist/self", link: "."},
	{name: "dist/dangling", link: "gone"},
	{name: "logs/a.log", content: "a"},
	{name: "logs/deep/b.log", content: "b"},
	{name: "logs/deep/c.tmp", content: "c"},
	{name: "README", content: "readme"},
}

func TestPackUnpackRoundTrip(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	writeTree(t, src, sampleTree...)
	archive, packed := pack(t, src, artifacts.PackOptions{Paths: []string{"."}})
	dst := t.TempDir()
	unpacked, err := artifacts.Unpack(context.Background(), bytes.NewReader(archive), dst, artifacts.UnpackOptions{})
	if err != nil {
		t.Fatalf("Unpack: %v", err)
	}
	if diff := cmp.Diff(snapshot(t, src), snapshot(t, dst)); diff != "" {
		t.Errorf("extracted tree differs from the packed one (-packed +extracted):\n%s", diff)
	}
	if diff := cmp.Diff(packed, unpacked); diff != "" {
		t.Errorf("Unpack's stats differ from Pack's (-pack +unpack):\n%s", diff)
	}
	want := artifacts.PackStats{Files: 8, Dirs: 7, Symlinks: 4, Bytes: packed.Bytes, Size: int64(len(archive))}
	if diff := cmp.Diff(want, packed); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
	if got := snapshot(t, dst)["bin/app"]; got.Perm != 0o755 || !got.ModTime.Equal(fixedTime) {
		t.Errorf("bin/app extracted with mode %v and mtime %v; want 0755 and %v", got.Perm, got.ModTime, fixedTime)
	}
}

func TestPackDeterministic(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	writeTree(t, src, sampleTree...)
	opts := artifacts.PackOptions{Paths: []string{"dist/", "bin", "**/*.log"}}
	sum := func(dir string) [32]byte {
		archive, _ := pack(t, dir, opts)
		return sha256.Sum256(archive)
	}
	first := sum(src)
	if again := sum(src); again != first {
		t.Fatalf("two archives of the same tree differ: %x, %x", first, again)
	}

	// The same tree elsewhere, built by extracting the archive: same bytes.
	archive, _ := pack(t, src, opts)
	copyDir := t.TempDir()
	if _, err := artifacts.Unpack(context.Background(), bytes.NewReader(archive), copyDir, artifacts.UnpackOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := sum(copyDir); got != first {
		t.Errorf("the tree extracted elsewhere packs to %x, the original to %x", got, first)
	}

	changes := []struct {
		name   string
		change func(t *testing.T, dir string)
	}{
		{"content", func(t *testing.T, dir string) {
			writeTree(t, dir, treeEntry{name: "dist/index.html", content: "<html>2</html>"})
		}},
		{"mtime", func(t *testing.T, dir string) {
			later := fixedTime.Add(time.Nanosecond)
			if err := os.Chtimes(filepath.Join(dir, "bin/app"), later, later); err != nil {
				t.Fatal(err)
			}
		}},
		{"mode", func(t *testing.T, dir string) {
			if err := os.Chmod(filepath.Join(dir, "bin/secret"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"symlink", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "dist/latest.js")
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("index.html", p); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range changes {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, sampleTree...)
			if got := sum(dir); got != first {
				t.Fatalf("an identical tree packs to %x, want %x", got, first)
			}
			tc.change(t, dir)
			if got := sum(dir); got == first {
				t.Errorf("after a change of %s the archive is still %x", tc.name, got)
			}
		})
	}
}

func TestPackSelect(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	writeTree(t, src, sampleTree...)
	tests := []struct {
		name string
		opts artifacts.PackOptions
		want []string
	}{
		{
			name: "directory with trailing slash is recursive",
			opts: artifacts.PackOptions{Paths: []string{"dist/"}},
			want: []string{"dist/", "dist/assets/", "dist/assets/app.js", "dist/dangling", "dist/empty/", "dist/index.html", "dist/latest.js", "dist/ro/", "dist/self", "dist/up"},
		},
		{
			name: "single file",
			opts: artifacts.PackOptions{Paths: []string{"bin/app"}},
			want: []string{"bin/app"},
		},
		{
			name: "dot slash prefix",
			opts: artifacts.PackOptions{Paths: []string{"./bin/app"}},
			want: []string{"bin/app"},
		},
		{
			name: "double star",
			opts: artifacts.PackOptions{Paths: []string{"**/*.log"}},
			want: []string{"logs/a.log", "logs/deep/b.log"},
		},
		{
			name: "alternatives and star",
			opts: artifacts.PackOptions{Paths: []string{"{bin,logs}/*"}},
			want: []string{"bin/app", "bin/secret", "logs/a.log", "logs/deep/", "logs/deep/b.log", "logs/deep/c.tmp"},
		},
		{
			name: "symlink matched is archived as a symlink",
			opts: artifacts.PackOptions{Paths: []string{"dist/up"}},
			want: []string{"dist/up"},
		},
		{
			name: "overlapping paths give each entry once",
			opts: artifacts.PackOptions{Paths: []string{"logs", "logs/**", "**/*.log"}},
			want: []string{"logs/", "logs/a.log", "logs/deep/", "logs/deep/b.log", "logs/deep/c.tmp"},
		},
		{
			name: "exclude a glob",
			opts: artifacts.PackOptions{Paths: []string{"logs"}, Exclude: []string{"**/*.tmp"}},
			want: []string{"logs/", "logs/a.log", "logs/deep/", "logs/deep/b.log"},
		},
		{
			name: "exclude a directory leaves it out whole",
			opts: artifacts.PackOptions{Paths: []string{"dist/"}, Exclude: []string{"dist/assets/", "dist/*.html"}},
			want: []string{"dist/", "dist/dangling", "dist/empty/", "dist/latest.js", "dist/ro/", "dist/self", "dist/up"},
		},
		{
			name: "files are taken literally and excluded too",
			opts: artifacts.PackOptions{Files: []string{"README", "logs/deep/c.tmp", "logs/a.log", "*"}, Exclude: []string{"logs/*.log"}},
			want: []string{"README", "logs/deep/c.tmp"},
		},
		{
			name: "missing paths give an empty archive",
			opts: artifacts.PackOptions{Paths: []string{"nothing/here", "no-*", "README/x"}, Files: []string{"gone.txt"}},
			want: []string{},
		},
		{
			name: "the whole workspace",
			opts: artifacts.PackOptions{Paths: []string{"**"}, Exclude: []string{"dist", "logs"}},
			want: []string{"README", "bin/", "bin/app", "bin/secret"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			archive, stats := pack(t, src, tc.opts)
			if diff := cmp.Diff(tc.want, entryNames(t, archive)); diff != "" {
				t.Errorf("entries (-want +got):\n%s", diff)
			}
			if n := stats.Files + stats.Dirs + stats.Symlinks; n != len(tc.want) {
				t.Errorf("stats count %d entries, want %d", n, len(tc.want))
			}
		})
	}
}

func TestPackRefuses(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	writeTree(t, outside, treeEntry{name: "secret", content: "outside"})
	src := t.TempDir()
	writeTree(t, src,
		treeEntry{name: "ok", content: "ok"},
		treeEntry{name: "out/abs", link: filepath.Join(outside, "secret")},
		treeEntry{name: "rel/up", link: "../../outside"},
		treeEntry{name: "back/down", link: "x/../y"},
		treeEntry{name: "linkdir", link: outside},
		treeEntry{name: "inner", link: "rel"},
	)
	tests := []struct {
		name string
		opts artifacts.PackOptions
		want string // a substring of the error
	}{
		{"parent path", artifacts.PackOptions{Root: src, Paths: []string{"../x"}}, `path "../x": the path leaves the workspace`},
		{"cleaned parent path", artifacts.PackOptions{Root: src, Paths: []string{"ok/../../x"}}, "leaves the workspace"},
		{"absolute path", artifacts.PackOptions{Root: src, Paths: []string{"/etc/passwd"}}, "is absolute"},
		{"exclude outside", artifacts.PackOptions{Root: src, Paths: []string{"ok"}, Exclude: []string{"../x"}}, `exclude "../x"`},
		{"file outside", artifacts.PackOptions{Root: src, Files: []string{"../x"}}, `file "../x"`},
		{"empty path", artifacts.PackOptions{Root: src, Paths: []string{""}}, "is empty"},
		{"malformed glob", artifacts.PackOptions{Root: src, Paths: []string{"dist/[a"}}, "malformed"},
		{"relative root", artifacts.PackOptions{Root: "ws", Paths: []string{"."}}, "not an absolute path"},
		{"absolute symlink outside", artifacts.PackOptions{Root: src, Paths: []string{"out"}}, `symlink "out/abs" points to`},
		{"relative symlink outside", artifacts.PackOptions{Root: src, Paths: []string{"rel/up"}}, `symlink "rel/up" points to "../../outside"`},
		{"symlink climbing after descending", artifacts.PackOptions{Root: src, Paths: []string{"back"}}, `symlink "back/down"`},
		{"symlink to a directory outside", artifacts.PackOptions{Root: src, Paths: []string{"linkdir"}}, `symlink "linkdir" points to`},
		{"glob through a symlinked directory", artifacts.PackOptions{Root: src, Paths: []string{"linkdir/*"}}, `passes through the symlink "linkdir"`},
		{"file through a symlinked directory", artifacts.PackOptions{Root: src, Paths: []string{"linkdir/secret"}}, `passes through the symlink "linkdir"`},
		{"path through a symlink inside", artifacts.PackOptions{Root: src, Files: []string{"inner/up"}}, `passes through the symlink "inner"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			_, err := artifacts.Pack(context.Background(), &buf, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Pack: %v; want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestPackAbsoluteSymlinkInside(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	writeTree(t, src,
		treeEntry{name: "lib/libx.so.1", content: "elf"},
		treeEntry{name: "lib/sub/libx.so", link: filepath.Join(src, "lib/libx.so.1")},
	)
	archive, _ := pack(t, src, artifacts.PackOptions{Paths: []string{"lib"}})
	dst := t.TempDir()
	if _, err := artifacts.Unpack(context.Background(), bytes.NewReader(archive), dst, artifacts.UnpackOptions{}); err != nil {
		t.Fatal(err)
	}
	target, err := os.Readlink(filepath.Join(dst, "lib/sub/libx.so"))
	if err != nil {
		t.Fatal(err)
	}
	if target != "../libx.so.1" {
		t.Errorf("absolute target inside the workspace archived as %q, want %q", target, "../libx.so.1")
	}
}

// hostileCase is an archive Unpack must refuse, and where.
type hostileCase struct {
	name    string
	setup   func(t *testing.T, parent, root string) // prepares root before extraction
	planted string                                  // a path setup made, removed before the check
	entries func(parent string) []rawEntry
	want    string // a substring of the error
}

func hostileCases() []hostileCase {
	after := rawEntry{name: "after", typ: tar.TypeReg, body: "must not be extracted"}
	return []hostileCase{
		{name: "parent segment", want: `entry "../x" has a ".." segment`, entries: func(string) []rawEntry {
			return []rawEntry{{name: "../x", typ: tar.TypeReg, body: "x"}, after}
		}},
		{name: "absolute name", want: "has an absolute name", entries: func(parent string) []rawEntry {
			return []rawEntry{{name: filepath.Join(parent, "x"), typ: tar.TypeReg, body: "x"}, after}
		}},
		{name: "absolute etc", want: `entry "/etc/x" has an absolute name`, entries: func(string) []rawEntry {
			return []rawEntry{{name: "/etc/x", typ: tar.TypeReg, body: "x"}, after}
		}},
		{name: "escape after cleaning", want: `entry "a/../../x" has a ".." segment`, entries: func(string) []rawEntry {
			return []rawEntry{{name: "a/../../x", typ: tar.TypeReg, body: "x"}, after}
		}},
		{name: "directory escape", want: `has a ".." segment`, entries: func(string) []rawEntry {
			return []rawEntry{{name: "../d/", typ: tar.TypeDir}, after}
		}},
		{name: "unclean name", want: "not in clean form", entries: func(string) []rawEntry {
			return []rawEntry{{name: "a//b", typ: tar.TypeReg, body: "x"}, after}
		}},
		{name: "symlink out then write through", want: `entry "a" is a symlink to "../"`, entries: func(string) []rawEntry {
			return []rawEntry{{name: "a", typ: tar.TypeSymlink, link: "../"}, {name: "a/x", typ: tar.TypeReg, body: "x"}, after}
		}},
		{name: "symlink to absolute", want: "is a symlink to", entries: func(parent string) []rawEntry {
			return []rawEntry{{name: "a", typ: tar.TypeSymlink, link: parent}, {name: "a/sentinel", typ: tar.TypeReg, body: "pwned"}, after}
		}},
		{name: "symlink to etc then write through", want: `entry "a" is a symlink to "/etc"`, entries: func(string) []rawEntry {
			return []rawEntry{{name: "a", typ: tar.TypeSymlink, link: "/etc"}, {name: "a/passwd", typ: tar.TypeReg, body: "root::0:0::/:/bin/sh"}, after}
		}},
		{name: "symlink to a directory inside then a file through it", want: `entry "l/x" would be written through the symlink "l"`, entries: func(string) []rawEntry {
			return []rawEntry{{name: "d/", typ: tar.TypeDir, mode: 0o755}, {name: "l", typ: tar.TypeSymlink, link: "d"}, {name: "l/x", typ: tar.TypeReg, body: "x"}, after}
		}},
		{name: "symlink chain climbing through a symlink", want: `entry "c" is a symlink to "a/b/.."`, entries: func(string) []rawEntry {
			return []rawEntry{{name: "a/b", typ: tar.TypeSymlink, link: ".."}, {name: "c", typ: tar.TypeSymlink, link: "a/b/.."}, after}
		}},
		{name: "nested symlink out", want: `entry "a/b/l" is a symlink to "../../../sentinel"`, entries: func(string) []rawEntry {
			return []rawEntry{{name: "a/b/l", typ: tar.TypeSymlink, link: "../../../sentinel"}, after}
		}},
		{name: "empty symlink target", want: `is a symlink to ""`, entries: func(string) []rawEntry {
			return []rawEntry{{name: "l", typ: tar.TypeSymlink}, after}
		}},
		{name: "hard link", want: `entry "h" is a hard link`, entries: func(string) []rawEntry {
			return []rawEntry{{name: "h", typ: tar.TypeLink, link: "../sentinel"}, after}
		}},
		{name: "hard link inside", want: "is a hard link", entries: func(string) []rawEntry {
			return []rawEntry{{name: "f", typ: tar.TypeReg, body: "f"}, {name: "h", typ: tar.TypeLink, link: "f"}, after}
		}},
		{name: "character device", want: `entry "null" is a device`, entries: func(string) []rawEntry {
			return []rawEntry{{name: "null", typ: tar.TypeChar}, after}
		}},
		{name: "block device", want: "is a device", entries: func(string) []rawEntry {
			return []rawEntry{{name: "sda", typ: tar.TypeBlock}, after}
		}},
		{name: "fifo", want: "is a FIFO", entries: func(string) []rawEntry {
			return []rawEntry{{name: "p", typ: tar.TypeFifo}, after}
		}},
		{name: "symlink in the root before extraction", want: `entry "out/sentinel" would be written through the symlink "out"`, planted: "out",
			setup: func(t *testing.T, parent, root string) {
				if err := os.Symlink(parent, filepath.Join(root, "out")); err != nil {
					t.Fatal(err)
				}
			},
			entries: func(string) []rawEntry {
				return []rawEntry{{name: "out/sentinel", typ: tar.TypeReg, body: "pwned"}, after}
			}},
		{name: "directory through a symlink", want: "would be written through the symlink", entries: func(string) []rawEntry {
			return []rawEntry{{name: "d/", typ: tar.TypeDir}, {name: "l", typ: tar.TypeSymlink, link: "d"}, {name: "l/sub/", typ: tar.TypeDir}, after}
		}},
	}
}

func TestUnpackRefusesHostile(t *testing.T) {
	t.Parallel()
	for _, tc := range hostileCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			parent, root := jail(t)
			if tc.setup != nil {
				tc.setup(t, parent, root)
			}
			archive := compress(t, rawTar(t, tc.entries(parent)...))
			_, err := artifacts.Unpack(context.Background(), bytes.NewReader(archive), root, artifacts.UnpackOptions{})
			if tc.planted != "" {
				// The symlink setup planted leads out by design; the check
				// is about what the extraction made.
				if err := os.Remove(filepath.Join(root, tc.planted)); err != nil {
					t.Fatal(err)
				}
			}
			if !errors.Is(err, artifacts.ErrUnsafeArchive) {
				t.Fatalf("Unpack: %v; want ErrUnsafeArchive", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Unpack: %v; want an error containing %q", err, tc.want)
			}
			if why := confined(parent, root); why != "" {
				t.Errorf("extraction reached outside the root: %s", why)
			}
			if _, err := os.Lstat(filepath.Join(root, "after")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("an entry after the unsafe one was extracted (Lstat: %v)", err)
			}
		})
	}
}

func TestUnpackIntoExistingTree(t *testing.T) {
	t.Parallel()
	parent, root := jail(t)
	outsideFile := filepath.Join(parent, "sentinel")
	writeTree(t, root,
		treeEntry{name: "keep/old.txt", content: "old"},
		treeEntry{name: "replace.txt", content: "stale"},
		treeEntry{name: "link-to-outside", link: outsideFile},
		treeEntry{name: "was-file", content: "file"},
	)
	if err := os.Link(outsideFile, filepath.Join(root, "hardlinked")); err != nil {
		t.Fatal(err)
	}
	archive := compress(t, rawTar(t,
		rawEntry{name: "keep/", typ: tar.TypeDir, mode: 0o755},
		rawEntry{name: "keep/new.txt", typ: tar.TypeReg, body: "new"},
		rawEntry{name: "replace.txt", typ: tar.TypeReg, body: "fresh"},
		rawEntry{name: "link-to-outside", typ: tar.TypeReg, body: "not through the link"},
		rawEntry{name: "hardlinked", typ: tar.TypeReg, body: "a new inode"},
		rawEntry{name: "was-file/", typ: tar.TypeDir, mode: 0o755},
		rawEntry{name: "setuid", typ: tar.TypeReg, body: "x", mode: 0o4755},
		rawEntry{name: "sticky/", typ: tar.TypeDir, mode: 0o1777},
	))
	if _, err := artifacts.Unpack(context.Background(), bytes.NewReader(archive), root, artifacts.UnpackOptions{}); err != nil {
		t.Fatalf("Unpack: %v", err)
	}
	if why := confined(parent, root); why != "" {
		t.Fatalf("extraction reached outside the root: %s", why)
	}
	got := snapshot(t, root)
	want := map[string]string{
		"keep/old.txt":    "old",
		"keep/new.txt":    "new",
		"replace.txt":     "fresh",
		"link-to-outside": "not through the link",
		"hardlinked":      "a new inode",
		"setuid":          "x",
	}
	for name, content := range want {
		if n := got[name]; n.Type != "file" || n.Content != content {
			t.Errorf("%s: %+v; want a file holding %q", name, n, content)
		}
	}
	if got["was-file"].Type != "dir" {
		t.Errorf("was-file: %+v; want the file replaced by a directory", got["was-file"])
	}
	info, err := os.Stat(filepath.Join(root, "setuid"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode()&(os.ModeSetuid|os.ModeSetgid|os.ModeSticky) != 0 || info.Mode().Perm() != 0o755 {
		t.Errorf("setuid extracted with mode %v; want -rwxr-xr-x", info.Mode())
	}
	info, err = os.Stat(filepath.Join(root, "sticky"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode()&os.ModeSticky != 0 {
		t.Errorf("sticky extracted with mode %v; want no sticky bit", info.Mode())
	}
}

func TestUnpackRefusesFileOverDirectory(t *testing.T) {
	t.Parallel()
	_, root := jail(t)
	writeTree(t, root, treeEntry{name: "d/kept", content: "kept"})
	archive := compress(t, rawTar(t, rawEntry{name: "d", typ: tar.TypeReg, body: "file"}))
	_, err := artifacts.Unpack(context.Background(), bytes.NewReader(archive), root, artifacts.UnpackOptions{})
	if err == nil || !strings.Contains(err.Error(), "holds a directory") {
		t.Fatalf("Unpack: %v; want an error saying the root holds a directory there", err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "d/kept")); err != nil || string(b) != "kept" {
		t.Errorf("the directory's content changed: %q, %v", b, err)
	}
}

func TestUnpackLimits(t *testing.T) {
	t.Parallel()
	archive := compress(t, rawTar(t,
		rawEntry{name: "a", typ: tar.TypeReg, body: strings.Repeat("a", 600)},
		rawEntry{name: "b", typ: tar.TypeReg, body: strings.Repeat("b", 600)},
		rawEntry{name: "d/", typ: tar.TypeDir},
	))
	tests := []struct {
		name string
		opts artifacts.UnpackOptions
		want string // a substring of the error; "" for none
	}{
		{"within both", artifacts.UnpackOptions{MaxBytes: 1200, MaxFiles: 3}, ""},
		{"too many bytes", artifacts.UnpackOptions{MaxBytes: 1000}, "more than 1000 bytes (UnpackOptions.MaxBytes)"},
		{"too many entries", artifacts.UnpackOptions{MaxFiles: 2}, "more than 2 entries (UnpackOptions.MaxFiles)"},
		{"negative", artifacts.UnpackOptions{MaxFiles: -1}, "must not be negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, root := jail(t)
			_, err := artifacts.Unpack(context.Background(), bytes.NewReader(archive), root, tc.opts)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Unpack: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Unpack: %v; want an error containing %q", err, tc.want)
			}
			if strings.Contains(tc.want, "UnpackOptions.") && !errors.Is(err, artifacts.ErrUnpackLimit) {
				t.Errorf("Unpack: %v; want ErrUnpackLimit", err)
			}
		})
	}
}

// A zip bomb: a small archive of a file of many zero bytes stops at
// MaxBytes, before writing them.
func TestUnpackBomb(t *testing.T) {
	t.Parallel()
	_, root := jail(t)
	var tarball bytes.Buffer
	tw := tar.NewWriter(&tarball)
	const size = 64 << 20
	if err := tw.WriteHeader(&tar.Header{Name: "zeros", Typeflag: tar.TypeReg, Mode: 0o644, Size: size}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	archive := compress(t, tarball.Bytes())
	_, err := artifacts.Unpack(context.Background(), bytes.NewReader(archive), root, artifacts.UnpackOptions{MaxBytes: 1 << 20})
	if !errors.Is(err, artifacts.ErrUnpackLimit) {
		t.Fatalf("Unpack of %d compressed bytes expanding to %d: %v; want ErrUnpackLimit", len(archive), size, err)
	}
	if _, err := os.Lstat(filepath.Join(root, "zeros")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the bomb was written (Lstat: %v)", err)
	}
}

func TestUnpackGarbage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		data []byte
	}{
		{"not zstd", []byte("definitely not an archive")},
		{"zstd of not a tar", compress(t, bytes.Repeat([]byte("x"), 2000))},
		{"truncated", func() []byte {
			a := compress(t, rawTar(t, rawEntry{name: "f", typ: tar.TypeReg, body: strings.Repeat("y", 5000)}))
			return a[:len(a)/2]
		}()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			parent, root := jail(t)
			if _, err := artifacts.Unpack(context.Background(), bytes.NewReader(tc.data), root, artifacts.UnpackOptions{}); err == nil {
				t.Error("Unpack of a malformed archive succeeded")
			}
			if why := confined(parent, root); why != "" {
				t.Errorf("extraction reached outside the root: %s", why)
			}
		})
	}
}

func TestCancelled(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	writeTree(t, src, sampleTree...)
	archive, _ := pack(t, src, artifacts.PackOptions{Paths: []string{"."}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := artifacts.Pack(ctx, &bytes.Buffer{}, artifacts.PackOptions{Root: src, Paths: []string{"."}}); !errors.Is(err, context.Canceled) {
		t.Errorf("Pack with a cancelled context: %v; want context.Canceled", err)
	}
	dst := t.TempDir()
	if _, err := artifacts.Unpack(ctx, bytes.NewReader(archive), dst, artifacts.UnpackOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Unpack with a cancelled context: %v; want context.Canceled", err)
	}
	if entries, _ := os.ReadDir(dst); len(entries) != 0 {
		t.Errorf("Unpack with a cancelled context extracted %d entries", len(entries))
	}
}

// cancelAfter is a reader that cancels a context once n bytes are read,
// to cancel an extraction in the middle of a file.
type cancelAfter struct {
	r      *bytes.Reader
	n      int
	cancel context.CancelFunc
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	if c.n <= 0 {
		c.cancel()
	}
	if len(p) > 4096 {
		p = p[:4096]
	}
	n, err := c.r.Read(p)
	c.n -= n
	return n, err
}

func TestUnpackCancelledMidway(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	big := make([]byte, 8<<20)
	for i := range big {
		big[i] = byte(i * 7 % 251)
	}
	writeTree(t, src, treeEntry{name: "big", content: string(big)})
	archive, _ := pack(t, src, artifacts.PackOptions{Paths: []string{"big"}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &cancelAfter{r: bytes.NewReader(archive), n: len(archive) / 4, cancel: cancel}
	if _, err := artifacts.Unpack(ctx, r, t.TempDir(), artifacts.UnpackOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Unpack cancelled midway: %v; want context.Canceled", err)
	}
}
