package process_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet/image"
	"github.com/cikit/cikit/fleet/process"
	"github.com/cikit/cikit/internal/imagetest"
	"github.com/cikit/cikit/internal/syncbuf"
)

// withImages gives the executor an image store over reg, configured
// further by mutate.
func withImages(t testing.TB, reg *imagetest.Registry, mutate ...func(*process.Images)) func(*process.Config) {
	return func(c *process.Config) {
		c.Sandbox = &process.Sandbox{}
		// The image directory need not be the sandbox user's to reach:
		// the jobs' views are in WorkRoot.
		c.Images = &process.Images{Pull: image.Config{Dir: filepath.Join(t.TempDir(), "images"), Insecure: []string{reg.Host}}}
		for _, m := range mutate {
			m(c.Images)
		}
	}
}

// TestImagesJobRunsInItsImage: a job naming an image runs in it, pulled
// from the registry by the executor: it sees the image's os-release and
// tools, its root writes to /usr (the image's files are the sandbox
// user's on the host), and the next job on the image gets a fresh view
// of it. The digest it ran on is in its result; the views are gone after.
func TestImagesJobRunsInItsImage(t *testing.T) {
	t.Parallel()
	reg := imagetest.NewRegistry(t, nil)
	pushed := reg.Push(t, "test/busybox:3.19", imagetest.BusyboxImage(t, "3.19"))
	b := setup(t, withImages(t, reg))
	ref := reg.Host + "/test/busybox:3.19"

	res := b.exec.RunJob(context.Background(), process.Job{Spec: &cikit.JobSpec{ID: "first", Format: "gitlab", Image: ref, Steps: steps(
		`grep -E '^(ID|VERSION_ID)=' /etc/os-release`,
		`echo "uid=$(id -u)"; echo mine > /usr/x; cat /usr/x`,
		`if [ -e /usr/bin/git ]; then echo "host git"; else echo "no git"; fi`,
	)}})
	out := b.out.String()
	require.Equal(t, cikit.JobSucceeded, res.State, out)
	require.Equal(t, pushed.DigestStr(), res.ImageDigest)
	require.Contains(t, out, "--- pulling "+ref+" (pull policy always)\n")
	require.Contains(t, out, "--- image "+ref+" is "+pushed.DigestStr())
	require.Contains(t, out, "\nID=cikit-busybox\nVERSION_ID=3.19\n")
	require.Contains(t, out, "\nuid=0\nmine\n", "the image's root writes to /usr")
	require.Contains(t, out, "\nno git\n")
	_, err := os.Lstat("/usr/x")
	require.ErrorIs(t, err, os.ErrNotExist, "the host's /usr is untouched")

	b.out.Reset()
	res = b.exec.RunJob(context.Background(), process.Job{Spec: &cikit.JobSpec{ID: "second", Format: "gitlab", Image: ref,
		ImageOptions: &cikit.ImageOptions{PullPolicy: []string{cikit.PullIfNotPresent}},
		Steps:        steps(`if [ -e /usr/x ]; then echo "sees the first job's file"; else echo fresh; fi`)}})
	require.Equal(t, cikit.JobSucceeded, res.State, b.out.String())
	require.Contains(t, b.out.String(), "\nfresh\n", "a job writing to /usr does not change the next job's view")
	require.Contains(t, b.out.String(), "(pull policy if-not-present)")

	views, err := filepath.Glob(filepath.Join(b.work, "*.cikit-views"))
	require.NoError(t, err)
	require.Empty(t, views, "the jobs' views are thrown away")
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	require.NotContains(t, string(mounts), b.work, "no view is left mounted")
}

// TestImagesAtOnce runs two jobs on two images at the same time, each
// held until both have started: each sees its own image.
func TestImagesAtOnce(t *testing.T) {
	t.Parallel()
	reg := imagetest.NewRegistry(t, nil)
	reg.Push(t, "test/busybox:1", imagetest.BusyboxImage(t, "1"))
	reg.Push(t, "test/busybox:2", imagetest.BusyboxImage(t, "2"))
	b := setup(t, withImages(t, reg))
	release := filepath.Join(b.work, "release")
	require.NoError(t, os.MkdirAll(release, 0o777))
	require.NoError(t, os.Chmod(release, 0o777))
	outs := []*syncbuf.Buffer{{}, {}}
	results := make(chan process.Result, 2)
	for i, v := range []string{"1", "2"} {
		go func() {
			results <- b.exec.RunJob(context.Background(), process.Job{Output: outs[i], Spec: &cikit.JobSpec{ID: "at-once-" + v, Image: reg.Host + "/test/busybox:" + v,
				Steps: steps(`grep ^VERSION_ID= /etc/os-release; echo started`)}})
		}()
	}
	for range 2 {
		r := <-results
		require.Equal(t, cikit.JobSucceeded, r.State, r.Reason)
	}
	for i, out := range outs {
		require.Contains(t, out.String(), "\nVERSION_ID="+[]string{"1", "2"}[i]+"\nstarted\n")
	}
}

// TestImagesDefaultAndLabels: a job naming no image runs in the image
// of its runs-on label, as act -P maps them, or in the runner's default
// image; with neither it fails, unless the runner lets it run on the
// host, which its log then says.
func TestImagesDefaultAndLabels(t *testing.T) {
	t.Parallel()
	reg := imagetest.NewRegistry(t, nil)
	reg.Push(t, "test/busybox:1", imagetest.BusyboxImage(t, "1"))
	reg.Push(t, "test/busybox:2", imagetest.BusyboxImage(t, "2"))
	job := func(id string, runsOn ...string) process.Job {
		return process.Job{Spec: &cikit.JobSpec{ID: id, RunsOn: runsOn, Steps: steps(`grep ^ID= /etc/os-release || echo "no os-release"`)}}
	}

	b := setup(t, withImages(t, reg, func(im *process.Images) {
		im.Default = reg.Host + "/test/busybox:1"
		im.Labels = map[string]string{"ubuntu-latest": reg.Host + "/test/busybox:2"}
	}))
	res := b.exec.RunJob(context.Background(), job("labelled", "self-hosted", "ubuntu-latest"))
	require.Equal(t, cikit.JobSucceeded, res.State, b.out.String())
	require.Contains(t, b.out.String(), "--- image: "+reg.Host+"/test/busybox:2 (the runner's image for runs-on label ubuntu-latest)\n")
	b.out.Reset()
	res = b.exec.RunJob(context.Background(), job("default", "linux"))
	require.Equal(t, cikit.JobSucceeded, res.State, b.out.String())
	require.Contains(t, b.out.String(), "--- image: "+reg.Host+"/test/busybox:1 (the runner's default image)\n")
	require.Contains(t, b.out.String(), "\nID=cikit-busybox\n")

	strict := setup(t, withImages(t, reg))
	res = strict.exec.RunJob(context.Background(), job("nowhere"))
	require.Equal(t, cikit.JobFailed, res.State)
	require.Equal(t, cikit.FailureConfig, res.FailureClass)
	require.Contains(t, res.Reason, "this runner runs jobs only in images")

	host := setup(t, withImages(t, reg, func(im *process.Images) { im.Host = true }))
	res = host.exec.RunJob(context.Background(), job("on-host"))
	require.Equal(t, cikit.JobSucceeded, res.State, host.out.String())
	require.Empty(t, res.ImageDigest)
	require.Contains(t, host.out.String(), "--- this job runs on the runner's host, not in an image")
	require.NotContains(t, host.out.String(), "ID=cikit-busybox")
}

// TestImagesFailureClasses: an unknown tag, an image not cached under
// pull policy never and denied credentials are the job's configuration
// failures, with the registry's word; an unreachable registry is the
// infrastructure's. A runner without images refuses a job naming one.
func TestImagesFailureClasses(t *testing.T) {
	t.Parallel()
	reg := imagetest.NewRegistry(t, nil)
	reg.Push(t, "test/busybox:1", imagetest.BusyboxImage(t, "1"))
	b := setup(t, withImages(t, reg, func(im *process.Images) { im.Pull.Insecure = append(im.Pull.Insecure, "127.0.0.1:1") }))
	for _, c := range []struct {
		name, image string
		policy      []string
		class       cikit.FailureClass
		reason      string
	}{
		{"unknown tag", reg.Host + "/test/busybox:nope", nil, cikit.FailureConfig, "MANIFEST_UNKNOWN"},
		{"never pulled", reg.Host + "/test/busybox:1", []string{cikit.PullNever}, cikit.FailureConfig, "never"},
		{"unreachable", "127.0.0.1:1/test/busybox:1", nil, cikit.FailureInfrastructure, "127.0.0.1:1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := b.exec.RunJob(context.Background(), process.Job{Output: &syncbuf.Buffer{}, Spec: &cikit.JobSpec{ID: "bad", Image: c.image,
				ImageOptions: &cikit.ImageOptions{PullPolicy: c.policy}, Steps: steps(`echo ran`)}})
			require.Equal(t, cikit.JobFailed, res.State)
			require.Equal(t, c.class, res.FailureClass, res.Reason)
			require.Contains(t, res.Reason, c.reason)
		})
	}

	plain := setup(t, sandboxed)
	res := plain.exec.RunJob(context.Background(), process.Job{Spec: &cikit.JobSpec{ID: "no-store", Image: "alpine:3.19", Steps: steps(`echo ran`)}})
	require.Equal(t, cikit.JobFailed, res.State)
	require.Equal(t, cikit.FailureInfrastructure, res.FailureClass)
	require.Contains(t, res.Reason, "this runner runs no images")
	require.NotContains(t, plain.out.String(), "\nran\n")
}

// TestImagesCredentials: a GitHub job's container.credentials, from its
// secrets, log in to a registry that wants them; the values never reach
// the log, and wrong ones are a configuration failure.
func TestImagesCredentials(t *testing.T) {
	t.Parallel()
	var locked atomic.Bool // after the test's own push
	reg := imagetest.NewRegistry(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); locked.Load() && (!ok || u != "robot" || p != "s3cret-pass") {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"who are you"}]}`, http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	reg.Push(t, "test/busybox:1", imagetest.BusyboxImage(t, "1"))
	locked.Store(true)
	b := setup(t, withImages(t, reg))
	job := func(secret string) process.Job {
		return process.Job{Output: &syncbuf.Buffer{}, Secrets: map[string]string{"REG_USER": "robot", "REG_PASS": secret}, Spec: &cikit.JobSpec{ID: "creds", Format: "github", Image: reg.Host + "/test/busybox:1",
			ImageOptions: &cikit.ImageOptions{Credentials: &cikit.RegistryCredentials{Username: "${{ secrets.REG_USER }}", Password: "${{ secrets.REG_PASS }}"}},
			Steps:        steps(`grep ^ID= /etc/os-release; env | grep -c s3cret || true`)}}
	}
	ok := job("s3cret-pass")
	res := b.exec.RunJob(context.Background(), ok)
	out := ok.Output.(*syncbuf.Buffer).String()
	require.Equal(t, cikit.JobSucceeded, res.State, out)
	require.Contains(t, out, "\nID=cikit-busybox\n0\n", "the credentials are not in the steps' environment")
	require.NotContains(t, out, "s3cret-pass")

	bad := job("wrong-pass")
	res = b.exec.RunJob(context.Background(), bad)
	require.Equal(t, cikit.JobFailed, res.State)
	require.Equal(t, cikit.FailureConfig, res.FailureClass, res.Reason)
	require.NotContains(t, bad.Output.(*syncbuf.Buffer).String(), "wrong-pass")
	require.True(t, strings.Contains(res.Reason, "UNAUTHORIZED") || strings.Contains(res.Reason, "who are you"), res.Reason)

	// Fetched from the platform, as a runner's are: before the pull.
	fetched := job("unused")
	fetched.Secrets = nil
	fetched.Spec.Secrets = []string{"REG_USER", "REG_PASS"}
	fetched.FetchSecrets = func(context.Context) (*process.FetchedSecrets, error) {
		return &process.FetchedSecrets{Values: map[string]string{"REG_USER": "robot", "REG_PASS": "s3cret-pass"}}, nil
	}
	res = b.exec.RunJob(context.Background(), fetched)
	out = fetched.Output.(*syncbuf.Buffer).String()
	require.Equal(t, cikit.JobSucceeded, res.State, out)
	require.NotContains(t, out, "s3cret-pass")
}
