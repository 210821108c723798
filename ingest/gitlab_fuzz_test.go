package ingest_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cikit/cikit/ingest"
)

// FuzzNormalizeGitLab feeds arbitrary payloads to NormalizeGitLab,
// seeded with the golden GitLab payloads.
//
// Invariant: NormalizeGitLab never panics; when it returns no error, the
// result holds checkNormalized's invariants: one of an event and an
// ignored reason, an event with a valid Kind and RefType, a non-empty
// Org, Repo, RefName and SHA, and a Key consistent with its parts, also
// after a JSON round trip.
func FuzzNormalizeGitLab(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "webhook", "gitlab", "*.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		body, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		wh := &ingest.Webhook{Header: gitLabHeaders("fuzz"), Body: body, Received: goldenReceived}
		res, err := ingest.NormalizeGitLab(wh)
		if err != nil {
			return
		}
		checkNormalized(t, ingest.GitLab, wh, res, false)
	})
}
