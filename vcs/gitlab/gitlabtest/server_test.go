package gitlabtest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/internal/clocktest"
	"github.com/cikit/cikit/vcs/gitlab/gitlabtest"
)

type bundle struct {
	srv   *gitlabtest.Server
	ts    *httptest.Server
	clock *clocktest.Clock
}

func setup(t *testing.T, cfg gitlabtest.Config) *bundle {
	t.Helper()
	c := clocktest.New(time.Unix(1_800_000_000, 0))
	cfg.Now = c.Now
	srv := gitlabtest.New(cfg)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return &bundle{srv: srv, ts: ts, clock: c}
}

type response struct {
	code   int
	header http.Header
	body   string
}

// do sends a request with the server's token unless token says otherwise.
func (b *bundle) do(t *testing.T, method, path string, body io.Reader, header ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, b.ts.URL+"/api/v4/"+path, body)
	require.NoError(t, err)
	req.Header.Set("PRIVATE-TOKEN", b.srv.Token())
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := b.ts.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return response{resp.StatusCode, resp.Header, string(data)}
}

func (b *bundle) get(t *testing.T, path string) response {
	t.Helper()
	return b.do(t, http.MethodGet, path, nil)
}

// must checks the error of a seeding call: must(srv.Commit(…))(t).
func must[T any](v T, err error) func(t *testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		require.NoError(t, err)
		return v
	}
}

const project = "acme/platform/api"

var enc = url.PathEscape(project)

func TestAuth(t *testing.T) {
	t.Parallel()
	b := setup(t, gitlabtest.Config{Token: "glpat-secret"})
	must(b.srv.CreateProject(project, "main"))(t)
	for name, header := range map[string][]string{
		"wrong token":  {"PRIVATE-TOKEN", "glpat-wrong"},
		"wrong bearer": {"PRIVATE-TOKEN", "", "Authorization", "Bearer glpat-wrong"},
		"no token":     {"PRIVATE-TOKEN", ""},
	} {
		r := b.do(t, http.MethodGet, "projects/"+enc, nil, header...)
		require.Equal(t, http.StatusUnauthorized, r.code, name)
		require.JSONEq(t, `{"message":"401 Unauthorized"}`, r.body, name)
	}
	r := b.do(t, http.MethodGet, "projects/"+enc, nil, "PRIVATE-TOKEN", "", "Authorization", "Bearer glpat-secret")
	require.Equal(t, http.StatusOK, r.code, "a Bearer token is accepted too")
}

func TestProjects(t *testing.T) {
	t.Parallel()
	b := setup(t, gitlabtest.Config{})
	id := must(b.srv.CreateProject(project, "trunk"))(t)
	must(b.srv.Commit(project, "trunk", map[string]string{"a": "1"}))(t)
	forkID := must(b.srv.ForkProject(project, "alice/api"))(t)
	_, err := b.srv.CreateProject(project, "main")
	require.ErrorContains(t, err, "exists")
	_, err = b.srv.CreateProject("toplevel", "main")
	require.ErrorContains(t, err, "namespace/project")

	var p struct {
		ID                int    `json:"id"`
		PathWithNamespace string `json:"path_with_namespace"`
		DefaultBranch     string `json:"default_branch"`
		ForkedFrom        *struct {
			ID int `json:"id"`
		} `json:"forked_from_project"`
	}
	for _, ref := range []string{enc, strconv.Itoa(id)} {
		r := b.get(t, "projects/"+ref)
		require.Equal(t, http.StatusOK, r.code)
		require.NoError(t, json.Unmarshal([]byte(r.body), &p))
		require.Equal(t, id, p.ID)
		require.Equal(t, project, p.PathWithNamespace)
		require.Equal(t, "trunk", p.DefaultBranch)
		require.Nil(t, p.ForkedFrom)
	}
	r := b.get(t, "projects/"+strconv.Itoa(forkID))
	require.NoError(t, json.Unmarshal([]byte(r.body), &p))
	require.Equal(t, "alice/api", p.PathWithNamespace)
	require.NotNil(t, p.ForkedFrom)
	require.Equal(t, id, p.ForkedFrom.ID)

	fork := b.get(t, "projects/alice%2Fapi/repository/branches/trunk")
	require.Equal(t, http.StatusOK, fork.code, "a fork has the source's branches")

	for path, want := range map[string]string{
		"projects/acme%2Fnope":                          "404 Project Not Found",
		"projects/" + enc + "/repository/files/x/raw":   "404 File Not Found",
		"projects/" + enc + "/repository/branches/nope": "404 Branch Not Found",
		"projects/" + enc + "/repository/tags/nope":     "404 Tag Not Found",
		"projects/" + enc + "/merge_requests/1":         "404 Not found",
		"projects/" + enc + "/issues":                   "404 Not Found",
	} {
		r := b.get(t, path)
		require.Equal(t, http.StatusNotFound, r.code, path)
		require.JSONEq(t, `{"message":"`+want+`"}`, r.body, path)
	}
}

func TestTreePagination(t *testing.T) {
	t.Parallel()
	b := setup(t, gitlabtest.Config{})
	must(b.srv.CreateProject(project, "main"))(t)
	files := map[string]string{"dir/sub/x": "x"}
	for i := range 45 {
		files["dir/f"+strconv.Itoa(100+i)] = "f"
	}
	must(b.srv.Commit(project, "main", files))(t)

	r := b.get(t, "projects/"+enc+"/repository/tree?path=dir&per_page=20&page=2")
	require.Equal(t, http.StatusOK, r.code)
	require.Equal(t, "2", r.header.Get("X-Page"))
	require.Equal(t, "20", r.header.Get("X-Per-Page"))
	require.Equal(t, "46", r.header.Get("X-Total"), "45 files and a directory")
	require.Equal(t, "3", r.header.Get("X-Total-Pages"))
	require.Equal(t, "3", r.header.Get("X-Next-Page"))
	require.Equal(t, "1", r.header.Get("X-Prev-Page"))
	require.Contains(t, r.header.Get("Link"), `page=3&path=dir&per_page=20>; rel="next"`)
	require.Contains(t, r.header.Get("Link"), `page=3&path=dir&per_page=20>; rel="last"`)
	var nodes []struct{ Name, Type, Path string }
	require.NoError(t, json.Unmarshal([]byte(r.body), &nodes))
	require.Len(t, nodes, 20)
	require.Equal(t, "f119", nodes[0].Name, "the directory first, then blobs by path")
	require.Equal(t, "dir/f119", nodes[0].Path)

	r = b.get(t, "projects/"+enc+"/repository/tree?path=dir&per_page=20&page=1")
	require.NoError(t, json.Unmarshal([]byte(r.body), &nodes))
	require.Equal(t, "sub", nodes[0].Name)
	require.Equal(t, "tree", nodes[0].Type)

	r = b.get(t, "projects/"+enc+"/repository/tree?path=dir&per_page=20&page=3")
	require.Empty(t, r.header.Get("X-Next-Page"), "the last page")

	r = b.get(t, "projects/"+enc+"/repository/tree?path=dir&recursive=true&per_page=100")
	require.Equal(t, "47", r.header.Get("X-Total"), "recursive: sub/x too")

	r = b.get(t, "projects/"+enc+"/repository/tree?path=nope")
	require.Equal(t, http.StatusNotFound, r.code)
	require.JSONEq(t, `{"message":"404 Tree Not Found"}`, r.body)
}

func TestCompare(t *testing.T) {
	t.Parallel()
	b := setup(t, gitlabtest.Config{})
	must(b.srv.CreateProject(project, "main"))(t)
	must(b.srv.Commit(project, "main", map[string]string{"a": "1", "old": "content"}))(t)
	must(b.srv.Commit(project, "feature", map[string]string{"b": "1", "new": "content"}, "old"))(t)
	must(b.srv.Commit(project, "main", map[string]string{"a": "2"}))(t)

	paths := func(straight string) ([]string, int) {
		r := b.get(t, "projects/"+enc+"/repository/compare?from=main&to=feature&straight="+straight)
		require.Equal(t, http.StatusOK, r.code)
		var c struct {
			Commits []struct{ ID string } `json:"commits"`
			Diffs   []struct {
				OldPath     string `json:"old_path"`
				NewPath     string `json:"new_path"`
				RenamedFile bool   `json:"renamed_file"`
			} `json:"diffs"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.body), &c))
		var out []string
		for _, d := range c.Diffs {
			out = append(out, d.OldPath+">"+d.NewPath+">"+strconv.FormatBool(d.RenamedFile))
		}
		return out, len(c.Commits)
	}
	got, commits := paths("false")
	require.Equal(t, []string{"b>b>false", "old>new>true"}, got, "from the merge base: main's change to a is not there")
	require.Equal(t, 1, commits)
	got, _ = paths("true")
	require.Equal(t, []string{"a>a>false", "b>b>false", "old>new>true"}, got, "straight: main's tip against feature's")

	r := b.get(t, "projects/"+enc+"/repository/compare?from=main&to=nope")
	require.Equal(t, http.StatusNotFound, r.code)
}

func TestStatuses(t *testing.T) {
	t.Parallel()
	b := setup(t, gitlabtest.Config{})
	must(b.srv.CreateProject(project, "main"))(t)
	sha := must(b.srv.Commit(project, "main", map[string]string{"a": "1"}))(t)
	post := func(body string) response {
		return b.do(t, http.MethodPost, "projects/"+enc+"/statuses/"+sha, strings.NewReader(body), "Content-Type", "application/json")
	}

	r := post(`{"state":"pending","name":"cikit/build","description":"queued"}`)
	require.Equal(t, http.StatusCreated, r.code)
	require.Contains(t, r.body, `"status":"pending"`)
	require.Contains(t, r.body, `"ref":"main"`)

	r = post(`{"state":"pending","name":"cikit/build"}`)
	require.Equal(t, http.StatusBadRequest, r.code, "GitLab's state machine refuses pending to pending")
	require.Contains(t, r.body, "Cannot transition status via :enqueue from :pending")

	r = post(`{"state":"bogus","name":"cikit/build"}`)
	require.Equal(t, http.StatusBadRequest, r.code)
	require.JSONEq(t, `{"error":"state does not have a valid value"}`, r.body)

	form := b.do(t, http.MethodPost, "projects/"+enc+"/statuses/"+sha,
		strings.NewReader(url.Values{"state": {"success"}, "context": {"cikit/build"}, "target_url": {"https://ci/1"}}.Encode()),
		"Content-Type", "application/x-www-form-urlencoded")
	require.Equal(t, http.StatusCreated, form.code, "a form works, and context is name's alias")
	require.Equal(t, http.StatusCreated, post(`{"state":"failed","name":"cikit/lint"}`).code)
	require.Equal(t, http.StatusCreated, post(`{"state":"success","name":"cikit/lint"}`).code, "a finished status is replaced")

	got := must(b.srv.Statuses(project, sha))(t)
	require.Len(t, got, 2, "one per name")
	require.Equal(t, "cikit/build", got[0].Name)
	require.Equal(t, "success", got[0].State)
	require.Equal(t, "https://ci/1", got[0].TargetURL)
	require.Empty(t, got[0].Description, "replaced, not merged")
	require.Equal(t, "cikit/lint", got[1].Name)
	require.Equal(t, "success", got[1].State)

	r = b.get(t, "projects/"+enc+"/repository/commits/"+sha+"/statuses?name=cikit/lint")
	require.Equal(t, http.StatusOK, r.code)
	require.Equal(t, "1", r.header.Get("X-Total"))

	r = b.do(t, http.MethodPost, "projects/"+enc+"/statuses/0000000000000000000000000000000000000000",
		strings.NewReader(`{"state":"success"}`), "Content-Type", "application/json")
	require.Equal(t, http.StatusNotFound, r.code)
	require.JSONEq(t, `{"message":"404 Commit Not Found"}`, r.body)
}

func TestMergeRequests(t *testing.T) {
	t.Parallel()
	b := setup(t, gitlabtest.Config{})
	must(b.srv.CreateProject(project, "main"))(t)
	must(b.srv.CreateProject("other/api", "main"))(t)
	must(b.srv.Commit(project, "main", map[string]string{"a": "1"}))(t)
	head := must(b.srv.Commit(project, "feature", map[string]string{"a": "2"}))(t)
	must(b.srv.Commit("other/api", "feature", map[string]string{"a": "3"}))(t)

	_, err := b.srv.OpenMergeRequest(project, "other/api", "feature", "main")
	require.ErrorContains(t, err, "not acme/platform/api or a fork of it")
	_, err = b.srv.OpenMergeRequest(project, project, "nope", "main")
	require.ErrorContains(t, err, "branch nope")
	require.NoError(t, b.srv.ForkRelation("other/api", project))

	own := must(b.srv.OpenMergeRequest(project, project, "feature", "main"))(t)
	fork := must(b.srv.OpenMergeRequest(project, "other/api", "feature", "main"))(t)
	require.Equal(t, []int{1, 2}, []int{own, fork})
	require.NoError(t, b.srv.CloseMergeRequest(project, own))

	type mr struct {
		IID             int    `json:"iid"`
		State           string `json:"state"`
		SHA             string `json:"sha"`
		SourceProjectID int    `json:"source_project_id"`
		TargetProjectID int    `json:"target_project_id"`
	}
	var list []mr
	r := b.get(t, "projects/"+enc+"/merge_requests?source_branch=feature")
	require.NoError(t, json.Unmarshal([]byte(r.body), &list))
	require.Equal(t, []int{2, 1}, []int{list[0].IID, list[1].IID}, "newest first")
	require.NotEqual(t, list[0].SourceProjectID, list[0].TargetProjectID)
	r = b.get(t, "projects/"+enc+"/merge_requests?state=opened")
	require.NoError(t, json.Unmarshal([]byte(r.body), &list))
	require.Len(t, list, 1)
	require.Equal(t, 2, list[0].IID)

	var one mr
	r = b.get(t, "projects/"+enc+"/merge_requests/1")
	require.NoError(t, json.Unmarshal([]byte(r.body), &one))
	require.Equal(t, mr{IID: 1, State: "closed", SHA: head, SourceProjectID: one.TargetProjectID, TargetProjectID: one.TargetProjectID}, one)
}

func TestRateLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, gitlabtest.Config{RateLimit: 2, RateWindow: time.Minute})
	must(b.srv.CreateProject(project, "main"))(t)
	require.Equal(t, http.StatusOK, b.get(t, "projects/"+enc).code)
	b.clock.Advance(15 * time.Second)
	require.Equal(t, http.StatusOK, b.get(t, "projects/"+enc).code)
	b.clock.Advance(500 * time.Millisecond)

	r := b.get(t, "projects/"+enc)
	require.Equal(t, http.StatusTooManyRequests, r.code)
	require.Equal(t, "Retry later\n", r.body)
	require.Equal(t, "45", r.header.Get("Retry-After"), "44.5s rounded up")
	require.Equal(t, "2", r.header.Get("RateLimit-Limit"))
	require.Equal(t, "3", r.header.Get("RateLimit-Observed"))
	require.Equal(t, "0", r.header.Get("RateLimit-Remaining"))
	require.Equal(t, strconv.FormatInt(time.Unix(1_800_000_060, 0).Unix(), 10), r.header.Get("RateLimit-Reset"))
	require.Equal(t, 3, b.srv.Requests(), "refused requests count")

	b.clock.Advance(44500 * time.Millisecond)
	require.Equal(t, http.StatusOK, b.get(t, "projects/"+enc).code, "the next window")
}

func TestSeedingErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, gitlabtest.Config{})
	must(b.srv.CreateProject(project, "main"))(t)
	sha := must(b.srv.Commit(project, "main", map[string]string{"a": "1"}))(t)
	_, err := b.srv.Commit(project, "main", nil, "missing")
	require.ErrorContains(t, err, "missing does not exist")
	_, err = b.srv.Commit("acme/nope", "main", nil)
	require.ErrorContains(t, err, "project acme/nope does not exist")
	require.ErrorContains(t, b.srv.Tag(project, "v1", "abc"), "commit abc is not in")
	require.ErrorContains(t, b.srv.CloseMergeRequest(project, 1), "merge request !1")
	require.ErrorContains(t, b.srv.ForkRelation(project, project), "fork of itself")

	second := must(b.srv.Commit(project, "feature", map[string]string{"b": "1"}))(t)
	r := b.get(t, "projects/"+enc+"/repository/files/a/raw?ref="+second)
	require.Equal(t, "1", r.body, "a new branch starts from the default branch's head")
	require.Equal(t, second, r.header.Get("X-Gitlab-Commit-Id"))
	var branch struct {
		Commit struct {
			ID        string   `json:"id"`
			ParentIDs []string `json:"parent_ids"`
		} `json:"commit"`
	}
	r = b.get(t, "projects/"+enc+"/repository/branches/feature")
	require.NoError(t, json.Unmarshal([]byte(r.body), &branch))
	require.Equal(t, second, branch.Commit.ID)
	require.Equal(t, []string{sha}, branch.Commit.ParentIDs)
}
