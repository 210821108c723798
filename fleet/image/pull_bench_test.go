package image_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/crane"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/fleet/image"
	"github.com/cikit/cikit/internal/imagetest"
)

// benchBuilt is the image of the pull benchmarks, built by the first of
// them to run and shared by the others of the process.
var benchBuilt struct {
	once sync.Once
	img  v1.Image
	size int64 // the compressed bytes of its layers
}

// benchImage pushes the benchmarks' image to a registry of its own and
// returns its reference and the compressed size of its layers. The image
// is Debian's busybox and four layers of 20 MiB over it, each half
// random bytes in files of 256 KiB and half text in files of 32 KiB:
// about 43 MB compressed, 85 MB unpacked.
func benchImage(b *testing.B) (string, int64) {
	b.Helper()
	benchBuilt.once.Do(func() {
		img := imagetest.BusyboxImage(b, "bench")
		rng := rand.New(rand.NewChaCha8([32]byte{2}))
		line := []byte("func main() { fmt.Println(\"hello, world\") }\n")
		text := bytes.Repeat(line, (32<<10)/len(line)+1)[:32<<10]
		for l := range 4 {
			d := fmt.Sprintf("usr/lib/pkg%d", l)
			files := []imagetest.File{{Name: d, Dir: true}}
			for i := range 40 {
				body := make([]byte, 256<<10)
				for j := range body {
					body[j] = byte(rng.Uint32())
				}
				files = append(files, imagetest.File{Name: fmt.Sprintf("%s/lib%d.so", d, i), Body: body})
			}
			for i := range 320 {
				files = append(files, imagetest.File{Name: fmt.Sprintf("%s/src%d.go", d, i), Body: text})
			}
			var err error
			img, err = mutate.AppendLayers(img, imagetest.Layer(b, files))
			require.NoError(b, err)
		}
		m, err := img.Manifest()
		require.NoError(b, err)
		var size int64
		for _, l := range m.Layers {
			size += l.Size
		}
		benchBuilt.img, benchBuilt.size = img, size
	})
	if benchBuilt.img == nil {
		b.Fatal("the benchmark image was not built: see the failure of the first benchmark to run")
	}
	reg := imagetest.NewRegistry(b, nil)
	return reg.Push(b, "bench/image:1", benchBuilt.img).String(), benchBuilt.size
}

// BenchmarkPrepareCold measures what a job on an image new to the
// runner waits for: a new Store in an empty directory pulling the
// image, unpacking its root filesystem and making the job's view of it,
// in bytes of compressed layers per second. Closing the view and the
// Store is not timed. Compare with BenchmarkCranePull in the same run.
func BenchmarkPrepareCold(b *testing.B) {
	ref, size := benchImage(b)
	ctx := context.Background()
	tmp := b.TempDir()
	b.SetBytes(size)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		dir := filepath.Join(tmp, fmt.Sprint(i))
		i++
		s, err := image.NewStore(image.Config{Dir: filepath.Join(dir, "images")}, image.Limits{})
		require.NoError(b, err)
		p, err := s.Prepare(ctx, ref, image.PullOptions{}, filepath.Join(dir, "job"), image.ViewOptions{})
		require.NoError(b, err)
		b.StopTimer()
		require.NoError(b, p.Close())
		require.NoError(b, s.Close())
		require.NoError(b, os.RemoveAll(dir))
		b.StartTimer()
	}
}

// BenchmarkCranePull is the baseline of BenchmarkPrepareCold: what
// `crane pull` does with the same image from the same kind of registry,
// crane.Pull and crane.Save of the image to a tarball in a new
// directory, its compressed layers copied as they are.
func BenchmarkCranePull(b *testing.B) {
	ref, size := benchImage(b)
	tmp := b.TempDir()
	b.SetBytes(size)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		dir := filepath.Join(tmp, fmt.Sprint(i))
		i++
		require.NoError(b, os.Mkdir(dir, 0o755))
		img, err := crane.Pull(ref)
		require.NoError(b, err)
		require.NoError(b, crane.Save(img, ref, filepath.Join(dir, "image.tar")))
		b.StopTimer()
		require.NoError(b, os.RemoveAll(dir))
		b.StartTimer()
	}
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
