package ingest_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/ingest"
	"github.com/cikit/cikit/internal/testenv"
)

// gitHubHeaders are the headers of a golden GitHub delivery: the event
// is the part of the file name before "__".
func gitHubHeaders(name string) http.Header {
	event, _, _ := strings.Cut(name, "__")
	h := http.Header{}
	h.Set("X-GitHub-Event", event)
	h.Set("X-GitHub-Delivery", "delivery-"+name)
	h.Set("X-GitHub-Hook-ID", "42")
	return h
}

// gitHubSHAOptional says which GitHub events name no commit.
func gitHubSHAOptional(event string) bool {
	return event == "create" || event == "workflow_dispatch"
}

func TestNormalizeGitHubGolden(t *testing.T) {
	t.Parallel()
	testGolden(t, "github", ingest.GitHub, ingest.NormalizeGitHub, gitHubHeaders, func(name string) bool {
		event, _, _ := strings.Cut(name, "__")
		return gitHubSHAOptional(event)
	})
}

// TestNormalizeGitHubReal normalizes the real payloads of the shared
// collection, each of which must be listed here.
func TestNormalizeGitHubReal(t *testing.T) {
	t.Parallel()
	dir := testenv.SharedTestdata(t, "webhooks")
	received := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	pr := ingest.Event{
		Kind: ingest.KindPullRequest, Org: "Codertocat", Repo: "Hello-World",
		RefType: ingest.RefBranch, RefName: "changes", SHA: "ec26c3e57ca3a959ca5aad62de7213c562f8c821",
		DefaultBranch: "master", Actor: "Codertocat", PRNumber: 2, BaseRef: "master", AuthorAssociation: "OWNER",
		EventTime: time.Date(2019, 5, 15, 15, 20, 33, 0, time.UTC),
	}
	synchronize := pr
	synchronize.Before = "f95f852bd8fca8fcc58a9a2d6c842781e32a215e"
	newBranch := ingest.Event{
		Kind: ingest.KindPush, Org: "Codertocat", Repo: "Hello-World",
		RefType: ingest.RefBranch, RefName: "master", SHA: "6113728f27ae82c7b1a177c8d03f9e96e0adf246",
		Before: "0000000000000000000000000000000000000000", DefaultBranch: "master", Actor: "Codertocat",
		Paths: []string{"README.md"}, EventTime: time.Date(2019, 5, 15, 15, 19, 25, 0, time.UTC),
	}
	tagDeleted := &ingest.Ignored{Event: "push", Reason: "the tag simple-tag was deleted"}
	ping := &ingest.Ignored{Event: "ping", Reason: "a ping only checks that the webhook is reachable"}
	want := map[string]ingest.Normalized{
		"github__create__payload.json": {Event: &ingest.Event{
			Kind: ingest.KindTag, Org: "Codertocat", Repo: "Hello-World",
			RefType: ingest.RefTag, RefName: "simple-tag", DefaultBranch: "master", Actor: "Codertocat",
			EventTime: received,
		}},
		"github__ping__payload.json":                            {Ignored: ping},
		"github__ping__with-app_id.payload.json":                {Ignored: ping},
		"github__pull_request__opened.payload.json":             {Event: &pr},
		"github__pull_request__opened.with-null-body.json":      {Event: &pr},
		"github__pull_request__synchronize.payload.json":        {Event: &synchronize},
		"github__push__1.payload.json":                          {Ignored: tagDeleted},
		"github__push__payload.json":                            {Ignored: tagDeleted},
		"github__push__with-new-branch.payload.json":            {Event: &newBranch},
		"github__push__with-no-username-committer.payload.json": {Event: &newBranch},
		"github__workflow_dispatch__payload.json": {Event: &ingest.Event{
			Kind: ingest.KindDispatch, Org: "octo-org", Repo: "octo-repo",
			RefType: ingest.RefBranch, RefName: "master", DefaultBranch: "master", Actor: "Codertocat",
			Variables: map[string]string{"name": "Mona the Octocat"}, Pipeline: ".github/workflows/hello-world-workflow.yml", EventTime: received,
		}},
	}
	files, err := filepath.Glob(filepath.Join(dir, "github__*.json"))
	require.NoError(t, err)
	require.Len(t, files, len(want), "every real GitHub payload has an expectation here")
	for _, file := range files {
		name := filepath.Base(file)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w, ok := want[name]
			require.True(t, ok, "no expectation for %s", name)
			body, err := os.ReadFile(file)
			require.NoError(t, err)
			event := strings.Split(name, "__")[1]
			wh := &ingest.Webhook{Header: gitHubHeaders(name), Body: body, Received: received}
			wh.Header.Set("X-GitHub-Event", event)
			got, err := ingest.NormalizeGitHub(wh)
			require.NoError(t, err)
			checkNormalized(t, ingest.GitHub, wh, got, gitHubSHAOptional(event))
			if w.Event != nil {
				ev := *w.Event
				ev.Provider, ev.DeliveryID, ev.HookID, ev.Raw = ingest.GitHub, "delivery-"+name, "42", body
				w.Event = &ev
			}
			require.Equal(t, w, got)
		})
	}
}

func TestNormalizeGitHubHeaders(t *testing.T) {
	t.Parallel()
	body := []byte(`{"ref":"refs/heads/main","after":"2222222222222222222222222222222222222222",` +
		`"repository":{"name":"api","owner":{"login":"acme"}}}`)

	h := http.Header{}
	h.Set("X-GitHub-Delivery", "d-1")
	_, err := ingest.NormalizeGitHub(&ingest.Webhook{Header: h, Body: body})
	require.EqualError(t, err, "github: no X-GitHub-Event header")

	h = http.Header{}
	h.Set("X-GitHub-Event", "push")
	_, err = ingest.NormalizeGitHub(&ingest.Webhook{Header: h, Body: body})
	require.EqualError(t, err, "github push: no X-GitHub-Delivery header")

	h.Set("X-GitHub-Delivery", "d-1")
	res, err := ingest.NormalizeGitHub(&ingest.Webhook{Header: h, Body: body})
	require.NoError(t, err)
	require.Equal(t, "d-1", res.Event.DeliveryID)
	require.Empty(t, res.Event.HookID, "no X-GitHub-Hook-ID, no HookID")

	h.Set("X-GitHub-Event", "ping")
	_, err = ingest.NormalizeGitHub(&ingest.Webhook{Header: h, Body: []byte(`{"zen":`)})
	require.EqualError(t, err, "github ping: malformed JSON", "an ignored event is still JSON")
}

func TestNormalizeGitHubPullRequestActions(t *testing.T) {
	t.Parallel()
	body, err := os.ReadFile(filepath.Join("testdata", "webhook", "github", "pull_request__synchronize.json"))
	require.NoError(t, err)
	for action, builds := range map[string]bool{
		"opened": true, "synchronize": true, "reopened": true,
		"closed": false, "edited": false, "labeled": false, "ready_for_review": false, "assigned": false,
	} {
		payload := strings.Replace(string(body), `"action": "synchronize"`, `"action": "`+action+`"`, 1)
		res, err := ingest.NormalizeGitHub(&ingest.Webhook{Header: gitHubHeaders("pull_request__" + action), Body: []byte(payload)})
		require.NoError(t, err, action)
		if builds {
			require.NotNil(t, res.Event, action)
			require.Equal(t, ingest.KindPullRequest, res.Event.Kind)
			require.Equal(t, action == "synchronize", res.Event.Before != "", "Before only for synchronize")
		} else {
			require.Equal(t, &ingest.Ignored{Event: "pull_request", Reason: `pull request action "` + action + `" starts no pipeline`}, res.Ignored)
		}
	}
}

// TestNormalizeGitHubAuthorAssociation: a pull request's author
// association passes when it is a bounded word of capitals and
// underscores, and is dropped, not refused, otherwise: the sender writes
// it, and a policy compares it with the values it knows.
func TestNormalizeGitHubAuthorAssociation(t *testing.T) {
	t.Parallel()
	body, err := os.ReadFile(filepath.Join("testdata", "webhook", "github", "pull_request__synchronize.json"))
	require.NoError(t, err)
	for value, want := range map[string]string{
		`"FIRST_TIMER"`:   "FIRST_TIMER",
		`"NONE"`:          "NONE",
		`""`:              "",
		`null`:            "",
		`"member"`:        "",
		`"OWNER "`:        "",
		`"OWNER\nMEMBER"`: "",
		`"OWNER\u0000"`:   "",
		`"ÖWNER"`:         "",
		`"` + strings.Repeat("A", ingest.MaxAuthorAssociationBytes) + `"`:   strings.Repeat("A", ingest.MaxAuthorAssociationBytes),
		`"` + strings.Repeat("A", ingest.MaxAuthorAssociationBytes+1) + `"`: "",
		`"` + strings.Repeat("A", 1<<20) + `"`:                              "",
		`7`:                                                                 "",
		`["OWNER"]`:                                                         "",
		`{"OWNER": true}`:                                                   "",
	} {
		payload := strings.Replace(string(body), `"author_association": "MEMBER"`, `"author_association": `+value, 1)
		require.NotEqual(t, string(body), payload)
		wh := &ingest.Webhook{Header: gitHubHeaders("pull_request__assoc"), Body: []byte(payload), Received: goldenReceived}
		res, err := ingest.NormalizeGitHub(wh)
		require.NoError(t, err, value)
		checkNormalized(t, ingest.GitHub, wh, res, false)
		require.Equal(t, want, res.Event.AuthorAssociation, value)
	}
}
