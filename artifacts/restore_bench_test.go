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
	"time"

	"github.com/cikit/cikit/artifacts"
)

// restoreFiles is the number of files of the cache restore benchmark.
const restoreFiles = 10_000

// nodeModulesTree writes a dependency tree like node_modules under a new
// directory and returns it: 200 packages of 50 files of 1–4 KiB of
// source-like text, in a package's root, lib/, lib/internal/ and dist/.
func nodeModulesTree(b *testing.B) string {
	b.Helper()
	root := b.TempDir()
	rng := rand.New(rand.NewChaCha8([32]byte{3}))
	words := []string{"function", "return", "const", "require", "module", "exports", "this", "value", "if", "else", "=>", "{", "}", "(", ")", ";", "\n", "undefined", "null", "prototype"}
	var content bytes.Buffer
	write := func(name string) {
		content.Reset()
		size := 1024 + rng.IntN(3*1024)
		for content.Len() < size {
			content.WriteString(words[rng.IntN(len(words))])
			content.WriteByte(' ')
		}
		if err := os.WriteFile(name, content.Bytes()[:size], 0o644); err != nil {
			b.Fatal(err)
		}
	}
	layout := []struct {
		dir   string
		files int
	}{{"", 3}, {"lib", 20}, {"lib/internal", 15}, {"dist", 12}}
	for p := range restoreFiles / 50 {
		pkg := filepath.Join(root, "node_modules", fmt.Sprintf("pkg-%03d", p))
		for _, l := range layout {
			dir := filepath.Join(pkg, l.dir)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
			for f := range l.files {
				write(filepath.Join(dir, fmt.Sprintf("file%02d.js", f)))
			}
		}
	}
	return root
}

// BenchmarkCacheRestore is a runner's restore of a cache of 10,000 small
// files, as fleet/process does it: a presigned GET from S3 through the
// Sender into a file, checked, then Unpack into a fresh directory.
func BenchmarkCacheRestore(b *testing.B) {
	archive, stats := pack(b, nodeModulesTree(b), artifacts.PackOptions{Paths: []string{"node_modules"}})
	if stats.Files != restoreFiles {
		b.Fatalf("the tree holds %d files, expected %d", stats.Files, restoreFiles)
	}
	sum := sha(archive)
	_, store, client := benchS3(b)
	if err := store.Put(b.Context(), "cache", bytes.NewReader(archive), int64(len(archive))); err != nil {
		b.Fatal(err)
	}
	sender := &artifacts.Sender{HTTP: client}
	base := b.TempDir()
	b.SetBytes(stats.Bytes)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		dst := filepath.Join(base, fmt.Sprint(i))
		b.StopTimer()
		if err := os.Mkdir(dst, 0o755); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		restore(b, sender, store, int64(len(archive)), sum, dst)
	}
	b.ReportMetric(float64(restoreFiles*b.N)/b.Elapsed().Seconds(), "files/s")
	b.ReportMetric(float64(len(archive)), "archive-bytes")
}

// restore is one restore of BenchmarkCacheRestore.
func restore(b *testing.B, sender *artifacts.Sender, store *artifacts.S3Store, size int64, sum, dst string) {
	b.Helper()
	get, err := store.PresignGet(context.Background(), "cache", time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	f, err := os.CreateTemp(b.TempDir(), "download-*")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := sender.Download(context.Background(), get, size, sum, f); err != nil {
		b.Fatal(err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		b.Fatal(err)
	}
	got, err := artifacts.Unpack(context.Background(), f, dst, artifacts.UnpackOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if got.Files != restoreFiles {
		b.Fatalf("Unpack extracted %d files, expected %d", got.Files, restoreFiles)
	}
}
