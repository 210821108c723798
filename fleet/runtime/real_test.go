package runtime_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet/runtime"
	"github.com/cikit/cikit/internal/testenv"
)

// TestRealPayloads reads real webhook payloads of the shared collection
// through the github context and GitLab's predefined variables.
func TestRealPayloads(t *testing.T) {
	t.Parallel()
	dir := testenv.SharedTestdata(t, "webhooks")
	load := func(name string) json.RawMessage {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		return b
	}
	for _, tt := range []struct {
		file, event string
		want        map[string]string
	}{
		{"github__push__payload.json", "push", map[string]string{
			"${{ github.event.ref }}":                  "refs/tags/simple-tag",
			"${{ github.event.repository.full_name }}": "Codertocat/Hello-World",
			"${{ github.event.before }}":               "6113728f27ae82c7b1a177c8d03f9e96e0adf246",
			"${{ github.event.pusher.name }}":          "Codertocat",
		}},
		{"github__pull_request__opened.payload.json", "pull_request", map[string]string{
			"${{ github.event.number }}":                "2",
			"${{ github.event.pull_request.head.ref }}": "changes",
			"${{ github.event.pull_request.base.ref }}": "master",
			"${{ github.event.pull_request.draft }}":    "false",
			"${{ github.event.action == 'opened' }}":    "true",
		}},
		{"github__workflow_dispatch__payload.json", "workflow_dispatch", map[string]string{
			"${{ github.event.inputs.name }}": "Mona the Octocat",
			"${{ github.event.ref }}":         "refs/heads/master",
		}},
	} {
		jc := &cikit.JobContext{RunContext: cikit.RunContext{Event: tt.event, Payload: load(tt.file)}}
		g, err := runtime.NewGitHub(runtime.Params{Spec: &cikit.JobSpec{Format: "github"}, Context: jc})
		require.NoError(t, err, tt.file)
		for src, want := range tt.want {
			require.Equal(t, want, expand(t, g, src), "%s: %s", tt.file, src)
		}
		require.JSONEq(t, string(jc.Payload), string(runtime.EventJSON(jc)), "GITHUB_EVENT_PATH holds the payload as sent")
	}

	jc := &cikit.JobContext{RunContext: cikit.RunContext{Provider: "gitlab", Event: "push", Repository: "mike/diaspora",
		SHA: "da1560886d4f094c3e6c9ef40349f7d38b5d27d7", RefName: "master", RefType: "branch", Payload: load("gitlab__push.json")}}
	env := runtime.Env(runtime.Params{Spec: &cikit.JobSpec{Format: "gitlab"}, Context: jc})
	require.Equal(t, "95790bf891e76fee5e1747ab589903a6a1f80f22", env["CI_COMMIT_BEFORE_SHA"])
	require.Equal(t, "diaspora", env["CI_PROJECT_NAME"])
	require.Equal(t, "mike", env["CI_PROJECT_NAMESPACE"])
	require.Equal(t, "master", env["CI_COMMIT_BRANCH"])
	require.Equal(t, "fixed readme\n", env["CI_COMMIT_MESSAGE"])
	require.Equal(t, "fixed readme", env["CI_COMMIT_TITLE"])
	require.Equal(t, "", env["CI_COMMIT_DESCRIPTION"])
	require.Equal(t, "GitLab dev user <gitlabdev@dv6700.(none)>", env["CI_COMMIT_AUTHOR"])
	require.Equal(t, "2012-01-03T23:36:29+02:00", env["CI_COMMIT_TIMESTAMP"])

	jc.Event, jc.Payload = "merge_request_event", load("gitlab__merge_request.json")
	env = runtime.Env(runtime.Params{Spec: &cikit.JobSpec{Format: "gitlab"}, Context: jc})
	require.Equal(t, "fixed readme", env["CI_COMMIT_TITLE"], "a merge request's last commit")
}
