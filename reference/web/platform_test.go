package web_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/artifacts"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/logs"
	"github.com/cikit/cikit/reference/api"
	"github.com/cikit/cikit/reference/approvals"
	"github.com/cikit/cikit/reference/auth"
	"github.com/cikit/cikit/reference/web"
)

// platform serves the UI and the real JSON API (package reference/api)
// over a dag.MemoryStore and a logs.Hub, whose clock only moves when the
// test says so. The test moves jobs on in the store and writes their logs
// into the Hub while the page is open. In front of the API sits a fault
// injector, which can refuse the next POST and cut the first log stream
// that sends an event.
type platform struct {
	t     *testing.T
	store *dag.MemoryStore
	hub   *logs.Hub
	url   string

	clockMu sync.Mutex
	now     time.Time

	mu   sync.Mutex
	seq  int
	logs map[logs.Key]*logWriter
	// refuse, when set, makes the next POST answer 409 with it as the
	// error, without reaching the API; refused holds the paths of the
	// POSTs refused so.
	refuse  string
	refused []string
	// dropOnce makes the first follow stream that sends a log event end
	// after it, without an end event, so that the browser must resume it.
	dropOnce bool
	lastIDs  []string // Last-Event-ID headers of the follow requests
	// arts are the runs' artifacts, whose downloads the platform serves
	// at /blobs/{id} with blobs[id].
	arts  map[string][]artifacts.Artifact
	blobs map[string]string
	// login is who is signed in, "" for nobody; noSignIn makes the
	// platform one without sign-in, whose /api/v1/me is not there.
	// csrf holds the X-CSRF-Token headers of the POSTs.
	login    string
	noSignIn bool
	csrf     []string
	// access is the API's; adminToken its first admin's, which the
	// browser's requests carry when nobody is signed in, and tokens
	// those of the people signIn made.
	access     *auth.Service
	adminToken string
	tokens     map[string]string
}

// logWriter is the runner's side of a log: where its next chunk starts
// and the digest of its bytes so far.
type logWriter struct {
	seq    int64
	offset int64
	sum    hash.Hash
}

func newPlatform(t *testing.T) *platform {
	p := &platform{t: t, now: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC), logs: make(map[logs.Key]*logWriter)}
	quiet := slog.New(slog.DiscardHandler)
	p.store = dag.NewMemoryStore(dag.MemoryConfig{
		Now: p.clock,
		NewID: func() string {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.seq++
			return fmt.Sprintf("run-%d", p.seq)
		},
	})
	hub, err := logs.NewHub(logs.Config{Sink: &logs.MemorySink{}, Segments: &logs.MemorySegmentStore{}, Now: p.clock, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	p.hub = hub
	// The browser is the platform's admin, or the person signed in
	// (signIn): its requests get their token here, as a signed-in
	// session's would get its cookie.
	access, err := auth.New(auth.Config{Store: auth.NewMemoryStore(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	token, _, err := access.Bootstrap(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p.access, p.adminToken = access, token
	a, err := api.New(api.Config{Runs: p.store, Logs: hub, Why: p.why, Now: p.clock, Logger: quiet, Artifacts: p, Access: access,
		Approvals: &approvals.MemoryStore{}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", p.faults(p.session(a)))
	mux.HandleFunc("GET /api/v1/me", p.me)
	mux.Handle("/", web.Handler())
	mux.HandleFunc("GET /blobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		b, ok := p.blobs[r.PathValue("id")]
		p.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(b))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		a.CloseFollowers()
		srv.Close()
	})
	p.url = srv.URL
	return p
}

// signIn signs login in (the session of every browser of the test);
// "" signs nobody in.
func (p *platform) signIn(login string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.login = login
	if login == "" || p.tokens[login] != "" {
		return
	}
	// A person with the approve role everywhere, whose API token stands
	// for the session.
	ctx := context.Background()
	req := httptest.NewRequest(http.MethodGet, "/api/v1/me", nil)
	req.Header.Set("Authorization", "Bearer "+p.adminToken)
	admin, err := p.access.Authenticate(req)
	if err == nil {
		_, err = p.access.ServiceAccountCreate(ctx, admin, login, login)
	}
	if err == nil {
		err = p.access.BindingGrant(ctx, admin, auth.Binding{User: login, Role: auth.RoleApprove})
	}
	var tok *auth.NewToken
	if err == nil {
		tok, err = p.access.TokenCreate(ctx, admin, auth.TokenParams{User: login, Name: "browser"})
	}
	if err != nil {
		p.t.Fatalf("sign %s in: %v", login, err)
	}
	if p.tokens == nil {
		p.tokens = map[string]string{}
	}
	p.tokens[login] = tok.Secret
}

// withoutSignIn makes the platform one without sign-in.
func (p *platform) withoutSignIn() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.noSignIn = true
}

// csrfTokens returns the X-CSRF-Token headers of the POSTs so far.
func (p *platform) csrfTokens() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.csrf)
}

// me answers as the authentication's GET /api/v1/me: the signed-in
// login and the session's CSRF token, 401 for nobody, 404 on a platform
// without sign-in.
func (p *platform) me(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	login, none := p.login, p.noSignIn
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case none:
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "no route GET " + r.URL.Path})
	case login == "":
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "not signed in"})
	default:
		_ = json.NewEncoder(w).Encode(map[string]string{"login": login, "csrf_token": "csrf-" + login})
	}
}

// session passes the signed-in person to the API, as the authentication
// middleware does, refusing a POST without the session's CSRF token.
func (p *platform) session(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		login, token := p.login, p.adminToken
		if login != "" {
			token = p.tokens[login]
		}
		if r.Method == http.MethodPost {
			p.csrf = append(p.csrf, r.Header.Get("X-CSRF-Token"))
		}
		p.mu.Unlock()
		if login != "" && r.Method == http.MethodPost && r.Header.Get("X-CSRF-Token") != "csrf-"+login {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "missing or wrong CSRF token"})
			return
		}
		r.Header.Set("Authorization", "Bearer "+token)
		next.ServeHTTP(w, r)
	})
}

// addArtifact gives job of run an artifact named name holding content,
// downloaded from the platform's /blobs/.
func (p *platform) addArtifact(run, job, name, content string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.arts == nil {
		p.arts, p.blobs = map[string][]artifacts.Artifact{}, map[string]string{}
	}
	id := fmt.Sprintf("art-%d", len(p.blobs)+1)
	sum := sha256.Sum256([]byte(content))
	p.blobs[id] = content
	p.arts[run] = append(p.arts[run], artifacts.Artifact{ID: id, RunID: run, JobID: job, Attempt: 1, Name: name, Type: "archive",
		Size: int64(len(content)), SHA256: hex.EncodeToString(sum[:]), CreatedAt: p.clock(), ExpiresAt: p.clock().AddDate(0, 0, 30),
		Download: &artifacts.Request{Method: http.MethodGet, URL: p.url + "/blobs/" + id}})
}

// RunArtifacts lists the artifacts addArtifact gave run's jobs.
func (p *platform) RunArtifacts(_ context.Context, runID string) ([]artifacts.Artifact, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.arts[runID]), nil
}

func (p *platform) clock() time.Time {
	p.clockMu.Lock()
	defer p.clockMu.Unlock()
	return p.now
}

// at sets the clock to minute m of the test's day.
func (p *platform) at(m int) {
	p.clockMu.Lock()
	defer p.clockMu.Unlock()
	p.now = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC).Add(time.Duration(m) * time.Minute)
}

// why answers as fleet.Manager.Why does when a pool is starting a runner
// for a waiting job; a job that does not wait for a runner is not
// waiting.
func (p *platform) why(ctx context.Context, runID, jobID string) (*fleet.WaitReason, error) {
	j, err := p.store.JobGet(ctx, runID, jobID)
	if err != nil {
		return nil, err
	}
	w := &fleet.WaitReason{RunID: runID, JobID: jobID, State: j.State}
	if j.State != cikit.JobReady && j.State != cikit.JobQueued {
		w.Code, w.Message = fleet.WaitNotWaiting, fmt.Sprintf("the job is %s, not waiting for a runner", j.State)
		return w, nil
	}
	labels := strings.Join(j.Spec.RunsOn, " ")
	w.Code, w.Pool, w.ETA, w.ETAKnown = fleet.WaitScalingUp, labels, 30*time.Second, true
	w.Message = "no idle runner has the labels " + labels
	return w, nil
}

// create stores a run of specs.
func (p *platform) create(pipeline string, specs ...*cikit.JobSpec) string {
	p.t.Helper()
	run, err := p.store.RunCreate(context.Background(), &dag.RunCreateParams{
		Jobs: specs, Pipeline: pipeline, Branch: "main", SHA: "0123456789abcdef0123456789abcdef01234567"})
	if err != nil {
		p.t.Fatal(err)
	}
	return run.ID
}

// queue, start, succeed and fail move a job's current attempt on.
func (p *platform) queue(run, job string) { p.apply(dag.EventQueue, run, job, "") }
func (p *platform) start(run, job string) { p.apply(dag.EventStart, run, job, "") }
func (p *platform) succeed(run, job string) {
	p.apply(dag.EventComplete, run, job, cikit.JobSucceeded)
}
func (p *platform) fail(run, job string) { p.apply(dag.EventComplete, run, job, cikit.JobFailed) }

// succeedWith completes a job as succeeded with what its executor
// reported beyond the outcome.
func (p *platform) succeedWith(run, job string, res *dag.JobResult) {
	p.t.Helper()
	p.applyResult(dag.EventComplete, run, job, cikit.JobSucceeded, res)
}

func (p *platform) apply(kind dag.EventKind, run, job string, outcome cikit.JobState) {
	p.t.Helper()
	p.applyResult(kind, run, job, outcome, nil)
}

func (p *platform) applyResult(kind dag.EventKind, run, job string, outcome cikit.JobState, result *dag.JobResult) {
	p.t.Helper()
	ctx := context.Background()
	j, err := p.store.JobGet(ctx, run, job)
	if err != nil {
		p.t.Fatal(err)
	}
	ev := &dag.JobEvent{Kind: kind, RunID: run, JobID: job, Attempt: j.Attempt, Runner: "runner-7", Outcome: outcome, Result: result}
	if outcome == cikit.JobFailed {
		ev.ExitCode, ev.Reason, ev.FailureClass = 1, "step 1 exited 1", cikit.FailureScript
	}
	res, err := p.store.JobApply(ctx, []*dag.JobEvent{ev})
	if err != nil {
		p.t.Fatal(err)
	}
	if res[0].Err != nil {
		p.t.Fatalf("%v %s/%s: %v", kind, run, job, res[0].Err)
	}
}

// jobState returns the state of a job's current attempt in the store.
func (p *platform) jobState(run, job string) (cikit.JobState, error) {
	j, err := p.store.JobGet(context.Background(), run, job)
	if err != nil {
		return "", err
	}
	return j.State, nil
}

// logKey names the log of the current attempt of job.
func (p *platform) logKey(run, job string) logs.Key {
	p.t.Helper()
	j, err := p.store.JobGet(context.Background(), run, job)
	if err != nil {
		p.t.Fatal(err)
	}
	return logs.Key{RunID: run, JobID: job, Attempt: j.Attempt}
}

// appendLog sends data as the next chunk of the log of job's current
// attempt, as a runner does, beginning the log.
func (p *platform) appendLog(run, job, data string) {
	p.t.Helper()
	key := p.logKey(run, job)
	p.mu.Lock()
	w := p.logs[key]
	if w == nil {
		w = &logWriter{sum: sha256.New()}
		p.logs[key] = w
	}
	c := &logs.Chunk{Key: key, Seq: w.seq, Offset: w.offset, Data: []byte(data)}
	w.seq++
	w.offset += int64(len(data))
	w.sum.Write(c.Data)
	p.mu.Unlock()
	if _, err := p.hub.Append(context.Background(), c); err != nil {
		p.t.Fatal(err)
	}
}

// endLog finishes the log of job's current attempt with the totals of
// what appendLog sent; the Hub must find it complete.
func (p *platform) endLog(run, job string) {
	p.t.Helper()
	key := p.logKey(run, job)
	p.mu.Lock()
	w := p.logs[key]
	p.mu.Unlock()
	if w == nil {
		p.t.Fatalf("the log of %s has not begun", key)
	}
	fp := logs.FinishParams{TotalBytes: w.offset, SHA256: hex.EncodeToString(w.sum.Sum(nil))}
	res, err := p.hub.Finish(context.Background(), key, fp)
	if err != nil {
		p.t.Fatal(err)
	}
	if !res.Complete {
		p.t.Fatalf("the Hub finished the log of %s incomplete: %+v", key, res)
	}
}

// getJSON reads path of the API into v.
func (p *platform) getJSON(path string, v any) error {
	res, err := http.Get(p.url + path)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, res.Status)
	}
	return json.NewDecoder(res.Body).Decode(v)
}

// refuseNextPost makes the next POST to the API answer 409 with msg.
func (p *platform) refuseNextPost(msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = msg
}

// refusedPosts returns the paths of the POSTs refuseNextPost refused.
func (p *platform) refusedPosts() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.refused)
}

// dropFirstStream makes the first follow stream that sends a log event
// end right after it.
func (p *platform) dropFirstStream() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropOnce = true
}

// followIDs returns the Last-Event-ID headers of the follow requests so
// far.
func (p *platform) followIDs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.lastIDs)
}

// faults is the fault injector in front of the API.
func (p *platform) faults(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			p.mu.Lock()
			msg := p.refuse
			p.refuse = ""
			if msg != "" {
				p.refused = append(p.refused, r.URL.Path)
			}
			p.mu.Unlock()
			if msg != "" {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusConflict)
				_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
				return
			}
		}
		if strings.HasSuffix(r.URL.Path, "/log/follow") {
			p.mu.Lock()
			p.lastIDs = append(p.lastIDs, r.Header.Get("Last-Event-ID"))
			drop := p.dropOnce
			p.mu.Unlock()
			if drop {
				ctx, cancel := context.WithCancel(r.Context())
				defer cancel()
				r = r.WithContext(ctx)
				w = &cutter{ResponseWriter: w, p: p, cancel: cancel}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// errCut is what a cut stream answers its writer.
var errCut = errors.New("the test cut the stream")

// cutter passes a follow stream through until its first log event, then,
// if the platform's dropOnce is still set, clears it and ends the stream:
// it cancels the request, so that the API stops, and writes nothing more.
type cutter struct {
	http.ResponseWriter
	p      *platform
	cancel context.CancelFunc
	cut    bool
}

func (c *cutter) Write(b []byte) (int, error) {
	if c.cut {
		return 0, errCut
	}
	n, err := c.ResponseWriter.Write(b)
	if err != nil || !bytes.Contains(b, []byte("\nevent: log\n")) {
		return n, err
	}
	c.p.mu.Lock()
	c.cut = c.p.dropOnce
	c.p.dropOnce = false
	c.p.mu.Unlock()
	if c.cut {
		_ = http.NewResponseController(c.ResponseWriter).Flush()
		c.cancel()
	}
	return n, nil
}

// FlushError is for http.ResponseController.
func (c *cutter) FlushError() error {
	if c.cut {
		return errCut
	}
	return http.NewResponseController(c.ResponseWriter).Flush()
}

// Unwrap is for http.ResponseController.
func (c *cutter) Unwrap() http.ResponseWriter { return c.ResponseWriter }
