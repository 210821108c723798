package image_test

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/cikit/cikit/fleet/image"
)

// exampleLayer is a layer of the named files, each holding its name.
func exampleLayer(names ...string) v1.Layer {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: 0o644, Size: int64(len(n))}); err != nil {
			log.Fatal(err)
		}
		if _, err := tw.Write([]byte(n)); err != nil {
			log.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		log.Fatal(err)
	}
	return static.NewLayer(buf.Bytes(), types.OCIUncompressedLayer)
}

// A base layer and one over it that removes a file of the base with a
// whiteout, unpacked into a root filesystem, then a job's view of it.
func ExampleUnpack() {
	tmp, err := os.MkdirTemp("", "rootfs")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	root := filepath.Join(tmp, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		log.Fatal(err)
	}
	layers := []v1.Layer{exampleLayer("etc/os-release", "etc/motd"), exampleLayer("etc/.wh.motd")}
	st, err := image.Unpack(context.Background(), layers, root, image.Limits{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d layers, %d files, %d whiteouts\n", st.Layers, st.Files, st.Whiteouts)

	view, err := image.NewView(context.Background(), root, filepath.Join(tmp, "job"), image.ViewOptions{Copy: true})
	if err != nil {
		log.Fatal(err)
	}
	defer view.Close()
	entries, err := os.ReadDir(filepath.Join(view.Root(), "etc"))
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range entries {
		fmt.Println(e.Name())
	}
	// Output:
	// 2 layers, 2 files, 1 whiteouts
	// os-release
}
