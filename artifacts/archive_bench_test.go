package artifacts_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/cikit/cikit/artifacts"
)

// smallFilesTree writes 10,000 files of 1 KiB in 100 directories under a
// new directory and returns it.
func smallFilesTree(b *testing.B) string {
	b.Helper()
	root := b.TempDir()
	rng := rand.New(rand.NewChaCha8([32]byte{1}))
	content := make([]byte, 1024)
	for d := range 100 {
		dir := filepath.Join(root, "node_modules", fmt.Sprintf("pkg%03d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range 100 {
			for i := range content {
				content[i] = byte('a' + rng.IntN(26))
			}
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("file%03d.js", f)), content, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	return root
}

// largeFileTree writes one file of 64 MiB of incompressible bytes.
func largeFileTree(b *testing.B) (root string, size int64) {
	b.Helper()
	root = b.TempDir()
	const n = 64 << 20
	data := make([]byte, n)
	rng := rand.New(rand.NewChaCha8([32]byte{2}))
	for i := 0; i < n; i += 8 {
		v := rng.Uint64()
		for j := range 8 {
			data[i+j] = byte(v >> (8 * j))
		}
	}
	if err := os.WriteFile(filepath.Join(root, "large.bin"), data, 0o644); err != nil {
		b.Fatal(err)
	}
	return root, n
}

func BenchmarkPack(b *testing.B) {
	root := smallFilesTree(b)
	opts := artifacts.PackOptions{Root: root, Paths: []string{"node_modules"}}
	b.SetBytes(10_000 * 1024)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := artifacts.Pack(context.Background(), io.Discard, opts); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(10_000*b.N)/b.Elapsed().Seconds(), "files/s")
}

func BenchmarkPackLarge(b *testing.B) {
	root, size := largeFileTree(b)
	opts := artifacts.PackOptions{Root: root, Paths: []string{"large.bin"}}
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := artifacts.Pack(context.Background(), io.Discard, opts); err != nil {
			b.Fatal(err)
		}
	}
}

// benchUnpack extracts archive b.N times, each into a fresh directory
// removed outside the timed part.
func benchUnpack(b *testing.B, archive []byte) {
	b.Helper()
	base := b.TempDir()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		dst := filepath.Join(base, fmt.Sprint(i))
		b.StopTimer()
		if err := os.Mkdir(dst, 0o755); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := artifacts.Unpack(context.Background(), bytes.NewReader(archive), dst, artifacts.UnpackOptions{}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := os.RemoveAll(dst); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

func BenchmarkUnpackSmallFiles(b *testing.B) {
	root := smallFilesTree(b)
	archive, _ := pack(b, root, artifacts.PackOptions{Paths: []string{"node_modules"}})
	b.SetBytes(10_000 * 1024)
	benchUnpack(b, archive)
	b.ReportMetric(float64(10_000*b.N)/b.Elapsed().Seconds(), "files/s")
}

func BenchmarkUnpackLarge(b *testing.B) {
	root, size := largeFileTree(b)
	archive, _ := pack(b, root, artifacts.PackOptions{Paths: []string{"large.bin"}})
	b.SetBytes(size)
	benchUnpack(b, archive)
}
