package image_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/fleet/image"
	"github.com/cikit/cikit/internal/imagetest"
)

// countedLayer counts how often its content is read.
type countedLayer struct {
	v1.Layer
	opens *atomic.Int32
}

func (l countedLayer) Uncompressed() (io.ReadCloser, error) {
	l.opens.Add(1)
	return l.Layer.Uncompressed()
}

func hashOf(t *testing.T, s string) v1.Hash {
	t.Helper()
	h, _, err := v1.SHA256(strings.NewReader(s))
	require.NoError(t, err)
	return h
}

func TestRootfsUnpacksOncePerDigest(t *testing.T) {
	t.Parallel()
	rf, err := image.NewRootfs(image.RootfsConfig{Dir: t.TempDir()})
	require.NoError(t, err)
	var opens atomic.Int32
	layers := []v1.Layer{countedLayer{imagetest.Layer(t, []imagetest.File{file("etc/os-release", "ID=one\n")}), &opens}}
	digest := hashOf(t, "image one")

	const callers = 8
	paths := make([]string, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			p, err := rf.Unpack(t.Context(), digest, layers)
			require.NoError(t, err)
			paths[i] = p
		})
	}
	wg.Wait()
	require.Equal(t, int32(1), opens.Load(), "the layer was unpacked more than once")
	want, err := rf.Path(digest)
	require.NoError(t, err)
	require.Equal(t, filepath.Base(want), digest.Hex)
	for _, p := range paths {
		require.Equal(t, want, p)
	}
	require.Equal(t, "ID=one\n", readFile(t, filepath.Join(want, "etc/os-release")))
	info, err := os.Stat(want)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o755), info.Mode().Perm())

	// Once there, it is not unpacked again.
	_, err = rf.Unpack(t.Context(), digest, layers)
	require.NoError(t, err)
	require.Equal(t, int32(1), opens.Load())

	require.NoError(t, rf.Remove(digest))
	requireMissing(t, want)
	require.NoError(t, rf.Remove(digest), "removing a missing root filesystem")
	entries, err := os.ReadDir(filepath.Dir(want))
	require.NoError(t, err)
	require.Empty(t, entries)
}

func TestRootfsLeavesNoHalfTree(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rf, err := image.NewRootfs(image.RootfsConfig{Dir: dir})
	require.NoError(t, err)
	digest := hashOf(t, "bad image")
	layers := []v1.Layer{imagetest.Layer(t, []imagetest.File{file("ok", "x"), file("../escape", "x")})}
	_, err = rf.Unpack(t.Context(), digest, layers)
	require.ErrorIs(t, err, image.ErrUnsafeLayer)
	entries, err := os.ReadDir(filepath.Join(dir, "rootfs"))
	require.NoError(t, err)
	require.Empty(t, entries, "a failed unpack left a tree")

	// A tree a crashed process left mid-unpack is removed, and is never
	// taken for the image.
	good := []v1.Layer{imagetest.Layer(t, []imagetest.File{file("ok", "whole")})}
	leftover := filepath.Join(dir, "rootfs", ".tmp-"+digest.Hex+"-123")
	require.NoError(t, os.MkdirAll(filepath.Join(leftover, "half"), 0o555))
	rf, err = image.NewRootfs(image.RootfsConfig{Dir: dir})
	require.NoError(t, err)
	requireMissing(t, leftover)
	p, err := rf.Unpack(t.Context(), digest, good)
	require.NoError(t, err)
	require.Equal(t, "whole", readFile(t, filepath.Join(p, "ok")))
	requireMissing(t, filepath.Join(p, "half"))
}

func TestRootfsWaiterUnpacksWhenTheFirstCallerGivesUp(t *testing.T) {
	t.Parallel()
	rf, err := image.NewRootfs(image.RootfsConfig{Dir: t.TempDir()})
	require.NoError(t, err)
	digest := hashOf(t, "slow image")
	started, release := make(chan struct{}), make(chan struct{})
	ctx, cancel := context.WithCancel(t.Context())
	blocking := []v1.Layer{blockingLayer{imagetest.Layer(t, []imagetest.File{file("a", "x")}), started, release}}
	first := make(chan error, 1)
	go func() {
		_, err := rf.Unpack(ctx, digest, blocking)
		first <- err
	}()
	<-started
	second := make(chan error, 1)
	var opens atomic.Int32
	go func() {
		_, err := rf.Unpack(t.Context(), digest, []v1.Layer{countedLayer{imagetest.Layer(t, []imagetest.File{file("a", "x")}), &opens}})
		second <- err
	}()
	cancel()
	close(release)
	require.ErrorIs(t, <-first, context.Canceled)
	require.NoError(t, <-second)
	// The second caller either joined the first unpack and then made its
	// own, or came after the first ended: it read its layer once.
	require.Equal(t, int32(1), opens.Load())
}

// blockingLayer signals started when its content is opened and yields
// none of it before release is closed.
type blockingLayer struct {
	v1.Layer
	started, release chan struct{}
}

func (l blockingLayer) Uncompressed() (io.ReadCloser, error) {
	close(l.started)
	<-l.release
	return l.Layer.Uncompressed()
}

func TestRootfsRefusesABadDigest(t *testing.T) {
	t.Parallel()
	rf, err := image.NewRootfs(image.RootfsConfig{Dir: t.TempDir()})
	require.NoError(t, err)
	_, err = rf.Unpack(t.Context(), v1.Hash{Algorithm: "sha256", Hex: "../../../../etc"}, nil)
	require.ErrorIs(t, err, image.ErrConfig)
}
