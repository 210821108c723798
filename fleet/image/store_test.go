package image_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/fleet/image"
	"github.com/cikit/cikit/internal/imagetest"
)

// TestStorePreparesJobImages: two jobs get views of the busybox image
// the test built, pulled from the in-process registry: its os-release
// and its shell, at the digest pushed. What one job writes to /usr stays
// in its view. The service image on the same base is another digest
// and another root filesystem. Closing the views removes them.
func TestStorePreparesJobImages(t *testing.T) {
	t.Parallel()
	reg := imagetest.NewRegistry(t, nil)
	base := imagetest.BusyboxImage(t, "3.19")
	baseRef := reg.Push(t, "test/busybox:3.19", base)
	svcRef := reg.Push(t, "test/pingd:1", imagetest.ServiceImage(t, base))
	dir := t.TempDir()
	s, err := image.NewStore(image.Config{Dir: filepath.Join(dir, "images"), Insecure: []string{reg.Host}}, image.Limits{})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	ctx := t.Context()

	a, err := s.Prepare(ctx, reg.Host+"/test/busybox:3.19", image.PullOptions{}, filepath.Join(dir, "job-a"), image.ViewOptions{})
	require.NoError(t, err)
	b, err := s.Prepare(ctx, reg.Host+"/test/busybox:3.19", image.PullOptions{}, filepath.Join(dir, "job-b"), image.ViewOptions{})
	require.NoError(t, err)
	require.Equal(t, baseRef.DigestStr(), a.Digest.String(), "the job runs the digest pushed")
	require.Equal(t, []string{"PATH=/bin"}, a.Config.Env)
	osRelease, err := os.ReadFile(filepath.Join(a.View.Root(), "etc", "os-release"))
	require.NoError(t, err)
	require.Contains(t, string(osRelease), "ID=cikit-busybox\n")
	target, err := os.Readlink(filepath.Join(a.View.Root(), "bin", "sh"))
	require.NoError(t, err)
	require.Equal(t, "busybox", target)

	require.NoError(t, os.WriteFile(filepath.Join(a.View.Root(), "usr", "x"), []byte("a's"), 0o644))
	_, err = os.Stat(filepath.Join(b.View.Root(), "usr", "x"))
	require.ErrorIs(t, err, os.ErrNotExist, "b does not see what a wrote")

	svc, err := s.Prepare(ctx, svcRef.String(), image.PullOptions{}, filepath.Join(dir, "job-svc"), image.ViewOptions{})
	require.NoError(t, err)
	require.NotEqual(t, a.Digest, svc.Digest)
	require.Equal(t, []string{"/usr/bin/pingd"}, svc.Config.Entrypoint)
	info, err := os.Stat(filepath.Join(svc.View.Root(), "usr", "bin", "pingd"))
	require.NoError(t, err)
	require.NotZero(t, info.Mode()&0o100, "pingd is executable")
	_, err = os.Stat(filepath.Join(svc.View.Root(), "usr", "x"))
	require.ErrorIs(t, err, os.ErrNotExist)

	roots, err := os.ReadDir(filepath.Join(dir, "images", "rootfs"))
	require.NoError(t, err)
	require.Len(t, roots, 2, "one root filesystem per digest, shared by a and b")
	for _, p := range []*image.Prepared{a, b, svc} {
		require.NoError(t, p.Close())
		require.NoError(t, p.Close(), "closing twice")
	}
	for _, job := range []string{"job-a", "job-b", "job-svc"} {
		_, err := os.Stat(filepath.Join(dir, job))
		require.ErrorIs(t, err, os.ErrNotExist, "%s's view is removed", job)
	}
}

// TestStoreRefusesAnEscapingLayer: an image whose layer climbs out of
// the root filesystem is a configuration failure, ErrUnsafeLayer, and
// writes nothing outside.
func TestStoreRefusesAnEscapingLayer(t *testing.T) {
	t.Parallel()
	reg := imagetest.NewRegistry(t, nil)
	evil, err := mutate.AppendLayers(empty.Image, imagetest.Layer(t, []imagetest.File{
		{Name: "etc", Dir: true},
		{Name: "../../escaped", Body: []byte("out")},
	}))
	require.NoError(t, err)
	reg.Push(t, "test/evil:1", evil)
	dir := t.TempDir()
	s, err := image.NewStore(image.Config{Dir: filepath.Join(dir, "images"), Insecure: []string{reg.Host}}, image.Limits{})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	_, err = s.Prepare(t.Context(), reg.Host+"/test/evil:1", image.PullOptions{}, filepath.Join(dir, "job"), image.ViewOptions{})
	require.ErrorIs(t, err, image.ErrUnsafeLayer)
	require.ErrorIs(t, err, image.ErrConfig)
	require.True(t, strings.Contains(err.Error(), "escaped"), err.Error())
	var found []string
	require.NoError(t, filepath.Walk(filepath.Dir(dir), func(path string, _ os.FileInfo, err error) error {
		if err == nil && filepath.Base(path) == "escaped" {
			found = append(found, path)
		}
		return nil
	}))
	require.Empty(t, found, "nothing escaped")
	_, err = os.Stat(filepath.Join(dir, "job"))
	require.True(t, errors.Is(err, os.ErrNotExist), "no view is made")
}

// TestStoreOwnsItsDirectory: a second Store over a directory in use is
// refused, saying so; once the first is closed, it opens.
func TestStoreOwnsItsDirectory(t *testing.T) {
	t.Parallel()
	cfg := image.Config{Dir: t.TempDir()}
	first, err := image.NewStore(cfg, image.Limits{})
	require.NoError(t, err)
	_, err = image.NewStore(cfg, image.Limits{})
	require.ErrorContains(t, err, "is in use by another Store")
	require.NoError(t, first.Close())
	again, err := image.NewStore(cfg, image.Limits{})
	require.NoError(t, err)
	require.NoError(t, again.Close())
}

// TestStoreGivesImagesToTheSandboxUser: with Limits.Owner, every file of
// the image and the view's own directories belong to that user, whatever
// the layers say, and a view made over the copy fallback too; the root
// filesystems of two owners are kept apart. A process that is not root
// cannot give files away.
func TestStoreGivesImagesToTheSandboxUser(t *testing.T) {
	t.Parallel()
	owner := &image.Owner{UID: 65534, GID: 65534}
	if os.Geteuid() != 0 {
		_, err := image.NewStore(image.Config{Dir: t.TempDir()}, image.Limits{Owner: owner})
		require.ErrorContains(t, err, "only root may change")
		return
	}
	reg := imagetest.NewRegistry(t, nil)
	reg.Push(t, "test/busybox:1", imagetest.BusyboxImage(t, "1"))
	ref := reg.Host + "/test/busybox:1"
	dir := t.TempDir()
	s, err := image.NewStore(image.Config{Dir: filepath.Join(dir, "images"), Insecure: []string{reg.Host}}, image.Limits{Owner: owner})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	for _, copy := range []bool{false, true} {
		p, err := s.Prepare(t.Context(), ref, image.PullOptions{}, filepath.Join(dir, fmt.Sprint("view-", copy)), image.ViewOptions{Copy: copy})
		require.NoError(t, err)
		checked := 0
		for _, d := range []string{filepath.Dir(p.View.Root()), p.View.Root()} {
			requireOwner(t, d, owner)
			checked++
		}
		require.NoError(t, filepath.WalkDir(p.View.Root(), func(path string, _ fs.DirEntry, err error) error {
			require.NoError(t, err)
			requireOwner(t, path, owner)
			checked++
			return nil
		}))
		require.Greater(t, checked, 10)
		// The image's root may write where it owns: a file made through
		// the view as the owner is the owner's.
		require.NoError(t, os.WriteFile(filepath.Join(p.View.Root(), "usr", "new"), nil, 0o644))
		require.NoError(t, p.Close())
	}
	entries, err := os.ReadDir(filepath.Join(dir, "images"))
	require.NoError(t, err)
	var trees []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "rootfs") {
			trees = append(trees, e.Name())
		}
	}
	require.Equal(t, []string{"rootfs-65534-65534"}, trees, "the owner names the tree directory")
}

func requireOwner(t *testing.T, path string, o *image.Owner) {
	t.Helper()
	info, err := os.Lstat(path)
	require.NoError(t, err)
	st := info.Sys().(*syscall.Stat_t)
	require.Equal(t, [2]int{o.UID, o.GID}, [2]int{int(st.Uid), int(st.Gid)}, "owner of %s", path)
}
