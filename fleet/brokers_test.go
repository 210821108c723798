package fleet_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/artifacts"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/fleet"
)

// testBrokers is a fleet.ArtifactBrokers whose Brokers record the
// JobRef they were made for and the calls made, and answer by fixed
// rules (see testBroker).
type testBrokers struct {
	mu    sync.Mutex
	refs  []artifacts.JobRef
	calls []string
	// flaky counts the lookups of key "flaky" that failed.
	flaky int
}

func (bs *testBrokers) ForJob(ref artifacts.JobRef) artifacts.Broker {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	bs.refs = append(bs.refs, ref)
	return &testBroker{bs: bs, ref: ref}
}

func (bs *testBrokers) record(call string) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	bs.calls = append(bs.calls, call)
}

// taken returns the calls and refs recorded, and forgets them.
func (bs *testBrokers) taken() ([]string, []artifacts.JobRef) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	c, r := bs.calls, bs.refs
	bs.calls, bs.refs = nil, nil
	return c, r
}

// testBroker answers: an upload named "taken" of a cache is
// ErrCacheExists, one named "boom" a failure of the store; upload "u1"
// completes (with ETags ["bad"] it is refused as a mismatch), any other
// is cikit.ErrNotFound; listing returns one artifact per job named;
// lookups hit key "hit", fail key "boom", fail key "flaky" the first
// time, and miss the rest.
type testBroker struct {
	bs  *testBrokers
	ref artifacts.JobRef
}

var errStoreDown = errors.New("the store at 10.0.0.7 is down")

func (b *testBroker) CreateUpload(_ context.Context, req artifacts.UploadRequest) (*artifacts.Upload, error) {
	b.bs.record("create " + req.Name)
	switch {
	case req.Cache && req.Name == "taken":
		return nil, fmt.Errorf("%w: key %q", artifacts.ErrCacheExists, req.Name)
	case req.Name == "boom":
		return nil, errStoreDown
	}
	return &artifacts.Upload{ID: "u1", PartSize: req.Size, Parts: []artifacts.Request{{Method: http.MethodPut, URL: "https://blobs.example/u1",
		Header: http.Header{"X-Amz-Checksum-Sha256": {"abc"}}, Size: req.Size, SHA256: req.SHA256}}}, nil
}

func (b *testBroker) CompleteUpload(_ context.Context, req artifacts.CompleteRequest) (*artifacts.Artifact, error) {
	b.bs.record(fmt.Sprintf("complete %s %v", req.UploadID, req.ETags))
	switch {
	case req.UploadID != "u1":
		return nil, fmt.Errorf("upload %q: %w", req.UploadID, cikit.ErrNotFound)
	case len(req.ETags) == 1 && req.ETags[0] == "bad":
		return nil, fmt.Errorf("%w: the upload's SHA-256 is not the one reserved", artifacts.ErrRefused)
	}
	return &artifacts.Artifact{ID: "a1", RunID: b.ref.RunID, JobID: b.ref.JobID, Attempt: b.ref.Attempt, Name: "dist", Type: artifacts.TypeArchive, Size: 3}, nil
}

func (b *testBroker) AbortUpload(_ context.Context, uploadID string) error {
	b.bs.record("abort " + uploadID)
	return nil
}

func (b *testBroker) ListArtifacts(_ context.Context, req artifacts.ListRequest) ([]artifacts.Artifact, error) {
	b.bs.record(fmt.Sprintf("list %v", req.Jobs))
	var out []artifacts.Artifact
	for _, j := range req.Jobs {
		out = append(out, artifacts.Artifact{ID: "a-" + j, RunID: b.ref.RunID, JobID: j, Attempt: 1, Name: "dist", Type: artifacts.TypeArchive,
			Download: &artifacts.Request{Method: http.MethodGet, URL: "https://blobs.example/" + j}})
	}
	return out, nil
}

func (b *testBroker) LookupCache(_ context.Context, q artifacts.CacheQuery) (*artifacts.CacheHit, error) {
	b.bs.record("lookup " + q.Key)
	switch q.Key {
	case "hit":
		return &artifacts.CacheHit{Key: "hit", Exact: true, Scope: b.ref.Scope, Size: 7, SHA256: "00ff",
			Download: artifacts.Request{Method: http.MethodGet, URL: "https://blobs.example/cache/hit"}}, nil
	case "boom":
		return nil, errStoreDown
	case "flaky":
		b.bs.mu.Lock()
		defer b.bs.mu.Unlock()
		if b.bs.flaky == 0 {
			b.bs.flaky++
			return nil, errStoreDown
		}
		return &artifacts.CacheHit{Key: "flaky", Exact: true}, nil
	}
	return nil, nil
}

// setupArtifacts is setup with a testBrokers as the server's Artifacts,
// and scopes named after the run's ref.
func setupArtifacts(t testing.TB) (*bundle, *testBrokers) {
	t.Helper()
	bs := &testBrokers{}
	b := setupWith(t, memoryStores, func(c *fleet.ServerConfig) {
		c.Artifacts = bs
		c.CacheScopes = func(rc *cikit.RunContext) (string, []string) {
			if rc == nil {
				return "none", []string{"none"}
			}
			return "ref:" + rc.RefName, []string{"ref:" + rc.RefName, "ref:" + rc.DefaultBranch}
		}
	})
	return b, bs
}

// send sends a raw body and returns the status, the decoded JSON answer
// and the answer's header.
func (b *bundle) send(t *testing.T, method, path, token, body string) (int, map[string]any, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, b.srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := b.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out map[string]any
	if len(raw) > 0 {
		require.NoError(t, json.Unmarshal(raw, &out), "%s", raw)
	}
	return resp.StatusCode, out, resp.Header
}

// TestArtifactCalls: each artifact and cache call reaches the attempt's
// Broker, and its errors, a malformed or oversized body, a wrong method
// and a wrong token are answered as docs/runner-protocol.md says.
func TestArtifactCalls(t *testing.T) {
	t.Parallel()
	b, bs := setupArtifacts(t)
	runner := b.register(t)
	b.newRun(t, spec("build"), spec("other"))
	c := b.claim(t, runner, "5")
	other := b.claim(t, runner, "5")
	long := strings.Repeat("k", artifacts.MaxNameLen+1)
	keys := make([]string, artifacts.MaxRestoreKeys+1)
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
	}
	restore, _ := json.Marshal(map[string]any{"key": "k", "restore_keys": keys[:20], "fallback_keys": keys[20:]})

	for _, tc := range []struct {
		name, method, call, body string
		token                    string // default c's
		status                   int
		want                     map[string]any // the answer's fields compared, when set
		errHas                   string         // a part of the error, when set
		recorded                 []string
	}{
		{name: "create", method: http.MethodPost, call: "uploads", body: `{"name":"dist","size":3,"sha256":"00ff"}`, status: http.StatusCreated,
			want: map[string]any{"id": "u1", "part_size": float64(3), "expires_at": "0001-01-01T00:00:00Z",
				"parts": []any{map[string]any{"method": "PUT", "url": "https://blobs.example/u1", "header": map[string]any{"X-Amz-Checksum-Sha256": []any{"abc"}},
					"size": float64(3), "sha256": "00ff"}}},
			recorded: []string{"create dist"}},
		{name: "cache key saved first", method: http.MethodPost, call: "uploads", body: `{"name":"taken","cache":true,"size":3,"sha256":"00ff"}`,
			status: http.StatusConflict, want: map[string]any{"code": "cache_exists", "error": `the cache key is already saved: key "taken"`},
			recorded: []string{"create taken"}},
		{name: "store failure", method: http.MethodPost, call: "uploads", body: `{"name":"boom","size":3,"sha256":"00ff"}`,
			status: http.StatusInternalServerError, want: map[string]any{"error": "the artifact store failed; try again"}, recorded: []string{"create boom"}},
		{name: "unknown field", method: http.MethodPost, call: "uploads", body: `{"name":"dist","size":3,"sha256":"00ff","sizes":1}`,
			status: http.StatusBadRequest, errHas: `unknown field "sizes"`},
		{name: "bad JSON", method: http.MethodPost, call: "uploads", body: `{"name":`, status: http.StatusBadRequest, errHas: "not the JSON this call takes"},
		{name: "two values", method: http.MethodPost, call: "cache", body: `{"key":"a"} {}`, status: http.StatusBadRequest, errHas: "not the JSON this call takes"},
		{name: "oversized body", method: http.MethodPost, call: "uploads", body: `{"name":"` + strings.Repeat("x", 64<<10) + `"}`,
			status: http.StatusRequestEntityTooLarge, errHas: "larger than 65536 bytes"},
		{name: "name too long", method: http.MethodPost, call: "uploads", body: `{"name":"` + long + `","size":1}`,
			status: http.StatusBadRequest, want: map[string]any{"field": "name", "error": "name: is 513 bytes; at most 512 are allowed (artifacts.MaxNameLen)"}},
		{name: "no name", method: http.MethodPost, call: "uploads", body: `{"size":1}`, status: http.StatusBadRequest, errHas: "name: is empty"},
		{name: "name with NUL", method: http.MethodPost, call: "uploads", body: `{"name":"a\u0000b","size":1}`, status: http.StatusBadRequest,
			errHas: "name: holds a NUL byte"},
		{name: "complete", method: http.MethodPost, call: "uploads/u1/complete", body: `{"etags":["e1"]}`, status: http.StatusOK,
			want: map[string]any{"id": "a1", "run_id": c.RunID, "job_id": "build", "attempt": float64(1), "name": "dist", "type": "archive", "size": float64(3),
				"sha256": "", "created_at": "0001-01-01T00:00:00Z"},
			recorded: []string{"complete u1 [e1]"}},
		{name: "complete refused", method: http.MethodPost, call: "uploads/u1/complete", body: `{"etags":["bad"]}`, status: http.StatusBadRequest,
			want: map[string]any{"error": "refused: the upload's SHA-256 is not the one reserved"}, recorded: []string{"complete u1 [bad]"}},
		{name: "complete an unknown upload", method: http.MethodPost, call: "uploads/u9/complete", body: `{}`, status: http.StatusNotFound,
			want: map[string]any{"error": `upload "u9": not found`, "code": "not_found"}, recorded: []string{"complete u9 []"}},
		{name: "the upload ID is the path's", method: http.MethodPost, call: "uploads/u1/complete", body: `{"upload_id":"u2"}`,
			status: http.StatusBadRequest, errHas: `unknown field "upload_id"`},
		{name: "abort", method: http.MethodDelete, call: "uploads/u1", status: http.StatusNoContent, recorded: []string{"abort u1"}},
		{name: "list", method: http.MethodPost, call: "artifacts", body: `{"jobs":["a"]}`, status: http.StatusOK,
			want: map[string]any{"artifacts": []any{map[string]any{"id": "a-a", "run_id": c.RunID, "job_id": "a", "attempt": float64(1), "name": "dist",
				"type": "archive", "size": float64(0), "sha256": "", "created_at": "0001-01-01T00:00:00Z",
				"download": map[string]any{"method": "GET", "url": "https://blobs.example/a"}}}},
			recorded: []string{"list [a]"}},
		{name: "list nothing", method: http.MethodPost, call: "artifacts", body: `{}`, status: http.StatusOK,
			want: map[string]any{"artifacts": []any{}}, recorded: []string{"list []"}},
		{name: "cache hit", method: http.MethodPost, call: "cache", body: `{"key":"hit"}`, status: http.StatusOK,
			want: map[string]any{"hit": map[string]any{"key": "hit", "exact": true, "scope": "none", "size": float64(7), "sha256": "00ff",
				"download": map[string]any{"method": "GET", "url": "https://blobs.example/cache/hit"}}},
			recorded: []string{"lookup hit"}},
		{name: "cache miss", method: http.MethodPost, call: "cache", body: `{"key":"miss","fallback_keys":["a"],"restore_keys":["b-"]}`, status: http.StatusOK,
			want: map[string]any{"hit": nil}, recorded: []string{"lookup miss"}},
		{name: "cache key too long", method: http.MethodPost, call: "cache", body: `{"key":"` + long + `"}`, status: http.StatusBadRequest,
			errHas: "key: is 513 bytes; at most 512 are allowed (artifacts.MaxNameLen)"},
		{name: "restore key too long", method: http.MethodPost, call: "cache", body: `{"key":"k","restore_keys":["` + long + `"]}`,
			status: http.StatusBadRequest, errHas: "restore_keys[0]: is 513 bytes"},
		{name: "too many restore keys", method: http.MethodPost, call: "cache", body: string(restore), status: http.StatusBadRequest,
			errHas: "33 fallback and restore keys together; at most 32 are allowed (artifacts.MaxRestoreKeys)"},
		{name: "wrong method", method: http.MethodGet, call: "cache", status: http.StatusMethodNotAllowed, errHas: "takes POST only"},
		{name: "wrong method for an upload", method: http.MethodPost, call: "uploads/u1", body: `{}`, status: http.StatusMethodNotAllowed,
			errHas: "takes DELETE only"},
		{name: "another job's token", method: http.MethodPost, call: "cache", body: `{"key":"hit"}`, token: other.Token, status: http.StatusForbidden},
		{name: "no token", method: http.MethodPost, call: "cache", body: `{"key":"hit"}`, token: "-", status: http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			token := tc.token
			switch token {
			case "":
				token = c.Token
			case "-":
				token = ""
			}
			status, out, h := b.send(t, tc.method, jobPath(c, tc.call), token, tc.body)
			require.Equal(t, tc.status, status, "%v", out)
			if tc.want != nil {
				require.Empty(t, cmp.Diff(tc.want, out))
			}
			if tc.errHas != "" {
				require.Contains(t, out["error"], tc.errHas)
			}
			if status == http.StatusMethodNotAllowed {
				require.NotEmpty(t, h.Get("Allow"))
			}
			calls, refs := bs.taken()
			require.Empty(t, cmp.Diff(tc.recorded, calls))
			for _, ref := range refs {
				require.Empty(t, cmp.Diff(artifacts.JobRef{RunID: c.RunID, JobID: "build", Attempt: 1, Scope: "none", ReadScopes: []string{"none"},
					Needs: []string{}}, ref))
			}
		})
	}
}

// TestArtifactCallsJobRef: the Broker is made for the token's attempt,
// with the run's repository, the scopes CacheScopes gives its context,
// whether it builds the default branch, and the needs whose artifacts
// the job takes; a GitHub job may read the whole run's.
func TestArtifactCallsJobRef(t *testing.T) {
	t.Parallel()
	b, bs := setupArtifacts(t)
	ctx := context.Background()
	rc := &cikit.RunContext{Provider: "gitlab", Repository: "acme/api", Ref: "refs/heads/main", RefName: "main", RefType: "branch", DefaultBranch: "main",
		SHA: strings.Repeat("a", 40)}
	test := spec("test", "build", "lint")
	test.NoArtifactsFrom = []string{"lint"}
	gh := spec("gh", "build")
	gh.Format = "github"
	run, err := b.jobs.RunCreate(ctx, &dag.RunCreateParams{Context: rc, Jobs: []*cikit.JobSpec{spec("build"), spec("lint"), test, gh}})
	require.NoError(t, err)
	require.NoError(t, b.server.DispatchRun(ctx, run.ID))
	runner := b.register(t)
	for range 2 {
		c := b.claim(t, runner, "5")
		status, out := b.call(t, http.MethodPost, jobPath(c, "complete"), c.Token, map[string]any{"result": "succeeded"})
		require.Equal(t, http.StatusOK, status, "%v", out)
	}
	got := map[string]artifacts.JobRef{}
	for range 2 {
		c := b.claim(t, runner, "5")
		for range 2 { // the second from the server's cache
			status, out := b.call(t, http.MethodPost, jobPath(c, "cache"), c.Token, map[string]any{"key": "miss"})
			require.Equal(t, http.StatusOK, status, "%v", out)
		}
		_, refs := bs.taken()
		require.Len(t, refs, 2)
		require.Empty(t, cmp.Diff(refs[0], refs[1]))
		got[c.JobID] = refs[0]
	}
	base := artifacts.JobRef{Repo: "acme/api", RunID: run.ID, Attempt: 1, Scope: "ref:main", ReadScopes: []string{"ref:main", "ref:main"}, DefaultBranch: true}
	wantTest, wantGH := base, base
	wantTest.JobID, wantTest.Needs = "test", []string{"build"}
	wantGH.JobID = "gh"
	require.Empty(t, cmp.Diff(map[string]artifacts.JobRef{"test": wantTest, "gh": wantGH}, got))
}

// TestArtifactCallsAreFenced: the calls of an attempt that is no longer
// current are refused as a heartbeat of it is (409 stale), before its
// Broker is made; its successor's are served.
func TestArtifactCallsAreFenced(t *testing.T) {
	t.Parallel()
	b, bs := setupArtifacts(t)
	first, second := b.register(t), b.register(t)
	runID := b.newRun(t, spec("build"))
	c1 := b.claim(t, first, "5")
	b.clock.Advance(time.Minute)
	_, err := b.reaper.Reap(context.Background())
	require.NoError(t, err)
	require.NoError(t, b.server.DispatchRun(context.Background(), runID))
	c2 := b.claim(t, second, "5")
	require.Equal(t, 2, c2.Attempt)

	calls := []struct{ method, call, body string }{
		{http.MethodPost, "uploads", `{"name":"dist","size":1,"sha256":"00"}`},
		{http.MethodPost, "uploads/u1/complete", `{}`},
		{http.MethodDelete, "uploads/u1", ``},
		{http.MethodPost, "artifacts", `{}`},
		{http.MethodPost, "cache", `{"key":"hit"}`},
	}
	for _, call := range calls {
		status, out, _ := b.send(t, call.method, jobPath(c1, call.call), c1.Token, call.body)
		require.Equal(t, http.StatusConflict, status, "%s: %v", call.call, out)
		require.Equal(t, true, out["stale"], call.call)
	}
	recorded, refs := bs.taken()
	require.Empty(t, recorded, "no Broker call for the stale attempt")
	require.Empty(t, refs)

	status, out, _ := b.send(t, http.MethodPost, jobPath(c2, "cache"), c2.Token, `{"key":"hit"}`)
	require.Equal(t, http.StatusOK, status, "%v", out)
	_, refs = bs.taken()
	require.Len(t, refs, 1)
	require.Equal(t, 2, refs[0].Attempt)

	// Once the attempt has ended, its calls are stale too.
	status, out = b.call(t, http.MethodPost, jobPath(c2, "complete"), c2.Token, map[string]any{"result": "succeeded"})
	require.Equal(t, http.StatusOK, status, "%v", out)
	for _, call := range calls {
		status, out, _ := b.send(t, call.method, jobPath(c2, call.call), c2.Token, call.body)
		require.Equal(t, http.StatusConflict, status, "%s: %v", call.call, out)
		require.Equal(t, true, out["stale"], call.call)
	}
}

// TestArtifactsNotConfigured: a server without Artifacts answers every
// artifact and cache call 404, saying so.
func TestArtifactsNotConfigured(t *testing.T) {
	t.Parallel()
	b := setup(t)
	runner := b.register(t)
	b.newRun(t, spec("build"))
	c := b.claim(t, runner, "5")
	for _, call := range []struct{ method, call string }{
		{http.MethodPost, "uploads"}, {http.MethodPost, "uploads/u1/complete"}, {http.MethodDelete, "uploads/u1"},
		{http.MethodPost, "artifacts"}, {http.MethodPost, "cache"},
	} {
		status, out, _ := b.send(t, call.method, jobPath(c, call.call), c.Token, `{}`)
		require.Equal(t, http.StatusNotFound, status, call.call)
		require.Empty(t, cmp.Diff(map[string]any{"error": "artifacts are not configured on this server", "code": "not_configured"}, out))
	}
}

// TestCompletionCaches: the cache reports of a completion are stored
// with the job's result; too many, or one with a field past its limit,
// are refused naming the field, and the attempt stays running.
func TestCompletionCaches(t *testing.T) {
	t.Parallel()
	b := setup(t)
	runner := b.register(t)
	runID := b.newRun(t, spec("build"))
	c := b.claim(t, runner, "5")
	report := func(n int, key string) map[string]any {
		cs := make([]map[string]any, n)
		for i := range cs {
			cs[i] = map[string]any{"key": key, "hit": true, "matched_key": key}
		}
		return map[string]any{"result": "succeeded", "caches": cs}
	}
	for _, tc := range []struct {
		name   string
		body   map[string]any
		status int
		field  string
	}{
		{"too many", report(65, "k"), http.StatusRequestEntityTooLarge, "caches"},
		{"key too long", report(1, strings.Repeat("k", artifacts.MaxNameLen+1)), http.StatusRequestEntityTooLarge, "caches[0].key"},
		{"key with NUL", report(1, "k\x00"), http.StatusBadRequest, "caches[0].key"},
		{"negative size", map[string]any{"result": "succeeded", "caches": []map[string]any{{"key": "k", "size": -1}}}, http.StatusBadRequest, "caches[0]"},
	} {
		status, out := b.call(t, http.MethodPost, jobPath(c, "complete"), c.Token, tc.body)
		require.Equal(t, tc.status, status, "%s: %v", tc.name, out)
		require.Equal(t, tc.field, out["field"], tc.name)
	}
	j, err := b.jobs.JobGet(context.Background(), runID, "build")
	require.NoError(t, err)
	require.Equal(t, cikit.JobRunning, j.State)

	done := map[string]any{"result": "succeeded", "caches": []map[string]any{
		{"key": "go-abc", "hit": true, "exact": false, "matched_key": "go-", "restored_in_ms": 120, "size": 2048, "note": "restore-key match"},
		{"step": "cache", "key": "npm-1", "saved": true, "saved_size": 99}}}
	status, out := b.call(t, http.MethodPost, jobPath(c, "complete"), c.Token, done)
	require.Equal(t, http.StatusOK, status, "%v", out)
	j, err = b.jobs.JobGet(context.Background(), runID, "build")
	require.NoError(t, err)
	require.Empty(t, cmp.Diff(&dag.JobResult{Caches: []cikit.CacheReport{
		{Key: "go-abc", Hit: true, MatchedKey: "go-", RestoredInMS: 120, Size: 2048, Note: "restore-key match"},
		{Step: "cache", Key: "npm-1", Saved: true, SavedSize: 99}}}, j.Result))
}

// BenchmarkArtifactCall measures a cache lookup through the protocol
// (over a local HTTP connection, memory stores): the job token, the body's
// checks, the lease check and the attempt's JobRef from the server's
// cache.
func BenchmarkArtifactCall(b *testing.B) {
	bd, bs := setupArtifacts(b)
	runner := bd.register(b)
	run, err := bd.jobs.RunCreate(context.Background(), &dag.RunCreateParams{Jobs: []*cikit.JobSpec{spec("build")}})
	require.NoError(b, err)
	require.NoError(b, bd.server.DispatchRun(context.Background(), run.ID))
	status, out := bd.call(b, http.MethodGet, "/v1/jobs/claim?wait=5", runner, nil)
	require.Equal(b, http.StatusOK, status, "%v", out)
	path := "/v1/jobs/" + run.ID + "/build/cache"
	token := out["job_token"].(string)
	body := map[string]any{"key": "go-4f2a", "restore_keys": []string{"go-"}}
	b.ReportAllocs()
	for b.Loop() {
		if status, out := bd.call(b, http.MethodPost, path, token, body); status != http.StatusOK {
			b.Fatalf("%d %v", status, out)
		}
		bs.taken()
	}
}
