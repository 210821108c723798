package imagetest_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/cikit/cikit/internal/imagetest"
)

// TestImagesRoundTrip: the images built here are pushed to the registry
// and read back whole: busybox with its applets and os-release, and the
// service image with its entrypoint, whose program answers PING.
func TestImagesRoundTrip(t *testing.T) {
	t.Parallel()
	reg := imagetest.NewRegistry(t, nil)
	base := imagetest.BusyboxImage(t, "1.0")
	svc := imagetest.ServiceImage(t, base)
	ref := reg.Push(t, "test/pingd:1", svc)

	got, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := got.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if ep := cf.Config.Entrypoint; len(ep) != 1 || ep[0] != "/usr/bin/pingd" {
		t.Fatalf("entrypoint %q", ep)
	}
	layers, err := got.Layers()
	if err != nil || len(layers) != 2 {
		t.Fatalf("%d layers (%v), want 2", len(layers), err)
	}
	files := map[string]*tar.Header{}
	var osRelease string
	dir := t.TempDir()
	rc := mutate.Extract(got)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[hdr.Name] = hdr
		switch hdr.Name {
		case "etc/os-release":
			b, _ := io.ReadAll(tr)
			osRelease = string(b)
		case "usr/bin/pingd":
			f, err := os.OpenFile(filepath.Join(dir, "pingd"), os.O_CREATE|os.O_WRONLY, 0o755)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
	}
	if !strings.Contains(osRelease, "ID=cikit-busybox\n") || !strings.Contains(osRelease, "VERSION_ID=1.0\n") {
		t.Errorf("os-release %q", osRelease)
	}
	if h := files["bin/sh"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "busybox" {
		t.Errorf("bin/sh is %+v, want a symlink to busybox", h)
	}
	if h := cmp.Or(files["tmp/"], files["tmp"]); h == nil || h.Mode&0o1777 != 0o1777 {
		t.Errorf("tmp/ is %+v, want mode 1777", h)
	}

	// The service runs on this machine too: it is statically linked.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(filepath.Join(dir, "pingd"))
	cmd.Env = []string{"PORT=" + strconv.Itoa(port)}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "service: listening on") {
		t.Fatalf("the service said %q (%v)", line, err)
	}
	c, err := net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "PING\n"); err != nil {
		t.Fatal(err)
	}
	answer, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || answer != "PONG\n" {
		t.Fatalf("PING answered %q (%v)", answer, err)
	}
}

// TestLayerEntries: Layer, UncompressedLayer and Tar write each kind of
// entry File describes, in order, raw headers as they are; a Layer
// serves the same compressed bytes each time, those of its digest.
func TestLayerEntries(t *testing.T) {
	t.Parallel()
	files := []imagetest.File{
		{Name: "etc", Dir: true},
		{Name: "etc/passwd", Body: []byte("root:x:0:0::/:/bin/sh\n"), UID: 1000, GID: 1001},
		{Name: "bin/su", Body: []byte("su"), Mode: 0o4755},
		{Name: "bin/sh", Link: "/bin/busybox"},
		{Name: "etc/passwd.bak", HardLink: "etc/passwd"},
		{Name: "etc/.wh.shadow"},
		{Name: "../escape", Body: []byte("x")},
		{Header: &tar.Header{Typeflag: tar.TypeChar, Name: "dev/null", Mode: 0o666, Devmajor: 1, Devminor: 3}},
	}
	want := []tar.Header{
		{Typeflag: tar.TypeDir, Name: "etc/", Mode: 0o755},
		{Typeflag: tar.TypeReg, Name: "etc/passwd", Mode: 0o644, Size: 22, Uid: 1000, Gid: 1001},
		{Typeflag: tar.TypeReg, Name: "bin/su", Mode: 0o4755, Size: 2},
		{Typeflag: tar.TypeSymlink, Name: "bin/sh", Linkname: "/bin/busybox", Mode: 0o777},
		{Typeflag: tar.TypeLink, Name: "etc/passwd.bak", Linkname: "etc/passwd", Mode: 0o644},
		{Typeflag: tar.TypeReg, Name: "etc/.wh.shadow", Mode: 0o644},
		{Typeflag: tar.TypeReg, Name: "../escape", Mode: 0o644, Size: 1},
		{Typeflag: tar.TypeChar, Name: "dev/null", Mode: 0o666, Devmajor: 1, Devminor: 3},
	}
	check := func(t *testing.T, r io.Reader) {
		t.Helper()
		tr := tar.NewReader(r)
		for i, w := range want {
			h, err := tr.Next()
			if err != nil {
				t.Fatalf("entry %d (%s): %v", i, w.Name, err)
			}
			got := tar.Header{Typeflag: h.Typeflag, Name: h.Name, Linkname: h.Linkname, Mode: h.Mode, Size: h.Size,
				Uid: h.Uid, Gid: h.Gid, Devmajor: h.Devmajor, Devminor: h.Devminor}
			if !reflect.DeepEqual(got, w) {
				t.Errorf("entry %d is %+v, want %+v", i, got, w)
			}
			if w.Typeflag != tar.TypeChar && !h.ModTime.Equal(imagetest.ModTime) {
				t.Errorf("entry %s has mtime %v, want %v", h.Name, h.ModTime, imagetest.ModTime)
			}
			if w.Name == "etc/passwd" {
				if b, _ := io.ReadAll(tr); string(b) != "root:x:0:0::/:/bin/sh\n" {
					t.Errorf("etc/passwd holds %q", b)
				}
			}
		}
		if h, err := tr.Next(); err != io.EOF {
			t.Errorf("after the last entry: %v, %v; want EOF", h, err)
		}
	}
	t.Run("Tar", func(t *testing.T) {
		check(t, bytes.NewReader(imagetest.Tar(t, files)))
	})
	t.Run("Layer", func(t *testing.T) {
		l := imagetest.Layer(t, files)
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		check(t, rc)
		digest, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			rc, err := l.Compressed()
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(rc)
			if err != nil {
				t.Fatal(err)
			}
			rc.Close()
			sum := sha256.Sum256(b)
			if got := "sha256:" + hex.EncodeToString(sum[:]); got != digest.String() {
				t.Fatalf("the compressed bytes are %s, the layer's digest %s", got, digest)
			}
		}
	})
	t.Run("UncompressedLayer", func(t *testing.T) {
		l := imagetest.UncompressedLayer(t, files)
		mt, err := l.MediaType()
		if err != nil || mt != types.OCIUncompressedLayer {
			t.Fatalf("media type %q (%v), want %q", mt, err, types.OCIUncompressedLayer)
		}
		rc, err := l.Compressed()
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		check(t, rc)
	})
}
