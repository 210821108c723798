package image_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/fleet/image"
)

// benchImage pushes an image of four 4 MiB layers and returns its
// reference and compressed size.
func benchImage(b *testing.B) (string, int64) {
	b.Helper()
	tr := newRegistry(b)
	img := randomImage(b, 4<<20, 4)
	ref := tr.push(b, "bench/image:1", img)
	m, err := img.Manifest()
	require.NoError(b, err)
	var size int64
	for _, l := range m.Layers {
		size += l.Size
	}
	return ref, size
}

// BenchmarkPullCold measures a pull into an empty cache, in bytes of
// layers per second; compare with BenchmarkPullPlain in the same run.
func BenchmarkPullCold(b *testing.B) {
	ref, size := benchImage(b)
	ctx := context.Background()
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		dir := b.TempDir()
		p, err := image.New(image.Config{Dir: dir})
		require.NoError(b, err)
		b.StartTimer()
		pulled, err := p.Pull(ctx, ref, image.PullOptions{})
		require.NoError(b, err)
		pulled.Release()
	}
}

// BenchmarkPullPlain is the baseline of BenchmarkPullCold: what a
// plain client does to copy an image's layers to disk from the same
// registry, without a cache's bookkeeping.
func BenchmarkPullPlain(b *testing.B) {
	ref, size := benchImage(b)
	r, err := name.ParseReference(ref)
	require.NoError(b, err)
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		dir := b.TempDir()
		b.StartTimer()
		img, err := remote.Image(r)
		require.NoError(b, err)
		layers, err := img.Layers()
		require.NoError(b, err)
		for i, l := range layers {
			rc, err := l.Compressed()
			require.NoError(b, err)
			f, err := os.Create(filepath.Join(dir, fmt.Sprint("layer", i)))
			require.NoError(b, err)
			_, err = io.Copy(f, rc)
			require.NoError(b, err)
			require.NoError(b, f.Close())
			require.NoError(b, rc.Close())
		}
	}
}

// BenchmarkPullCached measures a pull with policy if-not-present of an
// image the cache holds: the start of a job on a cached image.
func BenchmarkPullCached(b *testing.B) {
	ref, _ := benchImage(b)
	ctx := context.Background()
	p, err := image.New(image.Config{Dir: b.TempDir()})
	require.NoError(b, err)
	first, err := p.Pull(ctx, ref, image.PullOptions{})
	require.NoError(b, err)
	first.Release()
	b.ReportAllocs()
	for b.Loop() {
		pulled, err := p.Pull(ctx, ref, image.PullOptions{Policy: image.PullIfNotPresent})
		require.NoError(b, err)
		pulled.Release()
	}
}
