package api_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/artifacts"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/logs"
	"github.com/cikit/cikit/reference/api"
	"github.com/cikit/cikit/reference/auth"
	"github.com/cikit/cikit/secrets"
)

// clock stands still until set.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// at sets the clock to 10:mm:ss on the fixture's day.
func (c *clock) at(mm, ss int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = time.Date(2026, 3, 2, 10, mm, ss, 0, time.UTC)
}

// fixture is an API over a memory store and a log hub whose clocks stand
// still, so that every answer is exact.
type fixture struct {
	clock *clock
	store *dag.MemoryStore
	hub   *logs.Hub
	api   *api.API
	// h serves api, as the fixture's admin when a request has no
	// Authorization; access is the API's auth.Service and admin the
	// secret of its bootstrap admin token.
	h      http.Handler
	access *auth.Service
	admin  string
	// reader is the secret of a token of service account "viewer", who
	// may read acme's repositories (documented only).
	reader string
	// tokens are the secrets of the tokens of the people decide made,
	// by login.
	tokens map[string]string

	mu         sync.Mutex
	dispatched []*dag.TransitionResult
}

// fanOut is build -> [unit, lint] -> package.
func fanOut() []*cikit.JobSpec {
	step := []cikit.Step{{Name: "run", Run: "make"}}
	return []*cikit.JobSpec{
		{ID: "build", Name: "build", Stage: "build", RunsOn: []string{"linux"}, Steps: step,
			Caches: []cikit.Cache{{Key: "go-mod", Paths: []string{"/go/pkg/mod"}}}},
		{ID: "unit", Name: "unit tests", Stage: "test", Needs: []string{"build"}, RunsOn: []string{"linux"}, Steps: step},
		{ID: "lint", Name: "lint", Stage: "test", Needs: []string{"build"}, AllowFailure: true, Steps: step},
		{ID: "package", Name: "package", Stage: "release", Needs: []string{"unit", "lint"}, RunsOn: []string{"linux"}, Steps: step},
	}
}

// newFixture returns an API with cfg's optional parts over an empty
// store; Runs, Logs, Now and Logger are the fixture's, Why is
// whyFixture's and Dispatch records its results when cfg has none.
func newFixture(t *testing.T, cfg api.Config) *fixture {
	t.Helper()
	f := &fixture{clock: &clock{}}
	f.clock.at(0, 0)
	n := 0
	f.store = dag.NewMemoryStore(dag.MemoryConfig{Now: f.clock.now, NewID: func() string { n++; return fmt.Sprintf("run-%d", n) }})
	hub, err := logs.NewHub(logs.Config{Sink: &logs.MemorySink{}, Segments: &logs.MemorySegmentStore{}, Now: f.clock.now,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	f.hub = hub
	cfg.Runs, cfg.Logs, cfg.Now, cfg.Logger = f.store, f.hub, f.clock.now, slog.New(slog.DiscardHandler)
	if cfg.Why == nil {
		cfg.Why = whyFixture(f.store)
	}
	if cfg.Dispatch == nil {
		cfg.Dispatch = func(_ context.Context, results ...*dag.TransitionResult) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.dispatched = append(f.dispatched, results...)
		}
	}
	if cfg.Access == nil {
		f.access, f.admin = newAccess(t)
		cfg.Access = f.access
	}
	f.api, err = api.New(cfg)
	require.NoError(t, err)
	f.h = asUser(f.api, f.admin)
	return f
}

// dispatchedResults returns what Dispatch was called with so far.
func (f *fixture) dispatchedResults() []*dag.TransitionResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*dag.TransitionResult(nil), f.dispatched...)
}

// create creates a run of fanOut at 10:mm:ss.
func (f *fixture) create(t *testing.T, mm, ss int, branch, sha string) *dag.Run {
	t.Helper()
	f.clock.at(mm, ss)
	run, err := f.store.RunCreate(context.Background(), &dag.RunCreateParams{Jobs: fanOut(), Pipeline: "acme/api:.cikit.yml",
		Branch: branch, SHA: sha, Supersede: dag.SupersedeNever})
	require.NoError(t, err)
	return run
}

// start queues job at 10:mm:ss and starts it on runner a second later.
func (f *fixture) start(t *testing.T, run *dag.Run, job, runner string, mm, ss int) {
	t.Helper()
	ctx := context.Background()
	j, err := f.store.JobGet(ctx, run.ID, job)
	require.NoError(t, err)
	p := &dag.JobTransitionParams{RunID: run.ID, JobID: job, Attempt: j.Attempt, Runner: runner}
	f.clock.at(mm, ss)
	_, err = f.store.JobQueue(ctx, p)
	require.NoError(t, err)
	f.clock.at(mm, ss+1)
	_, err = f.store.JobStart(ctx, p)
	require.NoError(t, err)
}

// complete ends a RUNNING job at 10:mm:ss.
func (f *fixture) complete(t *testing.T, run *dag.Run, job string, outcome cikit.JobState, exit, mm, ss int) {
	t.Helper()
	f.completeWith(t, run, job, outcome, exit, mm, ss, nil)
}

// completeWith ends a RUNNING job at 10:mm:ss with what its executor
// reported.
func (f *fixture) completeWith(t *testing.T, run *dag.Run, job string, outcome cikit.JobState, exit, mm, ss int, res *dag.JobResult) {
	t.Helper()
	ctx := context.Background()
	j, err := f.store.JobGet(ctx, run.ID, job)
	require.NoError(t, err)
	f.clock.at(mm, ss)
	reason := ""
	if exit != 0 {
		reason = fmt.Sprintf("step run exited with %d", exit)
	}
	_, err = f.store.JobComplete(ctx, &dag.JobCompleteParams{RunID: run.ID, JobID: job, Attempt: j.Attempt, Outcome: outcome, ExitCode: exit, Reason: reason, Result: res})
	require.NoError(t, err)
}

// log appends text to the log of attempt 1 of job, as step 0.
func (f *fixture) log(t *testing.T, run *dag.Run, job string, offset int, text string) {
	t.Helper()
	_, err := f.hub.Append(context.Background(), &logs.Chunk{Key: logs.Key{RunID: run.ID, JobID: job, Attempt: 1}, Offset: int64(offset), Data: []byte(text)})
	require.NoError(t, err)
}

// finishLog finishes the log of attempt 1 of job, whose text is all.
func (f *fixture) finishLog(t *testing.T, run *dag.Run, job, all string) {
	t.Helper()
	sum := sha256.Sum256([]byte(all))
	_, err := f.hub.Finish(context.Background(), logs.Key{RunID: run.ID, JobID: job, Attempt: 1},
		logs.FinishParams{TotalBytes: int64(len(all)), SHA256: hex.EncodeToString(sum[:])})
	require.NoError(t, err)
}

// Log texts of the documented fixture.
const (
	buildLog = "go build ./...\nok\n"
	unitLog  = "=== RUN   TestAdd\n--- PASS: TestAdd (0.00s)\n"
)

// documented builds the state docs/api.md shows, at 10:05:00:
//
//   - run-1 on main: build and lint succeeded, unit runs (with log
//     bytes), package waits for unit;
//   - run-2 on feature: build failed, the rest skipped: the run failed.
//
// Build restored its cache (an exact hit) and uploaded one artifact,
// dist, which docArtifacts lists unless cfg has Artifacts.
func documented(t *testing.T, cfg api.Config) *fixture {
	t.Helper()
	if cfg.Artifacts == nil {
		cfg.Artifacts = docArtifacts{}
	}
	if cfg.Secrets == nil {
		kr, err := secrets.NewKeyring(secrets.Key{ID: "doc", Secret: make([]byte, secrets.KeyBytes)})
		require.NoError(t, err)
		cfg.Secrets = secrets.NewMemoryStore(kr)
	}
	f := newFixture(t, cfg)
	r1 := f.create(t, 0, 0, "main", "4f2a9c1")
	f.start(t, r1, "build", "runner-7", 0, 1)
	f.log(t, r1, "build", 0, buildLog)
	f.completeWith(t, r1, "build", cikit.JobSucceeded, 0, 0, 32, &dag.JobResult{Caches: []cikit.CacheReport{{
		Key: "go-mod", Hit: true, MatchedKey: "go-mod", Exact: true, RestoredInMS: 840, Size: 52428800, Note: "exact hit"}}})
	f.finishLog(t, r1, "build", buildLog)
	f.start(t, r1, "lint", "runner-8", 0, 33)
	f.start(t, r1, "unit", "runner-7", 0, 40)
	f.complete(t, r1, "lint", cikit.JobSucceeded, 0, 0, 50)
	f.log(t, r1, "unit", 0, unitLog)

	r2 := f.create(t, 2, 0, "feature", "9b8e7d6")
	f.start(t, r2, "build", "runner-8", 2, 1)
	f.complete(t, r2, "build", cikit.JobFailed, 2, 2, 20)
	f.clock.at(5, 0)
	f.reader = f.tokenWith(t, "viewer", auth.Binding{Role: auth.RoleRead, Org: "acme"})
	return f
}

// docArtifacts lists the one artifact of the documented fixture: dist,
// which build of run-1 uploaded at 10:00:31, kept 30 days.
type docArtifacts struct{}

func (docArtifacts) RunArtifacts(_ context.Context, runID string) ([]artifacts.Artifact, error) {
	if runID != "run-1" {
		return nil, nil
	}
	at := time.Date(2026, 3, 2, 10, 0, 31, 0, time.UTC)
	return []artifacts.Artifact{{ID: "art-1", RunID: "run-1", JobID: "build", Attempt: 1, Name: "dist", Type: "archive",
		Size: 1048576, SHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", Files: 3,
		BlobKey: "artifacts/acme%2Fapi/run-1/build/1/u1", CreatedAt: at, ExpiresAt: at.AddDate(0, 0, 30),
		Download: &artifacts.Request{Method: "GET", URL: "https://blobs.example/artifacts/acme%2Fapi/run-1/build/1/u1?sig=doc"}}}, nil
}

// whyFixture answers like fleet.Manager.Why for a job of store: a
// waiting job waits for pool "linux" to scale up, with an ETA of 45s;
// any other is not waiting.
func whyFixture(store dag.Store) func(ctx context.Context, runID, jobID string) (*fleet.WaitReason, error) {
	return func(ctx context.Context, runID, jobID string) (*fleet.WaitReason, error) {
		j, err := store.JobGet(ctx, runID, jobID)
		if err != nil {
			return nil, err
		}
		w := &fleet.WaitReason{RunID: runID, JobID: jobID, State: j.State}
		if j.State != cikit.JobReady && j.State != cikit.JobQueued {
			w.Code, w.Message = fleet.WaitNotWaiting, fmt.Sprintf("the job is %s, not waiting for a runner", j.State)
			return w, nil
		}
		w.Code, w.Pool, w.ETA, w.ETAKnown = fleet.WaitScalingUp, "linux", 45*time.Second, true
		w.Message = "pool linux is starting a runner for the job"
		return w, nil
	}
}

// do serves one request and returns the recorder.
func (f *fixture) do(t *testing.T, method, target string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), method, target, strings.NewReader("")))
	return rec
}

// run returns a run of the store.
func (f *fixture) run(t *testing.T, id string) *dag.Run {
	t.Helper()
	run, err := f.store.RunGet(context.Background(), id)
	require.NoError(t, err)
	return run
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// newAccess returns a real auth.Service over a memory store and the
// secret of its bootstrap admin's token.
func newAccess(t testing.TB) (*auth.Service, string) {
	t.Helper()
	s, err := auth.New(auth.Config{Store: auth.NewMemoryStore(), Logger: discard()})
	require.NoError(t, err)
	secret, created, err := s.Bootstrap(context.Background())
	require.NoError(t, err)
	require.True(t, created)
	return s, secret
}

// tokenWith creates service account login with bindings (their User
// is set) and returns the secret of a token of it.
func (f *fixture) tokenWith(t *testing.T, login string, bindings ...auth.Binding) string {
	t.Helper()
	ctx := context.Background()
	admin := f.principal(t, f.admin)
	_, err := f.access.ServiceAccountCreate(ctx, admin, login, "")
	require.NoError(t, err)
	for _, b := range bindings {
		b.User = login
		require.NoError(t, f.access.BindingGrant(ctx, admin, b))
	}
	nt, err := f.access.TokenCreate(ctx, admin, auth.TokenParams{User: login, Name: "test"})
	require.NoError(t, err)
	return nt.Secret
}

// principal authenticates token.
func (f *fixture) principal(t *testing.T, token string) *auth.Principal {
	t.Helper()
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	p, err := f.access.Authenticate(req)
	require.NoError(t, err)
	return p
}

// asUser serves h with Authorization: Bearer token on requests that
// have no Authorization header.
func asUser(h http.Handler, token string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		h.ServeHTTP(w, r)
	})
}
