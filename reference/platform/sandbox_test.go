package platform_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	fleetprocess "github.com/cikit/cikit/fleet/process"
	"github.com/cikit/cikit/internal/imagetest"
	"github.com/cikit/cikit/reference/platform"
	"github.com/cikit/cikit/vcs/status"
)

// envPipeline prints a job's whole environment.
const envPipeline = `jobs:
  env:
    steps:
      - env
`

// TestJobsDoNotSeeTheServersEnvironment: the server's secrets, in its
// environment as a deployment puts them, never reach a job of its local
// runners, whose jobs run with the default limits. It failed before jobs' environments were built from an
// allow-list, when local runners handed jobs os.Environ().
func TestJobsDoNotSeeTheServersEnvironment(t *testing.T) {
	secrets := map[string]string{
		"CIKIT_RUNNERS_SIGNING_KEYS":        strings.Repeat("k", 40),
		"CIKIT_RUNNERS_REGISTRATION_TOKENS": "registration-token-in-the-environment",
		"CIKIT_WEBHOOKS_GITHUB_SECRETS":     "webhook-secret-in-the-environment",
		"CIKIT_VCS_GITHUB_TOKEN":            "github-token-in-the-environment",
		"DATABASE_URL":                      "postgres://cikit:pg-password-in-the-environment@db/cikit",
		"PGPASSWORD":                        "pg-password-in-the-environment",
	}
	for k, v := range secrets { // t.Setenv: not parallel
		t.Setenv(k, v)
	}
	w := newWorld(t, map[string]string{".cikit.yml": envPipeline})
	w.cfg.Runners.Local = 1
	s := serve(t, w.cfg)
	code, body := deliver(t, s.p.URL(), "delivery-env", pushBody(w.sha))
	require.Equal(t, 202, code, body)
	got := w.waitStatuses(t, 60*time.Second, "env")
	require.Equal(t, "success", got[status.JobContext(".cikit.yml", "env")].State, "%+v", got)
	code, text := getText(t, s.p.URL()+"/api/v1/runs/"+runIDOf(t, got[status.PipelineContext(".cikit.yml")])+"/jobs/env/log")
	require.Equal(t, 200, code, text)
	require.Contains(t, text, "CIKIT_JOB_ID=env")
	// Sandboxed with the default limits, which the log's header states.
	require.Contains(t, text, fmt.Sprintf("--- limits: processes %d (rlimit)", fleetprocess.DefaultLimits().Processes))
	for _, secret := range []string{w.cfg.Runners.SigningKeys[0], w.cfg.Runners.RegistrationTokens[0], w.cfg.Webhooks.GitHubSecrets[0], githubToken} {
		require.NotContains(t, text, secret, "a job saw the server's configuration")
	}
	for k, v := range secrets {
		require.NotContains(t, text, k+"=", "a job saw the server's %s", k)
		require.NotContains(t, text, v)
	}
}

// pathWithout returns a PATH of one directory that has every program of
// the current PATH but name.
func pathWithout(t *testing.T, name string) string {
	dir := t.TempDir()
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if e.Name() == name {
				continue
			}
			// The first of a name in PATH wins, as it does for the shell.
			_ = os.Symlink(filepath.Join(d, e.Name()), filepath.Join(dir, e.Name()))
		}
	}
	return dir
}

// TestServeRefusesToRunUnsandboxed: without bubblewrap the server does not
// start, and says how to switch the sandbox off, unless it is switched
// off. It failed before, when runners.sandbox auto ran jobs unsandboxed
// with a warning.
func TestServeRefusesToRunUnsandboxed(t *testing.T) {
	t.Setenv("PATH", pathWithout(t, "bwrap")) // not parallel
	w := newWorld(t, map[string]string{".cikit.yml": envPipeline})
	w.cfg.Runners.Local = 1
	for _, mode := range []string{"auto", "require"} {
		w.cfg.Runners.Sandbox = mode
		ctx, cancel := context.WithCancel(context.Background())
		p, err := platform.New(ctx, w.cfg, platform.Options{Logger: testLogger(t)})
		if err == nil {
			p.Close()
		}
		cancel()
		require.Error(t, err, "runners.sandbox %s without bubblewrap", mode)
		require.ErrorContains(t, err, "refusing to run jobs unsandboxed")
		require.ErrorContains(t, err, "-runners.sandbox off")
	}

	w.cfg.Runners.Sandbox = "off"
	s := serve(t, w.cfg)
	code, body := deliver(t, s.p.URL(), "delivery-off", pushBody(w.sha))
	require.Equal(t, 202, code, body)
	got := w.waitStatuses(t, 60*time.Second, "env")
	require.Equal(t, "success", got[status.JobContext(".cikit.yml", "env")].State, "%+v", got)
}

// TestLocalRunnersRunJobsInTheirImages: a job of the embedded platform
// naming an image runs in it on a local runner, pulled from the
// registry into the image directory under the data directory; a job
// naming none runs on the host beside it.
func TestLocalRunnersRunJobsInTheirImages(t *testing.T) {
	reg := imagetest.NewRegistry(t, nil)
	reg.Push(t, "test/busybox:1", imagetest.BusyboxImage(t, "1"))
	w := newWorld(t, map[string]string{".cikit.yml": `jobs:
  in-image:
    image: ` + reg.Host + `/test/busybox:1
    steps:
      - grep -E '^(ID|VERSION_ID)=' /etc/os-release
  on-host:
    steps:
      - grep ^ID= /etc/os-release || echo no os-release
`})
	w.cfg.Runners.Local = 1
	w.cfg.Runners.Images.Insecure = []string{reg.Host}
	s := serve(t, w.cfg)
	code, body := deliver(t, s.p.URL(), "delivery-images", pushBody(w.sha))
	require.Equal(t, 202, code, body)
	got := w.waitStatuses(t, 60*time.Second, "in-image", "on-host")
	run := runIDOf(t, got[status.PipelineContext(".cikit.yml")])
	logOf := func(job string) string {
		code, text := getText(t, s.p.URL()+"/api/v1/runs/"+run+"/jobs/"+job+"/log")
		require.Equal(t, 200, code, text)
		return text
	}
	inImage, onHost := logOf("in-image"), logOf("on-host")
	require.Equal(t, "success", got[status.JobContext(".cikit.yml", "in-image")].State, inImage)
	require.Equal(t, "success", got[status.JobContext(".cikit.yml", "on-host")].State, onHost)
	require.Contains(t, inImage, "\nID=cikit-busybox\nVERSION_ID=1\n")
	require.Contains(t, inImage, "--- pulling "+reg.Host+"/test/busybox:1 (pull policy always)\n")
	require.NotContains(t, onHost, "cikit-busybox")
	entries, err := os.ReadDir(filepath.Join(w.cfg.DataDir, "images", "blobs", "sha256"))
	require.NoError(t, err, "the image is cached under the data directory")
	require.NotEmpty(t, entries)
}
