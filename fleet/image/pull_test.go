package image_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/fleet/image"
)

// testRegistry is an in-process OCI registry that counts the requests
// it serves and lets a test intercept them.
type testRegistry struct {
	*httptest.Server
	host string

	mu       sync.Mutex
	requests []string // "GET /v2/…"
	// intercept, if set, may answer a request itself (returning true)
	// or wrap the response writer before the registry answers.
	intercept func(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, bool)
}

func newRegistry(t testing.TB) *testRegistry {
	t.Helper()
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	tr := &testRegistry{}
	tr.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tr.mu.Lock()
		tr.requests = append(tr.requests, r.Method+" "+r.URL.Path)
		intercept := tr.intercept
		tr.mu.Unlock()
		if intercept != nil {
			var done bool
			if w, done = intercept(w, r); done {
				return
			}
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(tr.Close)
	tr.host = strings.TrimPrefix(tr.URL, "http://")
	return tr
}

func (tr *testRegistry) setIntercept(f func(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, bool)) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.intercept = f
}

// count returns how many requests had a method and path containing
// each of parts.
func (tr *testRegistry) count(parts ...string) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
next:
	for _, r := range tr.requests {
		for _, p := range parts {
			if !strings.Contains(r, p) {
				continue next
			}
		}
		n++
	}
	return n
}

func (tr *testRegistry) reset() {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.requests = nil
}

// push writes img to repo:tag and returns the reference.
func (tr *testRegistry) push(t testing.TB, repoTag string, img v1.Image, opts ...remote.Option) string {
	t.Helper()
	ref := tr.host + "/" + repoTag
	r, err := name.ParseReference(ref)
	require.NoError(t, err)
	require.NoError(t, remote.Write(r, img, opts...))
	tr.reset()
	return ref
}

func randomImage(t testing.TB, size, layers int64) v1.Image {
	t.Helper()
	img, err := random.Image(size, layers)
	require.NoError(t, err)
	return img
}

func newPuller(t *testing.T, cfg image.Config) *image.Puller {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	p, err := image.New(cfg)
	require.NoError(t, err)
	return p
}

func digestOf(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	d, err := img.Digest()
	require.NoError(t, err)
	return d
}

func fileDigest(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func TestPullResolvesTagAndStoresLayers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tr := newRegistry(t)
	img, err := mutate.Config(randomImage(t, 2048, 3), v1.Config{Env: []string{"A=1"}, WorkingDir: "/src", User: "1000"})
	require.NoError(t, err)
	ref := tr.push(t, "team/app:1.0", img)
	dir := t.TempDir()
	p := newPuller(t, image.Config{Dir: dir})

	pulled, err := p.Pull(ctx, ref, image.PullOptions{})
	require.NoError(t, err)
	defer pulled.Release()
	require.Equal(t, ref, pulled.Ref)
	require.Equal(t, digestOf(t, img), pulled.Digest)
	require.Equal(t, []string{"A=1"}, pulled.Config.Env)
	require.Equal(t, "/src", pulled.Config.WorkingDir)
	require.Equal(t, "1000", pulled.Config.User)

	layers, err := img.Layers()
	require.NoError(t, err)
	require.Len(t, pulled.Layers, len(layers))
	var size int64
	for i, l := range layers {
		d, err := l.Digest()
		require.NoError(t, err)
		diffID, err := l.DiffID()
		require.NoError(t, err)
		got := pulled.Layers[i]
		require.Equal(t, d, got.Digest)
		require.Equal(t, diffID, got.DiffID)
		require.Equal(t, filepath.Join(dir, "blobs", "sha256", d.Hex), got.Path)
		require.Equal(t, d.String(), fileDigest(t, got.Path))
		size += got.Size
	}
	require.Equal(t, size, pulled.Size)
	require.Equal(t, 3, tr.count("GET", "/blobs/sha256:")-1, "three layers and the config")

	// Always asks the registry again, but downloads no blob it holds.
	tr.reset()
	again, err := p.Pull(ctx, ref, image.PullOptions{Policy: image.PullAlways})
	require.NoError(t, err)
	defer again.Release()
	require.Equal(t, pulled.Digest, again.Digest)
	require.Equal(t, 1, tr.count("GET", "/manifests/1.0"))
	require.Zero(t, tr.count("/blobs/"))
}

func TestPullResolvesIndexToPlatform(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tr := newRegistry(t)
	amd, arm := randomImage(t, 512, 1), randomImage(t, 512, 1)
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}}},
	)
	r, err := name.ParseReference(tr.host + "/multi:latest")
	require.NoError(t, err)
	require.NoError(t, remote.WriteIndex(r, idx))
	ref := r.String()

	p := newPuller(t, image.Config{Platform: v1.Platform{OS: "linux", Architecture: "arm64"}})
	pulled, err := p.Pull(ctx, ref, image.PullOptions{})
	require.NoError(t, err)
	defer pulled.Release()
	require.Equal(t, digestOf(t, arm), pulled.Digest)

	idxDigest, err := idx.Digest()
	require.NoError(t, err)
	byDigest, err := p.Pull(ctx, tr.host+"/multi@"+idxDigest.String(), image.PullOptions{})
	require.NoError(t, err)
	defer byDigest.Release()
	require.Equal(t, digestOf(t, arm), byDigest.Digest)

	s390 := newPuller(t, image.Config{Platform: v1.Platform{OS: "linux", Architecture: "s390x"}})
	_, err = s390.Pull(ctx, ref, image.PullOptions{})
	require.ErrorIs(t, err, image.ErrConfig)
	require.ErrorContains(t, err, "no manifest for linux/s390x; it has linux/amd64, linux/arm64/v8")
}

func TestConcurrentPullsDownloadEachLayerOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tr := newRegistry(t)
	img := randomImage(t, 4096, 2)
	ref := tr.push(t, "base:1", img)
	const pulls = 4

	// Blobs are served only once every pull has resolved the manifest,
	// so that the pulls overlap while the layers download.
	var mu sync.Mutex
	resolved := 0
	allResolved := make(chan struct{})
	tr.setIntercept(func(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, bool) {
		switch {
		case r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/manifests/"):
			mu.Lock()
			if resolved++; resolved == pulls {
				close(allResolved)
			}
			mu.Unlock()
		case strings.Contains(r.URL.Path, "/blobs/"):
			<-allResolved
		}
		return w, false
	})

	p := newPuller(t, image.Config{})
	var wg sync.WaitGroup
	results := make([]*image.Pulled, pulls)
	errs := make([]error, pulls)
	for i := range pulls {
		wg.Go(func() { results[i], errs[i] = p.Pull(ctx, ref, image.PullOptions{}) })
	}
	wg.Wait()
	for i := range pulls {
		require.NoError(t, errs[i])
		require.Equal(t, digestOf(t, img), results[i].Digest)
		results[i].Release()
	}
	layers, err := img.Layers()
	require.NoError(t, err)
	for _, l := range layers {
		d, err := l.Digest()
		require.NoError(t, err)
		require.Equal(t, 1, tr.count("GET", "/blobs/"+d.String()), "layer %s", d)
	}
}

func TestPullPolicies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tr := newRegistry(t)
	img := randomImage(t, 1024, 1)
	ref := tr.push(t, "policy:v1", img)
	dir := t.TempDir()
	p := newPuller(t, image.Config{Dir: dir})

	_, err := p.Pull(ctx, ref, image.PullOptions{Policy: image.PullNever})
	require.ErrorIs(t, err, image.ErrConfig)
	require.ErrorContains(t, err, "not in the cache")
	require.Zero(t, tr.count("/v2/"))

	first, err := p.Pull(ctx, ref, image.PullOptions{Policy: image.PullIfNotPresent})
	require.NoError(t, err)
	first.Release()

	// The tag moves; if-not-present and never keep the image resolved
	// before without asking the registry, also after a restart.
	moved := tr.push(t, "policy:v1", randomImage(t, 1024, 1))
	require.Equal(t, ref, moved)
	restarted := newPuller(t, image.Config{Dir: dir})
	for _, policy := range []image.PullPolicy{image.PullIfNotPresent, image.PullNever} {
		got, err := restarted.Pull(ctx, ref, image.PullOptions{Policy: policy})
		require.NoError(t, err, policy)
		require.Equal(t, digestOf(t, img), got.Digest, policy)
		got.Release()
	}
	byDigest, err := restarted.Pull(ctx, tr.host+"/policy@"+digestOf(t, img).String(), image.PullOptions{Policy: image.PullNever})
	require.NoError(t, err)
	byDigest.Release()
	require.Equal(t, digestOf(t, img), byDigest.Digest)
	require.Zero(t, tr.count("/v2/"))

	always, err := restarted.Pull(ctx, ref, image.PullOptions{Policy: image.PullAlways})
	require.NoError(t, err)
	defer always.Release()
	require.NotEqual(t, digestOf(t, img), always.Digest)

	_, err = restarted.Pull(ctx, ref, image.PullOptions{Policy: "sometimes"})
	require.ErrorIs(t, err, image.ErrConfig)
}

func TestPullRefusesWrongDigest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tr := newRegistry(t)
	img := randomImage(t, 1024, 1)
	ref := tr.push(t, "tampered:1", img)
	layers, err := img.Layers()
	require.NoError(t, err)
	bad, err := layers[0].Digest()
	require.NoError(t, err)
	// The registry serves the layer with one byte changed, its length
	// kept.
	tr.setIntercept(func(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, bool) {
		if strings.HasSuffix(r.URL.Path, "/blobs/"+bad.String()) && r.Method == http.MethodGet {
			return &flipWriter{ResponseWriter: w}, false
		}
		return w, false
	})
	dir := t.TempDir()
	p := newPuller(t, image.Config{Dir: dir})
	_, err = p.Pull(ctx, ref, image.PullOptions{})
	require.ErrorIs(t, err, image.ErrConfig)
	require.ErrorContains(t, err, bad.String())
	require.ErrorContains(t, err, "has digest sha256:", "the cache's own check refuses it")
	require.NoFileExists(t, filepath.Join(dir, "blobs", "sha256", bad.Hex))
	tmp, err := os.ReadDir(filepath.Join(dir, "tmp"))
	require.NoError(t, err)
	require.Empty(t, tmp)
}

// TestPullRefusesRedirectsInward: a registry that redirects a blob
// download to an internal address of another host (a cloud's metadata
// service) is not followed there. The address here is a loopback one
// that a server of the test listens on, counting what reaches it.
func TestPullRefusesRedirectsInward(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.2:0")
	require.NoError(t, err)
	var reached sync.Mutex
	hits := 0
	inner := &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		reached.Lock()
		defer reached.Unlock()
		hits++
	})}}
	inner.Start()
	t.Cleanup(inner.Close)
	tr := newRegistry(t)
	ref := tr.push(t, "inward:1", randomImage(t, 1024, 1))
	tr.setIntercept(func(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, bool) {
		if strings.Contains(r.URL.Path, "/blobs/") && r.Method == http.MethodGet {
			http.Redirect(w, r, inner.URL+"/latest/meta-data/", http.StatusTemporaryRedirect)
			return w, true
		}
		return w, false
	})
	_, err = newPuller(t, image.Config{}).Pull(context.Background(), ref, image.PullOptions{})
	require.ErrorContains(t, err, "refused the redirect")
	reached.Lock()
	defer reached.Unlock()
	require.Zero(t, hits, "the internal address was reached")
}

// flipWriter inverts the first byte of a response body.
type flipWriter struct {
	http.ResponseWriter
	flipped bool
}

func (f *flipWriter) Write(b []byte) (int, error) {
	if !f.flipped && len(b) > 0 {
		f.flipped = true
		c := append([]byte(nil), b...)
		c[0] ^= 0xff
		return f.ResponseWriter.Write(c)
	}
	return f.ResponseWriter.Write(b)
}

func TestPullCapsRefuseBeforeDownloading(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tr := newRegistry(t)
	ref := tr.push(t, "big:1", randomImage(t, 4096, 3))

	_, err := newPuller(t, image.Config{MaxLayers: 2}).Pull(ctx, ref, image.PullOptions{})
	require.ErrorIs(t, err, image.ErrConfig)
	require.ErrorContains(t, err, "3 layers, more than the 2 allowed")

	_, err = newPuller(t, image.Config{MaxImageBytes: 4096}).Pull(ctx, ref, image.PullOptions{})
	require.ErrorIs(t, err, image.ErrConfig)
	require.ErrorContains(t, err, "more than the 4096 bytes allowed")
	require.Zero(t, tr.count("/blobs/"))
}

func TestPullFailureClasses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tr := newRegistry(t)
	tr.push(t, "known:1", randomImage(t, 256, 1))
	p := newPuller(t, image.Config{})

	_, err := p.Pull(ctx, tr.host+"/known:2", image.PullOptions{})
	require.ErrorIs(t, err, image.ErrConfig)
	require.ErrorContains(t, err, "MANIFEST_UNKNOWN")
	require.NotErrorIs(t, err, image.ErrRegistry)

	_, err = p.Pull(ctx, tr.host+"/unknown:1", image.PullOptions{})
	require.ErrorIs(t, err, image.ErrConfig)
	require.ErrorContains(t, err, "NAME_UNKNOWN")

	_, err = p.Pull(ctx, "Not A Reference", image.PullOptions{})
	require.ErrorIs(t, err, image.ErrConfig)

	failing := newRegistry(t)
	failing.setIntercept(func(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, bool) {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		return w, true
	})
	_, err = p.Pull(ctx, failing.host+"/known:1", image.PullOptions{})
	require.ErrorIs(t, err, image.ErrRegistry)
	require.NotErrorIs(t, err, image.ErrConfig)
	require.ErrorContains(t, err, "down for maintenance")

	_, err = p.Pull(ctx, closedPort(t)+"/known:1", image.PullOptions{})
	require.ErrorIs(t, err, image.ErrRegistry)

	for status, want := range map[int]error{
		http.StatusForbidden:       image.ErrConfig,
		http.StatusTooManyRequests: image.ErrRegistry,
		http.StatusBadGateway:      image.ErrRegistry,
	} {
		answering := newRegistry(t)
		answering.setIntercept(func(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, bool) {
			if r.URL.Path == "/v2/" {
				return w, false
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"errors":[{"code":"X","message":"the registry says %d"}]}`, status)
			return w, true
		})
		_, err = p.Pull(ctx, answering.host+"/known:1", image.PullOptions{})
		require.ErrorIs(t, err, want, status)
		require.ErrorContains(t, err, fmt.Sprintf("the registry says %d", status))
	}
}

func TestPullInsecureRegistry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tr := newRegistry(t)
	img := randomImage(t, 512, 1)
	tr.push(t, "plain:1", img)
	// Every host is dialled at the test registry, so that a registry
	// name that is not a loopback address reaches it.
	transport := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, tr.host)
	}}
	t.Cleanup(transport.CloseIdleConnections)
	const ref = "registry.test:5000/plain:1"

	p := newPuller(t, image.Config{Transport: transport, Insecure: []string{"registry.test:5000"}})
	pulled, err := p.Pull(ctx, ref, image.PullOptions{})
	require.NoError(t, err)
	pulled.Release()
	require.Equal(t, digestOf(t, img), pulled.Digest)

	// Without Insecure the registry is asked over TLS, which it does
	// not speak.
	_, err = newPuller(t, image.Config{Transport: transport}).Pull(ctx, ref, image.PullOptions{})
	require.ErrorIs(t, err, image.ErrRegistry)
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func TestPullMirrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	origin, mirror, empty := newRegistry(t), newRegistry(t), newRegistry(t)
	img := randomImage(t, 1024, 2)
	ref := origin.push(t, "lib/tool:1", img)
	mirror.push(t, "lib/tool:1", img)
	dead := closedPort(t)

	p := newPuller(t, image.Config{Mirrors: map[string][]string{origin.host: {dead, mirror.host}}})
	pulled, err := p.Pull(ctx, ref, image.PullOptions{})
	require.NoError(t, err)
	pulled.Release()
	require.Equal(t, digestOf(t, img), pulled.Digest)
	require.Zero(t, origin.count("/v2/"))
	require.Equal(t, 2, mirror.count("GET", "/blobs/")-1, "two layers and the config")

	// A mirror without the image is passed over for the registry.
	p = newPuller(t, image.Config{Mirrors: map[string][]string{origin.host: {empty.host}}})
	pulled, err = p.Pull(ctx, ref, image.PullOptions{})
	require.NoError(t, err)
	pulled.Release()
	require.Equal(t, 1, empty.count("GET", "/manifests/"))
	require.Equal(t, 1, origin.count("GET", "/manifests/"))
	require.Equal(t, 3, origin.count("GET", "/blobs/"))

	// A mirror that serves the manifest and fails on a blob is passed
	// over for that blob.
	origin.reset()
	broken := newRegistry(t)
	broken.push(t, "lib/tool:1", img)
	broken.setIntercept(func(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, bool) {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
			http.Error(w, "mirror storage failed", http.StatusBadGateway)
			return w, true
		}
		return w, false
	})
	p = newPuller(t, image.Config{Mirrors: map[string][]string{origin.host: {broken.host}}})
	pulled, err = p.Pull(ctx, ref, image.PullOptions{})
	require.NoError(t, err)
	pulled.Release()
	require.Equal(t, 1, broken.count("GET", "/manifests/"))
	require.Zero(t, origin.count("/manifests/"))
	require.Equal(t, 3, origin.count("GET", "/blobs/"))
}

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()
	_, err := image.New(image.Config{})
	require.ErrorContains(t, err, "Dir is required")
	_, err = image.New(image.Config{Dir: t.TempDir(), Budget: -1})
	require.Error(t, err)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
