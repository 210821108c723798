package platform_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/reference/config"
	"github.com/cikit/cikit/vcs/status"
)

// person makes service account login on the platform at base, grants it
// role on org (and repo, when set), and returns the secret of a token of
// it: a person of the tests, who approves, triggers or only reads.
func person(t *testing.T, base, login, role, org, repo string) string {
	t.Helper()
	admin := adminOf(t, base)
	code, out := call(t, http.MethodPost, base+"/api/v1/service-accounts", admin, map[string]string{"login": login})
	require.Equal(t, http.StatusCreated, code, out)
	if role != "" {
		code, out = call(t, http.MethodPost, base+"/api/v1/roles", admin, map[string]string{"user": login, "role": role, "org": org, "repo": repo})
		require.Equal(t, http.StatusNoContent, code, out)
	}
	code, out = call(t, http.MethodPost, base+"/api/v1/tokens", admin, map[string]string{"user": login, "name": "e2e"})
	require.Equal(t, http.StatusCreated, code, out)
	var tok struct {
		Secret string `json:"secret"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &tok))
	return tok.Secret
}

// adminOf is the admin token of the platform at base.
func adminOf(t *testing.T, base string) string {
	t.Helper()
	req := asAdmin(mustRequest(t, http.MethodGet, base))
	tok, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	require.True(t, ok, "the platform at %s has an admin token", base)
	return tok
}

// trustJob is what the trust tests read of a job in a run's detail.
type trustJob struct {
	ID         string           `json:"id"`
	State      cikit.JobState   `json:"state"`
	Attempt    int              `json:"attempt"`
	Reason     string           `json:"reason"`
	WaitingFor string           `json:"waiting_for"`
	Admission  *cikit.Admission `json:"admission"`
	Gate       *struct {
		Reasons   []string `json:"reasons"`
		Reviewers []string `json:"reviewers"`
	} `json:"gate"`
	Approvals []struct {
		Login    string `json:"login"`
		Decision string `json:"decision"`
		Comment  string `json:"comment"`
	} `json:"approvals"`
}

type trustRun struct {
	ID     string         `json:"id"`
	State  cikit.RunState `json:"state"`
	Held   string         `json:"held"`
	Policy []struct {
		Job      string         `json:"job"`
		Decision cikit.Decision `json:"decision"`
		Reason   string         `json:"reason"`
	} `json:"policy"`
	Jobs []trustJob `json:"jobs"`
}

func (r *trustRun) job(t *testing.T, id string) trustJob {
	t.Helper()
	for _, j := range r.Jobs {
		if j.ID == id {
			return j
		}
	}
	t.Fatalf("run %s has no job %s: %+v", r.ID, id, r.Jobs)
	return trustJob{}
}

// waitRun waits until the run of delivery (the only one it made) is in
// a state cond accepts, and returns it.
func waitTrustRun(t *testing.T, s *serving, delivery, what string, cond func(*trustRun) bool) *trustRun {
	t.Helper()
	base := s.p.URL()
	var run trustRun
	waitFor(t, 90*time.Second, what, func() bool {
		id := runOf(t, s, delivery)
		run = trustRun{}
		return getJSON(t, base+"/api/v1/runs/"+id, &run) == http.StatusOK && cond(&run)
	})
	return &run
}

// logOf is the log of a job so far.
func logOf(t *testing.T, base, runID, jobID string) string {
	t.Helper()
	code, log := getText(t, base+"/api/v1/runs/"+runID+"/jobs/"+jobID+"/log")
	require.Equal(t, http.StatusOK, code, log)
	return log
}

// gitlabDeploy is a GitLab pipeline whose deploy-prod job is manual in
// its rules (so it blocks the pipeline, GitLab's semantics) and deploys
// to production.
const gitlabDeploy = `stages: [build, deploy]
build:
  stage: build
  script:
    - echo built
deploy-prod:
  stage: deploy
  environment: production
  rules:
    - when: manual
  script:
    - echo "DEPLOYED $CI_COMMIT_SHORT_SHA"
`

// TestGitLabManualDeployWaitsForApproval: a GitLab when: manual deploy
// to a protected environment does not run on its own: the run is
// blocked, the job waits for alice's approval (the API, why-waiting and
// the commit status say so), nobody else may start or approve it, and
// once alice approves it runs once; the decisions are in the audit log.
func TestGitLabManualDeployWaitsForApproval(t *testing.T) {
	t.Parallel()
	w := newWorld(t, map[string]string{".gitlab-ci.yml": gitlabDeploy})
	w.cfg.Policy.Environments = []config.Environment{{Name: "production", Reviewers: []string{"alice"}, Refs: []string{"main"}}}
	s := serve(t, w.cfg)
	base := s.p.URL()
	alice := person(t, base, "alice", "approve", "acme", "app")
	bob := person(t, base, "bob", "trigger", "acme", "")
	carol := person(t, base, "carol", "approve", "acme", "")

	code, body := deliver(t, base, "deploy-1", pushBody(w.sha))
	require.Equal(t, http.StatusAccepted, code, body)
	run := waitTrustRun(t, s, "deploy-1", "the run to be blocked on its deploy", func(r *trustRun) bool { return r.State == cikit.RunBlocked })
	deploy := run.job(t, "deploy-prod")
	require.Equal(t, cikit.JobManual, deploy.State)
	require.Equal(t, "approval by alice: deployment to production", deploy.WaitingFor)
	require.Equal(t, cikit.DecisionAllow, deploy.Admission.Decision, "main is protected: the policy lets it deploy")
	require.Contains(t, run.Held, "deploy-prod waits for approval by alice")
	var why struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	require.Equal(t, http.StatusOK, getJSON(t, base+"/api/v1/runs/"+run.ID+"/jobs/deploy-prod/why", &why))
	require.Equal(t, "approval", why.Code, "%+v", why)
	require.Contains(t, why.Message, "waiting for approval by alice: deployment to production")
	ctx := status.JobContext(".gitlab-ci.yml", "deploy-prod")
	waitFor(t, 30*time.Second, "the deploy's commit status", func() bool {
		st, ok := w.statuses(t)[ctx]
		return ok && st.State == "pending" && strings.Contains(st.Description, "waiting for approval by alice")
	})

	approve := base + "/api/v1/runs/" + run.ID + "/jobs/deploy-prod/approve"
	req := mustRequest(t, http.MethodPost, approve)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "nobody")
	code, out := call(t, http.MethodPost, approve, bob, map[string]string{"comment": "me"})
	require.Equal(t, http.StatusForbidden, code, "bob may trigger, not approve: %s", out)
	code, out = call(t, http.MethodPost, base+"/api/v1/runs/"+run.ID+"/jobs/deploy-prod/start", bob, nil)
	require.Equal(t, http.StatusForbidden, code, "starting a deployment is approving it: %s", out)
	code, out = call(t, http.MethodPost, approve, carol, map[string]string{"comment": "looks fine"})
	require.Equal(t, http.StatusForbidden, code, out)
	require.Contains(t, out, "approval needs one of: alice")
	code, out = call(t, http.MethodPost, base+"/api/v1/runs/"+run.ID+"/jobs/deploy-prod/start", adminOf(t, base), nil)
	require.Equal(t, http.StatusConflict, code, "a gated job is approved, not started: %s", out)
	run = waitTrustRun(t, s, "deploy-1", "the run", func(*trustRun) bool { return true })
	require.Equal(t, cikit.JobManual, run.job(t, "deploy-prod").State, "refused decisions change nothing")

	code, out = call(t, http.MethodPost, approve, alice, map[string]string{"comment": "ship it"})
	require.Equal(t, http.StatusAccepted, code, out)
	run = waitTrustRun(t, s, "deploy-1", "the approved deploy to run", func(r *trustRun) bool { return r.State == cikit.RunSucceeded })
	deploy = run.job(t, "deploy-prod")
	require.Equal(t, cikit.JobSucceeded, deploy.State)
	require.Equal(t, 1, deploy.Attempt)
	require.Len(t, deploy.Approvals, 1)
	require.Equal(t, "alice", deploy.Approvals[0].Login)
	require.Equal(t, "ship it", deploy.Approvals[0].Comment)
	require.Len(t, regexp.MustCompile(`(?m)^DEPLOYED [0-9a-f]+$`).FindAllString(logOf(t, base, run.ID, "deploy-prod"), -1), 1, "it ran once")
	code, out = call(t, http.MethodPost, approve, alice, nil)
	require.Equal(t, http.StatusConflict, code, "approved once: %s", out)

	var audit struct {
		Entries []struct {
			Actor   string `json:"actor"`
			Outcome string `json:"outcome"`
			Detail  string `json:"detail"`
		} `json:"entries"`
	}
	require.Equal(t, http.StatusOK, getJSON(t, base+"/api/v1/audit?action=job.approve", &audit))
	got := map[string]string{}
	for _, e := range audit.Entries {
		login, _, _ := strings.Cut(e.Actor, " ")
		got[login+" "+e.Outcome] = e.Detail
	}
	require.Equal(t, "ship it", got["alice ok"], "%+v", audit.Entries)
	require.Equal(t, "looks fine", got["carol denied"], "%+v", audit.Entries)
	require.Contains(t, got, "bob denied", "%+v", audit.Entries)
}

// approvalDeploy is a native pipeline whose deploy job reads an
// environment's secret behind its own approval: gate.
const approvalDeploy = `jobs:
  deploy:
    environment: production
    secrets: [PROD_TOKEN]
    approval:
      reason: production deploys need a second pair of eyes
      reviewers: [alice]
    steps:
      - run: test -n "$PROD_TOKEN" && echo "HAVE-PROD-TOKEN $PROD_TOKEN"
`

// TestApprovalGatesEnvironmentSecrets: a native job's approval: holds
// it; a newer push cancels the older run's gate (approving the older
// commit would deploy stale code); the environment's secret reaches the
// job only once it is approved, masked in its log; a rejection fails the
// job with the reviewer's words.
func TestApprovalGatesEnvironmentSecrets(t *testing.T) {
	t.Parallel()
	w := newWorld(t, map[string]string{".cikit.yml": approvalDeploy})
	s := serve(t, w.cfg)
	base := s.p.URL()
	admin := adminOf(t, base)
	alice := person(t, base, "alice", "approve", "acme", "")
	const secret = "prod-token-9f8e7d6c"
	code, out := call(t, http.MethodPut, base+"/api/v1/secrets/PROD_TOKEN?scope=env:acme/app:production", admin, map[string]string{"value": secret})
	require.Equal(t, http.StatusNoContent, code, out)

	code, out = deliver(t, base, "push-1", pushBody(w.sha))
	require.Equal(t, http.StatusAccepted, code, out)
	first := waitTrustRun(t, s, "push-1", "the first run to wait for approval", func(r *trustRun) bool { return r.State == cikit.RunBlocked })
	require.Equal(t, "approval by alice: production deploys need a second pair of eyes", first.job(t, "deploy").WaitingFor)
	require.Equal(t, []string{"env:acme/app:production", "repo:acme/app", "org:acme"}, first.job(t, "deploy").Admission.SecretsScopes)

	w.commit(t, "a newer commit", map[string]string{"README": "newer\n"})
	code, out = deliver(t, base, "push-2", pushBody(w.sha))
	require.Equal(t, http.StatusAccepted, code, out)
	second := waitTrustRun(t, s, "push-2", "the second run to wait for approval", func(r *trustRun) bool { return r.State == cikit.RunBlocked })
	first = waitTrustRun(t, s, "push-1", "the first run's gate to be cancelled", func(r *trustRun) bool { return r.State.Terminal() })
	require.Equal(t, cikit.JobCancelled, first.job(t, "deploy").State)
	require.Equal(t, "superseded by run "+second.ID, first.job(t, "deploy").Reason)

	code, out = call(t, http.MethodPost, base+"/api/v1/runs/"+second.ID+"/jobs/deploy/approve", alice, map[string]string{"comment": "go"})
	require.Equal(t, http.StatusAccepted, code, out)
	second = waitTrustRun(t, s, "push-2", "the approved deploy to end", func(r *trustRun) bool { return r.State.Terminal() })
	log := logOf(t, base, second.ID, "deploy")
	require.Equal(t, cikit.RunSucceeded, second.State, log)
	require.Contains(t, log, "HAVE-PROD-TOKEN ***", "the environment's secret, masked")
	require.NotContains(t, log, secret)

	w.commit(t, "a third commit", map[string]string{"README": "third\n"})
	code, out = deliver(t, base, "push-3", pushBody(w.sha))
	require.Equal(t, http.StatusAccepted, code, out)
	third := waitTrustRun(t, s, "push-3", "the third run to wait for approval", func(r *trustRun) bool { return r.State == cikit.RunBlocked })
	code, out = call(t, http.MethodPost, base+"/api/v1/runs/"+third.ID+"/jobs/deploy/reject", alice, map[string]string{"comment": "not on a Friday"})
	require.Equal(t, http.StatusAccepted, code, out)
	third = waitTrustRun(t, s, "push-3", "the rejected run to fail", func(r *trustRun) bool { return r.State.Terminal() })
	require.Equal(t, cikit.RunFailed, third.State)
	require.Equal(t, "rejected by alice: not on a Friday", third.job(t, "deploy").Reason)
}

// forkPipeline is what a stranger's pull request puts in .cikit.yml: a
// job that prints the repository's deploy token, and one that writes the
// cache and pushes with the job's credential.
const forkPipeline = `jobs:
  steal:
    secrets: [DEPLOY_TOKEN]
    steps:
      - run: echo "token=[$DEPLOY_TOKEN]"
  probe:
    cache:
      key: k-{{ hash("k.lock") }}
      paths: [c/]
    steps:
      - run: mkdir -p c && echo fork > c/f && echo "probe token=[$DEPLOY_TOKEN]"
`

// trustedPipeline is the repository's own: its job restores the same
// cache key the fork's probe saves.
const trustedPipeline = `jobs:
  probe:
    cache:
      key: k-{{ hash("k.lock") }}
      paths: [c/]
    steps:
      - run: if [ -f c/f ]; then echo "RESTORED=$(cat c/f)"; else echo "RESTORED=none"; fi
`

// prBody is a GitHub pull_request event of acme/app's pull request
// number from headOwner's fork, at sha, by an author of association.
func prBody(number int, headOwner, sha, association string) []byte {
	var body map[string]any
	if err := json.Unmarshal(pullRequestBody(number, "opened", headOwner, "patch-1", sha), &body); err != nil {
		panic(err)
	}
	body["pull_request"].(map[string]any)["author_association"] = association
	out, err := json.Marshal(body)
	if err != nil {
		panic(err)
	}
	return out
}

// TestForkPullRequestUnderDefaultPolicy: a first-time contributor's fork
// pull request that edits the pipeline to print the deploy token waits
// for approval; once approved it runs only on a runner that is not
// self-hosted, gets no secret (the log shows none: the job that names
// it fails saying so), and writes only its fork's cache scope, which the
// default branch never restores.
func TestForkPullRequestUnderDefaultPolicy(t *testing.T) {
	t.Parallel()
	w := newWorld(t, map[string]string{".cikit.yml": trustedPipeline, "k.lock": "k 1\n"})
	w.cfg.Runners.Labels = []string{"linux", "ubuntu-latest"}
	s := serve(t, w.cfg)
	base := s.p.URL()
	admin := adminOf(t, base)
	const secret = "deploy-token-5a4b3c2d"
	code, out := call(t, http.MethodPut, base+"/api/v1/secrets/DEPLOY_TOKEN?scope=repo:acme/app", admin, map[string]string{"value": secret})
	require.Equal(t, http.StatusNoContent, code, out)

	fork := w.branchCommit(t, "fork-7", map[string]string{".cikit.yml": forkPipeline})
	code, out = deliverEvent(t, base, "pull_request", "fork-7", prBody(7, "mallory", fork, "FIRST_TIME_CONTRIBUTOR"))
	require.Equal(t, http.StatusAccepted, code, out)
	run := waitTrustRun(t, s, "fork-7", "the fork's run to be held", func(r *trustRun) bool { return r.State == cikit.RunBlocked })
	for _, id := range []string{"steal", "probe"} {
		j := run.job(t, id)
		require.Equal(t, cikit.JobManual, j.State, id)
		require.Equal(t, cikit.DecisionRequireApproval, j.Admission.Decision, id)
		require.Contains(t, j.Admission.Reason, "first-time contributor", id)
		require.Equal(t, []string{}, j.Admission.SecretsScopes, id)
		require.Equal(t, "fork/pr-7", j.Admission.CacheScope, id)
		require.Equal(t, map[string]string{"contents": "read", "metadata": "read"}, j.Admission.TokenPermissions, id)
		require.Equal(t, []string{"*", "!self-hosted"}, j.Admission.RunnerLabelsAllowed, id)
		require.Contains(t, j.WaitingFor, "approval by a person with the approve role", id)
	}
	require.Contains(t, run.Held, "first-time contributor")

	for _, id := range []string{"steal", "probe"} {
		code, out = call(t, http.MethodPost, base+"/api/v1/runs/"+run.ID+"/jobs/"+id+"/approve", admin, map[string]string{"comment": "reviewed the diff"})
		require.Equal(t, http.StatusAccepted, code, out)
	}
	run = waitTrustRun(t, s, "fork-7", "the approved fork run to end", func(r *trustRun) bool { return r.State.Terminal() })
	steal, probe := logOf(t, base, run.ID, "steal"), logOf(t, base, run.ID, "probe")
	require.Equal(t, cikit.JobFailed, run.job(t, "steal").State, steal)
	require.Contains(t, steal, "the job may read no secret scope (by default a pull request from a fork reads none)")
	require.NotContains(t, steal, "token=[", "the step that prints the token never ran")
	require.Equal(t, cikit.JobSucceeded, run.job(t, "probe").State, probe)
	require.Contains(t, probe, "probe token=[]")
	for _, log := range []string{steal, probe} {
		require.NotContains(t, log, secret)
	}

	// The default branch does not restore what the fork saved.
	code, out = deliver(t, base, "main-push", pushBody(w.sha))
	require.Equal(t, http.StatusAccepted, code, out)
	main := waitTrustRun(t, s, "main-push", "the push's run to end", func(r *trustRun) bool { return r.State.Terminal() })
	require.Contains(t, logOf(t, base, main.ID, "probe"), "RESTORED=none")
}

// TestForkJobTokenIsReadOnly: a fork pull request's job, once approved,
// is never handed to a self-hosted runner (why-waiting says the policy
// keeps it from them), and its job token, which fetches the run's
// repository, cannot push to it.
func TestForkJobTokenIsReadOnly(t *testing.T) {
	t.Parallel()
	w := newWorld(t, map[string]string{".cikit.yml": trustedPipeline, "k.lock": "k 1\n"})
	w.cfg.Runners.Local = 0 // the test claims the job itself
	s := serve(t, w.cfg)
	base := s.p.URL()

	fork := w.branchCommit(t, "fork-8", map[string]string{".cikit.yml": forkPipeline})
	code, out := deliverEvent(t, base, "pull_request", "fork-8", prBody(8, "eve", fork, "CONTRIBUTOR"))
	require.Equal(t, http.StatusAccepted, code, out)
	run := waitTrustRun(t, s, "fork-8", "the fork's run", func(r *trustRun) bool { return len(r.Jobs) == 2 })
	require.Equal(t, cikit.DecisionAllow, run.job(t, "probe").Admission.Decision, "a contributor's fork is not held")

	register := func(name string, labels ...string) string {
		t.Helper()
		var reg struct {
			Token string `json:"runner_token"`
		}
		code, out := call(t, http.MethodPost, base+"/v1/runners", w.cfg.Runners.RegistrationTokens[0], map[string]any{"name": name, "labels": labels})
		require.Equal(t, http.StatusCreated, code, out)
		require.NoError(t, json.Unmarshal([]byte(out), &reg))
		return reg.Token
	}
	trusted := register("trusted", "self-hosted", "linux")
	code, out = call(t, http.MethodGet, base+"/v1/jobs/claim?wait=1s", trusted, nil)
	require.Equal(t, http.StatusNoContent, code, "a self-hosted runner gets no fork job: %s", out)
	var why struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	require.Equal(t, http.StatusOK, getJSON(t, base+"/api/v1/runs/"+run.ID+"/jobs/probe/why", &why))
	require.Contains(t, why.Message, "the policy allows runners labelled [* !self-hosted] only", "%+v", why)

	hosted := register("hosted", "linux")
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
	code, out = call(t, http.MethodGet, base+"/v1/jobs/claim?wait=30s", hosted, nil)
	require.Equal(t, http.StatusOK, code, out)
	require.NoError(t, json.Unmarshal([]byte(out), &claim))
	src := claim.Context.Source
	withToken := strings.Replace(src.URL, "://", "://"+src.Username+":"+src.Token+"@", 1)
	require.Contains(t, gitIn(t, w.root, "ls-remote", withToken), fork, "the job token fetches the fork's commit")
	require.Equal(t, http.StatusForbidden, gitHTTP(t, src.URL, "git-receive-pack", src.Username, src.Token), "a push")
	clone := filepath.Join(w.root, "clone")
	gitIn(t, w.root, "clone", "-q", withToken, clone)
	require.NoError(t, os.WriteFile(filepath.Join(clone, "stolen"), []byte("x\n"), 0o644))
	gitIn(t, clone, "add", "stolen")
	gitIn(t, clone, "commit", "-q", "-m", "pushed with a fork's job token")
	pushed, err := gitRun(clone, "push", "origin", "HEAD:refs/heads/main")
	require.Error(t, err, "git pushed with a fork's job token: %s", pushed)
	require.Contains(t, pushed, "403", "%s", pushed)

	// The runners registry shows both, and a revoked runner is refused.
	code, out = getText(t, base+"/api/v1/runners")
	require.Equal(t, http.StatusOK, code, out)
	var runners struct {
		Runners []map[string]any `json:"runners"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &runners))
	ids := map[string]string{}
	for _, r := range runners.Runners {
		ids[r["name"].(string)] = r["id"].(string)
		if r["name"] == "hosted" {
			require.Equal(t, "busy", r["state"], "%v", r)
			require.Equal(t, claim.JobID, r["job"].(map[string]any)["job_id"], "%v", r)
		}
	}
	require.Contains(t, ids, "trusted")
	code, out = call(t, http.MethodPost, base+"/api/v1/runners/"+ids["trusted"]+"/revoke", adminOf(t, base), map[string]string{"reason": "decommissioned"})
	require.Equal(t, http.StatusOK, code, out)
	require.Contains(t, out, `"state":"revoked"`)
	require.Contains(t, out, `"reason":"decommissioned"`)
	require.Contains(t, out, `"revoked_by":"admin"`)
	code, out = call(t, http.MethodGet, base+"/v1/jobs/claim?wait=1s", trusted, nil)
	require.Equal(t, http.StatusUnauthorized, code, out)
	require.Contains(t, out, "revoked")
}

// brokenPolicy does not parse: line 3 has no rule.
const brokenPolicy = `package cikit.policy

decision := {"decision": "allow"
`

// holdAll holds every job for approval.
const holdAll = `package cikit.policy

decision := {"decision": "require_approval", "reason": "everything is held today", "secrets_scopes": input.job.default_secrets_scopes}
`

// allowAll allows every job.
const allowAll = `package cikit.policy

decision := {"decision": "allow", "secrets_scopes": input.job.default_secrets_scopes}
`

// TestPolicyFileReloads: a platform on its own policy file holds runs as
// the file says; a broken replacement is refused with its error position
// and the policy in force stays; a valid one changes the decisions
// without a restart.
func TestPolicyFileReloads(t *testing.T) {
	t.Parallel()
	w := newWorld(t, map[string]string{".cikit.yml": trustedPipeline, "k.lock": "k 1\n"})
	file := filepath.Join(w.root, "policy.rego")
	require.NoError(t, os.WriteFile(file, []byte(holdAll), 0o644))
	w.cfg.Policy.File = file
	w.cfg.Policy.Watch = -1 // reloads only when asked
	s := serve(t, w.cfg)
	base := s.p.URL()
	admin := adminOf(t, base)

	var info struct {
		Policy string `json:"policy"`
	}
	require.Equal(t, http.StatusOK, getJSON(t, base+"/api/v1/policy", &info))
	require.Regexp(t, `^policy\.rego sha256:[0-9a-f]{12}$`, info.Policy)
	held := info.Policy
	code, out := deliver(t, base, "push-held", pushBody(w.sha))
	require.Equal(t, http.StatusAccepted, code, out)
	run := waitTrustRun(t, s, "push-held", "the run to be held", func(r *trustRun) bool { return r.State == cikit.RunBlocked })
	require.Equal(t, "everything is held today", run.job(t, "probe").Admission.Reason)
	require.Equal(t, held, run.job(t, "probe").Admission.Policy)

	require.NoError(t, os.WriteFile(file, []byte(brokenPolicy), 0o644))
	code, out = call(t, http.MethodPost, base+"/api/v1/policy/reload", admin, nil)
	require.Equal(t, http.StatusUnprocessableEntity, code, out)
	require.Regexp(t, `policy\.rego:\d+:\d+: rego_parse_error`, out)
	require.Contains(t, out, held, "the policy in force stays")
	code, out = call(t, http.MethodPost, base+"/api/v1/policy/reload", person(t, base, "reader", "read", "acme", ""), nil)
	require.Equal(t, http.StatusForbidden, code, out)

	require.NoError(t, os.WriteFile(file, []byte(allowAll), 0o644))
	code, out = call(t, http.MethodPost, base+"/api/v1/policy/reload", admin, nil)
	require.Equal(t, http.StatusOK, code, out)
	w.commit(t, "another commit", map[string]string{"README": "x\n"})
	code, out = deliver(t, base, "push-allowed", pushBody(w.sha))
	require.Equal(t, http.StatusAccepted, code, out)
	run = waitTrustRun(t, s, "push-allowed", "the run to succeed under the new policy", func(r *trustRun) bool { return r.State == cikit.RunSucceeded })
	require.Equal(t, cikit.DecisionAllow, run.job(t, "probe").Admission.Decision)
	require.NotEqual(t, held, run.job(t, "probe").Admission.Policy)
}

// TestWebhooksOnTheirOwnListener: with http.webhook-listen, webhooks are
// taken on that address only, and it serves nothing else: a network that
// lets forges in need not reach the API.
func TestWebhooksOnTheirOwnListener(t *testing.T) {
	t.Parallel()
	w := newWorld(t, map[string]string{".cikit.yml": trustedPipeline, "k.lock": "k 1\n"})
	w.cfg.HTTP.WebhookListen = "127.0.0.1:0"
	w.cfg.Runners.Local = 0
	s := serve(t, w.cfg)
	hooks := "http://" + s.p.WebhookAddr()
	require.NotEqual(t, s.p.URL(), hooks)

	code, out := deliver(t, s.p.URL(), "on-main", pushBody(w.sha))
	require.Contains(t, []int{http.StatusNotFound, http.StatusMethodNotAllowed}, code, "the main listener takes no webhook: %s", out)
	code, out = deliver(t, hooks, "on-hooks", pushBody(w.sha))
	require.Equal(t, http.StatusAccepted, code, out)
	require.NotEmpty(t, runOf(t, s, "on-hooks"))
	code, out = getText(t, hooks+"/api/v1/runs")
	require.Equal(t, http.StatusNotFound, code, "the webhook listener serves no API: %s", out)
}
