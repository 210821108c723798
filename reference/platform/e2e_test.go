package platform_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/ingest"
	"github.com/cikit/cikit/internal/pgtest"
	"github.com/cikit/cikit/internal/redistest"
	"github.com/cikit/cikit/internal/s3test"
	"github.com/cikit/cikit/internal/testenv"
	"github.com/cikit/cikit/reference/config"
	"github.com/cikit/cikit/reference/platform"
	"github.com/cikit/cikit/vcs/github/githubtest"
	"github.com/cikit/cikit/vcs/status"
)

const (
	webhookSecret = "e2e-webhook-secret"
	githubToken   = "ghp_e2e"
	repoName      = "acme/app"
)

// pipeline fans out from setup to build, lint and test and back in to
// deploy; lint fails and is allowed to.
const pipeline = `jobs:
  setup:
    steps:
      - echo "setting up $CIKIT_JOB_ID"
  build:
    needs: [setup]
    steps:
      - printf '\033[32mbuilt\033[0m\n'
  lint:
    needs: [setup]
    allow_failure: true
    steps:
      - echo "lint found 3 problems"
      - exit 3
  test:
    needs: [setup]
    steps:
      - echo "ok  acme/app 0.01s"
  deploy:
    needs: [build, lint, test]
    steps:
      - echo deployed
`

var jobIDs = []string{"setup", "build", "lint", "test", "deploy"}

// world is what an end-to-end test runs against: a local git repository,
// a server speaking GitHub's API that receives the statuses, and the
// platform's configuration.
type world struct {
	root   string
	sha    string
	github *githubtest.Server
	ghURL  string
	cfg    *config.Config
}

func newWorld(t *testing.T, files map[string]string) *world {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		testenv.ToolUnavailable(t, "git", err)
	}
	w := &world{root: t.TempDir()}
	repo := filepath.Join(w.root, "repos", repoName)
	require.NoError(t, os.MkdirAll(repo, 0o755))
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-c", "user.name=e2e", "-c", "user.email=e2e@example.com", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = repo
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "-b", "main")
	for name, data := range files {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(repo, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(repo, name), []byte(data), 0o644))
	}
	git("add", "-A")
	git("commit", "-q", "-m", "the pipeline")
	w.sha = git("rev-parse", "HEAD")

	w.github = githubtest.NewServer(githubtest.Config{})
	srv := httptest.NewServer(w.github)
	t.Cleanup(srv.Close)
	w.ghURL = srv.URL + "/"
	w.github.AddToken(githubToken)
	require.NoError(t, w.github.CreateRepo(repoName, "main"))
	require.NoError(t, w.github.CommitAs(repoName, "main", w.sha, files))

	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = filepath.Join(w.root, "data")
	cfg.ShutdownTimeout = 10 * time.Second
	cfg.VCS.Local.Root = filepath.Join(w.root, "repos")
	cfg.VCS.Statuses = "github"
	cfg.VCS.GitHub = config.GitHub{BaseURL: w.ghURL, Token: githubToken}
	cfg.Webhooks.GitHubSecrets = []string{webhookSecret}
	cfg.Runners.Local = 2
	cfg.Runners.RegistrationTokens = []string{"e2e-registration-token"}
	cfg.Runners.SigningKeys = []string{strings.Repeat("s", 32)}
	cfg.Runners.LeaseTTL = 3 * time.Second
	cfg.Kafka.Partitions = 2
	w.cfg = cfg
	return w
}

// onPostgres moves the world's stores to PostgreSQL and Redis and its
// finished logs to S3 (a server in the test); Kafka stays in process.
func (w *world) onPostgres(t *testing.T) {
	db := pgtest.New(t)
	ns := redistest.New(t)
	s3 := s3test.New(t, "cikit-logs").Config("cikit-logs")
	w.cfg.S3 = config.S3{Bucket: s3.Bucket, Region: s3.Region, Endpoint: s3.Endpoint, AccessKeyID: s3.AccessKeyID, SecretAccessKey: s3.SecretAccessKey}
	w.cfg.Postgres = config.Postgres{URL: db.URL, Migrate: true, MaxConns: 8}
	w.cfg.Redis = config.Redis{URL: "redis://" + ns.Client.Options().Addr + "/" + fmt.Sprint(ns.Client.Options().DB), KeyPrefix: ns.Prefix}
}

// serving is a platform running in the test's process.
type serving struct {
	p    *platform.Platform
	done chan error
	stop context.CancelFunc
}

func serve(t *testing.T, cfg *config.Config) *serving {
	t.Helper()
	return serveLogging(t, cfg, testLogger(t))
}

func serveLogging(t *testing.T, cfg *config.Config, log *slog.Logger) *serving {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p, err := platform.New(ctx, cfg, platform.Options{Logger: log})
	if err != nil {
		cancel()
		require.NoError(t, err)
	}
	s := &serving{p: p, done: make(chan error, 1), stop: cancel}
	token := p.AdminToken()
	if cfg.Postgres.URL != "" {
		// The first platform on a database makes its admin; the others
		// on it, and the restarted ones, make none: theirs is the
		// first's.
		if token != "" {
			dbAdmins.Store(cfg.Postgres.URL, token)
		} else if tok, ok := dbAdmins.Load(cfg.Postgres.URL); ok {
			token = tok.(string)
		}
	}
	rememberAdmin(t, p.URL(), token)
	go func() { s.done <- p.Run(ctx) }()
	t.Cleanup(func() { s.shutdown(t) })
	waitFor(t, 20*time.Second, "the platform to be ready", func() bool { return p.Ready(ctx) == nil })
	return s
}

// shutdown stops the platform gracefully and checks that it stopped
// without error.
func (s *serving) shutdown(t *testing.T) {
	if s.stop == nil {
		return
	}
	s.stop()
	s.stop = nil
	select {
	case err := <-s.done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the platform did not shut down within 30s")
	}
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// pushBody is a GitHub push event of main to sha.
func pushBody(sha string) []byte {
	return fmt.Appendf(nil, `{"ref": "refs/heads/main", "before": "0000000000000000000000000000000000000000", "after": %q,
		"created": true, "deleted": false,
		"head_commit": {"id": %q, "timestamp": %q, "added": [".cikit.yml"], "removed": [], "modified": []},
		"commits": [{"id": %q, "timestamp": %q, "added": [".cikit.yml"], "removed": [], "modified": []}],
		"repository": {"name": "app", "full_name": %q, "default_branch": "main", "owner": {"login": "acme"}},
		"pusher": {"name": "alice"}, "sender": {"login": "alice"}}`,
		sha, sha, time.Now().UTC().Format(time.RFC3339), sha, time.Now().UTC().Format(time.RFC3339), repoName)
}

// deliver posts a signed GitHub push webhook and returns the answer's
// status and body.
func deliver(t *testing.T, base, delivery string, body []byte) (int, string) {
	t.Helper()
	return deliverEvent(t, base, "push", delivery, body)
}

// deliverEvent posts a signed GitHub webhook of event and returns the
// answer's status and body.
func deliverEvent(t *testing.T, base, event, delivery string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/webhooks/github", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-GitHub-Hook-ID", "7")
	req.Header.Set("X-Hub-Signature-256", ingest.SignGitHub(webhookSecret, body))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(out)
}

// statuses returns the latest commit status of each context at the fake
// GitHub.
func (w *world) statuses(t *testing.T) map[string]githubtest.Status {
	t.Helper()
	list, err := w.github.Statuses(repoName, w.sha)
	require.NoError(t, err)
	out := map[string]githubtest.Status{}
	for _, s := range list {
		out[s.Context] = s
	}
	return out
}

// waitStatuses waits for the commit statuses of the pipeline and of the
// given jobs to leave pending (they are posted concurrently, so the
// pipeline's may come first) and returns all statuses then.
func (w *world) waitStatuses(t *testing.T, within time.Duration, jobs ...string) map[string]githubtest.Status {
	t.Helper()
	contexts := []string{status.PipelineContext(".cikit.yml")}
	for _, j := range jobs {
		contexts = append(contexts, status.JobContext(".cikit.yml", j))
	}
	var got map[string]githubtest.Status
	done := func() bool {
		got = w.statuses(t)
		for _, c := range contexts {
			if st, ok := got[c]; !ok || st.State == "pending" {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(within); !done(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for the commit statuses; they are %+v", within, got)
		}
	}
	return got
}

// runIDOf takes the run's id from a status's target URL (…/runs/{id}).
func runIDOf(t *testing.T, st githubtest.Status) string {
	t.Helper()
	_, after, ok := strings.Cut(st.TargetURL, "/runs/")
	require.True(t, ok, "target URL %q", st.TargetURL)
	id, _, _ := strings.Cut(after, "/")
	return id
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// getJSON GETs a URL and decodes its JSON answer.
func getJSON(t *testing.T, url string, into any) int {
	t.Helper()
	status, body := getText(t, url)
	if status == http.StatusOK && into != nil {
		require.NoError(t, json.Unmarshal([]byte(body), into), "%s", body)
	}
	return status
}

// adminTokens are the admin tokens of the platforms the tests serve, by
// host: asAdmin sends them. dbAdmins are those the first platform on a
// PostgreSQL database made, by its URL.
var adminTokens, dbAdmins sync.Map

// rememberAdmin records the admin token of the platform at base.
func rememberAdmin(t *testing.T, base, token string) {
	t.Helper()
	u, err := url.Parse(base)
	require.NoError(t, err)
	require.NotEmpty(t, token, "the platform made an admin token")
	adminTokens.Store(u.Host, token)
	t.Cleanup(func() { adminTokens.Delete(u.Host) })
}

// asAdmin gives req the admin token of the platform it is for.
func asAdmin(req *http.Request) *http.Request {
	if tok, ok := adminTokens.Load(req.URL.Host); ok {
		req.Header.Set("Authorization", "Bearer "+tok.(string))
	}
	return req
}

// doAsAdmin sends req as the admin of its platform.
func doAsAdmin(req *http.Request) (*http.Response, error) {
	return http.DefaultClient.Do(asAdmin(req))
}

// adminProxy serves the platform at base to a browser as its admin: the
// proxy adds the admin token to every request, as a signed-in session
// would carry its cookie.
func adminProxy(t *testing.T, base string) string {
	t.Helper()
	u, err := url.Parse(base)
	require.NoError(t, err)
	tok, ok := adminTokens.Load(u.Host)
	require.True(t, ok)
	rp := httputil.NewSingleHostReverseProxy(u)
	director := rp.Director
	rp.Director = func(r *http.Request) {
		director(r)
		r.Header.Set("Authorization", "Bearer "+tok.(string))
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return srv.URL
}

// mustRequest is a request without a body.
func mustRequest(t *testing.T, method, target string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, target, nil)
	require.NoError(t, err)
	return req
}

// getText GETs a URL as the admin of its platform and returns its status
// and body.
func getText(t *testing.T, target string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, target, nil)
	require.NoError(t, err)
	resp, err := doAsAdmin(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}
