package githubtest_test

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/internal/clocktest"
	"github.com/cikit/cikit/vcs/github/githubtest"
)

const pat = "ghp_test"

var appKey = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
})

type bundle struct {
	srv   *githubtest.Server
	ts    *httptest.Server
	clock *clocktest.Clock
	sha   string // the one commit of acme/api's main
}

// setup serves acme/api with one commit, the token pat, and App 7
// installed on acme/api.
func setup(t *testing.T) *bundle {
	t.Helper()
	clock := clocktest.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	srv := githubtest.NewServer(githubtest.Config{Now: clock.Now})
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	srv.AddToken(pat)
	srv.AddApp(7, &appKey().PublicKey)
	require.NoError(t, srv.CreateRepo("acme/api", ""))
	sha, err := srv.Commit("acme/api", "main", map[string]string{"a.txt": "a", "dir/b.txt": "b"})
	require.NoError(t, err)
	_, err = srv.Install(7, "acme/api")
	require.NoError(t, err)
	return &bundle{srv: srv, ts: ts, clock: clock, sha: sha}
}

// do makes a request with credential cred ("" for none) and returns the
// response, whose body it has read into body.
func (b *bundle) do(t *testing.T, method, path, cred, accept, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, b.ts.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	if cred != "" {
		req.Header.Set("Authorization", "Bearer "+cred)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := b.ts.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(data)
}

func decode(t *testing.T, body string) map[string]any {
	t.Helper()
	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &v), body)
	return v
}

func (b *bundle) jwt(t *testing.T, key *rsa.PrivateKey, method jwt.SigningMethod, claims jwt.MapClaims) string {
	t.Helper()
	var signWith any = key
	if method == jwt.SigningMethodHS256 {
		signWith = []byte("secret")
	}
	s, err := jwt.NewWithClaims(method, claims).SignedString(signWith)
	require.NoError(t, err)
	return s
}

func TestAuth(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := b.clock.Now()
	good := jwt.MapClaims{"iss": "7", "iat": now.Add(-time.Minute).Unix(), "exp": now.Add(9 * time.Minute).Unix()}
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	bad := map[string]string{
		"exp too far": b.jwt(t, appKey(), jwt.SigningMethodRS256, jwt.MapClaims{"iss": "7", "iat": now.Unix(), "exp": now.Add(11 * time.Minute).Unix()}),
		"expired":     b.jwt(t, appKey(), jwt.SigningMethodRS256, jwt.MapClaims{"iss": "7", "iat": now.Add(-20 * time.Minute).Unix(), "exp": now.Add(-time.Minute).Unix()}),
		"iat ahead":   b.jwt(t, appKey(), jwt.SigningMethodRS256, jwt.MapClaims{"iss": "7", "iat": now.Add(time.Minute).Unix(), "exp": now.Add(5 * time.Minute).Unix()}),
		"no exp":      b.jwt(t, appKey(), jwt.SigningMethodRS256, jwt.MapClaims{"iss": "7", "iat": now.Unix()}),
		"other key":   b.jwt(t, other, jwt.SigningMethodRS256, good),
		"HS256":       b.jwt(t, nil, jwt.SigningMethodHS256, good),
		"unknown app": b.jwt(t, appKey(), jwt.SigningMethodRS256, jwt.MapClaims{"iss": "8", "iat": now.Unix(), "exp": now.Add(time.Minute).Unix()}),
		"not a JWT":   "ghp_whatever",
	}
	for name, tok := range bad {
		resp, body := b.do(t, "GET", "/repos/acme/api/installation", tok, "", "")
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, name)
		require.Contains(t, decode(t, body)["message"], "JSON web token", name)
	}

	// iss as a number is accepted too.
	numeric := b.jwt(t, appKey(), jwt.SigningMethodRS256, jwt.MapClaims{"iss": 7, "iat": now.Unix(), "exp": now.Add(time.Minute).Unix()})
	resp, body := b.do(t, "GET", "/repos/acme/api/installation", numeric, "", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	inst := decode(t, body)
	require.Equal(t, float64(7), inst["app_id"])

	resp, body = b.do(t, "POST", "/app/installations/"+jsonNumber(inst["id"])+"/access_tokens", b.jwt(t, appKey(), jwt.SigningMethodRS256, good), "", "")
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	tok := decode(t, body)
	require.Equal(t, "2026-03-01T13:00:00Z", tok["expires_at"])
	token := tok["token"].(string)
	require.True(t, strings.HasPrefix(token, "ghs_"))

	resp, _ = b.do(t, "GET", "/repos/acme/api", token, "", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, "the installation token works")
	resp, _ = b.do(t, "GET", "/repos/acme/api", b.jwt(t, appKey(), jwt.SigningMethodRS256, good), "", "")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a JWT is for App endpoints only")
	resp, _ = b.do(t, "GET", "/repos/acme/api", "", "", "")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	require.NoError(t, b.srv.CreateRepo("acme/elsewhere", "main"))
	resp, _ = b.do(t, "GET", "/repos/acme/elsewhere", token, "", "")
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "not a repository of the installation")
	resp, _ = b.do(t, "GET", "/repos/acme/elsewhere", pat, "", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, "a personal token sees everything")
	resp, _ = b.do(t, "GET", "/repos/acme/elsewhere/installation", b.jwt(t, appKey(), jwt.SigningMethodRS256, good), "", "")
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "the App is not installed there")

	b.clock.Advance(time.Hour)
	resp, body = b.do(t, "GET", "/repos/acme/api", token, "", "")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "expired")
	require.Equal(t, "Bad credentials", decode(t, body)["message"])
}

func jsonNumber(v any) string {
	data, _ := json.Marshal(v)
	return string(data)
}

func TestNotFoundBody(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, path := range []string{"/repos/acme/nope", "/repos/acme/api/contents/nope?ref=main", "/repos/acme/api/pulls/1", "/nowhere"} {
		resp, body := b.do(t, "GET", path, pat, "", "")
		require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
		v := decode(t, body)
		require.Equal(t, "Not Found", v["message"], path)
		require.Equal(t, "404", v["status"], path)
		require.Contains(t, v["documentation_url"], "https://docs.github.com/", path)
	}
}

func TestContents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	big := strings.Repeat("x", 1<<20+1)
	sha, err := b.srv.Commit("acme/api", "main", map[string]string{"big": big})
	require.NoError(t, err)

	resp, body := b.do(t, "GET", "/repos/acme/api/contents/big?ref="+sha, pat, "", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	f := decode(t, body)
	require.Equal(t, "none", f["encoding"], "over 1 MB: no content")
	require.Equal(t, "", f["content"])
	require.Equal(t, float64(len(big)), f["size"])
	resp, body = b.do(t, "GET", "/repos/acme/api/contents/big?ref="+sha, pat, "application/vnd.github.raw+json", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, len(big), len(body), "the raw media type serves it")
	resp, body = b.do(t, "GET", "/repos/acme/api/git/blobs/"+f["sha"].(string), pat, "application/vnd.github.v3.raw", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, len(big), len(body), "so does the blob API")

	resp, body = b.do(t, "GET", "/repos/acme/api/contents/?ref="+b.sha, pat, "", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var dir []map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &dir))
	require.Len(t, dir, 2)
	require.Equal(t, []any{"a.txt", "file"}, []any{dir[0]["name"], dir[0]["type"]})
	require.Equal(t, []any{"dir", "dir"}, []any{dir[1]["name"], dir[1]["type"]})
	require.Equal(t, "2e65efe2a145dda7ee51d1741299f848e5bf752e", dir[0]["sha"], "git's blob SHA of \"a\"")
}

func TestPullsPagination(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for range 35 {
		_, err := b.srv.OpenPullRequest("acme/api", "acme/api", "main", "main")
		require.NoError(t, err)
	}
	resp, body := b.do(t, "GET", "/repos/acme/api/pulls", pat, "", "")
	var page []map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &page))
	require.Len(t, page, 30)
	require.Equal(t, float64(35), page[0]["number"], "newest first")
	link := resp.Header.Get("Link")
	require.Contains(t, link, `page=2&per_page=30>; rel="next"`)
	require.Contains(t, link, `rel="last"`)

	resp, body = b.do(t, "GET", "/repos/acme/api/pulls?page=2", pat, "", "")
	require.NoError(t, json.Unmarshal([]byte(body), &page))
	require.Len(t, page, 5)
	require.NotContains(t, resp.Header.Get("Link"), `rel="next"`)
	require.Contains(t, resp.Header.Get("Link"), `rel="prev"`)
}

func TestCompare(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, b.srv.Branch("acme/api", "feature", b.sha))
	head, err := b.srv.Commit("acme/api", "feature", map[string]string{"moved/a.txt": "a", "c.txt": "c"}, "a.txt")
	require.NoError(t, err)
	main, err := b.srv.Commit("acme/api", "main", map[string]string{"dir/b.txt": "b2"})
	require.NoError(t, err)

	_, body := b.do(t, "GET", "/repos/acme/api/compare/main...feature", pat, "", "")
	v := decode(t, body)
	require.Equal(t, "diverged", v["status"])
	require.Equal(t, float64(1), v["ahead_by"])
	require.Equal(t, float64(1), v["behind_by"])
	require.Equal(t, b.sha, v["merge_base_commit"].(map[string]any)["sha"])
	require.Equal(t, main, v["base_commit"].(map[string]any)["sha"])
	require.Equal(t, head, v["commits"].([]any)[0].(map[string]any)["sha"])
	files := v["files"].([]any)
	require.Len(t, files, 2, "main's change to dir/b.txt is not the feature's")
	require.Equal(t, map[string]any{"filename": "c.txt", "status": "added"}, pick(files[0], "filename", "status"))
	require.Equal(t, map[string]any{"filename": "moved/a.txt", "status": "renamed", "previous_filename": "a.txt"},
		pick(files[1], "filename", "status", "previous_filename"))

	_, body = b.do(t, "GET", "/repos/acme/api/compare/"+b.sha+"...main", pat, "", "")
	require.Equal(t, "ahead", decode(t, body)["status"])
	_, body = b.do(t, "GET", "/repos/acme/api/compare/main..."+b.sha, pat, "", "")
	require.Equal(t, "behind", decode(t, body)["status"])
	_, body = b.do(t, "GET", "/repos/acme/api/compare/main...main", pat, "", "")
	require.Equal(t, "identical", decode(t, body)["status"])

	_, err = b.srv.Commit("acme/api", "orphan", map[string]string{"x": "x"})
	require.NoError(t, err)
	resp, body := b.do(t, "GET", "/repos/acme/api/compare/main...orphan", pat, "", "")
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Contains(t, decode(t, body)["message"], "No common ancestor")
}

func pick(v any, keys ...string) map[string]any {
	m := v.(map[string]any)
	out := map[string]any{}
	for _, k := range keys {
		out[k] = m[k]
	}
	return out
}

func TestCreateStatusValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for body, want := range map[string]int{
		`{"state":"success","context":"ci"}`:                                   http.StatusCreated,
		`{"state":"running","context":"ci"}`:                                   http.StatusUnprocessableEntity,
		`{"state":"success","description":"` + strings.Repeat("é", 141) + `"}`: http.StatusUnprocessableEntity,
		`{"state":"success","description":"` + strings.Repeat("é", 140) + `"}`: http.StatusCreated,
		`not json`: http.StatusBadRequest,
	} {
		resp, got := b.do(t, "POST", "/repos/acme/api/statuses/"+b.sha, pat, "", body)
		require.Equal(t, want, resp.StatusCode, "%s: %s", body, got)
	}
	resp, body := b.do(t, "POST", "/repos/acme/api/statuses/0123456789abcdef0123456789abcdef01234567", pat, "", `{"state":"success"}`)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, decode(t, body)["message"], "No commit found for SHA")

	sts, err := b.srv.Statuses("acme/api", b.sha)
	require.NoError(t, err)
	require.Len(t, sts, 2, "ci and default, the latest of each")
	require.Equal(t, "default", sts[1].Context)
	require.Equal(t, 2, b.srv.Stats().StatusesCreated)
}

func TestRateLimitAnswers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.srv.SetRateLimit(githubtest.RateLimit{Requests: 1, Window: 90 * time.Second})
	resp, _ := b.do(t, "GET", "/repos/acme/api", pat, "", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	b.clock.Advance(500 * time.Millisecond)
	resp, body := b.do(t, "GET", "/repos/acme/api", pat, "", "")
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Equal(t, "90", resp.Header.Get("Retry-After"), "89.5s rounded up")
	require.True(t, strings.HasSuffix(decode(t, body)["documentation_url"].(string), "secondary-rate-limits"))

	b.srv.SetRateLimit(githubtest.RateLimit{Requests: 1, Kind: githubtest.Primary})
	b.do(t, "GET", "/repos/acme/api", pat, "", "")
	resp, _ = b.do(t, "GET", "/repos/acme/api", pat, "", "")
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Equal(t, "0", resp.Header.Get("X-RateLimit-Remaining"))
	require.Equal(t, "1", resp.Header.Get("X-RateLimit-Limit"))
	require.Equal(t, "1772366461", resp.Header.Get("X-RateLimit-Reset"), "the window's end: 12:01:00.5 rounded up")

	b.srv.SetRateLimit(githubtest.RateLimit{Requests: 1, Kind: githubtest.TooMany})
	b.do(t, "GET", "/repos/acme/api", pat, "", "")
	resp, _ = b.do(t, "GET", "/repos/acme/api", pat, "", "")
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "60", resp.Header.Get("Retry-After"))

	b.srv.SetRateLimit(githubtest.RateLimit{})
	resp, _ = b.do(t, "GET", "/repos/acme/api", pat, "", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, "limiting off")
	st := b.srv.Stats()
	require.Equal(t, 7, st.Requests)
	require.Equal(t, 3, st.Limited)
}

func TestSeedingErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.ErrorIs(t, b.srv.CreateRepo("acme/API", "main"), githubtest.ErrExists, "names are case-insensitive")
	require.ErrorContains(t, b.srv.CreateRepo("acme", "main"), "not owner/name")
	_, err := b.srv.Commit("acme/nope", "main", nil)
	require.ErrorIs(t, err, githubtest.ErrNotFound)
	require.ErrorIs(t, b.srv.Branch("acme/api", "x", "0123"), githubtest.ErrNotFound)
	require.ErrorIs(t, b.srv.Tag("acme/api", "v1", "0123"), githubtest.ErrNotFound)
	_, err = b.srv.OpenPullRequest("acme/api", "acme/api", "nope", "main")
	require.ErrorIs(t, err, githubtest.ErrNotFound)
	require.ErrorIs(t, b.srv.ClosePullRequest("acme/api", 1), githubtest.ErrNotFound)
	_, err = b.srv.Install(99, "acme/api")
	require.ErrorIs(t, err, githubtest.ErrNotFound)
	_, err = b.srv.Install(7, "acme/nope")
	require.ErrorIs(t, err, githubtest.ErrNotFound)
}

func TestTrees(t *testing.T) {
	t.Parallel()
	b := setup(t)
	entries := func(body string) []string {
		t.Helper()
		var v struct {
			Tree []struct{ Path, Type, SHA string }
		}
		require.NoError(t, json.Unmarshal([]byte(body), &v))
		var out []string
		for _, e := range v.Tree {
			out = append(out, e.Type+" "+e.Path)
		}
		return out
	}
	resp, body := b.do(t, "GET", "/repos/acme/api/git/trees/main?recursive=1", pat, "", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, []string{"blob a.txt", "tree dir", "blob dir/b.txt"}, entries(body))
	_, body = b.do(t, "GET", "/repos/acme/api/git/trees/"+b.sha, pat, "", "")
	require.Equal(t, []string{"blob a.txt", "tree dir"}, entries(body), "not recursive: the root's entries")

	var root struct {
		Tree []struct{ Path, SHA string }
	}
	require.NoError(t, json.Unmarshal([]byte(body), &root))
	_, body = b.do(t, "GET", "/repos/acme/api/git/trees/"+root.Tree[1].SHA, pat, "", "")
	require.Equal(t, []string{"blob b.txt"}, entries(body), "a subtree by its SHA")
	resp, _ = b.do(t, "GET", "/repos/acme/api/git/trees/nope", pat, "", "")
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// With CapCompareFiles, a comparison lists files on its first page only,
// 300 at most, as GitHub documents.
func TestCompareCapped(t *testing.T) {
	t.Parallel()
	srv := githubtest.NewServer(githubtest.Config{CapCompareFiles: true})
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	srv.AddToken(pat)
	require.NoError(t, srv.CreateRepo("acme/api", "main"))
	base, err := srv.Commit("acme/api", "main", map[string]string{"a": "a"})
	require.NoError(t, err)
	files := map[string]string{}
	for i := range 400 {
		files[strings.Repeat("x", i+1)] = "x"
	}
	for range 3 {
		_, err = srv.Commit("acme/api", "main", files)
		require.NoError(t, err)
		files = map[string]string{"b": string(rune('a' + len(files)%26))}
	}
	b := &bundle{srv: srv, ts: ts}
	count := func(page string) (int, int, string) {
		resp, body := b.do(t, "GET", "/repos/acme/api/compare/"+base+"...main?per_page=2&page="+page, pat, "", "")
		v := decode(t, body)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		return len(v["files"].([]any)), len(v["commits"].([]any)), resp.Header.Get("Link")
	}
	f, c, link := count("1")
	require.Equal(t, []int{300, 2}, []int{f, c})
	require.Contains(t, link, `rel="next"`)
	f, c, link = count("2")
	require.Equal(t, []int{0, 1}, []int{f, c}, "files on the first page only")
	require.NotContains(t, link, `rel="next"`)
}

// Seeding that moves a ref records GitHub's events, served newest first
// in GitHub's shape, paginated, 300 at most and none older than 90 days.
func TestEvents(t *testing.T) {
	t.Parallel()
	b := setup(t) // CreateEvent and PushEvent of main
	t0 := b.clock.Now()
	b.clock.Advance(time.Minute)
	sha2, err := b.srv.Commit("acme/api", "main", map[string]string{"a.txt": "a2"})
	require.NoError(t, err)
	require.NoError(t, b.srv.Branch("acme/api", "main", sha2), "not moved: no event")
	require.NoError(t, b.srv.Tag("acme/api", "v1", b.sha))

	resp, body := b.do(t, "GET", "/repos/acme/api/events?per_page=3", pat, "", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var page []map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &page), body)
	require.Len(t, page, 3)
	require.Contains(t, resp.Header.Get("Link"), `page=2&per_page=3>; rel="next"`)
	tag, push := page[0], page[2]
	require.Equal(t, "CreateEvent", page[1]["type"], "a new ref's CreateEvent comes before its push")
	require.Equal(t, map[string]any{"ref": "v1", "ref_type": "tag", "master_branch": "main", "description": nil, "pusher_type": "user"},
		page[1]["payload"])
	require.Equal(t, "PushEvent", tag["type"])
	require.IsType(t, "", tag["id"], "GitHub's event ids are strings")
	require.Equal(t, "githubtest", tag["actor"].(map[string]any)["login"])
	require.Equal(t, "acme/api", tag["repo"].(map[string]any)["name"])
	require.Equal(t, t0.Add(time.Minute).Format(time.RFC3339), tag["created_at"])
	p := tag["payload"].(map[string]any)
	require.Equal(t, "refs/tags/v1", p["ref"])
	require.Equal(t, strings.Repeat("0", 40), p["before"])
	require.Equal(t, b.sha, p["head"])
	require.Equal(t, float64(0), p["size"], "a new ref brings no new commits")
	p = push["payload"].(map[string]any)
	require.Equal(t, "refs/heads/main", p["ref"])
	require.Equal(t, b.sha, p["before"])
	require.Equal(t, sha2, p["head"])
	require.Equal(t, float64(1), p["size"])
	require.Equal(t, sha2, p["commits"].([]any)[0].(map[string]any)["sha"])

	resp, body = b.do(t, "GET", "/repos/acme/api/events?per_page=3&page=2", pat, "", "")
	require.NoError(t, json.Unmarshal([]byte(body), &page), body)
	require.NotContains(t, resp.Header.Get("Link"), `rel="next"`)
	require.Len(t, page, 2)
	require.Equal(t, "PushEvent", page[0]["type"])
	require.Equal(t, b.sha, page[0]["payload"].(map[string]any)["head"])
	require.Equal(t, "CreateEvent", page[1]["type"])

	events, err := b.srv.Events("acme/api")
	require.NoError(t, err)
	require.Len(t, events, 5)
	for range 300 {
		_, err := b.srv.AddEvent("acme/api", githubtest.Event{Type: "WatchEvent"})
		require.NoError(t, err)
	}
	_, body = b.do(t, "GET", "/repos/acme/api/events?per_page=100&page=3", pat, "", "")
	require.NoError(t, json.Unmarshal([]byte(body), &page), body)
	require.Len(t, page, 100)
	_, body = b.do(t, "GET", "/repos/acme/api/events?per_page=100&page=4", pat, "", "")
	require.Equal(t, "[]\n", body, "300 events at most")

	n, err := b.srv.DropEvents("acme/api", func(e githubtest.Event) bool { return e.Type == "WatchEvent" })
	require.NoError(t, err)
	require.Equal(t, 300, n)
	b.clock.Set(t0.Add(90*24*time.Hour + time.Second))
	_, body = b.do(t, "GET", "/repos/acme/api/events", pat, "", "")
	require.NoError(t, json.Unmarshal([]byte(body), &page), body)
	require.Len(t, page, 3, "the first commit's events are 90 days old")

	_, err = b.srv.AddEvent("acme/nope", githubtest.Event{Type: "WatchEvent"})
	require.ErrorIs(t, err, githubtest.ErrNotFound)
	resp, _ = b.do(t, "GET", "/repos/acme/nope/events", pat, "", "")
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// TestCommitAs: a mirrored commit keeps its SHA, serves its files and
// takes statuses; bad and repeated SHAs are refused.
func TestCommitAs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const sha = "0123456789abcdef0123456789abcdef01234567"
	require.NoError(t, b.srv.CommitAs("acme/api", "feature", sha, map[string]string{".cikit.yml": "jobs: {}"}))
	resp, body := b.do(t, "GET", "/repos/acme/api/git/ref/heads/feature", pat, "", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, sha)
	resp, body = b.do(t, "GET", "/repos/acme/api/contents/.cikit.yml?ref="+sha, pat, "application/vnd.github.raw", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Equal(t, "jobs: {}", body)
	resp, body = b.do(t, "POST", "/repos/acme/api/statuses/"+sha, pat, "", `{"state":"success","context":"ci"}`)
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	require.Error(t, b.srv.CommitAs("acme/api", "feature", sha, nil), "the SHA exists")
	require.Error(t, b.srv.CommitAs("acme/api", "feature", "XYZ", nil))
	require.Error(t, b.srv.CommitAs("acme/api", "feature", strings.ToUpper(sha), nil))
}
