package platform_test

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/reference/config"
	"github.com/cikit/cikit/vcs/github/githubtest"
	"github.com/cikit/cikit/vcs/gitlab/gitlabtest"
	"github.com/cikit/cikit/vcs/status"
)

// forgePipeline shows what its job sees: a file of the checked-out
// commit, the workspace's git configuration with where each entry comes
// from, and the whole environment.
const forgePipeline = `jobs:
  show:
    steps:
      - cat hello.txt
      - git config --list --show-origin
      - env
`

const forgeFiles = "forged at the pushed commit"

const githubAppID = 4242

// forgeJob is what the tests read of a job in the API.
type forgeJob struct {
	State    string   `json:"state"`
	Attempt  int      `json:"attempt"`
	Reason   string   `json:"reason"`
	Commit   string   `json:"commit"`
	EnvNames []string `json:"env_names"`
	Attempts []struct {
		Attempt int    `json:"attempt"`
		State   string `json:"state"`
		Reason  string `json:"reason"`
	} `json:"attempts"`
}

// onGitHub moves the world's repository to a fake GitHub that serves git
// over smart HTTP, and configures the platform with the github provider
// authenticated as an App installed on it and on acme/other: the
// pipeline is read, statuses are posted and the job's commit is fetched
// through GitHub. front, when set, stands in front of the fake GitHub.
func (w *world) onGitHub(t *testing.T, front func(http.Handler) http.Handler) *httptest.Server {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	keyFile := filepath.Join(w.root, "app.pem")
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600))

	gitDir := filepath.Join(w.root, "github-git")
	require.NoError(t, os.Mkdir(gitDir, 0o755))
	gh := githubtest.NewServer(githubtest.Config{GitDir: gitDir})
	var h http.Handler = gh
	if front != nil {
		h = front(gh)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	gh.AddApp(githubAppID, &key.PublicKey)
	for _, r := range []string{repoName, "acme/other"} {
		require.NoError(t, gh.CreateRepo(r, "main"))
	}
	sha, err := gh.ImportGit(repoName, "main", filepath.Join(w.root, "repos", repoName), "HEAD")
	require.NoError(t, err)
	require.Equal(t, w.sha, sha)
	_, err = gh.Install(githubAppID, repoName, "acme/other")
	require.NoError(t, err)

	w.github, w.ghURL = gh, srv.URL+"/"
	w.cfg.VCS.Provider = "github"
	w.cfg.VCS.Statuses = ""
	w.cfg.VCS.GitHub = config.GitHub{BaseURL: w.ghURL, AppID: githubAppID, PrivateKeyFile: keyFile}
	w.cfg.Runners.Local = 1
	w.cfg.Runners.PassEnv = nil
	return srv
}

// checkoutTokens are the installation tokens the fake GitHub issued
// narrowed to some repositories: those MintSource asked for (the
// provider's own API tokens are of the whole installation).
func checkoutTokens(gh *githubtest.Server) []githubtest.IssuedToken {
	var out []githubtest.IssuedToken
	for _, tok := range gh.IssuedTokens() {
		if tok.Repositories != nil {
			out = append(out, tok)
		}
	}
	return out
}

// pushed delivers a push of sha, which becomes w's commit, waits for the
// commit statuses of its pipeline and of job jobID, requires the job's to
// be state, and returns the run's id.
func (w *world) pushed(t *testing.T, base, delivery, sha, jobID, state string) string {
	t.Helper()
	code, body := deliver(t, base, delivery, pushBody(sha))
	require.Equal(t, 202, code, body)
	w.sha = sha
	// A ceiling, not a timing: the job may build and test a Go module,
	// which on a loaded machine takes minutes.
	got := w.waitStatuses(t, 5*time.Minute, jobID)
	require.Equal(t, state, got[status.JobContext(".cikit.yml", jobID)].State, "%+v", got)
	return runIDOf(t, got[status.PipelineContext(".cikit.yml")])
}

// jobOf reads a job of a run in the API.
func jobOf(t *testing.T, base, runID, jobID string) forgeJob {
	t.Helper()
	var j forgeJob
	require.Equal(t, 200, getJSON(t, base+"/api/v1/runs/"+runID+"/jobs/"+jobID, &j))
	return j
}

// requireNoCredential checks that the job's log, environment and git
// configuration show no credential of the forge: tokenPrefix starts
// every token it issues.
func requireNoCredential(t *testing.T, log string, job forgeJob, tokenPrefix string) {
	t.Helper()
	require.Contains(t, log, forgeFiles, "the job read the commit's file")
	require.Contains(t, log, "file:.git/config", "the step printed the workspace's git configuration")
	require.NotContains(t, log, tokenPrefix, "a forge credential is in the job's log, environment or .git/config")
	require.NotEmpty(t, job.EnvNames)
	require.Contains(t, job.EnvNames, "CIKIT_SHA")
	for _, name := range job.EnvNames {
		require.NotContains(t, name, tokenPrefix)
		require.NotContains(t, strings.ToUpper(name), "GIT_ASKPASS")
	}
}

// TestGitHubProviderChecksOut: with the github provider authenticated as
// an App, a push webhook runs a job that checks out the pushed commit
// from GitHub's git server with an installation token narrowed to the
// one repository with contents: read. The token is in neither the job's
// log, its environment nor the workspace's .git/config, and it is
// revoked once the job has ended. The same on the embedded platform and
// on PostgreSQL, Redis and S3.
func TestGitHubProviderChecksOut(t *testing.T) {
	t.Run("embedded", func(t *testing.T) { testGitHubChecksOut(t, false) })
	t.Run("postgres", func(t *testing.T) { testGitHubChecksOut(t, true) })
}

func testGitHubChecksOut(t *testing.T, postgres bool) {
	w := newWorld(t, map[string]string{".cikit.yml": forgePipeline, "hello.txt": forgeFiles + "\n"})
	if postgres {
		w.onPostgres(t)
	}
	w.onGitHub(t, nil)
	s := serve(t, w.cfg)
	base := s.p.URL()

	runID := w.pushed(t, base, "delivery-forge-github", w.sha, "show", "success")
	job := jobOf(t, base, runID, "show")
	require.Equal(t, w.sha, job.Commit)
	_, log := getText(t, base+"/api/v1/runs/"+runID+"/jobs/show/log")
	requireNoCredential(t, log, job, "ghs_")

	tokens := checkoutTokens(w.github)
	require.Len(t, tokens, 1, "one checkout credential for the one job: %+v", w.github.IssuedTokens())
	require.Equal(t, []string{repoName}, tokens[0].Repositories, "narrowed to the job's repository, not acme/other")
	require.Equal(t, map[string]string{"contents": "read", "metadata": "read"}, tokens[0].Permissions)
	waitFor(t, 30*time.Second, "the job's installation token to be revoked", func() bool { return checkoutTokens(w.github)[0].Revoked })
	require.Greater(t, w.github.Stats().GitRequests, w.github.Stats().GitRefused, "the runner fetched from GitHub's git server")
}

// TestGitHubCommitNotFoundIsNotRetried: a push of a commit that GitHub's
// API knows but its git server does not have fails the job as a
// configuration error on its first attempt, although the job may be
// retried twice, and the reason names the commit.
func TestGitHubCommitNotFoundIsNotRetried(t *testing.T) {
	pipeline := strings.Replace(forgePipeline, "  show:\n", "  show:\n    retry: 2\n", 1)
	w := newWorld(t, map[string]string{".cikit.yml": pipeline, "hello.txt": forgeFiles + "\n"})
	w.onGitHub(t, nil)
	missing := strings.Repeat("5a", 20)
	require.NoError(t, w.github.CommitAs(repoName, "main", missing, map[string]string{".cikit.yml": pipeline}))
	s := serve(t, w.cfg)
	base := s.p.URL()

	runID := w.pushed(t, base, "delivery-forge-missing", missing, "show", "failure")
	job := jobOf(t, base, runID, "show")
	require.Equal(t, "failed", job.State)
	require.Equal(t, 1, job.Attempt, "a commit that does not exist is not retried: %+v", job)
	require.Empty(t, job.Attempts)
	require.Contains(t, job.Reason, missing, "the reason names the commit")
	require.Contains(t, job.Reason, "not found")
}

// TestUnreachableForgeIsRetried: when GitHub's git server cannot be
// reached (its connections are cut), the checkout is an infrastructure
// failure, which the job's retry policy retries: the second attempt
// exists and the first's reason says the remote was unreachable.
func TestUnreachableForgeIsRetried(t *testing.T) {
	pipeline := strings.Replace(forgePipeline, "  show:\n", "  show:\n    retry: 1\n", 1)
	w := newWorld(t, map[string]string{".cikit.yml": pipeline, "hello.txt": forgeFiles + "\n"})
	w.onGitHub(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if !strings.Contains(r.URL.Path, ".git/") {
				next.ServeHTTP(rw, r)
				return
			}
			// git's requests: the connection is cut before any answer.
			conn, _, err := http.NewResponseController(rw).Hijack()
			if err == nil {
				conn.Close()
			}
		})
	})
	s := serve(t, w.cfg)
	base := s.p.URL()

	runID := w.pushed(t, base, "delivery-forge-unreachable", w.sha, "show", "failure")
	job := jobOf(t, base, runID, "show")
	require.Equal(t, 2, job.Attempt, "the unreachable forge is retried: %+v", job)
	require.Len(t, job.Attempts, 1)
	require.Contains(t, job.Attempts[0].Reason, "unreachable", "%+v", job.Attempts[0])
	// Each attempt had its own credential, each revoked when it ended.
	waitFor(t, 30*time.Second, "both attempts' installation tokens to be revoked", func() bool {
		tokens := checkoutTokens(w.github)
		return len(tokens) == 2 && tokens[0].Revoked && tokens[1].Revoked
	})
}

// deliverGitLab posts a GitLab push hook of branch main to sha with the
// webhook's secret token.
func deliverGitLab(t *testing.T, base, delivery, sha string) (int, string) {
	t.Helper()
	body := fmt.Appendf(nil, `{"object_kind": "push", "event_name": "push", "before": "0000000000000000000000000000000000000000", "after": %q,
		"ref": "refs/heads/main", "checkout_sha": %q, "user_name": "Alice", "user_username": "alice",
		"project": {"id": 1, "path_with_namespace": %q, "default_branch": "main"},
		"commits": [{"id": %q, "timestamp": %q, "added": [".cikit.yml", "hello.txt"], "modified": [], "removed": []}],
		"total_commits_count": 1}`, sha, sha, repoName, sha, time.Now().UTC().Format(time.RFC3339))
	req, err := http.NewRequest(http.MethodPost, base+"/webhooks/gitlab", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Gitlab-Event", "Push Hook")
	req.Header.Set("X-Gitlab-Token", webhookSecret)
	req.Header.Set("X-Gitlab-Event-UUID", delivery)
	req.Header.Set("Idempotency-Key", delivery)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(out)
}

// TestGitLabProviderChecksOut: with the gitlab provider, a push hook runs
// a job that checks out the pushed commit from GitLab's git server with
// a deploy token of the project with read_repository, which is in
// neither the job's log, its environment nor .git/config, and which is
// deleted once the job has ended.
func TestGitLabProviderChecksOut(t *testing.T) {
	w := newWorld(t, map[string]string{".cikit.yml": forgePipeline, "hello.txt": forgeFiles + "\n"})
	gitDir := filepath.Join(w.root, "gitlab-git")
	require.NoError(t, os.Mkdir(gitDir, 0o755))
	gl := gitlabtest.New(gitlabtest.Config{Token: "glpat-e2e", GitDir: gitDir})
	srv := httptest.NewServer(gl)
	t.Cleanup(srv.Close)
	_, err := gl.CreateProject(repoName, "main")
	require.NoError(t, err)
	sha, err := gl.ImportGit(repoName, "main", filepath.Join(w.root, "repos", repoName), "HEAD")
	require.NoError(t, err)
	require.Equal(t, w.sha, sha)
	w.cfg.VCS.Provider = "gitlab"
	w.cfg.VCS.Statuses = ""
	w.cfg.VCS.GitLab.BaseURL = srv.URL
	w.cfg.VCS.GitLab.Token = gl.Token()
	w.cfg.VCS.GitHub.Token = ""
	w.cfg.Webhooks.GitLabTokens = []string{webhookSecret}
	w.cfg.Runners.Local = 1
	w.cfg.Runners.PassEnv = nil
	s := serve(t, w.cfg)
	base := s.p.URL()

	code, body := deliverGitLab(t, base, "delivery-forge-gitlab", w.sha)
	require.Equal(t, 202, code, body)
	jobName := status.JobContext(".cikit.yml", "show")
	var final gitlabtest.CommitStatus
	waitFor(t, 120*time.Second, "the job's commit status on GitLab", func() bool {
		list, err := gl.Statuses(repoName, w.sha)
		require.NoError(t, err)
		for _, st := range list {
			if st.Name == jobName && st.State != "pending" && st.State != "running" {
				final = st
				return true
			}
		}
		return false
	})
	require.Equal(t, "success", final.State, "%+v", final)
	_, after, ok := strings.Cut(final.TargetURL, "/runs/")
	require.True(t, ok, final.TargetURL)
	runID, _, _ := strings.Cut(after, "/")
	job := jobOf(t, base, runID, "show")
	require.Equal(t, w.sha, job.Commit)
	_, log := getText(t, base+"/api/v1/runs/"+runID+"/jobs/show/log")
	requireNoCredential(t, log, job, "gldt-")

	stats := gl.GitStats()
	require.Equal(t, 1, stats.DeployTokensCreated, "one deploy token for the one job")
	require.Greater(t, stats.Requests, stats.Refused, "the runner fetched from GitLab's git server")
	waitFor(t, 30*time.Second, "the job's deploy token to be deleted", func() bool {
		live, err := gl.DeployTokens(repoName)
		require.NoError(t, err)
		return len(live) == 0 && gl.GitStats().DeployTokensDeleted == 1
	})
}

// TestJobTokenFetchesOnlyItsRepository: through the platform's /git/
// endpoint, the credential a claim hands out (the job token) fetches the
// run's repository at the job's commit, and nothing else: not another
// local repository (403), no push (403, from git's own push as from its
// first request), and nothing once the attempt has ended.
func TestJobTokenFetchesOnlyItsRepository(t *testing.T) {
	w := newWorld(t, map[string]string{".cikit.yml": forgePipeline, "hello.txt": forgeFiles + "\n"})
	other := filepath.Join(w.root, "repos", "acme", "other")
	require.NoError(t, os.MkdirAll(other, 0o755))
	gitIn(t, other, "init", "-q", "-b", "main")
	gitIn(t, other, "commit", "-q", "--allow-empty", "-m", "another repository")
	w.cfg.Runners.Local = 0 // the test claims the job itself
	s := serve(t, w.cfg)
	base := s.p.URL()

	code, body := deliver(t, base, "delivery-forge-token", pushBody(w.sha))
	require.Equal(t, 202, code, body)
	var reg struct {
		Token string `json:"runner_token"`
	}
	status, out := call(t, http.MethodPost, base+"/v1/runners", w.cfg.Runners.RegistrationTokens[0], map[string]any{"name": "e2e", "labels": []string{"linux"}})
	require.Equal(t, 201, status, out)
	require.NoError(t, json.Unmarshal([]byte(out), &reg))
	var claim struct {
		RunID   string `json:"run_id"`
		JobID   string `json:"job_id"`
		Token   string `json:"job_token"`
		Context struct {
			Source struct {
				URL      string `json:"url"`
				Username string `json:"username"`
				Token    string `json:"token"`
			} `json:"source"`
		} `json:"context"`
	}
	status, out = call(t, http.MethodGet, base+"/v1/jobs/claim?wait=30s", reg.Token, nil)
	require.Equal(t, 200, status, out)
	require.NoError(t, json.Unmarshal([]byte(out), &claim))
	src := claim.Context.Source
	require.Equal(t, base+"/git/"+repoName+".git", src.URL)
	require.Equal(t, claim.Token, src.Token, "the platform's git server takes the job token")

	withToken := func(u string) string {
		return strings.Replace(u, "://", "://"+src.Username+":"+src.Token+"@", 1)
	}
	refs := gitIn(t, w.root, "ls-remote", withToken(src.URL))
	require.Contains(t, refs, w.sha+"\trefs/heads/main", "the job token fetches the run's repository")

	otherURL := base + "/git/acme/other.git"
	require.Equal(t, http.StatusForbidden, gitHTTP(t, otherURL, "git-upload-pack", src.Username, src.Token), "another repository")
	_, err := gitRun(w.root, "ls-remote", withToken(otherURL))
	require.Error(t, err, "git cannot read another repository with the job token")

	require.Equal(t, http.StatusForbidden, gitHTTP(t, src.URL, "git-receive-pack", src.Username, src.Token), "a push")
	clone := filepath.Join(w.root, "clone")
	gitIn(t, w.root, "clone", "-q", withToken(src.URL), clone)
	gitIn(t, clone, "commit", "-q", "--allow-empty", "-m", "pushed with a job token")
	pushed, err := gitRun(clone, "push", "origin", "HEAD:refs/heads/main")
	require.Error(t, err, "git pushed with a job token: %s", pushed)
	require.Contains(t, pushed, "403", "%s", pushed)

	status, out = call(t, http.MethodPost, base+"/v1/jobs/"+claim.RunID+"/"+claim.JobID+"/complete", claim.Token, map[string]any{"result": "succeeded", "exit_code": 0})
	require.Equal(t, 200, status, out)
	require.Equal(t, http.StatusForbidden, gitHTTP(t, src.URL, "git-upload-pack", src.Username, src.Token), "the attempt has ended")
}

// call sends a runner protocol request with a bearer token.
func call(t *testing.T, method, url, token string, body any) (int, string) {
	t.Helper()
	var in io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		require.NoError(t, err)
		in = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, url, in)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(out)
}

// gitHTTP asks a git server for the references of a repository, as the
// first request of a fetch (git-upload-pack) or a push (git-receive-pack)
// does, and returns the answer's status.
func gitHTTP(t *testing.T, repoURL, service, user, password string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, repoURL+"/info/refs?service="+service, nil)
	require.NoError(t, err)
	req.SetBasicAuth(user, password)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// gitRun runs git in dir, never prompting, and returns what it wrote.
func gitRun(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-c", "user.name=e2e", "-c", "user.email=e2e@example.com", "-c", "commit.gpgsign=false", "-c", "credential.helper="}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// gitIn runs git in dir and fails the test if it fails.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := gitRun(dir, args...)
	require.NoError(t, err, "git %v: %s", args, out)
	return out
}

// TestRevocationDoesNotDelayCompletion: while GitHub does not answer the
// revocation of a job's installation token, the job has already
// completed and its commit status been reported; the token is revoked
// once GitHub answers.
func TestRevocationDoesNotDelayCompletion(t *testing.T) {
	w := newWorld(t, map[string]string{".cikit.yml": forgePipeline, "hello.txt": forgeFiles + "\n"})
	release := make(chan struct{})
	blocked := make(chan struct{}, 1)
	w.onGitHub(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodDelete && r.URL.Path == "/installation/token" {
				select {
				case blocked <- struct{}{}:
				default:
				}
				<-release
			}
			next.ServeHTTP(rw, r)
		})
	})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	t.Cleanup(open) // before the fake GitHub closes, which waits for its requests
	s := serve(t, w.cfg)
	base := s.p.URL()

	runID := w.pushed(t, base, "delivery-forge-slow-revoke", w.sha, "show", "success")
	require.Equal(t, "succeeded", jobOf(t, base, runID, "show").State)
	select {
	case <-blocked:
	case <-time.After(30 * time.Second):
		t.Fatal("the platform did not ask GitHub to revoke the job's token within 30s")
	}
	require.False(t, checkoutTokens(w.github)[0].Revoked, "GitHub has not answered the revocation yet")
	open()
	waitFor(t, 30*time.Second, "the job's installation token to be revoked", func() bool { return checkoutTokens(w.github)[0].Revoked })
}
