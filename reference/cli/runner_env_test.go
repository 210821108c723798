package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/internal/imagetest"
	"github.com/cikit/cikit/internal/testenv"
)

// TestRunnerJobsDoNotSeeItsEnvironment: a job run by `cikit runner` sees
// neither the runner's registration token nor anything else of its
// environment beyond the allow-list, here also holding the server's
// configuration. It failed before, when the runner handed jobs its whole
// environment minus CIKIT_REGISTRATION_TOKEN: the job printed the
// server's signing key and webhook secret.
func TestRunnerJobsDoNotSeeItsEnvironment(t *testing.T) {
	secrets := map[string]string{
		"CIKIT_REGISTRATION_TOKEN":          runnerToken,
		"CIKIT_RUNNERS_REGISTRATION_TOKENS": runnerToken,
		"CIKIT_RUNNERS_SIGNING_KEYS":        strings.Repeat("k", 40),
		"CIKIT_WEBHOOKS_GITHUB_SECRETS":     "webhook-secret-of-the-server",
		"PGPASSWORD":                        "pg-password-of-the-runner",
	}
	for k, v := range secrets { // t.Setenv: not parallel
		t.Setenv(k, v)
	}
	state, text := runOnRunner(t, "on: [manual]\njobs:\n  env:\n    steps:\n      - env\n", "env", "-name", "env-runner", "-image-dir", imageDir(t))
	require.Equal(t, "succeeded", state, text)
	require.Contains(t, text, "CIKIT_JOB_ID=env")
	for k, v := range secrets {
		require.NotContains(t, text, k+"=", "a job saw the runner's %s", k)
		require.NotContains(t, text, v)
	}
}

// TestRunnerRunsJobsInImages: `cikit runner -default-image` runs a job
// naming no image in that image, pulled from the registry into
// -image-dir.
func TestRunnerRunsJobsInImages(t *testing.T) {
	t.Parallel()
	reg := imagetest.NewRegistry(t, nil)
	reg.Push(t, "test/busybox:1", imagetest.BusyboxImage(t, "1"))
	ref := reg.Host + "/test/busybox:1"
	state, text := runOnRunner(t, "on: [manual]\njobs:\n  os:\n    steps:\n      - grep ^ID= /etc/os-release\n", "os",
		"-image-dir", imageDir(t), "-insecure-registry", reg.Host, "-default-image", ref)
	require.Equal(t, "succeeded", state, text)
	require.Contains(t, text, "--- image: "+ref+" (the runner's default image)\n")
	require.Contains(t, text, "\nID=cikit-busybox\n")
}

// runnerToken is the registration token of runOnRunner's server and
// runner: the one TestRunnerJobsDoNotSeeItsEnvironment puts in their
// environment.
const runnerToken = "runner-registration-token"

// runOnRunner serves a repository holding the native pipeline pipeline
// with no local runners, starts `cikit runner` with args on it, runs the
// pipeline and returns the state of its run and the log of job, once
// the run has ended; then it stops both.
func runOnRunner(t *testing.T, pipeline, job string, args ...string) (state, log string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		testenv.ToolUnavailable(t, "git", err)
	}
	dir := t.TempDir()
	repo := filepath.Join(dir, "repos", "acme", "app")
	require.NoError(t, os.MkdirAll(repo, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(repo, ".cikit.yml"), []byte(pipeline), 0o644))
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "pipeline"}} {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = repo
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out, w := io.Pipe()
	served := make(chan int, 1)
	go func() {
		served <- Main(ctx, []string{"serve", "-listen", "127.0.0.1:0", "-data-dir", dir, "-runners.local", "0", "-runners.registration-tokens", runnerToken}, w, io.Discard)
		w.Close()
	}()
	// The banner says where the platform is and the admin token it made.
	var url, token string
	sc := bufio.NewScanner(out)
	for (url == "" || token == "") && sc.Scan() {
		if m := regexp.MustCompile(`serving at (http://127\.0\.0\.1:\d+)`).FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
		}
		if m := regexp.MustCompile(`admin: +token (cikit_\S+)`).FindStringSubmatch(sc.Text()); m != nil {
			token = m[1]
		}
	}
	require.NotEmpty(t, url)
	require.NotEmpty(t, token)
	go func() { _, _ = io.Copy(io.Discard, out) }()

	ran := make(chan int, 1)
	go func() {
		ran <- Main(ctx, append([]string{"runner", "-server", url, "-registration-token", runnerToken}, args...), io.Discard, io.Discard)
	}()

	req, err := http.NewRequest(http.MethodPost, url+"/api/v1/repos/acme/app/pipelines", strings.NewReader(`{"ref":"main"}`))
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", "runner-1")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	var trig struct {
		RunIDs []string `json:"run_ids"`
	}
	require.Equal(t, http.StatusCreated, doJSON(t, req, &trig))
	require.Len(t, trig.RunIDs, 1)
	run := url + "/api/v1/runs/" + trig.RunIDs[0]
	var st struct {
		State string `json:"state"`
	}
	require.Eventually(t, func() bool {
		get, _ := http.NewRequest(http.MethodGet, run, nil)
		get.Header.Set("Authorization", "Bearer "+token)
		return doJSON(t, get, &st) == http.StatusOK && (st.State == "succeeded" || st.State == "failed")
	}, 60*time.Second, 20*time.Millisecond)
	get, err := http.NewRequest(http.MethodGet, run+"/jobs/"+job+"/log", nil)
	require.NoError(t, err)
	get.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(get)
	require.NoError(t, err)
	logText, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)

	cancel()
	for _, c := range []chan int{ran, served} {
		select {
		case code := <-c:
			require.Equal(t, ExitOK, code)
		case <-time.After(30 * time.Second):
			t.Fatal("cikit runner or serve did not stop")
		}
	}
	return st.State, string(logText)
}

func doJSON(t *testing.T, req *http.Request, into any) int {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if resp.StatusCode < 300 {
		require.NoError(t, json.Unmarshal(body, into), fmt.Sprintf("%s", body))
	}
	return resp.StatusCode
}

// TestRunnerRefusesToRunUnsandboxed: without bubblewrap, -sandbox auto
// (the default) refuses to start and says how to switch the sandbox off.
// It failed before, when auto ran jobs unsandboxed with a warning.
func TestRunnerRefusesToRunUnsandboxed(t *testing.T) {
	// A PATH with a shell and git, which checkouts need, and no bwrap.
	// t.Setenv: not parallel.
	bin := t.TempDir()
	for _, prog := range []string{"sh", "git"} {
		p, err := exec.LookPath(prog)
		require.NoError(t, err)
		require.NoError(t, os.Symlink(p, filepath.Join(bin, prog)))
	}
	t.Setenv("PATH", bin)
	var stderr strings.Builder
	// Bounded only for a runner that would start (and retry the server).
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	code := Main(ctx, []string{"runner", "-server", "http://127.0.0.1:1", "-registration-token", "t"}, io.Discard, &stderr)
	require.Equal(t, ExitInvalid, code, stderr.String())
	require.Contains(t, stderr.String(), "refusing to run jobs unsandboxed")
	require.Contains(t, stderr.String(), "-sandbox off")
}
