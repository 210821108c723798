package fleet

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/artifacts"
)

// FuzzCompleteReport feeds arbitrary completion bodies to the decoding and
// checks of a completion's report. Invariant: nothing panics; a report
// accepted is within every limit (cikit.MaxOutputValueBytes,
// cikit.MaxOutputsBytes, cikit.MaxAnnotations, the env names' and the
// cache reports' bounds),
// holds only strings PostgreSQL stores (valid UTF-8, no NUL), and a
// refusal names a field and a 400 or 413.
func FuzzCompleteReport(f *testing.F) {
	f.Add([]byte(`{"result":"succeeded","outputs":{"a":"1"},"annotations":[{"level":"error","message":"m","line":3}],"commit":"0123456789abcdef0123456789abcdef01234567","checkout_duration_ms":5,"env_names":["CI"]}`))
	f.Add([]byte(`{"outputs":{"":"x"}}`))
	f.Add([]byte(`{"outputs":{"a":"\u0000"}}`))
	f.Add([]byte(`{"annotations":[{"level":"fatal"}]}`))
	f.Add([]byte(`{"env_names":["A=B"],"commit":"zz"}`))
	f.Add([]byte(`{"caches":[{"key":"go-1","hit":true,"matched_key":"go-","size":3,"note":"n"},{"key":"\u0000","size":-1}]}`))
	f.Add([]byte(`{"image":"alpine:3.19","image_digest":"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}`))
	f.Add([]byte(`{"image":"a\u001b[0m","image_digest":"sha256:ABCDEF"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var req completeRequest
		if json.Unmarshal(body, &req) != nil {
			return
		}
		r, ferr := req.result()
		if ferr != nil {
			if ferr.field == "" || ferr.status != 400 && ferr.status != 413 {
				t.Fatalf("refusal without a field or with status %d: %v", ferr.status, ferr)
			}
			return
		}
		if r == nil {
			return
		}
		ok := func(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }
		total := 0
		for k, v := range r.Outputs {
			if k == "" || len(v) > cikit.MaxOutputValueBytes || !ok(k) || !ok(v) {
				t.Fatalf("output %q accepted", k)
			}
			total += len(k) + len(v)
		}
		if total > cikit.MaxOutputsBytes || len(r.Annotations) > cikit.MaxAnnotations || len(r.EnvNames) > maxEnvNames {
			t.Fatalf("a report past its limits accepted: %d bytes of outputs, %d annotations, %d env names", total, len(r.Annotations), len(r.EnvNames))
		}
		for _, a := range r.Annotations {
			if !ok(a.Message) || !ok(a.Title) || !ok(a.File) || !ok(a.Step) {
				t.Fatalf("annotation %+v accepted", a)
			}
		}
		for _, n := range r.EnvNames {
			if n == "" || strings.ContainsRune(n, '=') || !ok(n) {
				t.Fatalf("env name %q accepted", n)
			}
		}
		if len(r.Caches) > maxCacheReports {
			t.Fatalf("%d cache reports accepted", len(r.Caches))
		}
		for _, c := range r.Caches {
			if len(c.Key) > artifacts.MaxNameLen || len(c.MatchedKey) > artifacts.MaxNameLen || !ok(c.Key) || !ok(c.MatchedKey) || !ok(c.Step) || !ok(c.Note) ||
				c.Size < 0 || c.SavedSize < 0 || c.RestoredInMS < 0 {
				t.Fatalf("cache report %+v accepted", c)
			}
		}
		if r.CheckoutDuration < 0 {
			t.Fatalf("negative checkout duration accepted")
		}
		if len(r.ImageRef) > maxImageRefBytes || !ok(r.ImageRef) || strings.IndexFunc(r.ImageRef, unicode.IsControl) >= 0 {
			t.Fatalf("image reference %q accepted", r.ImageRef)
		}
		if r.ImageDigest != "" {
			if h, err := v1.NewHash(r.ImageDigest); err != nil || h.Algorithm != "sha256" {
				t.Fatalf("image digest %q accepted: %v", r.ImageDigest, err)
			}
		}
	})
}
