package artifacts_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/klauspost/compress/zstd"

	"github.com/cikit/cikit/artifacts"
)

// A job archives its build output, leaving the logs out, and another
// job extracts it into its own workspace. The archive's SHA-256 is what
// a cache compares to tell whether the paths changed.
func ExamplePack() {
	workspace, err := os.MkdirTemp("", "workspace")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(workspace)
	for name, content := range map[string]string{
		"dist/app.js":      "console.log('hi')\n",
		"dist/debug.log":   "noise\n",
		"bin/app":          "#!/bin/sh\n",
		"src/main.go":      "package main\n",
		"dist/css/app.css": "body{}\n",
	} {
		p := filepath.Join(workspace, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			panic(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			panic(err)
		}
	}

	ctx := context.Background()
	var archive bytes.Buffer
	stats, err := artifacts.Pack(ctx, &archive, artifacts.PackOptions{
		Root:    workspace,
		Paths:   []string{"dist/", "bin/app"},
		Exclude: []string{"**/*.log"},
	})
	if err != nil {
		panic(err)
	}
	fmt.Printf("packed %d files, %d directories, %d bytes\n", stats.Files, stats.Dirs, stats.Bytes)
	digest := sha256.Sum256(archive.Bytes())

	other, err := os.MkdirTemp("", "other")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(other)
	if _, err := artifacts.Unpack(ctx, bytes.NewReader(archive.Bytes()), other, artifacts.UnpackOptions{}); err != nil {
		panic(err)
	}
	b, err := os.ReadFile(filepath.Join(other, "dist/app.js"))
	if err != nil {
		panic(err)
	}
	fmt.Print("extracted dist/app.js: ", string(b))

	var again bytes.Buffer
	if _, err := artifacts.Pack(ctx, &again, artifacts.PackOptions{Root: workspace, Paths: []string{"dist/", "bin/app"}, Exclude: []string{"**/*.log"}}); err != nil {
		panic(err)
	}
	fmt.Println("unchanged:", sha256.Sum256(again.Bytes()) == digest)

	// An archive from a stranger cannot write outside the workspace.
	_, err = artifacts.Unpack(ctx, bytes.NewReader(hostileArchive()), other, artifacts.UnpackOptions{})
	fmt.Println("refused:", errors.Is(err, artifacts.ErrUnsafeArchive))
	// Output:
	// packed 3 files, 2 directories, 35 bytes
	// extracted dist/app.js: console.log('hi')
	// unchanged: true
	// refused: true
}

// hostileArchive is an archive with an entry named "../escape".
func hostileArchive() []byte {
	var tarball bytes.Buffer
	tw := tar.NewWriter(&tarball)
	body := []byte("x")
	if err := tw.WriteHeader(&tar.Header{Name: "../escape", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}); err != nil {
		panic(err)
	}
	if _, err := tw.Write(body); err != nil {
		panic(err)
	}
	if err := tw.Close(); err != nil {
		panic(err)
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		panic(err)
	}
	defer enc.Close()
	return enc.EncodeAll(tarball.Bytes(), nil)
}
