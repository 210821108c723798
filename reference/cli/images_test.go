package cli

import (
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet/image"
	"github.com/cikit/cikit/internal/imagetest"
)

// imageDir is a fresh image directory.
func imageDir(t *testing.T) string { return filepath.Join(t.TempDir(), "images") }

// TestRunJobsInTheirImages: `cikit run` runs a GitLab job with image:
// and a GitHub job with container: in their images, pulled from the
// registry, and a job whose runs-on label -image-for maps in that
// image; a job that names none runs on this machine, beside them. With
// -host-jobs=false that job fails instead, saying why.
func TestRunJobsInTheirImages(t *testing.T) {
	t.Parallel()
	reg := imagetest.NewRegistry(t, nil)
	for _, v := range []string{"3.19", "1", "2"} {
		reg.Push(t, "test/busybox:"+v, imagetest.BusyboxImage(t, v))
	}
	osRelease := `'grep -E "^(ID|VERSION_ID)=" /etc/os-release || echo no os-release'`
	gitlab := pipelineDir(t, map[string]string{".gitlab-ci.yml": `in-image:
  image: ` + reg.Host + `/test/busybox:3.19
  script: [grep ^ID= /etc/os-release, grep ^VERSION_ID= /etc/os-release]
on-host:
  script: [` + osRelease + `]
`})
	github := pipelineDir(t, map[string]string{".github/workflows/ci.yml": `on: push
jobs:
  container:
    runs-on: self-hosted
    container:
      image: ` + reg.Host + `/test/busybox:1
    steps:
      - run: grep -E '^(ID|VERSION_ID)=' /etc/os-release
  labelled:
    runs-on: ubuntu-latest
    steps:
      - run: ` + osRelease + `
`})
	flags := func(more ...string) []string {
		return append([]string{"-image-dir", imageDir(t), "-insecure-registry", reg.Host}, more...)
	}

	out, rep := reportOf(t, gitlab, flags()...)
	require.Equal(t, ExitOK, out.code, "stdout:\n%s\nstderr:\n%s", out.stdout, out.stderr)
	lines := jobLines(out.stdout, rep)
	require.Contains(t, lines["in-image"], "\nID=cikit-busybox\n")
	require.Contains(t, lines["in-image"], "\nVERSION_ID=3.19\n")
	require.Contains(t, lines["in-image"], "--- pulling "+reg.Host+"/test/busybox:3.19 (pull policy if-not-present)\n")
	require.NotContains(t, lines["on-host"], "cikit-busybox", "a job naming no image runs on this machine")

	out, rep = reportOf(t, github, flags("-image-for", "ubuntu-latest="+reg.Host+"/test/busybox:2")...)
	require.Equal(t, ExitOK, out.code, "stdout:\n%s\nstderr:\n%s", out.stdout, out.stderr)
	lines = jobLines(out.stdout, rep)
	require.Contains(t, lines["container"], "\nID=cikit-busybox\nVERSION_ID=1\n")
	require.Contains(t, lines["labelled"], "--- image: "+reg.Host+"/test/busybox:2 (the runner's image for runs-on label ubuntu-latest)\n")
	require.Contains(t, lines["labelled"], "\nID=cikit-busybox\nVERSION_ID=2\n")

	out, rep = reportOf(t, gitlab, flags("-host-jobs=false")...)
	require.Equal(t, ExitFailed, out.code, "stdout:\n%s\nstderr:\n%s", out.stdout, out.stderr)
	require.Equal(t, map[string]cikit.JobState{"in-image": cikit.JobSucceeded, "on-host": cikit.JobFailed}, jobStates(rep))
	for _, j := range rep.Jobs {
		if j.ID == "on-host" {
			require.Contains(t, j.Reason, "this runner runs jobs only in images")
		}
	}
}

// TestRunServices: from the pipeline files to the job, a GitLab job's
// service aliased db and a GitHub job's service redis with
// --health-cmd start from their images, and the jobs reach them by
// those names; a service that never becomes healthy fails its job,
// naming it and showing its output.
func TestRunServices(t *testing.T) {
	t.Parallel()
	reg := imagetest.NewRegistry(t, nil)
	base := imagetest.BusyboxImage(t, "1")
	reg.Push(t, "test/busybox:1", base)
	reg.Push(t, "test/pingd:1", imagetest.ServiceImage(t, base))
	gitlab := pipelineDir(t, map[string]string{".gitlab-ci.yml": `test:
  image: ` + reg.Host + `/test/busybox:1
  services:
    - name: ` + reg.Host + `/test/pingd:1
      alias: db
  script: [echo PING | nc db 6390]
`})
	github := pipelineDir(t, map[string]string{".github/workflows/ci.yml": `on: push
jobs:
  test:
    runs-on: self-hosted
    container: ` + reg.Host + `/test/busybox:1
    services:
      redis:
        image: ` + reg.Host + `/test/pingd:1
        env: {PORT: "7379"}
        ports: ["7379:7379"]
        options: >-
          --health-cmd "echo PING | nc 127.0.0.1 7379 | grep -q PONG"
          --health-interval 50ms --health-retries 200
    steps:
      - run: echo PING | nc redis ${{ job.services.redis.ports['7379'] }}
  sick:
    runs-on: self-hosted
    container: ` + reg.Host + `/test/busybox:1
    services:
      db:
        image: ` + reg.Host + `/test/pingd:1
        options: --health-cmd "exit 1" --health-interval 10ms --health-retries 2
    steps:
      - run: echo never
`})
	flags := []string{"-image-dir", imageDir(t), "-insecure-registry", reg.Host}

	out, rep := reportOf(t, gitlab, flags...)
	require.Equal(t, ExitOK, out.code, "stdout:\n%s\nstderr:\n%s", out.stdout, out.stderr)
	lines := jobLines(out.stdout, rep)
	require.Contains(t, lines["test"], "--- service db is ready (port 6390 accepts connections)")
	require.Contains(t, lines["test"], "\nPONG\n")

	out, rep = reportOf(t, github, flags...)
	require.Equal(t, ExitFailed, out.code, "stdout:\n%s\nstderr:\n%s", out.stdout, out.stderr)
	require.Equal(t, map[string]cikit.JobState{"test": cikit.JobSucceeded, "sick": cikit.JobFailed}, jobStates(rep))
	lines = jobLines(out.stdout, rep)
	require.Contains(t, lines["test"], `--- service redis is ready (health check "echo PING | nc 127.0.0.1 7379 | grep -q PONG")`)
	require.Contains(t, lines["test"], "\nPONG\n")
	for _, j := range rep.Jobs {
		if j.ID == "sick" {
			require.Contains(t, j.Reason, `service db (`+reg.Host+`/test/pingd:1) is unhealthy: its health check "exit 1" failed 2 times in a row`)
			require.Contains(t, j.Reason, "service: listening on")
		}
	}
	require.NotContains(t, lines["sick"], "never\n")
}

// TestRunImageFlagErrors: the image flags of `cikit run` refuse bad
// values with an error naming the flag, exit code 2, and nothing runs.
func TestRunImageFlagErrors(t *testing.T) {
	t.Parallel()
	dir := pipelineDir(t, map[string]string{".gitlab-ci.yml": chainPipeline})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-image-for", "ubuntu-latest"}, `invalid value "ubuntu-latest" for flag -image-for: want LABEL=IMAGE, neither of them empty`},
		{[]string{"-image-for", "=alpine:3.20"}, `invalid value "=alpine:3.20" for flag -image-for: want LABEL=IMAGE`},
		{[]string{"-image-for", "ubuntu-latest="}, `invalid value "ubuntu-latest=" for flag -image-for: want LABEL=IMAGE`},
		{[]string{"-image-for", "l=a:1", "-image-for", "l=b:1"}, "for flag -image-for: l is given twice"},
		{[]string{"-registry-mirror", "index.docker.io"}, `for flag -registry-mirror: want HOST=MIRROR`},
		{[]string{"-insecure-registry", " "}, `for flag -insecure-registry: must not be empty`},
		{[]string{"-image-budget", "lots"}, `for flag -image-budget: "lots" is not a size`},
		{[]string{"-pull-policy", "sometimes"}, `-pull-policy must be always, if-not-present or never, not "sometimes"`},
	} {
		out := runIn(t, dir, tc.args...)
		require.Equal(t, ExitInvalid, out.code, "%v: %s", tc.args, out.stderr)
		require.Contains(t, out.stderr, tc.want, "%v", tc.args)
		require.NotContains(t, out.stdout, "started", "nothing runs")
	}
}

// TestRunnerImageFlags: `cikit runner` refuses the image flags with
// -sandbox off, naming them, and bad values of them; -default-image
// makes jobs left without an image fail unless -host-jobs says
// otherwise.
func TestRunnerImageFlags(t *testing.T) {
	t.Parallel()
	runner := func(args ...string) (int, string) {
		var stderr strings.Builder
		code := Main(t.Context(), append([]string{"runner", "-server", "http://127.0.0.1:1", "-registration-token", "t"}, args...), io.Discard, &stderr)
		return code, stderr.String()
	}
	code, stderr := runner("-sandbox", "off", "-default-image", "alpine:3.20", "-image-for", "ubuntu-latest=ubuntu:24.04")
	require.Equal(t, ExitInvalid, code, stderr)
	require.Contains(t, stderr, "cikit runner: -default-image, -image-for: jobs run in images only in the sandbox, and -sandbox is off")
	code, stderr = runner("-image-for", "ubuntu-latest")
	require.Equal(t, ExitInvalid, code, stderr)
	require.Contains(t, stderr, `invalid value "ubuntu-latest" for flag -image-for: want LABEL=IMAGE, neither of them empty`)
	code, stderr = runner("-pull-policy", "sometimes")
	require.Equal(t, ExitInvalid, code, stderr)
	require.Contains(t, stderr, `-pull-policy must be always, if-not-present or never, not "sometimes"`)

	for _, tc := range []struct {
		run  bool
		args []string
		host bool
	}{
		{false, nil, true},
		{false, []string{"-default-image", "alpine:3.20"}, false},
		{false, []string{"-default-image", "alpine:3.20", "-host-jobs"}, true},
		{false, []string{"-host-jobs=false"}, false},
		{true, []string{"-default-image", "alpine:3.20"}, true},
		{true, []string{"-host-jobs=false"}, false},
	} {
		fs := newFlags("test", "", io.Discard)
		f := addImageFlags(fs, tc.run)
		require.NoError(t, fs.Parse(tc.args))
		im, err := f.images()
		require.NoError(t, err)
		require.Equal(t, tc.host, im.Host, "run %v, %v", tc.run, tc.args)
	}

	fs := newFlags("test", "", io.Discard)
	f := addImageFlags(fs, false)
	require.NoError(t, fs.Parse([]string{"-image-dir", "/images", "-image-for", "a=x:1", "-image-for", "b=y:1", "-registry-mirror", "index.docker.io=m1",
		"-registry-mirror", "index.docker.io=m2", "-insecure-registry", "localhost:5000", "-image-budget", "2G", "-docker-config", ""}))
	im, err := f.images()
	require.NoError(t, err)
	require.Equal(t, image.Config{Dir: "/images", Budget: 2 << 30, Mirrors: map[string][]string{"index.docker.io": {"m1", "m2"}}, Insecure: []string{"localhost:5000"}}, im.Pull)
	require.Equal(t, map[string]string{"a": "x:1", "b": "y:1"}, im.Labels)
	require.Equal(t, image.PullAlways, im.PullPolicy)
}
