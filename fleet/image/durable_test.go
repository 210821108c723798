package image_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/fleet/image"
	"github.com/cikit/cikit/internal/imagetest"
)

// earlierBoot is the boot ID of a boot before this one, which a crash
// ended.
const earlierBoot = "00000000-0000-4000-8000-000000000000"

func currentBoot(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	require.NoError(t, err)
	id := string(bytes.TrimSpace(b))
	require.NotEqual(t, earlierBoot, id)
	return id
}

// unsyncedDir is where the Store in dir marks what kind ("blobs",
// "rootfs") it wrote unsynced in boot.
func unsyncedDir(dir, kind, boot string) string {
	return filepath.Join(dir, "unsynced", kind, boot)
}

func marks(t *testing.T, dir, kind, boot string) []string {
	t.Helper()
	entries, err := os.ReadDir(unsyncedDir(dir, kind, boot))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func mark(t *testing.T, dir, kind, boot, name string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(unsyncedDir(dir, kind, boot), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(unsyncedDir(dir, kind, boot), name), nil, 0o644))
}

// twoImages pushes busybox and busybox with a layer more, and returns
// their references and the images.
func twoImages(t *testing.T) (base, top string, baseImg, topImg v1.Image) {
	t.Helper()
	reg := imagetest.NewRegistry(t, nil)
	baseImg = imagetest.BusyboxImage(t, "durable")
	topImg, err := mutate.AppendLayers(baseImg, imagetest.Layer(t, []imagetest.File{
		{Name: "etc", Dir: true},
		{Name: "etc/top", Body: []byte("the top layer\n")},
	}))
	require.NoError(t, err)
	return reg.Push(t, "test/base:1", baseImg).String(), reg.Push(t, "test/top:1", topImg).String(), baseImg, topImg
}

// prepareAll prepares each of refs in s and closes the views.
func prepareAll(t *testing.T, s *image.Store, dir string, refs ...string) {
	t.Helper()
	for i, ref := range refs {
		p, err := s.Prepare(t.Context(), ref, image.PullOptions{}, filepath.Join(dir, "job"+string(rune('a'+i))), image.ViewOptions{})
		require.NoError(t, err)
		require.NoError(t, p.Close())
	}
}

func manifestOf(t *testing.T, img v1.Image) (v1.Hash, *v1.Manifest) {
	t.Helper()
	d, err := img.Digest()
	require.NoError(t, err)
	m, err := img.Manifest()
	require.NoError(t, err)
	return d, m
}

// TestStoreSyncsInTheBackground: the blobs and trees of a Prepare are
// marked unsynced until the background sync, which Close waits for:
// after it no mark is left, and what was written is in place.
func TestStoreSyncsInTheBackground(t *testing.T) {
	t.Parallel()
	base, top, _, topImg := twoImages(t)
	dir := t.TempDir()
	images := filepath.Join(dir, "images")
	s, err := image.NewStore(image.Config{Dir: images}, image.Limits{})
	require.NoError(t, err)
	prepareAll(t, s, dir, base, top)
	require.NoError(t, s.Close())
	boot := currentBoot(t)
	require.Empty(t, marks(t, images, "blobs", boot))
	require.Empty(t, marks(t, images, "rootfs", boot))
	d, m := manifestOf(t, topImg)
	require.DirExists(t, filepath.Join(images, "rootfs", d.Hex))
	for _, l := range m.Layers {
		require.Equal(t, l.Digest.String(), fileDigest(t, filepath.Join(images, "blobs", "sha256", l.Digest.Hex)))
	}
}

// TestStoreChecksWhatACrashMayHaveLost: what an earlier boot wrote and
// never saw synced is checked when a Store opens: a blob that no longer
// matches its digest goes and one that does stays, a tree goes, to be
// unpacked again, and a refs.json a crash emptied is dropped. What was
// synced, with no mark, stays as it is.
func TestStoreChecksWhatACrashMayHaveLost(t *testing.T) {
	t.Parallel()
	base, top, baseImg, topImg := twoImages(t)
	dir := t.TempDir()
	images := filepath.Join(dir, "images")
	s, err := image.NewStore(image.Config{Dir: images}, image.Limits{})
	require.NoError(t, err)
	prepareAll(t, s, dir, base, top)
	require.NoError(t, s.Close())

	baseDigest, _ := manifestOf(t, baseImg)
	topDigest, topManifest := manifestOf(t, topImg)
	blob := func(h v1.Hash) string { return filepath.Join(images, "blobs", "sha256", h.Hex) }
	// The earlier boot wrote the top layer, which the crash emptied, the
	// top image's config, which it kept whole, the top image's tree and
	// refs.json, emptied too.
	lost := topManifest.Layers[len(topManifest.Layers)-1].Digest
	whole := topManifest.Config.Digest
	require.NoError(t, os.Truncate(blob(lost), 0))
	require.NoError(t, os.WriteFile(filepath.Join(images, "refs.json"), nil, 0o644))
	for _, n := range []string{lost.Hex, whole.Hex, "refs.json"} {
		mark(t, images, "blobs", earlierBoot, n)
	}
	mark(t, images, "rootfs", earlierBoot, topDigest.Hex)
	// The base image's tree was synced: it stays as it is.
	sentinel := filepath.Join(images, "rootfs", baseDigest.Hex, "synced")
	require.NoError(t, os.WriteFile(sentinel, nil, 0o644))

	s, err = image.NewStore(image.Config{Dir: images}, image.Limits{})
	require.NoError(t, err)
	require.NoFileExists(t, blob(lost), "a blob damaged by the crash is removed")
	require.Equal(t, whole.String(), fileDigest(t, blob(whole)), "a blob the crash left whole is kept")
	require.NoDirExists(t, filepath.Join(images, "rootfs", topDigest.Hex), "a tree unsynced at the crash is removed")
	require.FileExists(t, sentinel, "a synced tree is kept")
	require.NoDirExists(t, unsyncedDir(images, "blobs", earlierBoot))
	require.NoDirExists(t, unsyncedDir(images, "rootfs", earlierBoot))

	// The top image is pulled and unpacked again.
	p, err := s.Prepare(t.Context(), top, image.PullOptions{Policy: image.PullIfNotPresent}, filepath.Join(dir, "again"), image.ViewOptions{})
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(p.View.Root(), "etc", "top"))
	require.NoError(t, err)
	require.Equal(t, "the top layer\n", string(b))
	require.NoError(t, p.Close())
	require.NoError(t, s.Close())
	require.Equal(t, lost.String(), fileDigest(t, blob(lost)))

	// A damaged refs.json that was synced is not the crash's doing: the
	// Store says so rather than dropping it.
	require.NoError(t, os.WriteFile(filepath.Join(images, "refs.json"), []byte("{"), 0o644))
	_, err = image.NewStore(image.Config{Dir: images}, image.Limits{})
	require.ErrorContains(t, err, "refs.json is damaged")
}

// TestStoreKeepsWhatThisBootWroteUnsynced: what a previous process of
// this boot wrote and did not see synced is whole in the kernel's
// cache: a new Store keeps it and syncs it.
func TestStoreKeepsWhatThisBootWroteUnsynced(t *testing.T) {
	t.Parallel()
	base, _, baseImg, _ := twoImages(t)
	dir := t.TempDir()
	images := filepath.Join(dir, "images")
	s, err := image.NewStore(image.Config{Dir: images}, image.Limits{})
	require.NoError(t, err)
	prepareAll(t, s, dir, base)
	require.NoError(t, s.Close())

	boot := currentBoot(t)
	d, m := manifestOf(t, baseImg)
	layer := m.Layers[0].Digest
	mark(t, images, "blobs", boot, layer.Hex)
	mark(t, images, "rootfs", boot, d.Hex)
	sentinel := filepath.Join(images, "rootfs", d.Hex, "kept")
	require.NoError(t, os.WriteFile(sentinel, nil, 0o644))

	s, err = image.NewStore(image.Config{Dir: images}, image.Limits{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.FileExists(t, sentinel)
	require.Equal(t, layer.String(), fileDigest(t, filepath.Join(images, "blobs", "sha256", layer.Hex)))
	require.Empty(t, marks(t, images, "blobs", boot), "the new Store synced them")
	require.Empty(t, marks(t, images, "rootfs", boot))
}
