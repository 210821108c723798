package ingest_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cikit/cikit/ingest"
)

// FuzzNormalizeGitLab feeds arbitrary payloads to NormalizeGitLab, under
// arbitrary delivery ids, seeded with the golden GitLab payloads.
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
		f.Add("5f3c0b1e-8f0e-4a57-9d1c-2f9c7a3e6b10", body)
	}
	f.Fuzz(func(t *testing.T, delivery string, body []byte) {
		wh := &ingest.Webhook{Header: gitLabHeaders("fuzz"), Body: body, Received: goldenReceived}
		wh.Header.Set("Idempotency-Key", delivery)
		res, err := ingest.NormalizeGitLab(wh)
		if err != nil {
			return
		}
		checkNormalized(t, ingest.GitLab, wh, res, false)
	})
}
