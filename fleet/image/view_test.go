package image_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/fleet/image"
	"github.com/cikit/cikit/internal/imagetest"
)

// viewRootfs unpacks a small root filesystem and returns its path.
func viewRootfs(t *testing.T) string {
	t.Helper()
	rf, err := image.NewRootfs(image.RootfsConfig{Dir: t.TempDir()})
	require.NoError(t, err)
	owned := file("etc/owned", "o")
	owned.UID, owned.GID = 1000, 1000
	p, err := rf.Unpack(t.Context(), hashOf(t, "view image"), []v1.Layer{imagetest.Layer(t, []imagetest.File{
		dir("usr/"), dir("usr/bin/"), fileMode("usr/bin/tool", "tool v1", 0o755), symlink("bin", "usr/bin"),
		symlink("etc/abs", "/usr/bin/tool"), file("etc/os-release", "ID=view\n"), owned,
		dirMode("tmp/", 0o1777), dirMode("ro/", 0o555), file("ro/f", "r"), hardlink("usr/bin/tool2", "usr/bin/tool")})})
	require.NoError(t, err)
	return p
}

func TestView(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		opts    image.ViewOptions
		overlay bool
	}{
		{name: "overlay", overlay: true},
		{name: "copy", opts: image.ViewOptions{Copy: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.overlay && os.Geteuid() != 0 {
				// An overlay needs root; without it NewView copies, which
				// the copy case covers.
				require.NotEqual(t, "true", os.Getenv("CI"), "the overlay view test runs as root under CI")
				return
			}
			rootfs := viewRootfs(t)
			jobs := t.TempDir()
			a, err := image.NewView(t.Context(), rootfs, filepath.Join(jobs, "a"), tt.opts)
			require.NoError(t, err)
			b, err := image.NewView(t.Context(), rootfs, filepath.Join(jobs, "b"), tt.opts)
			require.NoError(t, err)
			require.Equal(t, tt.overlay, a.Overlay(), "fallback: %v", a.Fallback())
			t.Cleanup(func() { require.NoError(t, b.Close()) })

			// The view holds the image as it is.
			for _, v := range []*image.View{a, b} {
				require.Equal(t, "ID=view\n", readFile(t, filepath.Join(v.Root(), "etc/os-release")))
				target, err := os.Readlink(filepath.Join(v.Root(), "etc/abs"))
				require.NoError(t, err)
				require.Equal(t, "/usr/bin/tool", target)
				info, err := os.Stat(filepath.Join(v.Root(), "tmp"))
				require.NoError(t, err)
				require.Equal(t, fs.ModeDir|fs.ModeSticky|0o777, info.Mode())
				info, err = os.Stat(filepath.Join(v.Root(), "ro"))
				require.NoError(t, err)
				require.Equal(t, fs.ModeDir|0o555, info.Mode())
				info, err = os.Stat(filepath.Join(v.Root(), "usr/bin/tool"))
				require.NoError(t, err)
				require.Equal(t, fs.FileMode(0o755), info.Mode())
				require.True(t, info.ModTime().Equal(imagetest.ModTime))
				if os.Geteuid() == 0 {
					info, err = os.Stat(filepath.Join(v.Root(), "etc/owned"))
					require.NoError(t, err)
					require.Equal(t, uint32(1000), info.Sys().(*syscall.Stat_t).Uid)
				}
			}

			// A job writing to /usr changes its view only.
			require.NoError(t, os.WriteFile(filepath.Join(a.Root(), "usr/x"), []byte("job a"), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(a.Root(), "usr/bin/tool"), []byte("tool v2"), 0o755))
			require.NoError(t, os.Remove(filepath.Join(a.Root(), "etc/os-release")))
			requireMissing(t, filepath.Join(rootfs, "usr/x"))
			requireMissing(t, filepath.Join(b.Root(), "usr/x"))
			require.Equal(t, "tool v1", readFile(t, filepath.Join(rootfs, "usr/bin/tool")))
			require.Equal(t, "tool v1", readFile(t, filepath.Join(rootfs, "usr/bin/tool2")))
			require.Equal(t, "tool v1", readFile(t, filepath.Join(b.Root(), "usr/bin/tool")))
			require.Equal(t, "ID=view\n", readFile(t, filepath.Join(rootfs, "etc/os-release")))
			require.Equal(t, "ID=view\n", readFile(t, filepath.Join(b.Root(), "etc/os-release")))

			// Close throws the view away, twice safely, and leaves the
			// root filesystem.
			require.NoError(t, a.Close())
			require.NoError(t, a.Close())
			requireMissing(t, filepath.Join(jobs, "a"))
			require.Equal(t, "tool v1", readFile(t, filepath.Join(rootfs, "usr/bin/tool")))
			require.Equal(t, "r", readFile(t, filepath.Join(rootfs, "ro/f")))
		})
	}
}

func TestViewCloseDetachesABusyMount(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		require.NotEqual(t, "true", os.Getenv("CI"), "the overlay view test runs as root under CI")
		return
	}
	rootfs := viewRootfs(t)
	v, err := image.NewView(t.Context(), rootfs, filepath.Join(t.TempDir(), "busy"), image.ViewOptions{})
	require.NoError(t, err)
	require.True(t, v.Overlay(), "fallback: %v", v.Fallback())
	// An open file keeps the mount busy, as a job's leftover process would.
	f, err := os.Open(filepath.Join(v.Root(), "etc/os-release"))
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, v.Close())
	requireMissing(t, v.Root())
	require.Equal(t, "ID=view\n", readFile(t, filepath.Join(rootfs, "etc/os-release")))
}

// TestRemoveViewOfAStoppedRunner: a view its process never closed, an
// overlay still mounted or a copy, is unmounted and removed, and the
// root filesystem under it is untouched.
func TestRemoveViewOfAStoppedRunner(t *testing.T) {
	t.Parallel()
	rootfs := viewRootfs(t)
	for _, copy := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "left")
		v, err := image.NewView(t.Context(), rootfs, dir, image.ViewOptions{Copy: copy})
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(v.Root(), "etc/os-release"), []byte("changed\n"), 0o644))
		require.NoError(t, image.RemoveView(dir))
		requireMissing(t, dir)
		mounts, err := os.ReadFile("/proc/self/mountinfo")
		require.NoError(t, err)
		require.NotContains(t, string(mounts), v.Root(), "the overlay is unmounted")
		require.Equal(t, "ID=view\n", readFile(t, filepath.Join(rootfs, "etc/os-release")))
	}
	require.NoError(t, image.RemoveView(filepath.Join(t.TempDir(), "none")), "nothing to remove")
}

func TestViewNeedsANewDirectory(t *testing.T) {
	t.Parallel()
	rootfs := viewRootfs(t)
	_, err := image.NewView(t.Context(), rootfs, t.TempDir(), image.ViewOptions{Copy: true})
	require.ErrorIs(t, err, fs.ErrExist)
}

func TestViewFallsBackToACopy(t *testing.T) {
	t.Parallel()
	// An overlay's options cannot name a path with a comma: the mount
	// is not made, and the view is a copy.
	rootfs := filepath.Join(t.TempDir(), "a,b")
	require.NoError(t, os.Rename(viewRootfs(t), rootfs))
	v, err := image.NewView(t.Context(), rootfs, filepath.Join(t.TempDir(), "v"), image.ViewOptions{})
	require.NoError(t, err)
	require.False(t, v.Overlay())
	require.Error(t, v.Fallback())
	require.NoError(t, os.WriteFile(filepath.Join(v.Root(), "usr/x"), []byte("job"), 0o644))
	requireMissing(t, filepath.Join(rootfs, "usr/x"))
	require.Equal(t, "ID=view\n", readFile(t, filepath.Join(v.Root(), "etc/os-release")))
	require.NoError(t, v.Close())
	requireMissing(t, v.Root())
}
