package web_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/reference/web"
)

// fakeAPI serves the JSON API the UI reads, in its documented shapes,
// from a real dag.MemoryStore, with logs the test writes while the page
// is open. Its clock only moves when the test says so.
type fakeAPI struct {
	t     *testing.T
	store *dag.MemoryStore
	srv   *httptest.Server

	clockMu sync.Mutex
	now     time.Time

	mu       sync.Mutex
	seq      int
	runs     []string // in creation order
	specs    map[string][]*cikit.JobSpec
	posts    []string
	failPost string
	logs     map[[2]string]*fakeLog
	// dropOnce makes the first log stream that sends an event end after
	// it, without an end event, so the browser must resume it.
	dropOnce   bool
	lastIDs    []string // Last-Event-ID headers of the follow requests
	followReqs int
}

// fakeLog is a job's log as it grows.
type fakeLog struct {
	buf     []byte
	done    bool
	changed chan struct{} // closed and replaced at every change
}

func newFakeAPI(t *testing.T) *fakeAPI {
	f := &fakeAPI{t: t, now: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC),
		specs: make(map[string][]*cikit.JobSpec), logs: make(map[[2]string]*fakeLog)}
	f.store = dag.NewMemoryStore(dag.MemoryConfig{
		Now: f.clock,
		NewID: func() string {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.seq++
			return fmt.Sprintf("run-%d", f.seq)
		},
	})
	mux := http.NewServeMux()
	const p = web.DefaultAPIPrefix
	mux.HandleFunc("GET "+p+"/runs", f.list)
	mux.HandleFunc("GET "+p+"/runs/{run}", f.run)
	mux.HandleFunc("GET "+p+"/runs/{run}/jobs/{job}", f.job)
	mux.HandleFunc("POST "+p+"/runs/{run}/cancel", f.act)
	mux.HandleFunc("POST "+p+"/runs/{run}/retry", f.act)
	mux.HandleFunc("GET "+p+"/runs/{run}/jobs/{job}/log", f.log)
	mux.HandleFunc("GET "+p+"/runs/{run}/jobs/{job}/log/follow", f.follow)
	mux.HandleFunc("GET "+p+"/runs/{run}/jobs/{job}/why", f.why)
	mux.Handle("/", web.Handler())
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) clock() time.Time {
	f.clockMu.Lock()
	defer f.clockMu.Unlock()
	return f.now
}

// at sets the clock to minute m of the test's day.
func (f *fakeAPI) at(m int) {
	f.clockMu.Lock()
	defer f.clockMu.Unlock()
	f.now = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC).Add(time.Duration(m) * time.Minute)
}

// create stores a run of specs.
func (f *fakeAPI) create(pipeline string, specs ...*cikit.JobSpec) string {
	f.t.Helper()
	run, err := f.store.RunCreate(context.Background(), &dag.RunCreateParams{
		Jobs: specs, Pipeline: pipeline, Branch: "main", SHA: "0123456789abcdef0123456789abcdef01234567"})
	if err != nil {
		f.t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs = append(f.runs, run.ID)
	f.specs[run.ID] = specs
	return run.ID
}

// queue, start, succeed and fail move a job's current attempt on.
func (f *fakeAPI) queue(run, job string) { f.apply(dag.EventQueue, run, job, "") }
func (f *fakeAPI) start(run, job string) { f.apply(dag.EventStart, run, job, "") }
func (f *fakeAPI) succeed(run, job string) {
	f.apply(dag.EventComplete, run, job, cikit.JobSucceeded)
}
func (f *fakeAPI) fail(run, job string) { f.apply(dag.EventComplete, run, job, cikit.JobFailed) }

func (f *fakeAPI) apply(kind dag.EventKind, run, job string, outcome cikit.JobState) {
	f.t.Helper()
	ctx := context.Background()
	j, err := f.store.JobGet(ctx, run, job)
	if err != nil {
		f.t.Fatal(err)
	}
	ev := &dag.JobEvent{Kind: kind, RunID: run, JobID: job, Attempt: j.Attempt, Runner: "runner-7", Outcome: outcome}
	if outcome == cikit.JobFailed {
		ev.ExitCode, ev.Reason, ev.FailureClass = 1, "step 1 exited 1", cikit.FailureScript
	}
	res, err := f.store.JobApply(ctx, []*dag.JobEvent{ev})
	if err != nil {
		f.t.Fatal(err)
	}
	if res[0].Err != nil {
		f.t.Fatalf("%v %s/%s: %v", kind, run, job, res[0].Err)
	}
}

// appendLog adds bytes to the log of job (attempt 1), beginning it.
func (f *fakeAPI) appendLog(run, job, data string) { f.changeLog(run, job, data, false) }

// endLog ends the log of job.
func (f *fakeAPI) endLog(run, job string) { f.changeLog(run, job, "", true) }

func (f *fakeAPI) changeLog(run, job, data string, done bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.logs[[2]string{run, job}]
	if l == nil {
		l = &fakeLog{changed: make(chan struct{})}
		f.logs[[2]string{run, job}] = l
	}
	l.buf = append(l.buf, data...)
	l.done = l.done || done
	close(l.changed)
	l.changed = make(chan struct{})
}

// postsSeen returns the paths of the POST requests so far.
func (f *fakeAPI) postsSeen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.posts)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, map[string]string{"error": err.Error()})
}

type runSummary struct {
	ID         string         `json:"id"`
	Pipeline   string         `json:"pipeline"`
	Branch     string         `json:"branch"`
	SHA        string         `json:"sha"`
	State      cikit.RunState `json:"state"`
	CreatedAt  time.Time      `json:"created_at"`
	FinishedAt time.Time      `json:"finished_at,omitzero"`
	Duration   int64          `json:"duration_ns"`
}

type runDetail struct {
	runSummary
	CriticalPath   []string               `json:"critical_path"`
	CriticalPathNS int64                  `json:"critical_path_ns"`
	Counts         map[cikit.JobState]int `json:"counts"`
	Jobs           []jobDetail            `json:"jobs"`
}

type cacheJSON struct {
	Key   string   `json:"key"`
	Paths []string `json:"paths"`
}

type jobDetail struct {
	ID           string         `json:"id"`
	Name         string         `json:"name"`
	Stage        string         `json:"stage"`
	Needs        []string       `json:"needs"`
	RunsOn       []string       `json:"runs_on"`
	AllowFailure bool           `json:"allow_failure"`
	State        cikit.JobState `json:"state"`
	Attempt      int            `json:"attempt"`
	QueueNS      int64          `json:"queue_duration_ns"`
	RunNS        int64          `json:"run_duration_ns"`
	Reason       string         `json:"reason,omitempty"`
	Runner       string         `json:"runner,omitempty"`
	ExitCode     *int           `json:"exit_code,omitempty"`
	StartedAt    time.Time      `json:"started_at,omitzero"`
	FinishedAt   time.Time      `json:"finished_at,omitzero"`
	WaitingOn    []string       `json:"waiting_on"`
	Cache        []cacheJSON    `json:"cache"`
	Critical     bool           `json:"critical"`
	Attempts     []jobDetail    `json:"attempts,omitempty"`
}

// detail builds a run's RunDetail with dag.Report.
func (f *fakeAPI) detail(ctx context.Context, id string) (*runDetail, error) {
	run, err := f.store.RunGet(ctx, id)
	if err != nil {
		return nil, err
	}
	jobs, err := f.store.JobList(ctx, id)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	specs := f.specs[id]
	f.mu.Unlock()
	g, err := dag.FromSpecs(specs)
	if err != nil {
		return nil, err
	}
	rep := dag.Report(g, run, jobs, f.clock())
	d := &runDetail{
		runSummary: runSummary{ID: run.ID, Pipeline: run.Pipeline, Branch: run.Branch, SHA: run.SHA, State: run.State,
			CreatedAt: run.CreatedAt, FinishedAt: run.FinishedAt, Duration: int64(rep.Duration)},
		CriticalPath: rep.CriticalPath, CriticalPathNS: int64(rep.CriticalPathDuration), Counts: rep.Counts,
	}
	states := make(map[string]cikit.JobState)
	for _, j := range jobs {
		states[j.ID()] = j.State
	}
	for i, j := range jobs {
		jd := jobJSON(j, rep.Jobs[i])
		jd.Critical = slices.Contains(rep.CriticalPath, j.ID())
		if j.State == cikit.JobPending {
			for _, n := range j.Spec.Needs {
				if !states[n].Terminal() {
					jd.WaitingOn = append(jd.WaitingOn, n)
				}
			}
		}
		d.Jobs = append(d.Jobs, jd)
	}
	return d, nil
}

func jobJSON(j *dag.Job, r dag.JobReport) jobDetail {
	jd := jobDetail{ID: j.ID(), Name: j.Spec.Name, Stage: j.Spec.Stage, Needs: j.Spec.Needs, RunsOn: j.Spec.RunsOn,
		AllowFailure: j.Spec.AllowFailure, State: j.State, Attempt: j.Attempt,
		QueueNS: int64(r.QueueDuration), RunNS: int64(r.RunDuration), Reason: j.Reason, Runner: j.Runner,
		StartedAt: j.StartedAt, FinishedAt: j.FinishedAt, WaitingOn: []string{}, Cache: []cacheJSON{}}
	if j.State.Terminal() && !j.StartedAt.IsZero() {
		jd.ExitCode = &j.ExitCode
	}
	for _, c := range j.Spec.Caches {
		jd.Cache = append(jd.Cache, cacheJSON{Key: c.Key, Paths: c.Paths})
	}
	return jd
}

func (f *fakeAPI) list(w http.ResponseWriter, r *http.Request) {
	limit, err := strconv.Atoi(r.URL.Query().Get("limit"))
	if err != nil || limit <= 0 {
		limit = 20
	}
	f.mu.Lock()
	ids := slices.Clone(f.runs)
	f.mu.Unlock()
	slices.Reverse(ids)
	if before := r.URL.Query().Get("before"); before != "" {
		i := slices.Index(ids, before)
		if i < 0 {
			writeError(w, http.StatusBadRequest, fmt.Errorf("unknown cursor %q", before))
			return
		}
		ids = ids[i+1:]
	}
	page := struct {
		Runs []runSummary `json:"runs"`
		Next string       `json:"next,omitempty"`
	}{Runs: []runSummary{}}
	for i, id := range ids {
		if i == limit {
			page.Next = ids[i-1]
			break
		}
		d, err := f.detail(r.Context(), id)
		if err != nil {
			writeError(w, http.StatusInternalServerError, err)
			return
		}
		page.Runs = append(page.Runs, d.runSummary)
	}
	writeJSON(w, http.StatusOK, page)
}

func (f *fakeAPI) run(w http.ResponseWriter, r *http.Request) {
	d, err := f.detail(r.Context(), r.PathValue("run"))
	if err != nil {
		writeError(w, http.StatusNotFound, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (f *fakeAPI) job(w http.ResponseWriter, r *http.Request) {
	d, err := f.detail(r.Context(), r.PathValue("run"))
	if err != nil {
		writeError(w, http.StatusNotFound, err)
		return
	}
	i := slices.IndexFunc(d.Jobs, func(j jobDetail) bool { return j.ID == r.PathValue("job") })
	if i < 0 {
		writeError(w, http.StatusNotFound, errors.New("no such job"))
		return
	}
	jd := d.Jobs[i]
	past, err := f.store.JobAttempts(r.Context(), d.ID, jd.ID)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	for _, a := range past {
		jd.Attempts = append(jd.Attempts, jobJSON(a, dag.JobReport{}))
	}
	writeJSON(w, http.StatusOK, jd)
}

func (f *fakeAPI) act(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.posts = append(f.posts, r.URL.Path)
	refuse := f.failPost
	f.failPost = ""
	f.mu.Unlock()
	if refuse != "" {
		writeError(w, http.StatusConflict, errors.New(refuse))
		return
	}
	run := r.PathValue("run")
	var err error
	if path := r.URL.Path; path[len(path)-len("cancel"):] == "cancel" {
		_, err = f.store.RunCancel(r.Context(), run)
	} else {
		_, err = f.store.RunRetryFailed(r.Context(), run)
	}
	switch {
	case errors.Is(err, cikit.ErrNotFound):
		writeError(w, http.StatusNotFound, err)
		return
	case errors.Is(err, dag.ErrRunNotFinished):
		writeError(w, http.StatusConflict, err)
		return
	case err != nil:
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	d, err := f.detail(r.Context(), run)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, http.StatusAccepted, d)
}

func (f *fakeAPI) why(w http.ResponseWriter, r *http.Request) {
	j, err := f.store.JobGet(r.Context(), r.PathValue("run"), r.PathValue("job"))
	if err != nil {
		writeError(w, http.StatusNotFound, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"run_id": j.RunID, "job_id": j.ID(), "state": j.State,
		"code": "no_runner", "message": "no idle runner has the labels linux", "pool": "linux", "eta_ns": int64(30 * time.Second)})
}

// fakeLogOf returns the log of a job's attempt 1, nil until it begins.
func (f *fakeAPI) fakeLogOf(r *http.Request) *fakeLog {
	if a := r.URL.Query().Get("attempt"); a != "" && a != "1" {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.logs[[2]string{r.PathValue("run"), r.PathValue("job")}]
}

func (f *fakeAPI) log(w http.ResponseWriter, r *http.Request) {
	l := f.fakeLogOf(r)
	if l == nil {
		writeError(w, http.StatusNotFound, errors.New("the log has not begun"))
		return
	}
	f.mu.Lock()
	body := slices.Clone(l.buf)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write(body)
}

// follow streams a log in the API's event format, from the offset the
// query or the Last-Event-ID header gives.
func (f *fakeAPI) follow(w http.ResponseWriter, r *http.Request) {
	l := f.fakeLogOf(r)
	f.mu.Lock()
	f.followReqs++
	f.lastIDs = append(f.lastIDs, r.Header.Get("Last-Event-ID"))
	drop := f.dropOnce
	f.mu.Unlock()
	if l == nil {
		writeError(w, http.StatusNotFound, errors.New("the log has not begun"))
		return
	}
	offset := 0
	for _, v := range []string{r.URL.Query().Get("offset"), r.Header.Get("Last-Event-ID")} {
		if n, err := strconv.Atoi(v); err == nil {
			offset = n
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	rc := http.NewResponseController(w)
	// A short reconnection delay, so the test's dropped stream resumes
	// soon.
	fmt.Fprint(w, "retry: 100\n: ping\n\n")
	_ = rc.Flush()
	for {
		f.mu.Lock()
		data := slices.Clone(l.buf[min(offset, len(l.buf)):])
		done, changed := l.done, l.changed
		f.mu.Unlock()
		if len(data) > 0 {
			chunk, _ := json.Marshal(map[string]any{"step": 0, "offset": offset, "data": base64.StdEncoding.EncodeToString(data)})
			offset += len(data)
			fmt.Fprintf(w, "id: %d\nevent: log\ndata: %s\n\n", offset, chunk)
			if err := rc.Flush(); err != nil {
				return
			}
			if drop {
				f.mu.Lock()
				f.dropOnce = false
				f.mu.Unlock()
				return
			}
			continue
		}
		if done {
			fmt.Fprintf(w, "id: %d\nevent: end\ndata: {\"complete\":true,\"bytes\":%d}\n\n", offset, offset)
			_ = rc.Flush()
			return
		}
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		}
	}
}
