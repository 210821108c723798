package image_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/fleet/image"
)

// clock is a test clock that moves a second each time it is read, so
// that every use of a blob is later than the one before.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(time.Second)
	return c.now
}

// blobBytes is what an image takes in the cache: its manifest, config
// and layers.
func blobBytes(t *testing.T, img v1.Image) int64 {
	t.Helper()
	raw, err := img.RawManifest()
	require.NoError(t, err)
	m, err := img.Manifest()
	require.NoError(t, err)
	n := int64(len(raw)) + m.Config.Size
	for _, l := range m.Layers {
		n += l.Size
	}
	return n
}

// cached reports whether the cache holds every layer of pulled.
func cached(dir string, pulled *image.Pulled) bool {
	for _, l := range pulled.Layers {
		if !fileExists(filepath.Join(dir, "blobs", "sha256", l.Digest.Hex)) {
			return false
		}
	}
	return true
}

func TestEvictionLeastRecentlyUsedFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tr := newRegistry(t)
	imgs := map[string]v1.Image{}
	refs := map[string]string{}
	for _, n := range []string{"a", "b", "c"} {
		imgs[n] = randomImage(t, 8192, 2)
		refs[n] = tr.push(t, "lru/"+n+":1", imgs[n])
	}
	a, b, c := blobBytes(t, imgs["a"]), blobBytes(t, imgs["b"]), blobBytes(t, imgs["c"])
	// Room for two of the images and half of a third.
	budget := max(a, b) + c + min(a, b)/2
	dir := t.TempDir()
	p := newPuller(t, image.Config{Dir: dir, Budget: budget, Now: (&clock{now: time.Unix(1e9, 0)}).Now})

	pull := func(n string, policy image.PullPolicy) (*image.Pulled, error) {
		return p.Pull(ctx, refs[n], image.PullOptions{Policy: policy})
	}
	pa, err := pull("a", "")
	require.NoError(t, err)
	pa.Release()
	pb, err := pull("b", "")
	require.NoError(t, err)
	pb.Release()
	// a is used again, so b is now the least recently used.
	pa, err = pull("a", image.PullIfNotPresent)
	require.NoError(t, err)
	pa.Release()
	require.Equal(t, a+b, p.Usage())

	pc, err := pull("c", "")
	require.NoError(t, err)
	require.True(t, cached(dir, pa))
	require.False(t, cached(dir, pb))
	require.True(t, cached(dir, pc))
	require.LessOrEqual(t, p.Usage(), budget)
	// b's manifest, its oldest blob, went first, and its record with it.
	records, err := os.ReadFile(filepath.Join(dir, "refs.json"))
	require.NoError(t, err)
	require.Contains(t, string(records), "lru/a:1")
	require.NotContains(t, string(records), "lru/b:1")

	// With a and c in use, b cannot fit.
	pa, err = pull("a", image.PullNever)
	require.NoError(t, err)
	_, err = pull("b", "")
	require.ErrorIs(t, err, image.ErrBudget)
	require.True(t, cached(dir, pa))
	require.True(t, cached(dir, pc))

	// Once a job releases a, b evicts it.
	pa.Release()
	pa.Release()
	pb, err = pull("b", "")
	require.NoError(t, err)
	defer pb.Release()
	require.False(t, cached(dir, pa))
	require.True(t, cached(dir, pc))
	pc.Release()

	require.LessOrEqual(t, p.Usage(), budget)

	// A restarted cache knows its blobs from the files.
	restarted := newPuller(t, image.Config{Dir: dir, Budget: budget})
	require.Equal(t, p.Usage(), restarted.Usage())
}

func TestImageOverBudgetIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tr := newRegistry(t)
	img := randomImage(t, 8192, 1)
	ref := tr.push(t, "huge:1", img)
	p := newPuller(t, image.Config{Budget: blobBytes(t, img) - 1})
	_, err := p.Pull(ctx, ref, image.PullOptions{})
	require.ErrorIs(t, err, image.ErrBudget)
	require.Zero(t, tr.count("/blobs/"))
	require.Zero(t, p.Usage())
}

func TestSharedDownloadSurvivesItsStartersCancellation(t *testing.T) {
	t.Parallel()
	tr := newRegistry(t)
	img := randomImage(t, 4096, 1)
	ref := tr.push(t, "shared:1", img)
	layers, err := img.Layers()
	require.NoError(t, err)
	layer, err := layers[0].Digest()
	require.NoError(t, err)

	// The first request for the layer hangs until its client goes away;
	// the second pull is let go once it has resolved the manifest.
	var mu sync.Mutex
	layerRequests, manifests := 0, 0
	firstIn, secondResolved := make(chan struct{}), make(chan struct{})
	tr.setIntercept(func(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, bool) {
		mu.Lock()
		switch {
		case r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/manifests/"):
			if manifests++; manifests == 2 {
				close(secondResolved)
			}
		case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/blobs/"+layer.String()):
			if layerRequests++; layerRequests == 1 {
				mu.Unlock()
				close(firstIn)
				<-r.Context().Done()
				return w, true
			}
		}
		mu.Unlock()
		return w, false
	})

	p := newPuller(t, image.Config{})
	ctxA, cancelA := context.WithCancel(context.Background())
	errA := make(chan error, 1)
	go func() {
		_, err := p.Pull(ctxA, ref, image.PullOptions{})
		errA <- err
	}()
	<-firstIn
	type result struct {
		pulled *image.Pulled
		err    error
	}
	resB := make(chan result, 1)
	go func() {
		pulled, err := p.Pull(context.Background(), ref, image.PullOptions{})
		resB <- result{pulled, err}
	}()
	<-secondResolved
	cancelA()
	require.ErrorIs(t, <-errA, context.Canceled)
	b := <-resB
	require.NoError(t, b.err)
	defer b.pulled.Release()
	require.Equal(t, digestOf(t, img), b.pulled.Digest)
	require.Equal(t, 2, tr.count("GET", "/blobs/"+layer.String()))
}
