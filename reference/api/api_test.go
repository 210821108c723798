package api_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/reference/api"
)

// decode requires a JSON answer of status and decodes it into a T.
func decode[T any](t *testing.T, rec *httptest.ResponseRecorder, status int) T {
	t.Helper()
	require.Equal(t, status, rec.Code, "body: %s", rec.Body)
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	var v T
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &v), "%s", rec.Body)
	return v
}

type errorBody struct {
	Error string `json:"error"`
}

// requireError requires a JSON error of status whose message contains
// msg.
func requireError(t *testing.T, rec *httptest.ResponseRecorder, status int, msg string) {
	t.Helper()
	e := decode[errorBody](t, rec, status)
	require.Contains(t, e.Error, msg)
}

func TestNewRequiresRuns(t *testing.T) {
	t.Parallel()
	_, err := api.New(api.Config{})
	require.ErrorContains(t, err, "Config.Runs is required")
}

func TestNewRequiresAccess(t *testing.T) {
	t.Parallel()
	_, err := api.New(api.Config{Runs: dag.NewMemoryStore(dag.MemoryConfig{})})
	require.ErrorContains(t, err, "Config.Access is required")
}

func TestHealth(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Config{})
	require.Equal(t, map[string]string{"status": "ok"}, decode[map[string]string](t, f.do(t, "GET", "/healthz"), http.StatusOK))
	require.Equal(t, map[string]string{"status": "ready"}, decode[map[string]string](t, f.do(t, "GET", "/readyz"), http.StatusOK),
		"without a Ready check, ready")

	down := newFixture(t, api.Config{Ready: func(context.Context) error { return errors.New("the database does not answer") }})
	require.Equal(t, map[string]string{"status": "not ready", "error": "the database does not answer"},
		decode[map[string]string](t, down.do(t, "GET", "/readyz"), http.StatusServiceUnavailable))
	require.Equal(t, http.StatusOK, down.do(t, "GET", "/healthz").Code, "alive while not ready")
}

// pages lists runs with query, following next, and returns the IDs of
// each page.
func (f *fixture) pages(t *testing.T, query string) [][]string {
	t.Helper()
	var out [][]string
	target := "/api/v1/runs?" + query
	for range 20 {
		list := decode[api.RunList](t, f.do(t, "GET", target), http.StatusOK)
		var ids []string
		for _, r := range list.Runs {
			ids = append(ids, r.ID)
		}
		out = append(out, ids)
		if list.Next == "" {
			return out
		}
		target = "/api/v1/runs?" + query + "&before=" + list.Next
	}
	t.Fatal("pages without end")
	return nil
}

func TestListRunsPaging(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Config{})
	f.create(t, 0, 0, "main", "a")
	for range 4 {
		f.create(t, 1, 0, "main", "b") // four runs at one instant
	}
	f.create(t, 2, 0, "main", "c")
	// Newest first; at one instant, larger IDs first.
	all := []string{"run-6", "run-5", "run-4", "run-3", "run-2", "run-1"}
	require.Equal(t, [][]string{all}, f.pages(t, ""), "one page of the default limit")
	require.Equal(t, [][]string{all[:4], all[4:]}, f.pages(t, "limit=4"), "a page boundary inside an instant")
	require.Equal(t, [][]string{all[:3], all[3:]}, f.pages(t, "limit=3"), "no next after a full last page")
	require.Equal(t, [][]string{{"run-6"}, {"run-5"}, {"run-4"}, {"run-3"}, {"run-2"}, {"run-1"}}, f.pages(t, "limit=1"))

	list := decode[api.RunList](t, f.do(t, "GET", "/api/v1/runs?limit=1"), http.StatusOK)
	c, err := api.DecodeCursor(list.Next)
	require.NoError(t, err)
	require.Equal(t, &dag.RunCursor{CreatedAt: time.Date(2026, 3, 2, 10, 2, 0, 0, time.UTC), ID: "run-6"}, c, "the cursor is the page's last run")
	require.Equal(t, list.Next, api.EncodeCursor(c))
}

func TestListRunsFilters(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Config{})
	f.create(t, 0, 0, "main", "a")
	f.create(t, 0, 1, "feature", "b")
	f.create(t, 0, 2, "main", "c")
	require.Equal(t, [][]string{{"run-3", "run-1"}}, f.pages(t, "branch=main"))
	require.Equal(t, [][]string{{"run-3"}, {"run-1"}}, f.pages(t, "branch=main&limit=1"), "paging within a filter")
	require.Equal(t, [][]string{{"run-3", "run-2", "run-1"}}, f.pages(t, "pipeline=acme%2Fapi%3A.cikit.yml"))
	require.Equal(t, [][]string{nil}, f.pages(t, "pipeline=acme%2Fapi"), "the pipeline is compared exactly")

	list := decode[api.RunList](t, f.do(t, "GET", "/api/v1/runs?limit=1"), http.StatusOK)
	require.Equal(t, api.RunSummary{ID: "run-3", Number: 3, Pipeline: "acme/api:.cikit.yml", Branch: "main", SHA: "c", State: cikit.RunPending,
		CreatedAt: time.Date(2026, 3, 2, 10, 0, 2, 0, time.UTC)}, list.Runs[0], "a new run's duration is zero at its creation")
}

func TestListRunsBadInput(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Config{})
	f.create(t, 0, 0, "main", "a")
	for _, q := range []string{"limit=0", "limit=-1", "limit=501", "limit=x", "limit=1.5"} {
		requireError(t, f.do(t, "GET", "/api/v1/runs?"+q), http.StatusBadRequest, "limit")
	}
	require.Equal(t, http.StatusOK, f.do(t, "GET", "/api/v1/runs?limit=500").Code)
	for _, before := range []string{
		"!!", // not base64url
		base64.RawURLEncoding.EncodeToString([]byte("2026-03-02T10:00:00Z")),    // no ID
		base64.RawURLEncoding.EncodeToString([]byte("yesterday|run-1")),         // no time
		api.EncodeCursor(&dag.RunCursor{CreatedAt: time.Now(), ID: "run-\xff"}), // not UTF-8
	} {
		rec := f.do(t, "GET", "/api/v1/runs?before="+before)
		requireError(t, rec, http.StatusBadRequest, "")
	}
	requireError(t, f.do(t, "GET", "/api/v1/runs?branch=%00"), http.StatusBadRequest, "NUL")
}

func TestRunDetail(t *testing.T) {
	t.Parallel()
	f := documented(t, api.Config{})
	d := decode[api.RunDetail](t, f.do(t, "GET", "/api/v1/runs/run-1"), http.StatusOK)
	require.Equal(t, cikit.RunRunning, d.State)
	require.True(t, d.FinishedAt.IsZero())
	require.Equal(t, 5*time.Minute, d.Duration, "an unfinished run's duration runs to now")
	require.Equal(t, []string{"build", "unit"}, d.CriticalPath)
	require.Equal(t, 30*time.Second+259*time.Second, d.CriticalPathDuration)
	require.Equal(t, map[cikit.JobState]int{cikit.JobSucceeded: 2, cikit.JobRunning: 1, cikit.JobPending: 1}, d.Counts)
	jobs := map[string]api.JobDetail{}
	for _, j := range d.Jobs {
		jobs[j.ID] = j
	}
	require.Equal(t, []string{"build", "unit", "lint", "package"}, []string{d.Jobs[0].ID, d.Jobs[1].ID, d.Jobs[2].ID, d.Jobs[3].ID}, "plan order")
	require.Equal(t, []string{"unit"}, jobs["package"].WaitingOn, "lint satisfies package, unit not yet")
	require.Equal(t, []string{}, jobs["unit"].WaitingOn)
	require.True(t, jobs["unit"].Critical)
	require.False(t, jobs["lint"].Critical)
	require.Nil(t, jobs["unit"].ExitCode, "no exit code while running")
	require.Equal(t, 0, *jobs["build"].ExitCode)
	require.Equal(t, "unit tests", jobs["unit"].Name)
	require.Equal(t, []api.JobCache{{Key: "go-mod", Paths: []string{"/go/pkg/mod"}}}, jobs["build"].Cache)

	failed := decode[api.RunDetail](t, f.do(t, "GET", "/api/v1/runs/run-2"), http.StatusOK)
	require.Equal(t, cikit.RunFailed, failed.State)
	require.Equal(t, 20*time.Second, failed.Duration, "a finished run's duration ends with it")
	require.Equal(t, time.Date(2026, 3, 2, 10, 2, 20, 0, time.UTC), failed.FinishedAt)
	require.Equal(t, 2, *failed.Jobs[0].ExitCode)
	require.Nil(t, failed.Jobs[1].ExitCode, "a skipped job never ran")
	require.Contains(t, failed.Jobs[1].Reason, "build")

	requireError(t, f.do(t, "GET", "/api/v1/runs/nope"), http.StatusNotFound, "not found")
}

func TestWaitingOnAlways(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Config{})
	step := []cikit.Step{{Run: "true"}}
	run, err := f.store.RunCreate(context.Background(), &dag.RunCreateParams{Jobs: []*cikit.JobSpec{
		{ID: "a", Steps: step},
		{ID: "b", Steps: step},
		{ID: "report", Needs: []string{"a", "b"}, When: cikit.WhenAlways, Steps: step},
	}})
	require.NoError(t, err)
	f.start(t, run, "a", "r", 0, 1)
	f.start(t, run, "b", "r", 0, 1)
	f.complete(t, run, "a", cikit.JobFailed, 1, 0, 5)
	j := decode[api.JobHistory](t, f.do(t, "GET", "/api/v1/runs/"+run.ID+"/jobs/report"), http.StatusOK)
	require.Equal(t, cikit.JobPending, j.State)
	require.Equal(t, []string{"b"}, j.WaitingOn, "an always job waits for needs that run, not for one that failed")
	require.Equal(t, "report", j.Name, "the name defaults to the ID")
}

func TestJob(t *testing.T) {
	t.Parallel()
	f := documented(t, api.Config{})
	j := decode[api.JobHistory](t, f.do(t, "GET", "/api/v1/runs/run-1/jobs/unit"), http.StatusOK)
	require.Equal(t, "runner-7", j.Runner)
	require.Equal(t, []api.JobAttempt{}, j.Attempts)

	_ = decode[api.RunDetail](t, f.do(t, "POST", "/api/v1/runs/run-2/retry"), http.StatusAccepted)
	j = decode[api.JobHistory](t, f.do(t, "GET", "/api/v1/runs/run-2/jobs/build"), http.StatusOK)
	require.Equal(t, 2, j.Attempt)
	require.Equal(t, cikit.JobReady, j.State)
	require.Equal(t, []api.JobAttempt{{Attempt: 1, State: cikit.JobFailed, Runner: "runner-8", Reason: "step run exited with 2",
		StartedAt: time.Date(2026, 3, 2, 10, 2, 2, 0, time.UTC), FinishedAt: time.Date(2026, 3, 2, 10, 2, 20, 0, time.UTC), ExitCode: 2}}, j.Attempts)
	skipped := decode[api.JobHistory](t, f.do(t, "GET", "/api/v1/runs/run-2/jobs/unit"), http.StatusOK)
	require.Len(t, skipped.Attempts, 1)
	require.Equal(t, cikit.JobSkipped, skipped.Attempts[0].State)
	require.True(t, skipped.Attempts[0].StartedAt.IsZero(), "a skipped attempt never started")

	requireError(t, f.do(t, "GET", "/api/v1/runs/run-1/jobs/deploy"), http.StatusNotFound, `no job "deploy"`)
	requireError(t, f.do(t, "GET", "/api/v1/runs/nope/jobs/unit"), http.StatusNotFound, "not found")
}

func TestCancelDispatches(t *testing.T) {
	t.Parallel()
	f := documented(t, api.Config{})
	d := decode[api.RunDetail](t, f.do(t, "POST", "/api/v1/runs/run-1/cancel"), http.StatusAccepted)
	require.Equal(t, cikit.RunRunning, d.State, "the run goes on until its running job is reported")
	require.Equal(t, cikit.JobCancelRequested, d.Jobs[1].State)
	require.Equal(t, cikit.JobCancelled, d.Jobs[3].State)
	res := f.dispatchedResults()
	require.Len(t, res, 1, "Dispatch gets the cancellation's result")
	require.Equal(t, "run-1", res[0].Run.ID)
	changed := map[string]cikit.JobState{}
	for _, j := range res[0].Changed {
		changed[j.ID()] = j.State
	}
	require.Equal(t, map[string]cikit.JobState{"unit": cikit.JobCancelRequested, "package": cikit.JobCancelled}, changed)

	again := decode[api.RunDetail](t, f.do(t, "POST", "/api/v1/runs/run-2/cancel"), http.StatusAccepted)
	require.Equal(t, cikit.RunFailed, again.State, "cancelling a finished run changes nothing")

	requireError(t, f.do(t, "POST", "/api/v1/runs/nope/cancel"), http.StatusNotFound, "not found")
	require.Len(t, f.dispatchedResults(), 2, "an unknown run dispatches nothing")
}

func TestRetry(t *testing.T) {
	t.Parallel()
	f := documented(t, api.Config{})
	requireError(t, f.do(t, "POST", "/api/v1/runs/run-1/retry"), http.StatusConflict, "has not finished")
	require.Empty(t, f.dispatchedResults(), "a refused retry dispatches nothing")

	d := decode[api.RunDetail](t, f.do(t, "POST", "/api/v1/runs/run-2/retry"), http.StatusAccepted)
	require.Equal(t, cikit.RunPending, d.State)
	require.Equal(t, cikit.JobReady, d.Jobs[0].State)
	require.Equal(t, 2, d.Jobs[0].Attempt)
	res := f.dispatchedResults()
	require.Len(t, res, 1)
	require.Equal(t, "build", res[0].Changed[0].ID(), "Dispatch gets the job the retry made READY")
	require.Equal(t, cikit.JobReady, res[0].Changed[0].State)

	requireError(t, f.do(t, "POST", "/api/v1/runs/nope/retry"), http.StatusNotFound, "not found")
}

func TestLog(t *testing.T) {
	t.Parallel()
	f := documented(t, api.Config{})
	rec := f.do(t, "GET", "/api/v1/runs/run-1/jobs/unit/log")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "text/plain; charset=utf-8", rec.Header().Get("Content-Type"))
	require.Equal(t, unitLog, rec.Body.String(), "a live log as far as it is written")

	f.log(t, f.run(t, "run-1"), "unit", len(unitLog), "PASS\n")
	require.Equal(t, unitLog+"PASS\n", f.do(t, "GET", "/api/v1/runs/run-1/jobs/unit/log?attempt=1").Body.String(), "and the bytes written since")

	require.Equal(t, buildLog, f.do(t, "GET", "/api/v1/runs/run-1/jobs/build/log").Body.String(), "a finished log, whole")

	requireError(t, f.do(t, "GET", "/api/v1/runs/run-1/jobs/package/log"), http.StatusNotFound, "has not begun")
	requireError(t, f.do(t, "GET", "/api/v1/runs/run-1/jobs/unit/log?attempt=2"), http.StatusNotFound, "no attempt 2")
	requireError(t, f.do(t, "GET", "/api/v1/runs/run-1/jobs/unit/log?attempt=0"), http.StatusBadRequest, "attempt")
	requireError(t, f.do(t, "GET", "/api/v1/runs/run-1/jobs/unit/log?attempt=x"), http.StatusBadRequest, "attempt")
	requireError(t, f.do(t, "GET", "/api/v1/runs/run-1/jobs/deploy/log"), http.StatusNotFound, "deploy")
	requireError(t, f.do(t, "GET", "/api/v1/runs/nope/jobs/unit/log"), http.StatusNotFound, "not found")

	// The attempt of a retried job: the current one by default.
	_ = f.do(t, "POST", "/api/v1/runs/run-2/retry")
	requireError(t, f.do(t, "GET", "/api/v1/runs/run-2/jobs/build/log"), http.StatusNotFound, "attempt 2")
}

func TestNoLogsNoWhy(t *testing.T) {
	t.Parallel()
	store := dag.NewMemoryStore(dag.MemoryConfig{})
	run, err := store.RunCreate(context.Background(), &dag.RunCreateParams{Jobs: fanOut()})
	require.NoError(t, err)
	access, token := newAccess(t)
	a0, err := api.New(api.Config{Runs: store, Access: access})
	require.NoError(t, err)
	a := asUser(a0, token)
	for _, path := range []string{"/log", "/log/follow", "/why"} {
		rec := httptest.NewRecorder()
		a.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/runs/"+run.ID+"/jobs/build"+path, nil))
		requireError(t, rec, http.StatusNotFound, "this platform")
	}
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, httptest.NewRequest("POST", "/api/v1/runs/"+run.ID+"/cancel", nil))
	require.Equal(t, http.StatusAccepted, rec.Code, "without Dispatch, cancelling works")
	a0.CloseFollowers()
}

// sse reads a follow stream's events.
type sse struct {
	r *bufio.Reader
}

// next returns the next event's name, id and data, skipping comments and
// the retry line; io.EOF when the stream closed.
func (s *sse) next(t *testing.T) (name, id, data string, err error) {
	t.Helper()
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return "", "", "", err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "" && name != "":
			return name, id, data, nil
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
}

type logEvent struct {
	Step   int    `json:"step"`
	Offset int64  `json:"offset"`
	Data   []byte `json:"data"`
}

// server serves f's API until the test ends; its follow streams end
// first.
func (f *fixture) server(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(f.h)
	t.Cleanup(srv.Close)
	t.Cleanup(f.api.CloseFollowers)
	return srv
}

// follow opens a follow stream of path; its body is closed when the test
// ends.
func follow(t *testing.T, srv *httptest.Server, path string) (*http.Response, *sse) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", srv.URL+path, nil)
	require.NoError(t, err)
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp, &sse{r: bufio.NewReader(resp.Body)}
}

func TestFollow(t *testing.T) {
	t.Parallel()
	f := documented(t, api.Config{})
	srv := f.server(t)
	resp, s := follow(t, srv, "/api/v1/runs/run-1/jobs/unit/log/follow")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))

	name, id, data, err := s.next(t)
	require.NoError(t, err)
	require.Equal(t, "log", name)
	require.Equal(t, strconv.Itoa(len(unitLog)), id)
	var ev logEvent
	require.NoError(t, json.Unmarshal([]byte(data), &ev))
	require.Equal(t, logEvent{Offset: 0, Data: []byte(unitLog)}, ev, "the bytes written before")

	run := f.run(t, "run-1")
	f.log(t, run, "unit", len(unitLog), "PASS\n")
	name, id, data, err = s.next(t)
	require.NoError(t, err)
	require.Equal(t, "log", name)
	require.Equal(t, strconv.Itoa(len(unitLog)+5), id)
	require.NoError(t, json.Unmarshal([]byte(data), &ev))
	require.Equal(t, logEvent{Offset: int64(len(unitLog)), Data: []byte("PASS\n")}, ev, "then the bytes as they come")

	f.finishLog(t, run, "unit", unitLog+"PASS\n")
	name, id, data, err = s.next(t)
	require.NoError(t, err)
	require.Equal(t, "end", name)
	require.Equal(t, strconv.Itoa(len(unitLog)+5), id)
	require.JSONEq(t, `{"complete":true,"bytes":`+strconv.Itoa(len(unitLog)+5)+`}`, data)
	_, _, _, err = s.next(t)
	require.Equal(t, io.EOF, err, "the stream closes after end")

	resp, s = follow(t, srv, "/api/v1/runs/run-1/jobs/unit/log/follow?attempt=1&offset="+strconv.Itoa(len(unitLog)))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	_, _, data, err = s.next(t)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal([]byte(data), &ev))
	require.Equal(t, logEvent{Offset: int64(len(unitLog)), Data: []byte("PASS\n")}, ev, "from the offset")

	resp, _ = follow(t, srv, "/api/v1/runs/run-1/jobs/package/log/follow")
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "a log that has not begun")
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	resp, _ = follow(t, srv, "/api/v1/runs/run-1/jobs/unit/log/follow?offset=x")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	resp, _ = follow(t, srv, "/api/v1/runs/nope/jobs/unit/log/follow")
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

func TestCloseFollowers(t *testing.T) {
	t.Parallel()
	f := documented(t, api.Config{})
	srv := f.server(t)
	_, s := follow(t, srv, "/api/v1/runs/run-1/jobs/unit/log/follow")
	_, _, _, err := s.next(t)
	require.NoError(t, err)
	f.api.CloseFollowers()
	_, _, _, err = s.next(t)
	require.Equal(t, io.EOF, err, "a live stream ends")
}

func TestWhy(t *testing.T) {
	t.Parallel()
	f := documented(t, api.Config{})
	w := decode[api.WaitReason](t, f.do(t, "GET", "/api/v1/runs/run-1/jobs/package/why"), http.StatusOK)
	require.Equal(t, api.WaitReason{RunID: "run-1", JobID: "package", State: cikit.JobPending, Code: string(fleet.WaitNotWaiting),
		Message: "the job is pending, not waiting for a runner"}, w)
	require.Contains(t, f.do(t, "GET", "/api/v1/runs/run-1/jobs/package/why").Body.String(), `"eta_ns":null`, "an unknown ETA is null")
	requireError(t, f.do(t, "GET", "/api/v1/runs/run-1/jobs/deploy/why"), http.StatusNotFound, "deploy")

	broken := newFixture(t, api.Config{Why: func(context.Context, string, string) (*fleet.WaitReason, error) {
		return nil, errors.New("the pools are being resized")
	}})
	broken.create(t, 0, 0, "main", "4f2a9c1")
	rec := broken.do(t, "GET", "/api/v1/runs/run-1/jobs/package/why")
	requireError(t, rec, http.StatusServiceUnavailable, "try again")
	require.NotEmpty(t, rec.Header().Get("Retry-After"))
}

// failingStore fails every read.
type failingStore struct {
	dag.Store
}

var errDown = errors.New("connection refused")

func (failingStore) RunGet(context.Context, string) (*dag.Run, error) { return nil, errDown }
func (failingStore) RunList(context.Context, *dag.RunListParams) ([]*dag.Run, error) {
	return nil, errDown
}
func (failingStore) JobGet(context.Context, string, string) (*dag.Job, error) { return nil, errDown }
func (failingStore) RunCancel(context.Context, string) (*dag.TransitionResult, error) {
	return nil, errDown
}

func TestStoreFailure(t *testing.T) {
	t.Parallel()
	access, token := newAccess(t)
	a0, err := api.New(api.Config{Runs: failingStore{dag.NewMemoryStore(dag.MemoryConfig{})}, Access: access, Logger: discard()})
	require.NoError(t, err)
	a := asUser(a0, token)
	for _, r := range [][2]string{
		{"GET", "/api/v1/runs"}, {"GET", "/api/v1/runs/run-1"}, {"GET", "/api/v1/runs/run-1/jobs/a"}, {"POST", "/api/v1/runs/run-1/cancel"},
	} {
		rec := httptest.NewRecorder()
		a.ServeHTTP(rec, httptest.NewRequest(r[0], r[1], nil))
		requireError(t, rec, http.StatusServiceUnavailable, "failed; try again")
		require.Equal(t, "5", rec.Header().Get("Retry-After"))
		require.NotContains(t, rec.Body.String(), "connection refused", "the store's error is logged, not answered")
	}
}

func TestRoutesAnswerJSON(t *testing.T) {
	t.Parallel()
	f := documented(t, api.Config{})
	rec := f.do(t, "DELETE", "/api/v1/runs/run-1")
	requireError(t, rec, http.StatusMethodNotAllowed, "use GET")
	require.Equal(t, "GET, HEAD", rec.Header().Get("Allow"))
	rec = f.do(t, "GET", "/api/v1/runs/run-1/cancel")
	requireError(t, rec, http.StatusMethodNotAllowed, "use POST")
	require.Equal(t, "POST", rec.Header().Get("Allow"))
	requireError(t, f.do(t, "GET", "/api/v1/nothing"), http.StatusNotFound, "no route GET /api/v1/nothing")
	requireError(t, f.do(t, "GET", "/api/v2/runs"), http.StatusNotFound, "no route")
	requireError(t, f.do(t, "POST", "/api/v1/repos/acme/api/pipelines"), http.StatusNotFound, "no route") // without Manual
}

func TestManualMounted(t *testing.T) {
	t.Parallel()
	var got []string
	manual := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.PathValue("org")+"/"+r.PathValue("repo"))
		w.WriteHeader(http.StatusCreated)
	})
	f := newFixture(t, api.Config{Manual: manual})
	require.Equal(t, http.StatusCreated, f.do(t, "POST", "/api/v1/repos/acme/api/pipelines").Code)
	require.Equal(t, []string{"acme/api"}, got, "the trigger reads org and repo from the path")
	requireError(t, f.do(t, "GET", "/api/v1/repos/acme/api/pipelines"), http.StatusMethodNotAllowed, "use POST")
}

// TestRunContextAndJobResults: a run shows its context without the
// event's payload, and a job that ended with a report its commit,
// checkout duration, annotations, outputs, env names and the image it ran
// in with its digest; a job without one shows none of them.
func TestRunContextAndJobResults(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Config{})
	ctx := context.Background()
	rc := &cikit.RunContext{Provider: "github", Repository: "acme/api", Event: "push", Ref: "refs/heads/main", RefName: "main",
		RefType: "branch", SHA: "0123456789abcdef0123456789abcdef01234567", Actor: "octocat", Payload: []byte(`{"secret":"payload"}`)}
	run, err := f.store.RunCreate(ctx, &dag.RunCreateParams{Jobs: fanOut(), Pipeline: "acme/api:.cikit.yml", Branch: "main", Context: rc})
	require.NoError(t, err)
	digest := "sha256:" + strings.Repeat("ab12cd34", 8)
	f.start(t, run, "build", "runner-7", 0, 1)
	j, err := f.store.JobGet(ctx, run.ID, "build")
	require.NoError(t, err)
	_, err = f.store.JobComplete(ctx, &dag.JobCompleteParams{RunID: run.ID, JobID: "build", Attempt: j.Attempt, Outcome: cikit.JobSucceeded,
		Result: &dag.JobResult{Outputs: map[string]string{"version": "1.2.3"}, Commit: rc.SHA, CheckoutDuration: 1500 * time.Millisecond,
			Annotations: []cikit.Annotation{{Level: "warning", Message: "deprecated call", File: "main.go", Line: 12, Step: "vet"}},
			EnvNames:    []string{"CI", "GITHUB_SHA"}, ImageRef: "alpine:3.19", ImageDigest: digest}})
	require.NoError(t, err)

	rec := f.do(t, "GET", "/api/v1/runs/"+run.ID)
	require.NotContains(t, rec.Body.String(), "payload", "the payload is not shown")
	d := decode[api.RunDetail](t, rec, http.StatusOK)
	want := *rc
	want.Payload = nil
	require.Equal(t, &want, d.Context)
	build := d.Jobs[0]
	require.Equal(t, "build", build.ID)
	require.Equal(t, rc.SHA, build.Commit)
	require.Equal(t, 1500*time.Millisecond, build.CheckoutDuration)
	require.Equal(t, map[string]string{"version": "1.2.3"}, build.Outputs)
	require.Equal(t, []cikit.Annotation{{Level: "warning", Message: "deprecated call", File: "main.go", Line: 12, Step: "vet"}}, build.Annotations)
	require.Equal(t, []string{"CI", "GITHUB_SHA"}, build.EnvNames)
	var fields struct {
		Jobs []map[string]any `json:"jobs"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &fields))
	require.Equal(t, "alpine:3.19", fields.Jobs[0]["image"], "the image as the job asked for it")
	require.Equal(t, digest, fields.Jobs[0]["image_digest"], "the digest it ran on")

	h := decode[api.JobHistory](t, f.do(t, "GET", "/api/v1/runs/"+run.ID+"/jobs/build"), http.StatusOK)
	require.Equal(t, build, h.JobDetail, "the job's own page shows the same")

	var raw map[string]any
	require.NoError(t, json.Unmarshal(f.do(t, "GET", "/api/v1/runs/"+run.ID+"/jobs/unit").Body.Bytes(), &raw))
	for _, k := range []string{"commit", "checkout_duration_ns", "annotations", "outputs", "env_names", "image", "image_digest"} {
		require.NotContains(t, raw, k, "a job that has not ended shows no %s", k)
	}
}
