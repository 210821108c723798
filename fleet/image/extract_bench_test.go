package image_test

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/fleet/image"
	"github.com/cikit/cikit/internal/imagetest"
)

// benchLayer is a gzip layer of about 50 MB uncompressed: 200 files of
// 256 KiB in 10 directories, half random bytes, half text-like.
func benchLayer(b *testing.B) (v1.Layer, int64) {
	b.Helper()
	rng := rand.New(rand.NewChaCha8([32]byte{1}))
	var files []imagetest.File
	var size int64
	for d := range 10 {
		files = append(files, dir(fmt.Sprintf("usr/lib/d%d/", d)))
		for i := range 20 {
			body := make([]byte, 256<<10)
			if i%2 == 0 {
				for j := range body {
					body[j] = byte(rng.Uint32())
				}
			} else {
				copy(body, bytes.Repeat([]byte("func main() { fmt.Println(\"hello\") }\n"), len(body)/38+1))
			}
			files = append(files, imagetest.File{Name: fmt.Sprintf("usr/lib/d%d/f%d", d, i), Body: body})
			size += int64(len(body))
		}
	}
	return imagetest.Layer(b, files), size
}

// BenchmarkUnpack compares Unpack of a 50 MB layer with the plain way
// of reading it: go-containerregistry's mutate.Extract of the image,
// copied to a file. The ratio sub-benchmark times both in each
// iteration and reports unpack's speed over the baseline's.
func BenchmarkUnpack(b *testing.B) {
	l, size := benchLayer(b)
	img, err := mutate.AppendLayers(empty.Image, l)
	require.NoError(b, err)
	tmp := b.TempDir()
	// Each returns how long its work took, without the clean-up after.
	unpack := func(b *testing.B, i int) time.Duration {
		dir := filepath.Join(tmp, fmt.Sprint("u", i))
		require.NoError(b, os.Mkdir(dir, 0o755))
		start := time.Now()
		_, err := image.Unpack(b.Context(), []v1.Layer{l}, dir, image.Limits{})
		took := time.Since(start)
		require.NoError(b, err)
		b.StopTimer()
		require.NoError(b, os.RemoveAll(dir))
		b.StartTimer()
		return took
	}
	extract := func(b *testing.B, i int) time.Duration {
		name := filepath.Join(tmp, fmt.Sprint("e", i))
		start := time.Now()
		f, err := os.Create(name)
		require.NoError(b, err)
		rc := mutate.Extract(img)
		_, err = io.Copy(f, rc)
		require.NoError(b, err)
		require.NoError(b, rc.Close())
		require.NoError(b, f.Close())
		took := time.Since(start)
		b.StopTimer()
		require.NoError(b, os.Remove(name))
		b.StartTimer()
		return took
	}
	b.Run("unpack", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			unpack(b, i)
		}
	})
	b.Run("extract-copy", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			extract(b, i)
		}
	})
	b.Run("ratio", func(b *testing.B) {
		var u, e time.Duration
		for i := 0; i < b.N; i++ {
			u += unpack(b, i)
			e += extract(b, i)
		}
		mb := float64(size) * float64(b.N) / 1e6
		b.ReportMetric(mb/u.Seconds(), "unpack-MB/s")
		b.ReportMetric(mb/e.Seconds(), "extract-MB/s")
		b.ReportMetric(e.Seconds()/u.Seconds(), "unpack/extract-speed")
	})
}

// BenchmarkView measures what a job's view costs up front: an overlay
// mount, or the copy of a 50 MB root filesystem.
func BenchmarkView(b *testing.B) {
	l, size := benchLayer(b)
	rf, err := image.NewRootfs(image.RootfsConfig{Dir: b.TempDir()})
	require.NoError(b, err)
	h, err := l.Digest()
	require.NoError(b, err)
	rootfs, err := rf.Unpack(b.Context(), h, []v1.Layer{l})
	require.NoError(b, err)
	for _, tt := range []struct {
		name string
		opts image.ViewOptions
	}{{"overlay", image.ViewOptions{}}, {"copy", image.ViewOptions{Copy: true}}} {
		b.Run(tt.name, func(b *testing.B) {
			if tt.opts.Copy {
				b.SetBytes(size)
			}
			tmp := b.TempDir()
			for i := 0; i < b.N; i++ {
				v, err := image.NewView(b.Context(), rootfs, filepath.Join(tmp, fmt.Sprint(i)), tt.opts)
				require.NoError(b, err)
				if !tt.opts.Copy && !v.Overlay() {
					b.Fatalf("no overlay: %v", v.Fallback())
				}
				require.NoError(b, v.Close())
			}
		})
	}
}
