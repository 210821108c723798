package process_test

import (
	"archive/tar"
	"context"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet/process"
	"github.com/cikit/cikit/internal/imagetest"
	"github.com/cikit/cikit/internal/proctest"
	"github.com/cikit/cikit/internal/syncbuf"
)

// hostUID is the host user a sandboxed job runs as here: the sandbox's
// default user when the tests run as root, else the tests' own.
func hostUID() int {
	if os.Geteuid() == 0 {
		return process.DefaultSandboxUID
	}
	return os.Geteuid()
}

// busyboxView unpacks the busybox test image of version into a fresh
// directory, a job's writable view of it owned by the sandbox's user,
// and returns it as a job's Image, with the image's config.
func busyboxView(t testing.TB, version string) *process.Image {
	t.Helper()
	img := imagetest.BusyboxImage(t, version)
	dir := filepath.Join(searchableDir(t), "rootfs")
	require.NoError(t, os.Mkdir(dir, 0o755))
	rc := mutate.Extract(img)
	defer rc.Close()
	untar(t, rc, dir)
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	digest, err := img.Digest()
	require.NoError(t, err)
	return &process.Image{Rootfs: dir, Ref: "busybox:" + version, Digest: digest.String(),
		Env: cf.Config.Env, WorkingDir: cf.Config.WorkingDir, User: cf.Config.User, Entrypoint: cf.Config.Entrypoint}
}

// untar writes the tar stream r into dir, owned by the sandbox's user:
// directories, regular files and symbolic links, whose names the test's
// own image keeps inside dir.
func untar(t testing.TB, r io.Reader, dir string) {
	t.Helper()
	tr := tar.NewReader(r)
	uid := hostUID()
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		p := filepath.Join(dir, filepath.Clean("/"+hdr.Name))
		mode := os.FileMode(hdr.Mode).Perm()
		switch hdr.Typeflag {
		case tar.TypeDir:
			require.NoError(t, os.MkdirAll(p, 0o755))
			require.NoError(t, os.Chmod(p, mode|dirSticky(hdr)))
		case tar.TypeReg:
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
			require.NoError(t, err)
			_, err = io.Copy(f, tr)
			require.NoError(t, errors.Join(err, f.Close()))
		case tar.TypeSymlink:
			require.NoError(t, os.Symlink(hdr.Linkname, p))
		default:
			t.Fatalf("the test image holds %s of type %c", hdr.Name, hdr.Typeflag)
		}
		require.NoError(t, os.Lchown(p, uid, uid))
	}
	require.NoError(t, os.Lchown(dir, uid, uid))
}

// dirSticky is the sticky bit of a tar directory entry (/tmp's).
func dirSticky(hdr *tar.Header) os.FileMode {
	if hdr.Mode&0o1000 != 0 {
		return os.ModeSticky
	}
	return 0
}

// TestImageJobRunsInTheImage runs a native job in the busybox image: it
// sees the image's os-release, tools and PATH, not the host's; starts in
// the image's working directory; writes to /usr in its view only, as the
// sandbox's user on the host; and leaves no process behind.
func TestImageJobRunsInTheImage(t *testing.T) {
	t.Parallel()
	b := setup(t, sandboxed, func(c *process.Config) { c.KeepWorkspaces = true })
	img := busyboxView(t, "1.36")
	bg := marker()
	res := b.exec.RunJob(context.Background(), process.Job{Image: img, Spec: &cikit.JobSpec{ID: "img", Format: "native", Steps: steps(
		`grep ^ID= /etc/os-release`,
		`echo "PATH=$PATH"`,
		`if [ -e /usr/bin/git ]; then echo "host git"; else echo "no git"; fi`,
		`busybox basename /a/from-busybox`,
		`echo "pwd=$(pwd) uid=$(id -u)"`,
		`cut -d: -f1 /etc/passwd | tr '\n' ' '; echo`,
		`ls /.cikit/host | tr '\n' ' '; echo`,
		`echo written > /usr/x`,
		`sleep `+bg+` &`,
	), AfterSteps: []cikit.Step{{Name: "bash", Run: "true", Shell: "bash"}}}})
	out := b.out.String()
	require.Equal(t, cikit.JobSucceeded, res.State, out)
	require.Equal(t, img.Digest, res.ImageDigest)
	require.Contains(t, out, "--- image: busybox:1.36 ("+img.Digest+")\n")
	require.Contains(t, out, "\nID=cikit-busybox\n", "the image's os-release")
	require.Contains(t, out, "\nPATH=/bin\n", "the image's PATH, not the executor's")
	require.Contains(t, out, "\nno git\n")
	require.Contains(t, out, "\nfrom-busybox\n")
	require.Contains(t, out, `step "bash": bash: not found in PATH (/bin) in the image busybox:1.36 (`+img.Digest+`)`)
	require.Contains(t, out, "\npwd=/ uid=0\n", "the image's working directory; its user is root in the sandbox")
	require.Contains(t, out, "\nroot ci \n", "the image's own /etc/passwd")
	require.Contains(t, out, "\nld.so lib \n", "the dynamic supervisor's loader and libraries, from the host")

	got, err := os.ReadFile(filepath.Join(img.Rootfs, "usr", "x"))
	require.NoError(t, err, "the write to /usr lands in the job's view")
	require.Equal(t, "written\n", string(got))
	_, err = os.Lstat("/usr/x")
	require.True(t, errors.Is(err, os.ErrNotExist), "the host's /usr is untouched: %v", err)
	require.Equal(t, hostUID(), ownerOf(t, filepath.Join(img.Rootfs, "usr", "x")), "root in the sandbox is the sandbox's user on the host")
	require.Empty(t, proctest.Running("sleep", bg), "the background process outlived the job")
}

func ownerOf(t *testing.T, path string) int {
	t.Helper()
	fi, err := os.Lstat(path)
	require.NoError(t, err)
	return int(fi.Sys().(*syscall.Stat_t).Uid)
}

// TestImageGitHubJob runs a GitHub job in the busybox image, with limits
// (so prlimit, a host program, runs in the image too), the host's network
// and the image's user ci: its default shell falls back to sh without
// bash, it runs in its workspace as ci, it has the host's resolv.conf,
// and the files it creates in its workspace are the sandbox's user's on
// the host.
func TestImageGitHubJob(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *process.Config) {
		c.Sandbox = &process.Sandbox{Network: true, Limits: process.Limits{FileSize: 1 << 30, Processes: 256}}
		c.KeepWorkspaces = true
	})
	img := busyboxView(t, "1.36")
	img.User = "ci"
	res := b.exec.RunJob(context.Background(), process.Job{Image: img, Spec: &cikit.JobSpec{ID: "gh", Format: "github", Steps: []cikit.Step{
		{Name: "where", Run: `echo "in=$(pwd) ws=$GITHUB_WORKSPACE who=$(id -un) $(id -u) home=$HOME"; echo made > created`},
		{Name: "shell", Run: `if [ -n "$BASH_VERSION" ]; then echo bash; else echo "not bash"; fi`},
		{Name: "limit", Run: `ulimit -f`},
		{Name: "resolv", Run: `echo "resolv: $(cat /etc/resolv.conf | tr '\n' ' ')"`},
	}}})
	out := b.out.String()
	require.Equal(t, cikit.JobSucceeded, res.State, out)
	ws := between(t, out, " ws=", " who=")
	require.Contains(t, out, "in="+ws+" ws="+ws+" who=ci 1000 home=/home/ci\n", "a GitHub job runs in its workspace, as the image's user")
	require.Contains(t, out, "\nnot bash\n")
	require.Contains(t, out, "\n2097152\n", "the file size limit, in 512-byte blocks")
	require.Equal(t, hostUID(), ownerOf(t, filepath.Join(ws, "created")))
	resolv, err := os.ReadFile("/etc/resolv.conf")
	require.NoError(t, err)
	require.Contains(t, out, "\nresolv: "+strings.ReplaceAll(string(resolv), "\n", " ")+"\n")
}

// between returns what lies in s between the first before and the after
// that follows it.
func between(t *testing.T, s, before, after string) string {
	t.Helper()
	_, rest, ok := strings.Cut(s, before)
	require.True(t, ok, "%q in %s", before, s)
	v, _, ok := strings.Cut(rest, after)
	require.True(t, ok, "%q in %s", after, s)
	return v
}

// TestImageJobsAtOnce runs two jobs at once on views of two images: each
// sees its own, and the first one's write to /usr is not in the second's.
func TestImageJobsAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, sandboxed)
	views := []*process.Image{busyboxView(t, "1"), busyboxView(t, "2")}
	outs := []*syncbuf.Buffer{{}, {}}
	results := make(chan process.Result, 2)
	for i, img := range views {
		go func() {
			results <- b.exec.RunJob(context.Background(), process.Job{Image: img, Output: outs[i], Spec: &cikit.JobSpec{ID: "at-once", Steps: steps(
				`grep ^VERSION_ID= /etc/os-release; echo mine > /usr/mine; echo started`,
				`while [ ! -e /usr/release ]; do sleep 0.02; done; cat /usr/*`,
			)}})
		}()
	}
	for _, out := range outs {
		waitFor(t, out, "started\n")
	}
	// Both run; each is released in its own view.
	for _, img := range views {
		require.NoError(t, os.WriteFile(filepath.Join(img.Rootfs, "usr", "release"), []byte("released\n"), 0o644))
	}
	for range views {
		r := <-results
		require.Equal(t, cikit.JobSucceeded, r.State, r.Reason)
	}
	for i, out := range outs {
		s := printed(out.String())
		require.Contains(t, s, "VERSION_ID="+[]string{"1", "2"}[i]+"\n")
		require.Contains(t, s, "mine\nreleased\n", "each job's /usr holds its own file only")
	}
}

func waitFor(t *testing.T, out *syncbuf.Buffer, s string) {
	t.Helper()
	require.Eventually(t, func() bool { return strings.Contains(out.String(), s) }, time.Minute, 10*time.Millisecond,
		"waiting for %q in the output: %s", s, out.String())
}

// TestImageUnsandboxed: an executor without a sandbox refuses a job with
// an image, as the runner's failure, not the job's.
func TestImageUnsandboxed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.exec.RunJob(context.Background(), process.Job{Image: &process.Image{Rootfs: t.TempDir(), Digest: "sha256:abc"},
		Spec: &cikit.JobSpec{ID: "plain", Steps: steps("true")}})
	require.Equal(t, cikit.JobFailed, res.State)
	require.Equal(t, cikit.FailureInfrastructure, res.FailureClass)
	require.Contains(t, res.Reason, "cannot run images unsandboxed")
	require.Empty(t, res.Steps)
}

// TestImageGitLabJob runs a GitLab job in the busybox image: its script
// runs through the image's entrypoint, in its workspace, with the job's
// variables over the image's; an image user it does not know runs as
// the sandbox's, saying so.
func TestImageGitLabJob(t *testing.T) {
	t.Parallel()
	b := setup(t, sandboxed)
	img := busyboxView(t, "1.36")
	img.Entrypoint = []string{"/bin/env", "FROM_ENTRYPOINT=yes"}
	img.Env = append(img.Env, "FROM_IMAGE=image", "OVERRIDDEN=image")
	img.User = "nobody-here"
	res := b.exec.RunJob(context.Background(), process.Job{Image: img, Spec: &cikit.JobSpec{ID: "gl", Format: "gitlab",
		Env:   map[string]string{"OVERRIDDEN": "job"},
		Steps: steps(`echo "$FROM_ENTRYPOINT $FROM_IMAGE $OVERRIDDEN $(id -u) in=$(pwd) dir=$CI_PROJECT_DIR"`)}})
	out := b.out.String()
	require.Equal(t, cikit.JobSucceeded, res.State, out)
	require.Contains(t, out, `--- warning: the image's user "nobody-here" is not in its /etc/passwd: the job runs as the sandbox's user cikit (uid 1000)`)
	dir := between(t, out, "\nyes image job 1000 in=", " dir=")
	require.Contains(t, out, "\nyes image job 1000 in="+dir+" dir="+dir+"\n")
}

// TestImageStaticSupervisor builds an executor's program without cgo,
// a static program, and runs a job in an image with it: its supervisor
// runs in the image as it is, with nothing of the host's loader shown.
// (A dynamic one, this test binary with the race detector, is every
// other test here.)
func TestImageStaticSupervisor(t *testing.T) {
	t.Parallel()
	img := busyboxView(t, "1.36")
	bin := filepath.Join(t.TempDir(), "imagejob")
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, "./testdata/imagejob")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "building the static program: %s", out)
	f, err := elf.Open(bin)
	require.NoError(t, err)
	for _, p := range f.Progs {
		require.NotEqual(t, elf.PT_INTERP, p.Type, "the program is static")
	}
	require.NoError(t, f.Close())

	run := exec.Command(bin, img.Rootfs, searchableDir(t), `grep ^ID= /etc/os-release; if [ -e /.cikit ]; then echo "host files shown"; else echo "nothing of the host"; fi`)
	out, err = run.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "\nID=cikit-busybox\nnothing of the host\n")
}
