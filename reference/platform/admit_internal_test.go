package platform

import (
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/ingest"
	"github.com/cikit/cikit/internal/testenv"
	"github.com/cikit/cikit/reference/config"
	"github.com/cikit/cikit/secrets/policy"
)

// realEvent normalizes a delivery of the shared testdata's webhooks.
func realEvent(t *testing.T, dir, file string) *ingest.Event {
	t.Helper()
	body, err := os.ReadFile(filepath.Join(dir, file))
	require.NoError(t, err)
	h := http.Header{}
	var n ingest.Normalized
	if provider, rest, _ := strings.Cut(file, "__"); provider == "github" {
		kind, _, _ := strings.Cut(rest, "__")
		h.Set("X-GitHub-Event", kind)
		h.Set("X-GitHub-Delivery", "d-"+file)
		n, err = ingest.NormalizeGitHub(&ingest.Webhook{Header: h, Body: body})
	} else {
		h.Set("X-Gitlab-Event-UUID", "d-"+file)
		n, err = ingest.NormalizeGitLab(&ingest.Webhook{Header: h, Body: body})
	}
	require.NoError(t, err, file)
	require.NotNil(t, n.Event, "%s: %+v", file, n.Ignored)
	return n.Event
}

// TestDefaultPolicyOnRealEvents: the admitter turns real deliveries
// (the shared testdata's, written by forges) into the policy's input and
// the default policy's decisions: a push to the default branch and a
// same-repository pull request are allowed with their default scopes; a
// deploy from a pull request is denied; the same pull request made a
// fork's, by an author GitHub knows nothing of, is held with no secrets.
func TestDefaultPolicyOnRealEvents(t *testing.T) {
	dir := testenv.SharedTestdata(t, "webhooks")
	engine, err := policy.New(policy.Config{})
	require.NoError(t, err)
	a := newAdmitter(engine, config.Policy{}, slog.New(slog.DiscardHandler))
	decide := func(ev *ingest.Event, env string) *cikit.JobSpec {
		t.Helper()
		spec := &cikit.JobSpec{ID: "job", Secrets: []string{"DEPLOY_TOKEN"}, RunsOn: []string{"ubuntu-latest"}}
		if env != "" {
			spec.Environment = &cikit.Environment{Name: env}
		}
		rc, _ := ingest.RunContext(ev, "github")
		run := &dag.RunCreateParams{Jobs: []*cikit.JobSpec{spec}, Context: rc}
		require.NoError(t, a.admit(t.Context(), ev, run, ingest.AdmitFacts{Pipeline: ".github/workflows/ci.yml", ChangedFiles: ev.Paths}))
		return spec
	}

	push := realEvent(t, dir, "github__push__with-new-branch.payload.json")
	require.Equal(t, ingest.KindPush, push.Kind)
	spec := decide(push, "")
	require.Equal(t, cikit.DecisionAllow, spec.Admission.Decision, "%+v", spec.Admission)
	repo := push.Org + "/" + push.Repo
	require.Contains(t, spec.Admission.SecretsScopes, "repo:"+repo)
	require.Nil(t, spec.Gate)
	require.Nil(t, spec.Admission.RunnerLabelsAllowed)

	for _, file := range []string{"github__pull_request__opened.payload.json", "github__pull_request__synchronize.payload.json"} {
		pr := realEvent(t, dir, file)
		require.Equal(t, ingest.KindPullRequest, pr.Kind, file)
		require.False(t, pr.Fork, file)
		spec = decide(pr, "")
		require.Equal(t, cikit.DecisionAllow, spec.Admission.Decision, "%s: %+v", file, spec.Admission)
		require.Contains(t, spec.Admission.SecretsScopes, "repo:"+pr.Org+"/"+pr.Repo, file)

		spec = decide(pr, "production")
		require.Equal(t, cikit.DecisionDeny, spec.Admission.Decision, "a pull request's head is not protected: %s", file)
		require.Contains(t, spec.Admission.Reason, "only protected branches and tags may deploy to production")

		fork := *pr
		fork.Fork, fork.AuthorAssociation = true, "NONE"
		spec = decide(&fork, "")
		require.Equal(t, cikit.DecisionRequireApproval, spec.Admission.Decision, file)
		require.Equal(t, []string{}, spec.Admission.SecretsScopes, file)
		require.Equal(t, []string{"*", "!self-hosted"}, spec.Admission.RunnerLabelsAllowed, file)
		require.NotNil(t, spec.Gate, file)
		require.Equal(t, DefaultApprovalExpiry, spec.Gate.Expires, file)
	}

	mr := realEvent(t, dir, "gitlab__merge_request.json")
	require.Equal(t, ingest.KindPullRequest, mr.Kind)
	spec = decide(mr, "")
	if mr.Fork {
		require.Equal(t, cikit.DecisionRequireApproval, spec.Admission.Decision, "GitLab says nothing of a fork's author")
	} else {
		require.Equal(t, cikit.DecisionAllow, spec.Admission.Decision)
	}
	tag := realEvent(t, dir, "gitlab__tag_push.json")
	require.Equal(t, ingest.KindTag, tag.Kind)
	spec = decide(tag, "production")
	require.Equal(t, cikit.DecisionDeny, spec.Admission.Decision, "no tag is protected by default")
	a.cfg.ProtectedTags = []string{"*"}
	spec = decide(tag, "production")
	require.Equal(t, cikit.DecisionAllow, spec.Admission.Decision, "a protected tag deploys: %+v", spec.Admission)
}

// TestEnvironmentProtectionRules: an environment's rule gates a job with
// its reviewers and wait timer, denies refs it does not let deploy, and
// delays a job by a wait timer alone.
func TestEnvironmentProtectionRules(t *testing.T) {
	engine, err := policy.New(policy.Config{})
	require.NoError(t, err)
	a := newAdmitter(engine, config.Policy{Environments: []config.Environment{
		{Name: "production", Repos: []string{"acme/*"}, Reviewers: []string{"alice"}, WaitTimer: 5 * time.Minute, Refs: []string{"main", "v*"}},
		{Name: "staging", WaitTimer: time.Minute},
	}}, slog.New(slog.DiscardHandler))
	push := func(ref string) *ingest.Event {
		return &ingest.Event{Provider: ingest.GitHub, Kind: ingest.KindPush, Org: "acme", Repo: "api", RefType: ingest.RefBranch, RefName: ref, DefaultBranch: "main", SHA: strings.Repeat("a", 40)}
	}
	decide := func(ev *ingest.Event, env string) *cikit.JobSpec {
		t.Helper()
		spec := &cikit.JobSpec{ID: "deploy", Environment: &cikit.Environment{Name: env}}
		rc, _ := ingest.RunContext(ev, "native")
		require.NoError(t, a.admit(t.Context(), ev, &dag.RunCreateParams{Jobs: []*cikit.JobSpec{spec}, Context: rc}, ingest.AdmitFacts{}))
		return spec
	}
	spec := decide(push("main"), "production")
	require.Equal(t, cikit.DecisionAllow, spec.Admission.Decision)
	require.Equal(t, &cikit.Gate{Reasons: []string{"deployment to production"}, Reviewers: []string{"alice"}, WaitTimer: 5 * time.Minute, Expires: DefaultApprovalExpiry}, spec.Gate)

	a.cfg.ProtectedBranches = []string{"feature"}
	spec = decide(push("feature"), "production")
	require.Equal(t, cikit.DecisionDeny, spec.Admission.Decision)
	require.Equal(t, "branch feature may not deploy to production: its protection rule lets only main, v* deploy", spec.Admission.Reason)

	spec = decide(push("feature"), "staging")
	require.Nil(t, spec.Gate, "a wait timer alone holds nobody")
	require.Equal(t, cikit.WhenDelayed, spec.When)
	require.Equal(t, time.Minute, spec.StartIn)
}
