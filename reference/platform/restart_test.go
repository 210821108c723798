package platform_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/internal/syncbuf"
	"github.com/cikit/cikit/reference/cli"
	"github.com/cikit/cikit/vcs/status"
)

// envServe makes the test binary run `cikit serve` instead of the tests:
// how TestKillAndRestart starts a server it can SIGKILL.
const envServe = "CIKIT_TEST_SERVE"

// serveMain runs `cikit serve` with the config file the environment names,
// when the test binary was started for that.
func serveMain() (int, bool) {
	path := os.Getenv(envServe)
	if path == "" {
		return 0, false
	}
	return cli.Main(context.Background(), []string{"serve", "-config", path}, os.Stdout, os.Stderr), true
}

// slowPipeline has a job that runs long enough to kill the server under
// it.
const slowPipeline = `jobs:
  setup:
    steps:
      - echo setup
  build:
    needs: [setup]
    steps:
      - echo "build starts"
      - sleep 4
      - echo "build done"
  deploy:
    needs: [build]
    steps:
      - echo deployed
`

// TestKillAndRestart: `cikit serve` on PostgreSQL is killed (SIGKILL) while
// a job runs and started again; the run finishes, every job that had
// finished keeps its one attempt, the killed job's attempt is retried
// once, and the statuses are reported.
func TestKillAndRestart(t *testing.T) {
	w := newWorld(t, map[string]string{".cikit.yml": slowPipeline})
	w.onPostgres(t)
	addr := freeAddr(t)
	cfgPath := filepath.Join(w.root, "serve.yml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(fmt.Sprintf(`listen: %s
data-dir: %s
shutdown-timeout: 10s
postgres: {url: %q, migrate: true, max-conns: 8}
redis: {url: %q, key-prefix: %q}
kafka: {partitions: 2}
s3: {bucket: %s, region: %s, endpoint: %q, access-key-id: %s, secret-access-key: %s}
vcs:
  provider: local
  statuses: github
  local: {root: %s}
  github: {base-url: %q, token: %s}
webhooks: {github-secrets: [%s]}
runners:
  local: 2
  registration-tokens: [e2e-registration-token]
  signing-keys: [%s]
  lease-ttl: 3s
`, addr, filepath.Join(w.root, "data"), w.cfg.Postgres.URL, w.cfg.Redis.URL, w.cfg.Redis.KeyPrefix,
		w.cfg.S3.Bucket, w.cfg.S3.Region, w.cfg.S3.Endpoint, w.cfg.S3.AccessKeyID, w.cfg.S3.SecretAccessKey,
		w.cfg.VCS.Local.Root, w.ghURL, githubToken, webhookSecret, strings.Repeat("s", 32))), 0o600))
	base := "http://" + addr

	first := startServe(t, cfgPath, base)
	code, body := deliver(t, base, "delivery-kill", pushBody(w.sha))
	require.Equal(t, 202, code, body)
	waitFor(t, 60*time.Second, "build to run", func() bool {
		st, ok := w.statuses(t)[status.JobContext(".cikit.yml", "build")]
		return ok && strings.HasPrefix(st.Description, "running")
	})
	first.kill(t)

	startServe(t, cfgPath, base)
	got := w.waitStatuses(t, 90*time.Second, "setup", "build", "deploy")
	pipe := got[status.PipelineContext(".cikit.yml")]
	require.Equal(t, "success", pipe.State, "%+v", got)
	for _, id := range []string{"setup", "build", "deploy"} {
		require.Equal(t, "success", got[status.JobContext(".cikit.yml", id)].State, id)
	}
	runID := runIDOf(t, pipe)
	attempts := func(job string) int {
		var j struct {
			Attempt  int   `json:"attempt"`
			Attempts []any `json:"attempts"`
		}
		require.Equal(t, 200, getJSON(t, base+"/api/v1/runs/"+runID+"/jobs/"+job, &j))
		return j.Attempt
	}
	require.Equal(t, 1, attempts("setup"), "setup ran again")
	require.Equal(t, 2, attempts("build"), "the killed attempt of build is retried once")
	require.Equal(t, 1, attempts("deploy"))
	code, text := getText(t, base+"/api/v1/runs/"+runID+"/jobs/build/log")
	require.Equal(t, 200, code, text)
	require.Equal(t, 1, strings.Count(text, "\nbuild done\n"), text)

	var list struct {
		Runs []struct{ ID string } `json:"runs"`
	}
	require.Equal(t, 200, getJSON(t, base+"/api/v1/runs", &list))
	require.Len(t, list.Runs, 1, "one run for the delivery")
}

// process is a `cikit serve` process.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// kill kills the process with SIGKILL and waits for it to end.
func (p *process) kill(t *testing.T) {
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	<-p.done
}

// startServe starts the test binary as `cikit serve` and waits until it is
// ready; it is stopped (SIGTERM) when the test ends.
func startServe(t *testing.T, cfgPath, base string) *process {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envServe+"="+cfgPath)
	// The banner on stdout has the admin token this process made.
	var banner syncbuf.Buffer
	cmd.Stdout = &banner
	if testing.Verbose() {
		cmd.Stdout, cmd.Stderr = io.MultiWriter(&banner, os.Stderr), os.Stderr
	}
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Error("cikit serve did not stop within 30s of SIGTERM")
		}
	})
	waitFor(t, 30*time.Second, "cikit serve to be ready", func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if u, err := url.Parse(base); err == nil {
		if _, ok := adminTokens.Load(u.Host); ok {
			// A restart on the same database makes no admin: the first
			// one's token goes on working.
			require.NotRegexp(t, adminLine, banner.String(), "a restarted server makes no new admin token")
			return &process{cmd: cmd, done: done}
		}
	}
	var token string
	waitFor(t, 10*time.Second, "the banner's admin token", func() bool {
		m := adminLine.FindStringSubmatch(banner.String())
		if m != nil {
			token = m[1]
		}
		return m != nil
	})
	rememberAdmin(t, base, token)
	return &process{cmd: cmd, done: done}
}

// adminLine is the banner's line of the admin token.
var adminLine = regexp.MustCompile(`admin: +token (cikit_\S+)`)

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}
