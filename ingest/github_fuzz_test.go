package ingest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cikit/cikit/ingest"
)

// FuzzNormalizeGitHub feeds arbitrary payloads to NormalizeGitHub, under
// arbitrary event names and delivery ids, seeded with the golden GitHub
// payloads.
//
// Invariant: NormalizeGitHub never panics; when it returns no error, the
// result holds checkNormalized's invariants: one of an event and an
// ignored reason, an event with a valid Kind and RefType, a non-empty
// Org, Repo and RefName, a SHA unless the event is create or
// workflow_dispatch, and a Key consistent with its parts, also after a
// JSON round trip.
func FuzzNormalizeGitHub(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "webhook", "github", "*.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		body, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		event, _, _ := strings.Cut(filepath.Base(file), "__")
		f.Add(event, "72d3162e-cc78-11e3-81ab-4c9367dc0958", body)
	}
	f.Fuzz(func(t *testing.T, event, delivery string, body []byte) {
		wh := &ingest.Webhook{Header: gitHubHeaders("fuzz"), Body: body, Received: goldenReceived}
		wh.Header.Set("X-GitHub-Event", event)
		wh.Header.Set("X-GitHub-Delivery", delivery)
		res, err := ingest.NormalizeGitHub(wh)
		if err != nil {
			return
		}
		checkNormalized(t, ingest.GitHub, wh, res, gitHubSHAOptional(event))
	})
}
