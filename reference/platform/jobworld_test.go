package platform_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/internal/semantics"
	"github.com/cikit/cikit/vcs/github/githubtest"
	"github.com/cikit/cikit/vcs/status"
)

// commit writes files into the world's repository, commits them, tells
// the fake GitHub and makes the new commit the world's.
func (w *world) commit(t *testing.T, msg string, files map[string]string) {
	t.Helper()
	repo := filepath.Join(w.root, "repos", repoName)
	for name, data := range files {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(repo, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(repo, name), []byte(data), 0o644))
	}
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-c", "user.name=e2e", "-c", "user.email=e2e@example.com", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = repo
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
		return strings.TrimSpace(string(out))
	}
	git("add", "-A")
	git("commit", "-q", "-m", msg)
	w.sha = git("rev-parse", "HEAD")
	require.NoError(t, w.github.CommitAs(repoName, "main", w.sha, files))
}

// waitFileStatuses waits for the commit statuses of the pipeline file and
// of its given jobs to leave pending and returns the job statuses by job
// and the run's id.
func (w *world) waitFileStatuses(t *testing.T, within time.Duration, file string, jobs ...string) (map[string]string, string) {
	t.Helper()
	var got map[string]string
	var run string
	waitFor(t, within, "the commit statuses of "+file, func() bool {
		all := w.statuses(t)
		pipe, ok := all[status.PipelineContext(file)]
		if !ok || pipe.State == "pending" {
			return false
		}
		got = map[string]string{}
		for _, j := range jobs {
			st, ok := all[status.JobContext(file, j)]
			if !ok || st.State == "pending" {
				return false
			}
			got[j] = st.State
		}
		run = runIDOf(t, pipe)
		return true
	})
	return got, run
}

// jobView is what these tests read of GET /api/v1/runs/{run}/jobs/{job}.
type jobView struct {
	State       string             `json:"state"`
	Commit      string             `json:"commit"`
	Annotations []cikit.Annotation `json:"annotations"`
	Outputs     map[string]string  `json:"outputs"`
	EnvNames    []string           `json:"env_names"`
}

func jobWorldJob(t *testing.T, base, run, job string) (jobView, string) {
	t.Helper()
	var v jobView
	u := base + "/api/v1/runs/" + run + "/jobs/" + url.PathEscape(job)
	require.Equal(t, 200, getJSON(t, u, &v), "GET %s", u)
	code, log := getText(t, u+"/log")
	require.Equal(t, 200, code, "GET %s/log: %s", u, log)
	return v, log
}

// TestJobWorld: a push of a repository with a GitHub workflow and a
// GitLab file runs both at the pushed commit, each job in the world its
// format promises: the workflow's checkout has the full history, its
// composite action takes an input's default or the given value and
// returns an output, $GITHUB_ENV holds between steps, an output of job a
// reaches job b as needs.a.outputs.x and an ::error command is an
// annotation of the job; the GitLab job's three parallel variants each
// see their index and the commit. Asserted from the job logs and the job
// API.
func TestJobWorld(t *testing.T) {
	w := newWorld(t, map[string]string{"README.md": "the first commit\n"})
	w.commit(t, "the pipelines", semantics.WorldFiles)
	w.cfg.Runners.Local = 3
	s := serve(t, w.cfg)
	base := s.p.URL()
	code, body := deliver(t, base, "delivery-world", pushBody(w.sha))
	require.Equal(t, 202, code, body)

	const workflow = ".github/workflows/ci.yml"
	states, run := w.waitFileStatuses(t, 120*time.Second, workflow, "a", "b")
	require.Equal(t, map[string]string{"a": "success", "b": "success"}, states)

	a, log := jobWorldJob(t, base, run, "a")
	require.Equal(t, "succeeded", a.State)
	require.Equal(t, w.sha, a.Commit, "job a checked out the pushed commit")
	require.Contains(t, log, "commits=2\n", "fetch-depth: 0 fetched the full history")
	require.Contains(t, log, "greeting world\n")
	require.Contains(t, log, "greeting cikit\n")
	require.Contains(t, log, "said 'hello world' and 'hello cikit'\n")
	require.Contains(t, log, "stage is from-the-env-file\n")
	require.Equal(t, map[string]string{"x": "forty-two"}, a.Outputs)
	require.Len(t, a.Annotations, 1, "%+v", a.Annotations)
	require.Equal(t, "error", a.Annotations[0].Level)
	require.Equal(t, "boom", a.Annotations[0].Message)
	require.Equal(t, "app.go", a.Annotations[0].File)
	require.Equal(t, 3, a.Annotations[0].Line)
	require.Contains(t, a.EnvNames, "GITHUB_SHA")
	require.Contains(t, a.EnvNames, "STAGE", "a variable of $GITHUB_ENV is in the job's environment")
	require.Contains(t, log, "\n##[error]boom\n")
	require.NotContains(t, log, "\n::error", "the workflow command is not printed as is")

	_, log = jobWorldJob(t, base, run, "b")
	require.Contains(t, log, "x is forty-two\n")

	variants := []string{"test 1/3", "test 2/3", "test 3/3"}
	states, run = w.waitFileStatuses(t, 120*time.Second, ".gitlab-ci.yml", variants...)
	for i, v := range variants {
		require.Equal(t, "success", states[v], v)
		job, log := jobWorldJob(t, base, run, v)
		require.Equal(t, w.sha, job.Commit, "%s checked out the pushed commit", v)
		require.Contains(t, log, "node "+string(rune('1'+i))+" of 3 at "+w.sha+"\n", v)
		require.Contains(t, job.EnvNames, "CI_NODE_INDEX")
		require.Contains(t, job.EnvNames, "CI_COMMIT_SHA")
	}
}

// branchCommit commits files on a new branch of the world's repository,
// made from main, and returns the commit's SHA; main stays where it was.
func (w *world) branchCommit(t *testing.T, branch string, files map[string]string) string {
	t.Helper()
	repo := filepath.Join(w.root, "repos", repoName)
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-c", "user.name=e2e", "-c", "user.email=e2e@example.com", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = repo
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
		return strings.TrimSpace(string(out))
	}
	git("checkout", "-q", "-b", branch, "main")
	for name, data := range files {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(repo, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(repo, name), []byte(data), 0o644))
	}
	git("add", "-A")
	git("commit", "-q", "-m", branch)
	sha := git("rev-parse", "HEAD")
	git("checkout", "-q", "main")
	require.NoError(t, w.github.CommitAs(repoName, branch, sha, files))
	return sha
}

// pushBranchBody is a GitHub push event of branch to sha by alice.
func pushBranchBody(branch, sha string) []byte {
	return fmt.Appendf(nil, `{"ref": "refs/heads/%s", "before": "0000000000000000000000000000000000000000", "after": %q,
		"created": true, "deleted": false,
		"head_commit": {"id": %q, "timestamp": %q, "added": [], "removed": [], "modified": []},
		"commits": [{"id": %q, "timestamp": %q, "added": [], "removed": [], "modified": []}],
		"repository": {"name": "app", "full_name": %q, "default_branch": "main", "owner": {"login": "acme"}},
		"pusher": {"name": "alice"}, "sender": {"login": "alice"}}`,
		branch, sha, sha, time.Now().UTC().Format(time.RFC3339), sha, time.Now().UTC().Format(time.RFC3339), repoName)
}

// TestSemantics runs the cases of package semantics, one per run-time
// semantic of a format, on one embedded platform: each case is a commit
// on its own branch of one repository, pushed with a signed webhook, and
// the cases run at once. Each job's state and log in the API are what
// the case says, and no other job is in the run; a pipeline that must not
// run has a failure status on its commit saying why.
func TestSemantics(t *testing.T) {
	w := newWorld(t, map[string]string{"README.md": "the cases branch from here\n"})
	w.cfg.Runners.Local = 4
	s := serve(t, w.cfg)
	base := s.p.URL()
	shas := map[string]string{}
	for _, c := range semantics.Cases {
		files := map[string]string{c.Path: c.File}
		for k, v := range c.Files {
			files[k] = v
		}
		shas[c.Name] = w.branchCommit(t, "case/"+c.Name, files)
	}
	for _, c := range semantics.Cases {
		if c.Inputs != nil {
			code, body := triggerManual(t, base, "manual-"+c.Name, map[string]any{"ref": "case/" + c.Name, "sha": shas[c.Name], "variables": c.Inputs})
			require.Equal(t, http.StatusCreated, code, "%s: %s", c.Name, body)
			continue
		}
		code, body := deliver(t, base, "delivery-"+c.Name, pushBranchBody("case/"+c.Name, shas[c.Name]))
		require.Equal(t, 202, code, "%s: %s", c.Name, body)
	}
	for _, c := range semantics.Cases {
		t.Run(c.Name, func(t *testing.T) {
			w.sha = shas[c.Name]
			if c.Error != "" {
				var pipe githubtest.Status
				waitFor(t, 120*time.Second, "the pipeline's status", func() bool {
					var ok bool
					pipe, ok = w.statuses(t)[status.PipelineContext(c.Path)]
					return ok && pipe.State != "pending"
				})
				require.Equal(t, "failure", pipe.State, "%+v", pipe)
				require.Contains(t, pipe.Description, c.Error)
				return
			}
			ids := slices.Sorted(maps.Keys(c.Jobs))
			var r apiRun
			waitFor(t, 120*time.Second, "the run of "+c.Name+" to end", func() bool {
				var list struct {
					Runs []struct {
						ID         string    `json:"id"`
						SHA        string    `json:"sha"`
						FinishedAt time.Time `json:"finished_at"`
					} `json:"runs"`
				}
				if getJSON(t, base+"/api/v1/runs?branch="+url.QueryEscape("case/"+c.Name), &list) != 200 || len(list.Runs) != 1 || list.Runs[0].FinishedAt.IsZero() {
					return false
				}
				require.Equal(t, w.sha, list.Runs[0].SHA)
				return getJSON(t, base+"/api/v1/runs/"+list.Runs[0].ID, &r) == 200
			})
			states := r.states()
			for _, id := range ids {
				want := c.Jobs[id]
				require.Equal(t, map[bool]string{false: "succeeded", true: "failed"}[want.Failed], states[id], "job %s", id)
				if len(want.Lines)+len(want.Never) == 0 {
					continue // nothing to read in its log; a matrix's placeholder has none
				}
				_, log := jobWorldJob(t, base, r.ID, id)
				for _, l := range want.Lines {
					require.Contains(t, log, strings.ReplaceAll(l, semantics.SHA, w.sha)+"\n", "job %s:\n%s", id, log)
				}
				for _, n := range want.Never {
					require.NotContains(t, log, n, "job %s", id)
				}
			}
			for _, id := range c.Skipped {
				require.Equal(t, "skipped", states[id], "job %s", id)
			}
			require.ElementsMatch(t, append(ids, c.Skipped...), slices.Collect(maps.Keys(r.states())), "the jobs of the run")
			require.Equal(t, map[bool]string{false: "succeeded", true: "failed"}[c.RunFailed()], r.State)
		})
	}
}

// triggerManual starts a manual run through the API's manual trigger
// with the request body req, and returns the status and the body.
func triggerManual(t *testing.T, base, key string, req map[string]any) (int, string) {
	t.Helper()
	b, err := json.Marshal(req)
	require.NoError(t, err)
	r, err := http.NewRequest(http.MethodPost, base+"/api/v1/repos/acme/app/pipelines", bytes.NewReader(b))
	require.NoError(t, err)
	r.Header.Set("Idempotency-Key", key)
	r.Header.Set("Content-Type", "application/json")
	resp, err := doAsAdmin(r)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}
