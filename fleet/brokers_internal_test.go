package fleet

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/artifacts"
	"github.com/cikit/cikit/lease"
)

func TestMakeJobRef(t *testing.T) {
	t.Parallel()
	a := lease.Attempt{RunID: "r1", JobID: "test", Attempt: 2}
	main := &cikit.RunContext{Repository: "acme/api", RefType: "branch", RefName: "main", DefaultBranch: "main"}
	scopes := func(rc *cikit.RunContext) (string, []string) {
		return "s:" + rc.RefName, []string{"s:" + rc.RefName, "s:main"}
	}
	for _, tc := range []struct {
		name   string
		rc     *cikit.RunContext
		spec   *cikit.JobSpec
		scopes func(*cikit.RunContext) (string, []string)
		want   artifacts.JobRef
	}{
		{name: "no context, no scopes, no needs", spec: &cikit.JobSpec{ID: "test"},
			want: artifacts.JobRef{RunID: "r1", JobID: "test", Attempt: 2, ReadScopes: []string{""}, Needs: []string{}}},
		{name: "needs less those without artifacts", rc: main, scopes: scopes,
			spec: &cikit.JobSpec{ID: "test", Format: "gitlab", Needs: []string{"build", "lint", "docs"}, NoArtifactsFrom: []string{"lint"}},
			want: artifacts.JobRef{Repo: "acme/api", RunID: "r1", JobID: "test", Attempt: 2, Scope: "s:main", ReadScopes: []string{"s:main", "s:main"},
				Needs: []string{"build", "docs"}, DefaultBranch: true}},
		{name: "a GitHub job reads the run's", rc: main, spec: &cikit.JobSpec{ID: "test", Format: "github", Needs: []string{"build"}},
			want: artifacts.JobRef{Repo: "acme/api", RunID: "r1", JobID: "test", Attempt: 2, ReadScopes: []string{""}, DefaultBranch: true}},
		{name: "a tag named as the default branch", rc: &cikit.RunContext{Repository: "acme/api", RefType: "tag", RefName: "main", DefaultBranch: "main"},
			spec: &cikit.JobSpec{ID: "test"}, want: artifacts.JobRef{Repo: "acme/api", RunID: "r1", JobID: "test", Attempt: 2, ReadScopes: []string{""}, Needs: []string{}}},
		{name: "the default branch unknown", rc: &cikit.RunContext{Repository: "acme/api", RefType: "branch"},
			spec: &cikit.JobSpec{ID: "test"}, want: artifacts.JobRef{Repo: "acme/api", RunID: "r1", JobID: "test", Attempt: 2, ReadScopes: []string{""}, Needs: []string{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if d := cmp.Diff(tc.want, makeJobRef(a, tc.rc, tc.spec, tc.scopes)); d != "" {
				t.Fatalf("(-want +got)\n%s", d)
			}
		})
	}
}

// FuzzArtifactCallBodies feeds arbitrary bodies to the decoding and
// checks of the artifact and cache calls. Invariant: nothing panics; a
// body accepted has no field the call does not take, every name and key
// within artifacts.MaxNameLen and storable (valid UTF-8, no NUL), at most
// artifacts.MaxRestoreKeys fallback and restore keys, and the ETags and
// jobs within their bounds; a refusal names a field and is a 400.
func FuzzArtifactCallBodies(f *testing.F) {
	f.Add(uint8(0), []byte(`{"name":"dist","size":3,"sha256":"00ff","type":"report","report":"junit","expire_in":-1}`))
	f.Add(uint8(1), []byte(`{"etags":["\"e1\"","\"e2\""]}`))
	f.Add(uint8(2), []byte(`{"jobs":["build","a/b"],"name":"dist","type":"archive"}`))
	f.Add(uint8(3), []byte(`{"key":"go-1","fallback_keys":["go-main"],"restore_keys":["go-"]}`))
	f.Add(uint8(3), []byte(`{"key":"k\u0000"}`))
	f.Add(uint8(0), []byte(`{"name":"x","extra":1}`))
	decoders := []func([]byte) (any, *fieldError){decodeUploadRequest, decodeUploadComplete, decodeListRequest, decodeCacheQuery}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		v, ferr := decoders[int(which)%len(decoders)](body)
		if ferr != nil {
			if ferr.field == "" || ferr.status != 400 {
				t.Fatalf("refusal without a field or with status %d: %v", ferr.status, ferr)
			}
			return
		}
		name := func(s string) bool {
			return s != "" && len(s) <= artifacts.MaxNameLen && utf8.ValidString(s) && !strings.ContainsRune(s, 0)
		}
		switch r := v.(type) {
		case *artifacts.UploadRequest:
			if !name(r.Name) || len(r.Type) > maxShortField || len(r.Report) > maxShortField || len(r.SHA256) > maxShortField {
				t.Fatalf("upload %+v accepted", r)
			}
		case *uploadCompleteBody:
			if len(r.ETags) > maxETags {
				t.Fatalf("%d ETags accepted", len(r.ETags))
			}
			for _, e := range r.ETags {
				if len(e) > maxETagBytes || !utf8.ValidString(e) {
					t.Fatalf("ETag %q accepted", e)
				}
			}
		case *artifacts.ListRequest:
			if len(r.Jobs) > maxListJobs || r.Name != "" && !name(r.Name) {
				t.Fatalf("listing %+v accepted", r)
			}
			for _, j := range r.Jobs {
				if !name(j) {
					t.Fatalf("job %q accepted", j)
				}
			}
		case *artifacts.CacheQuery:
			if !name(r.Key) || len(r.FallbackKeys)+len(r.RestoreKeys) > artifacts.MaxRestoreKeys {
				t.Fatalf("query %+v accepted", r)
			}
			for _, k := range append(r.FallbackKeys, r.RestoreKeys...) {
				if !name(k) {
					t.Fatalf("key %q accepted", k)
				}
			}
		default:
			t.Fatalf("decoded %T", v)
		}
	})
}
