package ingest_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/cikit/cikit/ingest"
)

// FuzzManualTrigger sends arbitrary paths, keys and bodies to the manual
// trigger. Invariant: the trigger never panics and never answers 5xx —
// its VCS and store are in memory and never fail, so any 5xx would be a
// permanent input error reported as a transient one — and every answer
// is a JSON object; a 400 names the field at fault when the input has a
// single one, and a refused variable (field "variables.NAME") is a 400
// whose message names it.
func FuzzManualTrigger(f *testing.F) {
	fx := newFixture(f, -1)
	fx.vcs.AddCommit("acme/api", "c9", map[string]string{".github/workflows/deploy.yml": manualPipeline})
	fx.vcs.SetRef("acme/api", "main", "c9")
	fx.vcs.AddCommit("acme/api", "c20", map[string]string{".github/workflows/typed.yml": typedPipeline, ".gitlab-ci.yml": freeGitLab})
	fx.vcs.SetRef("acme/api", "typed", "c20")
	trigger := ingest.NewManualTrigger(fx.in, fx.vcs)

	f.Add("acme", "api", "k1", `{"ref": "main", "variables": {"target": "prod"}}`)
	f.Add("acme", "api", "k2", `{"ref": "../../etc"}`)
	f.Add("acme", "api", "k3", `{"ref": "refs/tags/v1", "sha": "zz"}`)
	f.Add("acme", "api", "", `{"ref": "main"}`)
	f.Add("a%00", "api", "k4", `{"ref": "main"}`)
	f.Add("acme", "api", "k5", `{"ref": "main", "variables": {"a\u0000": "b"}}`)
	f.Add("acme", "api", "k6", `{"ref": 1}`)
	f.Add("acme", "api", "k7", `{"ref": "typed", "variables": {"target": "x", "flag": "yes", "n": "1e999"}}`)
	f.Add("acme", "api", "k8", `{"ref": "typed", "variables": {"target": "x", "flag": "true", "n": "-2.5", "level": "high"}}`)
	f.Fuzz(func(t *testing.T, org, repo, key, body string) {
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		req.SetPathValue("org", org)
		req.SetPathValue("repo", repo)
		if key != "" && !strings.ContainsAny(key, "\r\n") {
			req.Header["Idempotency-Key"] = []string{key}
		}
		rec := httptest.NewRecorder()
		trigger.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("answered %d for org %q repo %q key %q body %q: %s", rec.Code, org, repo, key, body, rec.Body)
		}
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("answer %d is not a JSON object: %q", rec.Code, rec.Body)
		}
		if field, _ := out["field"].(string); strings.HasPrefix(field, "variables.") {
			msg, _ := out["error"].(string)
			name := strings.TrimPrefix(field, "variables.")
			if rec.Code != http.StatusBadRequest || !strings.Contains(msg, name) && !strings.Contains(msg, strconv.Quote(name)) {
				t.Fatalf("answered %d for %s with %q: a refused variable is a 400 naming it", rec.Code, field, msg)
			}
		}
	})
}
