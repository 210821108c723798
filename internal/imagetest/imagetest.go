// Package imagetest builds the OCI images the image tests run, from
// files of this machine (Debian's static busybox) and a Go program built
// at test time, and serves them from an in-process registry
// (go-containerregistry's pkg/registry) over loopback HTTP.
package imagetest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/cikit/cikit/internal/testenv"
)

// BusyboxPath is where Debian's busybox-static installs busybox.
const BusyboxPath = "/bin/busybox"

// Registry is an in-process OCI registry served over HTTP on loopback.
type Registry struct {
	// Host is the registry's host:port, the start of its image
	// references ("127.0.0.1:40123/acme/app:1").
	Host string
	srv  *httptest.Server
}

// NewRegistry starts a registry that lives as long as the test. wrap,
// when set, stands in front of it (to ask for credentials, or count
// requests).
func NewRegistry(t testing.TB, wrap func(http.Handler) http.Handler) *Registry {
	t.Helper()
	var h http.Handler = registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &Registry{Host: strings.TrimPrefix(srv.URL, "http://"), srv: srv}
}

// URL is the registry's base URL.
func (r *Registry) URL() string { return r.srv.URL }

// Push pushes img as repository:tag ("acme/app:1") and returns the
// reference by digest of what it pushed.
func (r *Registry) Push(t testing.TB, repoTag string, img v1.Image) name.Digest {
	t.Helper()
	ref, err := name.ParseReference(r.Host+"/"+repoTag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return ref.Context().Digest(d.String())
}

// PushIndex pushes idx as repository:tag and returns its reference by
// digest.
func (r *Registry) PushIndex(t testing.TB, repoTag string, idx v1.ImageIndex) name.Digest {
	t.Helper()
	ref, err := name.ParseReference(r.Host+"/"+repoTag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return ref.Context().Digest(d.String())
}

// ModTime is the modification time of every entry Tar writes but those
// given as a Header.
var ModTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// File is one entry of a layer Layer builds.
type File struct {
	Name string // relative, slash-separated: "etc/os-release"; written as it is, "../x" included
	Mode int64  // permission bits; 0 means 0o644 (0o755 for directories)
	// Body is a regular file's content; Link a symlink's target and
	// HardLink a hard link's, the name of an earlier entry (Body then
	// unused); Dir makes a directory.
	Body     []byte
	Link     string
	HardLink string
	Dir      bool
	// UID and GID own the entry; zero is root.
	UID, GID int
	// Header, when set, is the entry's header, written as it is in place
	// of what the fields above make, and followed by Body, whose length
	// Header.Size must be: for entries no image builder makes, such as
	// device nodes and FIFOs, that layers must be refused for.
	Header *tar.Header
}

// header is the tar header f makes.
func (f File) header() *tar.Header {
	if f.Header != nil {
		return f.Header
	}
	hdr := &tar.Header{Name: f.Name, Mode: f.Mode, Uid: f.UID, Gid: f.GID, ModTime: ModTime, Format: tar.FormatPAX}
	switch {
	case f.Dir:
		hdr.Typeflag, hdr.Name = tar.TypeDir, strings.TrimSuffix(f.Name, "/")+"/"
		if hdr.Mode == 0 {
			hdr.Mode = 0o755
		}
	case f.Link != "":
		hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, f.Link, 0o777
	case f.HardLink != "":
		hdr.Typeflag, hdr.Linkname = tar.TypeLink, f.HardLink
		if hdr.Mode == 0 {
			hdr.Mode = 0o644
		}
	default:
		hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(f.Body))
		if hdr.Mode == 0 {
			hdr.Mode = 0o644
		}
	}
	return hdr
}

// Tar returns the tar stream of files in order, as a layer holds it
// uncompressed.
func Tar(t testing.TB, files []File) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		hdr := f.header()
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatalf("writing the tar header of %s: %v", hdr.Name, err)
		}
		if hdr.Typeflag == tar.TypeReg || f.Header != nil {
			if _, err := tw.Write(f.Body); err != nil {
				t.Fatalf("writing the content of %s: %v", hdr.Name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Layer returns a layer holding files in order, gzip-compressed as a
// registry serves layers: the tar stream of Tar, compressed once, so
// that pushing and reading it again cost no compression.
func Layer(t testing.TB, files []File) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(Tar(t, files)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// UncompressedLayer returns a layer of the tar stream of Tar as it is,
// of media type application/vnd.oci.image.layer.v1.tar.
func UncompressedLayer(t testing.TB, files []File) v1.Layer {
	t.Helper()
	return static.NewLayer(Tar(t, files), types.OCIUncompressedLayer)
}

// busybox reads Debian's static busybox and its applets, or ends the
// test (a skip, a failure in CI) when it is not installed.
func busybox(t testing.TB) ([]byte, []string) {
	t.Helper()
	bin, err := os.ReadFile(BusyboxPath)
	if err != nil {
		testenv.ToolUnavailable(t, testenv.Busybox, err)
	}
	out, err := exec.Command(BusyboxPath, "--list").Output()
	if err != nil {
		testenv.ToolUnavailable(t, testenv.Busybox, fmt.Errorf("%s --list: %w", BusyboxPath, err))
	}
	applets := strings.Fields(string(out))
	if !slices.Contains(applets, "sh") {
		testenv.ToolUnavailable(t, testenv.Busybox, errors.New("busybox has no sh applet"))
	}
	return bin, applets
}

// BusyboxImage returns an image of one layer: Debian's static busybox
// as /bin/busybox with each applet a symlink to it, an /etc/os-release
// whose ID is "cikit-busybox" and whose VERSION_ID is version, an
// /etc/passwd with root and user "ci" (1000), and /tmp; its config sets
// PATH=/bin and the working directory /.
func BusyboxImage(t testing.TB, version string) v1.Image {
	t.Helper()
	bin, applets := busybox(t)
	files := []File{
		{Name: "bin", Dir: true},
		{Name: "bin/busybox", Body: bin, Mode: 0o755},
	}
	for _, a := range applets {
		if a != "busybox" {
			files = append(files, File{Name: "bin/" + a, Link: "busybox"})
		}
	}
	files = append(files,
		File{Name: "etc", Dir: true},
		File{Name: "etc/os-release", Body: fmt.Appendf(nil, "ID=cikit-busybox\nNAME=\"cikit busybox\"\nVERSION_ID=%s\n", version)},
		File{Name: "etc/passwd", Body: []byte("root:x:0:0:root:/root:/bin/sh\nci:x:1000:1000:ci:/home/ci:/bin/sh\n")},
		File{Name: "etc/group", Body: []byte("root:x:0:\nci:x:1000:\n")},
		File{Name: "root", Dir: true, Mode: 0o700},
		File{Name: "home", Dir: true},
		File{Name: "home/ci", Dir: true},
		File{Name: "tmp", Dir: true, Mode: 0o1777},
		File{Name: "usr", Dir: true},
	)
	img, err := mutate.AppendLayers(empty.Image, Layer(t, files))
	if err != nil {
		t.Fatal(err)
	}
	return withConfig(t, img, v1.Config{Env: []string{"PATH=/bin"}, WorkingDir: "/"})
}

// serviceSource is the Go TCP service ServiceImage builds: it listens on
// $PORT (default 6390) and answers each line "PING" with "PONG", and any
// other line with "ERR <line>".
const serviceSource = `package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
)

func main() {
	port := os.Getenv("PORT")
	if port == "" {
		port = "6390"
	}
	ln, err := net.Listen("tcp", ":"+port)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("service: listening on", ln.Addr())
	for {
		c, err := ln.Accept()
		if err != nil {
			continue
		}
		go func() {
			defer c.Close()
			s := bufio.NewScanner(c)
			for s.Scan() {
				if s.Text() == "PING" {
					fmt.Fprintln(c, "PONG")
				} else {
					fmt.Fprintln(c, "ERR", s.Text())
				}
			}
		}()
	}
}
`

// ServiceImage returns base with a second layer holding a small Go TCP
// service, built now, as /usr/bin/pingd: it listens on $PORT (default
// 6390) and answers "PING" with "PONG". Its config runs it (Entrypoint)
// and exposes 6390/tcp.
func ServiceImage(t testing.TB, base v1.Image) v1.Image {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(serviceSource), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module pingd\n\ngo 1.21\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "pingd")
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-trimpath", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=", "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the service: %v\n%s", err, b)
	}
	bin, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(base, Layer(t, []File{
		{Name: "usr/bin", Dir: true},
		{Name: "usr/bin/pingd", Body: bin, Mode: 0o755},
	}))
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	c.Entrypoint = []string{"/usr/bin/pingd"}
	c.ExposedPorts = map[string]struct{}{"6390/tcp": {}}
	return withConfig(t, img, c)
}

// withConfig sets img's run configuration, and its platform to this
// machine's.
func withConfig(t testing.TB, img v1.Image, c v1.Config) v1.Image {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.Config = c
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	out, err := mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
