package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/cikit/cikit/ingest"
	"github.com/cikit/cikit/reference/config"
	"github.com/cikit/cikit/reference/platform"
)

const (
	// org and repo name the benchmarks' repository.
	org, repo = "bench", "app"
	// hookID is the X-GitHub-Hook-ID of every delivery.
	hookID            = "1"
	webhookSecret     = "bench-webhook-secret"
	registrationToken = "bench-registration-token"
)

// checkGit reports whether git, which the local repositories need, can
// be run.
func checkGit() error {
	if _, err := exec.LookPath("git"); err != nil {
		return fmt.Errorf("bench: the scenarios push commits of a local git repository: %w", err)
	}
	return nil
}

// envOptions shape a scenario's platform.
type envOptions struct {
	// pipeline is the .cikit.yml of the repository's first commit.
	pipeline string
	// files are the first commit's other files, by slash-separated path.
	files map[string]string
	// localRunners is how many runners the platform runs itself.
	localRunners int
}

// env is one scenario's platform with its own git repository, data
// directory, PostgreSQL schema and Redis key prefix.
type env struct {
	p      *platform.Platform
	url    string
	repo   string
	sha    string // the first commit
	client *http.Client
	seq    atomic.Int64 // numbers deliveries and fake commits

	stop     context.CancelFunc
	done     chan error
	cleanups []func() error
}

// newEnv starts a platform for a scenario and waits until it is ready.
func (b *bencher) newEnv(ctx context.Context, name string, o envOptions) (_ *env, err error) {
	e := &env{done: make(chan error, 1)}
	defer func() {
		if err != nil {
			err = errors.Join(err, e.close())
		}
	}()
	dir, err := os.MkdirTemp("", "cikit-bench-")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	e.cleanups = append(e.cleanups, func() error { return os.RemoveAll(dir) })
	// The runners' sandboxes, whose user is not root's, show the jobs the
	// git cache under it (data/git-cache), which their checkouts borrow
	// from: it must let that user search it, not list it.
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	root := filepath.Join(dir, "repos")
	e.repo = filepath.Join(root, org, repo)
	if err := os.MkdirAll(e.repo, 0o755); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if _, err := e.git(ctx, "init", "-q", "-b", "main"); err != nil {
		return nil, err
	}
	files := map[string]string{".cikit.yml": o.pipeline}
	maps.Copy(files, o.files)
	if e.sha, err = e.commitFiles(ctx, "the pipeline", files); err != nil {
		return nil, err
	}

	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.ShutdownTimeout = 10 * time.Second
	cfg.VCS.Local.Root = root
	cfg.Webhooks.GitHubSecrets = []string{webhookSecret}
	cfg.Runners.Local = o.localRunners
	// log-ingest's logs are larger than the default limit of a job's log:
	// it measures ingest, not the cut.
	cfg.Limits.LogBytes = int64(b.sizes.logChunks) * 64 << 10 * 2
	cfg.Runners.RegistrationTokens = []string{registrationToken}
	cfg.Runners.SigningKeys = []string{rand.Text() + rand.Text()}
	cfg.Log.Level = "warn"
	// The scenarios send from one address as fast as the platform takes
	// it: they measure the platform, not the per-source limit.
	cfg.HTTP.SourceRequestsPerMinute = 0
	unique := randomHex()
	if b.cfg.Tag != "" {
		unique = b.cfg.Tag + "_" + unique
	}
	if b.cfg.PostgresURL != "" {
		u, drop, err := createSchema(ctx, b.cfg.PostgresURL, "bench_"+unique+"_"+strings.ReplaceAll(name, "-", "_"))
		if err != nil {
			return nil, err
		}
		e.cleanups = append(e.cleanups, drop)
		cfg.Postgres = config.Postgres{URL: u, Migrate: true}
	}
	if b.cfg.RedisURL != "" {
		prefix := "cikit-bench:" + unique + ":"
		e.cleanups = append(e.cleanups, func() error { return deleteKeys(b.cfg.RedisURL, prefix) })
		cfg.Redis = config.Redis{URL: b.cfg.RedisURL, KeyPrefix: prefix}
	}

	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	p, err := platform.New(runCtx, cfg, platform.Options{Logger: b.log.With("scenario", name)})
	if err != nil {
		stop()
		return nil, fmt.Errorf("bench: start the platform: %w", err)
	}
	e.p, e.url, e.stop = p, p.URL(), stop
	go func() { e.done <- p.Run(runCtx) }()
	e.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true}}
	err = poll(ctx, 30*time.Second, 10*time.Millisecond, "the platform to be ready", func() (bool, error) {
		select {
		case err := <-e.done:
			e.done <- err
			return false, fmt.Errorf("the platform stopped: %w", err)
		default:
		}
		return p.Ready(ctx) == nil, nil
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// close stops the platform, then drops the schema, deletes the Redis keys
// and removes the directory.
func (e *env) close() error {
	var errs []error
	if e.stop != nil {
		e.stop()
		select {
		case err := <-e.done:
			if err != nil {
				errs = append(errs, fmt.Errorf("bench: the platform: %w", err))
			}
		case <-time.After(30 * time.Second):
			errs = append(errs, errors.New("bench: the platform did not stop within 30s"))
		}
		e.stop = nil
	}
	if e.client != nil {
		e.client.CloseIdleConnections()
	}
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		if err := e.cleanups[i](); err != nil {
			errs = append(errs, err)
		}
	}
	e.cleanups = nil
	return errors.Join(errs...)
}

// git runs git in the repository and returns its trimmed output.
func (e *env) git(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-c", "user.name=bench", "-c", "user.email=bench@example.com", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = e.repo
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("bench: git %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// commitFiles writes files (by slash-separated path, their folders
// made), commits them and returns the new SHA.
func (e *env) commitFiles(ctx context.Context, msg string, files map[string]string) (string, error) {
	for name, content := range files {
		path := filepath.Join(e.repo, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return "", fmt.Errorf("bench: %w", err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return "", fmt.Errorf("bench: %w", err)
		}
	}
	if _, err := e.git(ctx, "add", "-A"); err != nil {
		return "", err
	}
	if _, err := e.git(ctx, "commit", "-q", "--allow-empty", "-m", msg); err != nil {
		return "", err
	}
	return e.git(ctx, "rev-parse", "HEAD")
}

// fakeBefore returns a commit id no delivery used before, as the "before"
// of a push: pushes of the same commit with different befores are
// different pushes (their semantic keys differ).
func (e *env) fakeBefore() string {
	return fmt.Sprintf("%040x", e.seq.Add(1))
}

// pushBody is a GitHub push event of branch from before to sha. The
// payload names branch the repository's default branch: a push to any
// other waits ingest.DefaultDebounce (2 s) for a pull request of it, by
// design, which is not what the scenarios measure.
func pushBody(branch, before, sha string) []byte {
	now := time.Now().UTC().Format(time.RFC3339)
	return fmt.Appendf(nil, `{"ref": "refs/heads/%s", "before": %q, "after": %q, "created": false, "deleted": false,
		"head_commit": {"id": %q, "timestamp": %q, "added": [], "removed": [], "modified": [".cikit.yml"]},
		"commits": [{"id": %q, "timestamp": %q, "added": [], "removed": [], "modified": [".cikit.yml"]}],
		"repository": {"name": %q, "full_name": %q, "default_branch": %q, "owner": {"login": %q}},
		"pusher": {"name": "bench"}, "sender": {"login": "bench"}}`,
		branch, before, sha, sha, now, sha, now, repo, org+"/"+repo, branch, org)
}

// deliver posts a signed GitHub push webhook and checks that it was taken
// (202).
func (e *env) deliver(ctx context.Context, delivery string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url+"/webhooks/github", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-GitHub-Hook-ID", hookID)
	req.Header.Set("X-Hub-Signature-256", ingest.SignGitHub(webhookSecret, body))
	resp, err := e.client.Do(req)
	if err != nil {
		return fmt.Errorf("webhook %s: %w", delivery, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("webhook %s: %s: %s", delivery, resp.Status, bytes.TrimSpace(out))
	}
	return nil
}

// seen returns the record of a delivery, nil before it is taken in.
func (e *env) seen(ctx context.Context, delivery string) (*ingest.Delivery, error) {
	return e.p.Runs().Seen(ctx, &ingest.Event{Provider: ingest.GitHub, HookID: hookID, DeliveryID: delivery})
}

// waitRuns waits for a delivery's runs to be committed and returns their
// ids, polling the run store every interval.
func (e *env) waitRuns(ctx context.Context, delivery string, interval time.Duration) ([]string, error) {
	var ids []string
	err := poll(ctx, 60*time.Second, interval, "the runs of delivery "+delivery, func() (bool, error) {
		d, err := e.seen(ctx, delivery)
		if err != nil || d == nil {
			return false, err
		}
		if len(d.RunIDs) == 0 {
			return false, fmt.Errorf("delivery %s created no run: %s", delivery, d.Dropped)
		}
		ids = d.RunIDs
		return true, nil
	})
	return ids, err
}

// call makes a request of the runner protocol with a bearer token and
// decodes a JSON answer into out, checking the status.
func (e *env) call(ctx context.Context, method, path, token string, body any, want int, out any) error {
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.url+path, r)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(data))
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	return nil
}

// register registers a runner and returns its token.
func (e *env) register(ctx context.Context, name string) (string, error) {
	var out struct {
		RunnerToken string `json:"runner_token"`
	}
	err := e.call(ctx, http.MethodPost, "/v1/runners", registrationToken, map[string]any{"name": name}, http.StatusCreated, &out)
	return out.RunnerToken, err
}

// claimed is a job a runner was given.
type claimed struct {
	RunID    string `json:"run_id"`
	JobID    string `json:"job_id"`
	Attempt  int    `json:"attempt"`
	JobToken string `json:"job_token"`
}

// claim claims a job, waiting up to 10 seconds for one.
func (e *env) claim(ctx context.Context, runnerToken string) (*claimed, error) {
	var c claimed
	if err := e.call(ctx, http.MethodGet, "/v1/jobs/claim?wait=10", runnerToken, nil, http.StatusOK, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// complete reports a claimed job succeeded.
func (e *env) complete(ctx context.Context, c *claimed) error {
	path := "/v1/jobs/" + url.PathEscape(c.RunID) + "/" + url.PathEscape(c.JobID) + "/complete"
	return e.call(ctx, http.MethodPost, path, c.JobToken, map[string]any{"result": "succeeded", "exit_code": 0}, http.StatusOK, nil)
}

// logURL is the runner protocol's URL of a job's log.
func (e *env) logURL(runID, jobID string) string {
	return e.url + "/v1/jobs/" + url.PathEscape(runID) + "/" + url.PathEscape(jobID) + "/log"
}

// followRequest is a request of the API's live follow of a job attempt's
// log, as the platform's admin: the runner API takes log chunks, and
// people follow logs through the API, which checks their role.
func (e *env) followRequest(ctx context.Context, runID, jobID string, attempt int) (*http.Request, error) {
	u := e.url + "/api/v1/runs/" + url.PathEscape(runID) + "/jobs/" + url.PathEscape(jobID) + "/log/follow?attempt=" + strconv.Itoa(attempt)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+e.p.AdminToken())
	return req, nil
}

// poll calls cond every interval until it is true, fails, or within
// passes.
func poll(ctx context.Context, within, interval time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(within)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waited %s for %s", within, what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

func randomHex() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error
	return hex.EncodeToString(b[:])
}

// createSchema creates a schema on the server of base and returns a URL
// whose connections use it (search_path), and a function dropping it.
func createSchema(ctx context.Context, base, schema string) (string, func() error, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", nil, errors.New("bench: -postgres: not a postgres:// URL")
	}
	q := u.Query()
	q.Set("options", strings.TrimSpace(q.Get("options")+" -c search_path="+schema))
	// Encode writes spaces as "+", which libpq does not decode in URIs.
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	run := func(ctx context.Context, sql string) error {
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return fmt.Errorf("bench: postgresql: %w", err)
		}
		defer conn.Close(context.WithoutCancel(ctx))
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("bench: postgresql: %w", err)
		}
		return nil
	}
	ident := pgx.Identifier{schema}.Sanitize()
	if err := run(ctx, "CREATE SCHEMA "+ident); err != nil {
		return "", nil, err
	}
	drop := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return run(ctx, "DROP SCHEMA IF EXISTS "+ident+" CASCADE")
	}
	return u.String(), drop, nil
}

// deleteKeys deletes every key under prefix on the Redis of rawURL.
func deleteKeys(rawURL, prefix string) error {
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		return fmt.Errorf("bench: -redis: %w", err)
	}
	c := redis.NewClient(opts)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	iter := c.Scan(ctx, 0, prefix+"*", 500).Iterator()
	var batch []string
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 500 {
			if err := c.Unlink(ctx, batch...).Err(); err != nil {
				return fmt.Errorf("bench: redis: %w", err)
			}
			batch = batch[:0]
		}
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("bench: redis: %w", err)
	}
	if len(batch) > 0 {
		if err := c.Unlink(ctx, batch...).Err(); err != nil {
			return fmt.Errorf("bench: redis: %w", err)
		}
	}
	return nil
}
