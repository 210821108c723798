package ingest_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/compiler"
	"github.com/cikit/cikit/ingest"
	"github.com/cikit/cikit/internal/testenv"
)

// sharedWebhook reads a real webhook payload of the shared test data (see
// testenv.SharedTestdata: skipped when absent, failed so under CI=true).
func sharedWebhook(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.SharedTestdata(t, "webhooks"), name))
	require.NoError(t, err)
	return b
}

// TestRunContextOfRealPayloads: the run context of real GitHub and GitLab
// deliveries names the event as the pipeline's format does, and carries
// the repository, ref, commit, pull request and actor of the payload,
// and the payload itself.
func TestRunContextOfRealPayloads(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file, event string
		provider    ingest.Provider
		format      compiler.Format
		want        cikit.RunContext
	}{
		{"github__pull_request__opened.payload.json", "pull_request", ingest.GitHub, compiler.FormatGitHub, cikit.RunContext{
			Provider: "github", Repository: "Codertocat/Hello-World", Event: "pull_request", Ref: "refs/pull/2/merge", RefName: "2/merge",
			RefType: "branch", SHA: "ec26c3e57ca3a959ca5aad62de7213c562f8c821", BaseRef: "master", HeadRef: "changes", PRNumber: 2,
			AuthorAssociation: "OWNER", DefaultBranch: "master", Actor: "Codertocat"}},
		{"github__workflow_dispatch__payload.json", "workflow_dispatch", ingest.GitHub, compiler.FormatGitHub, cikit.RunContext{
			Provider: "github", Repository: "octo-org/octo-repo", Event: "workflow_dispatch", Ref: "refs/heads/master", RefName: "master",
			RefType: "branch", DefaultBranch: "master", Actor: "Codertocat", Inputs: map[string]string{"name": "Mona the Octocat"}}},
		{"gitlab__push.json", "Push Hook", ingest.GitLab, compiler.FormatGitLab, cikit.RunContext{
			Provider: "gitlab", Repository: "mike/diaspora", Event: "push", Ref: "refs/heads/master", RefName: "master", RefType: "branch",
			SHA: "da1560886d4f094c3e6c9ef40349f7d38b5d27d7", DefaultBranch: "master", Actor: "jsmith"}},
		{"gitlab__tag_push.json", "Tag Push Hook", ingest.GitLab, compiler.FormatGitLab, cikit.RunContext{
			Provider: "gitlab", Repository: "jsmith/example", Event: "push", Ref: "refs/tags/v1.0.0", RefName: "v1.0.0", RefType: "tag",
			SHA: "82b3d5ae55f7080f1e6022629cdb57bfae7cccc7", DefaultBranch: "master", Actor: "jsmith"}},
		{"gitlab__merge_request.json", "Merge Request Hook", ingest.GitLab, compiler.FormatGitLab, cikit.RunContext{
			Provider: "gitlab", Repository: "gitlabhq/gitlab-test", Event: "merge_request_event", Ref: "refs/heads/ms-viewport",
			RefName: "ms-viewport", RefType: "branch", SHA: "da1560886d4f094c3e6c9ef40349f7d38b5d27d7", BaseRef: "master",
			HeadRef: "ms-viewport", PRNumber: 1, DefaultBranch: "master", Actor: "user1"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			body := sharedWebhook(t, tc.file)
			h := http.Header{}
			var n ingest.Normalized
			var err error
			if tc.provider == ingest.GitHub {
				h.Set("X-GitHub-Event", tc.event)
				h.Set("X-GitHub-Delivery", "d-1")
				n, err = ingest.NormalizeGitHub(&ingest.Webhook{Header: h, Body: body})
			} else {
				h.Set("X-Gitlab-Event", tc.event)
				h.Set("X-Gitlab-Event-UUID", "d-1")
				n, err = ingest.NormalizeGitLab(&ingest.Webhook{Header: h, Body: body})
			}
			require.NoError(t, err)
			require.NotNil(t, n.Event, "%+v", n.Ignored)
			rc, note := ingest.RunContext(n.Event, tc.format)
			require.Empty(t, note)
			require.JSONEq(t, string(body), string(rc.Payload), "the payload as received")
			rc.Payload = nil
			require.Equal(t, tc.want, *rc)
		})
	}
}

// TestRunContextEventNames: each format names the event its own way, and
// a payload too large or not JSON is recorded as {} with a note.
func TestRunContextEventNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind   ingest.Kind
		vars   map[string]string
		format compiler.Format
		want   string
	}{
		{ingest.KindPush, nil, compiler.FormatGitHub, "push"},
		{ingest.KindTag, nil, compiler.FormatGitHub, "push"},
		{ingest.KindDispatch, nil, compiler.FormatGitHub, "workflow_dispatch"},
		{ingest.KindDispatch, nil, compiler.FormatGitLab, "web"},
		{ingest.KindDispatch, map[string]string{"CI_PIPELINE_SOURCE": "api"}, compiler.FormatGitLab, "api"},
		{ingest.KindPullRequest, nil, compiler.FormatGitLab, "merge_request_event"},
		{ingest.KindPullRequest, nil, compiler.FormatNative, "pull_request"},
		{ingest.KindDispatch, nil, compiler.FormatNative, "dispatch"},
	} {
		rc, _ := ingest.RunContext(&ingest.Event{Kind: tc.kind, Org: "acme", Repo: "api", RefType: ingest.RefBranch, RefName: "main",
			Variables: tc.vars}, tc.format)
		require.Equal(t, tc.want, rc.Event, "%s in %s", tc.kind, tc.format)
		require.Equal(t, tc.vars, rc.Inputs)
	}

	big := []byte(`{"x":"` + strings.Repeat("a", cikit.MaxPayloadBytes) + `"}`)
	rc, note := ingest.RunContext(&ingest.Event{Kind: ingest.KindPush, Org: "acme", Repo: "api", Raw: big}, compiler.FormatGitHub)
	require.Equal(t, json.RawMessage(`{}`), rc.Payload)
	require.Contains(t, note, "cikit.MaxPayloadBytes")
	rc, note = ingest.RunContext(&ingest.Event{Kind: ingest.KindPush, Org: "acme", Repo: "api", Raw: []byte("{\"a\":\"\xff\"}")}, compiler.FormatGitHub)
	require.Equal(t, json.RawMessage(`{}`), rc.Payload)
	require.Contains(t, note, "not JSON in UTF-8")
}
