package imagetest_test

import (
	"archive/tar"
	"bufio"
	"cmp"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

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
