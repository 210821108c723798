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

// gitLabHeaders are the headers of a golden GitLab delivery. The
// normalizer reads the kind from the payload, not from X-Gitlab-Event.
func gitLabHeaders(name string) http.Header {
	h := http.Header{}
	h.Set("X-Gitlab-Event", "Push Hook")
	h.Set("X-Gitlab-Event-UUID", "event-"+name)
	h.Set("Idempotency-Key", "delivery-"+name)
	h.Set("X-Gitlab-Webhook-UUID", "request-"+name)
	return h
}

func TestNormalizeGitLabGolden(t *testing.T) {
	t.Parallel()
	testGolden(t, "gitlab", ingest.GitLab, ingest.NormalizeGitLab, gitLabHeaders, func(string) bool { return false })
}

// TestNormalizeGitLabReal normalizes the real payloads of the shared
// collection, each of which must be listed here.
func TestNormalizeGitLabReal(t *testing.T) {
	t.Parallel()
	dir := testenv.SharedTestdata(t, "webhooks")
	received := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	commitTime := time.Date(2012, 1, 3, 21, 36, 29, 0, time.UTC) // 2012-01-03T23:36:29+02:00
	ignored := func(kind string) ingest.Normalized {
		return ingest.Normalized{Ignored: &ingest.Ignored{Event: kind, Reason: `GitLab object_kind "` + kind + `" starts no pipeline`}}
	}
	want := map[string]ingest.Normalized{
		"gitlab__build.json":      ignored("build"),
		"gitlab__deployment.json": ignored("deployment"),
		"gitlab__job.json":        ignored("build"),
		"gitlab__pipeline.json":   ignored("pipeline"),
		"gitlab__release.json":    ignored("release"),
		"gitlab__merge_request.json": {Event: &ingest.Event{
			HookID: "merge_request", Kind: ingest.KindPullRequest, Org: "gitlabhq", Repo: "gitlab-test",
			RefType: ingest.RefBranch, RefName: "ms-viewport", SHA: "da1560886d4f094c3e6c9ef40349f7d38b5d27d7",
			DefaultBranch: "master", Actor: "user1", PRNumber: 1, BaseRef: "master",
			EventTime: time.Date(2013, 12, 3, 17, 23, 34, 0, time.UTC),
		}},
		// Two of its four commits are listed: the changed files are not known.
		"gitlab__push.json": {Event: &ingest.Event{
			HookID: "push", Kind: ingest.KindPush, Org: "mike", Repo: "diaspora",
			RefType: ingest.RefBranch, RefName: "master", SHA: "da1560886d4f094c3e6c9ef40349f7d38b5d27d7",
			Before: "95790bf891e76fee5e1747ab589903a6a1f80f22", DefaultBranch: "master", Actor: "jsmith",
			EventTime: commitTime,
		}},
		"gitlab__tag_push.json": {Event: &ingest.Event{
			HookID: "tag_push", Kind: ingest.KindTag, Org: "jsmith", Repo: "example",
			RefType: ingest.RefTag, RefName: "v1.0.0", SHA: "82b3d5ae55f7080f1e6022629cdb57bfae7cccc7",
			Before: "0000000000000000000000000000000000000000", DefaultBranch: "master", Actor: "jsmith",
			Paths: []string{"CHANGELOG", "UPGRADE.md"}, EventTime: commitTime,
		}},
	}
	files, err := filepath.Glob(filepath.Join(dir, "gitlab__*.json"))
	require.NoError(t, err)
	require.Len(t, files, len(want), "every real GitLab payload has an expectation here")
	for _, file := range files {
		name := filepath.Base(file)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w, ok := want[name]
			require.True(t, ok, "no expectation for %s", name)
			body, err := os.ReadFile(file)
			require.NoError(t, err)
			wh := &ingest.Webhook{Header: gitLabHeaders(name), Body: body, Received: received}
			got, err := ingest.NormalizeGitLab(wh)
			require.NoError(t, err)
			checkNormalized(t, ingest.GitLab, wh, got, false)
			if w.Event != nil {
				ev := *w.Event
				ev.Provider, ev.DeliveryID, ev.Raw = ingest.GitLab, "delivery-"+name, body
				w.Event = &ev
			}
			require.Equal(t, w, got)
		})
	}
}

// The delivery id is the Idempotency-Key, which GitLab keeps across
// retries, else the id of GitLab versions before it.
func TestNormalizeGitLabDeliveryID(t *testing.T) {
	t.Parallel()
	body := []byte(`{"object_kind":"push","ref":"refs/heads/main","after":"2222222222222222222222222222222222222222",` +
		`"project":{"path_with_namespace":"acme/api"}}`)
	for _, tc := range []struct {
		headers map[string]string
		want    string
	}{
		{map[string]string{"Idempotency-Key": "k", "X-Gitlab-Event-UUID": "e", "X-Gitlab-Webhook-UUID": "r"}, "k"},
		{map[string]string{"X-Gitlab-Event-UUID": "e", "X-Gitlab-Webhook-UUID": "r"}, "e"},
		{map[string]string{"X-Gitlab-Webhook-UUID": "r"}, "r"},
	} {
		h := http.Header{}
		for k, v := range tc.headers {
			h.Set(k, v)
		}
		res, err := ingest.NormalizeGitLab(&ingest.Webhook{Header: h, Body: body})
		require.NoError(t, err)
		require.Equal(t, tc.want, res.Event.DeliveryID)
		require.Equal(t, "push", res.Event.HookID, "the object kind scopes the delivery id")
	}
	_, err := ingest.NormalizeGitLab(&ingest.Webhook{Header: http.Header{}, Body: body})
	require.EqualError(t, err, "gitlab push: no Idempotency-Key or X-Gitlab-Event-UUID header")
}

func TestNormalizeGitLabMergeRequestActions(t *testing.T) {
	t.Parallel()
	body, err := os.ReadFile(filepath.Join("testdata", "webhook", "gitlab", "merge_request__update.json"))
	require.NoError(t, err)
	for action, builds := range map[string]bool{
		"open": true, "update": true, "reopen": true,
		"close": false, "merge": false, "approved": false, "unapproved": false, "approval": false, "unapproval": false,
	} {
		payload := strings.Replace(string(body), `"action": "update"`, `"action": "`+action+`"`, 1)
		res, err := ingest.NormalizeGitLab(&ingest.Webhook{Header: gitLabHeaders(action), Body: []byte(payload)})
		require.NoError(t, err, action)
		if builds {
			require.NotNil(t, res.Event, action)
			require.Equal(t, ingest.KindPullRequest, res.Event.Kind)
		} else {
			require.Equal(t, &ingest.Ignored{Event: "merge_request", Reason: `merge request action "` + action + `" starts no pipeline`}, res.Ignored)
		}
	}
}
