package githubtest_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/vcs/github/githubtest"
)

// installationToken exchanges App 7's JWT for a token of its
// installation on acme/api.
func (b *bundle) installationToken(t *testing.T) string {
	t.Helper()
	now := b.clock.Now()
	signed := b.jwt(t, appKey(), jwt.SigningMethodRS256, jwt.MapClaims{"iss": "7", "iat": now.Unix(), "exp": now.Add(time.Minute).Unix()})
	resp, body := b.do(t, "GET", "/repos/acme/api/installation", signed, "", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	resp, body = b.do(t, "POST", "/app/installations/"+jsonNumber(decode(t, body)["id"])+"/access_tokens", signed, "", "")
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	return decode(t, body)["token"].(string)
}

func TestCheckRunsAppOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	resp, body := b.do(t, "POST", "/repos/acme/api/check-runs", pat, "", `{"name":"ci","head_sha":"`+b.sha+`"}`)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Equal(t, "You must authenticate via a GitHub App.", decode(t, body)["message"])
	resp, _ = b.do(t, "PATCH", "/repos/acme/api/check-runs/1", pat, "", `{"name":"ci"}`)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)

	tok := b.installationToken(t)
	resp, body = b.do(t, "POST", "/repos/acme/api/check-runs", tok, "", `{"name":"ci","head_sha":"`+b.sha+`"}`)
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	resp, body = b.do(t, "GET", "/repos/acme/api/commits/main/check-runs", pat, "", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, "a personal token may list")
	require.Equal(t, float64(1), decode(t, body)["total_count"])
}

func TestCheckRunValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.installationToken(t)
	head := `"name":"ci","head_sha":"` + b.sha + `"`
	for body, want := range map[string]int{
		`{` + head + `}`:                                             http.StatusCreated,
		`{` + head + `,"status":"in_progress"}`:                      http.StatusCreated,
		`{` + head + `,"conclusion":"success"}`:                      http.StatusCreated,
		`{` + head + `,"status":"completed","conclusion":"skipped"}`: http.StatusCreated,
		`{` + head + `,"status":"completed"}`:                        http.StatusUnprocessableEntity,
		`{` + head + `,"status":"running"}`:                          http.StatusUnprocessableEntity,
		`{` + head + `,"status":"completed","conclusion":"passed"}`:  http.StatusUnprocessableEntity,
		`{` + head + `,"output":{"title":"t"}}`:                      http.StatusUnprocessableEntity,
		`{` + head + `,"output":{"title":"t","summary":"s"}}`:        http.StatusCreated,
		`{"head_sha":"` + b.sha + `"}`:                               http.StatusUnprocessableEntity,
		`{"name":"ci"}`:                                              http.StatusUnprocessableEntity,
		`not json`:                                                   http.StatusBadRequest,
	} {
		resp, got := b.do(t, "POST", "/repos/acme/api/check-runs", tok, "", body)
		require.Equal(t, want, resp.StatusCode, "%s: %s", body, got)
	}
	resp, body := b.do(t, "POST", "/repos/acme/api/check-runs", tok, "", `{"name":"ci","head_sha":"0123456789abcdef0123456789abcdef01234567"}`)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, decode(t, body)["message"], "No commit found for SHA")
	require.Equal(t, 5, b.srv.Stats().CheckRunsCreated)
}

func TestCheckRunUpdate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.installationToken(t)
	resp, body := b.do(t, "POST", "/repos/acme/api/check-runs", tok, "",
		`{"name":"ci","head_sha":"`+b.sha+`","status":"in_progress","details_url":"https://ci.example.com/1","output":{"title":"t","summary":"s"}}`)
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	created := decode(t, body)
	require.Equal(t, map[string]any{"name": "ci", "head_sha": b.sha, "status": "in_progress", "conclusion": nil,
		"started_at": "2026-03-01T12:00:00Z", "completed_at": nil, "details_url": "https://ci.example.com/1"},
		pick(created, "name", "head_sha", "status", "conclusion", "started_at", "completed_at", "details_url"))
	require.Equal(t, map[string]any{"title": "t", "summary": "s"}, pick(created["output"], "title", "summary"))
	id := jsonNumber(created["id"])

	b.clock.Advance(time.Minute)
	resp, body = b.do(t, "PATCH", "/repos/acme/api/check-runs/"+id, tok, "", `{"name":"ci","status":"completed"}`)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "completed needs a conclusion: %s", body)
	resp, body = b.do(t, "PATCH", "/repos/acme/api/check-runs/"+id, tok, "", `{"name":"ci","conclusion":"failure"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Equal(t, map[string]any{"status": "completed", "conclusion": "failure", "completed_at": "2026-03-01T12:01:00Z",
		"details_url": "https://ci.example.com/1"}, pick(decode(t, body), "status", "conclusion", "completed_at", "details_url"),
		"a conclusion completes the run; what is not given is kept")
	resp, _ = b.do(t, "PATCH", "/repos/acme/api/check-runs/999", tok, "", `{"name":"ci"}`)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)

	runs, err := b.srv.CheckRuns("acme/api", b.sha)
	require.NoError(t, err)
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	require.Equal(t, []githubtest.CheckRun{{ID: runs[0].ID, Name: "ci", HeadSHA: b.sha, Status: "completed", Conclusion: "failure",
		DetailsURL: "https://ci.example.com/1", Title: "t", Summary: "s", StartedAt: start, CompletedAt: start.Add(time.Minute)}}, runs)

	resp, body = b.do(t, "PATCH", "/repos/acme/api/check-runs/"+id, tok, "", `{"name":"ci","status":"queued"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Equal(t, map[string]any{"status": "queued", "conclusion": nil, "completed_at": nil},
		pick(decode(t, body), "status", "conclusion", "completed_at"), "a status other than completed clears the conclusion")
	st := b.srv.Stats()
	require.Equal(t, 1, st.CheckRunsCreated)
	require.Equal(t, 2, st.CheckRunsUpdated, "refused updates are not counted")
}

func TestListCheckRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.installationToken(t)
	for _, name := range []string{"a", "b", "a"} {
		resp, body := b.do(t, "POST", "/repos/acme/api/check-runs", tok, "", `{"name":"`+name+`","head_sha":"`+b.sha+`"}`)
		require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	}
	names := func(query string) []string {
		t.Helper()
		resp, body := b.do(t, "GET", "/repos/acme/api/commits/"+b.sha+"/check-runs"+query, pat, "", "")
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		var out []string
		for _, cr := range decode(t, body)["check_runs"].([]any) {
			out = append(out, cr.(map[string]any)["name"].(string)+jsonNumber(cr.(map[string]any)["id"]))
		}
		return out
	}
	all := names("?filter=all")
	require.Len(t, all, 3)
	require.True(t, strings.HasPrefix(all[0], "a") && strings.HasPrefix(all[1], "b") && strings.HasPrefix(all[2], "a"), "newest first: %v", all)
	require.Equal(t, all[:2], names(""), "latest of each name by default")
	require.Equal(t, all[:1], names("?check_name=a"))
	require.Equal(t, all[:1], names("?check_name=a&app_id=7"))
	require.Empty(t, names("?check_name=a&app_id=8"))
	require.Empty(t, names("?status=completed"))
	resp, _ := b.do(t, "GET", "/repos/acme/api/commits/0123456789abcdef0123456789abcdef01234567/check-runs", pat, "", "")
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}
