package image_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/cikit/cikit/fleet/image"
)

// A job's image is pulled once into the runner's cache; the job holds
// it while it runs, and a second job with pull policy if-not-present
// starts from the cache without asking the registry.
func ExamplePuller_Pull() {
	// An in-process registry holding an image of two layers.
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	img, _ := random.Image(1024, 2)
	img, _ = mutate.Config(img, v1.Config{Env: []string{"PATH=/usr/bin"}, WorkingDir: "/build"})
	ref := strings.TrimPrefix(srv.URL, "http://") + "/tools/build:1.0"
	tag, _ := name.ParseReference(ref)
	if err := remote.Write(tag, img); err != nil {
		log.Fatal(err)
	}

	dir, _ := os.MkdirTemp("", "images")
	defer os.RemoveAll(dir)
	p, err := image.New(image.Config{Dir: dir, Platform: v1.Platform{OS: "linux", Architecture: "amd64"}})
	if err != nil {
		log.Fatal(err)
	}

	pulled, err := p.Pull(context.Background(), ref, image.PullOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer pulled.Release()
	want, _ := img.Digest()
	fmt.Println("digest matches:", pulled.Digest == want)
	fmt.Println("layers:", len(pulled.Layers))
	fmt.Println("working dir:", pulled.Config.WorkingDir)

	// The registry goes away; the cache still has the image.
	srv.Close()
	again, err := p.Pull(context.Background(), ref, image.PullOptions{Policy: image.PullIfNotPresent})
	if err != nil {
		log.Fatal(err)
	}
	defer again.Release()
	fmt.Println("from the cache:", again.Digest == pulled.Digest)
	// Output:
	// digest matches: true
	// layers: 2
	// working dir: /build
	// from the cache: true
}
